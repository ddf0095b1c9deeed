/*
 * kernels/cpu/layernorm.c - LayerNorm over the last dimension (eps 1e-5),
 * saving each row's mean and 1/std for the backward pass. Every row pass is a
 * `simd` loop (the double sums in lanes: their order is fixed by C alone, not
 * by how rows are split over threads).
 */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

#define LN_EPS   1e-5
#define PAR_MIN  16384 /* elements below which threading costs more than it saves */
#define CH_BLOCK 64    /* channels per dweight/dbias work item */
#define ROW_MAX_C 4096 /* widest row whose dweight/dbias sums the one-thread pass keeps (64 KiB) */

// inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N)
ZEROC_CPU_HOT void zeroc__cpu_layernorm_forward(float *out, float *mean, float *rstd,
                                                const float *inp, const float *weight,
                                                const float *bias, int N, int C) {
#pragma omp parallel for if ((size_t)N * C > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    float *o = out + (size_t)n * C;
    /* Two passes in double: the one-pass E[x^2] - E[x]^2 loses every digit when
     * a row's mean is large against its spread (a residual stream can be). */
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++) s += x[c];
    const double mu = s / C;
    double v = 0;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) {
      const double d = x[c] - mu;
      v += d * d;
    }
    const double rs = 1.0 / sqrt(v / C + LN_EPS);
    const float m = (float)mu, r = (float)rs;
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

// dout (N,C), inp (N,C), weight (C), mean (N), rstd (N) -> dinp (N,C) +=, dweight (C) +=, dbias (C)
// +=
//
// With xhat = (x - mean) * rstd and g = dout * weight, per row:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// dweight and dbias are sums over rows. Each channel adds its rows in order, in
// double, whatever the threads: on one thread (and C <= ROW_MAX_C) in the rows' own
// pass (aw, ab on the stack: one read of the rows instead of two, 0.67x the time at
// C 256), otherwise in a second pass where each work item owns a block of channels
// (per-thread partial sums would be combined in an order that depends on the thread
// count). The two give the same bits.
ZEROC_CPU_HOT void zeroc__cpu_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                                 const float *dout, const float *inp,
                                                 const float *weight, const float *mean,
                                                 const float *rstd, int N, int C) {
  const int par = (size_t)N * C > PAR_MIN && omp_get_max_threads() > 1;
  double sums[2 * ROW_MAX_C];
  double *aw = par || C > ROW_MAX_C ? NULL : sums, *ab = aw ? aw + C : NULL;
  if (aw) memset(aw, 0, 2 * (size_t)C * sizeof *aw);
#pragma omp parallel for if (par) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    float *dx = dinp + (size_t)n * C;
    const float m = mean[n], r = rstd[n];
    double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int c = 0; c < C; c++) {
      const double g = (double)d[c] * weight[c];
      sg += g;
      sgx += g * ((x[c] - m) * r);
    }
    const float mg = (float)(sg / C), mgx = (float)(sgx / C);
    if (aw) {
#pragma omp simd
      for (int c = 0; c < C; c++) {
        const float xhat = (x[c] - m) * r;
        dx[c] += r * (d[c] * weight[c] - mg - xhat * mgx);
        aw[c] += (double)d[c] * xhat;
        ab[c] += d[c];
      }
    } else {
#pragma omp simd
      for (int c = 0; c < C; c++) {
        const float xhat = (x[c] - m) * r;
        dx[c] += r * (d[c] * weight[c] - mg - xhat * mgx);
      }
    }
  }
  if (aw) {
    for (int c = 0; c < C; c++) {
      dweight[c] += (float)aw[c];
      dbias[c] += (float)ab[c];
    }
    return;
  }

  const int nblocks = (C + CH_BLOCK - 1) / CH_BLOCK;
#pragma omp parallel for if (par) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    const int c0 = blk * CH_BLOCK;
    const int nc = c0 + CH_BLOCK < C ? CH_BLOCK : C - c0;
    double bw[CH_BLOCK] = {0}, bb[CH_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
      const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
      const float m = mean[n], r = rstd[n];
      /* lanes run across channels: each channel still adds its rows in order */
#pragma omp simd
      for (int j = 0; j < nc; j++) {
        bw[j] += (double)d[j] * ((x[j] - m) * r);
        bb[j] += d[j];
      }
    }
    for (int j = 0; j < nc; j++) {
      dweight[c0 + j] += (float)bw[j];
      dbias[c0 + j] += (float)bb[j];
    }
  }
}
