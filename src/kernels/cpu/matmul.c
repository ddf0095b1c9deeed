/*
 * kernels/cpu/matmul.c - linear layer forward and backward: zeroc's own matrix
 * product (gemm.c) on CPUs with AVX-512, OpenBLAS's sgemm elsewhere and with
 * ZEROC_CPU_GEMM=0.
 */
#include <cblas.h>
#include <stddef.h>
#include <string.h>

#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN (1 << 18) /* floats below which one thread clears faster than several */

/* c (n floats) = 0, for a product then accumulated into it with beta 1. With beta 0
 * OpenBLAS (0.3.21) clears c itself, in its generic `sgemm_beta` loop, whose ordinary
 * stores read every line before writing it; memset's streaming stores do not. Per
 * product 0-1.4% faster (the logits, the MLP's dinp; one and two ranks on two cores,
 * median of 21). The bits are the same: either way the kernel adds a b to a c of 0. */
static void clear(float *c, size_t n) {
  const int nt = n > PAR_MIN ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const size_t t = (size_t)omp_get_thread_num(), k = (size_t)omp_get_num_threads();
    const size_t lo = n * t / k, hi = n * (t + 1) / k;
    memset(c + lo, 0, (hi - lo) * sizeof *c);
  }
}

/* zeroc__gemm where it runs: 1 if it did the product (it stores its first K block, so
 * the OpenBLAS path's clearing or bias copy is not needed) */
static int own_gemm(zeroc_gemm_mode_t mode, int M, int N, int K, const float *a, size_t ars,
                    size_t acs, const float *b, size_t brs, size_t bcs, const float *bias, float *c,
                    size_t ldc) {
  return zeroc__gemm_available() &&
         zeroc__gemm(mode, M, N, K, a, ars, acs, b, brs, bcs, bias, c, ldc) == 0;
}

// inp (N,C), weight (OC,C), bias (OC) -> out (N,OC)
void zeroc__cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                               int N, int C, int OC) {
  /* b = weight^T: its element (c, o) is weight[o * C + c] */
  if (own_gemm(bias ? ZEROC_GEMM_BIAS : ZEROC_GEMM_SET, N, OC, C, inp, (size_t)C, 1, weight, 1,
               (size_t)C, bias, out, (size_t)OC))
    return;
  if (bias) {
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * (size_t)OC);
  } else {
    clear(out, (size_t)N * (size_t)OC);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 1.0f,
              out, OC);
}

// inp (C), weight (OC,C), bias (OC) -> out (OC): one row, without sgemm's packing of the
// weight (which costs as much as the product itself when N is 1: token-by-token inference)
void zeroc__cpu_matvec_forward(float *out, const float *inp, const float *weight, const float *bias,
                               int C, int OC) {
  if (bias) memcpy(out, bias, sizeof(float) * (size_t)OC);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1, bias ? 1.0f : 0.0f, out,
              1);
}

/* Column sums of x (N,OC), rows in order: each sum[o] gets its additions in the same
 * order as a scalar loop, only OC-wide in vectors (`simd`: the compiler cannot rule out
 * sum aliasing x; the caller's buffers never do). */
static void colsum_add(float *sum, const float *x, int N, int OC) {
  for (int n = 0; n < N; n++) {
    const float *row = x + (size_t)n * OC;
#pragma omp simd
    for (int o = 0; o < OC; o++) sum[o] += row[o];
  }
}

// dout (N,OC) -> dinp (N,C) += (= with set_dinp or pre), dweight (OC,C) +=, dbias (OC) +=;
// pre (N,C): dinp = gelu'(pre) * (dout @ weight), dpre_bias (C) += its column sums
ZEROC_CPU_HOT void zeroc__cpu_matmul_backward_ex(float *dinp, float *dweight, float *dbias,
                                                 const float *dout, const float *inp,
                                                 const float *weight, int N, int C, int OC,
                                                 const float *pre, float *dpre_bias,
                                                 int set_dinp) {
  if (dinp) {
    const int set = set_dinp || pre;
    if (!own_gemm(set ? ZEROC_GEMM_SET : ZEROC_GEMM_ADD, N, C, OC, dout, (size_t)OC, 1, weight,
                  (size_t)C, 1, NULL, dinp, (size_t)C)) {
      if (set) clear(dinp, (size_t)N * (size_t)C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                  1.0f, dinp, C);
    }
    if (pre && dpre_bias) /* inp = gelu(pre) */
      zeroc__cpu_gelu_scale_colsum(dinp, pre, inp, dpre_bias, N, C);
    else if (pre)
      zeroc__cpu_gelu_scale(dinp, pre, inp, (size_t)N * (size_t)C);
  }
  /* a = dout^T: its element (o, n) is dout[n * OC + o] */
  if (dweight && !own_gemm(ZEROC_GEMM_ADD, OC, C, N, dout, 1, (size_t)OC, inp, (size_t)C, 1, NULL,
                           dweight, (size_t)C))
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dweight, C);
  if (dbias) colsum_add(dbias, dout, N, OC);
}

// dout (N,OC) -> dinp (N,C) +=, dweight (OC,C) +=, dbias (OC) +=
void zeroc__cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *weight, int N, int C, int OC) {
  zeroc__cpu_matmul_backward_ex(dinp, dweight, dbias, dout, inp, weight, N, C, OC, NULL, NULL, 0);
}
