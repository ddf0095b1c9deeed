/*
 * tests/test_pp_runtime.c - the pipeline runtime on real ranks: the built-in
 * GPT cut into stages (1F1B, interleaved, with recompute, with data
 * parallelism) against the single-rank run of the same micro-batches: every
 * gradient element after the backward, then the loss and gradient norm of each
 * step; plus the partition, the slot counts and the refusals.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* L C NH V T B: 6 blocks, so 8 units cut into up to 8 stages */
static const zeroc_gpt_config_t CFG = {
    .layers = 6, .hidden = 16, .heads = 2, .vocab = 29, .seq = 6, .batch = 2};
enum { M = 4, STEPS = 3, MAXU = 8 };

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_gpt_t *gpt;
  zeroc_model_t *m;
  zeroc_pipeline_t *pl;
  int rows; /* sequences per micro-batch on this rank */
} run_t;

static zeroc_ctx_t *ctx_of(int pp, int self) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.threads = 1;
  cc.pp = pp;
  cc.comm_timeout_s = 60;
  MPI_Comm sc = MPI_COMM_SELF;
  if (self) cc.mpi_comm = &sc;
  zeroc_ctx_t *ctx = NULL;
  ZT_OK(zeroc_ctx_create(&ctx, &cc));
  return ctx;
}

/* The GPT's units of one pipeline rank. */
static zeroc_result_t gpt_stage(zeroc_ctx_t *ctx, int rows, int recompute, const zeroc_gpt_stage_t *st,
                                zeroc_gpt_t **out) {
  zeroc_gpt_options_t o = ZEROC_GPT_OPTIONS_INIT;
  o.batch = rows;
  o.recompute = recompute;
  o.stage = st;
  return zeroc_gpt_create_ex(ctx, &CFG, &o, out);
}

static zeroc_shard_config_t shard_cfg(int zero, int recompute) {
  zeroc_shard_config_t s = ZEROC_SHARD_CONFIG_INIT;
  s.stage = zero;
  s.recompute = recompute;
  s.grad_accum = M;
  s.weight_decay = 0.1f;
  s.seed = 5;
  return s;
}

/* The whole model on this rank alone, micro-batches of `rows` sequences. */
static int open_single(run_t *r, int rows) {
  memset(r, 0, sizeof *r);
  r->rows = rows;
  r->ctx = ctx_of(1, 1);
  if (!r->ctx) return -1;
  ZT_OK(zeroc_gpt_create(r->ctx, &CFG, rows, 0, ZEROC_FP32, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = shard_cfg(1, 0);
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  return r->m ? 0 : -1;
}

/* This rank's part of a pipeline of `pp` ranks (dp = world / pp). */
static int open_pipe(run_t *r, int pp, zeroc_pipeline_schedule_t kind, int v, int rows, int zero,
                     int recompute) {
  memset(r, 0, sizeof *r);
  r->rows = rows;
  r->ctx = ctx_of(pp, 0);
  if (!r->ctx) return -1;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(r->ctx);
  int S = pp * v, NU = zeroc_gpt_num_units(&CFG), bounds[MAXU + 1], first[MAXU], count[MAXU];
  double cost[MAXU];
  zeroc_gpt_unit_costs(&CFG, cost);
  ZT_OK(zeroc_pipeline_partition(cost, NU, S, bounds));
  for (int c = 0; c < v; c++) {
    int s = c * pp + mesh->pp_rank;
    first[c] = bounds[s];
    count[c] = bounds[s + 1] - bounds[s];
  }
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  pc.schedule = kind;
  pc.microbatches = M;
  pc.chunks = v;
  pc.act_numel = (size_t)rows * CFG.seq * CFG.hidden;
  int slots = 0;
  ZT_OK(zeroc_pipeline_slots(&pc, pp, mesh->pp_rank, &slots));
  zeroc_gpt_stage_t st = {v, first, count, slots};
  ZT_OK(gpt_stage(r->ctx, rows, recompute, &st, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = shard_cfg(zero, recompute);
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  if (!r->m) return -1;
  int cf[MAXU], cn[MAXU];
  for (int c = 0; c < v; c++) zeroc_gpt_chunk_units(r->gpt, c, &cf[c], &cn[c]);
  ZT_OK(zeroc_pipeline_create(r->m, cf, cn, &pc, &r->pl));
  return r->pl ? 0 : -1;
}

static void run_close(run_t *r) {
  zeroc_pipeline_destroy(r->pl);
  zeroc_model_destroy(r->m);
  zeroc_gpt_destroy(r->gpt);
  if (r->ctx) ZT_OK(zeroc_ctx_finalize(r->ctx));
}

/* Micro-batch u of step k: `rows` sequences starting at sequence `row0` of
 * the global micro-batch (random tokens, targets a fixed function of them). */
static void make_micro(int step, int u, int row0, int rows, int32_t *in, int32_t *tg) {
  int T = CFG.seq;
  for (int i = 0; i < rows * T; i++) {
    uint64_t s = 1000003ULL * (uint64_t)step + 7919ULL * (uint64_t)u + (uint64_t)(row0 * T + i);
    in[i] = (int32_t)(zt_rand_u64(&s) % CFG.vocab);
    tg[i] = (int32_t)((in[i] * 7 + 3) % CFG.vocab);
  }
}

typedef struct {
  int32_t in[M][8 * 6], tg[M][8 * 6];
  zeroc_gpt_batch_t b[M];
  const void *bp[M];
} batches_t;

static void fill_batches(batches_t *bt, int step, int row0, int rows) {
  for (int u = 0; u < M; u++) {
    make_micro(step, u, row0, rows, bt->in[u], bt->tg[u]);
    bt->b[u] = (zeroc_gpt_batch_t){rows, CFG.seq, bt->in[u], bt->tg[u], 0, 0};
    bt->bp[u] = &bt->b[u];
  }
}

/* The single-rank reference: grads after the first step's backward (full flat
 * per unit), then loss and norm per step. */
typedef struct {
  float *grad[MAXU];
  float loss[STEPS], norm[STEPS];
} ref_t;

static void run_reference(ref_t *ref, int rows) {
  memset(ref, 0, sizeof *ref);
  run_t r;
  if (open_single(&r, rows)) return;
  for (int k = 0; k < STEPS; k++) {
    batches_t bt;
    fill_batches(&bt, k, 0, rows);
    for (int u = 0; u < M; u++) {
      ZT_OK(zeroc_model_forward(r.m, &bt.b[u]));
      ZT_OK(zeroc_model_backward(r.m));
    }
    if (k == 0)
      for (int u = 0; u < zeroc_model_num_units(r.m); u++) {
        zeroc_unit_info_t ui;
        ZT_OK(zeroc_model_unit_info(r.m, u, &ui));
        ref->grad[u] = malloc(4 * ui.shard_numel);
        ZT_OK(zeroc_model_get_shard(r.m, u, ZEROC_STATE_GRAD, ref->grad[u]));
      }
    zeroc_step_info_t info;
    ZT_OK(zeroc_model_step(r.m, 1e-2f, &info));
    ref->loss[k] = info.loss;
    ref->norm[k] = info.grad_norm;
  }
  /* the reference's parameter offsets are needed after close: keep the model's
   * layout in the test's own numbering instead (param j of global unit g) */
  run_close(&r);
}

static void free_reference(ref_t *ref) {
  for (int u = 0; u < MAXU; u++) free(ref->grad[u]);
}

/* Flat offset of parameter `name` in global unit g of the whole model (the
 * single-rank layout: parameters in declaration order, 8-element aligned). */
static uint64_t ref_offset(int g, const char *name) {
  static const char *embed[] = {"wte.weight", "wpe.weight"}, *head[] = {"ln_f.weight", "ln_f.bias"};
  uint64_t C = (uint64_t)CFG.hidden, Vp = (uint64_t)((CFG.vocab + 63) / 64 * 64),
           T = (uint64_t)CFG.seq;
  uint64_t sizes_e[] = {Vp * C, T * C}, sizes_h[] = {C, C};
  uint64_t sizes_b[] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
  static const char *block[] = {"ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
                                "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
                                "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  const char **names = g == 0 ? embed : g == CFG.layers + 1 ? head : block;
  const uint64_t *sizes = g == 0 ? sizes_e : g == CFG.layers + 1 ? sizes_h : sizes_b;
  int np = g == 0 || g == CFG.layers + 1 ? 2 : 12;
  uint64_t off = 0;
  for (int j = 0; j < np; j++) {
    off = (off + 7) / 8 * 8;
    if (!strcmp(names[j], name)) return off;
    off += sizes[j];
  }
  return UINT64_MAX;
}

/* Every gradient element this rank holds against the reference's. */
static void compare_grads(run_t *r, const ref_t *ref) {
  int n = zeroc_model_num_units(r->m), bad = 0, checked = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r->m, u, &ui));
    float *g = malloc(4 * ui.shard_numel);
    ZT_OK(zeroc_model_get_shard(r->m, u, ZEROC_STATE_GRAD, g));
    int gu = zeroc_gpt_global_unit(r->gpt, u);
    for (int j = 0; j < ui.nparams; j++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(r->m, u, j);
      /* the head's own wte copy holds the embedding's (tied) gradient */
      int tied_copy = gu == CFG.layers + 1 && !strcmp(pd->name, "wte.weight");
      int rg = tied_copy ? 0 : gu;
      uint64_t roff = ref_offset(rg, pd->name), off = zeroc_model_param_offset(r->m, u, j);
      uint64_t ne = zeroc_param_numel(pd), lo = ui.shard_offset, hi = lo + ui.shard_numel;
      ZT_ASSERT_MSG(roff != UINT64_MAX, "unit %d param %s unknown", gu, pd->name);
      if (roff == UINT64_MAX || !ref->grad[rg]) continue;
      double d2 = 0, r2 = 0;
      int any = 0;
      for (uint64_t e = off > lo ? off : lo; e < off + ne && e < hi; e++) {
        double a = g[e - lo], b = ref->grad[rg][roff + (e - off)];
        d2 += (a - b) * (a - b);
        r2 += b * b;
        any = 1;
      }
      if (!any) continue;
      checked++;
      /* fp32: the tied gradient sums its two halves in another order */
      int ok = sqrt(d2) <= 1e-5 * sqrt(r2) + 1e-9;
      if (!ok)
        fprintf(stderr, "  [rank %d] unit %d (%s): relative gradient error %.3g\n", zt_rank(), gu,
                pd->name, sqrt(d2) / (sqrt(r2) + 1e-30));
      bad += !ok;
    }
    free(g);
  }
  ZT_ASSERT_MSG(bad == 0, "%d of %d parameters' gradients differ from the single-rank run", bad,
                checked);
  CU_ASSERT(checked > 0);
}

/* A pipeline of `pp` ranks (dp = world / pp, ZeRO `zero`) against the single
 * rank over STEPS steps; returns the last step's stats on this rank. */
static void check_pipeline(int pp, zeroc_pipeline_schedule_t kind, int v, int zero, int recompute) {
  int W = zt_world();
  if (W % pp) return;
  int dp = W / pp, b = 1; /* one sequence per micro-batch per dp rank */
  ref_t ref;
  run_reference(&ref, b * dp);
  run_t r;
  if (open_pipe(&r, pp, kind, v, b, zero, recompute)) {
    free_reference(&ref);
    return;
  }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(r.ctx);
  zeroc_pipeline_stats_t st;
  for (int k = 0; k < STEPS; k++) {
    batches_t bt;
    fill_batches(&bt, k, mesh->dp_rank * b, b);
    if (k == 0) { /* a step count other than the pipeline's micro-batches: refused, locally */
      ZT_OK(zeroc_model_set_accum(r.m, M + 1));
      CU_ASSERT_EQUAL(zeroc_pipeline_run(r.pl, bt.bp, &st), ZEROC_ERR_INVALID_ARG);
      ZT_ASSERT_MSG(strstr(zeroc_last_error(r.ctx), "the pipeline runs 4 micro-batches"),
                    "message: %s", zeroc_last_error(r.ctx));
      ZT_OK(zeroc_model_set_accum(r.m, 0));
    }
    ZT_OK(zeroc_pipeline_run(r.pl, bt.bp, &st));
    if (k == 0) compare_grads(&r, &ref);
    zeroc_step_info_t info;
    ZT_OK(zeroc_model_step(r.m, 1e-2f, &info));
    double el = fabs(info.loss - ref.loss[k]) / ref.loss[k];
    double en = fabs(info.grad_norm - ref.norm[k]) / ref.norm[k];
    ZT_ASSERT_MSG(el < 1e-5 && en < 1e-5, "step %d: loss %.8g vs single %.8g, norm %.8g vs %.8g", k,
                  info.loss, ref.loss[k], info.grad_norm, ref.norm[k]);
    /* the loss is the same number on every rank */
    double lm[2] = {info.loss, -info.loss};
    MPI_Allreduce(MPI_IN_PLACE, lm, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    ZT_ASSERT_MSG(lm[0] == -lm[1], "step %d: losses differ between ranks (%.9g .. %.9g)", k, lm[0],
                  -lm[1]);
  }
  CU_ASSERT(ref.loss[STEPS - 1] < ref.loss[0]);
  /* what the run reports: compute inside the run, sends as the schedule says */
  ZT_ASSERT_MSG(st.compute_ms > 0 && st.compute_ms <= st.run_ms && st.bubble >= 0 && st.bubble < 1,
                "stats: run %.3f ms, compute %.3f ms, bubble %.3f", st.run_ms, st.compute_ms,
                st.bubble);
  int sends = 0;
  for (int c = 0; c < v; c++) {
    int s = c * pp + mesh->pp_rank;
    sends += (s > 0) + (s < pp * v - 1);
  }
  uint64_t bytes = (uint64_t)b * CFG.seq * CFG.hidden * 4;
  ZT_ASSERT_MSG(st.sent_bytes == (uint64_t)sends * M * bytes, "sent %llu bytes, expected %llu",
                (unsigned long long)st.sent_bytes, (unsigned long long)sends * M * bytes);
  run_close(&r);
  free_reference(&ref);
}

static void test_1f1b(void) { check_pipeline(zt_world(), ZEROC_PIPELINE_1F1B, 1, 1, 0); }
static void test_interleaved(void) {
  check_pipeline(zt_world(), ZEROC_PIPELINE_INTERLEAVED, 2, 1, 0);
}
static void test_recompute_zero0(void) { check_pipeline(zt_world(), ZEROC_PIPELINE_1F1B, 1, 0, 1); }
static void test_gpipe(void) { check_pipeline(zt_world(), ZEROC_PIPELINE_GPIPE, 1, 1, 0); }
static void test_pp2_dp(void) {
  if (zt_world() < 4) return;
  check_pipeline(2, ZEROC_PIPELINE_1F1B, 1, 1, 0);
  check_pipeline(2, ZEROC_PIPELINE_INTERLEAVED, 2, 1, 1);
}

/* ZeRO-2/3 under a pipeline: one clear error on every rank, nobody waiting. */
static void test_refuses_zero3(void) {
  int pp = zt_world();
  zeroc_ctx_t *ctx = ctx_of(pp, 0);
  if (!ctx) return;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int NU = zeroc_gpt_num_units(&CFG), bounds[MAXU + 1];
  double cost[MAXU];
  zeroc_gpt_unit_costs(&CFG, cost);
  ZT_OK(zeroc_pipeline_partition(cost, NU, pp, bounds));
  int first = bounds[mesh->pp_rank], count = bounds[mesh->pp_rank + 1] - first, zero = 0;
  zeroc_gpt_stage_t st = {1, &first, &count, 1};
  zeroc_gpt_t *g = NULL;
  ZT_OK(gpt_stage(ctx, 1, 0, &st, &g));
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(g, &n);
  zeroc_shard_config_t s = shard_cfg(3, 0);
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, n, &s, &m));
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  pc.microbatches = M;
  pc.act_numel = (size_t)CFG.seq * CFG.hidden;
  zeroc_pipeline_t *pl = NULL;
  zeroc_result_t r = zeroc_pipeline_create(m, &zero, &n, &pc, &pl);
  CU_ASSERT_PTR_NULL(pl);
  /* every rank finds the problem itself and keeps its own error */
  ZT_ASSERT_MSG(r == ZEROC_ERR_UNSUPPORTED, "got %s", zeroc_result_name(r));
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "ZeRO stage 3: accepted stage 0 or 1"), "message: %s",
                zeroc_last_error(ctx));
  zeroc_model_destroy(m);
  zeroc_gpt_destroy(g);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

/* Pure arithmetic: the partition and the slots. */
static void test_partition_and_slots(void) {
  int b[5];
  double c1[] = {1, 1, 1, 1, 1, 1, 1, 1};
  ZT_OK(zeroc_pipeline_partition(c1, 8, 4, b));
  CU_ASSERT(b[0] == 0 && b[1] == 2 && b[2] == 4 && b[3] == 6 && b[4] == 8);
  double c2[] = {0.1, 5, 1, 1, 1, 1, 0.2}; /* the heavy unit alone bounds the step */
  ZT_OK(zeroc_pipeline_partition(c2, 7, 3, b));
  CU_ASSERT(b[0] == 0 && b[1] == 1 && b[2] == 2 && b[3] == 7);
  double c4[] = {0.1, 1, 1, 1, 1, 1, 1, 0.3}; /* ends light: balanced 3 + 3 blocks */
  ZT_OK(zeroc_pipeline_partition(c4, 8, 2, b));
  CU_ASSERT(b[1] == 4);
  double c3[] = {3, 1, 1, 1};
  ZT_OK(zeroc_pipeline_partition(c3, 4, 4, b));
  CU_ASSERT(b[1] == 1 && b[2] == 2 && b[3] == 3 && b[4] == 4);
  CU_ASSERT_EQUAL(zeroc_pipeline_partition(c3, 4, 5, b), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "4 units into 5 pipeline stages"), "%s",
                zeroc_last_error(NULL));
  /* the GPT: embedding first, head last, blocks balanced between */
  zeroc_gpt_config_t g = {
      .layers = 4, .hidden = 64, .heads = 4, .vocab = 256, .seq = 64, .batch = 4};
  double gc[6];
  zeroc_gpt_unit_costs(&g, gc);
  double sum = 0;
  for (int i = 0; i < 6; i++) sum += gc[i];
  CU_ASSERT(fabs(sum - 1) < 1e-12);
  ZT_OK(zeroc_pipeline_partition(gc, 6, 2, b));
  CU_ASSERT(b[1] == 3); /* embed + 2 blocks | 2 blocks + head */
  /* 1F1B keeps min(p - r, m) micro-batches; interleaved more, never above m v */
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  for (int p = 2; p <= 4; p++)
    for (int m = 1; m <= 8; m++)
      for (int r = 0; r < p; r++) {
        int w = 0;
        pc.microbatches = m;
        ZT_OK(zeroc_pipeline_slots(&pc, p, r, &w));
        ZT_ASSERT_MSG(w == (p - r < m ? p - r : m), "1f1b p %d m %d r %d: %d slots", p, m, r, w);
      }
  pc.schedule = ZEROC_PIPELINE_INTERLEAVED;
  pc.chunks = 2;
  pc.microbatches = 8;
  int w0 = 0, w3 = 0;
  ZT_OK(zeroc_pipeline_slots(&pc, 4, 0, &w0));
  ZT_OK(zeroc_pipeline_slots(&pc, 4, 3, &w3));
  ZT_ASSERT_MSG(w0 >= w3 && w0 <= 8 && w3 >= 1, "interleaved p 4 m 8 v 2: slots r0 %d, r3 %d", w0,
                w3);
  pc.microbatches = 6;
  CU_ASSERT_EQUAL(zeroc_pipeline_slots(&pc, 4, 0, &w0), ZEROC_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"partition and activation slots", test_partition_and_slots},
      {"1F1B on every rank matches the single-rank run", test_1f1b},
      {"interleaved 1F1B (v = 2) matches the single-rank run", test_interleaved},
      {"GPipe matches the single-rank run", test_gpipe},
      {"recompute with ZeRO-0 matches the single-rank run", test_recompute_zero0},
      {"pp 2 x dp 2 (ZeRO-1) matches the single-rank run", test_pp2_dp},
      {"ZeRO-3 under a pipeline is refused on every rank", test_refuses_zero3},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "pp_runtime", tests, 2, 4);
}
