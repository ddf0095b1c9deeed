/*
 * embed/backward.c - the backward of the embedding bags and the sparse
 * row-wise AdaGrad step. The pooled gradient takes the forward's way back
 * (all-to-all for table- and column-wise tables, all-gather over samples for
 * row-wise ones); each rank sums it into a compact gradient of the distinct
 * rows its held tables received (duplicates summed by the bag kernel) and
 * updates only those rows. Data-parallel tables all-reduce a dense gradient.
 *
 * Row-wise AdaGrad (as DLRM/TorchRec use), for a touched row with gradient g
 * (D values, the average over the group's ranks: scale = 1/N):
 *   s += sum_j g_j^2 / D;   w -= lr * g / (sqrt(s) + eps)
 * A row no sample touched has g = 0 and is left exactly as it is, which is why
 * the dense data-parallel update equals the sparse one.
 */
#include <string.h>

#include "core/error.h"
#include "embed/embed.h"
#include "runtime/runtime.h"

/* Host tables: the updated rows and state in d_fetch go back to host memory. */
static zeroc_result_t write_back(zeroc_embed_t *e, const zeroc__eheld_t *h) {
  const zeroc__etab_t *x = &e->tab[h->t];
  int64_t dc = x->c1 - x->c0, U = h->nuniq;
  ZEROC_CHECK(zeroc__embed_h2d(e, e->h_fetch, e->d_fetch, (size_t)(U * dc + U) * 4));
  for (int64_t u = 0; u < U; u++) {
    memcpy(x->w + h->h_uniq[u] * dc, e->h_fetch + u * dc, (size_t)dc * sizeof(float));
    x->state[h->h_uniq[u]] = e->h_fetch[U * dc + u];
  }
  return ZEROC_OK;
}

/* Data-parallel table: dense gradient, all-reduced, AdaGrad on every row. */
static zeroc_result_t update_data(zeroc_embed_t *e, int B, const zeroc__eheld_t *h,
                                  const float *dpooled) {
  const zeroc__etab_t *x = &e->tab[h->t];
  int64_t R = x->rows, D = x->dim;
  float scale = 1.0f / (float)e->N;
  ZEROC_CHECK(zeroc_memset_async(e->s, e->d_dense, 0, (size_t)(R * D) * 4));
  ZEROC_CHECK(zeroc_k_embedbag_backward(e->k, e->s, e->d_dense, D, h->d_rows, h->d_offs, B,
                                        dpooled + x->pcol, B, 0, e->sumD, (int)D));
  if (e->N > 1)
    ZEROC_CHECK(zeroc__allreduce(e->g, e->s, e->d_dense, e->d_dense, (size_t)(R * D), ZEROC_FP32,
                                 ZEROC_SUM));
  ZEROC_CHECK(zeroc_k_rowwise_sumsq(e->k, e->s, e->d_ss, e->d_dense, R, (int)D, scale));
  return zeroc_k_rowwise_adagrad(e->k, e->s, x->w, D, x->state, NULL, e->d_dense, e->d_ss, R,
                                 (int)D, (int)D, scale, e->lr, e->eps);
}

/* A held table's bag gradients (bag b's row at dout + (b/B)*stride + (b%B)*ldo)
 * into the compact row gradient, then the update of its distinct rows. */
static zeroc_result_t update_held(zeroc_embed_t *e, int B, const zeroc__eheld_t *h,
                                  const float *dout, int64_t stride, int64_t ldo) {
  const zeroc__etab_t *x = &e->tab[h->t];
  int dc = x->c1 - x->c0;
  int64_t U = h->nuniq;
  float scale = 1.0f / (float)e->N;
  if (dc) {
    ZEROC_CHECK(zeroc_memset_async(e->s, e->d_grow, 0, (size_t)(U * dc) * 4));
    ZEROC_CHECK(zeroc_k_embedbag_backward(e->k, e->s, e->d_grow, dc, h->d_remap, h->d_offs,
                                          (int64_t)e->N * B, dout, B, stride, ldo, dc));
  }
  ZEROC_CHECK(zeroc_k_rowwise_sumsq(e->k, e->s, e->d_ss, e->d_grow, U, dc, scale));
  /* column-wise: every column rank received the same ids, so the same distinct
   * rows in the same order; summing their partial squares gives the whole row's */
  if (x->sharding == ZEROC_EMBED_COLUMN && e->N > 1 && U)
    ZEROC_CHECK(zeroc__allreduce(e->g, e->s, e->d_ss, e->d_ss, (size_t)U, ZEROC_FP32, ZEROC_SUM));
  if (!dc || !U) return ZEROC_OK;
  if (!x->host)
    return zeroc_k_rowwise_adagrad(e->k, e->s, x->w, dc, x->state, h->d_uniq, e->d_grow, e->d_ss, U,
                                   dc, x->dim, scale, e->lr, e->eps);
  ZEROC_CHECK(zeroc__embed_fetch(e, h, 1));
  ZEROC_CHECK(zeroc_k_rowwise_adagrad(e->k, e->s, e->d_fetch, dc, e->d_fetch + U * dc, NULL,
                                      e->d_grow, e->d_ss, U, dc, x->dim, scale, e->lr, e->eps));
  return write_back(e, h);
}

static zeroc_result_t backward(zeroc_embed_t *e, const float *dpooled) {
  int B = e->last_B;
  if (!B)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_embed_backward: no forward to go back through (one backward per "
                      "successful forward)");
  e->last_B = 0;
  zeroc__watchdog_phase(e->ctx, "embed backward");
  int64_t W = zeroc__embed_a2a_width(e), RW = zeroc__embed_row_width(e);
  int any_a2a = 0;
  for (int t = 0; t < e->T; t++) any_a2a |= zeroc__embed_is_a2a(&e->tab[t]);
  if (any_a2a) {
    /* the unpack only reads pooled in this direction */
    ZEROC_CHECK(zeroc__embed_a2a_unpack(e, B, (float *)(uintptr_t)dpooled, 0));
    ZEROC_CHECK(zeroc__embed_a2av(e, e->d_out_recv, e->orc, e->d_out_send, e->osc, ZEROC_FP32));
  }
  if (RW) {
    ZEROC_CHECK(zeroc__embed_row_unpack(e, B, (float *)(uintptr_t)dpooled, 0));
    ZEROC_CHECK(
        zeroc__allgather(e->g, e->s, e->d_rs_recv, e->d_rs_send, (size_t)(B * RW), ZEROC_FP32));
  }
  int64_t aoff = 0, roff = 0;
  for (int t = 0; t < e->T; t++) {
    const zeroc__etab_t *x = &e->tab[t];
    if (x->inv < 0) continue;
    const zeroc__eheld_t *h = &e->held[x->inv];
    if (x->sharding == ZEROC_EMBED_DATA) {
      ZEROC_CHECK(update_data(e, B, h, dpooled));
    } else if (x->sharding == ZEROC_EMBED_ROW) {
      ZEROC_CHECK(update_held(e, B, h, e->d_rs_send + (int64_t)B * roff, B * RW, x->dim));
      roff += x->dim;
    } else {
      int dc = x->c1 - x->c0;
      ZEROC_CHECK(update_held(e, B, h, e->d_out_send + (int64_t)B * aoff, B * W, dc));
      aoff += dc;
    }
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_embed_backward(zeroc_embed_t *e, const float *dpooled) {
  if (!e || !dpooled)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_backward: NULL %s",
                      e ? "dpooled" : "handle");
  return zeroc__ctx_ret(e->ctx, backward(e, dpooled));
}
