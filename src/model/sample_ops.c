/*
 * model/sample_ops.c - the sampler's attention over its KV cache (the training kernel's
 * online softmax in the same order, so the same q, k, v give the same out) and its
 * linear layer (one row, a token at a time, through sgemv).
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "model/sample_ops.h"

static inline float dot(const float *a, const float *b, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// q rows of qkv (n,ldq) at positions pos..pos+n-1, keys and values kv (pos+n, 2 KV) -> out
// (n, NH HS); the training kernel's online softmax in the same order, so the same q, k, v
// give the same out
void zeroc__sampler_attend(float *out, const float *qkv, size_t ldq, const float *kv, int n,
                           int pos, int NH, int NKV, int HS) {
  const size_t KV = (size_t)NKV * HS, C = (size_t)NH * HS;
  const float scale = 1.0f / sqrtf((float)HS);
  for (int i = 0; i < n; i++) {
    int t = pos + i;
    for (int h = 0; h < NH; h++) {
      const float *q = qkv + (size_t)i * ldq + (size_t)h * HS;
      float *restrict o = out + (size_t)i * C + (size_t)h * HS;
      for (int d = 0; d < HS; d++) o[d] = 0;
      float m = -INFINITY, l = 0;
      for (int j = 0; j <= t; j++) {
        const float *kj = kv + (size_t)j * 2 * KV + (size_t)(h % NKV) * HS, *restrict vj = kj + KV;
        const float sc = dot(q, kj, HS) * scale;
        if (sc > m) {
          const float a = expf(m - sc);
          l *= a;
#pragma omp simd
          for (int d = 0; d < HS; d++) o[d] *= a;
          m = sc;
        }
        const float p = expf(sc - m);
        l += p;
#pragma omp simd
        for (int d = 0; d < HS; d++) o[d] += p * vj[d];
      }
      const float il = 1.0f / l;
#pragma omp simd
      for (int d = 0; d < HS; d++) o[d] *= il;
    }
  }
}

/* out (n,OC) = inp (n,C) @ weight (OC,C)^T + bias: one row (a token at a time) through
 * sgemv, which streams the weight once instead of packing it first */
void zeroc__sampler_linear(float *out, const float *inp, const float *weight, const float *bias,
                           int n, int C, int OC) {
  if (n == 1)
    zeroc__cpu_matvec_forward(out, inp, weight, bias, C, OC);
  else
    zeroc__cpu_matmul_forward(out, inp, weight, bias, n, C, OC);
}
