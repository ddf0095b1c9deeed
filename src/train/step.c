/*
 * train/step.c - one optimizer step of the trainer: the cadence's pending
 * checkpoint, the micro-batches through the model's run (its architecture's
 * run_step: the units, or the pipeline), the optimizer step at the schedule's
 * learning rate, the step's figures (throughput, memory, spikes) and the
 * evaluation the cadence asks for (the architecture's evaluate).
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "runtime/runtime.h"
#include "train/trainer.h"
#include "zeroc/device.h"

float zeroc_lr_at(zeroc_lr_schedule_t schedule, double lr, int warmup, int steps, int s) {
  if ((unsigned)schedule > ZEROC_LR_LINEAR || !isfinite(lr) || lr < 0 || warmup < 0 || steps < 1 ||
      s < 0) {
    ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
               "zeroc_lr_at: schedule %d, lr %g, warmup %d, steps %d, step %d: accepted a "
               "ZEROC_LR_* schedule, a finite lr >= 0, warmup >= 0, steps >= 1, step >= 0",
               (int)schedule, lr, warmup, steps, s);
    return NAN;
  }
  if (warmup > 0 && s < warmup) return (float)(lr * (s + 1) / warmup);
  if (schedule == ZEROC_LR_CONSTANT) return (float)lr;
  int span = steps - 1 - warmup;
  double p = span > 0 ? (double)(s - warmup) / span : 1.0;
  if (p > 1) p = 1;
  double lo = 0.1 * lr;
  if (schedule == ZEROC_LR_LINEAR) return (float)(lr - (lr - lo) * p);
  return (float)(lo + 0.5 * (lr - lo) * (1.0 + cos(M_PI * p)));
}

float zeroc_train_lr_at(const zeroc_train_config_t *c, int s) {
  return zeroc_lr_at(c->schedule, c->lr, c->warmup, c->steps, s);
}

const char *zeroc_spike_name(zeroc_spike_t s) {
  static const char *const NAMES[] = {"none", "loss", "grad_norm", "loss+grad_norm"};
  return (unsigned)s < 4 ? NAMES[s] : "?";
}

/* The evaluation the cadence asks for after 0-based step `s` (every val_every
 * steps and after the run's last), on the updated model, timed apart from the
 * step. */
static zeroc_result_t cadence_eval(zeroc_trainer_t *tr, int s, zeroc_train_metrics_t *m) {
  const zeroc_train_config_t *c = &tr->info.config;
  if (!c->val_every || ((s + 1) % c->val_every && s + 1 < c->steps)) return ZEROC_OK;
  double t0 = zeroc__now_s();
  ZEROC_CHECK(
      zeroc__ctx_ret(tr->ctx, tr->arch->evaluate(tr->net, &m->val_loss, &m->auc, &m->logloss)));
  m->val_ms = (zeroc__now_s() - t0) * 1e3;
  m->evaluated = 1;
  return ZEROC_OK;
}

/* The step's figures beyond the optimizer's: time, memory, spikes, maxima. */
static zeroc_result_t fill_metrics(zeroc_trainer_t *tr, int s, double dt,
                                   const zeroc_step_info_t *info, const zeroc_pipeline_stats_t *pst,
                                   zeroc_train_metrics_t *m) {
  const zeroc_train_info_t *in = &tr->info;
  zeroc_mem_stats_t ms;
  zeroc_ctx_memory(tr->ctx, &ms);
  m->step = s + 1;
  m->loss = info->loss;
  m->lr = zeroc_train_lr_at(&in->config, s);
  m->grad_norm = info->grad_norm;
  m->tokens = in->tokens_per_step;
  m->step_ms = dt * 1e3;
  m->tokens_per_s = in->tokens_per_step / dt;
  m->mfu = in->peak_flops > 0 ? in->flops_per_step / dt / in->peak_flops : 0;
  m->comm_bytes = info->comm_bytes;
  m->exposed_comm_ms = info->exposed_comm_ms;
  m->peak_device = ms.peak_total[ZEROC_MEM_DEVICE];
  m->peak_host = ms.peak_total[ZEROC_MEM_PINNED] + ms.peak_total[ZEROC_MEM_HOST];
  for (int t = 0; t < ZEROC_TAG_COUNT; t++) m->peak_by_tag[t] = ms.peak[ZEROC_MEM_DEVICE][t];
  /* a skipped step's figures are not finite and never enter the windows */
  double z_loss = NAN, z_norm = NAN;
  int spike = 0;
  m->skipped = info->skipped;
  if (info->skipped) {
    tr->skipped_total++;
  } else {
    spike |= zeroc__spike_push(&tr->spike_loss, info->loss, &z_loss);
    spike |= zeroc__spike_push(&tr->spike_norm, info->grad_norm, &z_norm) << 1;
  }
  if (spike) tr->spikes_total++;
  m->spike = (zeroc_spike_t)spike;
  m->loss_z = z_loss;
  m->grad_norm_z = z_norm;
  m->skipped_total = tr->skipped_total;
  m->spikes_total = tr->spikes_total;
  int pipelined = tr->arch->pipeline(tr->net) != NULL;
  m->pipeline = pipelined;
  m->pp_bubble = pst->bubble;
  m->pp_compute_ms = pst->compute_ms;
  m->pp_run_ms = pst->run_ms;
  /* the peak over ranks too (pipeline stages and TP ranks differ), and the
   * slowest pipeline stage's compute (what the other stages wait for) */
  int64_t peak_max = (int64_t)m->peak_device, compute_max_us = (int64_t)(pst->compute_ms * 1e3);
  if (in->config.reduce_maxima) {
    ZEROC_CHECK(zeroc_ctx_max_i64(tr->ctx, &peak_max));
    if (pipelined) ZEROC_CHECK(zeroc_ctx_max_i64(tr->ctx, &compute_max_us));
  }
  m->peak_device_max = peak_max;
  m->pp_compute_max_ms = compute_max_us * 1e-3;
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_step(zeroc_trainer_t *tr, zeroc_train_metrics_t *m) {
  if (!tr || !m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_step: NULL argument");
  const zeroc_train_config_t *c = &tr->info.config;
  memset(m, 0, sizeof *m);
  m->loss_z = m->grad_norm_z = m->val_loss = m->auc = m->logloss = NAN;
  if (tr->next >= c->steps) {
    m->done = 1;
    return ZEROC_OK;
  }
  zeroc_result_t r = ZEROC_OK;
  if (tr->save_pending) {
    tr->save_pending = 0;
    r = zeroc__train_save(tr, c->save, (uint64_t)tr->next);
    if (r) return zeroc__ctx_ret(tr->ctx, r);
  }
  int s = tr->next;
  double t0 = zeroc__now_s(), cp_wait0 = tr->arch->comm_wait_s(tr->net);
  zeroc_pipeline_stats_t pst = {0};
  r = tr->arch->run_step(tr->net, s, zeroc_train_lr_at(c, s), &pst);
  if (r) return zeroc__ctx_ret(tr->ctx, r);
  zeroc_step_info_t info;
  r = zeroc_model_step(tr->model, zeroc_train_lr_at(c, s), &info);
  /* too many skipped steps: this step's figures are still reported, then stop */
  int numeric_stop = r == ZEROC_ERR_NUMERIC;
  if (r && !numeric_stop) return zeroc__ctx_ret(tr->ctx, r);
  double dt = zeroc__now_s() - t0;
  /* the compute stream's waits on cp transfers are exposed communication too */
  info.exposed_comm_ms += (tr->arch->comm_wait_s(tr->net) - cp_wait0) * 1e3;
  zeroc_result_t rm = fill_metrics(tr, s, dt, &info, &pst, m);
  if (rm) return zeroc__ctx_ret(tr->ctx, rm);
  tr->next = s + 1;
  m->done = tr->next >= c->steps;
  if (numeric_stop) return zeroc__ctx_ret(tr->ctx, ZEROC_ERR_NUMERIC);
  rm = cadence_eval(tr, s, m);
  if (rm) return rm; /* zeroc_trainer_evaluate recorded it */
  if (c->save && c->save_every && (s + 1) % c->save_every == 0 && s + 1 < c->steps)
    tr->save_pending = 1;
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_evaluate(zeroc_trainer_t *tr, double *loss) {
  if (!tr || !loss)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_evaluate: NULL argument");
  return zeroc__ctx_ret(tr->ctx, tr->arch->evaluate(tr->net, loss, NULL, NULL));
}
