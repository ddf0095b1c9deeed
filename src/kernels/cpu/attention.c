/*
 * kernels/cpu/attention.c - causal multi-head self-attention over whole
 * sequences, q k v interleaved in qkv: each (b, h) is one head for
 * attn_tile.c, which does the tiled flash-style arithmetic (online softmax
 * forward saving only the log-sum-exp, probabilities recomputed backward).
 *
 * Work is split over (b, h): one thread owns every dq, dk, dv row of a head of
 * a sequence, so the backward needs no atomics and sums in a fixed order, and
 * the results do not depend on the thread count.
 */
#include <stddef.h>

#include "kernels/cpu/attn_tile.h"
#include "kernels/cpu/cpu_kernels.h"

#define PAR_MIN 32768 /* multiply-adds below which threading costs more than it saves */

/* head h of sequence b: q at column h*HS of row (b, t) of qkv (3C wide), k C and v 2C
 * columns further */
static zeroc__attn_head_t head(const float *qkv, long bh, int T, int C, int NH,
                               const zeroc_dropout_t *drop) {
  const int HS = C / NH;
  const long b = bh / NH, h = bh % NH;
  const size_t C3 = 3 * (size_t)C;
  const float *q = qkv + (size_t)b * T * C3 + (size_t)h * HS;
  return (zeroc__attn_head_t){.q = q,
                              .k = q + C,
                              .v = q + 2 * (size_t)C,
                              .q_t = C3,
                              .kv_t = C3,
                              .o_t = (size_t)C,
                              .Tq = T,
                              .Tk = T,
                              .HS = HS,
                              .causal = 1,
                              .drop = drop,
                              .b = b,
                              .h = h,
                              .q_pos = 0,
                              .k_pos = 0};
}

// qkv (B,T,3C) = [q | k | v], head h at columns h*HS.. of each -> out (B,T,C), lse (B,NH,T)
void zeroc__cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                  int NH, const zeroc_dropout_t *drop) {
  const long BH = (long)B * NH;
#pragma omp parallel for if (BH * T * T * (C / NH) > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const zeroc__attn_head_t a = head(qkv, bh, T, C, NH, drop);
    const long b = bh / NH, h = bh % NH;
    zeroc__attn_head_forward(&a, out + (size_t)b * T * C + (size_t)h * a.HS, lse + bh * T);
  }
}

// dout (B,T,C), qkv (B,T,3C), out (B,T,C), lse (B,NH,T) -> dqkv (B,T,3C) += (= with set:
// each head's first product into a row stores instead of adding, so nothing clears it)
void zeroc__cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH,
                                   const zeroc_dropout_t *drop, int set) {
  const long BH = (long)B * NH;
#pragma omp parallel for if (BH * T * T * (C / NH) > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const zeroc__attn_head_t a = head(qkv, bh, T, C, NH, drop);
    const long b = bh / NH, h = bh % NH;
    const size_t row = (size_t)b * T * C + (size_t)h * a.HS; /* (b, t=0, h) of out, dout */
    float *dq = dqkv + (a.q - qkv);
    zeroc__attn_head_backward(&a, dq, dq + C, dq + 2 * (size_t)C, dout + row, out + row,
                              lse + bh * T, set);
  }
}
