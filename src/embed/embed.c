/*
 * embed/embed.c - creating and destroying the tables, their initial values,
 * and whole-table access (get/set) for tests, checkpoints and small tables.
 * The exchange and the update are in forward.c and backward.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "embed/embed.h"
#include "runtime/runtime.h"

float zeroc__embed_init_value(uint64_t seed, int t, int64_t rows, int64_t row, int col) {
  uint64_t h = zeroc__hash2(zeroc__hash2(seed, (uint64_t)t), (uint64_t)row);
  h = zeroc__hash2(h, (uint64_t)col);
  double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
  return (float)((2.0 * u - 1.0) / sqrt((double)rows));
}

/* ---- allocation ---------------------------------------------------------------- */

static zeroc_result_t dalloc(zeroc_embed_t *e, zeroc_memkind_t kind, zeroc_memtag_t tag,
                             uint64_t bytes, void *out) {
  void **p = (void **)out;
  *p = NULL;
  if (!bytes) return ZEROC_OK;
  return zeroc_i_device_alloc(e->dm, kind, tag, (size_t)bytes, p);
}

static void dfree(zeroc_embed_t *e, void *p) {
  if (p) zeroc_i_device_free(e->dm, p);
}

/* Weights and state of table t: pinned (pool) for host tables, else device. */
static zeroc_result_t alloc_table(zeroc_embed_t *e, zeroc__etab_t *x) {
  uint64_t rows = (uint64_t)(x->r1 - x->r0), cols = (uint64_t)(x->c1 - x->c0);
  uint64_t w = rows * cols * 4, st = cols ? rows * 4 : 0;
  if (!x->host) {
    ZEROC_CHECK(dalloc(e, ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS, w, &x->w));
    return dalloc(e, ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER, st, &x->state);
  }
  if (!e->pool) ZEROC_CHECK(zeroc__pinned_pool_create(zeroc__ctx_pool_env(e->ctx), &e->pool));
  if (w) ZEROC_CHECK(zeroc__pinned_get(e->pool, (size_t)w, ZEROC_TAG_PARAMS, (void **)&x->w));
  if (st)
    ZEROC_CHECK(zeroc__pinned_get(e->pool, (size_t)st, ZEROC_TAG_OPTIMIZER, (void **)&x->state));
  return ZEROC_OK;
}

static zeroc_result_t alloc_buffers(zeroc_embed_t *e) {
  const zeroc__ebufs_t *b = &e->nb;
  zeroc_memkind_t D = ZEROC_MEM_DEVICE, P = ZEROC_MEM_PINNED;
  zeroc_memtag_t BF = ZEROC_TAG_BUFFERS;
  ZEROC_CHECK(dalloc(e, D, BF, b->send_len * 4, &e->d_send_len));
  ZEROC_CHECK(dalloc(e, D, BF, b->recv_len * 4, &e->d_recv_len));
  ZEROC_CHECK(dalloc(e, D, BF, b->offs * 4, &e->d_offs));
  ZEROC_CHECK(dalloc(e, D, BF, b->send_ids * 8, &e->d_send_ids));
  ZEROC_CHECK(dalloc(e, D, BF, b->recv_ids * 8, &e->d_recv_ids));
  ZEROC_CHECK(dalloc(e, D, BF, b->idx * 8, &e->d_idx));
  ZEROC_CHECK(dalloc(e, D, BF, b->out_send * 4, &e->d_out_send));
  ZEROC_CHECK(dalloc(e, D, BF, b->out_recv * 4, &e->d_out_recv));
  ZEROC_CHECK(dalloc(e, D, BF, b->rs_send * 4, &e->d_rs_send));
  ZEROC_CHECK(dalloc(e, D, BF, b->rs_recv * 4, &e->d_rs_recv));
  ZEROC_CHECK(dalloc(e, D, BF, b->grow * 4, &e->d_grow));
  ZEROC_CHECK(dalloc(e, D, BF, b->ss * 4, &e->d_ss));
  ZEROC_CHECK(dalloc(e, D, BF, b->fetch * 4, &e->d_fetch));
  ZEROC_CHECK(dalloc(e, D, ZEROC_TAG_GRADS, b->dense * 4, &e->d_dense));
  ZEROC_CHECK(dalloc(e, P, BF, b->send_len * 4, &e->h_send_len));
  ZEROC_CHECK(dalloc(e, P, BF, b->recv_len * 4, &e->h_recv_len));
  ZEROC_CHECK(dalloc(e, P, BF, b->offs * 4, &e->h_offs));
  ZEROC_CHECK(dalloc(e, P, BF, b->fetch * 4, &e->h_fetch));
  ZEROC_CHECK(dalloc(e, P, BF, b->send_ids * 8, &e->h_send_ids));
  ZEROC_CHECK(dalloc(e, P, BF, b->recv_ids * 8, &e->h_recv_ids));
  ZEROC_CHECK(dalloc(e, P, BF, b->idx * 8, &e->h_idx));
  ZEROC_CHECK(dalloc(e, P, BF, b->pairs * 8, &e->h_pairs));
  return ZEROC_OK;
}

/* Carves the per-held-table index arrays out of d_idx / h_idx and d_offs / h_offs. */
static zeroc_result_t carve_held(zeroc_embed_t *e) {
  e->held = calloc((size_t)(e->nheld ? e->nheld : 1), sizeof(*e->held));
  if (!e->held) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed: %d held tables", e->nheld);
  uint64_t io = 0, oo = 0, L = (uint64_t)e->bag, B = (uint64_t)e->batch;
  for (int t = 0; t < e->T; t++) {
    zeroc__etab_t *x = &e->tab[t];
    if (x->inv < 0) continue;
    zeroc__eheld_t *h = &e->held[x->inv];
    uint64_t bags = x->sharding == ZEROC_EMBED_DATA ? B : (uint64_t)e->N * B, cap = bags * L;
    h->t = t;
    h->h_rows = e->h_idx + io, h->d_rows = e->d_idx + io;
    h->h_remap = e->h_idx + io + cap, h->d_remap = e->d_idx + io + cap;
    h->h_uniq = e->h_idx + io + 2 * cap, h->d_uniq = e->d_idx + io + 2 * cap;
    h->h_offs = e->h_offs + oo, h->d_offs = e->d_offs + oo;
    io += 3 * cap;
    oo += bags + 1;
  }
  return ZEROC_OK;
}

/* Writes the initial weights (and state) of this rank's shard of table t. */
static zeroc_result_t init_table(zeroc_embed_t *e, int t) {
  zeroc__etab_t *x = &e->tab[t];
  int64_t rows = x->r1 - x->r0;
  int cols = x->c1 - x->c0;
  if (!rows || !cols) return ZEROC_OK;
  size_t wb = (size_t)rows * (size_t)cols * 4;
  zeroc__view_t vw, vs;
  memset(&vw, 0, sizeof(vw));
  memset(&vs, 0, sizeof(vs));
  float *w = x->w, *st = x->state;
  if (!x->host) {
    ZEROC_CHECK(zeroc__view_host(e->s, x->w, wb, ZEROC_VIEW_OUT, NULL, &vw));
    zeroc_result_t r =
        zeroc__view_host(e->s, x->state, (size_t)rows * 4, ZEROC_VIEW_OUT, NULL, &vs);
    if (r != ZEROC_OK) {
      zeroc__view_end(&vw);
      return r;
    }
    w = vw.ptr, st = vs.ptr;
  }
  for (int64_t i = 0; i < rows; i++) {
    for (int j = 0; j < cols; j++)
      w[i * cols + j] = zeroc__embed_init_value(e->seed, t, x->rows, x->r0 + i, x->c0 + j);
    st[i] = e->init_accum;
  }
  zeroc_result_t r = zeroc__view_end(&vw);
  zeroc_result_t r2 = zeroc__view_end(&vs);
  return r != ZEROC_OK ? r : r2;
}

static zeroc_result_t create(zeroc_ctx_t *ctx, const zeroc_embed_config_t *cfg, zeroc_embed_t *e) {
  e->ctx = ctx;
  e->g = zeroc__ctx_group(ctx, cfg->group == -1 ? ZEROC_GROUP_DP : (zeroc_group_kind_t)cfg->group);
  e->s = zeroc_ctx_compute_stream(ctx);
  e->dm = zeroc__ctx_devmem(ctx);
  e->N = e->g->size;
  e->rank = e->g->rank;
  e->T = cfg->ntables;
  e->batch = cfg->batch;
  e->bag = cfg->bag;
  e->lr = cfg->lr > 0 ? cfg->lr : 0.01f;
  e->eps = cfg->eps > 0 ? cfg->eps : 1e-8f;
  e->init_accum = cfg->init_accum >= 0 ? cfg->init_accum : 0.0f;
  e->seed = cfg->seed;
  e->tab = calloc((size_t)e->T, sizeof(*e->tab));
  size_t n = (size_t)e->N;
  e->lsc = calloc(8 * n, sizeof(size_t));
  e->tstart = calloc((size_t)e->T + 1, sizeof(int64_t));
  if (!e->tab || !e->lsc || !e->tstart)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed: %d tables", e->T);
  e->lrc = e->lsc + n, e->isc = e->lsc + 2 * n, e->irc = e->lsc + 3 * n;
  e->osc = e->lsc + 4 * n, e->orc = e->lsc + 5 * n, e->sd = e->lsc + 6 * n, e->rd = e->lsc + 7 * n;
  ZEROC_CHECK(zeroc__embed_layout(cfg, e->N, e->rank, e->tab, &e->nb, &e->cost));
  ZEROC_CHECK(zeroc_kernels_create(e->dm, e->s, ZEROC_FP32, &e->k));
  for (int t = 0; t < e->T; t++) {
    e->sumD += e->tab[t].dim;
    if (e->tab[t].inv >= 0) e->nheld++;
    if (e->tab[t].inv >= 0 && e->tab[t].sharding != ZEROC_EMBED_DATA) e->nx++;
    if (e->tab[t].rowi >= 0) e->nrow++;
    ZEROC_CHECK(alloc_table(e, &e->tab[t]));
  }
  ZEROC_CHECK(alloc_buffers(e));
  ZEROC_CHECK(carve_held(e));
  for (int t = 0; t < e->T; t++) ZEROC_CHECK(init_table(e, t));
  return zeroc_stream_sync(e->s);
}

zeroc_result_t zeroc_embed_create(zeroc_ctx_t *ctx, const zeroc_embed_config_t *cfg,
                                  zeroc_embed_t **out) {
  if (!out || !ctx)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_create: NULL %s", out ? "ctx" : "out");
  *out = NULL;
  zeroc_embed_t *e = calloc(1, sizeof(*e));
  if (!e) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed: handle"));
  zeroc_result_t r = create(ctx, cfg, e);
  if (r != ZEROC_OK) {
    zeroc_embed_destroy(e);
    return zeroc__ctx_ret(ctx, r);
  }
  *out = e;
  return ZEROC_OK;
}

void zeroc_embed_destroy(zeroc_embed_t *e) {
  if (!e) return;
  if (e->s) zeroc_stream_sync(e->s);
  for (int t = 0; e->tab && t < e->T; t++) {
    zeroc__etab_t *x = &e->tab[t];
    if (x->host) {
      zeroc__pinned_put(e->pool, x->w);
      zeroc__pinned_put(e->pool, x->state);
    } else {
      dfree(e, x->w);
      dfree(e, x->state);
    }
  }
  void *bufs[] = {e->d_send_len, e->d_recv_len, e->d_offs,     e->d_send_ids, e->d_recv_ids,
                  e->d_idx,      e->d_out_send, e->d_out_recv, e->d_rs_send,  e->d_rs_recv,
                  e->d_grow,     e->d_ss,       e->d_fetch,    e->d_dense,    e->h_send_len,
                  e->h_recv_len, e->h_offs,     e->h_fetch,    e->h_send_ids, e->h_recv_ids,
                  e->h_idx,      e->h_pairs};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) dfree(e, bufs[i]);
  zeroc__pinned_pool_destroy(e->pool);
  zeroc_kernels_destroy(e->k);
  free(e->held);
  free(e->tab);
  free(e->lsc);
  free(e->tstart);
  free(e);
}

/* ---- queries ------------------------------------------------------------------- */

void zeroc_embed_set_lr(zeroc_embed_t *e, float lr) {
  if (e) e->lr = lr;
}

int zeroc_embed_num_tables(const zeroc_embed_t *e) { return e ? e->T : 0; }

zeroc_embed_sharding_t zeroc_embed_table_sharding(const zeroc_embed_t *e, int t) {
  if (!e || t < 0 || t >= e->T) return (zeroc_embed_sharding_t)-1;
  return (zeroc_embed_sharding_t)e->tab[t].sharding;
}

void zeroc_embed_cost(const zeroc_embed_t *e, zeroc_embed_cost_t *out) {
  if (!out) return;
  if (e)
    *out = e->cost;
  else
    memset(out, 0, sizeof(*out));
}
