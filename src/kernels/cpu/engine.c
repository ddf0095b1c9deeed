/*
 * kernels/cpu/engine.c - the engine's kernels on flat fp32 shards: casts,
 * accumulation, scaling, sum of squares and AdamW. Every loop is `simd` (GCC
 * at -O2 would vectorise few of them on its own: its cost model is the very
 * cheap one) and split across the rank's OpenMP threads. Built with
 * -ffp-contract=off (CMakeLists.txt): every product and sum rounds on its own,
 * as in the cuda twins, so both give the same bits on any host.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "zeroc/types.h"

#define PAR_MIN 32768 /* below this, threading costs more than it saves */

ZEROC_CPU_HOT void zeroc__cpu_cast(void *dst, int dst_dt, const void *src, int src_dt, size_t n) {
  if (dst_dt == src_dt) {
    if (dst != src) memmove(dst, src, n * zeroc_dtype_size((zeroc_dtype_t)dst_dt));
    return;
  }
  if (dst_dt == ZEROC_BF16) { /* fp32 -> bf16 */
    const float *s = src;
    uint16_t *d = dst;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = zeroc_f32_to_bf16(s[i]);
  } else { /* bf16 -> fp32 */
    const uint16_t *s = src;
    float *d = dst;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = zeroc_bf16_to_f32(s[i]);
  }
}

ZEROC_CPU_HOT void zeroc__cpu_accumulate(float *dst, const void *src, int src_dt, size_t n,
                                         float scale) {
  if (src_dt == ZEROC_FP32) {
    const float *s = src;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] += scale * s[i];
  } else {
    const uint16_t *s = src;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] += scale * zeroc_bf16_to_f32(s[i]);
  }
}

ZEROC_CPU_HOT void zeroc__cpu_scale(float *x, size_t n, float a) {
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) x[i] *= a;
}

ZEROC_CPU_HOT void zeroc__cpu_add_to(void *dst, int dst_dt, const float *src, size_t n) {
  if (dst_dt == ZEROC_FP32) {
    float *d = dst;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) d[i] += src[i];
  } else {
    uint16_t *d = dst;
#pragma omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = zeroc_f32_to_bf16(zeroc_bf16_to_f32(d[i]) + src[i]);
  }
}

/* Summed in double. Each thread sums one block of a fixed split and the blocks
 * are added in thread order, so a given thread count always gives the same
 * bits; an OpenMP reduction clause would combine partials in arrival order. */
ZEROC_CPU_HOT double zeroc__cpu_sumsq(const void *xv, int dt, size_t n) {
  enum { MAXT = 256 };
  double part[MAXT] = {0};
  const float *x = xv;
  const uint16_t *xb = xv; /* bf16: widened exactly, so the sum is the fp32 copy's */
#pragma omp parallel if (n > PAR_MIN)
  {
    int nth = omp_get_num_threads();
    nth = nth < MAXT ? nth : MAXT;
    const int tid = omp_get_thread_num();
    if (tid < nth) {
      double acc = 0;
      const size_t lo = n * (size_t)tid / (size_t)nth, hi = n * (size_t)(tid + 1) / (size_t)nth;
      if (dt == ZEROC_BF16) {
#pragma omp simd reduction(+ : acc)
        for (size_t i = lo; i < hi; i++) {
          const double v = zeroc_bf16_to_f32(xb[i]);
          acc += v * v;
        }
      } else {
#pragma omp simd reduction(+ : acc)
        for (size_t i = lo; i < hi; i++) acc += (double)x[i] * (double)x[i];
      }
      part[tid] = acc;
    }
  }
  double acc = 0;
  for (int t = 0; t < MAXT; t++) acc += part[t];
  return acc;
}

/* One element of AdamW, inlined by every loop of adamw_mixed, so they round alike. */
static inline float adamw_one(float *p, float *m, float *v, float g, float lr, float beta1,
                              float beta2, float ib1, float ib2, float rbc1, float rbc2, float eps,
                              float wd, float grad_scale) {
  g = g * grad_scale;
  float mi = beta1 * *m + ib1 * g;
  float vi = beta2 * *v + ib2 * g * g;
  *m = mi;
  *v = vi;
  float mhat = mi * rbc1, vhat = vi * rbc2;
  *p -= lr * (mhat / (sqrtf(vhat) + eps) + wd * *p);
  return *p;
}

/* In index order, as the host-side loss of a loss head always was: the
 * reported loss repeats bit for bit. Not vectorised (the order is the point). */
double zeroc__cpu_mean(const float *x, size_t n, double denom) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  return (double)(float)(sum / denom);
}

/* One AdamW loop of adamw_mixed with the gradient's read and the copy's store fixed:
 * a loop choosing them per element is not vectorised (GCC leaves it scalar, 3.5x slower
 * in the step's profile), so each combination gets its own loop. sqrtf vectorises
 * because the cpu kernels build with -fno-math-errno (CMakeLists.txt). */
/* (clang-format would join the _Pragma and the for into one line) */
/* clang-format off */
#define PAR_SIMD "omp parallel for simd if (parallel : n > PAR_MIN) schedule(static)"
#define ADAMW_MIXED_LOOP(GRAD, STORE)                                                              \
  do {                                                                                             \
    _Pragma(PAR_SIMD)                                                                              \
    for (size_t i = 0; i < n; i++) {                                                               \
      const float p_ = adamw_one(&param[i], &m[i], &v[i], (GRAD), lr, beta1, beta2, ib1, ib2,     \
                                 rbc1, rbc2, eps, wd, grad_scale);                                 \
      STORE;                                                                                       \
    }                                                                                              \
  } while (0)
/* clang-format on */

/* AdamW reading a gradient in grad_dt and, when out is set, writing the new parameter
 * rounded to out_dt as well: zeroc__cpu_cast + zeroc__cpu_adamw + zeroc__cpu_cast in one
 * pass, the same bits. */
ZEROC_CPU_HOT void zeroc__cpu_adamw_mixed(float *param, float *m, float *v, const void *grad,
                                          int grad_dt, void *out, int out_dt, size_t n, float lr,
                                          float beta1, float beta2, float eps, float wd,
                                          float grad_scale, float bc1, float bc2) {
  const float ib1 = 1.0f - beta1, ib2 = 1.0f - beta2;
  const float rbc1 = 1.0f / bc1, rbc2 = 1.0f / bc2;
  const float *gf = grad;
  const uint16_t *gb = grad;
  float *of = out;
  uint16_t *ob = out;
  const int bf16_in = grad_dt != ZEROC_FP32;
  const int store = !out ? 0 : (out_dt == ZEROC_FP32 ? 1 : 2); /* none, fp32, bf16 */
  if (!bf16_in && store == 0) ADAMW_MIXED_LOOP(gf[i], (void)p_);
  if (!bf16_in && store == 1) ADAMW_MIXED_LOOP(gf[i], of[i] = p_);
  if (!bf16_in && store == 2) ADAMW_MIXED_LOOP(gf[i], ob[i] = zeroc_f32_to_bf16(p_));
  if (bf16_in && store == 0) ADAMW_MIXED_LOOP(zeroc_bf16_to_f32(gb[i]), (void)p_);
  if (bf16_in && store == 1) ADAMW_MIXED_LOOP(zeroc_bf16_to_f32(gb[i]), of[i] = p_);
  if (bf16_in && store == 2)
    ADAMW_MIXED_LOOP(zeroc_bf16_to_f32(gb[i]), ob[i] = zeroc_f32_to_bf16(p_));
}

/* Plain AdamW: the fp32 loop of adamw_mixed, without a copy. */
void zeroc__cpu_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, float grad_scale, float bc1,
                      float bc2) {
  zeroc__cpu_adamw_mixed(param, m, v, grad, ZEROC_FP32, NULL, ZEROC_FP32, n, lr, beta1, beta2, eps,
                         wd, grad_scale, bc1, bc2);
}
