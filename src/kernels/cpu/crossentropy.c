/*
 * kernels/cpu/crossentropy.c - the classifier's softmax, cross-entropy loss
 * and its gradient fused over each row of logits, in place, so the (N,Vp)
 * probabilities never need a buffer of their own.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN 32768 /* elements below which threading costs more than it saves */

/* Three vectorised passes over a row of V (the row, 16 KiB at V 4096, stays in
 * L1/L2 between them): max; exp(x - max) kept in place and summed; scaling by
 * dloss / sum. A one-pass online max would cost a second exp per element to
 * rescale. The order of the sum is fixed by V alone, never by the thread count.
 * The helpers are always inlined: a static function called from a
 * ZEROC_CPU_HOT kernel is not cloned, and would run at the baseline width. */

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
        const float e = zeroc__expf(x[i] - m);
        x[i] = e;
        fs += e;
      }
    } else {
#pragma omp simd reduction(+ : fs)
      for (int i = i0; i < i1; i++) fs += zeroc__expf(x[i] - m);
    }
    sum += fs;
  }
  return sum;
}

// logits (N,Vp) (columns V..Vp-1 padding), targets (N) -> losses (N);
// when dloss != 0: logits <- dloss * (softmax - onehot(target)), padding <- 0
ZEROC_CPU_HOT void zeroc__cpu_crossentropy_forward_backward(float *losses, float *logits,
                                                            const int32_t *targets, int N, int V,
                                                            int Vp, float dloss) {
  const int grad = dloss != 0.0f;
#pragma omp parallel for if ((long)N * Vp > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    float *x = logits + (size_t)n * Vp;
    const int32_t tg = targets[n];
    if (tg < 0) { /* masked position: no loss, no gradient */
      losses[n] = 0;
      if (grad) memset(x, 0, sizeof(float) * (size_t)Vp);
      continue;
    }
    if (tg >= V) {
      /* Cannot be reported from here: a NaN loss and gradient make the step's
       * non-finite check refuse the update instead of training on a wrong row. */
      losses[n] = NAN;
      if (grad)
        for (int i = 0; i < Vp; i++) x[i] = i < V ? NAN : 0.0f;
      continue;
    }
    /* subtracting the row max keeps every exp in (0, 1]: no overflow */
    const float m = row_max(x, V);
    const float xt = x[tg];
    const double sum = row_sumexp(x, V, m, grad); /* exp(x - m) kept for the gradient */
    losses[n] = (float)((double)m + log(sum) - (double)xt);
    if (grad) {
      const float sc = (float)(dloss / sum);
#pragma omp simd
      for (int i = 0; i < V; i++) x[i] *= sc;
      x[tg] -= dloss;
      for (int i = V; i < Vp; i++) x[i] = 0;
    }
  }
}
