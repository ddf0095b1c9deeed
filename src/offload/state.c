/*
 * offload/state.c - each unit's fp32 master and Adam m, v, kept in pinned
 * memory or on the swapper with a few staging sets, so the engine can read
 * unit i+1 and write back unit i-1 while it updates unit i.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "offload/offload.h"

enum { U_DISK = 0, U_LOADING, U_RESIDENT, U_WRITING };
#define NBUF 3 /* master, m, v */

static const char *const buf_name[NBUF] = {"master", "m", "v"};
/* The accountant's tags: the master counts as parameters, the moments as
 * optimizer state (zeroc/mem.h). */
static const zeroc_memtag_t buf_tag[NBUF] = {ZEROC_TAG_PARAMS, ZEROC_TAG_OPTIMIZER,
                                             ZEROC_TAG_OPTIMIZER};

typedef struct unit {
  size_t numel;
  int state;
  int stage;   /* staging set holding it (swapper), -1 */
  int written; /* its slots hold data */
  int slot[NBUF];
  zeroc__ticket_t tk[NBUF];
  int ntk;
  uint64_t wb_seq;  /* order of write-backs: the oldest frees its set first */
  float *own[NBUF]; /* pinned mode: its buffers */
} unit_t;

typedef struct stage {
  float *buf[NBUF];
  int unit; /* -1: free */
} stage_t;

struct zeroc__offload {
  zeroc__pinned_pool_t *pool;
  zeroc__swap_t *swap;
  int nunits, nstage;
  unit_t *u;
  stage_t *st;
  uint64_t seq;
};

static zeroc_result_t check_unit(const zeroc__offload_t *o, int i, const char *what) {
  if (!o) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: state is NULL", what);
  if (i < 0 || i >= o->nunits)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: unit %d; accepted: 0..%d", what, i,
                      o->nunits - 1);
  return ZEROC_OK;
}

/* Waits for all of a unit's tickets (every one, so no buffer stays in use) and
 * returns the first failure, with its message. */
static zeroc_result_t wait_tickets(zeroc__offload_t *o, unit_t *u) {
  zeroc_result_t first = ZEROC_OK;
  char msg[ZEROC_ERRMSG_MAX];
  for (int k = 0; k < u->ntk; k++) {
    zeroc_result_t r = zeroc__swap_wait(o->swap, u->tk[k]);
    if (r != ZEROC_OK && first == ZEROC_OK) {
      first = r;
      snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    }
  }
  u->ntk = 0;
  if (first != ZEROC_OK) zeroc__tls_error_set(msg);
  return first;
}

/* Finishes unit u's write-back: its set is free again. A failed write keeps
 * the unit resident, so the only good copy stays in memory. */
static zeroc_result_t finish_writeback(zeroc__offload_t *o, unit_t *u) {
  zeroc_result_t r = wait_tickets(o, u);
  if (r != ZEROC_OK) {
    u->state = U_RESIDENT;
    return r;
  }
  u->written = 1;
  u->state = U_DISK;
  o->st[u->stage].unit = -1;
  u->stage = -1;
  return ZEROC_OK;
}

zeroc_result_t zeroc__offload_create(zeroc__pinned_pool_t *pool, zeroc__swap_t *swap, int nunits,
                                     const size_t *numel, int nstage, zeroc__offload_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__offload_t *o = NULL;
  if (!pool || !numel || !out || nunits < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__offload_create(pool %p, numel %p, nunits %d, "
                      "out %p): pool, numel and out are required, nunits >= 1",
                      (void *)pool, (const void *)numel, nunits, (void *)out);
  *out = NULL;
  if (nstage == 0) nstage = 3;
  if (swap && nstage < 2)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__offload_create: nstage %d; accepted: 2 or "
                      "more (3 overlaps read, update and write-back), 0 for 3",
                      nstage);
  size_t max_numel = 0;
  for (int i = 0; i < nunits; i++) {
    if (numel[i] == 0 || numel[i] > ((size_t)1 << 44))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc__offload_create: unit %d has %zu elements; "
                        "accepted: 1 .. 2^44",
                        i, numel[i]);
    if (numel[i] > max_numel) max_numel = numel[i];
  }
  o = calloc(1, sizeof *o);
  if (!o) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "offload state struct");
  o->pool = pool;
  o->swap = swap;
  o->nunits = nunits;
  o->nstage = swap ? nstage : 0;
  o->u = calloc((size_t)nunits, sizeof *o->u);
  o->st = calloc((size_t)(o->nstage ? o->nstage : 1), sizeof *o->st);
  if (!o->u || !o->st) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "offload state tables for %d units", nunits);
    goto fail;
  }
  for (int i = 0; i < nunits; i++) {
    unit_t *u = &o->u[i];
    u->numel = numel[i];
    u->stage = -1;
    for (int b = 0; b < NBUF; b++) u->slot[b] = -1;
  }
  for (int s = 0; s < o->nstage; s++) o->st[s].unit = -1;
  for (int i = 0; i < nunits; i++) {
    unit_t *u = &o->u[i];
    for (int b = 0; b < NBUF; b++) {
      if (swap) {
        char name[64];
        snprintf(name, sizeof name, "u%d.%s", i, buf_name[b]);
        ZEROC_TRY(zeroc__swap_slot_create(swap, name, u->numel * sizeof(float), &u->slot[b]));
      } else {
        ZEROC_TRY(
            zeroc__pinned_get(pool, u->numel * sizeof(float), buf_tag[b], (void **)&u->own[b]));
        memset(u->own[b], 0, u->numel * sizeof(float));
      }
    }
    u->state = swap ? U_DISK : U_RESIDENT;
  }
  for (int s = 0; s < o->nstage; s++)
    for (int b = 0; b < NBUF; b++)
      ZEROC_TRY(zeroc__pinned_get(pool, max_numel * sizeof(float), buf_tag[b],
                                  (void **)&o->st[s].buf[b]));
  ZINFO(OFFLOAD, "offload state: %d units (largest %zu elements) %s", nunits, max_numel,
        swap ? "on the swapper" : "in pinned memory");
  *out = o;
  return ZEROC_OK;
fail:
  zeroc__offload_destroy(o);
  return res;
}

void zeroc__offload_destroy(zeroc__offload_t *o) {
  if (!o) return;
  for (int i = 0; o->u && i < o->nunits; i++) {
    unit_t *u = &o->u[i];
    if (u->ntk) wait_tickets(o, u); /* the buffers must be free before they go back */
    for (int b = 0; b < NBUF; b++) {
      if (u->slot[b] >= 0) zeroc__swap_slot_destroy(o->swap, u->slot[b]);
      zeroc__pinned_put(o->pool, u->own[b]);
    }
  }
  for (int s = 0; o->st && s < o->nstage; s++)
    for (int b = 0; b < NBUF; b++) zeroc__pinned_put(o->pool, o->st[s].buf[b]);
  free(o->u);
  free(o->st);
  free(o);
}

zeroc_result_t zeroc__offload_prefetch(zeroc__offload_t *o, int i) {
  ZEROC_CHECK(check_unit(o, i, "zeroc__offload_prefetch"));
  unit_t *u = &o->u[i];
  if (!o->swap || u->state == U_LOADING || u->state == U_RESIDENT) return ZEROC_OK;
  if (u->state == U_WRITING) {
    /* Its set still holds the data: once the write is done it is resident
     * again without a read (it must not change while the write reads it). */
    ZEROC_CHECK(wait_tickets(o, u));
    u->written = 1;
    u->state = U_RESIDENT;
    return ZEROC_OK;
  }
  int s = -1;
  for (int k = 0; k < o->nstage && s < 0; k++)
    if (o->st[k].unit < 0) s = k;
  if (s < 0) {
    unit_t *oldest = NULL;
    for (int k = 0; k < o->nstage; k++) {
      unit_t *w = &o->u[o->st[k].unit];
      if (w->state == U_WRITING && (!oldest || w->wb_seq < oldest->wb_seq)) oldest = w;
    }
    if (!oldest)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc__offload_prefetch(%d): all %d staging sets "
                        "hold units that are loading or resident (e.g. unit %d); write one back "
                        "first, or create the state with more sets",
                        i, o->nstage, o->st[0].unit);
    s = oldest->stage;
    ZEROC_CHECK(finish_writeback(o, oldest));
  }
  o->st[s].unit = i;
  u->stage = s;
  if (!u->written) {
    /* Never written: Adam's moments start at zero; the engine fills the master. */
    for (int b = 0; b < NBUF; b++) memset(o->st[s].buf[b], 0, u->numel * sizeof(float));
    u->state = U_RESIDENT;
    return ZEROC_OK;
  }
  u->state = U_LOADING;
  for (int b = 0; b < NBUF; b++) {
    zeroc_result_t r = zeroc__swap_read(o->swap, u->slot[b], o->st[s].buf[b],
                                        u->numel * sizeof(float), &u->tk[u->ntk]);
    if (r != ZEROC_OK) {
      char msg[ZEROC_ERRMSG_MAX];
      snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
      wait_tickets(o, u);
      u->state = U_DISK;
      o->st[s].unit = -1;
      u->stage = -1;
      zeroc__tls_error_set(msg);
      return r;
    }
    u->ntk++;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__offload_wait(zeroc__offload_t *o, int i, zeroc__offload_view_t *view) {
  ZEROC_CHECK(check_unit(o, i, "zeroc__offload_wait"));
  if (!view) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__offload_wait(%d): view is NULL", i);
  unit_t *u = &o->u[i];
  if (o->swap) {
    if (u->state == U_DISK || u->state == U_WRITING) ZEROC_CHECK(zeroc__offload_prefetch(o, i));
    if (u->state == U_LOADING) {
      zeroc_result_t r = wait_tickets(o, u);
      if (r != ZEROC_OK) {
        o->st[u->stage].unit = -1;
        u->stage = -1;
        u->state = U_DISK;
        return r;
      }
      u->state = U_RESIDENT;
    }
  }
  float *const *b = o->swap ? o->st[u->stage].buf : u->own;
  view->master = b[0];
  view->m = b[1];
  view->v = b[2];
  view->numel = u->numel;
  return ZEROC_OK;
}

zeroc_result_t zeroc__offload_writeback(zeroc__offload_t *o, int i) {
  ZEROC_CHECK(check_unit(o, i, "zeroc__offload_writeback"));
  unit_t *u = &o->u[i];
  if (!o->swap) return ZEROC_OK;
  if (u->state != U_RESIDENT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__offload_writeback(%d): the unit is %s; "
                      "accepted: a resident unit (after zeroc__offload_wait)",
                      i, u->state == U_WRITING ? "already being written back" : "not resident");
  const stage_t *s = &o->st[u->stage];
  for (int b = 0; b < NBUF; b++) {
    zeroc_result_t r =
        zeroc__swap_write(o->swap, u->slot[b], s->buf[b], u->numel * sizeof(float), &u->tk[u->ntk]);
    if (r != ZEROC_OK) {
      char msg[ZEROC_ERRMSG_MAX];
      snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
      wait_tickets(o, u); /* the unit stays resident: memory has the good copy */
      zeroc__tls_error_set(msg);
      return r;
    }
    u->ntk++;
  }
  u->state = U_WRITING;
  u->wb_seq = ++o->seq;
  return ZEROC_OK;
}

zeroc_result_t zeroc__offload_flush(zeroc__offload_t *o) {
  if (!o) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__offload_flush: state is NULL");
  zeroc_result_t first = ZEROC_OK;
  char msg[ZEROC_ERRMSG_MAX] = "";
  for (int i = 0; i < o->nunits; i++) {
    if (o->u[i].state != U_WRITING) continue;
    zeroc_result_t r = finish_writeback(o, &o->u[i]);
    if (r != ZEROC_OK && first == ZEROC_OK) {
      first = r;
      snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    }
  }
  if (first != ZEROC_OK) zeroc__tls_error_set(msg);
  return first;
}
