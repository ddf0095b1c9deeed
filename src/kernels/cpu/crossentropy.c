/*
 * kernels/cpu/crossentropy.c - the classifier's softmax, cross-entropy loss
 * and its gradient fused in one pass over each row of logits, in place, so the
 * (N,Vp) probabilities never need a buffer of their own.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"

#define PAR_MIN 32768 /* elements below which threading costs more than it saves */

// logits (N,Vp) (columns V..Vp-1 padding), targets (N) -> losses (N);
// when dloss != 0: logits <- dloss * (softmax - onehot(target)), padding <- 0
void zeroc__cpu_crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                              int N, int V, int Vp, float dloss) {
  const int grad = dloss != 0.0f;
#pragma omp parallel for if ((long)N * Vp > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    float *x = logits + (size_t)n * Vp;
    const int32_t tg = targets[n];
    if (tg < 0) { /* masked position: no loss, no gradient */
      losses[n] = 0;
      if (grad)
        for (int i = 0; i < Vp; i++) x[i] = 0;
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
    float m = x[0];
    for (int i = 1; i < V; i++) m = x[i] > m ? x[i] : m;
    const float xt = x[tg];
    double sum = 0;
    if (grad) {
      for (int i = 0; i < V; i++) { /* keep exp(x - m) in place for the gradient */
        const float e = expf(x[i] - m);
        x[i] = e;
        sum += e;
      }
    } else {
      for (int i = 0; i < V; i++) sum += expf(x[i] - m);
    }
    losses[n] = (float)((double)m + log(sum) - (double)xt);
    if (grad) {
      const float sc = (float)(dloss / sum);
      for (int i = 0; i < V; i++) x[i] *= sc;
      x[tg] -= dloss;
      for (int i = V; i < Vp; i++) x[i] = 0;
    }
  }
}
