/*
 * kernels/cpu/attention_block.c - one (query block, key block) pair of causal
 * attention with separate q and k/v addresses, the log-sum-exp merge of partial
 * outputs, and the pair's backward: the pieces of attention split over the
 * sequence (cp/ring.c). The arithmetic per row is attention.c's (online softmax
 * forward; probabilities recomputed from q, k and the final lse backward), so a
 * diagonal block alone equals the full kernel on that block's rows.
 *
 * Work is split over (b, h) as in attention.c: one thread owns every row of a
 * head of a sequence, so dk and dv need no atomics and sum in a fixed order.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"

#define PAR_MIN 32768 /* multiply-adds below which threading costs more than it saves */

static inline float dot(const float *a, const float *b, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// q, k, v (blk strides) -> pout (B,Tq,NH*HS), plse (B,NH,Tq), both contiguous
void zeroc__cpu_attention_block_forward(float *pout, float *plse, const float *q, const float *k,
                                        const float *v, const zeroc_attn_block_t *blk,
                                        const zeroc_dropout_t *drop) {
  const int HS = blk->HS, NH = blk->NH, Tq = blk->Tq, Tk = blk->Tk;
  const size_t C = (size_t)NH * HS;
  const int dr = drop && drop->p > 0;
  const uint32_t thr = dr ? zeroc__dropout_threshold(drop->p) : 0;
  const float dsc = dr ? zeroc__dropout_scale(drop->p) : 1.0f;
  const float scale = 1.0f / sqrtf((float)HS);
  const long BH = (long)blk->B * NH;
#pragma omp parallel for if (BH * Tq * Tk * HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const long b = bh / NH, h = bh % NH;
    const float *qb = q + b * blk->q_b + h * HS;
    const float *kb = k + b * blk->kv_b + h * HS, *vb = v + b * blk->kv_b + h * HS;
    for (int i = 0; i < Tq; i++) {
      const float *qi = qb + i * blk->q_t;
      float *restrict o = pout + ((size_t)b * Tq + i) * C + (size_t)h * HS;
      for (int d = 0; d < HS; d++) o[d] = 0;
      float m = -INFINITY, l = 0;
      const uint64_t rk =
          dr ? zeroc__dropout_row_key(drop->key, zeroc__dropout_row_att(drop, b, h, blk->q_pos + i))
             : 0;
      const int jend = blk->causal ? i + 1 : Tk;
      for (int j = 0; j < jend; j++) {
        const float *kj = kb + j * blk->kv_t, *restrict vj = vb + j * blk->kv_t;
        const float s = dot(qi, kj, HS) * scale;
        if (s > m) {
          const float a = expf(m - s);
          l *= a;
#pragma omp simd
          for (int d = 0; d < HS; d++) o[d] *= a;
          m = s;
        }
        float p = expf(s - m);
        l += p;
        if (dr) p = zeroc__dropout_bits(rk, (uint32_t)(blk->k_pos + j)) >= thr ? p * dsc : 0.0f;
#pragma omp simd
        for (int d = 0; d < HS; d++) o[d] += p * vj[d];
      }
      const float il = 1.0f / l;
#pragma omp simd
      for (int d = 0; d < HS; d++) o[d] *= il;
      plse[bh * Tq + i] = m + logf(l);
    }
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
  const int HS = blk->HS, NH = blk->NH, Tq = blk->Tq, Tk = blk->Tk;
  const int dr = drop && drop->p > 0;
  const uint32_t thr = dr ? zeroc__dropout_threshold(drop->p) : 0;
  const float dsc = dr ? zeroc__dropout_scale(drop->p) : 1.0f;
  const float scale = 1.0f / sqrtf((float)HS);
  const long BH = (long)blk->B * NH;
#pragma omp parallel for if (BH * Tq * Tk * HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const long b = bh / NH, h = bh % NH;
    const size_t qo = b * blk->q_b + h * HS, ko = b * blk->kv_b + h * HS;
    const size_t oo = b * blk->o_b + h * HS;
    for (int i = 0; i < Tq; i++) {
      const float *qi = q + qo + i * blk->q_t, *dy = dout + oo + i * blk->o_t;
      float *restrict dqi = dq + qo + i * blk->q_t;
      /* as attention.c: ds_j = p_j (dp_j - D), D = dy . out_i over the whole row */
      const float D = dot(dy, out + oo + i * blk->o_t, HS);
      const float L = lse[b * blk->l_b + h * blk->l_h + i];
      const uint64_t rk =
          dr ? zeroc__dropout_row_key(drop->key, zeroc__dropout_row_att(drop, b, h, blk->q_pos + i))
             : 0;
      const int jend = blk->causal ? i + 1 : Tk;
      for (int j = 0; j < jend; j++) {
        const float *kj = k + ko + j * blk->kv_t, *vj = v + ko + j * blk->kv_t;
        float *restrict dkj = dk + ko + j * blk->kv_t, *restrict dvj = dv + ko + j * blk->kv_t;
        const float p = expf(dot(qi, kj, HS) * scale - L);
        float dp = dot(dy, vj, HS), pv = p;
        if (dr) {
          const float m = zeroc__dropout_bits(rk, (uint32_t)(blk->k_pos + j)) >= thr ? dsc : 0.0f;
          dp *= m;
          pv *= m;
        }
        const float ds = p * (dp - D) * scale;
#pragma omp simd
        for (int d = 0; d < HS; d++) {
          dvj[d] += pv * dy[d];
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
        }
      }
    }
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
