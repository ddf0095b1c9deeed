/*
 * tests/test_train.c - the trainer (zeroc/train.h): a config not made with
 * ZEROC_TRAIN_CONFIG_INIT and an inconsistent one are refused with a message,
 * unset fields get the library's defaults, the step loop numbers and ends its
 * steps and follows the LR schedule, and a run saved half-way and resumed
 * gives bitwise the losses of the run that went straight through; the
 * held-out loss of zeroc_trainer_evaluate.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

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
  c.val_batches = 4;
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

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"a config not from the initializer, or inconsistent, is refused", test_config_refused},
      {"unset fields get defaults; steps are numbered and end", test_defaults_and_steps},
      {"saved half-way and resumed gives the straight run's losses", test_resume_bitwise},
      {"evaluation: held-out loss, the same on every rank", test_evaluate},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "train", tests, 1, 0);
}
