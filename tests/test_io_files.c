/*
 * tests/test_io_files.c - CRC-32C against published vectors and between its
 * two paths; crash-safe files (a killed writer leaves the old file, a reader
 * racing the writer sees whole versions only); staged directories; mkdir -p
 * and rm -rf.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/crc32c.h"
#include "io/files.h"
#include "testutil.h"

static char *g_dir;

static int exists(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0;
}

/* Reads a whole file into buf (at most cap bytes); -1 when it cannot be opened. */
static long slurp(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - n);
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap) break;
  }
  close(fd);
  return (long)n;
}

/* ---- CRC-32C ------------------------------------------------------------------ */

static void test_crc32c_vectors(void) {
  /* "123456789" is the standard check value; the 32-byte vectors are RFC 3720 B.4. */
  unsigned char zeros[32] = {0}, ones[32], inc[32], dec[32];
  for (int i = 0; i < 32; i++)
    ones[i] = 0xff, inc[i] = (unsigned char)i, dec[i] = (unsigned char)(31 - i);
  uint32_t (*fns[2])(uint32_t, const void *, size_t) = {zeroc__crc32c, zeroc__crc32c_sw};
  for (int f = 0; f < 2; f++) {
    CU_ASSERT_EQUAL(fns[f](0, "123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(fns[f](0, zeros, 32), 0x8A9136AAu);
    CU_ASSERT_EQUAL(fns[f](0, ones, 32), 0x62A8AB43u);
    CU_ASSERT_EQUAL(fns[f](0, inc, 32), 0x46DD794Eu);
    CU_ASSERT_EQUAL(fns[f](0, dec, 32), 0x113FDB5Cu);
    CU_ASSERT_EQUAL(fns[f](0, "", 0), 0u);
  }
  printf("\n    crc32c: hardware path %s\n", zeroc__crc32c_hw() ? "in use" : "not available");
}

static void test_crc32c_chain_and_paths(void) {
  enum { N = 100003 };
  unsigned char *buf = malloc(N + 8);
  uint64_t s = 42;
  for (size_t i = 0; i < N + 8; i++) buf[i] = (unsigned char)zt_rand_u64(&s);
  uint32_t whole = zeroc__crc32c_sw(0, buf, N);
  CU_ASSERT_EQUAL(zeroc__crc32c(0, buf, N), whole);
  for (int trial = 0; trial < 200; trial++) {
    size_t cut = (size_t)(zt_rand_u64(&s) % N);
    uint32_t c = zeroc__crc32c(zeroc__crc32c(0, buf, cut), buf + cut, N - cut);
    ZT_ASSERT_MSG(c == whole, "chained at %zu: %08x, whole %08x", cut, c, whole);
    /* every alignment and short tail through both paths */
    size_t off = (size_t)(zt_rand_u64(&s) % 8), len = (size_t)(zt_rand_u64(&s) % 97);
    CU_ASSERT_EQUAL(zeroc__crc32c(0, buf + off, len), zeroc__crc32c_sw(0, buf + off, len));
  }
  /* a flipped bit changes the checksum */
  buf[N / 2] ^= 4;
  CU_ASSERT_NOT_EQUAL(zeroc__crc32c(0, buf, N), whole);
  buf[N / 2] ^= 4;
  /* the file helper agrees with the buffer */
  char path[4200];
  snprintf(path, sizeof path, "%s/crc.bin", g_dir);
  ZT_OK(zeroc__file_write_atomic(path, buf, N));
  uint32_t fc = 0;
  uint64_t fbytes = 0;
  ZT_OK(zeroc__crc32c_file(path, &fc, &fbytes));
  CU_ASSERT_EQUAL(fc, whole);
  CU_ASSERT_EQUAL(fbytes, N);
  snprintf(path, sizeof path, "%s/no-such-file", g_dir);
  CU_ASSERT_EQUAL(zeroc__crc32c_file(path, &fc, NULL), ZEROC_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "no-such-file"));
  free(buf);
}

/* ---- atomic files ------------------------------------------------------------- */

static void test_atomic_write_and_crash(void) {
  char path[4200], tmp[4300], got[256];
  snprintf(path, sizeof path, "%s/manifest.json", g_dir);
  const char *v1 = "{\"step\": 1}", *v2 = "{\"step\": 2, \"and\": \"more bytes than v1\"}";
  ZT_OK(zeroc__file_write_atomic(path, v1, strlen(v1)));
  long n = slurp(path, got, sizeof got);
  CU_ASSERT(n == (long)strlen(v1) && !memcmp(got, v1, (size_t)n));

  /* A writer killed half-way (a real process, SIGKILLed before it renames)
   * leaves the old file intact and only its own temporary behind. */
  int pipefd[2];
  CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    zeroc__afile_t f = ZEROC_AFILE_INIT;
    if (zeroc__afile_open(&f, path) != ZEROC_OK) _exit(3);
    if (zeroc__afile_write(&f, v2, 10) != ZEROC_OK) _exit(4);
    char c = 'w';
    if (write(pipefd[1], &c, 1) != 1) _exit(5);
    for (;;) pause(); /* the parent kills us here, before commit */
  }
  char c;
  CU_ASSERT_EQUAL(read(pipefd[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  close(pipefd[0]);
  close(pipefd[1]);
  CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  n = slurp(path, got, sizeof got);
  ZT_ASSERT_MSG(n == (long)strlen(v1) && !memcmp(got, v1, (size_t)n),
                "after the killed writer the file holds %ld bytes, not the old version", n);
  char prefix[4300];
  snprintf(prefix, sizeof prefix, "%s.tmp.%ld", path, (long)pid);
  CU_ASSERT_EQUAL(zt_find_prefixed(prefix, tmp, sizeof tmp), 0); /* <pid>.<random> */
  n = slurp(tmp, got, sizeof got);
  CU_ASSERT(n == 10 && !memcmp(got, v2, 10));
  unlink(tmp);

  /* an aborted writer in this process: the same */
  zeroc__afile_t f = ZEROC_AFILE_INIT;
  ZT_OK(zeroc__afile_open(&f, path));
  ZT_OK(zeroc__afile_write(&f, v2, strlen(v2)));
  char mytmp[4300];
  snprintf(mytmp, sizeof mytmp, "%s", f.tmp);
  zeroc__afile_abort(&f);
  CU_ASSERT(!exists(mytmp));
  n = slurp(path, got, sizeof got);
  CU_ASSERT(n == (long)strlen(v1) && !memcmp(got, v1, (size_t)n));

  /* commit replaces it whole, with pwrite for a header filled in last */
  ZT_OK(zeroc__afile_open(&f, path));
  ZT_OK(zeroc__afile_write(&f, v2, strlen(v2)));
  ZT_OK(zeroc__afile_pwrite(&f, "{\"step\": 3", 10, 0));
  ZT_OK(zeroc__afile_commit(&f));
  CU_ASSERT_PTR_NULL(f.tmp);
  n = slurp(path, got, sizeof got);
  CU_ASSERT(n == (long)strlen(v2) && !memcmp(got, "{\"step\": 3, \"and\"", 17));
}

/* A reader racing a writer that replaces the file many times must always see
 * one whole version, never a missing, short or mixed file. */
typedef struct race {
  const char *path;
  atomic_int stop;
  long reads, bad;
} race_t;

#define VA_BYTES 100000
#define VB_BYTES 37000

static void *reader(void *arg) {
  race_t *r = arg;
  char *buf = malloc(VA_BYTES + 16);
  while (!atomic_load(&r->stop)) {
    long n = slurp(r->path, buf, VA_BYTES + 16);
    r->reads++;
    int ok = 0;
    if (n == VA_BYTES) {
      ok = 1;
      for (long i = 0; i < n; i++) ok &= buf[i] == 'a';
    } else if (n == VB_BYTES) {
      ok = 1;
      for (long i = 0; i < n; i++) ok &= buf[i] == 'b';
    }
    if (!ok) r->bad++;
  }
  free(buf);
  return NULL;
}

static void test_atomic_reader_race(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/race.bin", g_dir);
  char *a = malloc(VA_BYTES), *b = malloc(VB_BYTES);
  memset(a, 'a', VA_BYTES);
  memset(b, 'b', VB_BYTES);
  ZT_OK(zeroc__file_write_atomic(path, a, VA_BYTES));
  race_t r = {path, 0, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, reader, &r);
  for (int i = 0; i < 150; i++) {
    ZT_OK(zeroc__file_write_atomic(path, i % 2 ? a : b, i % 2 ? VA_BYTES : VB_BYTES));
  }
  atomic_store(&r.stop, 1);
  pthread_join(th, NULL);
  ZT_ASSERT_MSG(r.bad == 0, "%ld of %ld reads saw a partial, missing or mixed file", r.bad,
                r.reads);
  CU_ASSERT(r.reads > 0);
  free(a);
  free(b);
}

static void test_write_errors(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/no/such/dir/file", g_dir);
  CU_ASSERT_EQUAL(zeroc__file_write_atomic(path, "x", 1), ZEROC_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "no/such/dir/file.tmp."));
  if (access("/dev/full", W_OK) == 0) {
    char big[8192] = {0};
    CU_ASSERT_EQUAL(zeroc__file_write_sync("/dev/full", big, sizeof big), ZEROC_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "No space left on device"));
    CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "/dev/full"));
  }
  /* reads are bounded */
  snprintf(path, sizeof path, "%s/small.txt", g_dir);
  ZT_OK(zeroc__file_write_atomic(path, "0123456789", 10));
  char *buf;
  size_t n;
  ZT_OK(zeroc__file_read(path, 10, &buf, &n));
  CU_ASSERT(n == 10 && buf[10] == 0 && !strcmp(buf, "0123456789"));
  free(buf);
  CU_ASSERT_EQUAL(zeroc__file_read(path, 9, &buf, &n), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "is 10 bytes; at most 9"));
}

/* ---- directories -------------------------------------------------------------- */

/* A shared directory (/tmp): links planted at the names zeroc used to take
 * (<file>.tmp.<pid>, .zeroc-probe.<pid>) never lead a write to another file;
 * temporaries are new files with names nobody can guess. */
static void test_shared_dir_links(void) {
  char victim[4200], path[4200], link1[4300], link2[4300], a[4300], b[4300], got[64];
  snprintf(victim, sizeof victim, "%s/victim", g_dir);
  snprintf(path, sizeof path, "%s/out.safetensors", g_dir);
  ZT_OK(zeroc__file_write_atomic(victim, "precious", 8));
  snprintf(link1, sizeof link1, "%s.tmp.%ld", path, (long)getpid());
  snprintf(link2, sizeof link2, "%s/.zeroc-probe.%ld", g_dir, (long)getpid());
  CU_ASSERT_EQUAL_FATAL(symlink(victim, link1), 0);
  CU_ASSERT_EQUAL_FATAL(symlink(victim, link2), 0);
  ZT_OK(zeroc__dir_check_writable(g_dir, "--save"));
  ZT_OK(zeroc__file_write_atomic(path, "weights", 7));
  long n = slurp(victim, got, sizeof got);
  ZT_ASSERT_MSG(n == 8 && !memcmp(got, "precious", 8), "the linked file now holds %ld bytes", n);
  n = slurp(path, got, sizeof got);
  CU_ASSERT(n == 7 && !memcmp(got, "weights", 7));
  /* a link at the final name is replaced, not followed */
  unlink(path);
  CU_ASSERT_EQUAL_FATAL(symlink(victim, path), 0);
  ZT_OK(zeroc__file_write_atomic(path, "weights", 7));
  struct stat st;
  CU_ASSERT(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
  n = slurp(victim, got, sizeof got);
  CU_ASSERT(n == 8 && !memcmp(got, "precious", 8));
  /* two temporaries of one name and process: different, unguessable tails */
  zeroc__afile_t f = ZEROC_AFILE_INIT, g = ZEROC_AFILE_INIT;
  ZT_OK(zeroc__afile_open(&f, path));
  ZT_OK(zeroc__afile_open(&g, path));
  snprintf(a, sizeof a, "%s", f.tmp);
  snprintf(b, sizeof b, "%s", g.tmp);
  ZT_ASSERT_MSG(strcmp(a, b) && strlen(a) == strlen(link1) + 17 &&
                    !strncmp(a, link1, strlen(link1)),
                "temporaries '%s', '%s'", a, b);
  zeroc__afile_abort(&f);
  zeroc__afile_abort(&g);
  CU_ASSERT(!exists(a) && !exists(b));
  unlink(link1);
  unlink(link2);
  unlink(path);
  unlink(victim);
}

static void test_mkdir_rmtree(void) {
  char p[4200], q[4200], outside[4200];
  snprintf(p, sizeof p, "%s/m/a//b/c/", g_dir);
  ZT_OK(zeroc__mkdir_p(p, 0755));
  snprintf(q, sizeof q, "%s/m/a/b/c", g_dir);
  struct stat st;
  CU_ASSERT(stat(q, &st) == 0 && S_ISDIR(st.st_mode));
  ZT_OK(zeroc__mkdir_p(p, 0755)); /* again: fine */
  snprintf(q, sizeof q, "%s/m/a/file", g_dir);
  ZT_OK(zeroc__file_write_sync(q, "x", 1));
  snprintf(p, sizeof p, "%s/m/a/file/sub", g_dir);
  CU_ASSERT_EQUAL(zeroc__mkdir_p(p, 0755), ZEROC_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "is not a directory"));

  /* rm -rf does not follow a symbolic link out of the tree */
  snprintf(outside, sizeof outside, "%s/outside", g_dir);
  ZT_OK(zeroc__mkdir_p(outside, 0755));
  snprintf(q, sizeof q, "%s/outside/keep", g_dir);
  ZT_OK(zeroc__file_write_sync(q, "k", 1));
  snprintf(p, sizeof p, "%s/m/a/b/link", g_dir);
  CU_ASSERT_EQUAL(symlink(outside, p), 0);
  snprintf(p, sizeof p, "%s/m", g_dir);
  ZT_OK(zeroc__rmtree(p));
  CU_ASSERT(!exists(p));
  CU_ASSERT(exists(q));
  ZT_OK(zeroc__rmtree(p)); /* missing: fine */
}

static void count_entries(const char *dir, int *n) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *f = popen(cmd, "r");
  *n = -1;
  if (f) {
    if (fscanf(f, "%d", n) != 1) *n = -1;
    pclose(f);
  }
}

static void test_dir_stage_publish(void) {
  char final[4200], tmp[4300], file[4400], got[64];
  snprintf(final, sizeof final, "%s/ckpt/step_000010", g_dir);
  /* a crashed earlier attempt left a stale staging directory */
  snprintf(tmp, sizeof tmp, "%s.tmp/junk", final);
  ZT_OK(zeroc__mkdir_p(tmp, 0755));

  ZT_OK(zeroc__dir_stage(final, tmp, sizeof tmp));
  CU_ASSERT(strstr(tmp, "step_000010.tmp") != NULL);
  int n;
  count_entries(tmp, &n);
  CU_ASSERT_EQUAL(n, 0); /* the junk is gone */
  snprintf(file, sizeof file, "%s/rank0.bin", tmp);
  ZT_OK(zeroc__file_write_sync(file, "v1-rank0", 8));
  snprintf(file, sizeof file, "%s/sub", tmp);
  ZT_OK(zeroc__mkdir_p(file, 0755));
  snprintf(file, sizeof file, "%s/sub/manifest.json", tmp);
  ZT_OK(zeroc__file_write_sync(file, "{}", 2));
  CU_ASSERT(!exists(final)); /* nothing visible before publish */
  ZT_OK(zeroc__dir_publish(tmp, final));
  CU_ASSERT(!exists(tmp));
  snprintf(file, sizeof file, "%s/rank0.bin", final);
  CU_ASSERT(slurp(file, got, sizeof got) == 8 && !memcmp(got, "v1-rank0", 8));

  /* publishing over an existing version replaces it whole */
  ZT_OK(zeroc__dir_stage(final, tmp, sizeof tmp));
  snprintf(file, sizeof file, "%s/rank1.bin", tmp);
  ZT_OK(zeroc__file_write_sync(file, "v2-rank1", 8));
  ZT_OK(zeroc__dir_publish(tmp, final));
  snprintf(file, sizeof file, "%s/rank0.bin", final);
  CU_ASSERT(!exists(file));
  snprintf(file, sizeof file, "%s/rank1.bin", final);
  CU_ASSERT(slurp(file, got, sizeof got) == 8 && !memcmp(got, "v2-rank1", 8));
  CU_ASSERT(!exists(tmp));
  snprintf(file, sizeof file, "%s/ckpt", g_dir);
  count_entries(file, &n);
  CU_ASSERT_EQUAL(n, 1); /* no .tmp or .old left beside it */
}

static const zt_test_t tests[] = {
    {"crc32c_vectors", test_crc32c_vectors},
    {"crc32c_chain_and_paths", test_crc32c_chain_and_paths},
    {"atomic_write_and_crash", test_atomic_write_and_crash},
    {"atomic_reader_race", test_atomic_reader_race},
    {"write_errors", test_write_errors},
    {"mkdir_rmtree", test_mkdir_rmtree},
    {"shared_dir_links", test_shared_dir_links},
    {"dir_stage_publish", test_dir_stage_publish},
    ZT_END,
};

int main(void) {
  g_dir = zt_tempdir("zeroc-io-files");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("io_files", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
