/*
 * kernels/cpu/gelu.c - elementwise kernels: GPT-2's tanh GELU forward and
 * backward, the residual sum and in-place addition. Each is one vectorised
 * pass (ZEROC_CPU_HOT: 8 floats wide with FMA where the CPU has AVX2).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN 32768               /* elements below which threading costs more than it saves */
#define GELU_K  0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A  0.044715f
/* The residual and add loops take `if (parallel : ...)`, not a bare `if`: on a
 * combined `parallel for simd` a bare if applies to the simd part too (OpenMP 5.0),
 * and GCC then left every call below PAR_MIN scalar (GELU, when it was such a loop,
 * 4.6x slower per element at 8192 elements). Same in engine.c. */

/* 0.5 (1 + tanh u) = sigmoid(2u): the same function, computed with one exp and
 * no cancellation near tanh u = -1.
 *
 * Written with GCC's vector types, 8 floats at a time (one AVX register in the
 * x86-64-v3 clone, two SSE ones in the baseline), because from the plain loop
 * GCC turned zeroc__expf's saturating selects into a second division and four
 * blends per vector, and GELU, which is compute-bound (0.88 ns per element in L2
 * and out of it), ran at ~21 cycles per 8 elements. Here the exponent is clamped
 * to [-87, 88] before the exp, which then needs no selects: in the far tails
 * sigmoid is ~1.6e-38 instead of 0 (gelu(-50) = -3e-37 for -0), and NaN stays NaN
 * (the clamps compare false and pass it on). */
typedef int32_t v8i __attribute__((vector_size(32)));
#define ZEROC_INL    static inline __attribute__((always_inline))
#define SEL(m, a, b) ((v8)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m)))) /* m ? a : b, per lane */
#define Z_HI         88.0f
#define Z_LO         -87.0f

/* SIG8(x): sigmoid(2 k (x + a x^3)) of 8 floats, with zeroc__expf's reduction and
 * polynomial (vmath.h) on the clamped exponent */
/* a macro, not a function: see v8 in vmath.h */
#define SIG8(x)                                                                                    \
  ({                                                                                               \
    const v8 x8_ = (x);                                                                            \
    v8 z_ = (-2.0f * GELU_K) * (x8_ + GELU_A * x8_ * x8_ * x8_);                                   \
    z_ = SEL(z_ > Z_HI, (v8){0} + Z_HI, z_);                                                       \
    z_ = SEL(z_ < Z_LO, (v8){0} + Z_LO, z_);                                                       \
    const v8 mg_ = (v8){0} + 12582912.0f; /* 1.5 * 2^23 */                                         \
    const v8 t_ = z_ * 1.44269504088896341f + mg_;                                                 \
    const v8 n_ = t_ - mg_;                                                                        \
    const v8 r_ = (z_ - n_ * 0.693145751953125f) - n_ * 1.42860682030941723e-6f;                   \
    v8 p_ = (v8){0} + 1.0f / 720;                                                                  \
    p_ = p_ * r_ + 1.0f / 120;                                                                     \
    p_ = p_ * r_ + 1.0f / 24;                                                                      \
    p_ = p_ * r_ + 1.0f / 6;                                                                       \
    p_ = p_ * r_ + 0.5f;                                                                           \
    p_ = p_ * r_ + 1.0f;                                                                           \
    p_ = p_ * r_ + 1.0f;                                                                           \
    const v8i sb_ = ((v8i)t_ - 0x4B400000 + 127) << 23;                                            \
    1.0f / (1.0f + p_ * (v8)sb_);                                                                  \
  })

// the same for one float: the tails of the arrays
ZEROC_INL float sig1(float x) {
  float z = (-2.0f * GELU_K) * (x + GELU_A * x * x * x);
  z = z > Z_HI ? Z_HI : z;
  z = z < Z_LO ? Z_LO : z;
  return 1.0f / (1.0f + zeroc__expf(z));
}

/* d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, du/dx = k (1 + 3 a x^2) */
#define GELU_GRAD(x, s)                                                                            \
  ((s) * (1.0f + 2.0f * (x) * (1.0f - (s)) * (GELU_K * (1.0f + 3.0f * GELU_A * (x) * (x)))))

// inp (N) -> out (N) = 0.5 x (1 + tanh(k (x + a x^3))) = x sigmoid(2 k (x + a x^3))
ZEROC_CPU_HOT void zeroc__cpu_gelu_forward(float *out, const float *inp, size_t N) {
  const size_t nv = N / 8;
#pragma omp parallel for if (N > PAR_MIN) schedule(static)
  for (size_t b = 0; b < nv; b++) {
    const v8 x = LD8(inp + 8 * b);
    ST8(out + 8 * b, x * SIG8(x));
  }
  for (size_t i = nv * 8; i < N; i++) out[i] = inp[i] * sig1(inp[i]);
}

// inp (N), dout (N) -> dinp (N) += gelu'(inp) dout
// One pass: the sigmoid is recomputed from inp here rather than saved by the
// forward (no extra (N) buffer in the step), at the cost of one vector exp.
ZEROC_CPU_HOT void zeroc__cpu_gelu_backward(float *dinp, const float *inp, const float *dout,
                                            size_t N) {
  const size_t nv = N / 8;
#pragma omp parallel for if (N > PAR_MIN) schedule(static)
  for (size_t b = 0; b < nv; b++) {
    const v8 x = LD8(inp + 8 * b), s = SIG8(x);
    ST8(dinp + 8 * b, LD8(dinp + 8 * b) + GELU_GRAD(x, s) * LD8(dout + 8 * b));
  }
  for (size_t i = nv * 8; i < N; i++) {
    const float x = inp[i], s = sig1(x);
    dinp[i] += GELU_GRAD(x, s) * dout[i];
  }
}

/* The sigmoid of a GELU's input x from its output g = x s: s = g / x, one division
 * instead of SIG8's exp, polynomial and division (0.89 -> 0.37 ns per element at 1 Mi
 * elements, one thread, the operands out of L2 as in the step). Near x = 0, where g / x
 * loses digits (and is 0 / 0 at 0), s = 1/2 + k x / 2, its first-order form, exact to
 * O(x^3). s carries g's rounding: the slope differs from the recomputed one by a few
 * ulp, most where s is near 1 and 1 - s keeps few digits (4e-6 at most over [-5, 5]). */
#define S_SMALL 1e-6f
#define SIG8_OUT(x, g)                                                                             \
  ({                                                                                               \
    const v8 xs_ = (x);                                                                            \
    const v8i sm_ = (xs_ < S_SMALL) & (xs_ > -S_SMALL);                                            \
    SEL(sm_, 0.5f + (0.5f * GELU_K) * xs_, (g) / xs_);                                             \
  })

// the same for one float: the tails
ZEROC_INL float sig1_out(float x, float g) {
  return x < S_SMALL && x > -S_SMALL ? 0.5f + (0.5f * GELU_K) * x : g / x;
}

// inp (N), out (N) = gelu(inp), d (N) -> d = gelu'(inp) d, in place: for a d the matmul
// backward has just written (nothing to add to), with the forward's output at hand
ZEROC_CPU_HOT void zeroc__cpu_gelu_scale(float *d, const float *inp, const float *out, size_t N) {
  const size_t nv = N / 8;
#pragma omp parallel for if (N > PAR_MIN) schedule(static)
  for (size_t b = 0; b < nv; b++) {
    const v8 x = LD8(inp + 8 * b), s = SIG8_OUT(x, LD8(out + 8 * b));
    ST8(d + 8 * b, GELU_GRAD(x, s) * LD8(d + 8 * b));
  }
  for (size_t i = nv * 8; i < N; i++) {
    const float x = inp[i], s = sig1_out(x, out[i]);
    d[i] = GELU_GRAD(x, s) * d[i];
  }
}

// the same for d (N,C), and dbias (C) += the column sums of the new d, each column's
// rows added in order (as a scalar loop over the rows would): one pass over d instead
// of a second one that reads it back. Threads split the columns, so the sums' bits do
// not depend on their number.
ZEROC_CPU_HOT void zeroc__cpu_gelu_scale_colsum(float *d, const float *inp, const float *out,
                                                float *dbias, int N, int C) {
#pragma omp parallel if ((size_t)N * (size_t)C > PAR_MIN)
  {
    const int T = omp_get_num_threads(), t = omp_get_thread_num(), packs = C / 8;
    const int c0 = packs * t / T * 8, c1 = t == T - 1 ? C : packs * (t + 1) / T * 8;
    for (int n = 0; n < N; n++) {
      float *dr = d + (size_t)n * C;
      const float *xr = inp + (size_t)n * C, *gr = out + (size_t)n * C;
      int c = c0;
      for (; c + 8 <= c1; c += 8) {
        const v8 x = LD8(xr + c), s = SIG8_OUT(x, LD8(gr + c));
        const v8 v = GELU_GRAD(x, s) * LD8(dr + c);
        ST8(dr + c, v);
        ST8(dbias + c, LD8(dbias + c) + v);
      }
      for (; c < c1; c++) {
        const float x = xr[c], s = sig1_out(x, gr[c]);
        dr[c] = GELU_GRAD(x, s) * dr[c];
        dbias[c] += dr[c];
      }
    }
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
