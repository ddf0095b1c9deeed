/*
 * kernels/clip.h - the optimizer step's verdict on a gradient from its global sum of
 * squares: the multiplier that clips it, or NaN when its norm is not finite and the
 * step is skipped. One formula for the host (shard/step.c: every rank reads the
 * verdict's sum back for its report, and decides itself where the optimizer state is
 * offloaded) and for the kernels that decide it on the device (zeroc_k_clip_scale,
 * after the ranks' device all-reduce: nothing leaves the device before AdamW).
 */
#ifndef ZEROC_KERNELS_CLIP_H
#define ZEROC_KERNELS_CLIP_H

#include <math.h>

#ifdef __CUDACC__
#define ZEROC_HD __host__ __device__ __forceinline__
#else
#define ZEROC_HD static inline
#endif

/* sumsq: the gradient's global sum of squares (fp64); clip: the norm to clip to, 0 off.
 * -> NaN when sqrt(sumsq) is NaN or infinite (skip), clip / (norm + 1e-6) rounded to
 * fp32 when clip > 0 and the norm exceeds it, else 1. In double, so the device and the
 * host give the same bits (sqrt and division are correctly rounded on both). */
ZEROC_HD float zeroc_i_clip_scale(double sumsq, float clip) {
  const double norm = sqrt(sumsq);
  if (!(norm - norm == 0.0)) return NAN; /* not finite: Inf - Inf and NaN are NaN */
  return clip > 0 && norm > clip ? (float)(clip / (norm + 1e-6)) : 1.0f;
}

#endif
