/*
 * shard/schedule.c - the per-unit schedule, one for every caller: the
 * whole-model zeroc_model_forward/backward/eval and the pipeline's unit
 * ranges (zeroc__model_forward_units/backward_units) run the same passes.
 * Forward: gather (stage 3: prefetched K units ahead on the gather stream),
 * compute, release; backward: gather, recompute when asked, compute, then
 * reduce-scatter on the reduce stream while the next unit computes. The
 * buffers each stage keeps are tabled in shard/model.h.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"
#include "runtime/runtime.h"
#include "shard/engine.h"

static size_t esz(zeroc_dtype_t dt) { return zeroc_dtype_size(dt); }

/* One pass over the units [first, last] for one micro-batch. */
typedef struct pass {
  int first, last;   /* units, in forward order */
  int slot, micro;   /* the micro-batch's saved-input slot and its index in the step */
  const void *batch; /* every unit's io->batch */
  int eval;          /* forward only: no backward follows, nothing of the step changes */
} pass_t;

/* ---- buffer slots and waits -------------------------------------------------------- */

/* Takes a free slot; `consumer` (the stream that will write it) waits until the
 * previous user released it. */
static zeroc_result_t slot_acquire(zeroc__pool_t *p, zeroc_stream_t *consumer,
                                   zeroc__slot_t **out) {
  *out = NULL; /* written on every path: callers' slots are never left unset */
  for (int i = 0; i < p->n; i++) {
    if (!p->s[i].busy) {
      p->s[i].busy = 1;
      if (consumer) CHK(zeroc_stream_wait_event(consumer, p->s[i].free_ev));
      *out = &p->s[i];
      return ZEROC_OK;
    }
  }
  return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "no free buffer slot among %d (schedule bug)", p->n);
}

/* Gives a slot back once the work enqueued so far on `last_user` is done. */
static zeroc_result_t slot_release(zeroc__slot_t *s, zeroc_stream_t *last_user) {
  if (!s) return ZEROC_OK;
  s->busy = 0;
  return zeroc_event_record(s->free_ev, last_user);
}

zeroc_result_t zeroc__model_wait_comm(zeroc_model_t *m, zeroc_event_t *e) {
  /* where the compute stream runs on the host (cpu) the wait blocks here and
   * its time is the exposed communication; elsewhere it is stream order */
  double t0 = zeroc__now_ms();
  zeroc_result_t r = zeroc_stream_wait_event(m->compute, e);
  m->run.exposed_ms += zeroc__now_ms() - t0;
  return r;
}

/* ---- parameters in use ------------------------------------------------------------- */

/* Stage 3: starts the all-gather of unit i (no-op if it is already gathered). */
static zeroc_result_t issue_gather(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.stage != 3 || u->gathered) return ZEROC_OK;
  if (m->alias & ZEROC__ALIAS_PARAMS) { /* a group of one: the shard is the whole unit */
    u->full = u->cshard;
    u->gathered = 1;
    u->view_ready = 0;
    return ZEROC_OK;
  }
  if (u->pinned) {
    u->pslot = &u->own_pslot;
    CHK(zeroc_stream_wait_event(m->gather_s, u->own_pslot.free_ev));
  } else {
    CHK(slot_acquire(&m->gpool, m->gather_s, &u->pslot));
  }
  u->full = u->pslot->ptr;
  zeroc__watchdog_phase(m->ctx, "gathering unit %d", i);
  const void *src;
  int next = i + m->run.pass_dir;
  CHK(zeroc__moff_param_src(m, i, next >= 0 && next < m->n ? next : -1, &src));
  CHK(zeroc__allgather(m->shard_g, m->gather_s, src, u->full, u->f.S, m->pdt));
  CHK(zeroc_event_record(u->ev_gathered, m->gather_s));
  u->gathered = 1;
  u->view_ready = 0;
  return ZEROC_OK;
}

/* Stage 3: unit i's gathered params are no longer needed after the work
 * enqueued so far on the compute stream. */
static zeroc_result_t release_params(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.stage != 3 || !u->gathered) return ZEROC_OK;
  if (u->pslot) CHK(slot_release(u->pslot, m->compute));
  u->pslot = NULL;
  u->full = NULL;
  u->gathered = 0;
  u->view_ready = 0;
  if (m->conv_owner == i) m->conv_owner = -1;
  return ZEROC_OK;
}

/* Makes unit i's parameters usable by the compute stream and fills pviews. */
static zeroc_result_t ready_params(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (!(m->alias & ZEROC__ALIAS_PARAMS)) CHK(zeroc__model_wait_comm(m, u->ev_gathered));
  if (!u->full) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "unit %d used before it was gathered", i);
  char *base = u->full;
  size_t e = esz(m->pdt);
  if (m->conv_p) {
    int shared_view = !u->pinned;
    if (!u->view_ready || (shared_view && m->conv_owner != i)) {
      CHK(zeroc_k_cast(m->k, m->compute, u->view, m->cdt, u->full, m->pdt, u->f.N));
      u->view_ready = 1;
      if (shared_view) {
        if (m->conv_owner >= 0) m->u[m->conv_owner].view_ready = 0;
        m->conv_owner = i;
      }
    }
    base = (char *)u->view;
    e = esz(m->cdt);
  }
  for (int j = 0; j < u->f.n; j++) u->pviews[j] = base + u->f.p[j].off * e;
  return ZEROC_OK;
}

/* Makes unit i's full gradient buffer ready for this micro-step (zeroed on
 * first touch) and fills gviews. */
static zeroc_result_t ready_grads(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  int st = m->cfg.stage;
  if (!u->grads_ready) {
    if (st <= 1) {
      u->fgrad = u->fgrad_own;
      if (u->nbwd == 0 && !m->conv_g)
        CHK(zeroc_memset_async(m->compute, u->fgrad, 0, u->f.N * esz(m->rdt)));
    } else if (m->alias & ZEROC__ALIAS_GRADS) {
      /* a group of one: the backward sums straight into the grad shard */
      u->fgrad = u->gshard;
      if (!m->conv_g) CHK(zeroc_memset_async(m->compute, u->fgrad, 0, u->f.N * esz(m->rdt)));
    } else {
      if (u->pinned)
        u->gslot = &u->own_gslot;
      else
        CHK(slot_acquire(&m->fgpool, NULL, &u->gslot));
      /* the slot's previous reduction must finish first: exposed communication */
      CHK(zeroc__model_wait_comm(m, u->gslot->free_ev));
      u->fgrad = u->gslot->ptr;
      if (!m->conv_g) CHK(zeroc_memset_async(m->compute, u->fgrad, 0, u->f.N * esz(m->rdt)));
    }
    if (m->conv_g) CHK(zeroc_memset_async(m->compute, u->cgrad, 0, u->f.N * esz(m->cdt)));
    u->grads_ready = 1;
  }
  char *base = m->conv_g ? (char *)u->cgrad : (char *)u->fgrad;
  size_t e = esz(m->conv_g ? m->cdt : m->rdt);
  for (int j = 0; j < u->f.n; j++) u->gviews[j] = base + u->f.p[j].off * e;
  return ZEROC_OK;
}

/* Compute-dtype grads -> reduce-dtype full grads, accumulating over micro-steps
 * where the stage keeps full grads: fp32 -> bf16 on cpu with bf16 reduction,
 * bf16 -> fp32 on cuda with bf16 params and fp32 reduction (the fp32 buffer is
 * the one reduced, so no sum over ranks or micro-steps rounds to 8 bits). */
static zeroc_result_t conv_grads_out(zeroc_model_t *m, zeroc__unit_t *u) {
  size_t n = u->f.N;
  if (m->cfg.stage <= 1 && u->nbwd > 0 && !u->gacc) {
    if (m->rdt == ZEROC_FP32) /* cdt is 16-bit here */
      return zeroc_k_accumulate(m->k, m->compute, u->fgrad, u->cgrad, m->cdt, n, 1.0f);
    return zeroc_k_add_to(m->k, m->compute, u->fgrad, m->rdt, u->cgrad, n); /* cdt fp32 */
  }
  return zeroc_k_cast(m->k, m->compute, u->fgrad, m->rdt, u->cgrad, m->cdt, n);
}

/* Enqueues unit i's gradient reduction on the reduce stream (u->nbwd counts
 * the unit's earlier backward passes of this step). */
static zeroc_result_t reduce_unit(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  int st = m->cfg.stage, last = u->nbwd == m->run.accum - 1;
  size_t S = u->f.S;
  zeroc_stream_t *rs = m->reduce_s;
  if (u->gacc) {
    /* stages 0-1 in a 16-bit dtype: the full grads hold this micro-step's alone
     * (zeroed after each is added), their sum runs in fp32 and is rounded once */
    zeroc_stream_t *cs = m->compute;
    size_t N = u->f.N;
    if (u->nbwd == 0)
      CHK(zeroc_k_cast(m->k, cs, u->gacc, ZEROC_FP32, u->fgrad, m->rdt, N));
    else
      CHK(zeroc_k_accumulate(m->k, cs, u->gacc, u->fgrad, m->rdt, N, 1.0f));
    if (last)
      CHK(zeroc_k_cast(m->k, cs, u->fgrad, m->rdt, u->gacc, ZEROC_FP32, N));
    else if (!m->conv_g) /* conv_grads_out overwrites them */
      CHK(zeroc_memset_async(cs, u->fgrad, 0, N * esz(m->rdt)));
  }
  if (st <= 1 && !last) return ZEROC_OK; /* full grads accumulate locally */
  CHK(zeroc_event_record(u->ev_bwd, m->compute));
  CHK(zeroc_stream_wait_event(rs, u->ev_bwd));
  if (u->tied && m->tie.g && m->tie.g->size > 1) {
    /* every copy of a tied parameter gets the sum of all copies' gradients
     * before the data-parallel reduction (sums commute), so all copies step alike */
    for (int j = 0; j < u->f.n; j++) {
      if (!(u->f.p[j].flags & ZEROC_PARAM_TIED)) continue;
      void *g = (char *)u->fgrad + u->f.p[j].off * esz(m->rdt);
      CHK(zeroc__allreduce(m->tie.g, rs, g, g, u->f.p[j].numel, m->rdt, ZEROC_SUM));
    }
  }
  if (st == 0) {
    if (m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->fgrad, u->fgrad, u->f.N, m->rdt, ZEROC_SUM));
  } else if (st == 1) {
    /* in place: gshard is this rank's block of the full grads (recv = send +
     * rank * S), so the sum lands where the optimizer reads it, with no slot
     * and no copy */
    CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, u->gshard, S, m->rdt, ZEROC_SUM));
    if (m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->gshard, u->gshard, S, m->rdt, ZEROC_SUM));
  } else if (!m->accum_any) {
    /* buffers for one micro-step (zeroc_model_set_accum): no fp32 shard, no tpool */
    if (!(m->alias & ZEROC__ALIAS_GRADS)) /* else the grads are the shard already */
      CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, u->gshard, S, m->rdt, ZEROC_SUM));
    if (m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->gshard, u->gshard, S, m->rdt, ZEROC_SUM));
  } else {
    zeroc__slot_t *t;
    CHK(slot_acquire(&m->tpool, rs, &t));
    CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, t->ptr, S, m->rdt, ZEROC_SUM));
    if (u->nbwd == 0)
      CHK(zeroc_k_cast(m->k, rs, u->gshard, ZEROC_FP32, t->ptr, m->rdt, S));
    else
      CHK(zeroc_k_accumulate(m->k, rs, u->gshard, t->ptr, m->rdt, S, 1.0f));
    CHK(slot_release(t, rs));
    if (last && m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->gshard, u->gshard, S, ZEROC_FP32, ZEROC_SUM));
  }
  CHK(zeroc_event_record(u->ev_reduced, rs));
  if (st >= 2) {
    if (u->gslot) CHK(slot_release(u->gslot, rs));
    u->gslot = NULL;
    u->fgrad = NULL;
  }
  return ZEROC_OK;
}

/* ---- forward and backward ---------------------------------------------------------- */

static void fill_io(zeroc_model_t *m, int i, const pass_t *p, zeroc_layer_io_t *io) {
  zeroc__unit_t *u = &m->u[i];
  memset(io, 0, sizeof *io);
  io->unit = i;
  io->micro = p->micro;
  io->slot = p->slot;
  io->batch = p->batch;
  io->eval = p->eval;
  io->params = u->pviews;
  io->stream = m->compute;
  io->workspace = m->ws;
  io->user = u->L.user;
  io->grad_scale = 1.0f / ((float)m->run.accum * (float)zeroc_ctx_mesh(m->ctx)->dp);
  io->loss = &m->run.loss_micro;
  io->loss_acc = m->step_acc + (p->eval ? ACC_EVAL : ACC_LOSS);
  if (u->L.shares >= 0) io->shared_params = m->u[u->L.shares].pviews;
  io->dtype = m->cdt;
  io->acts = p->slot < u->nacts ? u->acts[p->slot] : NULL;
}

/* A unit that asked for activation buffers gets one: after a failed reallocation
 * (zeroc__model_set_slots, out of memory) it is refused, not handed NULL. */
static zeroc_result_t acts_ready(const zeroc_model_t *m, int i, const zeroc_layer_io_t *io) {
  if (!m->u[i].L.act_bytes || io->acts) return ZEROC_OK;
  return ZEROC_FAIL(ZEROC_ERR_NOMEM,
                    "unit %d ('%s'): no activation buffer for slot %d (%zu bytes; its "
                    "allocation failed)",
                    i, m->u[i].L.name ? m->u[i].L.name : "", io->slot, m->u[i].L.act_bytes);
}

/* A layer callback failed with `r`: its own message (zeroc_error_set, or a
 * ZEROC_FAIL inside) with the unit and the rank added, or, when it recorded
 * none since `seq`, one that says so; zeroc_last_error is never left empty
 * or naming an older failure. */
static zeroc_result_t callback_failed(zeroc_model_t *m, int i, const char *dir, zeroc_result_t r,
                                      unsigned long seq) {
  const char *name = m->u[i].L.name ? m->u[i].L.name : "";
  int rank = zeroc_ctx_mesh(m->ctx)->rank;
  if (zeroc__tls_error_seq() == seq || !zeroc__tls_error()[0])
    return ZEROC_FAIL(r,
                      "the %s callback of unit %d ('%s') on rank %d returned %s without a message "
                      "(a callback says why with zeroc_error_set)",
                      dir, i, name, rank, zeroc_result_name(r));
  char msg[ZEROC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
  return ZEROC_FAIL(r, "%s (in the %s callback of unit %d ('%s') on rank %d)", msg, dir, i, name,
                    rank);
}

static zeroc_result_t run_forward(zeroc_model_t *m, int i, const pass_t *p, const void *in,
                                  int save, int recompute, void **out) {
  zeroc__unit_t *u = &m->u[i];
  zeroc_layer_io_t io;
  fill_io(m, i, p, &io);
  io.in = in;
  io.save = save;
  io.recompute = recompute;
  /* a forward run again for backward must not count its loss twice: any loss
   * it adds goes where an evaluation's goes (zeroed before each evaluation) */
  if (recompute) io.loss_acc = m->step_acc + ACC_EVAL;
  zeroc__watchdog_phase(m->ctx, "%s unit %d ('%s')", recompute ? "recompute" : "forward", i,
                        u->L.name ? u->L.name : "");
  ZEROC_FAULT_IN(m->inject.specs, m->inject.rank, "forward", m->run.attempts + 1, NULL);
  CHK(acts_ready(m, i, &io));
  unsigned long seq = zeroc__tls_error_seq();
  zeroc_result_t r = u->L.forward(&io);
  if (r != ZEROC_OK) return callback_failed(m, i, "forward", r, seq);
  *out = io.out;
  return ZEROC_OK;
}

/* Test-only (ZEROC_FAULT nan|inf|set=X@grad): the first element of the
 * unit's first parameter in its full gradient takes the value, before the
 * reduction, so it travels to every rank as a real fault would. */
static zeroc_result_t inject_grad(zeroc_model_t *m, zeroc__unit_t *u) {
  double v = 0;
  if (!ZEROC_FAULT_IN(m->inject.specs, m->inject.rank, "grad", m->run.attempts + 1, &v))
    return ZEROC_OK;
  float f = (float)v;
  uint16_t h = zeroc_f32_to_bf16(f);
  const void *src = m->rdt == ZEROC_BF16 ? (const void *)&h : (const void *)&f;
  /* synchronous: the host value must outlive the copy */
  return zeroc__memcpy_sync(m->compute, (char *)u->fgrad + u->f.p[0].off * esz(m->rdt), src,
                            esz(m->rdt));
}

/* ---- the passes ---------------------------------------------------------------------
 * The rules, the same for the whole model and for a unit range:
 * - stage 3 gathers run up to K units ahead of compute in the pass's direction
 *   and a unit's parameters are released after its use; a training forward
 *   keeps the pass's last unit gathered (backward starts with it);
 * - with recompute, a training forward keeps activations only for the model's
 *   last unit, and backward runs every unit's forward again except the unit it
 *   starts from the loss (the pass's last unit with no incoming gradient);
 * - a unit that `shares` an earlier unit's parameters also gets that unit's
 *   parameters and gradients (the gradient buffers are made ready once per
 *   backward pass, so both contributions add up);
 * - a unit's loss counts once, at its training forward.
 */

/* Forward of units [first, last]: the first receives `in` (NULL: the batch);
 * *out the last one's output; *loss (may be NULL) the sum of the losses the
 * units wrote. */
static zeroc_result_t forward_pass(zeroc_model_t *m, const pass_t *p, const void *in, void **out,
                                   float *loss) {
  zeroc_result_t res = ZEROC_OK;
  int st = m->cfg.stage, next = p->first;
  const void *x = in ? in : p->batch;
  float pass_loss = 0;
  m->run.pass_dir = 1;
  /* an evaluation reads its loss units' device losses back at the end of the pass */
  if (p->eval) ZEROC_TRY(zeroc_memset_async(m->compute, m->step_acc + ACC_EVAL, 0, sizeof(double)));
  for (int i = p->first; i <= p->last; i++) {
    zeroc__unit_t *u = &m->u[i];
    if (st == 3) {
      if (next <= i) next = i;
      for (; next <= p->last && next <= i + m->K; next++) ZEROC_TRY(issue_gather(m, next));
    }
    ZEROC_TRY(ready_params(m, i));
    if (u->L.shares >= 0) ZEROC_TRY(ready_params(m, u->L.shares));
    u->saved_in[p->slot] = x;
    int save = !p->eval && !(m->cfg.recompute && i < m->n - 1);
    void *y = NULL;
    m->run.loss_micro = 0;
    ZEROC_TRY(run_forward(m, i, p, x, save, 0, &y));
    /* only a loss unit writes it */
    if (p->eval)
      pass_loss += m->run.loss_micro;
    else
      m->run.loss_sum += m->run.loss_micro;
    x = y;
    if (st == 3 && !u->pinned && (p->eval || i < p->last)) ZEROC_TRY(release_params(m, i));
  }
  if (p->eval && st == 3)
    for (int i = p->first; i <= p->last; i++) ZEROC_TRY(release_params(m, i));
  if (p->eval) {
    double dev_loss;
    ZEROC_TRY(zeroc__read_back(m->compute, m->ev_step, m->step_host, &dev_loss,
                               m->step_acc + ACC_EVAL, sizeof dev_loss));
    pass_loss += (float)dev_loss;
  }
  if (out) *out = (void *)x;
  if (loss) *loss = pass_loss;
  return ZEROC_OK;
fail:
  return res;
}

/* Backward of units [last .. first] (their forward ran in p->slot): the last
 * receives `dout` (NULL: it computes the loss), *din the first one's gradient
 * w.r.t. its input. */
static zeroc_result_t backward_pass(zeroc_model_t *m, const pass_t *p, const void *dout,
                                    void **din) {
  zeroc_result_t res = ZEROC_OK;
  int st = m->cfg.stage, next = p->last;
  const void *d = dout;
  m->run.pass_dir = -1;
  for (int i = p->first; i <= p->last; i++) m->u[i].grads_ready = 0;
  for (int i = p->last; i >= p->first; i--) {
    zeroc__unit_t *u = &m->u[i];
    int sh = u->L.shares;
    if (u->nbwd >= m->run.accum) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "backward of unit %d: already %d backward passes this step (accumulation "
                       "%d); call zeroc_model_step",
                       i, u->nbwd, m->run.accum);
      goto fail;
    }
    if (st == 3) {
      if (next >= i) next = i;
      for (; next >= p->first && next >= i - m->K; next--) ZEROC_TRY(issue_gather(m, next));
    }
    ZEROC_TRY(ready_params(m, i));
    if (sh >= 0) ZEROC_TRY(ready_params(m, sh));
    ZEROC_TRY(ready_grads(m, i));
    if (sh >= 0) ZEROC_TRY(ready_grads(m, sh));
    if (m->cfg.recompute && !(i == p->last && !dout)) {
      void *y = NULL;
      ZEROC_TRY(run_forward(m, i, p, u->saved_in[p->slot], 1, 1, &y));
    }
    zeroc_layer_io_t io;
    fill_io(m, i, p, &io);
    io.grads = u->gviews;
    if (sh >= 0) io.shared_grads = m->u[sh].gviews;
    io.in = u->saved_in[p->slot];
    io.dout = d;
    zeroc__watchdog_phase(m->ctx, "backward unit %d ('%s') micro-batch %d", i,
                          u->L.name ? u->L.name : "", p->micro);
    ZEROC_FAULT_IN(m->inject.specs, m->inject.rank, "backward", m->run.attempts + 1, NULL);
    ZEROC_TRY(acts_ready(m, i, &io));
    unsigned long seq = zeroc__tls_error_seq();
    res = u->L.backward(&io);
    if (res != ZEROC_OK) {
      res = callback_failed(m, i, "backward", res, seq);
      goto fail;
    }
    d = io.din;
    /* a pinned unit's gradients are complete only after its own backward */
    if (m->conv_g) ZEROC_TRY(conv_grads_out(m, u));
    if (m->inject.specs) ZEROC_TRY(inject_grad(m, u));
    ZEROC_TRY(reduce_unit(m, i));
    u->nbwd++;
    if (st == 3) ZEROC_TRY(release_params(m, i));
  }
  if (din) *din = (void *)d;
  return ZEROC_OK;
fail:
  return res;
}

/* ---- the whole model ------------------------------------------------------------------- */

zeroc_result_t zeroc_model_eval(zeroc_model_t *m, const void *input, float *loss) {
  CHK(zeroc__model_check(m, "zeroc_model_eval"));
  if (m->run.in_forward)
    return zeroc__ctx_ret(m->ctx,
                          ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                     "zeroc_model_eval while a forward waits for its backward"));
  pass_t p = {0, m->n - 1, 0, m->run.micro, input, 1};
  float l = 0;
  zeroc__eval_mark_t mark;
  zeroc__model_eval_mark(m, &mark);
  zeroc_result_t r = forward_pass(m, &p, NULL, NULL, &l);
  zeroc__model_eval_unmark(m, &mark);
  if (loss) *loss = l;
  return zeroc__ctx_ret(m->ctx, r);
}

/* The failures travel with the loss ([loss, 1 if this rank failed], summed), so a
 * rank whose forward failed does not leave the others of its group waiting, and
 * each of them learns of it. */
zeroc_result_t zeroc_model_eval_mean(zeroc_model_t *m, const void *input, double *loss) {
  CHK(zeroc__model_check(m, "zeroc_model_eval_mean"));
  if (!loss)
    return zeroc__ctx_ret(m->ctx,
                          ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_eval_mean: loss is NULL"));
  int pp = zeroc_ctx_mesh(m->ctx)->pp;
  if (pp > 1 && !m->pipe.eval)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_eval_mean: pp %d: the model is one "
                                             "pipeline stage and has no pipeline; create it "
                                             "first (zeroc_pipeline_create)",
                                             pp));
  float l = 0;
  /* with pp > 1 the input runs through every stage and only the last one's
   * ranks hold a loss (the others add 0): the sum below is over dp x pp */
  zeroc_result_t r = pp > 1 ? m->pipe.eval(m->pipe.p, input, &l) : zeroc_model_eval(m, input, &l);
  double v[2] = {r == ZEROC_OK ? (double)l : 0.0, r != ZEROC_OK ? 1.0 : 0.0};
  zeroc_group_t *dp = zeroc__ctx_group(m->ctx, ZEROC_GROUP_DP);
  zeroc_result_t e = ZEROC_OK;
  if (pp > 1) /* the last stage's loss (and any failure) to every stage */
    e = zeroc__allreduce_host(zeroc__ctx_group(m->ctx, ZEROC_GROUP_PP), v, 2, ZEROC_FP64,
                              ZEROC_SUM);
  if (e == ZEROC_OK) e = zeroc__allreduce_host(dp, v, 2, ZEROC_FP64, ZEROC_SUM);
  if (r != ZEROC_OK) return r; /* zeroc_model_eval kept its message */
  if (e != ZEROC_OK) return zeroc__ctx_ret(m->ctx, e);
  if (v[1] > 0)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_REMOTE,
                                             "zeroc_model_eval_mean: the evaluation failed on %d "
                                             "of the %d data-parallel x %d pipeline ranks",
                                             (int)v[1], dp->size, pp));
  *loss = v[0] / dp->size;
  return ZEROC_OK;
}

void zeroc__model_eval_mark(const zeroc_model_t *m, zeroc__eval_mark_t *mark) {
  mark->bytes = zeroc__model_comm_bytes(m);
  mark->exposed_ms = m->run.exposed_ms;
}

void zeroc__model_eval_unmark(zeroc_model_t *m, const zeroc__eval_mark_t *mark) {
  m->run.bytes_mark += zeroc__model_comm_bytes(m) - mark->bytes;
  m->run.exposed_ms = mark->exposed_ms;
}

zeroc_result_t zeroc_model_forward(zeroc_model_t *m, const void *input) {
  CHK(zeroc__model_check(m, "zeroc_model_forward"));
  if (m->run.in_forward)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_forward called twice without "
                                             "zeroc_model_backward in between"));
  if (m->run.micro >= m->run.accum)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "%d micro-steps already ran (accumulation %d): call "
                                             "zeroc_model_step first",
                                             m->run.micro, m->run.accum));
  pass_t p = {0, m->n - 1, 0, m->run.micro, input, 0};
  zeroc_result_t r = forward_pass(m, &p, NULL, NULL, NULL);
  if (r) return zeroc__ctx_ret(m->ctx, r);
  m->run.batch = input;
  m->run.in_forward = 1;
  return ZEROC_OK;
}

zeroc_result_t zeroc_model_backward(zeroc_model_t *m) {
  CHK(zeroc__model_check(m, "zeroc_model_backward"));
  if (!m->run.in_forward)
    return zeroc__ctx_ret(
        m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_backward without a forward"));
  pass_t p = {0, m->n - 1, 0, m->run.micro, m->run.batch, 0};
  zeroc_result_t r = backward_pass(m, &p, NULL, NULL);
  if (r) return zeroc__ctx_ret(m->ctx, r);
  m->run.micro++;
  m->run.in_forward = 0;
  return ZEROC_OK;
}

/* Whether count n may start now on this rank: ZEROC_OK, or the refusal (recorded). A
 * step's count may change only between steps: its micro-steps' gradients were scaled by
 * 1 / count (io->grad_scale) and the reductions fire after the count-th backward, so a
 * change inside a step would mix two scalings. */
static zeroc_result_t accum_allowed(zeroc_model_t *m, int micro_steps, int n) {
  int done = 0;
  for (int i = 0; i < m->n; i++) done = m->u[i].nbwd > done ? m->u[i].nbwd : done;
  if (micro_steps < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_model_set_accum: %d micro-steps; accepted >= 1, or 0 for the "
                      "model's grad_accum (%d)",
                      micro_steps, m->cfg.grad_accum);
  if (n != m->run.accum && (m->run.in_forward || m->run.micro || done))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_model_set_accum: %d micro-steps asked in the middle of a step of "
                      "%d (%d done): call it before the step's first forward or after "
                      "zeroc_model_step",
                      n, m->run.accum, done > m->run.micro ? done : m->run.micro);
  if (n > 1 && !m->accum_any)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_model_set_accum: %d micro-steps on a model made with grad_accum 1 "
                      "at ZeRO stage %d with %s gradients, whose buffers hold one micro-step: "
                      "make it with grad_accum 2 or more (its default count; set 1 where a "
                      "step needs it)",
                      n, m->cfg.stage, zeroc_dtype_name(m->rdt));
  return ZEROC_OK;
}

/* Collective over the world: the ranks agree first (the largest and smallest count,
 * and whether any refused), so a count chosen on some ranks only is an error on every
 * rank rather than gradients reduced after different micro-steps (wrong at stages
 * 0-1, a hang at 2-3). */
zeroc_result_t zeroc_model_set_accum(zeroc_model_t *m, int micro_steps) {
  CHK(zeroc__model_check(m, "zeroc_model_set_accum"));
  const int n = micro_steps == 0 ? m->cfg.grad_accum : micro_steps;
  const zeroc_result_t mine = accum_allowed(m, micro_steps, n);
  char why[ZEROC_ERRMSG_MAX] = "";
  if (mine) snprintf(why, sizeof why, "%s", zeroc__tls_error());
  double v[3] = {(double)n, -(double)n, mine ? 1.0 : 0.0};
  CHK(zeroc__ctx_ret(m->ctx, zeroc_ctx_allreduce(m->ctx, ZEROC_GROUP_WORLD, v, 3, ZEROC_MAX)));
  if (mine) {
    zeroc__tls_error_set(why);
    return zeroc__ctx_ret(m->ctx, mine);
  }
  if (v[2] > 0)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_set_accum: another rank refused its "
                                             "count (its message is on that rank); %d kept",
                                             m->run.accum));
  if (v[0] != -v[1])
    return zeroc__ctx_ret(m->ctx,
                          ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                     "zeroc_model_set_accum: the ranks chose %d to %d "
                                     "micro-steps (this one %d): every rank must choose the "
                                     "same count; %d kept",
                                     (int)-v[1], (int)v[0], n, m->run.accum));
  m->run.accum = n;
  return ZEROC_OK;
}

int zeroc_model_accum(const zeroc_model_t *m) {
  if (zeroc__model_check(m, "zeroc_model_accum")) return -1;
  return m->run.accum;
}

/* ---- running parts of the model (pipeline parallelism) ----------------------------- */

zeroc_result_t zeroc__model_set_slots(zeroc_model_t *m, int slots) {
  if (slots < 1 || slots > 4096)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "micro-batch slots %d: accepted 1..4096", slots);
  for (int i = 0; i < m->n; i++)
    if (m->run.in_forward || m->run.micro || m->u[i].nbwd)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "micro-batch slots can change only between optimizer steps");
  for (int i = 0; i < m->n; i++) {
    const void **s = calloc((size_t)slots, sizeof *s);
    if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "saved inputs of %d slots", slots);
    free(m->u[i].saved_in);
    m->u[i].saved_in = s;
    CHK(zeroc__model_acts_alloc(m, i, slots)); /* nothing is saved between steps */
  }
  m->slots = slots;
  return ZEROC_OK;
}

void zeroc__model_tie(zeroc_model_t *m, zeroc_group_t *g, int owner) {
  m->tie.g = g;
  m->tie.owner = owner;
}

/* What a range of units may be run with; the same checks for both directions. */
static zeroc_result_t range_check(zeroc_model_t *m, const char *what, int first, int last, int slot,
                                  int micro) {
  if (m->run.in_forward)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s while a whole-model forward waits for its backward", what);
  if (first < 0 || last >= m->n || first > last)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: units [%d, %d]; accepted 0 <= first <= last < %d",
                      what, first, last, m->n);
  if (slot < 0 || slot >= m->slots)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: slot %d; accepted 0..%d (zeroc__model_set_slots)",
                      what, slot, m->slots - 1);
  if (micro < 0 || micro >= m->run.accum)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: micro-batch %d; accepted 0..%d (accumulation %d)",
                      what, micro, m->run.accum - 1, m->run.accum);
  if (m->cfg.stage > 1)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s needs ZeRO stage 0 or 1 (stage is %d): with several micro-batches in "
                      "flight the parameters must stay gathered and the gradients are reduced "
                      "once, after the last micro-batch",
                      what, m->cfg.stage);
  for (int i = first; i <= last; i++)
    if (m->u[i].L.shares >= 0 || m->u[i].pinned)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "%s: unit %d ('%s') shares parameters with another unit; a range needs "
                        "units without `shares` (tie copies across ranks with ZEROC_PARAM_TIED)",
                        what, i, m->u[i].L.name ? m->u[i].L.name : "");
  return ZEROC_OK;
}

zeroc_result_t zeroc__model_forward_units(zeroc_model_t *m, int first, int last, int slot,
                                          int micro, const void *batch, const void *in,
                                          void **out) {
  CHK(range_check(m, "forward of a unit range", first, last, slot, micro));
  pass_t p = {first, last, slot, micro, batch, 0};
  return forward_pass(m, &p, in, out, NULL);
}

zeroc_result_t zeroc__model_eval_units(zeroc_model_t *m, int first, int last, int slot, int micro,
                                       const void *batch, const void *in, void **out, float *loss) {
  CHK(range_check(m, "evaluation of a unit range", first, last, slot, micro));
  pass_t p = {first, last, slot, micro, batch, 1};
  return forward_pass(m, &p, in, out, loss);
}

zeroc_result_t zeroc__model_backward_units(zeroc_model_t *m, int first, int last, int slot,
                                           int micro, const void *batch, const void *dout,
                                           void **din) {
  CHK(range_check(m, "backward of a unit range", first, last, slot, micro));
  pass_t p = {first, last, slot, micro, batch, 0};
  return backward_pass(m, &p, dout, din);
}
