/*
 * tests/test_train.c - the trainer (zeroc/train.h): a config not made with
 * ZEROC_TRAIN_CONFIG_INIT and an inconsistent one are refused with a message,
 * unset fields get the library's defaults, the step loop numbers and ends its
 * steps and follows the LR schedule, and a run saved half-way and resumed
 * gives bitwise the losses of the run that went straight through; the
 * held-out loss of zeroc_trainer_evaluate, its size (val_tokens resolved to
 * global batches), its cadence in the step's metrics (val_every), which leaves
 * the training losses bitwise as they were, and val_data checked at create;
 * the host waits for the device a fixed number of times per step, however
 * many micro-steps it has (the losses stay on the device until the step).
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "runtime/runtime.h"
#include "testutil.h"
#include "zeroc/train.h"

/* a very small GPT: quick on one core */
static zeroc_train_config_t small_config(int steps) {
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "tiny";
  c.layers = 1;
  c.seq = 16;
  c.batch = 2;
  c.steps = steps;
  c.lr = 3e-3;
  return c;
}

static void test_config_refused(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  zeroc_train_config_t c;
  memset(&c, 0, sizeof c);
  zeroc_trainer_t *tr = (zeroc_trainer_t *)&c; /* must be cleared */
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(tr);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "ZEROC_TRAIN_CONFIG_INIT") != NULL, "message: %s",
                zeroc_last_error(ctx));
  CU_ASSERT_STRING_EQUAL(zeroc_trainer_create_phase(), "config");
  c = small_config(2);
  c.vpp = 2; /* chunks without a pipeline */
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "vpp 2") != NULL, "message: %s",
                zeroc_last_error(ctx));
  c = small_config(2);
  c.save_every = 1; /* without a directory */
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  zeroc_trainer_destroy(NULL);
  zeroc_ctx_finalize(ctx);
}

static void test_defaults_and_steps(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.layers = 1;
  c.seq = 16;
  c.batch = 2;
  c.steps = 3;
  zeroc_trainer_t *tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (!tr) {
    zeroc_ctx_finalize(ctx);
    return;
  }
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  CU_ASSERT_STRING_EQUAL(in.config.model, "tiny");
  CU_ASSERT_STRING_EQUAL(in.config.data, "synthetic");
  CU_ASSERT_EQUAL(in.config.zero, 3);
  CU_ASSERT_EQUAL(in.config.grad_accum, 1);
  CU_ASSERT_EQUAL(in.config.schedule, ZEROC_LR_COSINE);
  CU_ASSERT_DOUBLE_EQUAL(in.config.lr, 3e-4, 1e-12);
  CU_ASSERT_EQUAL(in.config.spike_window, 50);
  CU_ASSERT_EQUAL(in.global_batch, 2 * zt_world());
  CU_ASSERT_EQUAL(in.start_step, 0);
  zeroc_train_metrics_t m;
  for (int s = 0; s < 3; s++) {
    ZT_OK(zeroc_trainer_step(tr, &m));
    CU_ASSERT_EQUAL(m.step, s + 1);
    CU_ASSERT_EQUAL(m.done, s == 2);
    ZT_ASSERT_MSG(isfinite(m.loss) && m.loss > 0 && m.grad_norm > 0, "step %d: loss %g norm %g",
                  m.step, m.loss, m.grad_norm);
    CU_ASSERT_EQUAL(m.lr, zeroc_train_lr_at(&in.config, s));
    CU_ASSERT_EQUAL(m.tokens, 2.0 * 16 * zt_world());
    CU_ASSERT(m.peak_device > 0);
  }
  CU_ASSERT_EQUAL(zeroc_trainer_steps_done(tr), 3);
  ZT_OK(zeroc_trainer_step(tr, &m)); /* after the last: nothing, done */
  CU_ASSERT_EQUAL(m.step, 0);
  CU_ASSERT_EQUAL(m.done, 1);
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
}

/* steps 1..n of a run of `total` steps (resumed from `resume` when given); the
 * checkpoint of step n into `save` when given. Losses into loss[step - 1]. */
static void run(int total, int n, const char *resume, const char *save, float *loss) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  zeroc_train_config_t c = small_config(total);
  c.resume = resume;
  zeroc_trainer_t *tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_train_metrics_t m;
    while (zeroc_trainer_steps_done(tr) < n) {
      zeroc_result_t r = zeroc_trainer_step(tr, &m);
      ZT_OK(r);
      if (r) break;
      loss[m.step - 1] = (float)m.loss;
    }
    if (save) ZT_OK(zeroc_trainer_save(tr, save));
  }
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
}

static void test_resume_bitwise(void) {
  char dir[256] = "";
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-train");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!dir[0]) {
    CU_FAIL("no temporary directory");
    return;
  }
  float straight[6] = {0}, split[6] = {0};
  run(6, 6, NULL, NULL, straight);
  run(6, 3, NULL, dir, split);
  run(6, 6, dir, NULL, split);
  for (int s = 0; s < 6; s++)
    ZT_ASSERT_MSG(memcmp(&straight[s], &split[s], sizeof(float)) == 0,
                  "step %d: loss %.9g straight, %.9g saved and resumed", s + 1, straight[s],
                  split[s]);
  CU_ASSERT(isfinite(straight[5]) && straight[5] > 0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
}

/* After a few steps the held-out loss is finite, the same on every rank, and
 * near the training loss (the same source); without val_data it is refused. */
static void test_evaluate(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  zeroc_train_config_t c = small_config(4);
  zeroc_trainer_t *tr = NULL;
  double loss = 0;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) CU_ASSERT_EQUAL(zeroc_trainer_evaluate(tr, &loss), ZEROC_ERR_INVALID_ARG);
  zeroc_trainer_destroy(tr);
  c.val_data = "synthetic";
  c.val_tokens = 4 * 2 * 16 * zt_world(); /* 4 global batches */
  tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_train_metrics_t m;
    do ZT_OK(zeroc_trainer_step(tr, &m));
    while (!m.done && m.step > 0);
    ZT_OK(zeroc_trainer_evaluate(tr, &loss));
    double hi = loss, lo = loss;
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(hi, lo);
    ZT_ASSERT_MSG(isfinite(loss) && fabs(loss - m.loss) < 0.3, "held-out loss %g, training %g",
                  loss, m.loss);
    double again = 0; /* nothing of the training state changed */
    ZT_OK(zeroc_trainer_evaluate(tr, &again));
    CU_ASSERT_EQUAL(again, loss);
  }
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
}

/* Steps 1..n with val_every `every` (0: off): the losses, the bytes sent, and
 * the metrics' evaluation fields; the held-out loss after the run into *after. */
static void run_val(int n, int every, float *loss, uint64_t *bytes, int *evaluated, double *val,
                    double *after) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  zeroc_train_config_t c = small_config(n);
  c.val_data = "synthetic";
  c.val_tokens = 3 * 32 * zt_world() - 1; /* rounds up to 3 global batches */
  c.val_every = every;
  zeroc_trainer_t *tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_train_info_t in;
    zeroc_trainer_info(tr, &in);
    CU_ASSERT_EQUAL(in.val_batches, 3);
    CU_ASSERT_EQUAL(in.val.kind, ZEROC_DATA_SYNTHETIC);
    zeroc_train_metrics_t m;
    for (int s = 0; s < n; s++) {
      zeroc_result_t r = zeroc_trainer_step(tr, &m);
      ZT_OK(r);
      if (r) break;
      loss[s] = (float)m.loss;
      bytes[s] = m.comm_bytes;
      evaluated[s] = m.evaluated;
      val[s] = m.val_loss;
      CU_ASSERT(m.evaluated ? m.val_ms > 0 : m.val_ms == 0);
    }
    ZT_OK(zeroc_trainer_evaluate(tr, after));
  }
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
}

/* val_every 2 over 5 steps: evaluated after steps 2, 4 and the last (5), with
 * the held-out loss of the model then (the last one is what evaluate gives
 * after the run); the training losses are bitwise those of the run without. */
static void test_val_every(void) {
  float plain[5] = {0}, with[5] = {0};
  uint64_t b0[5] = {0}, b[5] = {0};
  int ev[5] = {0}, ev0[5] = {0};
  double val[5], val0[5], after = 0, after0 = 0;
  run_val(5, 0, plain, b0, ev0, val0, &after0);
  run_val(5, 2, with, b, ev, val, &after);
  for (int s = 0; s < 5; s++) {
    ZT_ASSERT_MSG(memcmp(&plain[s], &with[s], sizeof(float)) == 0,
                  "step %d: loss %.9g without evaluation, %.9g with", s + 1, plain[s], with[s]);
    /* the evaluation's gathers are not the next step's communication */
    ZT_ASSERT_MSG(b0[s] == b[s], "step %d: %llu bytes sent without evaluation, %llu with", s + 1,
                  (unsigned long long)b0[s], (unsigned long long)b[s]);
    CU_ASSERT_EQUAL(ev0[s], 0);
    CU_ASSERT(isnan(val0[s]));
    int want = s == 1 || s == 3 || s == 4;
    ZT_ASSERT_MSG(ev[s] == want, "step %d: evaluated %d, expected %d", s + 1, ev[s], want);
    if (want)
      ZT_ASSERT_MSG(isfinite(val[s]) && val[s] > 0, "step %d: val_loss %g", s + 1, val[s]);
    else
      CU_ASSERT(isnan(val[s]));
  }
  CU_ASSERT(val[1] > val[4]); /* it learns */
  CU_ASSERT_EQUAL(val[4], after);
  CU_ASSERT_EQUAL(after, after0); /* the same model either way */
}

/* val_tokens resolved to whole global batches (default 65536); the rules;
 * llm.c shards as val_data: at most one pass, and a token outside the
 * vocabulary stops create with the data layer's message. */
static void test_val_config(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  int w = zt_world(), per = 2 * 16 * w;
  zeroc_trainer_t *tr = NULL;
  zeroc_train_info_t in;
  const int64_t tokens[] = {0, 1, per, per + 1, 65536};
  const int want[] = {(65536 + per - 1) / per, 1, 1, 2, (65536 + per - 1) / per};
  for (int i = 0; i < 5; i++) {
    zeroc_train_config_t c = small_config(1);
    c.val_data = "synthetic";
    c.val_tokens = tokens[i];
    ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
    if (!tr) continue;
    zeroc_trainer_info(tr, &in);
    ZT_ASSERT_MSG(in.val_batches == want[i], "val_tokens %lld: %d global batches, expected %d",
                  (long long)tokens[i], in.val_batches, want[i]);
    CU_ASSERT_EQUAL(in.config.val_tokens, tokens[i] ? tokens[i] : 65536);
    zeroc_trainer_destroy(tr);
    tr = NULL;
  }
  zeroc_train_config_t c = small_config(1);
  c.val_every = 2; /* without val_data */
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "val_every needs val_data") != NULL, "message: %s",
                zeroc_last_error(ctx));
  c = small_config(1);
  c.val_data = "synthetic";
  c.val_tokens = -1;
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "val_tokens -1") != NULL, "message: %s",
                zeroc_last_error(ctx));
  /* shards: 5 global batches' sequences (plus the last target), then one bad token */
  char dir[256] = "";
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-val");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!dir[0]) {
    CU_FAIL("no temporary directory");
    zeroc_ctx_finalize(ctx);
    return;
  }
  char good[300], bad[300];
  snprintf(good, sizeof good, "%s/good.bin", dir);
  snprintf(bad, sizeof bad, "%s/bad.bin", dir);
  size_t n = (size_t)5 * per + 1;
  if (zt_rank() == 0) {
    int32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; t && i < n; i++) t[i] = (int32_t)((i * 7) % 256);
    const char *paths[2] = {good, bad};
    for (int f = 0; t && f < 2; f++) {
      if (f) t[n / 2] = 300; /* the vocabulary is 256 */
      zeroc_shard_writer_t *sw = NULL;
      ZT_OK(zeroc_shard_writer_create(paths[f], &sw));
      ZT_OK(zeroc_shard_writer_append(sw, t, n));
      ZT_OK(zeroc_shard_writer_finish(sw));
      zeroc_shard_writer_destroy(sw);
    }
    free(t);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  c = small_config(1);
  c.val_data = good;
  c.val_tokens = 1000000; /* more than the file: one pass */
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_trainer_info(tr, &in);
    CU_ASSERT_EQUAL(in.val_batches, 5);
    CU_ASSERT_EQUAL(in.val.num_tokens, n);
    double l = 0;
    ZT_OK(zeroc_trainer_evaluate(tr, &l));
    CU_ASSERT(isfinite(l) && l > 0);
  }
  zeroc_trainer_destroy(tr);
  tr = NULL;
  c.val_data = bad;
  CU_ASSERT_NOT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_OK);
  CU_ASSERT_PTR_NULL(tr);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), ">= vocab 256") != NULL, "message: %s",
                zeroc_last_error(ctx));
  CU_ASSERT_STRING_EQUAL(zeroc_trainer_create_phase(), "data");
  zeroc_ctx_finalize(ctx);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
}

/* On 2 ranks: the held-out loss through a 2-stage pipeline (1F1B, then
 * interleaved) equals the data-parallel run's of the same global batch, and
 * an evaluation between steps leaves the pipeline's training losses bitwise. */
static double eval_layout(int pp, int vpp, int steps, int every, float *loss) {
  zeroc_ctx_t *ctx = zt_ctx(1, pp, 1);
  if (!ctx) return NAN;
  zeroc_train_config_t c = small_config(steps);
  c.layers = 2;
  c.batch = pp; /* global batch 4: 2 x 2 micro-batches, or 1 x 2 x dp 2 */
  c.grad_accum = 2;
  c.zero = 1;
  c.vpp = vpp;
  c.pp_schedule = vpp > 1 ? ZEROC_PIPELINE_INTERLEAVED : ZEROC_PIPELINE_1F1B;
  c.val_data = "synthetic";
  c.val_tokens = 3 * 4 * 16;
  c.val_every = every;
  zeroc_trainer_t *tr = NULL;
  double l = NAN;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_train_metrics_t m;
    for (int s = 0; s < steps; s++) {
      ZT_OK(zeroc_trainer_step(tr, &m));
      loss[s] = (float)m.loss;
      CU_ASSERT_EQUAL(m.pipeline, pp > 1);
    }
    ZT_OK(zeroc_trainer_evaluate(tr, &l));
  }
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
  return l;
}

static void test_evaluate_pipeline(void) {
  if (zt_world() != 2) return; /* the layouts need 2 ranks */
  float a[3], b[3], c[3], d[3];
  double dp = eval_layout(1, 1, 3, 0, a), pp = eval_layout(2, 1, 3, 0, b);
  double pp_eval = eval_layout(2, 1, 3, 1, c), il = eval_layout(2, 2, 3, 1, d);
  ZT_ASSERT_MSG(isfinite(dp) && fabs(pp - dp) <= 1e-5 * dp && fabs(il - dp) <= 1e-5 * dp,
                "held-out loss: dp %.9g, pipeline %.9g, interleaved %.9g", dp, pp, il);
  CU_ASSERT_EQUAL(pp_eval, pp);
  for (int s = 0; s < 3; s++)
    ZT_ASSERT_MSG(memcmp(&b[s], &c[s], sizeof(float)) == 0,
                  "pipeline step %d: loss %.9g without evaluation, %.9g with", s + 1, b[s], c[s]);
}

/* The host's waits on the device (stream and event synchronisations) in
 * steps 2..4 of a run with `accum` micro-steps per step (step 1 sets up). */
static uint64_t step_waits(int accum) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 0;
  zeroc_train_config_t c = small_config(4);
  c.grad_accum = accum;
  zeroc_trainer_t *tr = NULL;
  uint64_t n = 0;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (tr) {
    zeroc_train_metrics_t m;
    ZT_OK(zeroc_trainer_step(tr, &m));
    zeroc_device_t *dev = zeroc__ctx_device(ctx);
    uint64_t w0 = __atomic_load_n(&dev->host_waits, __ATOMIC_RELAXED);
    for (int s = 1; s < 4; s++) ZT_OK(zeroc_trainer_step(tr, &m));
    n = __atomic_load_n(&dev->host_waits, __ATOMIC_RELAXED) - w0;
  }
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
  return n;
}

static void test_waits_per_step(void) {
  uint64_t one = step_waits(1), four = step_waits(4);
  ZT_ASSERT_MSG(one > 0 && four == one,
                "host waits in 3 steps: %llu with 1 micro-step per step, %llu with 4 (a wait per "
                "micro-step crept in)",
                (unsigned long long)one, (unsigned long long)four);
}

/* The schedules as a plain function (zeroc_lr_at): the warm-up, each shape's
 * ends and middle, the trainer's rate the same, bad arguments NaN with a message. */
static void test_lr_schedules(void) {
  const double lr = 1e-3;
  /* warm-up: lr x (s+1) / warmup, whatever the schedule */
  for (int k = ZEROC_LR_DEFAULT; k <= ZEROC_LR_LINEAR; k++) {
    CU_ASSERT_EQUAL(zeroc_lr_at((zeroc_lr_schedule_t)k, lr, 4, 14, 0), (float)(lr / 4));
    CU_ASSERT_EQUAL(zeroc_lr_at((zeroc_lr_schedule_t)k, lr, 4, 14, 3), (float)lr);
  }
  /* after it: step 4 is lr, step 13 (the last) 10% of lr, step 8.5 half way */
  CU_ASSERT_EQUAL(zeroc_lr_at(ZEROC_LR_CONSTANT, lr, 4, 14, 13), (float)lr);
  CU_ASSERT_EQUAL(zeroc_lr_at(ZEROC_LR_COSINE, lr, 4, 14, 4), (float)lr);
  CU_ASSERT_DOUBLE_EQUAL(zeroc_lr_at(ZEROC_LR_COSINE, lr, 4, 14, 13), 0.1 * lr, 1e-9);
  CU_ASSERT_EQUAL(zeroc_lr_at(ZEROC_LR_DEFAULT, lr, 4, 14, 9),
                  zeroc_lr_at(ZEROC_LR_COSINE, lr, 4, 14, 9));
  CU_ASSERT_EQUAL(zeroc_lr_at(ZEROC_LR_LINEAR, lr, 4, 14, 4), (float)lr);
  CU_ASSERT_DOUBLE_EQUAL(zeroc_lr_at(ZEROC_LR_LINEAR, lr, 4, 14, 13), 0.1 * lr, 1e-9);
  /* linear: 1/3 of the way (step 7 of 4..13) is lr - 0.3 lr; cosine is above it there */
  CU_ASSERT_DOUBLE_EQUAL(zeroc_lr_at(ZEROC_LR_LINEAR, lr, 4, 14, 7), 0.7 * lr, 1e-9);
  CU_ASSERT(zeroc_lr_at(ZEROC_LR_COSINE, lr, 4, 14, 7) >
            zeroc_lr_at(ZEROC_LR_LINEAR, lr, 4, 14, 7));
  CU_ASSERT_DOUBLE_EQUAL(zeroc_lr_at(ZEROC_LR_LINEAR, lr, 0, 11, 20), 0.1 * lr,
                         1e-9); /* past the end */
  /* the trainer's rate is the function's */
  zeroc_mesh_info_t one;
  ZT_OK(zeroc_mesh_layout_cp(1, 1, 1, 1, 1, 0, &one));
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  zeroc_train_info_t in;
  c.steps = 14, c.warmup = 4, c.lr = lr, c.schedule = ZEROC_LR_LINEAR;
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_EQUAL(in.config.schedule, ZEROC_LR_LINEAR);
  for (int s = 0; s < 14; s++)
    CU_ASSERT_EQUAL(zeroc_train_lr_at(&in.config, s), zeroc_lr_at(ZEROC_LR_LINEAR, lr, 4, 14, s));
  /* bad arguments: NaN, which zeroc_model_step refuses, and a message */
  CU_ASSERT(isnan(zeroc_lr_at((zeroc_lr_schedule_t)9, lr, 0, 10, 0)));
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "zeroc_lr_at: schedule 9"), "%s",
                zeroc_last_error(NULL));
  CU_ASSERT(isnan(zeroc_lr_at(ZEROC_LR_COSINE, -1, 0, 10, 0)));
  CU_ASSERT(isnan(zeroc_lr_at(ZEROC_LR_COSINE, NAN, 0, 10, 0)));
  CU_ASSERT(isnan(zeroc_lr_at(ZEROC_LR_COSINE, lr, -1, 10, 0)));
  CU_ASSERT(isnan(zeroc_lr_at(ZEROC_LR_COSINE, lr, 0, 0, 0)));
  CU_ASSERT(isnan(zeroc_lr_at(ZEROC_LR_COSINE, lr, 0, 10, -1)));
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"a config not from the initializer, or inconsistent, is refused", test_config_refused},
      {"unset fields get defaults; steps are numbered and end", test_defaults_and_steps},
      {"saved half-way and resumed gives the straight run's losses", test_resume_bitwise},
      {"evaluation: held-out loss, the same on every rank", test_evaluate},
      {"evaluation at val_every: metrics, training losses unchanged", test_val_every},
      {"evaluation size (val_tokens), rules, shards checked at create", test_val_config},
      {"evaluation through a pipeline: the data-parallel run's loss", test_evaluate_pipeline},
      {"host waits per step do not grow with the micro-steps", test_waits_per_step},
      {"the learning-rate schedules as a plain function", test_lr_schedules},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "train", tests, 1, 0);
}
