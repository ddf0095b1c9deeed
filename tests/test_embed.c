/*
 * tests/test_embed.c - the model-parallel embedding bags (include/zeroc/embed.h)
 * on real ranks against a single-rank run of the global batch: every sharding
 * (table, column, row, data, auto, a mix, host-memory tables) gives the same
 * pooled rows and, after several forward/backward/AdaGrad steps, the same
 * tables and state (rel <= 1e-5, fp32). Also: ids out of range are refused on
 * every rank, the all-to-all byte counters equal the cost model, memory by tag
 * equals the plan, and a save re-cuts onto other group sizes and shardings.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "runtime/runtime.h"
#include "testutil.h"
#include "zeroc/embed.h"

enum { T = 4, BL = 3, BAG = 4, STEPS = 4, SUMD = 30 };
static const int64_t ROWS[T] = {37, 5, 120, 64};
static const int DIMS[T] = {8, 8, 6, 8};

static zeroc_ctx_t *g_world, *g_self;

static int setup(void) {
  g_world = zt_ctx(1, 1, 1);
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  static MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  cfg.device = ZEROC_DEVICE_CPU;
  cfg.threads = 1;
  cfg.comm_timeout_s = 120;
  cfg.mpi_comm = &self;
  return !g_world || zeroc_ctx_create(&g_self, &cfg) != ZEROC_OK;
}

static int teardown(void) {
  zeroc_ctx_destroy(g_self);
  return zeroc_ctx_finalize(g_world) != ZEROC_OK;
}

/* A config of the test tables: `mode` forced, or with mode AUTO the per-table
 * choices in `per` (NULL: all AUTO); host = 1 puts every table it can in host memory. */
static zeroc_embed_config_t config(zeroc_embed_table_t *tab, int mode, const int *per, int host,
                                   int batch) {
  for (int t = 0; t < T; t++) {
    zeroc_embed_table_t x = ZEROC_EMBED_TABLE_INIT(ROWS[t], DIMS[t]);
    x.sharding = per ? (zeroc_embed_sharding_t)per[t] : ZEROC_EMBED_AUTO;
    x.host = host ? 1 : -1;
    tab[t] = x;
  }
  zeroc_embed_config_t c = ZEROC_EMBED_CONFIG_INIT;
  c.ntables = T;
  c.tables = tab;
  c.sharding = (zeroc_embed_sharding_t)mode;
  c.batch = batch;
  c.bag = BAG;
  c.lr = 0.05f;
  c.init_accum = 0.1f; /* AdaGrad from 0 is blind to the gradient's scale; this is not */
  c.seed = 11;
  return c;
}

/* The global batch of a step: lengths (T, Bg) and ids; full: every bag holds BAG ids. */
static int64_t batch(int step, int Bg, int full, int32_t *len, int64_t *ids) {
  uint64_t s = 1000 + (uint64_t)step;
  int64_t n = 0;
  for (int t = 0; t < T; t++)
    for (int b = 0; b < Bg; b++) {
      len[t * Bg + b] = full ? BAG : (int32_t)(zt_rand_u64(&s) % (BAG + 1));
      for (int l = 0; l < len[t * Bg + b]; l++) /* small range: repeats within and across bags */
        ids[n++] = (int64_t)(zt_rand_u64(&s) % (uint64_t)(l == 1 ? 4 : ROWS[t]));
    }
  return n;
}

/* This rank's samples [r*BL, (r+1)*BL) of the global batch. */
static void local_slice(int Bg, const int32_t *len, const int64_t *ids, int r, int32_t *llen,
                        int64_t *lids) {
  int64_t n = 0, g = 0;
  for (int t = 0; t < T; t++)
    for (int b = 0; b < Bg; b++) {
      int mine = b >= r * BL && b < (r + 1) * BL;
      if (mine) llen[t * BL + b - r * BL] = len[t * Bg + b];
      for (int l = 0; l < len[t * Bg + b]; l++, g++)
        if (mine) lids[n++] = ids[g];
    }
}

/* Runs STEPS steps on the world (config c) and on one rank (reference, forced
 * table-wise) and compares pooled rows each step and the tables at the end. */
static void run_compare(zeroc_embed_config_t *c, const char *what) {
  int N = zt_world(), r = zt_rank(), Bg = BL * N;
  zeroc_embed_table_t rt[T];
  zeroc_embed_config_t rc = config(rt, ZEROC_EMBED_TABLE, NULL, 0, Bg);
  zeroc_embed_t *e = NULL, *ref = NULL;
  ZT_OK(zeroc_embed_create(g_world, c, &e));
  ZT_OK(zeroc_embed_create(g_self, &rc, &ref));
  if (!e || !ref) goto out;
  int32_t *len = malloc(sizeof(int32_t) * T * Bg), llen[T * BL];
  int64_t *ids = malloc(sizeof(int64_t) * T * Bg * BAG), lids[T * BL * BAG];
  float *pool = malloc(sizeof(float) * Bg * SUMD), *lpool = malloc(sizeof(float) * BL * SUMD);
  float *dp = malloc(sizeof(float) * Bg * SUMD), ldp[BL * SUMD];
  float *w0 = malloc(sizeof(float) * ROWS[2] * DIMS[2]),
        *w1 = malloc(sizeof(float) * ROWS[2] * DIMS[2]);
  ZT_OK(zeroc_embed_get_table(ref, 2, w0, NULL));
  for (int step = 0; step < STEPS; step++) {
    batch(step, Bg, 0, len, ids);
    local_slice(Bg, len, ids, r, llen, lids);
    ZT_OK(zeroc_embed_forward(ref, Bg, len, ids, pool));
    ZT_OK(zeroc_embed_forward(e, BL, llen, lids, lpool));
    double err = zt_rel_err(lpool, pool + r * BL * SUMD, BL * SUMD);
    ZT_ASSERT_MSG(err <= 1e-5, "%s step %d: pooled rel err %.3g", what, step, err);
    /* the reference's loss is the global mean; each rank's is its local mean,
     * N times the global one's gradient on its samples */
    zt_fill_uniform(dp, (size_t)Bg * SUMD, 77 + (uint64_t)step, -1, 1);
    for (int i = 0; i < BL * SUMD; i++) ldp[i] = (float)N * dp[r * BL * SUMD + i];
    ZT_OK(zeroc_embed_backward(ref, dp));
    ZT_OK(zeroc_embed_backward(e, ldp));
  }
  ZT_OK(zeroc_embed_get_table(ref, 2, w1, NULL));
  double moved = zt_rel_err(w1, w0, (size_t)ROWS[2] * DIMS[2]);
  ZT_ASSERT_MSG(moved > 1e-3, "%s: the steps changed table 2 by only %.3g", what, moved);
  free(w0), free(w1);
  for (int t = 0; t < T; t++) {
    size_t n = (size_t)ROWS[t] * DIMS[t];
    float *w = malloc(n * 4), *wr = malloc(n * 4), *s = malloc(ROWS[t] * 4),
          *sr = malloc(ROWS[t] * 4);
    ZT_OK(zeroc_embed_get_table(e, t, w, s));
    ZT_OK(zeroc_embed_get_table(ref, t, wr, sr));
    double ew = zt_rel_err(w, wr, n), es = zt_rel_err(s, sr, (size_t)ROWS[t]);
    ZT_ASSERT_MSG(ew <= 1e-5 && es <= 1e-5, "%s table %d (%s): weights rel %.3g, state rel %.3g",
                  what, t, zeroc_embed_sharding_name(zeroc_embed_table_sharding(e, t)), ew, es);
    free(w), free(wr), free(s), free(sr);
  }
  free(len), free(ids), free(pool), free(lpool), free(dp);
out:
  zeroc_embed_destroy(e);
  zeroc_embed_destroy(ref);
}

static void forced(int mode) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, mode, NULL, 0, BL);
  run_compare(&c, zeroc_embed_sharding_name((zeroc_embed_sharding_t)mode));
}
static void test_table(void) { forced(ZEROC_EMBED_TABLE); }
static void test_column(void) { forced(ZEROC_EMBED_COLUMN); }
static void test_row(void) { forced(ZEROC_EMBED_ROW); }
static void test_data(void) { forced(ZEROC_EMBED_DATA); }
static void test_auto(void) { forced(ZEROC_EMBED_AUTO); }

static const int MIX[T] = {ZEROC_EMBED_TABLE, ZEROC_EMBED_DATA, ZEROC_EMBED_ROW,
                           ZEROC_EMBED_COLUMN};

static void test_mix(void) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, ZEROC_EMBED_AUTO, MIX, 0, BL + 2); /* B < batch */
  run_compare(&c, "mix");
}

/* Host-memory tables (fetch rows, compute, write back) equal device ones. */
static void test_host(void) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, ZEROC_EMBED_AUTO, MIX, 1, BL);
  run_compare(&c, "mix, host tables");
  c = config(tab, ZEROC_EMBED_ROW, NULL, 0, BL);
  c.host_threshold = 1; /* every shard above one byte: the threshold path */
  run_compare(&c, "row, host by threshold");
}

/* An id out of range on rank 0 is refused on every rank; the next batch works. */
static void test_bad_ids(void) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, ZEROC_EMBED_AUTO, MIX, 0, BL);
  zeroc_embed_t *e = NULL;
  ZT_OK(zeroc_embed_create(g_world, &c, &e));
  if (!e) return;
  int32_t len[T * BL];
  int64_t ids[T * BL * BAG];
  float pooled[BL * SUMD];
  int64_t n = batch(0, BL, 1, len, ids);
  if (zt_rank() == 0) ids[n - 1] = ROWS[T - 1];
  zeroc_result_t r = zeroc_embed_forward(e, BL, len, ids, pooled);
  ZT_ASSERT_MSG(r == (zt_rank() == 0 ? ZEROC_ERR_INVALID_ARG : ZEROC_ERR_REMOTE), "got %s",
                zeroc_result_name(r));
  if (zt_rank() == 0)
    ZT_ASSERT_MSG(strstr(zeroc_last_error(g_world), "out of range") != NULL, "message: %s",
                  zeroc_last_error(g_world));
  ZT_ASSERT_MSG(zeroc_embed_backward(e, pooled) == ZEROC_ERR_INVALID_ARG,
                "backward without forward");
  len[0] = BAG + 1;
  r = zeroc_embed_forward(e, BL, len, ids, pooled);
  ZT_ASSERT_MSG(r != ZEROC_OK, "a bag longer than the config's refused");
  batch(0, BL, 1, len, ids);
  ZT_OK(zeroc_embed_forward(e, BL, len, ids, pooled));
  zeroc_embed_destroy(e);
}

/* One full-bag step: the counters equal the cost model; memory by tag equals the plan. */
static void counters(const int *per, int mode, const char *what) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, mode, per, per != NULL, BL);
  zeroc_mem_stats_t m0, m1;
  zeroc_ctx_memory(g_world, &m0);
  zeroc_embed_t *e = NULL;
  ZT_OK(zeroc_embed_create(g_world, &c, &e));
  if (!e) return;
  zeroc_ctx_memory(g_world, &m1);
  zeroc_embed_cost_t k, kp;
  zeroc_embed_cost(e, &k);
  ZT_OK(zeroc_embed_plan(&c, zt_world(), zt_rank(), NULL, NULL, &kp));
  ZT_ASSERT_MSG(!memcmp(&k, &kp, sizeof(k)), "%s: the plan differs from the allocated cost", what);
#define D(kind, tag) (m1.current[kind][tag] - m0.current[kind][tag])
  ZT_ASSERT_MSG(D(ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS) == k.param_device &&
                    D(ZEROC_MEM_PINNED, ZEROC_TAG_PARAMS) == k.param_host &&
                    D(ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER) == k.optimizer_device &&
                    D(ZEROC_MEM_PINNED, ZEROC_TAG_OPTIMIZER) == k.optimizer_host &&
                    D(ZEROC_MEM_DEVICE, ZEROC_TAG_GRADS) == k.grads_device &&
                    D(ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS) == k.buffers_device &&
                    D(ZEROC_MEM_PINNED, ZEROC_TAG_BUFFERS) == k.buffers_pinned,
                "%s: measured params %llu/%llu, optimizer %llu/%llu, buffers %llu/%llu; plan "
                "%llu/%llu, %llu/%llu, %llu/%llu",
                what, (unsigned long long)D(ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS),
                (unsigned long long)D(ZEROC_MEM_PINNED, ZEROC_TAG_PARAMS),
                (unsigned long long)D(ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER),
                (unsigned long long)D(ZEROC_MEM_PINNED, ZEROC_TAG_OPTIMIZER),
                (unsigned long long)D(ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS),
                (unsigned long long)D(ZEROC_MEM_PINNED, ZEROC_TAG_BUFFERS),
                (unsigned long long)k.param_device, (unsigned long long)k.param_host,
                (unsigned long long)k.optimizer_device, (unsigned long long)k.optimizer_host,
                (unsigned long long)k.buffers_device, (unsigned long long)k.buffers_pinned);
#undef D
  zeroc_group_t *g = zeroc__ctx_group(g_world, ZEROC_GROUP_DP);
  int32_t len[T * BL];
  int64_t ids[T * BL * BAG];
  float pooled[BL * SUMD];
  batch(zt_rank() + 5, BL, 1, len, ids);
  zeroc__group_counters_reset(g);
  ZT_OK(zeroc_embed_forward(e, BL, len, ids, pooled));
  ZT_OK(zeroc_embed_backward(e, pooled));
  zeroc_comm_counters_t ct;
  zeroc__group_counters(g, &ct);
  ZT_ASSERT_MSG(
      ct.bytes[ZEROC_COLL_ALLTOALL] == k.alltoall_bytes &&
          ct.bytes[ZEROC_COLL_REDUCE_SCATTER] == k.reduce_scatter_bytes &&
          ct.bytes[ZEROC_COLL_ALLGATHER] == k.allgather_bytes &&
          ct.bytes[ZEROC_COLL_ALLREDUCE] <= k.allreduce_bytes,
      "%s: all-to-all %llu (model %llu), reduce-scatter %llu (%llu), all-gather %llu "
      "(%llu), all-reduce %llu (at most %llu)",
      what, (unsigned long long)ct.bytes[ZEROC_COLL_ALLTOALL], (unsigned long long)k.alltoall_bytes,
      (unsigned long long)ct.bytes[ZEROC_COLL_REDUCE_SCATTER],
      (unsigned long long)k.reduce_scatter_bytes,
      (unsigned long long)ct.bytes[ZEROC_COLL_ALLGATHER], (unsigned long long)k.allgather_bytes,
      (unsigned long long)ct.bytes[ZEROC_COLL_ALLREDUCE], (unsigned long long)k.allreduce_bytes);
  zeroc_embed_destroy(e);
}

static void test_counters(void) {
  for (int m = ZEROC_EMBED_AUTO; m < ZEROC_EMBED_SHARDING_COUNT; m++)
    counters(NULL, m, zeroc_embed_sharding_name((zeroc_embed_sharding_t)m));
  counters(MIX, ZEROC_EMBED_AUTO, "mix, host tables");
}

/* Tables saved by a 2-rank group (mix, host tables, random weights and state)
 * load at 1 rank (table-wise) and at the world size (row-, then column-wise). */
static void load_check(zeroc_ctx_t *ctx, int mode, const char *dir, float **w, float **s,
                       const char *what) {
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, mode, NULL, 0, BL);
  zeroc_embed_t *e = NULL;
  ZT_OK(zeroc_embed_create(ctx, &c, &e));
  if (!e) return;
  ZT_OK(zeroc_embed_load(e, dir));
  for (int t = 0; t < T; t++) {
    size_t n = (size_t)ROWS[t] * DIMS[t];
    float *x = malloc(n * 4), *y = malloc(ROWS[t] * 4);
    ZT_OK(zeroc_embed_get_table(e, t, x, y));
    ZT_ASSERT_MSG(!memcmp(x, w[t], n * 4) && !memcmp(y, s[t], ROWS[t] * 4),
                  "%s: table %d differs from the saved one", what, t);
    free(x), free(y);
  }
  zeroc_embed_destroy(e);
}

static void test_ckpt(void) {
  char dir[512] = "";
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc_embed");
    snprintf(dir, sizeof(dir), "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
  ZT_ASSERT_MSG(dir[0], "a temporary directory");
  if (!dir[0]) return;
  float *w[T], *s[T];
  for (int t = 0; t < T; t++) { /* the same random tables on every rank */
    w[t] = malloc((size_t)ROWS[t] * DIMS[t] * 4);
    s[t] = malloc(ROWS[t] * 4);
    zt_fill_uniform(w[t], (size_t)ROWS[t] * DIMS[t], 50 + (uint64_t)t, -1, 1);
    zt_fill_uniform(s[t], (size_t)ROWS[t], 60 + (uint64_t)t, 0, 2);
  }
  MPI_Comm two;
  MPI_Comm_split(MPI_COMM_WORLD, zt_rank() < 2 ? 0 : MPI_UNDEFINED, zt_rank(), &two);
  if (two != MPI_COMM_NULL) {
    zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
    cc.device = ZEROC_DEVICE_CPU;
    cc.threads = 1;
    cc.comm_timeout_s = 120;
    cc.mpi_comm = &two;
    zeroc_ctx_t *c2 = NULL;
    ZT_OK(zeroc_ctx_create(&c2, &cc));
    zeroc_embed_table_t tab[T];
    zeroc_embed_config_t c = config(tab, ZEROC_EMBED_AUTO, MIX, 1, BL);
    zeroc_embed_t *e = NULL;
    if (c2) ZT_OK(zeroc_embed_create(c2, &c, &e));
    for (int t = 0; e && t < T; t++) ZT_OK(zeroc_embed_set_table(e, t, w[t], s[t]));
    if (e) ZT_OK(zeroc_embed_save(e, dir));
    zeroc_embed_destroy(e);
    if (c2) ZT_OK(zeroc_ctx_finalize(c2));
    MPI_Comm_free(&two);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  load_check(g_self, ZEROC_EMBED_TABLE, dir, w, s, "load at 1 rank, table-wise");
  load_check(g_world, ZEROC_EMBED_ROW, dir, w, s, "load at the world size, row-wise");
  load_check(g_world, ZEROC_EMBED_COLUMN, dir, w, s, "load at the world size, column-wise");
  char empty[600];
  snprintf(empty, sizeof(empty), "%s/none", dir);
  if (zt_rank() == 0) zt_rmtree(dir); /* now missing: refused on every rank */
  MPI_Barrier(MPI_COMM_WORLD);
  zeroc_embed_table_t tab[T];
  zeroc_embed_config_t c = config(tab, ZEROC_EMBED_ROW, NULL, 0, BL);
  zeroc_embed_t *e = NULL;
  ZT_OK(zeroc_embed_create(g_world, &c, &e));
  if (e) ZT_ASSERT_MSG(zeroc_embed_load(e, empty) != ZEROC_OK, "a missing directory is refused");
  zeroc_embed_destroy(e);
  for (int t = 0; t < T; t++) free(w[t]), free(s[t]);
}

/* AUTO on a DLRM-like set at 4 ranks: tiny tables replicated, a huge one split,
 * the rest whole tables spread over the ranks; bad configs refused by name. */
static void test_plan(void) {
  zeroc_embed_table_t tab[6] = {
      ZEROC_EMBED_TABLE_INIT(10, 8),     ZEROC_EMBED_TABLE_INIT(1000000, 64),
      ZEROC_EMBED_TABLE_INIT(20000, 64), ZEROC_EMBED_TABLE_INIT(20000, 64),
      ZEROC_EMBED_TABLE_INIT(20000, 64), ZEROC_EMBED_TABLE_INIT(20000, 64)};
  zeroc_embed_config_t c = ZEROC_EMBED_CONFIG_INIT;
  c.ntables = 6, c.tables = tab, c.batch = 128, c.bag = 4;
  zeroc_embed_sharding_t sh[6];
  int owner[6];
  zeroc_embed_cost_t k;
  ZT_OK(zeroc_embed_plan(&c, 4, 0, sh, owner, &k));
  ZT_ASSERT_MSG(sh[0] == ZEROC_EMBED_DATA && sh[1] == ZEROC_EMBED_COLUMN, "auto: %s, %s",
                zeroc_embed_sharding_name(sh[0]), zeroc_embed_sharding_name(sh[1]));
  int seen = 0;
  for (int t = 2; t < 6; t++) {
    ZT_ASSERT_MSG(sh[t] == ZEROC_EMBED_TABLE && owner[t] >= 0 && owner[t] < 4, "table %d", t);
    if (owner[t] >= 0 && owner[t] < 4) seen |= 1 << owner[t];
  }
  ZT_ASSERT_MSG(seen == 15, "four equal tables on four ranks: one each (mask %x)", seen);
  c.bag = 0;
  ZT_ASSERT_MSG(zeroc_embed_plan(&c, 4, 0, NULL, NULL, NULL) == ZEROC_ERR_INVALID_ARG &&
                    strstr(zeroc_last_error(NULL), "bag 0"),
                "bag 0: %s", zeroc_last_error(NULL));
  c.bag = 4, tab[2].rows = 0;
  ZT_ASSERT_MSG(zeroc_embed_plan(&c, 4, 0, NULL, NULL, NULL) == ZEROC_ERR_INVALID_ARG &&
                    strstr(zeroc_last_error(NULL), "rows 0"),
                "rows 0: %s", zeroc_last_error(NULL));
  zeroc_embed_sharding_t m;
  ZT_ASSERT_MSG(zeroc_embed_sharding_parse("rows", &m) == ZEROC_ERR_INVALID_ARG &&
                    strstr(zeroc_last_error(NULL), "accepted"),
                "parse 'rows'");
  ZT_OK(zeroc_embed_sharding_parse("column", &m));
  CU_ASSERT(m == ZEROC_EMBED_COLUMN);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"table-wise equals the single-rank run", test_table},
      {"column-wise equals the single-rank run", test_column},
      {"row-wise equals the single-rank run", test_row},
      {"data-parallel equals the single-rank run", test_data},
      {"auto equals the single-rank run", test_auto},
      {"a mix (table, data, row, column) equals the single-rank run", test_mix},
      {"host-memory tables equal the single-rank run", test_host},
      {"ids out of range are refused on every rank", test_bad_ids},
      {"all-to-all bytes and memory by tag equal the cost model", test_counters},
      {"save at 2 ranks, load at 1 and at the world size, other shardings", test_ckpt},
      {"the plan: auto's choices and refused configs", test_plan},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "embed", tests, 1, 0, setup, teardown);
}
