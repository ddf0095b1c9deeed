/*
 * kernels/cpu/attention_block.c - one (query block, key block) pair of causal
 * attention with separate q and k/v addresses, the log-sum-exp merge of partial
 * outputs, and the pair's backward: the pieces of attention split over the
 * sequence (cp/ring.c). Each (b, h) of a pair is one head for attn_tile.c, the
 * arithmetic of attention.c too, so a diagonal block alone equals the full
 * kernel on that block's rows.
 *
 * Work is split over (b, h) as in attention.c: one thread owns every row of a
 * head of a sequence, so dk and dv need no atomics and sum in a fixed order.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/attn_tile.h"
#include "kernels/cpu/cpu_kernels.h"

#define PAR_MIN 32768 /* multiply-adds below which threading costs more than it saves */

/* head h of sequence b of the pair (q, k, v in blk's layouts; o_t: out and dout's) */
static zeroc__attn_head_t head(const float *q, const float *k, const float *v,
                               const zeroc_attn_block_t *blk, long bh, size_t o_t,
                               const zeroc_dropout_t *drop) {
  const long b = bh / blk->NH, h = bh % blk->NH;
  const size_t qo = b * blk->q_b + h * blk->HS, ko = b * blk->kv_b + h * blk->HS;
  return (zeroc__attn_head_t){.q = q + qo,
                              .k = k + ko,
                              .v = v + ko,
                              .q_t = blk->q_t,
                              .kv_t = blk->kv_t,
                              .o_t = o_t,
                              .Tq = blk->Tq,
                              .Tk = blk->Tk,
                              .HS = blk->HS,
                              .causal = blk->causal,
                              .drop = drop,
                              .b = b,
                              .h = h,
                              .q_pos = blk->q_pos,
                              .k_pos = blk->k_pos};
}

// q, k, v (blk strides) -> pout (B,Tq,NH*HS), plse (B,NH,Tq), both contiguous
void zeroc__cpu_attention_block_forward(float *pout, float *plse, const float *q, const float *k,
                                        const float *v, const zeroc_attn_block_t *blk,
                                        const zeroc_dropout_t *drop) {
  const size_t C = (size_t)blk->NH * blk->HS;
  const long BH = (long)blk->B * blk->NH;
#pragma omp parallel for if (BH * blk->Tq * blk->Tk * blk->HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const zeroc__attn_head_t a = head(q, k, v, blk, bh, C, drop);
    const long b = bh / blk->NH, h = bh % blk->NH;
    zeroc__attn_head_forward(&a, pout + (size_t)b * blk->Tq * C + (size_t)h * blk->HS,
                             plse + bh * blk->Tq);
  }
}

// (out, lse) in blk's layout <- merged with pout (B,Tq,NH*HS), plse (B,NH,Tq)
void zeroc__cpu_attention_merge(float *out, float *lse, const float *pout, const float *plse,
                                const zeroc_attn_block_t *blk, int first) {
  const int HS = blk->HS, NH = blk->NH, Tq = blk->Tq;
  const size_t C = (size_t)NH * HS;
  for (int b = 0; b < blk->B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < Tq; i++) {
        float *o = out + b * blk->o_b + i * blk->o_t + (size_t)h * HS;
        const float *po = pout + ((size_t)b * Tq + i) * C + (size_t)h * HS;
        float *L = lse + b * blk->l_b + h * blk->l_h + i;
        const float L2 = plse[((size_t)b * NH + h) * Tq + i];
        if (first) {
          for (int d = 0; d < HS; d++) o[d] = po[d];
          *L = L2;
          continue;
        }
        const float L1 = *L, M = L1 > L2 ? L1 : L2;
        const float Ln = M + logf(expf(L1 - M) + expf(L2 - M));
        const float w1 = expf(L1 - Ln), w2 = expf(L2 - Ln);
        for (int d = 0; d < HS; d++) o[d] = o[d] * w1 + po[d] * w2;
        *L = Ln;
      }
}

// dout, out (o layout), lse (l layout), q, k, v -> dq (q layout) +=, dk, dv (kv layout) +=
void zeroc__cpu_attention_block_backward(float *dq, float *dk, float *dv, const float *dout,
                                         const float *q, const float *k, const float *v,
                                         const float *out, const float *lse,
                                         const zeroc_attn_block_t *blk,
                                         const zeroc_dropout_t *drop) {
  const long BH = (long)blk->B * blk->NH;
#pragma omp parallel for if (BH * blk->Tq * blk->Tk * blk->HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const zeroc__attn_head_t a = head(q, k, v, blk, bh, blk->o_t, drop);
    const long b = bh / blk->NH, h = bh % blk->NH;
    const size_t qo = a.q - q, ko = a.k - k, oo = b * blk->o_b + h * blk->HS;
    zeroc__attn_head_backward(&a, dq + qo, dk + ko, dv + ko, dout + oo, out + oo,
                              lse + b * blk->l_b + h * blk->l_h, 0);
  }
}

void zeroc__cpu_copy_rows(float *dst, size_t dst_t, const float *src, size_t src_t, size_t rows,
                          size_t width, int add) {
  for (size_t r = 0; r < rows; r++) {
    float *restrict d = dst + r * dst_t;
    const float *restrict x = src + r * src_t;
    if (add) {
#pragma omp simd
      for (size_t w = 0; w < width; w++) d[w] += x[w];
    } else {
      for (size_t w = 0; w < width; w++) d[w] = x[w];
    }
  }
}
