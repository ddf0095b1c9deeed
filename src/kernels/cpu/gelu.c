/*
 * kernels/cpu/gelu.c - elementwise kernels: GPT-2's tanh GELU forward and
 * backward, the residual sum and in-place addition. Each is one vectorised
 * pass (ZEROC_CPU_HOT: 8 floats wide with FMA where the CPU has AVX2).
 */
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN 32768               /* elements below which threading costs more than it saves */
#define GELU_K  0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A  0.044715f
/* `if (parallel : ...)`, not a bare `if`: on a combined `parallel for simd` a bare
 * if applies to the simd part too (OpenMP 5.0), and GCC then left every call below
 * PAR_MIN scalar (4.6x slower per element at 8192 elements). Same in engine.c. */

/* 0.5 (1 + tanh u) = sigmoid(2u): the same function, computed with one exp and
 * no cancellation near tanh u = -1. zeroc__expf (not libm's scalar call) lets
 * `simd` vectorise the loops; in the far tails it saturates as expf does
 * (inf for x << 0: x / inf = -0; 0 for x >> 0: x), and NaN stays NaN. */

// inp (N) -> out (N) = 0.5 x (1 + tanh(k (x + a x^3))) = x sigmoid(2 k (x + a x^3))
ZEROC_CPU_HOT void zeroc__cpu_gelu_forward(float *out, const float *inp, size_t N) {
#pragma omp parallel for simd if (parallel : N > PAR_MIN) schedule(static)
  for (size_t i = 0; i < N; i++) {
    const float x = inp[i];
    out[i] = x / (1.0f + zeroc__expf(-2.0f * GELU_K * (x + GELU_A * x * x * x)));
  }
}

// inp (N), dout (N) -> dinp (N) += gelu'(inp) dout
// One pass: the sigmoid is recomputed from inp here rather than saved by the
// forward (no extra (N) buffer in the step), at the cost of one vector exp.
ZEROC_CPU_HOT void zeroc__cpu_gelu_backward(float *dinp, const float *inp, const float *dout,
                                            size_t N) {
#pragma omp parallel for simd if (parallel : N > PAR_MIN) schedule(static)
  for (size_t i = 0; i < N; i++) {
    const float x = inp[i];
    const float s = 1.0f / (1.0f + zeroc__expf(-2.0f * GELU_K * (x + GELU_A * x * x * x)));
    /* d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, du/dx = k (1 + 3 a x^2) */
    const float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    dinp[i] += s * (1.0f + 2.0f * x * (1.0f - s) * du) * dout[i];
  }
}

// inp (N), d (N) -> d = gelu'(inp) d, in place: the same product as zeroc__cpu_gelu_backward
// adds, for a d the matmul backward has just written (nothing to add to)
ZEROC_CPU_HOT void zeroc__cpu_gelu_scale(float *d, const float *inp, size_t N) {
#pragma omp parallel for simd if (parallel : N > PAR_MIN) schedule(static)
  for (size_t i = 0; i < N; i++) {
    const float x = inp[i];
    const float s = 1.0f / (1.0f + zeroc__expf(-2.0f * GELU_K * (x + GELU_A * x * x * x)));
    const float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    d[i] = s * (1.0f + 2.0f * x * (1.0f - s) * du) * d[i];
  }
}

/* `simd`: element i reads only a[i], b[i], so vectorising is safe even when out
 * aliases a or b (which stops the compiler from doing it on its own). */

// a (N), b (N) -> out (N) = a + b; out may alias a or b
ZEROC_CPU_HOT void zeroc__cpu_residual_forward(float *out, const float *a, const float *b,
                                               size_t N) {
#pragma omp parallel for simd if (parallel : N > PAR_MIN) schedule(static)
  for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

// y (N) += x (N)
ZEROC_CPU_HOT void zeroc__cpu_add(float *y, const float *x, size_t N) {
#pragma omp parallel for simd if (parallel : N > PAR_MIN) schedule(static)
  for (size_t i = 0; i < N; i++) y[i] += x[i];
}
