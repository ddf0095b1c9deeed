/*
 * tests/test_plan_cp.c - the planner's context parallelism (docs/cp.md): a
 * rank's activations are those of T/cp tokens, the ring's and Ulysses' buffers
 * and bytes sent by hand, model states sharded over dp x cp, the checks, and
 * the --all search, which turns to cp where activations do not fit one rank.
 */
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "zeroc/plan.h"

static zeroc_plan_config_t gpt(int layers, int hidden, int heads, int vocab, int seq, int batch) {
  zeroc_plan_config_t c = ZEROC_PLAN_CONFIG_INIT;
  zeroc_gpt_config_t m = {.layers = layers,
                          .hidden = hidden,
                          .heads = heads,
                          .vocab = vocab,
                          .seq = seq,
                          .batch = batch};
  c.model = m;
  return c;
}

/* Activations at cp N with sequence T are those of cp 1 with T/N (flash
 * attention keeps one log-sum-exp per local token and head); with naive
 * attention the scores are (T/N) x T per head. */
static void test_activations_local_tokens(void) {
  for (int N = 2; N <= 8; N *= 2) {
    zeroc_plan_config_t c = gpt(4, 256, 8, 1000, 1024, 2), one = c;
    zeroc_plan_result_t r, r1;
    c.gpus = N;
    c.cp = N;
    one.model.seq = 1024 / N;
    ZT_OK(zeroc_plan_compute(&c, &r));
    ZT_OK(zeroc_plan_compute(&one, &r1));
    ZT_ASSERT_MSG(r.device.activations == r1.device.activations,
                  "cp %d: activations %.0f, cp 1 at T/%d %.0f", N, r.device.activations, N,
                  r1.device.activations);
    /* naive: the scores of a layer grow by B NH (T/N) (T - T/N) e */
    c.flash_attention = one.flash_attention = 0;
    ZT_OK(zeroc_plan_compute(&c, &r));
    ZT_OK(zeroc_plan_compute(&one, &r1));
    double T = 1024, Tl = T / N, extra = 4.0 * 2 * 8 * Tl * (T - Tl) * 2;
    ZT_ASSERT_MSG(fabs(r.device.activations - r1.device.activations - extra) < 0.5,
                  "cp %d naive: %.0f - %.0f != %.0f", N, r.device.activations,
                  r1.device.activations, extra);
  }
}

/* The cp buffers and bytes sent, by hand: X = B (T/N) (C/tp) e. ZeRO-0 on
 * gpus = cp keeps the same model states and pools as one rank, so the buffers
 * differ by exactly the cp buffers. */
static void test_buffers_and_bytes_hand(void) {
  const int L = 4, C = 256, NH = 8, T = 512, B = 2;
  for (int t = 1; t <= 2; t++)
    for (int N = 2; N <= 4; N *= 2)
      for (int mode = 0; mode < 2; mode++)
        for (int rc = 0; rc < 2; rc++) {
          zeroc_plan_config_t c = gpt(L, C, NH, 1000, T, B), one;
          zeroc_plan_result_t r, r1;
          c.zero = 0;
          c.param_bytes = 4;
          c.tp = t;
          c.recompute = rc ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
          one = c;
          one.gpus = t;
          c.gpus = t * N;
          c.cp = N;
          c.cp_mode = mode ? ZEROC_CP_MODE_ULYSSES : ZEROC_CP_MODE_RING;
          ZT_OK(zeroc_plan_compute(&c, &r));
          ZT_OK(zeroc_plan_compute(&one, &r1));
          double e = 4, Cl = (double)C / t, X = B * (T / N) * Cl * e, ch = B * T / (2.0 * N);
          double buf = mode == 0 ? 8 * X + ch * Cl * e + ch * (NH / t) * 4.0 : 14 * X;
          ZT_ASSERT_MSG(r.device.buffers - r1.device.buffers == buf,
                        "tp %d cp %d mode %d: buffers %.0f - %.0f, hand %.0f", t, N, mode,
                        r.device.buffers, r1.device.buffers, buf);
          ZT_ASSERT_MSG(r.device.params == r1.device.params &&
                            r.device.optimizer == r1.device.optimizer,
                        "ZeRO-0 with cp keeps every parameter");
          double fwd = mode == 0 ? (N - 1) * 2 * X : 4 * X * (N - 1) / N;
          double bwd = mode == 0 ? (N - 1) * 2 * X + N * 2 * X : 8 * X * (N - 1) / N;
          double step = L * ((rc ? 2 : 1) * fwd + bwd);
          ZT_ASSERT_MSG(
              r.comm.cp_forward == fwd && r.comm.cp_backward == bwd && fabs(r.comm.cp - step) < 0.5,
              "tp %d cp %d mode %d rc %d: sends %.0f / %.0f / %.0f, hand %.0f / %.0f / "
              "%.0f",
              t, N, mode, rc, r.comm.cp_forward, r.comm.cp_backward, r.comm.cp, fwd, bwd, step);
          ZT_ASSERT_MSG(r.time.cp > 0 && r1.time.cp == 0 && r1.comm.cp == 0,
                        "cp time %g, cp 1 time %g bytes %g", r.time.cp, r1.time.cp, r1.comm.cp);
          /* (3N-2) 2X and 12X (N-1)/N per block, forward + backward */
          double per = mode == 0 ? (3.0 * N - 2) * 2 * X : 12 * X * (N - 1) / N;
          ZT_ASSERT_MSG(fabs(fwd + bwd - per) < 0.5, "per block %.0f, hand %.0f", fwd + bwd, per);
        }
}

/* ZeRO shards over dp_shard x cp: 8 ranks as cp 4 x dp 2 hold what 8 dp
 * ranks hold, and the global batch counts dp only. */
static void test_model_states_over_dp_cp(void) {
  zeroc_plan_config_t c = gpt(4, 256, 8, 1000, 512, 2), d;
  zeroc_plan_result_t r, rd;
  c.gpus = 8;
  c.cp = 4;
  d = c;
  d.cp = 1;
  for (int z = 1; z <= 3; z++) {
    c.zero = d.zero = z;
    ZT_OK(zeroc_plan_compute(&c, &r));
    ZT_OK(zeroc_plan_compute(&d, &rd));
    ZT_ASSERT_MSG(r.dp == 2 && r.shard == 8 && rd.shard == 8 && r.global_batch == 2 * 2 &&
                      r.device.optimizer == rd.device.optimizer &&
                      r.device.params == rd.device.params && r.device.grads == rd.device.grads,
                  "zero %d: dp %d shard %d (dp-only %d), optimizer %.0f vs %.0f", z, r.dp, r.shard,
                  rd.shard, r.device.optimizer, rd.device.optimizer);
  }
  c.hsdp = 2;
  c.zero = 3;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(r.shard == 4, "hsdp 2 of dp 2 x cp 4: shard %d, want 4", r.shard);
}

static void expect_invalid(const zeroc_plan_config_t *c, const char *words) {
  zeroc_plan_result_t r;
  zeroc_result_t res = zeroc_plan_compute(c, &r);
  ZT_ASSERT_MSG(res == ZEROC_ERR_INVALID_ARG && strstr(zeroc_last_error(NULL), words),
                "want INVALID_ARG naming '%s', got %d: %s", words, (int)res,
                zeroc_last_error(NULL));
}

static void test_checks(void) {
  zeroc_plan_config_t c = gpt(4, 256, 8, 1000, 90, 2);
  c.gpus = 2;
  c.cp = 2; /* 2 x 2 chunks do not divide 90 tokens */
  expect_invalid(&c, "zigzag");
  c.model.seq = 128;
  c.gpus = 8;
  c.cp = 16; /* does not divide 8 ranks */
  expect_invalid(&c, "cp 16 must divide gpus 8");
  c.cp = 4;
  c.tp = 4; /* 8 heads / tp 4 = 2 heads: Ulysses cp 4 cannot split them */
  c.gpus = 16;
  c.cp_mode = ZEROC_CP_MODE_ULYSSES;
  expect_invalid(&c, "ulysses");
  c.cp_mode = ZEROC_CP_MODE_RING; /* the ring has no head cap */
  zeroc_plan_result_t r;
  ZT_OK(zeroc_plan_compute(&c, &r));
  c.cp_mode = (zeroc_cp_mode_t)7;
  expect_invalid(&c, "cp_mode 7");
  c.cp_mode = ZEROC_CP_MODE_RING;
  c.cp = 0;
  expect_invalid(&c, "cp 0");
}

/* A sequence whose activations do not fit one GPU: only cp layouts come back
 * from --all, each planned as zeroc_plan_compute plans it; without cp
 * (unset: cp 1) nothing fits. */
static void test_search_turns_to_cp(void) {
  zeroc_plan_config_t c = gpt(24, 1024, 16, 50257, 131072, 1);
  zeroc_plan_result_t *v = NULL;
  size_t n = 0;
  c.gpus = 8;
  c.gpu_mem_gib = 24;
  ZT_OK(zeroc_plan_search(&c, 8, &v, &n));
  ZT_ASSERT_MSG(n == 0, "128K tokens, 24 GiB, no cp: %zu layouts fit", n);
  zeroc_plan_free(v);
  c.cp = 8;
  ZT_OK(zeroc_plan_search(&c, 8, &v, &n));
  ZT_ASSERT_MSG(n > 0, "128K tokens, 24 GiB, cp up to 8: nothing fits");
  int ring = 0, uly = 0;
  for (size_t i = 0; i < n; i++) {
    const zeroc_plan_result_t *r = &v[i];
    ZT_ASSERT_MSG(r->cfg.cp > 1 && r->fits && r->cfg.tp * r->cfg.pp * r->cfg.cp * r->dp == 8 &&
                      r->global_batch == 8,
                  "#%zu: cp %d tp %d pp %d dp %d batch %lld", i, r->cfg.cp, r->cfg.tp, r->cfg.pp,
                  r->dp, (long long)r->global_batch);
    ring |= r->cfg.cp_mode == ZEROC_CP_MODE_RING;
    uly |= r->cfg.cp_mode == ZEROC_CP_MODE_ULYSSES;
    zeroc_plan_result_t again;
    ZT_OK(zeroc_plan_compute(&r->cfg, &again));
    ZT_ASSERT_MSG(again.device.total == r->device.total && again.time.total == r->time.total,
                  "#%zu: compute gives %g B, search %g B", i, again.device.total, r->device.total);
  }
  ZT_ASSERT_MSG(ring && uly, "both modes among the layouts: ring %d, ulysses %d", ring, uly);
  zeroc_plan_free(v);
  /* cp_mode set: only that mode */
  c.cp_mode = ZEROC_CP_MODE_ULYSSES;
  ZT_OK(zeroc_plan_search(&c, 8, &v, &n));
  for (size_t i = 0; i < n; i++) CU_ASSERT(v[i].cfg.cp_mode == ZEROC_CP_MODE_ULYSSES);
  zeroc_plan_free(v);
}

int main(void) {
  static const zt_test_t tests[] = {
      {"activations are those of T/cp tokens", test_activations_local_tokens},
      {"ring and Ulysses buffers and bytes by hand", test_buffers_and_bytes_hand},
      {"model states shard over dp x cp", test_model_states_over_dp_cp},
      {"cp checks", test_checks},
      {"--all turns to cp for long sequences", test_search_turns_to_cp},
      ZT_END};
  return zt_run("plan cp", tests);
}
