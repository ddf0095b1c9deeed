/*
 * kernels/cpu/softmax_row.h - the row passes of a softmax shared by the
 * cross-entropy kernels (crossentropy.c, vocab.c). Always inlined: a static
 * function called from a ZEROC_CPU_HOT kernel is not cloned with it, and would
 * run at the baseline vector width.
 */
#ifndef ZEROC_KERNELS_CPU_SOFTMAX_ROW_H
#define ZEROC_KERNELS_CPU_SOFTMAX_ROW_H

#include "kernels/cpu/vmath.h"

#define SUM_BLOCK  64 /* exps summed in float lanes, then added into the double sum */
#define ROW_INLINE static inline __attribute__((always_inline))

// x (V) -> max over x, NaN elements skipped as the sequential max did
ROW_INLINE float row_max(const float *x, int V) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int i = 1; i < V; i++) m = x[i] > m ? x[i] : m;
  return m;
}

// x (V), m -> sum of exp(x - m); x <- exp(x - m) when keep. Each term is in
// (0, 1], so a block's float sum is off by a few 1e-7 relative at most; the
// blocks add in double, so long rows (V 50257) stay as exact as a double sum of
// every term, without widening each exp to double inside the vector loop
// (which costs more than the exp).
ROW_INLINE double row_sumexp(float *x, int V, float m, int keep) {
  double sum = 0;
  for (int i0 = 0; i0 < V; i0 += SUM_BLOCK) {
    const int i1 = i0 + SUM_BLOCK < V ? i0 + SUM_BLOCK : V;
    float fs = 0;
    if (keep) {
#pragma omp simd reduction(+ : fs)
      for (int i = i0; i < i1; i++) {
        const float e = zeroc__expf_nonpos(x[i] - m);
        x[i] = e;
        fs += e;
      }
    } else {
#pragma omp simd reduction(+ : fs)
      for (int i = i0; i < i1; i++) fs += zeroc__expf_nonpos(x[i] - m);
    }
    sum += fs;
  }
  return sum;
}

#endif
