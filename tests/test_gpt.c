/*
 * tests/test_gpt.c - the built-in GPT as zeroc layers: the whole model's
 * gradient against finite differences of its loss, activation recompute
 * giving the same gradients bit for bit, and ZeRO-3 on every rank matching the
 * single-rank run (fp32, cpu). With dropout: the gradient against finite
 * differences of the training loss (the masks are fixed by the batch's step and
 * slots), and evaluation untouched by it.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const zeroc_gpt_config_t GPT2 = {
    .layers = 2, .hidden = 16, .heads = 2, .vocab = 29, .seq = 6, .batch = 4}; /* L C NH V T B */
/* The Llama family: grouped-query (4 heads, 2 kv heads of size 4), SwiGLU of width 24, an
 * untied head and llama3 rope scaling whose original 8 positions put pair 0 in the blend
 * and pair 1 in the scaled band; and Qwen2's q/k/v biases with a tied head. */
static const zeroc_gpt_config_t LLAMA = {.layers = 2,
                                         .hidden = 16,
                                         .heads = 4,
                                         .vocab = 29,
                                         .seq = 6,
                                         .batch = 4,
                                         .family = ZEROC_GPT_FAMILY_LLAMA,
                                         .kv_heads = 2,
                                         .ffn = 24,
                                         .untied = 1,
                                         .norm_eps = 1e-5,
                                         .rope_theta = 5e5,
                                         .rope_factor = 4,
                                         .rope_low = 1,
                                         .rope_high = 4,
                                         .rope_original = 8};
static const zeroc_gpt_config_t QWEN = {.layers = 2,
                                        .hidden = 16,
                                        .heads = 4,
                                        .vocab = 29,
                                        .seq = 6,
                                        .batch = 4,
                                        .family = ZEROC_GPT_FAMILY_LLAMA,
                                        .kv_heads = 2,
                                        .ffn = 24,
                                        .qkv_bias = 1,
                                        .norm_eps = 1e-6,
                                        .rope_theta = 1e6};
static zeroc_gpt_config_t CFG; /* the model under test: GPT2 unless a test says otherwise */
enum { GB = 4 };                                              /* global batch (sequences) */

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_gpt_t *gpt;
  zeroc_model_t *m;
} run_t;

/* dropout > 0: a model with dropout */
static int run_open_ex(run_t *r, int self, int stage, int recompute, int B, float dropout) {
  memset(r, 0, sizeof *r);
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.threads = 1;
  cc.comm_timeout_s = 120;
  MPI_Comm sc = MPI_COMM_SELF;
  if (self) cc.mpi_comm = &sc;
  ZT_OK(zeroc_ctx_create(&r->ctx, &cc));
  if (!r->ctx) return -1;
  zeroc_gpt_options_t o = ZEROC_GPT_OPTIONS_INIT;
  o.batch = B;
  o.recompute = recompute;
  o.dropout = dropout;
  o.dropout_seed = 9;
  ZT_OK(zeroc_gpt_create_ex(r->ctx, &CFG, &o, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = ZEROC_SHARD_CONFIG_INIT;
  s.stage = stage;
  s.recompute = recompute;
  s.weight_decay = 0.1f;
  s.seed = 3;
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  return r->m ? 0 : -1;
}

static int run_open(run_t *r, int self, int stage, int recompute, int B) {
  return run_open_ex(r, self, stage, recompute, B, 0);
}

static void run_close(run_t *r) {
  zeroc_model_destroy(r->m);
  zeroc_gpt_destroy(r->gpt);
  if (r->ctx) ZT_OK(zeroc_ctx_finalize(r->ctx));
}

static void make_batch(int step, int32_t *in, int32_t *tg) {
  uint64_t s = 77 + (uint64_t)step;
  for (int i = 0; i < GB * CFG.seq; i++) in[i] = (int32_t)(zt_rand_u64(&s) % CFG.vocab);
  for (int i = 0; i < GB * CFG.seq; i++) tg[i] = (int32_t)((in[i] * 5 + 2) % CFG.vocab);
}

/* Loss of the current parameters on the batch (no state change). */
static double eval_loss(run_t *r, const zeroc_gpt_batch_t *b) {
  float l = 0;
  ZT_OK(zeroc_model_eval(r->m, b, &l));
  return l;
}

/* Loss of a training pass (with dropout's masks, the same for the same batch) on the
 * batch: forward, backward and a step at learning rate 0, which moves nothing. */
static double train_loss(run_t *r, const zeroc_gpt_batch_t *b) {
  zeroc_step_info_t info;
  ZT_OK(zeroc_model_forward(r->m, b));
  ZT_OK(zeroc_model_backward(r->m));
  ZT_OK(zeroc_model_step(r->m, 0.0f, &info));
  return info.loss;
}

/* Multiplies every matrix of the model by `f` (1 rank: a unit's shard is the whole unit).
 * At the initial 0.02 scale the attention scores are nearly uniform and the gradients of
 * q and k nearly vanish, below what finite differences resolve; sharper weights make
 * them, and so RoPE's backward, count. */
static void sharpen(run_t *r, float f) {
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, NULL);
  for (int u = 0; u < zeroc_model_num_units(r->m); u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r->m, u, &ui));
    float *w = malloc(4 * ui.shard_numel);
    ZT_OK(zeroc_model_get_shard(r->m, u, ZEROC_STATE_MASTER, w));
    for (int p = 0; p < L[u].nparams; p++) {
      if (L[u].params[p].ndim != 2) continue;
      uint64_t off = zeroc_model_param_offset(r->m, u, p), ne = zeroc_param_numel(&L[u].params[p]);
      for (uint64_t i = 0; i < ne; i++) w[off + i] *= f;
    }
    ZT_OK(zeroc_model_set_shard(r->m, u, ZEROC_STATE_MASTER, w));
    free(w);
  }
  ZT_OK(zeroc_model_sync_params(r->m));
}

/* The whole model's gradient against central differences of its loss: the
 * evaluation loss without dropout, the training loss with it; the matrices
 * scaled by `sharp` first. */
static void check_gradient_ex(float dropout, float sharp) {
  run_t r;
  if (run_open_ex(&r, 1, 0, 0, GB, dropout)) return;
  if (sharp != 1) sharpen(&r, sharp);
  double (*loss)(run_t *, const zeroc_gpt_batch_t *) = dropout > 0 ? train_loss : eval_loss;
  int32_t in[GB * 6], tg[GB * 6];
  make_batch(0, in, tg);
  zeroc_gpt_batch_t b = {GB, CFG.seq, in, tg, 0, 0};
  ZT_OK(zeroc_model_forward(r.m, &b));
  ZT_OK(zeroc_model_backward(r.m));
  int n = zeroc_model_num_units(r.m), bad = 0, checked = 0;
  uint64_t rs = 5;
  const zeroc_layer_t *L = zeroc_gpt_layers(r.gpt, NULL);
  /* every unit's gradient first: with dropout the losses below are training passes */
  float *grads[16] = {0};
  for (int u = 0; u < n && u < 16; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r.m, u, &ui));
    grads[u] = malloc(4 * ui.shard_numel);
    ZT_OK(zeroc_model_get_shard(r.m, u, ZEROC_STATE_GRAD, grads[u]));
  }
  if (dropout > 0) ZT_OK(zeroc_model_step(r.m, 0.0f, NULL)); /* nothing moves at lr 0 */
  for (int u = 0; u < n && u < 16; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r.m, u, &ui));
    float *grad = grads[u], *w = malloc(4 * ui.shard_numel);
    ZT_OK(zeroc_model_get_shard(r.m, u, ZEROC_STATE_MASTER, w));
    for (int p = 0; p < L[u].nparams; p++) {
      uint64_t off = zeroc_model_param_offset(r.m, u, p), ne = zeroc_param_numel(&L[u].params[p]);
      if (u == 0 && p == 0) ne = (uint64_t)CFG.vocab * CFG.hidden; /* real wte rows only */
      for (int t = 0; t < 3; t++) {
        uint64_t e = off + zt_rand_u64(&rs) % ne;
        float keep = w[e];
        /* central differences at h and h/2, Richardson-extrapolated to cancel
         * the h^2 term: the residual stream's LayerNorms make the loss strongly
         * curved along some parameters */
        double dq[2];
        for (int q = 0; q < 2; q++) {
          const float h = q ? 2.5e-3f : 5e-3f;
          w[e] = keep + h;
          ZT_OK(zeroc_model_set_shard(r.m, u, ZEROC_STATE_MASTER, w));
          ZT_OK(zeroc_model_sync_params(r.m));
          double lp = loss(&r, &b);
          w[e] = keep - h;
          ZT_OK(zeroc_model_set_shard(r.m, u, ZEROC_STATE_MASTER, w));
          ZT_OK(zeroc_model_sync_params(r.m));
          double lm = loss(&r, &b);
          dq[q] = (lp - lm) / (2.0 * h);
        }
        w[e] = keep;
        ZT_OK(zeroc_model_set_shard(r.m, u, ZEROC_STATE_MASTER, w));
        ZT_OK(zeroc_model_sync_params(r.m));
        double fd = (4.0 * dq[1] - dq[0]) / 3.0, g = grad[e];
        /* fp32 forward: the loss carries ~1e-7 relative noise, so the quotient
         * is good to ~1e-4 absolute at these steps */
        int ok = fabs(fd - g) <= 3e-4 + 3e-2 * fabs(g);
        if (!ok)
          fprintf(stderr, "  unit %d param %s elem %llu: backward %.6g, finite difference %.6g\n", u,
                  L[u].params[p].name, (unsigned long long)(e - off), g, fd);
        bad += !ok;
        checked++;
      }
    }
    free(grad);
    free(w);
  }
  ZT_ASSERT_MSG(bad == 0, "%d of %d gradient elements disagree with finite differences", bad, checked);
  int nparams = 0;
  for (int u = 0; u < n; u++) nparams += L[u].nparams;
  CU_ASSERT(checked >= 3 * nparams && nparams >= (CFG.family ? 6 : 12) * CFG.layers + 2);
  /* the step after a forward/backward still works */
  if (dropout > 0) {
    ZT_OK(zeroc_model_forward(r.m, &b));
    ZT_OK(zeroc_model_backward(r.m));
  }
  ZT_OK(zeroc_model_step(r.m, 1e-3f, NULL));
  run_close(&r);
}

static void check_gradient(float dropout) { check_gradient_ex(dropout, 1); }

static void test_gradient_finite_differences(void) {
  CFG = GPT2;
  check_gradient(0);
}

/* The Llama family's blocks (RMSNorm, RoPE with llama3 scaling, grouped-query attention,
 * SwiGLU) and heads, untied and tied with q/k/v biases. */
static void test_llama_gradient(void) {
  CFG = LLAMA;
  check_gradient(0);
  check_gradient_ex(0, 8);
  CFG = QWEN;
  check_gradient_ex(0, 8);
  CFG = GPT2;
}

/* Dropout 0.3 on the attention probabilities, both projections and the embedding. */
static void test_dropout_gradient(void) { check_gradient(0.3f); }

/* zeroc_model_eval of a model with dropout is the model without it, bit for bit;
 * a training pass drops (its loss differs). */
static void test_dropout_eval(void) {
  int32_t in[GB * 6], tg[GB * 6];
  make_batch(2, in, tg);
  zeroc_gpt_batch_t b = {GB, CFG.seq, in, tg, 0, 0};
  double ev[2], tr[2];
  for (int d = 0; d < 2; d++) {
    run_t r;
    if (run_open_ex(&r, 1, 0, 0, GB, d ? 0.3f : 0)) return;
    ev[d] = eval_loss(&r, &b);
    tr[d] = train_loss(&r, &b);
    run_close(&r);
  }
  ZT_ASSERT_MSG(ev[0] == ev[1], "evaluation with dropout %.9g, without %.9g", ev[1], ev[0]);
  ZT_ASSERT_MSG(tr[0] == ev[0], "a training pass without dropout %.9g, evaluation %.9g", tr[0],
                ev[0]);
  ZT_ASSERT_MSG(fabs(tr[1] - ev[1]) > 1e-4, "a training pass with dropout 0.3 kept the loss %.9g",
                tr[1]);
}

/* Recompute keeps only block outputs, then recomputes: same gradients, same bits. */
static void test_recompute_bitwise(void) {
  float *g[2][8] = {{0}};
  size_t sz[8];
  for (int rc = 0; rc < 2; rc++) {
    run_t r;
    if (run_open(&r, 1, 3, rc, GB)) return;
    int32_t in[GB * 6], tg[GB * 6];
    make_batch(1, in, tg);
    zeroc_gpt_batch_t b = {GB, CFG.seq, in, tg, 0, 0};
    ZT_OK(zeroc_model_forward(r.m, &b));
    ZT_OK(zeroc_model_backward(r.m));
    for (int u = 0; u < zeroc_model_num_units(r.m); u++) {
      zeroc_unit_info_t ui;
      ZT_OK(zeroc_model_unit_info(r.m, u, &ui));
      sz[u] = ui.shard_numel;
      g[rc][u] = malloc(4 * sz[u]);
      ZT_OK(zeroc_model_get_shard(r.m, u, ZEROC_STATE_GRAD, g[rc][u]));
    }
    ZT_OK(zeroc_model_step(r.m, 1e-3f, NULL));
    run_close(&r);
  }
  for (int u = 0; u < CFG.layers + 2; u++) {
    ZT_ASSERT_MSG(memcmp(g[0][u], g[1][u], 4 * sz[u]) == 0, "unit %d gradients differ with recompute", u);
    free(g[0][u]);
    free(g[1][u]);
  }
}

/* ZeRO-3 over every rank (each its slice of the global batch) matches the
 * single-rank run: losses and gradient norms over 4 steps. */
static void test_sharded_matches_single(void) {
  float loss[2][4], norm[2][4];
  int W = zt_world();
  if (GB % W) return;
  for (int par = 0; par < 2; par++) {
    run_t r;
    int B = par ? GB / W : GB;
    if (run_open(&r, !par, par ? 3 : 0, 0, B)) return;
    int d = par ? zt_rank() : 0;
    for (int k = 0; k < 4; k++) {
      int32_t in[GB * 6], tg[GB * 6];
      make_batch(10 + k, in, tg);
      zeroc_gpt_batch_t b = {B, CFG.seq, in + d * B * CFG.seq, tg + d * B * CFG.seq, 0, 0};
      ZT_OK(zeroc_model_forward(r.m, &b));
      ZT_OK(zeroc_model_backward(r.m));
      zeroc_step_info_t info;
      ZT_OK(zeroc_model_step(r.m, 1e-2f, &info));
      loss[par][k] = info.loss;
      norm[par][k] = info.grad_norm;
    }
    run_close(&r);
  }
  for (int k = 0; k < 4; k++) {
    double el = fabs(loss[1][k] - loss[0][k]) / loss[0][k], en = fabs(norm[1][k] - norm[0][k]) / norm[0][k];
    ZT_ASSERT_MSG(el < 1e-5 && en < 1e-5, "step %d: loss %.8g vs %.8g, norm %.8g vs %.8g", k, loss[1][k],
                  loss[0][k], norm[1][k], norm[0][k]);
  }
  CU_ASSERT(loss[0][3] < loss[0][0]);
}

/* Llama: recompute bit for bit, ZeRO-3 on every rank equal to one rank. */
static void test_llama_recompute_sharded(void) {
  CFG = LLAMA;
  test_recompute_bitwise();
  test_sharded_matches_single();
  CFG = GPT2;
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"whole-model gradient against finite differences", test_gradient_finite_differences},
      {"activation recompute gives identical gradients", test_recompute_bitwise},
      {"ZeRO-3 on every rank matches the single-rank run", test_sharded_matches_single},
      {"with dropout: gradient against finite differences of the training loss",
       test_dropout_gradient},
      {"with dropout: evaluation unchanged, training drops", test_dropout_eval},
      {"Llama and Qwen2 blocks: gradient against finite differences", test_llama_gradient},
      {"Llama: recompute bitwise, ZeRO-3 on every rank matches one rank",
       test_llama_recompute_sharded},
      ZT_END,
  };
  CFG = GPT2;
  return zt_run_mpi(argc, argv, "gpt", tests, 1, 0);
}
