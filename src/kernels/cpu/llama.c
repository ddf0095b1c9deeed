/*
 * kernels/cpu/llama.c - the kernels of Llama-family decoders: RMSNorm (and the residual
 * sum fused before it), rotary position embeddings in place on q and k, and the SwiGLU
 * gate. Rows split over threads; every sum over a row or a column runs in a fixed order
 * (double, `simd` lanes fixed by C alone), so results do not depend on the thread count.
 */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "kernels/rope.h"

#define PAR_MIN  16384 /* elements below which threading costs more than it saves */
#define CH_BLOCK 64    /* channels per dweight work item */

#define ZEROC_INL static inline __attribute__((always_inline))

/* ---- RMSNorm ------------------------------------------------------------------------ */

// x (C), weight (C) -> o (C) = x * rstd * weight, *rstd = 1 / sqrt(mean(x^2) + eps)
ZEROC_INL void rms_row(float *o, float *rstd, const float *x, const float *weight, float eps,
                       int C) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
  const float r = (float)(1.0 / sqrt(ss / C + (double)eps));
#pragma omp simd
  for (int c = 0; c < C; c++) o[c] = x[c] * r * weight[c];
  *rstd = r;
}

// inp (N,C), weight (C) -> out (N,C), rstd (N)
ZEROC_CPU_HOT void zeroc__cpu_rmsnorm_forward(float *out, float *rstd, const float *inp,
                                              const float *weight, float eps, int N, int C) {
#pragma omp parallel for if ((size_t)N * C > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++)
    rms_row(out + (size_t)n * C, rstd + n, inp + (size_t)n * C, weight, eps, C);
}

// a, b (N,C) -> res (N,C) = a + b (may alias a or b), then the forward above on res, row by
// row (the row the add stored is read back from cache): the bits of add + rmsnorm_forward
ZEROC_CPU_HOT void zeroc__cpu_residual_rmsnorm_forward(float *res, float *out, float *rstd,
                                                       const float *a, const float *b,
                                                       const float *weight, float eps, int N,
                                                       int C) {
#pragma omp parallel for if ((size_t)N * C > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t off = (size_t)n * C;
    float *x = res + off;
#pragma omp simd
    for (int c = 0; c < C; c++) x[c] = a[off + c] + b[off + c];
    rms_row(out + off, rstd + n, x, weight, eps, C);
  }
}

// dout, inp (N,C), weight (C), rstd (N), dres (N,C) or NULL -> dinp (N,C) = dres (NULL: +0;
// dinp itself: +=) + the input gradient; dweight (C) += sum over rows of dout * xhat
//
// With xhat = x * rstd and g = dout * weight, per row: dinp = rstd (g - xhat mean(g xhat)).
// dweight in a second pass where each work item owns a block of channels and adds its rows
// in order, in double (as the LayerNorm's backward: the bits do not depend on the threads).
ZEROC_CPU_HOT void zeroc__cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout,
                                               const float *inp, const float *weight,
                                               const float *rstd, int N, int C, const float *dres) {
  const int par = (size_t)N * C > PAR_MIN && omp_get_max_threads() > 1;
#pragma omp parallel for if (par) schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t off = (size_t)n * C;
    const float *x = inp + off, *d = dout + off, *res = dres ? dres + off : NULL;
    float *dx = dinp + off;
    const float r = rstd[n];
    double sgx = 0;
#pragma omp simd reduction(+ : sgx)
    for (int c = 0; c < C; c++) sgx += (double)d[c] * weight[c] * (x[c] * r);
    const float mgx = (float)(sgx / C);
    if (res) {
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] = res[c] + r * (d[c] * weight[c] - (x[c] * r) * mgx);
    } else { /* +0 base: a -0 gradient comes out +0, as a zeroed dinp += would give */
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] = 0.0f + r * (d[c] * weight[c] - (x[c] * r) * mgx);
    }
  }
  const int nblocks = (C + CH_BLOCK - 1) / CH_BLOCK;
#pragma omp parallel for if (par) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    const int c0 = blk * CH_BLOCK, nc = c0 + CH_BLOCK < C ? CH_BLOCK : C - c0;
    double bw[CH_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
      const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
      const float r = rstd[n];
#pragma omp simd
      for (int j = 0; j < nc; j++) bw[j] += (double)d[j] * (x[j] * r);
    }
    for (int j = 0; j < nc; j++) dweight[c0 + j] += (float)bw[j];
  }
}

/* ---- RoPE --------------------------------------------------------------------------- */

/* cos and sin of pos * inv_freq: the angle's product and its reduction to [-pi, pi] in
 * double, the functions in fp32 (the cuda twin does the same). */
ZEROC_INL void rope_cs(float *c, float *s, int32_t pos, float inv_freq) {
  const double two_pi = 6.283185307179586476925286766559;
  double a = (double)pos * inv_freq;
  a -= two_pi * nearbyint(a / two_pi);
  *c = cosf((float)a);
  *s = sinf((float)a);
}

// x (N rows ld apart; heads nh of HS at columns h*HS), pos (N), inv_freq (HS/2) -> x rotated
// in place: pair (i, i + HS/2) of every head of row n turns by pos[n] * inv_freq[i]
// (inverse: the backward, turning a gradient back by the same angle)
ZEROC_CPU_HOT void zeroc__cpu_rope(float *x, size_t ld, const int32_t *pos, const float *inv_freq,
                                   int N, int nh, int HS, int inverse) {
  const int H2 = HS / 2;
#pragma omp parallel for if ((size_t)N * nh * HS > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    float cs[ZEROC_ROPE_HS_MAX / 2], sn[ZEROC_ROPE_HS_MAX / 2];
    for (int i = 0; i < H2; i++) {
      rope_cs(&cs[i], &sn[i], pos[n], inv_freq[i]);
      if (inverse) sn[i] = -sn[i];
    }
    float *row = x + (size_t)n * ld;
    for (int h = 0; h < nh; h++) {
      float *x1 = row + (size_t)h * HS, *x2 = x1 + H2;
#pragma omp simd
      for (int i = 0; i < H2; i++) {
        const float a = x1[i], b = x2[i];
        x1[i] = a * cs[i] - b * sn[i];
        x2[i] = b * cs[i] + a * sn[i];
      }
    }
  }
}

/* ---- SwiGLU ------------------------------------------------------------------------- */

/* sigmoid through vmath.h's exp, which a `#pragma omp simd` loop vectorises (libm's expf
 * is a scalar call: it took a third of the SwiGLU's time); its tails: exp(-g) is +inf
 * above 88.3 (sigmoid 0) and 0 below -87.3 (sigmoid 1), NaN stays NaN */
ZEROC_INL float sigmoidf(float g) { return 1.0f / (1.0f + zeroc__expf(-g)); }

// gu (N,2F) = [gate | up] per row -> out (N,F) = silu(gate) * up
ZEROC_CPU_HOT void zeroc__cpu_swiglu_forward(float *out, const float *gu, int N, int F) {
#pragma omp parallel for if ((size_t)N * F > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *g = gu + (size_t)n * 2 * F, *u = g + F;
    float *o = out + (size_t)n * F;
#pragma omp simd
    for (int f = 0; f < F; f++) o[f] = g[f] * sigmoidf(g[f]) * u[f];
  }
}

// dout (N,F), gu (N,2F) -> dgu (N,2F) += [dout * up * silu'(gate) | dout * silu(gate)]
ZEROC_CPU_HOT void zeroc__cpu_swiglu_backward(float *dgu, const float *dout, const float *gu, int N,
                                              int F) {
#pragma omp parallel for if ((size_t)N * F > PAR_MIN) schedule(static)
  for (int n = 0; n < N; n++) {
    const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
    float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
#pragma omp simd
    for (int f = 0; f < F; f++) {
      const float s = sigmoidf(g[f]), silu = g[f] * s;
      dg[f] += d[f] * u[f] * (s * (1.0f + g[f] * (1.0f - s)));
      du[f] += d[f] * silu;
    }
  }
}
