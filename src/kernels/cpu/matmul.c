/*
 * kernels/cpu/matmul.c - linear layer forward and backward through OpenBLAS.
 */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

// inp (N,C), weight (OC,C), bias (OC) -> out (N,OC)
void zeroc__cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                               int N, int C, int OC) {
  if (bias) {
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * (size_t)OC);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
              bias ? 1.0f : 0.0f, out, OC);
}

// inp (C), weight (OC,C), bias (OC) -> out (OC): one row, without sgemm's packing of the
// weight (which costs as much as the product itself when N is 1: token-by-token inference)
void zeroc__cpu_matvec_forward(float *out, const float *inp, const float *weight, const float *bias,
                               int C, int OC) {
  if (bias) memcpy(out, bias, sizeof(float) * (size_t)OC);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1, bias ? 1.0f : 0.0f, out,
              1);
}

// dout (N,OC) -> dinp (N,C) +=, dweight (OC,C) +=, dbias (OC) +=
ZEROC_CPU_HOT void zeroc__cpu_matmul_backward(float *dinp, float *dweight, float *dbias,
                                              const float *dout, const float *inp,
                                              const float *weight, int N, int C, int OC) {
  if (dinp)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                1.0f, dinp, C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  /* Column sums, rows in order: each dbias[o] gets its additions in the same
   * order as before, only OC-wide in vectors (`simd`: the compiler cannot rule
   * out dbias aliasing dout; the caller's buffers never do). */
  if (dbias) {
    for (int n = 0; n < N; n++) {
      const float *row = dout + (size_t)n * OC;
#pragma omp simd
      for (int o = 0; o < OC; o++) dbias[o] += row[o];
    }
  }
}
