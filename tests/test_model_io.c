/*
 * tests/test_model_io.c - a user model's parameters exported and imported by
 * name (zeroc_model_export / _import), the global mean of an evaluation
 * (zeroc_model_eval_mean) and the public scalar all-reduce (zeroc_ctx_allreduce),
 * issue 36. Real ranks, real files: a model exported at ZeRO-3 over the world
 * (tp 1, and tp 2 with split parameters) is imported at 1 rank, at ZeRO-1 on 2,
 * with HSDP, with cp 2 and the optimizer state on the host, and with tp 2, each
 * time bit for bit (the masters and what the callbacks see); the two exports are the same
 * file. Refusals name the tensor, the shapes, the argument.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "testutil.h"

#define EXPECT_MSG(src, want)                                                                      \
  ZT_ASSERT_MSG(strstr((src), (want)), "expected '%s' in: %s", (want), (src))

/* ---- contexts on the world, on this rank alone, on pairs ------------------------------ */

typedef enum { ON_WORLD, ON_SELF, ON_PAIR } where_t;

static int g_cp = 1;                                   /* the next context's cp size */
static zeroc_offload_t g_offload = ZEROC_OFFLOAD_NONE; /* the next model's optimizer state */

static zeroc_ctx_t *ctx_on(where_t w, int tp, int hsdp, MPI_Comm *keep) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.tp = tp;
  cc.hsdp = hsdp;
  cc.cp = g_cp;
  cc.comm_timeout_s = 120;
  cc.threads = 1;
  *keep = MPI_COMM_NULL;
  if (w == ON_SELF) MPI_Comm_dup(MPI_COMM_SELF, keep);
  if (w == ON_PAIR) MPI_Comm_split(MPI_COMM_WORLD, zt_rank() / 2, zt_rank(), keep);
  if (*keep != MPI_COMM_NULL) cc.mpi_comm = keep;
  zeroc_ctx_t *c = NULL;
  zeroc_result_t r = zeroc_ctx_create(&c, &cc);
  ZT_ASSERT_MSG(r == ZEROC_OK, "ctx (where %d, tp %d, hsdp %d): %s", (int)w, tp, hsdp,
                zeroc_last_error(NULL));
  return c;
}

static void ctx_end(zeroc_ctx_t *c, MPI_Comm *keep) {
  if (c) ZT_OK(zeroc_ctx_finalize(c));
  if (*keep != MPI_COMM_NULL) MPI_Comm_free(keep);
}

/* ---- the model: embed, two blocks sharing a name, a head ------------------------------ */

static zeroc_result_t nop(zeroc_layer_io_t *io) {
  io->out = (void *)io->in;
  io->din = (void *)io->dout;
  return ZEROC_OK;
}

static float value(int u, int p, uint64_t g);
static zeroc_model_t *g_seen; /* set: a forward compares its parameters with value() */
static long g_seen_bad;

/* What the callbacks see, not only the masters: the compute parameters hold value(). */
static zeroc_result_t seeing_fwd(zeroc_layer_io_t *io) {
  for (int p = 0; g_seen && p < 3; p++) {
    const zeroc_param_desc_t *pd = zeroc_model_param_desc(g_seen, io->unit, p);
    if (!pd) break;
    const float *v = io->params[p];
    for (uint64_t j = 0; j < zeroc_param_numel(pd); j++) {
      float want = value(io->unit, p, zeroc_param_global_index(pd, j));
      if (memcmp(&v[j], &want, sizeof want)) g_seen_bad++;
    }
  }
  return nop(io);
}

enum { NU = 4, ROWS = 8, COLS = 4 };
static zeroc_param_desc_t g_p[NU][3];
static zeroc_layer_t g_l[NU];

/* The layer list on a context of tensor-parallel size `tp`: the blocks' w and b
 * split by rows over tp (tp_* fields), g replicated. `head_cols` changes the
 * head's shape (a model the file does not fit). */
static const zeroc_layer_t *layers(zeroc_ctx_t *c, int head_cols) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(c);
  int tp = mesh->tp;
  memset(g_p, 0, sizeof g_p);
  g_p[0][0] = (zeroc_param_desc_t){.name = "w", .ndim = 2, .shape = {6, COLS}, .init_scale = 0.1f};
  g_p[0][1] = (zeroc_param_desc_t){.name = "b", .ndim = 1, .shape = {COLS}, .init_scale = 0.1f};
  for (int u = 1; u <= 2; u++) {
    zeroc_param_desc_t *p = g_p[u];
    p[0] = (zeroc_param_desc_t){.name = "w", .ndim = 2, .shape = {ROWS / tp, COLS}};
    p[1] = (zeroc_param_desc_t){.name = "b", .ndim = 1, .shape = {ROWS / tp}};
    p[2] = (zeroc_param_desc_t){.name = "g", .ndim = 1, .shape = {COLS}};
    for (int j = 0; j < 2 && tp > 1; j++) {
      p[j].tp_groups = 1, p[j].tp_dim = 0, p[j].tp_rank = mesh->tp_rank, p[j].tp_size = tp;
      p[j].tp_full[0] = ROWS, p[j].tp_full[1] = j == 0 ? COLS : 0;
    }
    p[2].flags = ZEROC_PARAM_TP_REPLICATED;
    for (int j = 0; j < 3; j++) p[j].init = ZEROC_INIT_NORMAL, p[j].init_scale = 0.2f;
  }
  g_p[3][0] =
      (zeroc_param_desc_t){.name = "w", .ndim = 2, .shape = {3, head_cols}, .init_scale = 0.1f};
  static const char *names[NU] = {"embed", "block", "block", "head"};
  static const int np[NU] = {2, 3, 3, 1};
  for (int u = 0; u < NU; u++)
    g_l[u] = (zeroc_layer_t){.name = names[u],
                             .nparams = np[u],
                             .params = g_p[u],
                             .shares = -1,
                             .forward = seeing_fwd,
                             .backward = nop};
  return g_l;
}

static zeroc_model_t *build(zeroc_ctx_t *c, int stage, uint64_t seed, int units, int head_cols) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = stage;
  sc.seed = seed;
  sc.offload_optimizer = g_offload;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(c, layers(c, head_cols), units, &sc, &m));
  return m;
}

/* The value the test gives element g of the unsplit parameter p of unit u. */
static float value(int u, int p, uint64_t g) {
  return zeroc_rng_normal(1234, (uint64_t)(u * 8 + p), g);
}

/* Sets every rank's master shard to value() at each element's unsplit index. */
static void set_values(zeroc_model_t *m) {
  for (int u = 0; u < zeroc_model_num_units(m); u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(m, u, &ui));
    float *flat = calloc(ui.flat_numel, sizeof(float));
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      float *dst = flat + zeroc_model_param_offset(m, u, p);
      for (uint64_t j = 0; j < zeroc_param_numel(pd); j++)
        dst[j] = value(u, p, zeroc_param_global_index(pd, j));
    }
    ZT_OK(zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, flat + ui.shard_offset));
    free(flat);
  }
}

/* Every parameter, gathered, holds value() bit for bit. Collective. Returns the
 * number of elements that differ on this rank. */
static long check_values(zeroc_model_t *m) {
  long bad = 0;
  for (int u = 0; u < zeroc_model_num_units(m); u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(m, u, &ui));
    float *flat = malloc(ui.flat_numel * sizeof(float));
    ZT_OK(zeroc_model_gather_unit(m, u, flat));
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      const float *v = flat + zeroc_model_param_offset(m, u, p);
      for (uint64_t j = 0; j < zeroc_param_numel(pd); j++) {
        float want = value(u, p, zeroc_param_global_index(pd, j));
        if (memcmp(&v[j], &want, sizeof want)) bad++;
      }
    }
    free(flat);
  }
  return bad;
}

static char g_dir[256];

static void make_dir(void) {
  if (g_dir[0]) return;
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-model-io");
    snprintf(g_dir, sizeof g_dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void path_of(char *out, size_t n, const char *file) {
  snprintf(out, n, "%s/%s", g_dir, file);
}

/* Exports the values from ZeRO-3 over the world at tp `tp` into `file`. */
static void export_at(int tp, const char *file) {
  MPI_Comm keep;
  zeroc_ctx_t *c = ctx_on(ON_WORLD, tp, 0, &keep);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_model_t *m = build(c, 3, 1, NU, 5);
  set_values(m);
  char path[512];
  path_of(path, sizeof path, file);
  zeroc_result_t r = zeroc_model_export(m, path);
  ZT_ASSERT_MSG(r == ZEROC_OK, "export tp %d: %s", tp, zeroc_last_error(c));
  zeroc_model_destroy(m);
  ctx_end(c, &keep);
}

/* Imports `file` into a fresh model (another seed) of the given layout and checks
 * every value. */
static void import_at(where_t w, int tp, int hsdp, int stage, const char *file) {
  MPI_Comm keep;
  zeroc_ctx_t *c = ctx_on(w, tp, hsdp, &keep);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_model_t *m = build(c, stage, 99, NU, 5);
  CU_ASSERT(check_values(m) > 0); /* a fresh model does not hold them already */
  char path[512];
  path_of(path, sizeof path, file);
  zeroc_result_t r = zeroc_model_import(m, path);
  ZT_ASSERT_MSG(r == ZEROC_OK, "import (where %d tp %d hsdp %d stage %d): %s", (int)w, tp, hsdp,
                stage, zeroc_last_error(c));
  long bad = check_values(m);
  ZT_ASSERT_MSG(bad == 0, "import (where %d tp %d hsdp %d stage %d): %ld values differ", (int)w, tp,
                hsdp, stage, bad);
  g_seen = m, g_seen_bad = 0;
  int dummy = 0;
  ZT_OK(zeroc_model_eval(m, &dummy, NULL));
  g_seen = NULL;
  ZT_ASSERT_MSG(g_seen_bad == 0,
                "import (where %d tp %d hsdp %d stage %d): the callbacks see %ld "
                "values that are not the file's",
                (int)w, tp, hsdp, stage, g_seen_bad);
  zeroc_model_destroy(m);
  ctx_end(c, &keep);
}

/* Rank 0: two exports of the same values are the same bytes. */
static void same_file(const char *x, const char *y) {
  if (zt_rank() != 0) return;
  char a[512], b[512], cmd[1100];
  path_of(a, sizeof a, x);
  path_of(b, sizeof b, y);
  snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
  ZT_ASSERT_MSG(system(cmd) == 0, "%s differs from %s", y, x);
}

static void test_roundtrip(void) {
  make_dir();
  int W = zt_world();
  export_at(1, "tp1.safetensors");
  import_at(ON_SELF, 1, 0, 0, "tp1.safetensors");
  if (W >= 2) import_at(ON_PAIR, 1, 0, 1, "tp1.safetensors");
  if (W >= 4) import_at(ON_WORLD, 1, 2, 3, "tp1.safetensors"); /* HSDP */
  if (W >= 2) { /* the shard group spans cp ranks; the optimizer state on the host */
    g_cp = 2, g_offload = ZEROC_OFFLOAD_CPU;
    import_at(ON_WORLD, 1, 0, 3, "tp1.safetensors");
    export_at(1, "cp2.safetensors");
    g_cp = 1, g_offload = ZEROC_OFFLOAD_NONE;
    import_at(ON_SELF, 1, 0, 0, "cp2.safetensors");
    same_file("tp1.safetensors", "cp2.safetensors");
  }
  if (W % 2 == 0) {
    /* split parameters consolidated: the same file as tp 1's, byte for byte */
    export_at(2, "tp2.safetensors");
    import_at(ON_WORLD, 2, 0, 1, "tp1.safetensors");
    import_at(ON_SELF, 1, 0, 0, "tp2.safetensors");
    same_file("tp1.safetensors", "tp2.safetensors");
  } else {
    zt_not_checked("tensor-parallel export (needs an even world)");
  }
}

/* The file's names: the shared unit name numbered, the shapes unsplit, F32. */
static void test_names(void) {
  make_dir();
  char path[512];
  path_of(path, sizeof path, "tp1.safetensors");
  zeroc__st_t *st = NULL;
  ZT_OK(zeroc__st_open(path, &st));
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  const char *want[] = {"embed.w",   "embed.b",   "block.0.w", "block.0.b", "block.0.g",
                        "block.1.w", "block.1.b", "block.1.g", "head.w"};
  CU_ASSERT_EQUAL(zeroc__st_count(st), 9);
  for (int i = 0; i < 9; i++) {
    const zeroc__st_tensor_t *t = zeroc__st_find(st, want[i]);
    ZT_ASSERT_MSG(t != NULL, "no tensor '%s'", want[i]);
    if (t) CU_ASSERT_EQUAL(t->dtype, ZEROC_ST_F32);
  }
  const zeroc__st_tensor_t *t = zeroc__st_find(st, "block.1.w");
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT(t->ndim == 2 && t->shape[0] == ROWS && t->shape[1] == COLS);
  float v[ROWS * COLS];
  ZT_OK(zeroc__st_read_f32(t, v, ROWS * COLS));
  for (int g = 0; g < ROWS * COLS; g++) CU_ASSERT_EQUAL(v[g], value(2, 0, (uint64_t)g));
  CU_ASSERT_STRING_EQUAL(zeroc__st_metadata(st, "producer"), "zeroc");
  zeroc__st_close(st);
}

/* Files that do not fit the model, and bad arguments: refused, naming the tensor,
 * the shapes or the argument; the model keeps its values. */
static void test_import_refusals(void) {
  make_dir();
  MPI_Comm keep;
  zeroc_ctx_t *c = ctx_on(ON_WORLD, 1, 0, &keep);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char path[512];
  path_of(path, sizeof path, "tp1.safetensors");
  /* head.w (3, 6) where the file's is (3, 5) */
  zeroc_model_t *m = build(c, 3, 1, NU, 6);
  set_values(m);
  CU_ASSERT_EQUAL(zeroc_model_import(m, path), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "tensor 'head.w'");
  EXPECT_MSG(zeroc_last_error(c), "has shape (3, 5); the model's is (3, 6)");
  CU_ASSERT_EQUAL(check_values(m), 0); /* unchanged */
  zeroc_model_destroy(m);
  /* a model without the head: the file has a tensor too many */
  m = build(c, 3, 1, NU - 1, 5);
  CU_ASSERT_EQUAL(zeroc_model_import(m, path), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "holds tensor 'head.w', which is no parameter of the model");
  /* bad arguments */
  CU_ASSERT_EQUAL(zeroc_model_import(m, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "zeroc_model_import: path is NULL");
  CU_ASSERT_EQUAL(zeroc_model_export(m, ""), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "zeroc_model_export: path is empty");
  CU_ASSERT_EQUAL(zeroc_model_export(NULL, path), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_export: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_import(NULL, path), ZEROC_ERR_INVALID_ARG);
  char missing[600];
  snprintf(missing, sizeof missing, "%s/no-such.safetensors", g_dir);
  CU_ASSERT_EQUAL(zeroc_model_import(m, missing), ZEROC_ERR_IO);
  EXPECT_MSG(zeroc_last_error(c), "no-such.safetensors");
  /* rank 0 cannot write: its I/O error, the others learn of it */
  CU_ASSERT_EQUAL(zeroc_model_export(m, "/nonexistent-zeroc-dir/m.safetensors"),
                  zt_rank() == 0 ? ZEROC_ERR_IO : ZEROC_ERR_REMOTE);
  EXPECT_MSG(zeroc_last_error(c), "nonexistent-zeroc-dir");
  /* a file of the shorter model lacks what the full one has */
  char shorter[512];
  path_of(shorter, sizeof shorter, "short.safetensors");
  ZT_OK(zeroc_model_export(m, shorter));
  zeroc_model_destroy(m);
  m = build(c, 1, 1, NU, 5);
  CU_ASSERT_EQUAL(zeroc_model_import(m, shorter), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "has no tensor 'head.w' (parameter 0 of unit 3)");
  zeroc_model_destroy(m);
  CU_ASSERT_EQUAL(zeroc_model_export(m, path), ZEROC_ERR_INVALID_ARG); /* destroyed */
  EXPECT_MSG(zeroc_last_error(NULL), "not a live model");
  ctx_end(c, &keep);
}

/* Two parameters that would share a name are refused, naming both. */
static void test_name_clash(void) {
  make_dir();
  MPI_Comm keep;
  zeroc_ctx_t *c = ctx_on(ON_WORLD, 1, 0, &keep);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_param_desc_t pa = {.name = "c", .ndim = 1, .shape = {4}, .init_scale = 0.1f};
  zeroc_param_desc_t pb = {.name = "b.c", .ndim = 1, .shape = {4}, .init_scale = 0.1f};
  zeroc_layer_t L[2] = {
      {.name = "a.b", .nparams = 1, .params = &pa, .shares = -1, .forward = nop, .backward = nop},
      {.name = "a", .nparams = 1, .params = &pb, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(c, L, 2, NULL, &m));
  char path[512];
  path_of(path, sizeof path, "clash.safetensors");
  CU_ASSERT_EQUAL(zeroc_model_export(m, path), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "parameter 0 of unit 0 and parameter 0 of unit 1 are both named "
                                  "'a.b.c'");
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NULL(f); /* nothing written */
  if (f) fclose(f);
  zeroc_model_destroy(m);
  ctx_end(c, &keep);
}

/* ---- zeroc_ctx_allreduce ------------------------------------------------------------ */

static void test_allreduce(void) {
  zeroc_ctx_t *c = zt_ctx(zt_world() % 2 == 0 ? 2 : 1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(c);
  int W = mesh->world, r = mesh->rank;
  double v[3] = {r + 1.0, -(double)r, 0.5 * r};
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, v, 3, ZEROC_SUM));
  CU_ASSERT_DOUBLE_EQUAL(v[0], W * (W + 1) / 2.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(v[1], -W * (W - 1) / 2.0, 1e-12);
  double a = r, mx = r, mn = r;
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, &a, 1, ZEROC_AVG));
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, &mx, 1, ZEROC_MAX));
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, &mn, 1, ZEROC_MIN));
  CU_ASSERT_DOUBLE_EQUAL(a, (W - 1) / 2.0, 1e-12);
  CU_ASSERT_EQUAL(mx, W - 1);
  CU_ASSERT_EQUAL(mn, 0);
  /* over the data-parallel group: the ranks of this tp rank only */
  double d = r;
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_DP, &d, 1, ZEROC_SUM));
  double want = 0;
  for (int q = mesh->tp_rank; q < W; q += mesh->tp) want += q;
  CU_ASSERT_DOUBLE_EQUAL(d, want, 1e-12);
  /* bad arguments: named, v untouched */
  double keep = 7;
  CU_ASSERT_EQUAL(
      zeroc_ctx_allreduce(c, (zeroc_group_kind_t)ZEROC_GROUP_COUNT, &keep, 1, ZEROC_SUM),
      ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "group 7 is not a ZEROC_GROUP_*");
  CU_ASSERT_EQUAL(zeroc_ctx_allreduce(c, (zeroc_group_kind_t)-1, &keep, 1, ZEROC_SUM),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, NULL, 1, ZEROC_SUM),
                  ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "zeroc_ctx_allreduce: v is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, &keep, 0, ZEROC_SUM),
                  ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "n 0; accepted 1..16777216");
  CU_ASSERT_EQUAL(zeroc_ctx_allreduce(c, ZEROC_GROUP_WORLD, &keep, 1, (zeroc_redop_t)9),
                  ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(c), "op 9; accepted ZEROC_SUM");
  CU_ASSERT_EQUAL(zeroc_ctx_allreduce(NULL, ZEROC_GROUP_WORLD, &keep, 1, ZEROC_SUM),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(keep, 7);
  ZT_OK(zeroc_ctx_finalize(c));
}

/* On a cuda context (nccl groups) the same host doubles go through MPI. */
static void test_allreduce_cuda(void) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CUDA;
  cc.comm_timeout_s = 120;
  zeroc_ctx_t *c = NULL;
  zeroc_result_t r = zeroc_ctx_create(&c, &cc);
  if (r != ZEROC_OK) {
    zt_not_checked("zeroc_ctx_allreduce on a cuda context (no GPU for every rank)");
    return;
  }
  double v[2] = {zt_rank() + 1.0, 1.0}, W = zt_world();
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_DP, v, 2, ZEROC_SUM));
  CU_ASSERT_DOUBLE_EQUAL(v[0], W * (W + 1) / 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(v[1], W, 1e-12);
  ZT_OK(zeroc_ctx_finalize(c));
}

/* ---- zeroc_model_eval_mean ---------------------------------------------------------- */

enum { IN = 5, GB = 16 };
typedef struct {
  int rows;
  const float *x, *y;
} ebatch_t;

/* loss = mean over rows of (x . w - y)^2 */
static int g_fail_rank = -1; /* this world rank's forward fails */

static zeroc_result_t sq_fwd(zeroc_layer_io_t *io) {
  const ebatch_t *b = io->in;
  if (zt_rank() == g_fail_rank) return zeroc_error_set(ZEROC_ERR_IO, "no data on this rank");
  const float *w = io->params[0];
  double s = 0;
  for (int i = 0; i < b->rows; i++) {
    double z = -b->y[i];
    for (int c = 0; c < IN; c++) z += (double)b->x[i * IN + c] * w[c];
    s += z * z;
  }
  *io->loss = (float)(s / b->rows);
  io->out = (void *)io->in;
  return ZEROC_OK;
}

static double eval_on(zeroc_ctx_t *c, int first, int rows, int mean) {
  zeroc_param_desc_t p = {.name = "w", .ndim = 1, .shape = {IN}, .init_scale = 0.7f};
  zeroc_layer_t L = {
      .name = "lin", .nparams = 1, .params = &p, .shares = -1, .forward = sq_fwd, .backward = nop};
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(c, &L, 1, NULL, &m));
  float x[GB * IN], y[GB];
  zt_fill_uniform(x, GB * IN, 5, -1, 1);
  zt_fill_uniform(y, GB, 6, -1, 1);
  ebatch_t b = {rows, x + first * IN, y + first};
  double l = -1;
  if (mean) {
    ZT_OK(zeroc_model_eval_mean(m, &b, &l));
    CU_ASSERT_EQUAL(zeroc_model_eval_mean(m, &b, NULL), ZEROC_ERR_INVALID_ARG);
    EXPECT_MSG(zeroc_last_error(c), "zeroc_model_eval_mean: loss is NULL");
  } else {
    float f = -1;
    ZT_OK(zeroc_model_eval(m, &b, &f));
    l = f;
  }
  zeroc_model_destroy(m);
  return l;
}

/* Each data-parallel rank evaluates its rows of the global batch; the mean is
 * the 1-rank evaluation of the whole batch, on every rank. */
static void test_eval_mean(void) {
  MPI_Comm keep;
  zeroc_ctx_t *c = ctx_on(ON_SELF, 1, 0, &keep);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  double one = eval_on(c, 0, GB, 0);
  ctx_end(c, &keep);
  c = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int dp = zeroc_ctx_mesh(c)->dp, rows = GB / dp;
  double mean = eval_on(c, zeroc_ctx_mesh(c)->dp_rank * rows, rows, 1);
  ZT_ASSERT_MSG(fabs(mean - one) <= 1e-6 * fabs(one), "eval mean %.9g, one rank %.9g", mean, one);
  double lo = mean, hi = mean;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CU_ASSERT_EQUAL(lo, hi); /* identical on every rank */
  ZT_OK(zeroc_ctx_finalize(c));
}

/* One rank's evaluation fails: it returns its error, the others ZEROC_ERR_REMOTE, and
 * no rank waits for it (stage 0: the forward has no collective of its own). */
static void test_eval_mean_failure(void) {
  if (zt_world() < 2) {
    zt_not_checked("eval mean with a failing rank (needs 2 ranks)");
    return;
  }
  zeroc_ctx_t *c = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_param_desc_t p = {.name = "w", .ndim = 1, .shape = {IN}, .init_scale = 0.7f};
  zeroc_layer_t L = {
      .name = "lin", .nparams = 1, .params = &p, .shares = -1, .forward = sq_fwd, .backward = nop};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = 0;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(c, &L, 1, &sc, &m));
  float x[GB * IN] = {0}, y[GB] = {0};
  ebatch_t b = {2, x, y};
  double l = -1;
  g_fail_rank = 1;
  zeroc_result_t r = zeroc_model_eval_mean(m, &b, &l);
  g_fail_rank = -1;
  if (zt_rank() == 1) {
    CU_ASSERT_EQUAL(r, ZEROC_ERR_IO);
    EXPECT_MSG(zeroc_last_error(c), "no data on this rank");
  } else {
    CU_ASSERT_EQUAL(r, ZEROC_ERR_REMOTE);
    EXPECT_MSG(zeroc_last_error(c), "failed on 1 of the");
  }
  CU_ASSERT_EQUAL(l, -1); /* untouched */
  zeroc_model_destroy(m);
  ZT_OK(zeroc_ctx_finalize(c));
}

static int cleanup(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0 && g_dir[0]) zt_rmtree(g_dir);
  return 0;
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"export ZeRO-3, import 1 rank / ZeRO-1 / HSDP / tp", test_roundtrip},
      {"tensor names and shapes", test_names},
      {"import refusals", test_import_refusals},
      {"name clash", test_name_clash},
      {"ctx allreduce", test_allreduce},
      {"ctx allreduce, cuda", test_allreduce_cuda},
      {"eval mean", test_eval_mean},
      {"eval mean, one rank fails", test_eval_mean_failure},
      ZT_END};
  return zt_run_mpi_ex(argc, argv, "model_io", tests, 1, 0, NULL, cleanup);
}
