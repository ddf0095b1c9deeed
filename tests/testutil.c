/*
 * tests/testutil.c - CUnit runners (plain and MPI) and numeric helpers.
 */
#include "testutil.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <ftw.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0, g_world = 1;

int zt_rank(void) { return g_rank; }
int zt_world(void) { return g_world; }

static int register_suite(const char *suite, const zt_test_t *tests, int (*setup)(void),
                          int (*teardown)(void)) {
  if (CU_initialize_registry() != CUE_SUCCESS) return -1;
  CU_pSuite s = CU_add_suite(suite, setup, teardown);
  if (!s) return -1;
  for (const zt_test_t *t = tests; t->name; t++)
    if (!CU_add_test(s, t->name, t->fn)) return -1;
  return 0;
}

int zt_run(const char *suite, const zt_test_t *tests) {
  if (register_suite(suite, tests, NULL, NULL)) {
    fprintf(stderr, "CUnit registry error: %s\n", CU_get_error_msg());
    return 1;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

int zt_run_mpi(int argc, char **argv, const char *suite, const zt_test_t *tests, int min_ranks,
               int max_ranks) {
  return zt_run_mpi_ex(argc, argv, suite, tests, min_ranks, max_ranks, NULL, NULL);
}

static char g_not_checked[1024];

void zt_not_checked(const char *what) {
  size_t used = strlen(g_not_checked);
  snprintf(g_not_checked + used, sizeof g_not_checked - used, "%s%s", used ? "; " : "", what);
}

int zt_run_mpi_ex(int argc, char **argv, const char *suite, const zt_test_t *tests, int min_ranks,
                  int max_ranks, int (*setup)(void), int (*teardown)(void)) {
  (void)argc, (void)argv;
  int provided;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world);
  if ((min_ranks && g_world < min_ranks) || (max_ranks && g_world > max_ranks)) {
    if (g_rank == 0)
      printf("%s: needs %d..%d ranks, have %d: skipped\n", suite, min_ranks, max_ranks, g_world);
    MPI_Finalize();
    return ZT_SKIP_CODE;
  }
  if (register_suite(suite, tests, setup, teardown)) {
    fprintf(stderr, "CUnit registry error: %s\n", CU_get_error_msg());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* Rank 0 shows each test; every rank reports its own failures. */
  CU_basic_set_mode(g_rank == 0 ? CU_BRM_VERBOSE : CU_BRM_SILENT);
  CU_basic_run_tests();
  unsigned local[3] = {CU_get_number_of_tests_run(), CU_get_number_of_tests_failed(),
                       CU_get_number_of_failures() + CU_get_number_of_suites_failed()};
  if (g_rank != 0 && local[2]) CU_basic_show_failures(CU_get_failure_list());
  CU_cleanup_registry();
  unsigned sum[3] = {0, 0, 0};
  MPI_Allreduce(local, sum, 3, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    printf(
        "\n%s on %d ranks: %u test runs, %u failed, %u failed assertions (summed over ranks)%s%s\n",
        suite, g_world, sum[0], sum[1], sum[2], g_not_checked[0] ? "; NOT CHECKED: " : "",
        g_not_checked);
  fflush(stdout);
  MPI_Finalize();
  return (sum[1] || sum[2]) ? 1 : 0;
}

zeroc_ctx_t *zt_ctx(int tp, int pp, int hsdp) { return zt_ctx_cp(tp, 1, pp, hsdp); }

zeroc_ctx_t *zt_ctx_cp(int tp, int cp, int pp, int hsdp) {
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CPU;
  cfg.tp = tp;
  cfg.cp = cp;
  cfg.pp = pp;
  cfg.hsdp = hsdp;
  cfg.comm_timeout_s = 120;
  cfg.threads = 1;
  zeroc_ctx_t *ctx = NULL;
  zeroc_result_t r = zeroc_ctx_create(&ctx, &cfg);
  if (r != ZEROC_OK) {
    fprintf(stderr, "[rank %d] zeroc_ctx_create(tp %d, cp %d, pp %d, hsdp %d): %s: %s\n", g_rank,
            tp, cp, pp, hsdp, zeroc_result_name(r), zeroc_last_error(NULL));
    return NULL;
  }
  return ctx;
}

uint64_t zt_rand_u64(uint64_t *s) {
  /* splitmix64: tiny, good enough for test data */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void zt_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
  uint64_t s = seed * 0x2545F4914F6CDD1DULL + 1;
  for (size_t i = 0; i < n; i++) {
    double u = (double)(zt_rand_u64(&s) >> 11) * (1.0 / 9007199254740992.0);
    x[i] = (float)(lo + (hi - lo) * u);
  }
}

void zt_fill_normal(float *x, size_t n, uint64_t seed, float std) {
  uint64_t s = seed * 0x2545F4914F6CDD1DULL + 7;
  for (size_t i = 0; i < n; i++) {
    double u1 = ((double)(zt_rand_u64(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(zt_rand_u64(&s) >> 11) * (1.0 / 9007199254740992.0);
    x[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
  }
}

double zt_rel_err(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  if (den < 1e-300) den = 1e-300;
  return sqrt(num / den);
}

double zt_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > m || d != d) m = d != d ? INFINITY : d;
  }
  return m;
}

char *zt_tempdir(const char *prefix) {
  const char *tmp = getenv("TMPDIR");
  char *path = malloc(4096);
  snprintf(path, 4096, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
  if (!mkdtemp(path)) {
    free(path);
    return NULL;
  }
  return path;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

void zt_rmtree(const char *path) {
  if (path) nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int zt_find_prefixed(const char *prefix, char *out, size_t n) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", prefix);
  char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : prefix;
  if (slash) *slash = 0;
  size_t bl = strlen(base);
  DIR *d = opendir(slash ? dir : ".");
  if (!d) return -1;
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, base, bl) && e->d_name[bl] == '.' && e->d_name[bl + 1]) {
      snprintf(out, n, "%s/%s", slash ? dir : ".", e->d_name);
      found++;
    }
  closedir(d);
  return found == 1 ? 0 : -1;
}
