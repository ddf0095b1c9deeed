/*
 * kernels/cpu/attention.c - causal multi-head self-attention over whole
 * sequences, q k v interleaved in qkv: each (b, h) is one head for
 * attn_tile.c, which does the tiled flash-style arithmetic (online softmax
 * forward saving only the log-sum-exp, probabilities recomputed backward).
 *
 * Grouped-query attention (NKV kv heads shared by NH / NKV query heads each): q head h
 * reads kv head h % NKV (kernels/llama_kernels.h says why: every tensor-parallel slice of
 * the heads is then itself such a layout). Work is split over (b, h) forward and over (b, kv head)
 * backward: one thread owns every dq, dk, dv row it writes, so the backward needs no
 * atomics and sums in a fixed order, and the results do not depend on the thread count.
 */
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/attn_tile.h"
#include "kernels/cpu/cpu_kernels.h"

#define PAR_MIN 32768 /* multiply-adds below which threading costs more than it saves */

/* head h of sequence b: q at column h*HS of row (b, t) of qkv ((NH + 2 NKV) HS wide), k
 * of kv head h % NKV at column NH*HS + that head's, v NKV*HS further (NKV == NH:
 * q | k | v, each C = NH*HS wide) */
static zeroc__attn_head_t head(const float *qkv, long bh, int T, int NH, int NKV, int HS,
                               const zeroc_dropout_t *drop) {
  const long b = bh / NH, h = bh % NH, kvh = h % NKV;
  const size_t W = (size_t)(NH + 2 * NKV) * HS;
  const float *row = qkv + (size_t)b * T * W;
  const float *k = row + (size_t)NH * HS + (size_t)kvh * HS;
  return (zeroc__attn_head_t){.q = row + (size_t)h * HS,
                              .k = k,
                              .v = k + (size_t)NKV * HS,
                              .q_t = W,
                              .kv_t = W,
                              .o_t = (size_t)NH * HS,
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

// qkv (B,T,(NH+2NKV)HS) -> out (B,T,NH*HS), lse (B,NH,T)
void zeroc__cpu_attention_gqa_forward(float *out, float *lse, const float *qkv, int B, int T,
                                      int NH, int NKV, int HS, const zeroc_dropout_t *drop) {
  const long BH = (long)B * NH;
  const size_t C = (size_t)NH * HS;
#pragma omp parallel for if (BH * T * T * HS > PAR_MIN) schedule(static)
  for (long bh = 0; bh < BH; bh++) {
    const zeroc__attn_head_t a = head(qkv, bh, T, NH, NKV, HS, drop);
    const long b = bh / NH, h = bh % NH;
    zeroc__attn_head_forward(&a, out + (size_t)b * T * C + (size_t)h * HS, lse + bh * T);
  }
}

// dout (B,T,NH*HS), qkv, out, lse -> dqkv (B,T,(NH+2NKV)HS) += (= with set: each head's first
// product into a row stores instead of adding, so nothing clears it)
//
// Work is split over (b, kv head): the G = NH / NKV query heads that share a kv head run
// in order on one thread, which so owns those dk, dv rows (summed over the G heads in head
// order, no atomics) and the G heads' dq rows. With set, heads after the first of a group
// add to the dk, dv their first head stored; their own dq rows are cleared first.
void zeroc__cpu_attention_gqa_backward(float *dqkv, const float *dout, const float *qkv,
                                       const float *out, const float *lse, int B, int T, int NH,
                                       int NKV, int HS, const zeroc_dropout_t *drop, int set) {
  const long BH = (long)B * NH, BKV = (long)B * NKV, G = NH / NKV;
  const size_t C = (size_t)NH * HS;
#pragma omp parallel for if (BH * T * T * HS > PAR_MIN) schedule(static)
  for (long bk = 0; bk < BKV; bk++) {
    for (long g = 0; g < G; g++) {
      const long bh = bk / NKV * NH + g * NKV + bk % NKV; /* (b, h = g NKV + kvh) */
      const zeroc__attn_head_t a = head(qkv, bh, T, NH, NKV, HS, drop);
      const long b = bh / NH, h = bh % NH;
      const size_t row = (size_t)b * T * C + (size_t)h * HS; /* (b, t=0, h) of out, dout */
      float *dq = dqkv + (a.q - qkv), *dk = dqkv + (a.k - qkv), *dv = dqkv + (a.v - qkv);
      if (set && g > 0)
        for (int t = 0; t < T; t++) memset(dq + (size_t)t * a.q_t, 0, (size_t)HS * sizeof *dq);
      zeroc__attn_head_backward(&a, dq, dk, dv, dout + row, out + row, lse + bh * T, set && !g);
    }
  }
}

// qkv (B,T,3C) = [q | k | v], head h at columns h*HS.. of each -> out (B,T,C), lse (B,NH,T)
void zeroc__cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                  int NH, const zeroc_dropout_t *drop) {
  zeroc__cpu_attention_gqa_forward(out, lse, qkv, B, T, NH, NH, C / NH, drop);
}

// dout (B,T,C), qkv (B,T,3C), out (B,T,C), lse (B,NH,T) -> dqkv (B,T,3C) += (= with set)
void zeroc__cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH,
                                   const zeroc_dropout_t *drop, int set) {
  zeroc__cpu_attention_gqa_backward(dqkv, dout, qkv, out, lse, B, T, NH, NH, C / NH, drop, set);
}
