/*
 * tests/test_reliability_numeric.c - a NaN or Inf in the gradients of any one
 * rank skips the optimizer step on every rank (master weights and Adam state
 * bitwise unchanged, the step count not advanced), the skip is counted, a
 * finite step resets the count, and more than max_skipped consecutive skips
 * stop every rank with ZEROC_ERR_NUMERIC. Every ZeRO stage, with gradient
 * accumulation, with optimizer state and parameters offloaded (host, NVMe
 * files), and under HSDP where the faulty rank is not replica 0.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N0 301 /* odd sizes: shards cut through parameters, padding exists */
#define N1 97

/* What the units read through their input: which rank poisons which step. */
typedef struct {
  int step;     /* 1-based optimizer step being computed */
  int micro;    /* micro-step */
  int bad_rank; /* -1: none */
  int bad_step, bad_micro, bad_unit;
  float bad;
} ctl_t;

static float target(int unit, int j) {
  return zeroc_rng_uniform(7, (uint64_t)unit + 1, (uint64_t)j) - 0.5f;
}

static zeroc_result_t fwd(zeroc_layer_io_t *io) {
  const ctl_t *c = io->in;
  if (io->unit == 1) {
    /* loss = 0.5 mean (w1 - t)^2 plus a rank-dependent constant: the reported
     * loss is the mean over ranks */
    const float *w = io->params[0];
    double s = 0;
    for (int j = 0; j < N1; j++) s += 0.5 * (w[j] - target(1, j)) * (w[j] - target(1, j));
    *io->loss = (float)(s / N1) + 0.01f * (float)zt_rank();
  }
  (void)c;
  io->out = (void *)io->in;
  return ZEROC_OK;
}

static zeroc_result_t bwd(zeroc_layer_io_t *io) {
  const ctl_t *c = io->in;
  int n = io->unit == 0 ? N0 : N1;
  const float *w = io->params[0];
  float *g = io->grads[0];
  /* a rank-dependent gradient, so that the reduction matters */
  for (int j = 0; j < n; j++)
    g[j] +=
        ((w[j] - target(io->unit, j)) / (float)n + 1e-3f * (float)(zt_rank() + 1)) * io->grad_scale;
  if (c->bad_rank == zt_rank() && c->bad_step == c->step && c->bad_micro == c->micro &&
      c->bad_unit == io->unit)
    g[n / 3] = c->bad;
  io->din = NULL;
  return ZEROC_OK;
}

static const zeroc_param_desc_t P0[] = {
    {.name = "w0", .ndim = 1, .shape = {N0}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.5f}};
static const zeroc_param_desc_t P1[] = {
    {.name = "w1", .ndim = 2, .shape = {N1, 1}, .init = ZEROC_INIT_UNIFORM, .init_scale = 0.5f}};
static const zeroc_layer_t LAYERS[] = {
    {.name = "u0", .nparams = 1, .params = P0, .shares = -1, .forward = fwd, .backward = bwd},
    {.name = "u1", .nparams = 1, .params = P1, .shares = -1, .forward = fwd, .backward = bwd}};

typedef struct {
  float *s[2][3]; /* unit x (master, m, v) */
} snap_t;

static void snapshot(zeroc_model_t *m, snap_t *sn) {
  for (int u = 0; u < 2; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(m, u, &ui));
    for (int k = 0; k < 3; k++) {
      sn->s[u][k] = malloc(ui.shard_numel * sizeof(float) + 4);
      ZT_OK(zeroc_model_get_shard(m, u, (zeroc_state_kind_t)k, sn->s[u][k]));
    }
  }
}

/* 1 when every shard of every state is bitwise equal to the snapshot. */
static int same_as(zeroc_model_t *m, const snap_t *sn) {
  int same = 1;
  for (int u = 0; u < 2; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(m, u, &ui));
    float *now = malloc(ui.shard_numel * sizeof(float) + 4);
    for (int k = 0; k < 3; k++) {
      ZT_OK(zeroc_model_get_shard(m, u, (zeroc_state_kind_t)k, now));
      same &= memcmp(now, sn->s[u][k], ui.shard_numel * sizeof(float)) == 0;
    }
    free(now);
  }
  return same;
}

static void snap_free(snap_t *sn) {
  for (int u = 0; u < 2; u++)
    for (int k = 0; k < 3; k++) free(sn->s[u][k]);
}

/* One optimizer step of `accum` micro-steps; returns zeroc_model_step's result. */
static zeroc_result_t train_step(zeroc_model_t *m, ctl_t *c, int accum, zeroc_step_info_t *info) {
  c->step = (int)zeroc_model_steps(m) + 1;
  for (int u = 0; u < accum; u++) {
    c->micro = u;
    ZT_OK(zeroc_model_forward(m, c));
    ZT_OK(zeroc_model_backward(m));
  }
  memset(info, 0, sizeof *info);
  return zeroc_model_step(m, 1e-2f, info);
}

static zeroc_offload_t g_off_opt = ZEROC_OFFLOAD_NONE, g_off_par = ZEROC_OFFLOAD_NONE;
static const char *g_nvme_dir;

/* A model on its own context (a context has channels for a few models' streams). */
static zeroc_model_t *make_model(int hsdp, int stage, int accum, int max_skipped) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, hsdp);
  if (!ctx) return NULL;
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = stage;
  sc.grad_accum = accum;
  sc.max_skipped = max_skipped;
  sc.clip = 1.0f;
  sc.seed = 5;
  sc.offload_optimizer = g_off_opt;
  sc.offload_params = g_off_par;
  sc.nvme_dir = g_nvme_dir;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, LAYERS, 2, &sc, &m));
  if (!m) zeroc_ctx_destroy(ctx);
  return m;
}

static void free_model(zeroc_model_t *m) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  zeroc_model_destroy(m);
  zeroc_ctx_destroy(ctx);
}

/* Every rank in turn poisons one gradient element with NaN, +Inf or -Inf in
 * one unit and micro-step: every rank skips, nothing changes, the next finite
 * step applies. */
static void check_skips(int hsdp, int stage, int accum) {
  zeroc_model_t *m = make_model(hsdp, stage, accum, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  const float bads[3] = {NAN, INFINITY, -INFINITY};
  ctl_t c = {0, 0, -1, 0, 0, 0, 0};
  zeroc_step_info_t info;
  ZT_OK(train_step(m, &c, accum, &info)); /* a finite first step: Adam state is non-zero */
  CU_ASSERT_EQUAL(info.skipped, 0);
  for (int r = 0; r < zt_world(); r++) {
    for (int b = 0; b < 3; b++) {
      uint64_t before = zeroc_model_steps(m);
      snap_t sn;
      snapshot(m, &sn);
      c.bad_rank = r;
      c.bad_step = (int)before + 1;
      c.bad_micro = (r + b) % accum;
      c.bad_unit = (r + b) % 2;
      c.bad = bads[b];
      ZT_OK(train_step(m, &c, accum, &info));
      ZT_ASSERT_MSG(info.skipped == 1 && info.consecutive_skips == 1,
                    "stage %d accum %d: rank %d poisoned unit %d with %g: skipped %d (%d in a row)",
                    stage, accum, r, c.bad_unit, c.bad, info.skipped, info.consecutive_skips);
      CU_ASSERT(!isfinite(info.grad_norm));
      CU_ASSERT(isfinite(info.loss)); /* the loss itself was finite */
      CU_ASSERT_EQUAL(zeroc_model_steps(m), before);
      CU_ASSERT_EQUAL(info.step, before);
      ZT_ASSERT_MSG(same_as(m, &sn), "stage %d: a skipped step changed the state", stage);
      snap_free(&sn);
      /* the next finite step applies and resets the count */
      c.bad_rank = -1;
      snapshot(m, &sn);
      ZT_OK(train_step(m, &c, accum, &info));
      CU_ASSERT_EQUAL(info.skipped, 0);
      CU_ASSERT_EQUAL(info.consecutive_skips, 0);
      CU_ASSERT(isfinite(info.grad_norm) && info.grad_norm > 0);
      CU_ASSERT_EQUAL(zeroc_model_steps(m), before + 1);
      CU_ASSERT(!same_as(m, &sn));
      snap_free(&sn);
    }
  }
  free_model(m);
}

static void test_skip_every_stage(void) {
  for (int stage = 0; stage <= 3; stage++) check_skips(1, stage, 1);
}

static void test_skip_with_accumulation(void) {
  check_skips(1, 3, 2);
  check_skips(1, 1, 2);
}

/* Offloaded state is skipped the same way (AdamW then runs on the host). */
static void test_skip_offloaded(void) {
  char *dir = zt_tempdir("zeroc-rel-nvme");
  g_off_opt = ZEROC_OFFLOAD_CPU;
  check_skips(1, 3, 1);
  g_off_par = ZEROC_OFFLOAD_CPU;
  check_skips(1, 3, 1);
  g_off_opt = ZEROC_OFFLOAD_NVME;
  g_off_par = ZEROC_OFFLOAD_NVME;
  g_nvme_dir = dir;
  check_skips(1, 3, 2);
  g_off_opt = g_off_par = ZEROC_OFFLOAD_NONE;
  g_nvme_dir = NULL;
  zt_rmtree(dir);
  free(dir);
}

/* HSDP: the poisoned rank is a replica other than 0, whose own shard is not
 * counted in the norm; the fault still reaches the norm through the reduction. */
static void test_skip_hsdp(void) {
  if (zt_world() < 4 || zt_world() % 2) return;
  check_skips(2, 3, 1);
}

/* max_skipped 2: two skips pass, the third stops every rank; the state is
 * the one before the streak. */
static void test_stop_after_max_skipped(void) {
  zeroc_model_t *m = make_model(1, 3, 1, 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  ctl_t c = {0, 0, -1, 0, 0, 0, 0};
  zeroc_step_info_t info;
  ZT_OK(train_step(m, &c, 1, &info));
  snap_t sn;
  snapshot(m, &sn);
  c.bad_rank = zt_world() - 1;
  c.bad = NAN;
  for (int k = 1; k <= 3; k++) {
    c.bad_step = (int)zeroc_model_steps(m) + 1; /* a skip does not advance the count */
    zeroc_result_t r = train_step(m, &c, 1, &info);
    CU_ASSERT_EQUAL(info.skipped, 1);
    CU_ASSERT_EQUAL(info.consecutive_skips, k);
    if (k < 3) {
      CU_ASSERT_EQUAL(r, ZEROC_OK);
    } else {
      CU_ASSERT_EQUAL(r, ZEROC_ERR_NUMERIC);
      const char *msg = zeroc_last_error(zeroc_model_ctx(m));
      ZT_ASSERT_MSG(strstr(msg, "3 consecutive steps had a non-finite gradient norm (limit 2)"),
                    "message: %s", msg);
    }
  }
  CU_ASSERT(same_as(m, &sn));
  CU_ASSERT_EQUAL(zeroc_model_steps(m), 1);
  snap_free(&sn);
  free_model(m);
}

/* Alternating bad and good steps never reach the limit (max_skipped 1). */
static void test_finite_step_resets_count(void) {
  zeroc_model_t *m = make_model(1, 2, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  ctl_t c = {0, 0, -1, 0, 0, 0, 0};
  zeroc_step_info_t info;
  for (int k = 0; k < 8; k++) {
    c.bad_rank = k % 2 ? -1 : k / 2 % zt_world();
    c.bad_step = (int)zeroc_model_steps(m) + 1;
    c.bad = k % 4 ? INFINITY : NAN;
    ZT_OK(train_step(m, &c, 1, &info));
    CU_ASSERT_EQUAL(info.skipped, k % 2 ? 0 : 1);
    CU_ASSERT_EQUAL(info.consecutive_skips, k % 2 ? 0 : 1);
  }
  CU_ASSERT_EQUAL(zeroc_model_steps(m), 4);
  free_model(m);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"a non-finite gradient on any rank skips the step everywhere (stages 0-3)",
       test_skip_every_stage},
      {"skips with gradient accumulation", test_skip_with_accumulation},
      {"skips with offloaded optimizer state and parameters (host, NVMe)", test_skip_offloaded},
      {"skips under HSDP when the faulty rank is not replica 0", test_skip_hsdp},
      {"more than max_skipped consecutive skips stop every rank", test_stop_after_max_skipped},
      {"a finite step resets the consecutive count", test_finite_step_resets_count},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "reliability_numeric", tests, 1, 0);
}
