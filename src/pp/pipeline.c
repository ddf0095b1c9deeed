/*
 * pp/pipeline.c - the pipeline runtime: the balanced stage partition, the
 * activation slots a rank needs, and one step's schedule (pp/schedule.c)
 * executed on real ranks, with activations and gradients moving on four
 * point-to-point streams of their own while compute runs on the caller.
 *
 * Why four streams and no per-group wait: a rank receives activations only
 * from rank r-1 (mod p) and gradients only from r+1, and sends to the other
 * side, and the generated schedules post each of these four kinds of message
 * in the same order on both ends (zeroc__pp_orders_match, asserted over a grid
 * of (kind, p, m, v) by test_pp_schedule and checked again at creation).
 * With one FIFO stream per kind, the k-th operation on a send stream meets the
 * k-th on its peer's receive stream, so posting in schedule order cannot
 * deadlock however far compute runs ahead, and compute waits only for the
 * receive it consumes: a receive posted early (the schedule's
 * post-together groups) overlaps the compute before it. Each group is bracketed with
 * zeroc__comm_group_start/end (ncclGroupStart/End: NCCL launches the group's
 * transfers together at its end, so the events that mark them are recorded
 * after it; nothing on mpi).
 */
#include "zeroc/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "pp/pipeline.h"
#include "pp/schedule.h"
#include "pp/sizes.h"
#include "runtime/runtime.h"
#include "shard/engine.h"

/* the four streams, by message kind */
enum { RA, RG, SA, SG, NSTREAMS };

struct zeroc_pipeline {
  zeroc_model_t *m;
  zeroc_ctx_t *ctx;
  zeroc_pipeline_config_t cfg;
  zeroc_pp_schedule_t *sched;
  const zeroc_pp_action_t *acts;
  size_t nacts;
  int p, r, v, nmb, S, W;
  int *cfirst, *clast; /* local unit range of each chunk */
  zeroc_group_t *pp_g, *tie_g;
  zeroc_stream_t *s[NSTREAMS];
  size_t bytes; /* one boundary tensor */
  /* per (chunk, slot), index c*W + slot */
  void **act_in, **grad_in, **grad_out;
  void **out_ptr;
  zeroc_event_t **ev_ra, **ev_rg, **ev_sa, **ev_sg, **ev_fwd, **ev_bwd;
};

/* ---- pure arithmetic ------------------------------------------------------------------- */

zeroc_result_t zeroc_pipeline_schedule_parse(const char *name, zeroc_pipeline_schedule_t *out) {
  zeroc_pp_kind_t k;
  CHK(zeroc__pp_kind_parse(name, &k));
  *out = (zeroc_pipeline_schedule_t)k;
  return ZEROC_OK;
}

zeroc_result_t zeroc_pipeline_partition(const double *cost, int n, int stages, int *bounds) {
  zeroc_result_t res = ZEROC_OK;
  if (!cost || !bounds)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_pipeline_partition: NULL argument");
  if (stages < 1 || n < stages)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "cutting %d units into %d pipeline stages: every stage needs at least one "
                      "unit (accepted 1 <= stages <= units)",
                      n, stages);
  for (int i = 0; i < n; i++)
    if (!(cost[i] >= 0) || !isfinite(cost[i]))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d has cost %g; accepted finite costs >= 0", i,
                        cost[i]);
  /* best[s][i]: the smallest largest-stage cost of units [0, i) in s+1 stages;
   * cut[s][i] the start of the last stage there. O(stages n^2). */
  size_t cells = (size_t)stages * (size_t)(n + 1);
  double *pre = malloc(sizeof(double) * (size_t)(n + 1)), *best = malloc(sizeof(double) * cells);
  int *cut = malloc(sizeof(int) * cells);
  if (!pre || !best || !cut) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "partition tables for %d units, %d stages", n, stages);
    goto fail;
  }
  pre[0] = 0;
  for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + cost[i];
  for (int i = 0; i <= n; i++) best[i] = pre[i], cut[i] = 0;
  for (int s = 1; s < stages; s++) {
    double *b = best + (size_t)s * (n + 1), *pb = best + (size_t)(s - 1) * (n + 1);
    int *c = cut + (size_t)s * (n + 1);
    for (int i = 0; i <= n; i++) {
      b[i] = INFINITY;
      c[i] = -1;
      /* the last stage is [j, i): j >= s (s earlier stages of one unit at least) */
      for (int j = s; j < i; j++) {
        double v = pb[j] > pre[i] - pre[j] ? pb[j] : pre[i] - pre[j];
        if (v < b[i] * (1 - 1e-12)) b[i] = v, c[i] = j;
      }
    }
  }
  bounds[stages] = n;
  for (int s = stages - 1, i = n; s >= 0; s--) {
    int j = s ? cut[(size_t)s * (n + 1) + i] : 0;
    bounds[s] = j;
    i = j;
  }
fail:
  free(pre);
  free(best);
  free(cut);
  return res;
}

/* Copies the caller's config and resolves the fields left unset (ZEROC_UNSET)
 * to the library's defaults. */
static zeroc_result_t read_config(const zeroc_pipeline_config_t *in, zeroc_pipeline_config_t *out) {
  if (!in || in->magic != ZEROC_CONFIG_MAGIC || in->size < sizeof(zeroc_pipeline_config_t) ||
      in->size > 65536)
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "zeroc_pipeline_config_t was not initialised with ZEROC_PIPELINE_CONFIG_INIT");
  *out = *in;
  out->size = sizeof *out;
  if (out->schedule == ZEROC_PIPELINE_DEFAULT) out->schedule = ZEROC_PIPELINE_1F1B;
  if (out->microbatches == ZEROC_UNSET) out->microbatches = 1;
  if (out->chunks == ZEROC_UNSET) out->chunks = 1;
  if (out->act_dtype == ZEROC_DTYPE_UNSET) out->act_dtype = ZEROC_FP32;
  return ZEROC_OK;
}

zeroc_result_t zeroc_pipeline_slots(const zeroc_pipeline_config_t *cfg, int pp, int rank,
                                    int *slots) {
  zeroc_pipeline_config_t c;
  zeroc_pp_schedule_t *s = NULL;
  int contiguous;
  CHK(read_config(cfg, &c));
  if (rank < 0 || rank >= pp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pipeline rank %d: accepted 0..%d", rank, pp - 1);
  CHK(zeroc__pp_schedule_create((zeroc_pp_kind_t)c.schedule, pp, c.microbatches, c.chunks, &s));
  zeroc_result_t r = zeroc__pp_alive_width(s, rank, slots, &contiguous);
  zeroc__pp_schedule_destroy(s);
  return r;
}

zeroc_result_t zeroc_pipeline_print_schedule(FILE *f, const zeroc_pipeline_config_t *cfg, int pp,
                                             int comm) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_pipeline_config_t c;
  zeroc_pp_schedule_t *s = NULL;
  zeroc_pp_sim_t *sim = NULL;
  CHK(read_config(cfg, &c));
  CHK(zeroc__pp_schedule_create((zeroc_pp_kind_t)c.schedule, pp, c.microbatches, c.chunks, &s));
  ZEROC_TRY(zeroc__pp_schedule_print(f, s, comm ? ZEROC_PP_PRINT_COMM : 0));
  fprintf(f, "activation sets kept per rank:");
  for (int r = 0; r < pp; r++) {
    int w, contiguous;
    ZEROC_TRY(zeroc__pp_alive_width(s, r, &w, &contiguous));
    fprintf(f, " r%d %d", r, w);
  }
  fprintf(f, "\n");
  zeroc_pp_sim_config_t sc = ZEROC_PP_SIM_CONFIG_INIT;
  ZEROC_TRY(zeroc__pp_simulate(s, &sc, &sim));
  double ideal = (double)c.microbatches * c.chunks * (sc.tf + sc.tb);
  double vm = (double)c.microbatches * c.chunks;
  fprintf(f,
          "simulated with equal stages (chunk forward 1, backward 2, free messages): step %g, "
          "idle per rank %g = %.4f of the busy time (theory (p-1)/(v m) = %.4f), %.4f of the "
          "step (theory (p-1)/(v m + p - 1) = %.4f)\n",
          sim->makespan, sim->idle[0], sim->idle[0] / ideal, (pp - 1) / vm,
          sim->idle[0] / sim->makespan, zeroc__pp_bubble_fraction(pp, c.microbatches, c.chunks));
  if (fflush(f)) res = ZEROC_FAIL(ZEROC_ERR_IO, "writing the schedule failed");
fail:
  zeroc__pp_sim_destroy(sim);
  zeroc__pp_schedule_destroy(s);
  return res;
}

int zeroc__pp_orders_match(const zeroc_pp_schedule_t *s) {
  int ok = 1;
  /* per sending rank and kind (0 activations, 1 gradients): the (mb, stage) sequence */
  for (int r = 0; r < s->p && ok; r++) {
    for (int dir = 0; dir < 2 && ok; dir++) {
      int peer = dir == 0 ? (r + 1) % s->p : (r - 1 + s->p) % s->p;
      size_t ns, nr;
      const zeroc_pp_action_t *a = zeroc__pp_rank_actions(s, r, &ns);
      const zeroc_pp_action_t *b = zeroc__pp_rank_actions(s, peer, &nr);
      int sop = dir == 0 ? ZEROC_PP_SEND_ACT : ZEROC_PP_SEND_GRAD;
      int rop = dir == 0 ? ZEROC_PP_RECV_ACT : ZEROC_PP_RECV_GRAD;
      size_t i = 0, j = 0;
      for (;;) {
        while (i < ns && a[i].op != sop) i++;
        while (j < nr && b[j].op != rop) j++;
        if (i == ns || j == nr) {
          ok &= i == ns && j == nr;
          break;
        }
        if (a[i].mb != b[j].mb || a[i].peer_chunk != b[j].chunk || b[j].peer_chunk != a[i].chunk)
          ok = 0;
        i++, j++;
      }
    }
  }
  return ok;
}

/* ---- creating and destroying ---------------------------------------------------------------- */

void zeroc_pipeline_destroy(zeroc_pipeline_t *p) {
  if (!p) return;
  if (p->m && p->m->pipe.p == p) memset(&p->m->pipe, 0, sizeof p->m->pipe);
  for (int i = 0; i < NSTREAMS; i++)
    if (p->s[i]) zeroc_stream_sync(p->s[i]);
  for (int i = 0; i < NSTREAMS; i++) zeroc_stream_destroy(p->s[i]);
  int cells = p->v * p->W;
  void **bufs[3] = {p->act_in, p->grad_in, p->grad_out};
  for (int b = 0; b < 3; b++)
    for (int k = 0; bufs[b] && k < cells; k++) zeroc_mem_free(p->ctx, bufs[b][k]);
  zeroc_event_t **evs[6] = {p->ev_ra, p->ev_rg, p->ev_sa, p->ev_sg, p->ev_fwd, p->ev_bwd};
  for (int e = 0; e < 6; e++) {
    for (int k = 0; evs[e] && k < cells; k++) zeroc_event_destroy(evs[e][k]);
    free(evs[e]);
  }
  for (int b = 0; b < 3; b++) free(bufs[b]);
  free(p->out_ptr);
  free(p->cfirst);
  free(p->clast);
  zeroc__group_destroy(p->tie_g);
  zeroc__pp_schedule_destroy(p->sched);
  free(p);
}

/* The model's micro-steps per optimizer step (its grad_accum, or the count
 * zeroc_model_set_accum chose) must be the micro-batches the pipeline runs. */
static zeroc_result_t accum_matches(const zeroc_pipeline_t *p) {
  if (!p->m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pipeline: its model was destroyed");
  int a = zeroc_model_accum(p->m);
  if (a != p->nmb)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "the model accumulates %d micro-steps per optimizer step (grad_accum, or "
                      "zeroc_model_set_accum), the pipeline runs %d micro-batches: they must be "
                      "equal",
                      a, p->nmb);
  return ZEROC_OK;
}

/* Local checks and allocations: everything that can fail on one rank alone. */
static zeroc_result_t create_local(zeroc_pipeline_t *p, const int *chunk_first,
                                   const int *chunk_count) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(p->ctx);
  zeroc_model_t *m = p->m;
  zeroc_pipeline_config_t *c = &p->cfg;
  p->p = mesh->pp;
  p->r = mesh->pp_rank;
  p->v = c->chunks;
  p->nmb = c->microbatches;
  if (p->p < 2)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "a pipeline needs at least 2 pipeline ranks (the context's mesh has pp %d)",
                      p->p);
  if (m->cfg.stage > 1)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "pipeline parallelism with ZeRO stage %d: accepted stage 0 or 1 (the "
                      "gradients of every micro-batch stay on the stage and are reduced once, "
                      "after the last)",
                      m->cfg.stage);
  CHK(accum_matches(p));
  if (!c->act_numel || !zeroc_dtype_size(c->act_dtype))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pipeline activations of %zu elements of %s: need > 0 "
                      "elements of a known dtype",
                      c->act_numel, zeroc_dtype_name(c->act_dtype));
  if (c->act_numel > (size_t)2147483647)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "pipeline activations of %zu elements exceed a "
                      "message's int count",
                      c->act_numel);
  CHK(zeroc__pp_schedule_create((zeroc_pp_kind_t)c->schedule, p->p, p->nmb, p->v, &p->sched));
  p->S = p->p * p->v;
  p->acts = zeroc__pp_rank_actions(p->sched, p->r, &p->nacts);
  int contiguous;
  CHK(zeroc__pp_alive_width(p->sched, p->r, &p->W, &contiguous));
  /* one FIFO stream per message kind needs the same order on both ends */
  if (!zeroc__pp_orders_match(p->sched))
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "pipeline schedule %s (p %d, m %d, v %d): a rank's sends and its peer's "
                      "receives of one kind come in different orders (schedule generator bug)",
                      zeroc__pp_kind_name((zeroc_pp_kind_t)c->schedule), p->p, p->nmb, p->v);
  /* message tags: below 2 m (S-1), which MPI must be able to carry */
  int64_t max_tag = 2 * (int64_t)p->nmb * (p->S - 1) - 1;
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  if (flag && ub && max_tag > *ub)
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "pipeline messages need tags up to %lld (2 x %d micro-batches x %d stage "
        "boundaries), above this MPI's MPI_TAG_UB %d: use fewer micro-batches or stages",
        (long long)max_tag, p->nmb, p->S - 1, *ub);
  /* the chunks must cover the model's units in order */
  p->cfirst = calloc((size_t)p->v, sizeof(int));
  p->clast = calloc((size_t)p->v, sizeof(int));
  if (!p->cfirst || !p->clast) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline chunk table");
  for (int ch = 0, next = 0; ch < p->v; ch++) {
    if (!chunk_first || !chunk_count || chunk_first[ch] != next || chunk_count[ch] < 1)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "pipeline chunk %d: units [%d, +%d); accepted %d consecutive non-empty "
                        "ranges covering the model's %d units",
                        ch, chunk_first ? chunk_first[ch] : -1, chunk_count ? chunk_count[ch] : 0,
                        p->v, m->n);
    p->cfirst[ch] = next;
    p->clast[ch] = next + chunk_count[ch] - 1;
    next += chunk_count[ch];
    if (ch == p->v - 1 && next != m->n)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pipeline chunks cover %d units, the model has %d",
                        next, m->n);
  }
  CHK(zeroc__model_set_slots(m, p->W));
  /* buffers and events per (chunk, slot) */
  int cells = p->v * p->W;
  p->bytes =
      (size_t)zeroc__pp_boundary_bytes((double)c->act_numel, (int)zeroc_dtype_size(c->act_dtype));
  p->act_in = calloc((size_t)cells, sizeof(void *));
  p->grad_in = calloc((size_t)cells, sizeof(void *));
  p->grad_out = calloc((size_t)cells, sizeof(void *));
  p->out_ptr = calloc((size_t)cells, sizeof(void *));
  zeroc_event_t ***evs[6] = {&p->ev_ra, &p->ev_rg, &p->ev_sa, &p->ev_sg, &p->ev_fwd, &p->ev_bwd};
  for (int e = 0; e < 6; e++) *evs[e] = calloc((size_t)cells, sizeof(zeroc_event_t *));
  if (!p->act_in || !p->grad_in || !p->grad_out || !p->out_ptr || !p->ev_ra || !p->ev_rg ||
      !p->ev_sa || !p->ev_sg || !p->ev_fwd || !p->ev_bwd)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline tables");
  for (int ch = 0; ch < p->v; ch++) {
    int stage = ch * p->p + p->r, prev = stage > 0, next = stage < p->S - 1;
    for (int sl = 0; sl < p->W; sl++) {
      int k = ch * p->W + sl;
      if (prev) {
        CHK(zeroc_mem_alloc(p->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, p->bytes,
                            &p->act_in[k]));
        CHK(zeroc_mem_alloc(p->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, p->bytes,
                            &p->grad_out[k]));
      }
      if (next)
        CHK(zeroc_mem_alloc(p->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, p->bytes, &p->grad_in[k]));
      for (int e = 0; e < 6; e++) CHK(zeroc_event_create(p->ctx, &(*evs[e])[k]));
    }
  }
  /* activations go to rank+1, gradients to rank-1 (mod p): one direction and
   * side per stream, so that nccl gives each its own communicator */
  static const int dir[NSTREAMS] = {[RA] = 1, [SA] = 1, [RG] = -1, [SG] = -1};
  for (int i = 0; i < NSTREAMS; i++)
    CHK(zeroc__stream_create_p2p(zeroc__ctx_device(p->ctx), 1, dir[i], &p->s[i]));
  p->pp_g = zeroc__ctx_group(p->ctx, ZEROC_GROUP_PP);
  return ZEROC_OK;
}

/* One micro-batch's forward through every stage, in stage order, blocking
 * (evaluation between steps, nothing else in flight): rank r runs its chunk c
 * (stage c p + r) once stage c p + r - 1 has sent its output, so the stages
 * finish one after another and no send waits on a rank that waits on it. *loss:
 * the last stage's loss on its ranks, 0 on the others. */
static zeroc_result_t eval_one(void *pv, const void *input, float *loss) {
  zeroc_pipeline_t *p = pv;
  if (!p->m)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pipeline evaluation: its model was destroyed");
  zeroc_stream_t *cs = p->m->compute;
  size_t numel = p->cfg.act_numel;
  zeroc_dtype_t dt = p->cfg.act_dtype;
  zeroc__eval_mark_t mark;
  zeroc__model_eval_mark(p->m, &mark);
  zeroc_result_t res = ZEROC_OK;
  *loss = 0;
  for (int ch = 0; ch < p->v && !res; ch++) {
    int stage = ch * p->p + p->r, k = ch * p->W;
    const void *in = NULL;
    void *y = NULL;
    float l = 0;
    if (stage > 0) {
      res = zeroc__recv(p->pp_g, p->s[RA], p->act_in[k], numel, dt, (p->r + p->p - 1) % p->p, 0);
      if (!res) res = zeroc_stream_sync(p->s[RA]);
      in = p->act_in[k];
    }
    if (!res)
      res = zeroc__model_eval_units(p->m, p->cfirst[ch], p->clast[ch], 0, 0, input, in, &y, &l);
    if (!res) res = zeroc_stream_sync(cs);
    if (!res && stage < p->S - 1) {
      res = y ? zeroc__send(p->pp_g, p->s[SA], y, numel, dt, (p->r + 1) % p->p, 0)
              : ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                           "unit %d, the last of pipeline stage %d, returned no output to send",
                           p->clast[ch], stage);
      if (!res) res = zeroc_stream_sync(p->s[SA]);
    }
    if (stage == p->S - 1) *loss = l;
  }
  zeroc__model_eval_unmark(p->m, &mark);
  return res;
}

zeroc_result_t zeroc_pipeline_create(zeroc_model_t *m, const int *chunk_first,
                                     const int *chunk_count, const zeroc_pipeline_config_t *cfg,
                                     zeroc_pipeline_t **out) {
  zeroc_result_t res = ZEROC_OK;
  if (!m || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_pipeline_create: NULL model or output");
  *out = NULL;
  zeroc_ctx_t *ctx = m->ctx;
  zeroc_pipeline_t *p = calloc(1, sizeof *p);
  if (!p) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline struct"));
  p->m = m;
  p->ctx = ctx;
  res = read_config(cfg, &p->cfg);
  if (!res) res = create_local(p, chunk_first, chunk_count);
  /* one rank's failure stops every rank here, before the collectives below */
  ZEROC_TRY(zeroc_ctx_agree(ctx, res));

  /* the tied copies: (first stage, dp d, cp c, tp t) with (last stage, dp d, cp c, tp t) */
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int ends = mesh->pp_rank == 0 || mesh->pp_rank == mesh->pp - 1;
  ZEROC_TRY(zeroc__group_split(zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD),
                               ends ? (mesh->dp_rank * mesh->cp + mesh->cp_rank) * mesh->tp + mesh->tp_rank : -1, mesh->pp_rank,
                               "pp_tied", &p->tie_g));
  int64_t tied = 0;
  for (int i = 0; i < m->n; i++)
    for (int j = 0; j < m->u[i].f.n; j++)
      if (m->u[i].f.p[j].flags & ZEROC_PARAM_TIED) tied += (int64_t)m->u[i].f.p[j].numel;
  if (p->tie_g) {
    int64_t mm[2] = {tied, -tied};
    res = zeroc__allreduce_host(p->tie_g, mm, 2, ZEROC_INT64, ZEROC_MIN);
    if (!res && mm[0] != -mm[1])
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "tied parameters (ZEROC_PARAM_TIED) differ between the first and the last "
                       "pipeline stage: %lld and %lld elements; both ends must hold the same copy",
                       (long long)mm[0], (long long)-mm[1]);
    if (!res && tied) zeroc__model_tie(m, p->tie_g, mesh->pp_rank == 0);
  } else if (tied) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "pipeline rank %d holds %lld elements of tied parameters (ZEROC_PARAM_TIED); "
                     "only the first and the last stage may",
                     mesh->pp_rank, (long long)tied);
  }
  ZEROC_TRY(zeroc_ctx_agree(ctx, res));
  ZINFO(COMM,
        "pipeline: %s, rank %d of %d, %d chunks, %d micro-batches, %d activation slots, "
        "%zu bytes per message%s",
        zeroc__pp_kind_name((zeroc_pp_kind_t)p->cfg.schedule), p->r, p->p, p->v, p->nmb, p->W,
        p->bytes, tied ? ", tied embedding" : "");
  /* the model's own calls that span the stages (zeroc_model_eval_mean) find it */
  m->pipe.p = p;
  m->pipe.eval = eval_one;
  m->pipe.backref = (void **)&p->m;
  *out = p;
  return ZEROC_OK;
fail:
  if (p->tie_g && m->tie.g == p->tie_g) zeroc__model_tie(m, NULL, 0);
  zeroc_pipeline_destroy(p);
  return zeroc__ctx_ret(ctx, res);
}

/* ---- one step ---------------------------------------------------------------------------- */

/* Compute waits for a communication event; the time counts as waiting (where
 * compute runs on the host, cpu, the wait blocks here; elsewhere it is stream
 * order and costs nothing). */
static zeroc_result_t wait_comm(zeroc_pipeline_t *p, zeroc_event_t *e, double *wait_ms) {
  double t0 = zeroc__now_ms();
  zeroc_result_t r = zeroc_stream_wait_event(p->m->compute, e);
  *wait_ms += zeroc__now_ms() - t0;
  return r;
}

/* An event to record on a stream once the current communication group is
 * posted. */
typedef struct {
  zeroc_event_t *e;
  zeroc_stream_t *s;
} pending_t;

enum { MAX_GROUP = 64 };

/* What one run does and what it measured. An evaluation (eval) runs the
 * schedule's forwards and activation messages only: the same order, less the
 * backward half, which cannot add a wait (pipeline.c's header). */
typedef struct run {
  const void *const *batches;
  int eval;
  double compute, wait, loss;
  uint64_t sent;
} run_t;

/* FORWARD of (a->mb, a->chunk) in slot k. */
static zeroc_result_t act_forward(zeroc_pipeline_t *p, const zeroc_pp_action_t *a, run_t *rn) {
  int ch = a->chunk, mb = a->mb, sl = mb % p->W, k = ch * p->W + sl;
  int stage = ch * p->p + p->r, has_prev = stage > 0, has_next = stage < p->S - 1;
  const void *in = NULL;
  zeroc__watchdog_phase(p->ctx, "pipeline %s of micro-batch %d, chunk %d (stage %d)",
                        rn->eval ? "evaluation" : "forward", mb, ch, stage);
  if (has_prev) {
    CHK(wait_comm(p, p->ev_ra[k], &rn->wait));
    in = p->act_in[k];
  }
  /* the forward rewrites the output the slot's previous micro-batch sent */
  if (has_next) CHK(wait_comm(p, p->ev_sa[k], &rn->wait));
  double t0 = zeroc__now_ms();
  void *y = NULL;
  float loss = 0;
  int first = p->cfirst[ch], last = p->clast[ch];
  if (rn->eval)
    CHK(zeroc__model_eval_units(p->m, first, last, sl, mb, rn->batches[mb], in, &y, &loss));
  else
    CHK(zeroc__model_forward_units(p->m, first, last, sl, mb, rn->batches[mb], in, &y));
  rn->compute += zeroc__now_ms() - t0;
  rn->loss += loss;
  if (has_next && !y)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "unit %d, the last of pipeline stage %d, returned no output to send", last,
                      stage);
  p->out_ptr[k] = y;
  return zeroc_event_record(p->ev_fwd[k], p->m->compute);
}

/* BACKWARD of (a->mb, a->chunk) in slot k. */
static zeroc_result_t act_backward(zeroc_pipeline_t *p, const zeroc_pp_action_t *a, run_t *rn) {
  int ch = a->chunk, mb = a->mb, sl = mb % p->W, k = ch * p->W + sl;
  int stage = ch * p->p + p->r, has_prev = stage > 0, has_next = stage < p->S - 1;
  zeroc_stream_t *cs = p->m->compute;
  const void *dout = NULL;
  zeroc__watchdog_phase(p->ctx, "pipeline backward of micro-batch %d, chunk %d (stage %d)", mb, ch,
                        stage);
  if (has_next) {
    CHK(wait_comm(p, p->ev_rg[k], &rn->wait));
    dout = p->grad_in[k];
    /* recompute rewrites the output buffer: its send must be over */
    CHK(wait_comm(p, p->ev_sa[k], &rn->wait));
  }
  if (has_prev) CHK(wait_comm(p, p->ev_sg[k], &rn->wait));
  double t0 = zeroc__now_ms();
  void *din = NULL;
  CHK(zeroc__model_backward_units(p->m, p->cfirst[ch], p->clast[ch], sl, mb, rn->batches[mb], dout,
                                  &din));
  if (has_prev) {
    if (!din)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "unit %d, the first of pipeline stage %d, returned no input gradient",
                        p->cfirst[ch], stage);
    /* the layer's gradient buffer is scratch its next backward reuses */
    CHK(zeroc_memcpy_async(cs, p->grad_out[k], din, p->bytes));
  }
  rn->compute += zeroc__now_ms() - t0;
  return zeroc_event_record(p->ev_bwd[k], cs);
}

/* This rank's action list, in order; the last sends are waited for. */
static zeroc_result_t run_actions(zeroc_pipeline_t *p, run_t *rn) {
  zeroc_result_t res = ZEROC_OK;
  pending_t pend[MAX_GROUP];
  int npend = 0, in_group = 0;
  size_t numel = p->cfg.act_numel;
  zeroc_dtype_t dt = p->cfg.act_dtype;
  for (size_t i = 0; i < p->nacts; i++) {
    const zeroc_pp_action_t *a = &p->acts[i];
    int k = a->chunk * p->W + a->mb % p->W;
    int tag = (int)zeroc__pp_action_tag(p->sched, p->r, a);
    /* an evaluation has no backward half: no gradients, nothing waits for them */
    int skip = rn->eval && (a->op == ZEROC_PP_BACKWARD || a->op == ZEROC_PP_RECV_GRAD ||
                            a->op == ZEROC_PP_SEND_GRAD);
    if (zeroc__pp_is_comm(a->op) && !in_group) {
      ZEROC_TRY(zeroc__comm_group_start(p->pp_g));
      in_group = 1;
    }
    if (npend == MAX_GROUP) {
      res =
          ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pipeline: a group of more than %d transfers", MAX_GROUP);
      goto fail;
    }
    switch (skip ? ZEROC_PP_OP_COUNT : a->op) {
    case ZEROC_PP_RECV_ACT:
      /* the slot's previous micro-batch must be done with the buffer (its
       * backward; an evaluation's forward) */
      ZEROC_TRY(zeroc_stream_wait_event(p->s[RA], rn->eval ? p->ev_fwd[k] : p->ev_bwd[k]));
      ZEROC_TRY(zeroc__recv(p->pp_g, p->s[RA], p->act_in[k], numel, dt, a->peer, tag));
      pend[npend++] = (pending_t){p->ev_ra[k], p->s[RA]};
      break;
    case ZEROC_PP_RECV_GRAD:
      ZEROC_TRY(zeroc_stream_wait_event(p->s[RG], p->ev_bwd[k]));
      ZEROC_TRY(zeroc__recv(p->pp_g, p->s[RG], p->grad_in[k], numel, dt, a->peer, tag));
      pend[npend++] = (pending_t){p->ev_rg[k], p->s[RG]};
      break;
    case ZEROC_PP_SEND_ACT:
      ZEROC_TRY(zeroc_stream_wait_event(p->s[SA], p->ev_fwd[k]));
      ZEROC_TRY(zeroc__send(p->pp_g, p->s[SA], p->out_ptr[k], numel, dt, a->peer, tag));
      pend[npend++] = (pending_t){p->ev_sa[k], p->s[SA]};
      rn->sent += p->bytes;
      break;
    case ZEROC_PP_SEND_GRAD:
      ZEROC_TRY(zeroc_stream_wait_event(p->s[SG], p->ev_bwd[k]));
      ZEROC_TRY(zeroc__send(p->pp_g, p->s[SG], p->grad_out[k], numel, dt, a->peer, tag));
      pend[npend++] = (pending_t){p->ev_sg[k], p->s[SG]};
      rn->sent += p->bytes;
      break;
    case ZEROC_PP_FORWARD:
      ZEROC_TRY(act_forward(p, a, rn));
      break;
    case ZEROC_PP_BACKWARD:
      ZEROC_TRY(act_backward(p, a, rn));
      break;
    case ZEROC_PP_OP_COUNT:
      break; /* skipped */
    default:
      res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pipeline action %zu: op %d", i, a->op);
      goto fail;
    }
    if (in_group && !(a->flags & ZEROC_PP_WITH_NEXT)) {
      /* the group is complete: post it, then mark its transfers */
      in_group = 0;
      ZEROC_TRY(zeroc__comm_group_end(p->pp_g));
      for (int j = 0; j < npend; j++) ZEROC_TRY(zeroc_event_record(pend[j].e, pend[j].s));
      npend = 0;
    }
  }
  /* the last sends are complete when their peers have received them */
  double t0 = zeroc__now_ms();
  for (int s = 0; s < NSTREAMS; s++) ZEROC_TRY(zeroc_stream_sync(p->s[s]));
  rn->wait += zeroc__now_ms() - t0;
  ZEROC_TRY(zeroc_stream_sync(p->m->compute));
  return ZEROC_OK;
fail:
  if (in_group) zeroc__comm_group_end(p->pp_g); /* the failure is the one reported */
  return res;
}

zeroc_result_t zeroc_pipeline_run(zeroc_pipeline_t *p, const void *const *batches,
                                  zeroc_pipeline_stats_t *stats) {
  if (!p || !batches)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_pipeline_run: NULL pipeline or batches");
  double t_run = zeroc__now_ms();
  run_t rn = {batches, 0, 0, 0, 0, 0};
  zeroc_result_t res = accum_matches(p);
  if (!res) res = run_actions(p, &rn);
  if (res) return zeroc__ctx_ret(p->ctx, res);
  if (stats) {
    stats->run_ms = zeroc__now_ms() - t_run;
    stats->compute_ms = rn.compute;
    stats->wait_ms = rn.wait;
    stats->bubble = stats->run_ms > 0 ? (stats->run_ms - rn.compute) / stats->run_ms : 0;
    stats->sent_bytes = rn.sent;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_pipeline_eval(zeroc_pipeline_t *p, const void *const *batches, double *loss) {
  if (!p || !batches || !loss)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_pipeline_eval: NULL pipeline, batches or loss");
  if (!p->m)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_pipeline_eval: its model was destroyed");
  run_t rn = {batches, 1, 0, 0, 0, 0};
  zeroc__eval_mark_t mark;
  zeroc__model_eval_mark(p->m, &mark);
  zeroc_result_t res = run_actions(p, &rn);
  /* the loss unit is on the last stage: its mean reaches every pipeline rank */
  double mean = rn.loss / p->nmb;
  if (!res) res = zeroc__allreduce_host(p->pp_g, &mean, 1, ZEROC_FP64, ZEROC_SUM);
  zeroc__model_eval_unmark(p->m, &mark);
  if (res) return zeroc__ctx_ret(p->ctx, res);
  *loss = mean;
  return ZEROC_OK;
}

int zeroc__pipeline_unit_stage(const zeroc_model_t *m, int unit) {
  const zeroc_pipeline_t *p = m->pipe.p;
  if (!p) return zeroc_ctx_mesh(m->ctx)->pp_rank;
  for (int ch = 0; ch < p->v; ch++)
    if (unit >= p->cfirst[ch] && unit <= p->clast[ch]) return ch * p->p + p->r;
  return -1;
}
