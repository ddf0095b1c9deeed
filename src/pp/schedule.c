/*
 * pp/schedule.c - pipeline schedule generators (GPipe, 1F1B, interleaved 1F1B),
 * the structural checker, message tags and the one-line-per-rank printer.
 * The simulator is in schedule_sim.c.
 */
#include "pp/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Limits that keep every index in int32 and the tables small. */
#define PP_MAX_P     4096
#define PP_MAX_V     64
#define PP_MAX_M     (1 << 20)
#define PP_MAX_TOTAL (1 << 24) /* p*v*m: (mb, stage) pairs */

static const char *const kind_names[ZEROC_PP_KIND_COUNT] = {
    [ZEROC_PP_GPIPE] = "gpipe",
    [ZEROC_PP_1F1B] = "1f1b",
    [ZEROC_PP_INTERLEAVED] = "interleaved",
};

const char *zeroc__pp_kind_name(zeroc_pp_kind_t kind) {
  if ((unsigned)kind >= ZEROC_PP_KIND_COUNT) return "unknown";
  return kind_names[kind];
}

zeroc_result_t zeroc__pp_kind_parse(const char *name, zeroc_pp_kind_t *kind) {
  if (!name || !kind)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_kind_parse: NULL %s",
                      !name ? "name" : "kind");
  for (int k = 0; k < ZEROC_PP_KIND_COUNT; k++) {
    if (strcmp(name, kind_names[k]) == 0) {
      *kind = (zeroc_pp_kind_t)k;
      return ZEROC_OK;
    }
  }
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "pipeline schedule '%s' is unknown; accepted: 1f1b, interleaved, gpipe", name);
}

/* The size limits every schedule obeys, generated or hand-made. */
static zeroc_result_t validate_sizes(const char *name, int p, int m, int v) {
  if (p < 1 || p > PP_MAX_P)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s schedule: pipeline size p=%d; accepted: 1..%d",
                      name, p, PP_MAX_P);
  if (m < 1 || m > PP_MAX_M)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s schedule: microbatches m=%d; accepted: 1..%d",
                      name, m, PP_MAX_M);
  if (v < 1 || v > PP_MAX_V)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s schedule: chunks per rank v=%d; accepted: 1..%d",
                      name, v, PP_MAX_V);
  if ((int64_t)p * v * m > PP_MAX_TOTAL)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s schedule: p*v*m = %d*%d*%d exceeds the limit of %d (microbatch, stage) "
                      "pairs",
                      name, p, v, m, PP_MAX_TOTAL);
  return ZEROC_OK;
}

zeroc_result_t zeroc__pp_validate(zeroc_pp_kind_t kind, int p, int m, int v) {
  if ((unsigned)kind >= ZEROC_PP_KIND_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pipeline schedule kind %d is unknown; accepted: ZEROC_PP_GPIPE, "
                      "ZEROC_PP_1F1B, ZEROC_PP_INTERLEAVED",
                      (int)kind);
  const char *name = kind_names[kind];
  ZEROC_CHECK(validate_sizes(name, p, m, v));
  if (kind != ZEROC_PP_INTERLEAVED && v != 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s schedule: chunks per rank v=%d; it takes v=1 only (use the "
                      "interleaved schedule for v > 1)",
                      name, v);
  if (kind == ZEROC_PP_INTERLEAVED && m % p != 0) {
    int lo = m / p * p;
    if (lo == 0)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "interleaved schedule: microbatches m=%d is not a multiple of the "
                        "pipeline size p=%d; accepted: m = k*p (e.g. %d)",
                        m, p, p);
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "interleaved schedule: microbatches m=%d is not a multiple of the pipeline "
                      "size p=%d; accepted: m = k*p (e.g. %d or %d)",
                      m, p, lo, lo + p);
  }
  return ZEROC_OK;
}

int zeroc__pp_warmup(zeroc_pp_kind_t kind, int p, int m, int v, int r) {
  int w;
  switch (kind) {
  case ZEROC_PP_1F1B:
    w = p - r - 1;
    return w < m ? w : m;
  case ZEROC_PP_INTERLEAVED:
    /* Rank r must run far enough ahead that, when it starts the steady phase,
     * the gradient its first backward needs (mb 0 of its last chunk) is on the
     * way: (v-1)*p forwards reach its last chunk, 2(p-r-1) more cover the round
     * trip to the last rank and back. */
    w = (p - r - 1) * 2 + (v - 1) * p;
    return w < m * v ? w : m * v;
  default:
    return m * v;
  }
}

/* ---- generation ------------------------------------------------------------------ */

/* The k-th forward (or backward) of a rank in the interleaved order: microbatches
 * go in groups of p through chunk 0, then the same group through chunk 1, ...;
 * backwards walk the chunks from the last. */
static void interleaved_slot(int p, int v, int k, int backward, int *mb, int *chunk) {
  int group = k / (p * v), in = k % (p * v);
  int c = in / p;
  *chunk = backward ? v - 1 - c : c;
  *mb = group * p + in % p;
}

static zeroc_pp_action_t compute_action(int op, int mb, int chunk) {
  zeroc_pp_action_t a = {
      .op = (uint8_t)op, .flags = 0, .mb = mb, .chunk = chunk, .peer = -1, .peer_chunk = -1};
  return a;
}

/* Generation-only mark on a compute action: the last of its round (see below). */
#define ROUND_END 0x80u

/*
 * Rank r's compute actions in order, 2*m*v of them, into `out`, each round's
 * last one marked ROUND_END. A round is what runs between two post-together
 * groups: one compute for gpipe and 1f1b (Megatron's non-interleaved
 * placement), and for interleaved one forward in warm-up, one forward+backward
 * pair in the steady phase, one backward in cool-down (Megatron's interleaved
 * placement). The group after a round sends what the round produced and
 * receives what the next round consumes. The pairing matters for interleaved:
 * rank 0's chunk-0 forwards receive nothing, so with one compute per round its
 * grad send to rank p-1 would go out alone while rank p-1 is itself sending,
 * and rendezvous sends then deadlock (p=2, v=2 already does).
 */
static void compute_order(zeroc_pp_kind_t kind, int p, int m, int v, int r,
                          zeroc_pp_action_t *out) {
  int total = m * v, w = zeroc__pp_warmup(kind, p, m, v, r), n = 0;
  int pairs = kind == ZEROC_PP_INTERLEAVED;
  if (kind == ZEROC_PP_GPIPE) {
    /* The last microbatch's activations are the freshest on the last stage, so
     * the backward sweep starts there (and needs no wait on it). */
    for (int j = 0; j < m; j++) out[n++] = compute_action(ZEROC_PP_FORWARD, j, 0);
    for (int j = m - 1; j >= 0; j--) out[n++] = compute_action(ZEROC_PP_BACKWARD, j, 0);
    for (int i = 0; i < n; i++) out[i].flags = ROUND_END;
    return;
  }
  int mb, c;
  /* 1f1b is the interleaved order with v = 1 and its own warm-up count */
  for (int k = 0; k < w; k++) {
    interleaved_slot(p, v, k, 0, &mb, &c);
    out[n] = compute_action(ZEROC_PP_FORWARD, mb, c);
    out[n++].flags = ROUND_END;
  }
  for (int k = 0; k < total - w; k++) {
    interleaved_slot(p, v, w + k, 0, &mb, &c);
    out[n] = compute_action(ZEROC_PP_FORWARD, mb, c);
    out[n++].flags = pairs ? 0 : ROUND_END;
    interleaved_slot(p, v, k, 1, &mb, &c);
    out[n] = compute_action(ZEROC_PP_BACKWARD, mb, c);
    out[n++].flags = ROUND_END;
  }
  for (int k = total - w; k < total; k++) {
    interleaved_slot(p, v, k, 1, &mb, &c);
    out[n] = compute_action(ZEROC_PP_BACKWARD, mb, c);
    out[n++].flags = ROUND_END;
  }
}

/* The comm action that brings compute `a`'s input to rank r (recv = 1), or
 * takes its output away (recv = 0). Returns 0 when there is none: first or last
 * stage, or p = 1 (chunk handoffs stay on the rank). */
static int comm_for(int p, int v, int r, const zeroc_pp_action_t *a, int recv,
                    zeroc_pp_action_t *out) {
  if (p == 1) return 0;
  int S = p * v, st = a->chunk * p + r;
  int fwd = a->op == ZEROC_PP_FORWARD;
  /* forward: input from st-1, output to st+1; backward: the reverse */
  int other = (fwd == recv) ? st - 1 : st + 1;
  if (other < 0 || other >= S) return 0;
  int op = fwd ? (recv ? ZEROC_PP_RECV_ACT : ZEROC_PP_SEND_ACT)
               : (recv ? ZEROC_PP_RECV_GRAD : ZEROC_PP_SEND_GRAD);
  *out = (zeroc_pp_action_t){.op = (uint8_t)op,
                             .flags = 0,
                             .mb = a->mb,
                             .chunk = a->chunk,
                             .peer = other % p,
                             .peer_chunk = other / p};
  return 1;
}

zeroc_result_t zeroc__pp_schedule_create(zeroc_pp_kind_t kind, int p, int m, int v,
                                         zeroc_pp_schedule_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_pp_schedule_t *s = NULL;
  zeroc_pp_action_t *order = NULL;
  if (!out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_schedule_create: NULL out");
  *out = NULL;
  ZEROC_TRY(zeroc__pp_validate(kind, p, m, v));
  size_t ncomp = (size_t)2 * m * v;
  /* each compute brings at most one receive and one send */
  size_t cap = (size_t)p * ncomp * 3;
  s = calloc(1, sizeof *s);
  order = malloc(ncomp * sizeof *order);
  if (s) {
    s->offset = malloc(((size_t)p + 1) * sizeof *s->offset);
    s->actions = malloc(cap * sizeof *s->actions);
  }
  if (!s || !order || !s->offset || !s->actions) {
    res =
        ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc__pp_schedule_create(%s, p=%d, m=%d, v=%d): %zu actions",
                   zeroc__pp_kind_name(kind), p, m, v, cap);
    goto fail;
  }
  s->kind = kind;
  s->p = p;
  s->m = m;
  s->v = v;
  size_t n = 0;
  for (int r = 0; r < p; r++) {
    s->offset[r] = n;
    compute_order(kind, p, m, v, r, order);
    zeroc_pp_action_t c;
    size_t round0 = 0, g0 = n; /* first compute of the current round, first action of a group */
    /* the inputs of round 0 come before it, as one group */
    for (size_t k = 0; k < ncomp; k++) {
      if (comm_for(p, v, r, &order[k], 1, &c)) s->actions[n++] = c;
      if (order[k].flags & ROUND_END) break;
    }
    for (size_t g = g0; g + 1 < n; g++) s->actions[g].flags |= ZEROC_PP_WITH_NEXT;
    for (size_t i = 0; i < ncomp; i++) {
      int ends = (order[i].flags & ROUND_END) != 0;
      order[i].flags = 0;
      s->actions[n++] = order[i];
      if (!ends) continue;
      /* one post-together group: the round's results out, the next round's inputs in */
      g0 = n;
      for (size_t k = round0; k <= i; k++)
        if (comm_for(p, v, r, &order[k], 0, &c)) s->actions[n++] = c;
      for (size_t k = i + 1; k < ncomp; k++) {
        if (comm_for(p, v, r, &order[k], 1, &c)) s->actions[n++] = c;
        if (order[k].flags & ROUND_END) break;
      }
      for (size_t g = g0; g + 1 < n; g++) s->actions[g].flags |= ZEROC_PP_WITH_NEXT;
      round0 = i + 1;
    }
  }
  s->offset[p] = n;
  free(order);
  *out = s;
  return ZEROC_OK;
fail:
  free(order);
  zeroc__pp_schedule_destroy(s);
  return res;
}

void zeroc__pp_schedule_destroy(zeroc_pp_schedule_t *s) {
  if (!s) return;
  free(s->offset);
  free(s->actions);
  free(s);
}

/* ---- checking -------------------------------------------------------------------- */

static const char *const op_names[ZEROC_PP_OP_COUNT] = {
    "FORWARD", "BACKWARD", "RECV_ACT", "SEND_ACT", "RECV_GRAD", "SEND_GRAD",
};

void zeroc__pp_index_free(zeroc_pp_index_t *ix) {
  if (!ix) return;
  free(ix->fpos);
  free(ix->bpos);
  for (int k = 0; k < 4; k++) free(ix->comm[k]);
  free(ix->match);
  free(ix->rank);
  memset(ix, 0, sizeof *ix);
}

/* Names action i (rank r, local index li) for messages. */
#define ACT_FMT     "rank %d action #%zu (%s mb %d chunk %d)"
#define ACT_ARGS(a) r, li, op_names[(a)->op], (a)->mb, (a)->chunk

/* Pass 1, one action (#i, of rank r): its range and flags, and its slot in the tables. */
static zeroc_result_t index_action(const zeroc_pp_schedule_t *s, zeroc_pp_index_t *ix, int r,
                                   size_t i) {
  const int p = s->p, m = s->m, v = s->v, S = ix->S;
  const zeroc_pp_action_t *a = &s->actions[i];
  size_t li = i - s->offset[r];
  ix->rank[i] = r;
  ix->match[i] = -1;
  if (a->op >= ZEROC_PP_OP_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: rank %d action #%zu has op %d; accepted: 0..%d", r, li,
                      a->op, ZEROC_PP_OP_COUNT - 1);
  if (a->mb < 0 || a->mb >= m || a->chunk < 0 || a->chunk >= v)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " is out of range; accepted: mb 0..%d, "
                      "chunk 0..%d",
                      ACT_ARGS(a), m - 1, v - 1);
  if (a->flags & ~ZEROC_PP_WITH_NEXT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " has flags 0x%x; accepted: "
                      "ZEROC_PP_WITH_NEXT (0x1)",
                      ACT_ARGS(a), a->flags);
  if ((a->flags & ZEROC_PP_WITH_NEXT) && (!zeroc__pp_is_comm(a->op) || i + 1 >= s->offset[r + 1] ||
                                          !zeroc__pp_is_comm(s->actions[i + 1].op)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " is marked WITH_NEXT; only a comm action "
                      "followed by another comm action of the same rank may be",
                      ACT_ARGS(a));
  int st = a->chunk * p + r;
  size_t key = (size_t)a->mb * S + st;
  if (a->op == ZEROC_PP_FORWARD || a->op == ZEROC_PP_BACKWARD) {
    int64_t *slot = a->op == ZEROC_PP_FORWARD ? &ix->fpos[key] : &ix->bpos[key];
    if (*slot >= 0)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "pp schedule check: " ACT_FMT " appears twice (first at #%zu)", ACT_ARGS(a),
                        (size_t)*slot - s->offset[r]);
    *slot = (int64_t)i;
    return ZEROC_OK;
  }
  /* comm: which boundary, and who must be on the other side */
  int to_prev = a->op == ZEROC_PP_RECV_ACT || a->op == ZEROC_PP_SEND_GRAD;
  int other = to_prev ? st - 1 : st + 1;
  if (p == 1 || other < 0 || other >= S)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " is at stage %d of %d and has no %s stage "
                      "on another rank to talk to",
                      ACT_ARGS(a), st, S, to_prev ? "previous" : "next");
  if (a->peer != other % p || a->peer_chunk != other / p)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " names peer rank %d chunk %d; stage %d "
                      "is rank %d chunk %d",
                      ACT_ARGS(a), a->peer, a->peer_chunk, other, other % p, other / p);
  int b = to_prev ? st - 1 : st;
  int64_t *slot = &ix->comm[a->op - ZEROC_PP_RECV_ACT][(size_t)a->mb * (S - 1) + b];
  if (*slot >= 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "pp schedule check: " ACT_FMT " appears twice (first at #%zu)", ACT_ARGS(a),
                      (size_t)*slot - s->offset[r]);
  *slot = (int64_t)i;
  return ZEROC_OK;
}

/* Pass 2, one micro-batch: completeness, and the order inside each rank. */
static zeroc_result_t index_check_mb(const zeroc_pp_schedule_t *s, zeroc_pp_index_t *ix, int mb) {
  const int p = s->p, S = ix->S;
  for (int st = 0; st < S; st++) {
    size_t key = (size_t)mb * S + st;
    if (ix->fpos[key] < 0 || ix->bpos[key] < 0)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "pp schedule check: the %s of mb %d at stage %d (rank %d chunk %d) is "
                        "missing",
                        ix->fpos[key] < 0 ? "FORWARD" : "BACKWARD", mb, st, st % p, st / p);
    if (ix->bpos[key] < ix->fpos[key])
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "pp schedule check: rank %d runs BACKWARD of mb %d chunk %d (#%zu) "
                        "before its FORWARD (#%zu)",
                        st % p, mb, st / p, (size_t)ix->bpos[key] - s->offset[st % p],
                        (size_t)ix->fpos[key] - s->offset[st % p]);
  }
  /* p = 1: chunk handoffs stay on the rank, FORWARD/BACKWARD order alone carries them */
  for (int b = 0; p > 1 && b + 1 < S; b++) {
    size_t key = (size_t)mb * (S - 1) + b;
    /* lo is stage b (rank b%p), hi is stage b+1 */
    size_t flo = (size_t)mb * S + b, fhi = flo + 1;
    const struct {
      int op;
      int64_t compute; /* the compute it must precede (recv) or follow (send) */
    } need[4] = {
        {ZEROC_PP_RECV_ACT, ix->fpos[fhi]},
        {ZEROC_PP_SEND_ACT, ix->fpos[flo]},
        {ZEROC_PP_RECV_GRAD, ix->bpos[flo]},
        {ZEROC_PP_SEND_GRAD, ix->bpos[fhi]},
    };
    for (int k = 0; k < 4; k++) {
      int64_t at = ix->comm[k][key];
      if (at < 0)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "pp schedule check: the %s of mb %d across stages %d|%d is missing "
                          "(rank %d)",
                          op_names[need[k].op], mb, b, b + 1, ix->rank[need[k].compute]);
      int recv = !zeroc__pp_is_send(need[k].op);
      if (recv ? at > need[k].compute : at < need[k].compute) {
        int r = ix->rank[at];
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "pp schedule check: rank %d posts %s of mb %d (#%zu) %s the compute "
                          "it %s (#%zu)",
                          r, op_names[need[k].op], mb, (size_t)at - s->offset[r],
                          recv ? "after" : "before", recv ? "feeds" : "carries the result of",
                          (size_t)need[k].compute - s->offset[r]);
      }
    }
    /* RECV_ACT pairs with SEND_ACT, RECV_GRAD with SEND_GRAD */
    ix->match[ix->comm[0][key]] = ix->comm[1][key];
    ix->match[ix->comm[1][key]] = ix->comm[0][key];
    ix->match[ix->comm[2][key]] = ix->comm[3][key];
    ix->match[ix->comm[3][key]] = ix->comm[2][key];
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__pp_index_build(const zeroc_pp_schedule_t *s, zeroc_pp_index_t *ix) {
  zeroc_result_t res = ZEROC_OK;
  if (!ix) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_index_build: NULL index");
  memset(ix, 0, sizeof *ix);
  if (!s || !s->offset || !s->actions)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pp schedule check: NULL schedule or action table");
  ZEROC_CHECK(validate_sizes(zeroc__pp_kind_name(s->kind), s->p, s->m, s->v));
  const int p = s->p, m = s->m, v = s->v, S = p * v;
  const size_t nms = (size_t)m * S, nb = (size_t)m * (S - 1);
  if (s->offset[0] != 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "pp schedule check: offset[0] = %zu; must be 0",
                      s->offset[0]);
  for (int r = 0; r < p; r++)
    if (s->offset[r + 1] < s->offset[r])
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "pp schedule check: offset[%d] = %zu < offset[%d] = %zu; offsets must "
                        "not decrease",
                        r + 1, s->offset[r + 1], r, s->offset[r]);
  const size_t n = s->offset[p];
  ix->S = S;
  ix->n = n;
  ix->fpos = malloc(nms * sizeof(int64_t));
  ix->bpos = malloc(nms * sizeof(int64_t));
  for (int k = 0; k < 4; k++) ix->comm[k] = malloc((nb ? nb : 1) * sizeof(int64_t));
  ix->match = malloc((n ? n : 1) * sizeof(int64_t));
  ix->rank = malloc((n ? n : 1) * sizeof(int));
  if (!ix->fpos || !ix->bpos || !ix->comm[0] || !ix->comm[1] || !ix->comm[2] || !ix->comm[3] ||
      !ix->match || !ix->rank) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "pp schedule check: index of %zu actions, %zu stage pairs", n,
                     nms);
    goto fail;
  }
  for (size_t i = 0; i < nms; i++) ix->fpos[i] = ix->bpos[i] = -1;
  for (int k = 0; k < 4; k++)
    for (size_t i = 0; i < nb; i++) ix->comm[k][i] = -1;

  /* Pass 1: ranges, flags, and one slot per action in the tables. */
  for (int r = 0; r < p && res == ZEROC_OK; r++)
    for (size_t i = s->offset[r]; i < s->offset[r + 1] && res == ZEROC_OK; i++)
      res = index_action(s, ix, r, i);
  /* Pass 2: completeness, and the order inside each rank. */
  for (int mb = 0; mb < m && res == ZEROC_OK; mb++) res = index_check_mb(s, ix, mb);
  if (res == ZEROC_OK) return ZEROC_OK;
fail:
  zeroc__pp_index_free(ix);
  return res;
}

zeroc_result_t zeroc__pp_schedule_check(const zeroc_pp_schedule_t *s) {
  zeroc_pp_index_t ix;
  zeroc_result_t res = zeroc__pp_index_build(s, &ix);
  zeroc__pp_index_free(&ix);
  return res;
}

int64_t zeroc__pp_action_tag(const zeroc_pp_schedule_t *s, int rank, const zeroc_pp_action_t *a) {
  if (!zeroc__pp_is_comm(a->op)) return -1;
  int S = s->p * s->v, st = a->chunk * s->p + rank;
  int to_prev = a->op == ZEROC_PP_RECV_ACT || a->op == ZEROC_PP_SEND_GRAD;
  int b = to_prev ? st - 1 : st;
  int dir = (a->op == ZEROC_PP_RECV_ACT || a->op == ZEROC_PP_SEND_ACT) ? 0 : 1;
  return ((int64_t)a->mb * (S - 1) + b) * 2 + dir;
}

/* ---- printing -------------------------------------------------------------------- */

int zeroc__pp_action_format(char *buf, size_t n, const zeroc_pp_action_t *a) {
  static const char *const tag[ZEROC_PP_OP_COUNT] = {"F", "B", "Ra", "Sa", "Rg", "Sg"};
  if (a->op >= ZEROC_PP_OP_COUNT) return snprintf(buf, n, "?%d", a->op);
  if (!zeroc__pp_is_comm(a->op)) return snprintf(buf, n, "%s%d.%d", tag[a->op], a->mb, a->chunk);
  return snprintf(buf, n, "%s%d.%d%c%d", tag[a->op], a->mb, a->chunk,
                  zeroc__pp_is_send(a->op) ? '>' : '<', a->peer);
}

zeroc_result_t zeroc__pp_schedule_print(FILE *f, const zeroc_pp_schedule_t *s, unsigned flags) {
  if (!f || !s)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_schedule_print: NULL %s",
                      !f ? "file" : "schedule");
  int show_comm = (flags & ZEROC_PP_PRINT_COMM) != 0;
  for (int r = 0; r < s->p; r++) {
    size_t n;
    const zeroc_pp_action_t *a = zeroc__pp_rank_actions(s, r, &n);
    fprintf(f, "r%d:", r);
    int in_group = 0;
    for (size_t i = 0; i < n; i++) {
      if (!show_comm && zeroc__pp_is_comm(a[i].op)) continue;
      char name[48];
      zeroc__pp_action_format(name, sizeof name, &a[i]);
      /* a group of two or more is bracketed; a lone comm action is not */
      int opens = show_comm && !in_group && (a[i].flags & ZEROC_PP_WITH_NEXT);
      int closes = in_group && !(a[i].flags & ZEROC_PP_WITH_NEXT);
      fprintf(f, " %s%s%s", opens ? "[" : "", name, closes ? "]" : "");
      if (opens) in_group = 1;
      if (closes) in_group = 0;
    }
    fputc('\n', f);
  }
  if (ferror(f))
    return ZEROC_FAIL(ZEROC_ERR_IO, "zeroc__pp_schedule_print: writing the %s schedule failed",
                      zeroc__pp_kind_name(s->kind));
  return ZEROC_OK;
}

zeroc_result_t zeroc__pp_alive_width(const zeroc_pp_schedule_t *s, int r, int *width,
                                     int *contiguous) {
  size_t n;
  const zeroc_pp_action_t *a = zeroc__pp_rank_actions(s, r, &n);
  size_t cells = (size_t)s->m * (size_t)s->v;
  int64_t *start = malloc(sizeof(int64_t) * cells), *end = malloc(sizeof(int64_t) * cells);
  if (!start || !end) {
    free(start);
    free(end);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "slot tables");
  }
  for (size_t i = 0; i < cells; i++) start[i] = end[i] = -1;
  for (size_t i = 0; i < n; i++) {
    size_t k = (size_t)a[i].chunk * s->m + (size_t)a[i].mb;
    if (start[k] < 0) start[k] = (int64_t)i;
    if (a[i].op == ZEROC_PP_BACKWARD) end[k] = (int64_t)i;
  }
  int W = 1, ok = 1;
  for (int c = 0; c < s->v; c++) {
    const int64_t *st = start + (size_t)c * s->m, *en = end + (size_t)c * s->m;
    for (int b = 1; b < s->m; b++) ok &= st[b] > st[b - 1] && en[b] > en[b - 1];
    /* alive at the start of micro-batch b: those started before it and not yet done */
    for (int b = 0; b < s->m; b++) {
      int alive = 0;
      for (int x = 0; x < s->m; x++) alive += st[x] <= st[b] && en[x] >= st[b];
      if (alive > W) W = alive;
    }
  }
  free(start);
  free(end);
  *width = ok ? W : s->m;
  *contiguous = ok;
  return ZEROC_OK;
}
