/*
 * shard/step.c - the optimizer step on shards: global gradient norm (each
 * gradient element counted once however it is replicated), clipping, skipping
 * a non-finite step on every rank, the optimizer's update (AdamW per parameter
 * range, weight decay only where the parameter wants it; optimizer_update is
 * the one place that picks the update rule), publishing the new parameters.
 * Also the state accessors used by checkpoints, export and tests.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"
#include "kernels/clip.h"
#include "runtime/runtime.h"
#include "shard/engine.h"

/* The fp32 gradient shard of unit u: the shard itself, or a converted copy. */
static zeroc_result_t grad_f32(zeroc_model_t *m, zeroc__unit_t *u, const float **g) {
  if (u->gshard_dt == ZEROC_FP32) {
    *g = u->gshard;
    return ZEROC_OK;
  }
  CHK(zeroc_k_cast(m->k, m->compute, m->adam_tmp, ZEROC_FP32, u->gshard, u->gshard_dt, u->f.S));
  *g = m->adam_tmp;
  return ZEROC_OK;
}

/* Whether parameter p's gradient counts in this rank's share of the norm: replicas of a
 * shard (HSDP, stage 0) and tensor-parallel copies of replicated parameters count once. */
static int counts_in_norm(const zeroc_model_t *m, const zeroc_mesh_info_t *mesh,
                          const zeroc__flat_param_t *p) {
  if (p->lo == p->hi) return 0;
  if ((p->flags & ZEROC_PARAM_TP_REPLICATED) && mesh->tp_rank != 0) return 0;
  if ((p->flags & ZEROC_PARAM_TIED) && m->tie.g && !m->tie.owner) return 0;
  return 1;
}

/* This rank's share of the squared gradient norm, into step_acc[ACC_SUMSQ] on the
 * device. The gradient shard is read in its own dtype, and adjacent counted ranges
 * (all of a unit's, usually) go in one call: a cast to fp32 and one call per tensor
 * cost 3.7 ms of a 138 ms step of the 1.3B GPT on an H200 (ncu, 2026-11-28). */
static zeroc_result_t local_sumsq(zeroc_model_t *m) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(m->ctx);
  double *acc = m->step_acc + ACC_SUMSQ; /* device memory */
  CHK(zeroc_memset_async(m->compute, acc, 0, sizeof(double)));
  if (m->rep_g->rank != 0) return ZEROC_OK;
  for (int i = 0; i < m->n; i++) {
    zeroc__unit_t *u = &m->u[i];
    const char *g = u->gshard;
    const size_t es = zeroc_dtype_size(u->gshard_dt);
    size_t lo = 0, n = 0; /* the pending run, in elements from the shard's start */
    for (int j = 0; j <= u->f.n; j++) {
      const zeroc__flat_param_t *p = j < u->f.n ? &u->f.p[j] : NULL;
      const int in = p && counts_in_norm(m, mesh, p);
      const size_t off = in ? p->lo - u->f.shard_off : 0;
      if (in && n > 0 && off == lo + n) {
        n += p->hi - p->lo;
        continue;
      }
      if (n > 0) CHK(zeroc_k_sumsq(m->k, m->compute, acc, g + lo * es, u->gshard_dt, n));
      lo = off, n = in ? p->hi - p->lo : 0;
    }
  }
  return ZEROC_OK;
}

/* AdamW on the host for offloaded optimizer state, unit by unit: with NVMe,
 * unit i+1 is read and unit i-1 written back while unit i is updated; the new
 * compute shard is stored as each unit finishes. */
static zeroc_result_t adamw_host(zeroc_model_t *m, const zeroc_adamw_args_t *a0) {
  const zeroc_shard_config_t *c = &m->cfg;
  zeroc_adamw_args_t a = *a0;
  CHK(zeroc__moff_state_prefetch(m, 0));
  for (int i = 0; i < m->n; i++) {
    zeroc__unit_t *u = &m->u[i];
    zeroc__state_view_t v;
    CHK(zeroc__moff_state_prefetch(m, i + 1));
    /* the fp32 gradient shard, viewed from the host (staged in host_grad) */
    const float *g32;
    zeroc__view_t gv;
    CHK(grad_f32(m, u, &g32));
    CHK(zeroc__view_host(m->compute, (void *)g32, u->f.S * 4, ZEROC_VIEW_IN, m->host_grad, &gv));
    const float *g = gv.ptr;
    CHK(zeroc__moff_state(m, i, &v));
    for (int j = 0; j < u->f.n; j++) {
      const zeroc__flat_param_t *p = &u->f.p[j];
      if (p->lo == p->hi) continue;
      size_t off = p->lo - u->f.shard_off, n = p->hi - p->lo;
      a.weight_decay = (p->flags & ZEROC_PARAM_NO_DECAY) ? 0.0f : c->weight_decay;
      CHK(zeroc_k_host_adamw(v.master + off, v.m + off, v.v + off, g + off, n, &a));
    }
    CHK(zeroc__view_end(&gv));
    CHK(zeroc__model_store_params_from_host(m, i, v.master));
    CHK(zeroc__moff_state_done(m, i));
  }
  return zeroc__model_publish_gathers(m);
}

/* clip_dev: NULL, or the multiplier in device memory (zeroc_k_clip_scale), read there
 * instead of clip_coef; NaN there makes every kernel a no-op (a skipped step). */
static zeroc_result_t adamw_all(zeroc_model_t *m, float lr, float clip_coef,
                                const float *clip_dev) {
  const zeroc_shard_config_t *c = &m->cfg;
  double t = (double)(m->run.steps + 1);
  zeroc_adamw_args_t a = {lr,
                          c->beta1,
                          c->beta2,
                          c->eps,
                          c->weight_decay,
                          clip_coef,
                          (float)(1.0 - pow(c->beta1, t)),
                          (float)(1.0 - pow(c->beta2, t)),
                          clip_dev};
  if (m->ostate) return adamw_host(m, &a);
  /* one pass per range: the gradient shard read in its own dtype (no fp32 copy) and,
   * unless the parameters are offloaded, the compute shard written beside the master
   * (zeroc__model_publish then skips its cast; the elements outside every range keep
   * the values the last full publish gave them, as the master does) */
  const int own = m->cfg.offload_params == ZEROC_OFFLOAD_NONE;
  const size_t pe = zeroc_dtype_size(m->pdt);
  for (int i = 0; i < m->n; i++) {
    zeroc__unit_t *u = &m->u[i];
    const size_t gs = zeroc_dtype_size(u->gshard_dt);
    for (int j = 0; j < u->f.n; j++) {
      const zeroc__flat_param_t *p = &u->f.p[j];
      if (p->lo == p->hi) continue;
      size_t off = p->lo - u->f.shard_off, n = p->hi - p->lo;
      a.weight_decay = (p->flags & ZEROC_PARAM_NO_DECAY) ? 0.0f : c->weight_decay;
      CHK(zeroc_k_adamw_mixed(m->k, m->compute, u->master + off, u->m + off, u->v + off,
                              (const char *)u->gshard + off * gs, u->gshard_dt,
                              own && !m->master_alias ? (char *)u->cshard + off * pe : NULL, m->pdt,
                              n, &a));
    }
  }
  m->cshard_current = own;
  return ZEROC_OK;
}

/* The update of every shard by the configured optimizer (cfg.optimizer, resolved
 * and checked at zeroc_shard): a new rule goes here, beside its state kinds.
 * clip_coef and clip_dev as adamw_all. */
static zeroc_result_t optimizer_update(zeroc_model_t *m, float lr, float clip_coef,
                                       const float *clip_dev) {
  switch (m->cfg.optimizer) {
  case ZEROC_OPTIMIZER_ADAMW:
    return adamw_all(m, lr, clip_coef, clip_dev);
  default:
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "optimizer %d has no update rule", (int)m->cfg.optimizer);
  }
}

zeroc_result_t zeroc_model_step(zeroc_model_t *m, float lr, zeroc_step_info_t *info) {
  zeroc_result_t res = ZEROC_OK;
  CHK(zeroc__model_check(m, "zeroc_model_step"));
  if (m->run.in_forward)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_step while a forward is waiting for its "
                                             "backward"));
  /* every unit must have had all its micro-steps (whole model or unit ranges) */
  for (int i = 0; i < m->n; i++)
    if (m->u[i].nbwd != m->run.accum)
      return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                               "zeroc_model_step after %d of %d micro-steps (unit "
                                               "%d)",
                                               m->u[i].nbwd, m->run.accum, i));
  if (!(lr >= 0) || !isfinite(lr))
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "learning rate %g: must be finite and >= 0", lr));
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(m->ctx);
  zeroc__watchdog_phase(m->ctx, "optimizer step %llu", (unsigned long long)m->run.attempts + 1);
  ZEROC_FAULT_IN(m->inject.specs, m->inject.rank, "step", m->run.attempts + 1, NULL);

  /* every reduction of this step must have landed */
  zeroc_event_t *e = m->u[0].ev_reduced;
  ZEROC_TRY(zeroc_event_record(e, m->reduce_s));
  ZEROC_TRY(zeroc__model_wait_comm(m, e));

  /* The step's one read of device figures: the sum of squares and the losses
   * loss units added on the device, in one copy to pinned memory waited on with
   * the polled wait (never a pageable copy blocking in the driver). Where the
   * optimizer state is on the device, the device decides the clipping and the
   * skip itself (kernels/clip.h): the partial sums of several ranks meet in a
   * device all-reduce over the world group on the compute stream, then the host
   * queues AdamW and the publish before it waits for the copy, so the device
   * never idles on the host in the middle of a step. That all-reduce's 8 bytes
   * are control, not training traffic: the world group is not one of the groups
   * zeroc__model_comm_bytes counts (the host all-reduce it replaced was not
   * counted either). With the optimizer state or the parameters offloaded the
   * host reads the local sums and all-reduces them before it steps. */
  ZEROC_TRY(local_sumsq(m));
  double acc[2];
  const int on_device = !m->ostate && m->cfg.offload_params == ZEROC_OFFLOAD_NONE;
  zeroc_group_t *world = zeroc__ctx_group(m->ctx, ZEROC_GROUP_WORLD);
  double *sumsq_dev = m->step_acc + ACC_SUMSQ;
  float *clip_dev = (float *)(m->step_acc + ACC_SCALE);
  if (on_device) {
    if (mesh->world > 1)
      ZEROC_TRY(
          zeroc__allreduce(world, m->compute, sumsq_dev, sumsq_dev, 1, ZEROC_FP64, ZEROC_SUM));
    ZEROC_TRY(zeroc_k_clip_scale(m->k, m->compute, clip_dev, sumsq_dev, m->cfg.clip));
  }
  ZEROC_TRY(
      zeroc__read_back_start(m->compute, m->ev_step, m->step_host, acc, m->step_acc, sizeof acc));
  ZEROC_TRY(zeroc_memset_async(m->compute, m->step_acc + ACC_LOSS, 0, sizeof(double)));
  if (on_device) {
    ZEROC_TRY(optimizer_update(m, lr, 1.0f, clip_dev));
    ZEROC_TRY(zeroc__model_publish(m)); /* a skipped step publishes the unchanged master */
  }
  ZEROC_TRY(zeroc__read_back_finish(m->ev_step, m->step_host, acc, sizeof acc));
  double sums[2] = {acc[ACC_SUMSQ], 0};
  /* the loss: the last unit's mean (host-written or device-added), averaged
   * over micro-steps and data-parallel ranks */
  if (mesh->tp_rank == 0 && mesh->pp_rank == mesh->pp - 1)
    sums[1] = (m->run.loss_sum + acc[ACC_LOSS]) / m->run.accum / mesh->dp;
  /* the loss for the progress line, and the sums of squares where the device
   * did not already add them up; the device is busy with AdamW meanwhile */
  ZEROC_TRY(
      zeroc__allreduce_host(world, sums + on_device, 2 - (size_t)on_device, ZEROC_FP64, ZEROC_SUM));
  double norm = sqrt(sums[0]);
  /* the verdict: the device's (the same formula on the same global sum), or the host's */
  const float coef = zeroc_i_clip_scale(sums[0], m->cfg.clip);
  int skipped = isnan(coef);
  if (skipped) {
    m->run.consecutive_skips++;
    if (mesh->rank == 0) /* the verdict is global: one line per job, not per rank */
      ZWARN(SHARD, "step %llu skipped: gradient norm is %g (non-finite) [%d in a row]",
            (unsigned long long)m->run.attempts + 1, norm, m->run.consecutive_skips);
  } else {
    if (!on_device) {
      ZEROC_TRY(optimizer_update(m, lr, coef, NULL));
      if (!m->ostate) ZEROC_TRY(zeroc__model_publish(m)); /* the host path publishes as it goes */
    }
    m->run.steps++;
    m->run.consecutive_skips = 0;
  }
  m->run.attempts++;
  uint64_t bytes = zeroc__model_comm_bytes(m);
  if (info) {
    info->step = m->run.steps;
    info->loss = (float)sums[1];
    info->grad_norm = (float)norm;
    info->skipped = skipped;
    info->consecutive_skips = m->run.consecutive_skips;
    info->comm_bytes = bytes - m->run.bytes_mark;
    info->exposed_comm_ms = m->run.exposed_ms;
  }
  m->run.bytes_mark = bytes;
  m->run.exposed_ms = 0;
  m->run.micro = 0;
  for (int i = 0; i < m->n; i++) m->u[i].nbwd = 0;
  m->run.loss_sum = 0;
  if (m->run.consecutive_skips > m->cfg.max_skipped)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_NUMERIC,
                                             "%d consecutive steps had a non-finite gradient norm "
                                             "(limit %d): stopping",
                                             m->run.consecutive_skips, m->cfg.max_skipped));
  return ZEROC_OK;
fail:
  return zeroc__ctx_ret(m->ctx, res);
}

/* ---- state access ------------------------------------------------------------------ */

/* The queries answer a dead handle or an index out of range with an
 * impossible value (-1, UINT64_MAX, NULL, 0) and say why in zeroc_last_error. */
static int bad_model(const zeroc_model_t *m, const char *fn) {
  return zeroc__model_check(m, fn) != ZEROC_OK;
}

/* `unit` (and, when p >= 0 is asked about, its parameter `p`) in range. */
static zeroc_result_t check_index(const zeroc_model_t *m, const char *fn, int unit, int p,
                                  int check_p) {
  CHK(zeroc__model_check(m, fn));
  if (unit < 0 || unit >= m->n)
    return zeroc__ctx_ret(
        m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: unit %d not in [0, %d)", fn, unit, m->n));
  if (check_p && (p < 0 || p >= m->u[unit].f.n))
    return zeroc__ctx_ret(
        m->ctx,
        ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: parameter %d of unit %d ('%s') not in [0, %d)", fn,
                   p, unit, m->u[unit].L.name ? m->u[unit].L.name : "", m->u[unit].f.n));
  return ZEROC_OK;
}

int zeroc_model_num_units(const zeroc_model_t *m) {
  return bad_model(m, "zeroc_model_num_units") ? -1 : m->n;
}

static zeroc_result_t unit_info(const zeroc_model_t *m, int unit, zeroc_unit_info_t *out) {
  if (unit < 0 || unit >= m->n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d not in [0, %d)", unit, m->n);
  const zeroc__unit_t *u = &m->u[unit];
  out->name = u->L.name;
  out->numel = u->f.numel;
  out->flat_numel = u->f.N;
  out->shard_numel = u->f.S;
  out->shard_offset = u->f.shard_off;
  out->nparams = u->f.n;
  return ZEROC_OK;
}

zeroc_result_t zeroc_model_unit_info(const zeroc_model_t *m, int unit, zeroc_unit_info_t *out) {
  CHK(zeroc__model_check(m, "zeroc_model_unit_info"));
  if (!out)
    return zeroc__ctx_ret(m->ctx,
                          ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_unit_info: out is NULL"));
  return zeroc__ctx_ret(m->ctx, unit_info(m, unit, out));
}

uint64_t zeroc_model_param_offset(const zeroc_model_t *m, int unit, int p) {
  if (check_index(m, "zeroc_model_param_offset", unit, p, 1)) return UINT64_MAX;
  return m->u[unit].f.p[p].off;
}

const zeroc_param_desc_t *zeroc_model_param_desc(const zeroc_model_t *m, int unit, int p) {
  if (check_index(m, "zeroc_model_param_desc", unit, p, 1)) return NULL;
  return &m->u[unit].L.params[p];
}

void zeroc_model_shard_layout(const zeroc_model_t *m, int *shard_rank, int *shard_size,
                              int *replica) {
  int bad = bad_model(m, "zeroc_model_shard_layout");
  if (shard_rank) *shard_rank = bad ? -1 : m->shard_g->rank;
  if (shard_size) *shard_size = bad ? 0 : m->shard_g->size;
  if (replica) *replica = bad ? -1 : m->rep_g->rank;
}

static zeroc_result_t state_ptr(zeroc_model_t *m, int unit, zeroc_state_kind_t kind, float **p) {
  if (unit < 0 || unit >= m->n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d not in [0, %d)", unit, m->n);
  zeroc__unit_t *u = &m->u[unit];
  switch (kind) {
  case ZEROC_STATE_MASTER: *p = u->master; return ZEROC_OK;
  case ZEROC_STATE_MOMENT1:
    *p = u->m;
    return ZEROC_OK;
  case ZEROC_STATE_MOMENT2:
    *p = u->v;
    return ZEROC_OK;
  case ZEROC_STATE_GRAD: {
    const float *g;
    CHK(grad_f32(m, u, &g));
    *p = (float *)g;
    return ZEROC_OK;
  }
  default: return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "state kind %d: accepted master, m, v", (int)kind);
  }
}

/* Offloaded optimizer state: copy through the resident host view. */
static zeroc_result_t offloaded_state(zeroc_model_t *m, int unit, zeroc_state_kind_t kind, float *get,
                                      const float *set) {
  zeroc__state_view_t v;
  CHK(zeroc__moff_state(m, unit, &v));
  float *p = kind == ZEROC_STATE_MASTER ? v.master : kind == ZEROC_STATE_MOMENT1 ? v.m : v.v;
  size_t bytes = m->u[unit].f.S * 4;
  if (get) memcpy(get, p, bytes);
  else if (set)
    memcpy(p, set, bytes);
  return zeroc__moff_state_done(m, unit);
}

static zeroc_result_t get_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind, float *buf) {
  float *p = NULL;
  CHK(zeroc__model_check(m, "zeroc_model_get_shard"));
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_get_shard: buf is NULL");
  if (m->ostate && kind != ZEROC_STATE_GRAD && unit >= 0 && unit < m->n && (unsigned)kind < ZEROC_STATE_GRAD)
    return offloaded_state(m, unit, kind, buf, NULL);
  if (kind == ZEROC_STATE_GRAD) CHK(zeroc_stream_sync(m->reduce_s));
  CHK(state_ptr(m, unit, kind, &p));
  return zeroc__memcpy_sync(m->compute, buf, p, m->u[unit].f.S * 4);
}

zeroc_result_t zeroc_model_get_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind,
                                     float *buf) {
  zeroc_result_t r = get_shard(m, unit, kind, buf);
  return r && !bad_model(m, "zeroc_model_get_shard") ? zeroc__ctx_ret(m->ctx, r) : r;
}

static zeroc_result_t set_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind,
                                const float *buf) {
  float *p = NULL;
  CHK(zeroc__model_check(m, "zeroc_model_set_shard"));
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_set_shard: buf is NULL");
  if (kind == ZEROC_STATE_GRAD)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "the gradient shard is read only");
  if (m->ostate && unit >= 0 && unit < m->n && (unsigned)kind < ZEROC_STATE_GRAD)
    return offloaded_state(m, unit, kind, NULL, buf);
  CHK(state_ptr(m, unit, kind, &p));
  return zeroc__memcpy_sync(m->compute, p, buf, m->u[unit].f.S * 4);
}

zeroc_result_t zeroc_model_set_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind,
                                     const float *buf) {
  zeroc_result_t r = set_shard(m, unit, kind, buf);
  return r && !bad_model(m, "zeroc_model_set_shard") ? zeroc__ctx_ret(m->ctx, r) : r;
}

static zeroc_result_t sync_params(zeroc_model_t *m) {
  CHK(zeroc__model_publish(m));
  CHK(zeroc_stream_sync(m->gather_s));
  return zeroc_stream_sync(m->compute);
}

zeroc_result_t zeroc_model_sync_params(zeroc_model_t *m) {
  CHK(zeroc__model_check(m, "zeroc_model_sync_params"));
  return zeroc__ctx_ret(m->ctx, sync_params(m));
}

static zeroc_result_t gather_unit(zeroc_model_t *m, int unit, float *buf) {
  if (unit < 0 || unit >= m->n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d not in [0, %d)", unit, m->n);
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_gather_unit: buf is NULL");
  zeroc__unit_t *u = &m->u[unit];
  size_t N = u->f.N, S = u->f.S;
  zeroc_result_t r;
  float *dev = NULL;
  const float *master = u->master;
  if (m->ostate) { /* the shard from wherever it is offloaded, staged in the caller's buffer */
    float *mine = buf + u->f.shard_off;
    CHK(get_shard(m, unit, ZEROC_STATE_MASTER, mine));
    master = mine;
  }
  /* gather into a device view of the caller's buffer (the buffer itself where
   * device memory is host memory: then in place when the shard is staged there) */
  zeroc__view_t dv;
  CHK(zeroc__view_device(zeroc__ctx_devmem(m->ctx), m->compute, buf, N * 4, ZEROC_VIEW_OUT | (m->ostate ? ZEROC_VIEW_IN : 0),
                         NULL, &dv));
  dev = dv.ptr;
  r = zeroc__allgather(m->shard_g, m->compute, m->ostate ? dev + u->f.shard_off : master, dev, S, ZEROC_FP32);
  zeroc_result_t e = zeroc__view_end(&dv);
  return r ? r : e;
}

zeroc_result_t zeroc_model_gather_unit(zeroc_model_t *m, int unit, float *buf) {
  CHK(zeroc__model_check(m, "zeroc_model_gather_unit"));
  return zeroc__ctx_ret(m->ctx, gather_unit(m, unit, buf));
}

uint64_t zeroc_model_steps(const zeroc_model_t *m) {
  return bad_model(m, "zeroc_model_steps") ? 0 : m->run.steps;
}

void zeroc_model_set_steps(zeroc_model_t *m, uint64_t steps) {
  if (!bad_model(m, "zeroc_model_set_steps")) m->run.steps = m->run.attempts = steps;
}

zeroc_ctx_t *zeroc_model_ctx(const zeroc_model_t *m) {
  return bad_model(m, "zeroc_model_ctx") ? NULL : m->ctx;
}

uint64_t zeroc_model_state_bytes(const zeroc_model_t *m) {
  return bad_model(m, "zeroc_model_state_bytes") ? 0 : m->state_bytes;
}

uint64_t zeroc_model_activation_bytes(const zeroc_model_t *m) {
  return bad_model(m, "zeroc_model_activation_bytes") ? 0 : zeroc__model_act_bytes(m);
}
