/*
 * kernels/cpu/vmath.h - what lets the cpu kernels run at the vector width of
 * the machine they run on:
 *
 * ZEROC_CPU_HOT marks a kernel to be compiled twice, for x86-64-v3 (AVX2 +
 * FMA, every x86 server since 2013) and for the baseline (SSE2), the loader
 * picking one when the library is loaded (GCC's target_clones, an ifunc). The
 * library itself is built for the baseline, so it runs anywhere; without this
 * its loops ran 4 floats wide on CPUs that do 8. GCC also clones the functions
 * `#pragma omp` outlines from a marked kernel, but not a static helper it calls
 * unless that is inlined (mark such helpers always_inline). The build is
 * -std=c11, where a * b + c is not fused into an FMA, but the cpu kernels are
 * compiled with -ffp-contract=fast (CMakeLists.txt); results may differ in the last bits
 * between the two clones, never between runs or thread counts on one machine.
 *
 * zeroc__expf is exp in float that a `#pragma omp simd` loop vectorises
 * (libm's expf is a scalar call): ~1-2 ulp relative error for x in
 * [-87.3, 88.3]; 0 below (where expf is subnormal or 0), +inf above, NaN for
 * NaN (a NaN loss must stay visible to the numerical checks).
 * zeroc__expf_nonpos is the same for x <= 0 without the range selects, for
 * softmax rows.
 */
#ifndef ZEROC_KERNELS_CPU_VMATH_H
#define ZEROC_KERNELS_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) &&       \
    !defined(ZEROC_NO_CPU_CLONES)
#define ZEROC_CPU_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ZEROC_CPU_HOT
#endif

#define ZEROC_EXPF_HI 88.3762626647949f /* ln(2^127.5): the scale 2^n stays finite below */
#define ZEROC_EXPF_LO -87.3365447504f   /* ln(2^-126): the smallest normal float */

/* exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln(2) / 2; exp(r) by its
 * Taylor polynomial of degree 6 (remainder < r^7/5040 < 1.3e-7 relative), for x
 * already in [ZEROC_EXPF_LO, ZEROC_EXPF_HI] (no range handling here).
 * n is rounded by adding 1.5 * 2^23 (the float's mantissa then holds n), which
 * needs no float-to-int conversion, so NaN takes no undefined path. */
static inline float zeroc__expf_core(float xc) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  const float t = xc * 1.44269504088896341f + magic;
  const float n = t - magic;
  /* ln 2 in two parts: n * LN2_HI is exact for |n| < 2^9 */
  const float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  /* the low bits of t's mantissa are n + 2^22; 2^n's exponent field is n + 127 */
  const uint32_t sb = (tb - 0x4B400000u + 127u) << 23;
  float s;
  memcpy(&s, &sb, sizeof s);
  return p * s;
}

static inline float zeroc__expf(float x) {
  float xc = x > ZEROC_EXPF_HI ? ZEROC_EXPF_HI : x; /* NaN compares false: stays NaN */
  xc = xc < ZEROC_EXPF_LO ? ZEROC_EXPF_LO : xc;
  const float y = zeroc__expf_core(xc);
  return x < ZEROC_EXPF_LO ? 0.0f : (x > ZEROC_EXPF_HI ? (float)INFINITY : y);
}

/* exp(x) for a softmax's shifted scores, x <= 0 (x - the row max): below
 * ZEROC_EXPF_LO it gives exp(LO) = 1.2e-38 instead of 0 (nothing a sum of terms
 * of which one is 1 can see), NaN stays NaN, and x above ZEROC_EXPF_HI is not
 * allowed. With one select instead of zeroc__expf's four (GCC turns each into a
 * compare and a blend), its vector loops run ~1.3x faster. */
static inline float zeroc__expf_nonpos(float x) {
  return zeroc__expf_core(x < ZEROC_EXPF_LO ? ZEROC_EXPF_LO : x);
}

/* GCC's vector extension: 8 floats, one AVX register in the x86-64-v3 clone,
 * two SSE ones in the baseline one. Used only in locals and macros (never passed
 * or returned by value, which would change the ABI between the clones). */
typedef float v8 __attribute__((vector_size(32)));
#define LD8(p)                                                                                     \
  ({                                                                                               \
    v8 x_;                                                                                         \
    memcpy(&x_, (p), sizeof x_);                                                                   \
    x_;                                                                                            \
  })
#define ST8(p, x)                                                                                  \
  do {                                                                                             \
    v8 y_ = (x);                                                                                   \
    memcpy((p), &y_, sizeof y_);                                                                   \
  } while (0)

#endif
