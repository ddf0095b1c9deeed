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

#define ZEROC_INL static inline __attribute__((always_inline))

// x (C), weight (C), bias (C) -> o (C), *mean, *rstd: one row
ZEROC_INL void ln_row(float *o, float *mean, float *rstd, const float *x, const float *weight,
                      const float *bias, int C) {
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
  *mean = m;
  *rstd = r;
}

// inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N)
ZEROC_CPU_HOT void zeroc__cpu_layernorm_forward(float *out, float *mean, float *rstd,
                                                const float *inp, const float *weight,
                                                const float *bias, int N, int C) {
#pragma omp parallel for if ((size_t)N * C > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++)
    ln_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

// a, b (N,C) -> res (N,C) = a + b (may alias a or b); then the forward above on res
//
// Row by row, so the LayerNorm reads the row the add has just stored from cache instead
// of a second pass over the whole (N,C) from memory. The statistics are taken from the
// stored (rounded) sums, exactly as zeroc__cpu_add then zeroc__cpu_layernorm_forward.
ZEROC_CPU_HOT void zeroc__cpu_residual_layernorm_forward(float *res, float *out, float *mean,
                                                         float *rstd, const float *a,
                                                         const float *b, const float *weight,
                                                         const float *bias, int N, int C) {
#pragma omp parallel for if ((size_t)N * C > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t off = (size_t)n * C;
    float *x = res + off;
#pragma omp simd
    for (int c = 0; c < C; c++) x[c] = a[off + c] + b[off + c];
    ln_row(out + off, mean + n, rstd + n, x, weight, bias, C);
  }
}

// dinp (C) = res (or +0) + one row's input gradient; aw, ab (C) += its dweight and dbias
// terms when sums. Called with constant has_res and sums, so each use compiles to its own
// loop. Without res the base is +0, not nothing: a zeroed dinp += gradient turns a -0
// gradient into +0, and this must give that zeroed dinp's bits.
ZEROC_INL void ln_dinp_row(float *dx, const float *res, int has_res, const float *x, const float *d,
                           const float *weight, float m, float r, float mg, float mgx, double *aw,
                           double *ab, int sums, int C) {
#pragma omp simd
  for (int c = 0; c < C; c++) {
    const float xhat = (x[c] - m) * r;
    const float base = has_res ? res[c] : 0.0f;
    dx[c] = base + r * (d[c] * weight[c] - mg - xhat * mgx);
    if (sums) {
      aw[c] += (double)d[c] * xhat;
      ab[c] += d[c];
    }
  }
}

// dout (N,C), inp (N,C), weight (C), mean (N), rstd (N), dres (N,C) or NULL ->
// dinp (N,C) = dres (NULL: +0; dinp itself: +=) + input gradient, dweight (C) +=, dbias (C) +=
//
// With xhat = (x - mean) * rstd and g = dout * weight, per row:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// dres is read where the old dinp would be, so a residual's gradient needs no copy into
// dinp first (and a fresh gradient no memset). dweight and dbias are sums over rows.
// Each channel adds its rows in order, in double, whatever the threads: on one thread
// (and C <= ROW_MAX_C) in the rows' own pass (aw, ab on the stack: one read of the rows
// instead of two, 0.67x the time at C 256), otherwise in a second pass where each work
// item owns a block of channels (per-thread partial sums would be combined in an order
// that depends on the thread count). The two give the same bits.
ZEROC_CPU_HOT void zeroc__cpu_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                                 const float *dout, const float *inp,
                                                 const float *weight, const float *mean,
                                                 const float *rstd, int N, int C,
                                                 const float *dres) {
  const int par = (size_t)N * C > PAR_MIN && omp_get_max_threads() > 1;
  double sums[2 * ROW_MAX_C];
  double *aw = par || C > ROW_MAX_C ? NULL : sums, *ab = aw ? aw + C : NULL;
  if (aw) memset(aw, 0, 2 * (size_t)C * sizeof *aw);
#pragma omp parallel for if (par) schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t off = (size_t)n * C;
    const float *x = inp + off, *d = dout + off, *res = dres ? dres + off : NULL;
    float *dx = dinp + off;
    const float m = mean[n], r = rstd[n];
    double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int c = 0; c < C; c++) {
      const double g = (double)d[c] * weight[c];
      sg += g;
      sgx += g * ((x[c] - m) * r);
    }
    const float mg = (float)(sg / C), mgx = (float)(sgx / C);
    if (aw && res)
      ln_dinp_row(dx, res, 1, x, d, weight, m, r, mg, mgx, aw, ab, 1, C);
    else if (aw)
      ln_dinp_row(dx, NULL, 0, x, d, weight, m, r, mg, mgx, aw, ab, 1, C);
    else if (res)
      ln_dinp_row(dx, res, 1, x, d, weight, m, r, mg, mgx, NULL, NULL, 0, C);
    else
      ln_dinp_row(dx, NULL, 0, x, d, weight, m, r, mg, mgx, NULL, NULL, 0, C);
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
