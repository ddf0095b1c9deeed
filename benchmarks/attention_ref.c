/*
 * benchmarks/attention_ref.c - the cpu attention kernels as they were before
 * the tiled ones (kernels/cpu/attn_tile.c): one dot product per (query, key)
 * pair, libm expf per score. Kept here only so bench_kernels_cpu --attention
 * can time old and new side by side in one run (interleaved) on a busy machine.
 */
#include <math.h>
#include <stddef.h>

#include "attention_ref.h"

#define PAR_MIN 32768 /* multiply-adds below which threading costs more than it saves */

/* `omp simd` here and below lets the compiler vectorise loops of unknown length
 * (HS) at -O2; the rows they touch never overlap. */
static inline float dot(const float *a, const float *b, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// qkv (B,T,3C) = [q | k | v], head h at columns h*HS.. of each -> out (B,T,C), lse (B,NH,T)
void bench_ref_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH, const zeroc_dropout_t *drop) {
  const int HS = C / NH;
  const int dr = drop && drop->p > 0;
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(drop->p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(drop->p) : 1.0f;
  const float scale = 1.0f / sqrtf((float)HS);
  const size_t C3 = 3 * (size_t)C;
  const long BH = (long)B * NH;
#pragma omp parallel for if (BH * T * T * HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const long b = bh / NH, h = bh % NH;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS; /* q of (b, t=0, h) */
    for (int t = 0; t < T; t++) {
      const float *q = base + t * C3;
      float *restrict o = out + ((size_t)b * T + t) * C + (size_t)h * HS;
      for (int d = 0; d < HS; d++) o[d] = 0;
      /* o holds sum_j exp(s_j - m) v_j for the running max m; l the matching sum */
      float m = -INFINITY, l = 0;
      const uint64_t rk =
          dr ? zeroc_i_dropout_row_key(drop->key, zeroc_i_dropout_row_att(drop, b, h, t)) : 0;
      for (int j = 0; j <= t; j++) {
        const float *kj = base + j * C3 + C, *restrict vj = base + j * C3 + 2 * (size_t)C;
        const float s = dot(q, kj, HS) * scale;
        if (s > m) { /* rescale what was summed against the old max */
          const float a = expf(m - s);
          l *= a;
#pragma omp simd
          for (int d = 0; d < HS; d++) o[d] *= a;
          m = s;
        }
        float p = expf(s - m);
        l += p;
        if (dr) p = zeroc_i_dropout_bits(rk, (uint32_t)j) >= thr ? p * dsc : 0.0f;
#pragma omp simd
        for (int d = 0; d < HS; d++) o[d] += p * vj[d];
      }
      const float il = 1.0f / l;
#pragma omp simd
      for (int d = 0; d < HS; d++) o[d] *= il;
      lse[bh * T + t] = m + logf(l);
    }
  }
}

// dout (B,T,C), qkv (B,T,3C), out (B,T,C), lse (B,NH,T) -> dqkv (B,T,3C) +=
void bench_ref_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  const zeroc_dropout_t *drop) {
  const int HS = C / NH;
  const int dr = drop && drop->p > 0;
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(drop->p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(drop->p) : 1.0f;
  const float scale = 1.0f / sqrtf((float)HS);
  const size_t C3 = 3 * (size_t)C;
  const long BH = (long)B * NH;
#pragma omp parallel for if (BH * T * T * HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const long b = bh / NH, h = bh % NH;
    const size_t off = (size_t)b * T * C3 + (size_t)h * HS;
    const float *base = qkv + off;
    float *dbase = dqkv + off;
    for (int t = 0; t < T; t++) {
      const size_t row = ((size_t)b * T + t) * C + (size_t)h * HS;
      const float *q = base + t * C3, *dy = dout + row;
      float *restrict dq = dbase + t * C3;
      /* With p_j = softmax row t and dp_j = dy . v_j, the softmax backward is
       * ds_j = p_j (dp_j - sum_i p_i dp_i), and sum_i p_i dp_i = dy . out_t. With
       * dropout's mask m_j (kept: 1/(1-p), else 0) v meets m_j p_j and dp_j is
       * m_j dy . v_j; dy . out_t is still the sum. */
      const float D = dot(dy, out + row, HS), L = lse[bh * T + t];
      const uint64_t rk =
          dr ? zeroc_i_dropout_row_key(drop->key, zeroc_i_dropout_row_att(drop, b, h, t)) : 0;
      for (int j = 0; j <= t; j++) {
        const float *kj = base + j * C3 + C, *vj = base + j * C3 + 2 * (size_t)C;
        float *restrict dkj = dbase + j * C3 + C, *restrict dvj = dbase + j * C3 + 2 * (size_t)C;
        const float p = expf(dot(q, kj, HS) * scale - L);
        float dp = dot(dy, vj, HS), pv = p;
        if (dr) {
          const float m = zeroc_i_dropout_bits(rk, (uint32_t)j) >= thr ? dsc : 0.0f;
          dp *= m;
          pv *= m;
        }
        const float ds = p * (dp - D) * scale;
#pragma omp simd
        for (int d = 0; d < HS; d++) {
          dvj[d] += pv * dy[d];
          dq[d] += ds * kj[d];
          dkj[d] += ds * q[d];
        }
      }
    }
  }
}
