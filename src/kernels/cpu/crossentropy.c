/*
 * kernels/cpu/crossentropy.c - the classifier's softmax, cross-entropy loss
 * and its gradient fused over each row of logits, in place, so the (N,Vp)
 * probabilities never need a buffer of their own.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN 32768 /* elements below which threading costs more than it saves */

/* Three vectorised passes over a row of V (the row, 16 KiB at V 4096, stays in
 * L1/L2 between them): max; exp(x - max) kept in place and summed; scaling by
 * dloss / sum. A one-pass online max would cost a second exp per element to
 * rescale. The order of the sum is fixed by V alone, never by the thread count.
 */

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
