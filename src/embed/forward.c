/*
 * embed/forward.c - the forward of the embedding bags: check the batch, send
 * every id to the ranks holding its row (lengths, then values, by all-to-all),
 * pool the bags this rank holds rows of, and bring the pooled rows back
 * (all-to-all for table- and column-wise tables, reduce-scatter over samples
 * for row-wise ones). Data-parallel tables pool locally.
 * Layouts: embed/embed.h.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "embed/embed.h"
#include "runtime/runtime.h"

/* ---- small helpers shared with backward.c ---------------------------------------- */

/* Whether rank d receives ids of (holds rows of) the non-data table x. */
static int holds(const zeroc__etab_t *x, int d) {
  if (x->sharding == ZEROC_EMBED_TABLE) return x->owner == d;
  return x->sharding == ZEROC_EMBED_COLUMN || x->sharding == ZEROC_EMBED_ROW;
}

int zeroc__embed_is_a2a(const zeroc__etab_t *x) {
  return x->sharding == ZEROC_EMBED_TABLE || x->sharding == ZEROC_EMBED_COLUMN;
}

int zeroc__embed_dc_of(const zeroc__etab_t *x, int N, int d, int *c0) {
  *c0 = 0;
  if (x->sharding == ZEROC_EMBED_TABLE) return x->owner == d ? x->dim : 0;
  *c0 = zeroc__embed_col(x->dim, N, d);
  return zeroc__embed_col(x->dim, N, d + 1) - *c0;
}

zeroc_result_t zeroc__embed_a2av(zeroc_embed_t *e, const void *send, const size_t *sc, void *recv,
                                 const size_t *rc, zeroc_dtype_t dt) {
  size_t so = 0, ro = 0;
  for (int p = 0; p < e->N; p++) {
    e->sd[p] = so, e->rd[p] = ro;
    so += sc[p], ro += rc[p];
  }
  return zeroc__alltoallv(e->g, e->s, send, sc, e->sd, recv, rc, e->rd, dt);
}

zeroc_result_t zeroc__embed_h2d(zeroc_embed_t *e, void *dev, const void *host, size_t bytes) {
  return bytes ? zeroc__memcpy_sync(e->s, dev, host, bytes) : ZEROC_OK;
}

/* Fetches the distinct rows of held table h (and, with_state, their AdaGrad
 * state after them) from host memory into d_fetch: (U, dc) then (U). */
zeroc_result_t zeroc__embed_fetch(zeroc_embed_t *e, const zeroc__eheld_t *h, int with_state) {
  const zeroc__etab_t *x = &e->tab[h->t];
  int64_t dc = x->c1 - x->c0, U = h->nuniq;
  for (int64_t u = 0; u < U; u++) {
    memcpy(e->h_fetch + u * dc, x->w + h->h_uniq[u] * dc, (size_t)dc * sizeof(float));
    if (with_state) e->h_fetch[U * dc + u] = x->state[h->h_uniq[u]];
  }
  return zeroc__embed_h2d(e, e->d_fetch, e->h_fetch, (size_t)(U * dc + (with_state ? U : 0)) * 4);
}

/* ---- checking the batch ------------------------------------------------------------ */

static zeroc_result_t check_local(zeroc_embed_t *e, int B, const int32_t *len, const int64_t *ids) {
  if (B < 1 || B > e->batch)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed forward: B %d; accepted 1..%d (the config's batch)", B, e->batch);
  if (!len) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed forward: lengths is NULL");
  e->tstart[0] = 0;
  for (int t = 0; t < e->T; t++) {
    int64_t n = 0;
    for (int b = 0; b < B; b++) {
      int32_t L = len[(size_t)t * B + b];
      if (L < 0 || L > e->bag)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "embed forward: table %d, sample %d has %d ids; accepted 0..%d (the "
                          "config's bag)",
                          t, b, L, e->bag);
      n += L;
    }
    e->tstart[t + 1] = e->tstart[t] + n;
  }
  if (e->tstart[e->T] && !ids)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed forward: ids is NULL");
  for (int t = 0; t < e->T; t++) {
    int64_t i = e->tstart[t];
    for (int b = 0; b < B; b++)
      for (int32_t l = 0; l < len[(size_t)t * B + b]; l++, i++)
        if (ids[i] < 0 || ids[i] >= e->tab[t].rows)
          return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                            "embed forward: id %lld of table %d, sample %d out of range; accepted "
                            "0..%lld (the table's rows - 1)",
                            (long long)ids[i], t, b, (long long)e->tab[t].rows - 1);
  }
  return ZEROC_OK;
}

/* Every rank learns whether any rank refused its batch, and that all use the same B. */
static zeroc_result_t check_batch(zeroc_embed_t *e, int B, const int32_t *len, const int64_t *ids) {
  zeroc_result_t mine = check_local(e, B, len, ids);
  int32_t v[3] = {mine != ZEROC_OK ? e->rank + 1 : 0, B, -B};
  ZEROC_CHECK(zeroc__allreduce_host(e->g, v, 3, ZEROC_INT32, ZEROC_MAX));
  if (mine != ZEROC_OK) return mine;
  if (v[0])
    return ZEROC_FAIL(ZEROC_ERR_REMOTE, "embed forward: rank %d of group %s refused its batch",
                      v[0] - 1, e->g->name);
  if (v[1] != -v[2])
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed forward: B differs over the ranks (%d to %d); every rank passes the "
                      "same B",
                      -v[2], v[1]);
  return ZEROC_OK;
}

/* ---- ids out ------------------------------------------------------------------------ */

/* Packs, for every rank d, the lengths and ids of the tables d holds rows of. */
static void pack_ids(zeroc_embed_t *e, int B, const int32_t *len, const int64_t *ids) {
  size_t nl = 0, ni = 0;
  for (int d = 0; d < e->N; d++) {
    size_t l0 = nl, i0 = ni;
    for (int t = 0; t < e->T; t++) {
      const zeroc__etab_t *x = &e->tab[t];
      if (x->sharding == ZEROC_EMBED_DATA || !holds(x, d)) continue;
      const int32_t *lt = len + (size_t)t * B;
      const int64_t *it = ids + e->tstart[t];
      if (x->sharding != ZEROC_EMBED_ROW) {
        memcpy(e->h_send_len + nl, lt, (size_t)B * sizeof(int32_t));
        memcpy(e->h_send_ids + ni, it, (size_t)(e->tstart[t + 1] - e->tstart[t]) * sizeof(int64_t));
        nl += (size_t)B;
        ni += (size_t)(e->tstart[t + 1] - e->tstart[t]);
        continue;
      }
      int64_t lo = zeroc__embed_row(x->rows, e->N, d), hi = zeroc__embed_row(x->rows, e->N, d + 1);
      for (int b = 0; b < B; b++) {
        int32_t c = 0;
        for (int32_t l = 0; l < lt[b]; l++, it++)
          if (*it >= lo && *it < hi) e->h_send_ids[ni + (size_t)c++] = *it;
        e->h_send_len[nl++] = c;
        ni += (size_t)c;
      }
    }
    e->lsc[d] = nl - l0;
    e->isc[d] = ni - i0;
  }
}

/* Sends lengths, then ids; the received ones end up in h_recv_len / h_recv_ids. */
static zeroc_result_t exchange_ids(zeroc_embed_t *e, int B) {
  size_t nl = 0, ni = 0;
  for (int d = 0; d < e->N; d++) nl += e->lsc[d], ni += e->isc[d];
  ZEROC_CHECK(zeroc__embed_h2d(e, e->d_send_len, e->h_send_len, nl * 4));
  for (int s = 0; s < e->N; s++) e->lrc[s] = (size_t)B * (size_t)e->nx;
  ZEROC_CHECK(zeroc__embed_a2av(e, e->d_send_len, e->lsc, e->d_recv_len, e->lrc, ZEROC_INT32));
  size_t rl = (size_t)e->N * (size_t)B * (size_t)e->nx;
  ZEROC_CHECK(zeroc__embed_h2d(e, e->h_recv_len, e->d_recv_len, rl * 4));
  size_t ri = 0;
  for (int s = 0; s < e->N; s++) {
    size_t n = 0;
    for (size_t i = 0; i < e->lrc[s]; i++) n += (size_t)e->h_recv_len[(size_t)s * e->lrc[s] + i];
    e->irc[s] = n;
    ri += n;
  }
  ZEROC_CHECK(zeroc__embed_h2d(e, e->d_send_ids, e->h_send_ids, ni * 8));
  ZEROC_CHECK(zeroc__embed_a2av(e, e->d_send_ids, e->isc, e->d_recv_ids, e->irc, ZEROC_INT64));
  return zeroc__embed_h2d(e, e->h_recv_ids, e->d_recv_ids, ri * 8);
}

/* ---- the bags of one held table ------------------------------------------------------- */

static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The distinct rows of h (ascending) and each id's index among them. */
static void unique_rows(zeroc_embed_t *e, zeroc__eheld_t *h) {
  for (int64_t i = 0; i < h->nids; i++) {
    e->h_pairs[2 * i] = h->h_rows[i];
    e->h_pairs[2 * i + 1] = i;
  }
  qsort(e->h_pairs, (size_t)h->nids, 2 * sizeof(int64_t), cmp_pair);
  int64_t U = 0;
  for (int64_t i = 0; i < h->nids; i++) {
    if (i == 0 || e->h_pairs[2 * i] != e->h_pairs[2 * i - 2]) h->h_uniq[U++] = e->h_pairs[2 * i];
    h->h_remap[e->h_pairs[2 * i + 1]] = U - 1;
  }
  h->nuniq = U;
}

/* Fills the bags of every held table from the received ids (N*B bags, src-major)
 * or, for data-parallel tables, from the local batch (B bags), and copies them
 * to the device. */
static zeroc_result_t build_bags(zeroc_embed_t *e, int B, const int32_t *len, const int64_t *ids) {
  size_t *cur = e->sd; /* per source: next received id */
  size_t o = 0;
  for (int s = 0; s < e->N; s++) cur[s] = o, o += e->irc[s];
  int j = 0; /* index among the tables that receive ids */
  for (int i = 0; i < e->nheld; i++) {
    zeroc__eheld_t *h = &e->held[i];
    const zeroc__etab_t *x = &e->tab[h->t];
    int64_t k = 0, nb;
    h->h_offs[0] = 0;
    if (x->sharding == ZEROC_EMBED_DATA) {
      nb = B;
      for (int b = 0; b < B; b++) h->h_offs[b + 1] = h->h_offs[b] + len[(size_t)h->t * B + b];
      k = e->tstart[h->t + 1] - e->tstart[h->t];
      memcpy(h->h_rows, ids + e->tstart[h->t], (size_t)k * sizeof(int64_t));
    } else {
      nb = (int64_t)e->N * B;
      for (int s = 0; s < e->N; s++)
        for (int b = 0; b < B; b++) {
          int32_t L = e->h_recv_len[(size_t)s * B * e->nx + (size_t)j * B + b];
          for (int32_t l = 0; l < L; l++) h->h_rows[k++] = e->h_recv_ids[cur[s]++] - x->r0;
          h->h_offs[(int64_t)s * B + b + 1] = (int32_t)k;
        }
      j++;
    }
    h->nids = k;
    unique_rows(e, h);
    ZEROC_CHECK(zeroc__embed_h2d(e, h->d_rows, h->h_rows, (size_t)k * 8));
    ZEROC_CHECK(zeroc__embed_h2d(e, h->d_remap, h->h_remap, (size_t)k * 8));
    ZEROC_CHECK(zeroc__embed_h2d(e, h->d_uniq, h->h_uniq, (size_t)h->nuniq * 8));
    ZEROC_CHECK(zeroc__embed_h2d(e, h->d_offs, h->h_offs, (size_t)(nb + 1) * 4));
  }
  return ZEROC_OK;
}

/* ---- pooling --------------------------------------------------------------------------- */

/* Width (floats per sample) of one peer's block of out_send: the a2a tables I hold. */
int64_t zeroc__embed_a2a_width(const zeroc_embed_t *e) {
  int64_t W = 0;
  for (int t = 0; t < e->T; t++)
    if (e->tab[t].inv >= 0 && zeroc__embed_is_a2a(&e->tab[t])) W += e->tab[t].c1 - e->tab[t].c0;
  return W;
}

/* Width of one rank's chunk of the row-wise buffers: the dims of the row tables. */
int64_t zeroc__embed_row_width(const zeroc_embed_t *e) {
  int64_t W = 0;
  for (int t = 0; t < e->T; t++)
    if (e->tab[t].sharding == ZEROC_EMBED_ROW) W += e->tab[t].dim;
  return W;
}

/* Pools every held table's bags into out_send / rs_send / pooled. */
static zeroc_result_t pool_held(zeroc_embed_t *e, int B, float *pooled) {
  int64_t W = zeroc__embed_a2a_width(e), RW = zeroc__embed_row_width(e), aoff = 0, roff = 0;
  for (int t = 0; t < e->T; t++) {
    const zeroc__etab_t *x = &e->tab[t];
    if (x->inv < 0) continue;
    const zeroc__eheld_t *h = &e->held[x->inv];
    int dc = x->c1 - x->c0;
    const float *w = x->w;
    const int64_t *idx = h->d_rows;
    if (x->host) {
      ZEROC_CHECK(zeroc__embed_fetch(e, h, 0));
      w = e->d_fetch, idx = h->d_remap;
    }
    if (x->sharding == ZEROC_EMBED_DATA) {
      ZEROC_CHECK(zeroc_k_embedbag_forward(e->k, e->s, pooled + x->pcol, B, 0, e->sumD, w, dc, idx,
                                           h->d_offs, B, dc));
    } else if (x->sharding == ZEROC_EMBED_ROW) {
      ZEROC_CHECK(zeroc_k_embedbag_forward(e->k, e->s, e->d_rs_send + (int64_t)B * roff, B, B * RW,
                                           x->dim, w, dc, idx, h->d_offs, (int64_t)e->N * B, dc));
      roff += x->dim;
    } else {
      ZEROC_CHECK(zeroc_k_embedbag_forward(e->k, e->s, e->d_out_send + (int64_t)B * aoff, B, B * W,
                                           dc, w, dc, idx, h->d_offs, (int64_t)e->N * B, dc));
      aoff += dc;
    }
  }
  return ZEROC_OK;
}

/* Moves pooled rows between out_recv ([src][a2a tables src holds] (B, dc)) and
 * pooled (B, sumD): to_pooled 1 after the forward exchange, 0 before the
 * backward one (the gradient takes the reverse way). */
zeroc_result_t zeroc__embed_a2a_unpack(zeroc_embed_t *e, int B, float *pooled, int to_pooled) {
  int64_t o = 0;
  for (int d = 0; d < e->N; d++)
    for (int t = 0; t < e->T; t++) {
      const zeroc__etab_t *x = &e->tab[t];
      if (!zeroc__embed_is_a2a(x)) continue;
      int c0, dc = zeroc__embed_dc_of(x, e->N, d, &c0);
      float *p = pooled + x->pcol + c0, *blk = e->d_out_recv + o;
      if (to_pooled)
        ZEROC_CHECK(zeroc_k_copy2d(e->k, e->s, p, e->sumD, blk, dc, B, dc));
      else
        ZEROC_CHECK(zeroc_k_copy2d(e->k, e->s, blk, dc, p, e->sumD, B, dc));
      o += (int64_t)B * dc;
    }
  return ZEROC_OK;
}

/* The same between rs_recv ([row tables] (B, D)) and pooled. */
zeroc_result_t zeroc__embed_row_unpack(zeroc_embed_t *e, int B, float *pooled, int to_pooled) {
  int64_t o = 0;
  for (int t = 0; t < e->T; t++) {
    const zeroc__etab_t *x = &e->tab[t];
    if (x->sharding != ZEROC_EMBED_ROW) continue;
    float *p = pooled + x->pcol, *blk = e->d_rs_recv + o;
    if (to_pooled)
      ZEROC_CHECK(zeroc_k_copy2d(e->k, e->s, p, e->sumD, blk, x->dim, B, x->dim));
    else
      ZEROC_CHECK(zeroc_k_copy2d(e->k, e->s, blk, x->dim, p, e->sumD, B, x->dim));
    o += (int64_t)B * x->dim;
  }
  return ZEROC_OK;
}

static zeroc_result_t forward(zeroc_embed_t *e, int B, const int32_t *len, const int64_t *ids,
                              float *pooled) {
  e->last_B = 0;
  ZEROC_CHECK(check_batch(e, B, len, ids));
  zeroc__watchdog_phase(e->ctx, "embed forward");
  pack_ids(e, B, len, ids);
  ZEROC_CHECK(exchange_ids(e, B));
  ZEROC_CHECK(build_bags(e, B, len, ids));
  ZEROC_CHECK(pool_held(e, B, pooled));
  int64_t W = zeroc__embed_a2a_width(e), RW = zeroc__embed_row_width(e);
  int any_a2a = 0;
  for (int t = 0; t < e->T; t++) any_a2a |= zeroc__embed_is_a2a(&e->tab[t]);
  if (any_a2a) {
    for (int d = 0; d < e->N; d++) {
      int64_t wd = 0;
      for (int t = 0; t < e->T; t++) {
        int c0;
        if (zeroc__embed_is_a2a(&e->tab[t])) wd += zeroc__embed_dc_of(&e->tab[t], e->N, d, &c0);
      }
      e->osc[d] = (size_t)(B * W);
      e->orc[d] = (size_t)(B * wd);
    }
    ZEROC_CHECK(zeroc__embed_a2av(e, e->d_out_send, e->osc, e->d_out_recv, e->orc, ZEROC_FP32));
    ZEROC_CHECK(zeroc__embed_a2a_unpack(e, B, pooled, 1));
  }
  if (RW) {
    ZEROC_CHECK(zeroc__reduce_scatter(e->g, e->s, e->d_rs_send, e->d_rs_recv, (size_t)(B * RW),
                                      ZEROC_FP32, ZEROC_SUM));
    ZEROC_CHECK(zeroc__embed_row_unpack(e, B, pooled, 1));
  }
  e->last_B = B;
  return ZEROC_OK;
}

zeroc_result_t zeroc_embed_forward(zeroc_embed_t *e, int B, const int32_t *lengths,
                                   const int64_t *ids, float *pooled) {
  if (!e || !pooled)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_forward: NULL %s",
                      e ? "pooled" : "handle");
  return zeroc__ctx_ret(e->ctx, forward(e, B, lengths, ids, pooled));
}
