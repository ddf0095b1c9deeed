/*
 * kernels/cpu/dropout.c - inverted dropout on an (N,C) tensor of token rows,
 * each element kept or dropped by kernels/dropout.h's hash of its global
 * coordinates. The same call is the forward (on the activation) and the
 * backward (on its gradient): both multiply by mask / (1 - p).
 */
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

// in (N,C) -> out (N,C) = in * keep / (1 - p); out may alias in
ZEROC_CPU_HOT void zeroc__cpu_dropout(float *out, const float *in, const zeroc_dropout_t *d, int N,
                                      int C) {
  const uint32_t thr = zeroc_i_dropout_threshold(d->p);
  const float sc = zeroc_i_dropout_scale(d->p);
#pragma omp parallel for if ((long)N * C > 65536) schedule(static)
  for (int r = 0; r < N; r++) {
    const uint64_t rk = zeroc_i_dropout_row_key(d->key, zeroc_i_dropout_row_rc(d, r));
    const float *x = in + (size_t)r * C;
    float *y = out + (size_t)r * C;
#pragma omp simd
    for (int c = 0; c < C; c++)
      y[c] = zeroc_i_dropout_bits(rk, (uint32_t)c) >= thr ? x[c] * sc : 0.0f;
  }
}
