/*
 * kernels/cpu/vocab.c - the vocabulary-parallel embedding and cross-entropy:
 * each tensor-parallel rank holds the rows v0 .. v0+Vl-1 of the (padded)
 * vocabulary. The embedding writes only the rows of tokens in its range (the
 * partial sums are all-reduced by tp/); the cross-entropy works on this
 * rank's columns of the logits through three per-row statistics (max, target
 * logit, sum of exp) that tp/ all-reduces between the passes, so the (N,Vp)
 * logits are never gathered.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN  32768 /* elements below which threading costs more than it saves */
#define CH_BLOCK 16    /* channels per backward work item: one 64-byte line of dwte */

// inp (B,T) ids, wte (Vl,C) = rows v0.. of the vocabulary, wpe (>=T,C) or NULL
// -> out (B,T,C) = [v0 <= id < v0+Vl] wte[id - v0] + wpe[t]
ZEROC_CPU_HOT void zeroc__cpu_vocab_embed_forward(float *out, const int32_t *inp, const float *wte,
                                                  const float *wpe, int B, int T, int C, int v0,
                                                  int Vl) {
  const size_t BT = (size_t)B * T;
#pragma omp parallel for if (BT * (size_t)C > PAR_MIN) schedule(static)
  for (size_t bt = 0; bt < BT; bt++) {
    const int32_t id = inp[bt] - v0;
    const float *te = id >= 0 && id < Vl ? wte + (size_t)id * C : NULL;
    const float *pe = wpe ? wpe + (bt % (size_t)T) * C : NULL;
    float *o = out + bt * C;
    /* the same float operation as the unsplit embedding, so a token's row is
     * bit-identical whichever rank holds it */
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = (te ? te[c] : 0.0f) + (pe ? pe[c] : 0.0f);
  }
}

// dout (B,T,C) -> dwte (Vl,C) += rows of tokens in [v0, v0+Vl); dwpe (T,C) += sum over b
// (when not NULL). Deterministic: each work item owns a block of channels and
// walks the tokens in (b,t) order, as the unsplit encoder backward does.
ZEROC_CPU_HOT void zeroc__cpu_vocab_embed_backward(float *dwte, float *dwpe, const float *dout,
                                                   const int32_t *inp, int B, int T, int C, int v0,
                                                   int Vl) {
  const size_t BT = (size_t)B * T;
  const int nblocks = (C + CH_BLOCK - 1) / CH_BLOCK;
#pragma omp parallel for if (BT * (size_t)C > PAR_MIN) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    const int c0 = blk * CH_BLOCK;
    const int c1 = c0 + CH_BLOCK < C ? c0 + CH_BLOCK : C;
    for (size_t bt = 0; bt < BT; bt++) {
      const int32_t id = inp[bt] - v0;
      if (id < 0 || id >= Vl) continue;
      const float *d = dout + bt * C;
      float *te = dwte + (size_t)id * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) te[c] += d[c];
    }
    if (!dwpe) continue;
    for (int t = 0; t < T; t++) {
      float *pe = dwpe + (size_t)t * C;
      for (int b = 0; b < B; b++) {
        const float *d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
        for (int c = c0; c < c1; c++) pe[c] += d[c];
      }
    }
  }
}

/* Columns of this slice that are real vocabulary entries (global index < V). */
static int real_cols(int Vl, int v0, int V) {
  int r = V - v0;
  return r < 0 ? 0 : (r > Vl ? Vl : r);
}

// logits (N,Vl) -> mx (N) = max over the real columns of this slice (-inf when it has
// none), xt (N) = the target's logit when the target is in this slice, else 0
ZEROC_CPU_HOT void zeroc__cpu_vocab_ce_local(float *mx, float *xt, const float *logits,
                                             const int32_t *targets, int N, int Vl, int v0, int V) {
  const int R = real_cols(Vl, v0, V);
#pragma omp parallel for if ((long)N * Vl > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = logits + (size_t)n * Vl;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int i = 0; i < R; i++) m = x[i] > m ? x[i] : m;
    mx[n] = m;
    const int32_t tg = targets[n] - v0;
    xt[n] = targets[n] >= 0 && targets[n] < V && tg >= 0 && tg < R ? x[tg] : 0.0f;
  }
}

// logits (N,Vl), mx (N) the global row max -> se (N) = sum of exp(x - mx) over this
// slice's real columns
ZEROC_CPU_HOT void zeroc__cpu_vocab_ce_sumexp(float *se, const float *logits, const float *mx,
                                              int N, int Vl, int v0, int V) {
  const int R = real_cols(Vl, v0, V);
#pragma omp parallel for if ((long)N * Vl > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = logits + (size_t)n * Vl;
    /* summed as the unsplit kernel sums its row (x is not written: keep 0) */
    se[n] = (float)row_sumexp((float *)x, R, mx[n], 0);
  }
}

// losses (N) = mx + log(se) - xt (target < 0: 0, no gradient; target >= V: NaN);
// when dloss != 0: logits <- dloss * (exp(x - mx) / se - onehot(target)), padding 0
ZEROC_CPU_HOT void zeroc__cpu_vocab_ce_finish(float *losses, float *logits, const int32_t *targets,
                                              const float *mx, const float *se, const float *xt,
                                              int N, int Vl, int v0, int V, float dloss) {
  const int R = real_cols(Vl, v0, V), grad = dloss != 0.0f;
#pragma omp parallel for if ((long)N * Vl > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    float *x = logits + (size_t)n * Vl;
    const int32_t tg = targets[n];
    if (tg < 0) {
      losses[n] = 0;
      if (grad) memset(x, 0, sizeof(float) * (size_t)Vl);
      continue;
    }
    if (tg >= V) { /* as the unsplit kernel: NaN makes the step's norm check refuse it */
      losses[n] = NAN;
      if (grad)
        for (int i = 0; i < Vl; i++) x[i] = i < R ? NAN : 0.0f;
      continue;
    }
    losses[n] = (float)((double)mx[n] + log((double)se[n]) - (double)xt[n]);
    if (!grad) continue;
    const float sc = (float)(dloss / (double)se[n]), m = mx[n];
#pragma omp simd
    for (int i = 0; i < R; i++) x[i] = zeroc__expf_nonpos(x[i] - m) * sc;
    for (int i = R; i < Vl; i++) x[i] = 0;
    if (tg >= v0 && tg - v0 < R) x[tg - v0] -= dloss;
  }
}
