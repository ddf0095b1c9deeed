/*
 * kernels/cuda/llama.cu - the Llama-family kernels (kernels/llama_kernels.h): RMSNorm
 * forward (one warp per row, fp32 statistics, optionally after the residual sum) and
 * backward (dinp one warp per row; dweight a deterministic two-pass column reduction
 * through the scratch, as the LayerNorm's), RoPE in place on q and k, and SwiGLU.
 * Storage in k->dtype (fp32 or bf16), arithmetic in fp32.
 */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/rope.h"

#define RMS_WARPS  8   /* rows per block */
#define EW_THREADS 256 /* threads per block of the elementwise kernels */

/* v (a pack of a) += the pack of b at [c, c+8), rounded to T and stored into res there:
 * what zeroc_k_add leaves in memory, so the statistics read the same values. */
template <typename T>
__device__ __forceinline__ void rms_add_pack(T *res, const T *b, size_t c, size_t n, bool vec,
                                             float v[8]) {
  float y[8];
  zc_load8(b, c, n, vec, y);
#pragma unroll
  for (int e = 0; e < 8; e++) v[e] = zc_f(zc_to<T>(v[e] + y[e])); /* past n: 0 */
  zc_store8(res, c, n, vec, v);
}

// inp (N,C), weight (C) -> out (N,C), rstd (N); with inp2 (N,C) (else NULL): res (N,C) =
// inp + inp2 first, and the RMSNorm is of res
template <typename T>
__global__ void rms_forward_kernel(T *out, float *rstd, T *res, const T *inp, const T *inp2,
                                   const T *weight, float eps, int N, int C, bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const T *x = inp + off;
  float v[8], ss = 0.0f;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    zc_load8(x, c, C, vec, v);
    if (inp2) rms_add_pack(res + off, inp2 + off, c, C, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) ss += v[e] * v[e]; /* lanes past C read as 0 */
  }
  if (inp2) x = res + off; /* each lane reads back only what it stored */
  const float r = 1.0f / sqrtf(zc_warp_sum(ss) / (float)C + eps);
  if (lane == 0 && rstd) rstd[row] = r;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    float w[8], o[8];
    zc_load8(x, c, C, vec, v);
    zc_load8(weight, c, C, vec, w);
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] = v[e] * r * w[e];
    zc_store8(out + off, c, C, vec, o);
  }
}

// dout, inp (N,C), weight (C), rstd (N), dres (N,C) or NULL -> dinp (N,C) = dres (NULL:
// +0) + rstd (dout weight - xhat mean(dout weight xhat))
template <typename T>
__global__ void rms_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *weight,
                                         const float *rstd, const T *dres, int N, int C, bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const float r = rstd[row];
  float x[8], g[8], w[8], s = 0.0f;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    zc_load8(inp + off, c, C, vec, x);
    zc_load8(dout + off, c, C, vec, g);
    zc_load8(weight, c, C, vec, w);
#pragma unroll
    for (int e = 0; e < 8; e++) s += w[e] * g[e] * (x[e] * r); /* 0 past C */
  }
  const float m = zc_warp_sum(s) / (float)C;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    float d[8];
    zc_load8(inp + off, c, C, vec, x);
    zc_load8(dout + off, c, C, vec, g);
    zc_load8(weight, c, C, vec, w);
    if (dres)
      zc_load8(dres + off, c, C, vec, d);
    else
#pragma unroll
      for (int e = 0; e < 8; e++) d[e] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) d[e] += r * (w[e] * g[e] - (x[e] * r) * m);
    zc_store8(dinp + off, c, C, vec, d);
  }
}

#define RMSP_COLS 32
#define RMSP_ROWS 8

// dout, inp (N,C), rstd (N) -> part (groups, C): sum of dout * inp * rstd per row group
template <typename T>
__global__ void rms_backward_partial_kernel(float *part, const T *dout, const T *inp,
                                            const float *rstd, int N, int C, int rows_per_group) {
  __shared__ float sw[RMSP_ROWS][RMSP_COLS + 1];
  const int c = blockIdx.x * RMSP_COLS + threadIdx.x, g = blockIdx.y;
  const int r0 = g * rows_per_group, r1 = min(N, r0 + rows_per_group);
  float aw = 0.0f;
  if (c < C)
    for (int r = r0 + threadIdx.y; r < r1; r += RMSP_ROWS) {
      const size_t i = (size_t)r * C + c;
      aw += zc_f(dout[i]) * (zc_f(inp[i]) * rstd[r]);
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.0f;
#pragma unroll
    for (int y = 0; y < RMSP_ROWS; y++) t += sw[y][threadIdx.x];
    part[(size_t)g * C + c] = t;
  }
}

// part (groups, C) -> dweight (C) += the groups' sums, in group order
template <typename T>
__global__ void rms_backward_final_kernel(T *dweight, const float *part, int groups, int C) {
  __shared__ float sh[ZC_COLSUM_Y][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const float t = zc_column_sum(part, groups, (size_t)C, c, c < C, sh);
  if (threadIdx.y == 0 && c < C) dweight[c] = zc_to<T>(zc_f(dweight[c]) + t);
}

template <typename T>
static zeroc_result_t rms_forward(cudaStream_t st, T *res, T *out, float *rstd, const T *a,
                                  const T *b, const T *weight, float eps, int N, int C) {
  const bool vec = C % 8 == 0 && zc_aligned16(out) && zc_aligned16(a) && zc_aligned16(weight) &&
                   zc_aligned16(res) && zc_aligned16(b);
  dim3 grid((N + RMS_WARPS - 1) / RMS_WARPS), block(32 * RMS_WARPS);
  rms_forward_kernel<T><<<grid, block, 0, st>>>(out, rstd, res, a, b, weight, eps, N, C, vec);
  ZC_LAUNCHED("rms_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

template <typename T>
static zeroc_result_t rms_backward(zeroc_kernels_t *k, cudaStream_t st, T *dinp, T *dweight,
                                   const T *dout, const T *inp, const T *weight, const float *rstd,
                                   const T *dres, int N, int C) {
  int rpg = 0, groups = 0;
  ZEROC_CHECK(zc_row_groups(k, "rmsnorm_backward", N, (size_t)C, &rpg, &groups));
  const bool vec = C % 8 == 0 && zc_aligned16(dinp) && zc_aligned16(dout) && zc_aligned16(inp) &&
                   zc_aligned16(weight) && zc_aligned16(dres);
  dim3 grid1((N + RMS_WARPS - 1) / RMS_WARPS), block1(32 * RMS_WARPS);
  rms_backward_dinp_kernel<T>
      <<<grid1, block1, 0, st>>>(dinp, dout, inp, weight, rstd, dres, N, C, vec);
  ZC_LAUNCHED("rms_backward_dinp_kernel", grid1, block1, 0);
  float *part = (float *)zc_state(k)->scratch;
  dim3 grid2((C + RMSP_COLS - 1) / RMSP_COLS, groups), block2(RMSP_COLS, RMSP_ROWS);
  rms_backward_partial_kernel<T><<<grid2, block2, 0, st>>>(part, dout, inp, rstd, N, C, rpg);
  ZC_LAUNCHED("rms_backward_partial_kernel", grid2, block2, 0);
  dim3 grid3((C + 31) / 32), block3(32, ZC_COLSUM_Y);
  rms_backward_final_kernel<T><<<grid3, block3, 0, st>>>(dweight, part, groups, C);
  ZC_LAUNCHED("rms_backward_final_kernel", grid3, block3, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *res, void *out, float *rstd,
                                                       const void *a, const void *b,
                                                       const void *weight, float eps, int N,
                                                       int C) {
  ZC_NONNULL("rmsnorm_forward", out);
  ZC_NONNULL("rmsnorm_forward", a);
  ZC_NONNULL("rmsnorm_forward", weight);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return rms_forward(st, (bf16 *)res, (bf16 *)out, rstd, (const bf16 *)a, (const bf16 *)b,
                       (const bf16 *)weight, eps, N, C);
  return rms_forward(st, (float *)res, (float *)out, rstd, (const float *)a, (const float *)b,
                     (const float *)weight, eps, N, C);
}

extern "C" zeroc_result_t zeroc_i_cuda_rmsnorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                        void *dinp, void *dweight, const void *dout,
                                                        const void *inp, const void *weight,
                                                        const float *rstd, int N, int C,
                                                        const void *dres) {
  ZC_NONNULL("rmsnorm_backward", dinp);
  ZC_NONNULL("rmsnorm_backward", dweight);
  ZC_NONNULL("rmsnorm_backward", dout);
  ZC_NONNULL("rmsnorm_backward", inp);
  ZC_NONNULL("rmsnorm_backward", weight);
  ZC_NONNULL("rmsnorm_backward", rstd);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return rms_backward(k, st, (bf16 *)dinp, (bf16 *)dweight, (const bf16 *)dout, (const bf16 *)inp,
                        (const bf16 *)weight, rstd, (const bf16 *)dres, N, C);
  return rms_backward(k, st, (float *)dinp, (float *)dweight, (const float *)dout,
                      (const float *)inp, (const float *)weight, rstd, (const float *)dres, N, C);
}

/* ---- RoPE --------------------------------------------------------------------------- */

/* The inverse frequencies, by value (1 KiB of parameters at most). */
typedef struct {
  float f[ZEROC_ROPE_HS_MAX / 2];
} rope_freq_t;

// x (N rows ld apart), pos (N) -> pair (i, i + HS/2) of head h of row n turned by pos[n] f[i]
// (by minus that when inverse); one thread per pair, grid-striding. The angle is reduced in
// double and its cos and sin taken in fp32, as the cpu twin does.
template <typename T>
__global__ void rope_kernel(T *x, size_t ld, const int32_t *pos, rope_freq_t fr, int N, int nh,
                            int HS, bool inverse) {
  const int H2 = HS / 2;
  const size_t total = (size_t)N * nh * H2, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int i = (int)(e % H2), h = (int)(e / H2 % nh);
    const size_t n = e / H2 / nh;
    const double two_pi = 6.283185307179586476925286766559;
    double a = (double)pos[n] * fr.f[i];
    a -= two_pi * rint(a / two_pi);
    const float c = cosf((float)a), s = inverse ? -sinf((float)a) : sinf((float)a);
    T *x1 = x + n * ld + (size_t)h * HS + i, *x2 = x1 + H2;
    const float u = zc_f(*x1), v = zc_f(*x2);
    *x1 = zc_to<T>(u * c - v * s);
    *x2 = zc_to<T>(v * c + u * s);
  }
}

/* Blocks for `total` elements, at most 32 per multiprocessor (then grid-striding). */
static dim3 ew_grid(zeroc_kernels_t *k, size_t total) {
  const size_t blocks = (total + EW_THREADS - 1) / EW_THREADS, cap = (size_t)zc_state(k)->sms * 32;
  return dim3((unsigned)(blocks < cap ? blocks : cap));
}

extern "C" zeroc_result_t zeroc_i_cuda_rope(zeroc_kernels_t *k, zeroc_stream_t *s, void *x,
                                            size_t ld, const int32_t *pos, const float *inv_freq,
                                            int N, int nh, int HS, int inverse) {
  ZC_NONNULL("rope", x);
  ZC_NONNULL("rope", pos);
  rope_freq_t fr;
  for (int i = 0; i < HS / 2; i++) fr.f[i] = inv_freq[i];
  cudaStream_t st = zc_stream(k, s);
  const dim3 grid = ew_grid(k, (size_t)N * nh * (HS / 2)), block(EW_THREADS);
  if (k->dtype == ZEROC_BF16)
    rope_kernel<bf16><<<grid, block, 0, st>>>((bf16 *)x, ld, pos, fr, N, nh, HS, inverse != 0);
  else
    rope_kernel<float><<<grid, block, 0, st>>>((float *)x, ld, pos, fr, N, nh, HS, inverse != 0);
  ZC_LAUNCHED("rope_kernel", grid, block, 0);
  return ZEROC_OK;
}

/* ---- SwiGLU ------------------------------------------------------------------------- */

__device__ __forceinline__ float rms_sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// gu (N,2F) = [gate | up] -> out (N,F) = silu(gate) up; with dout (backward): dgu (N,2F) +=
// [dout up silu'(gate) | dout silu(gate)]
template <typename T>
__global__ void swiglu_kernel(T *out, T *dgu, const T *dout, const T *gu, int N, int F) {
  const size_t total = (size_t)N * F, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t n = e / F, f = e % F, gi = n * 2 * F + f, ui = gi + F;
    const float g = zc_f(gu[gi]), u = zc_f(gu[ui]), sg = rms_sigmoid(g);
    if (!dout) {
      out[e] = zc_to<T>(g * sg * u);
      continue;
    }
    const float d = zc_f(dout[e]);
    dgu[gi] = zc_to<T>(zc_f(dgu[gi]) + d * u * (sg * (1.0f + g * (1.0f - sg))));
    dgu[ui] = zc_to<T>(zc_f(dgu[ui]) + d * (g * sg));
  }
}

template <typename T>
static zeroc_result_t swiglu(zeroc_kernels_t *k, zeroc_stream_t *s, T *out, T *dgu, const T *dout,
                             const T *gu, int N, int F) {
  const dim3 grid = ew_grid(k, (size_t)N * F), block(EW_THREADS);
  swiglu_kernel<T><<<grid, block, 0, zc_stream(k, s)>>>(out, dgu, dout, gu, N, F);
  ZC_LAUNCHED("swiglu_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_swiglu_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                      void *out, const void *gu, int N, int F) {
  ZC_NONNULL("swiglu_forward", out);
  ZC_NONNULL("swiglu_forward", gu);
  if (k->dtype == ZEROC_BF16)
    return swiglu<bf16>(k, s, (bf16 *)out, nullptr, nullptr, (const bf16 *)gu, N, F);
  return swiglu<float>(k, s, (float *)out, nullptr, nullptr, (const float *)gu, N, F);
}

extern "C" zeroc_result_t zeroc_i_cuda_swiglu_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *dgu, const void *dout, const void *gu,
                                                       int N, int F) {
  ZC_NONNULL("swiglu_backward", dgu);
  ZC_NONNULL("swiglu_backward", dout);
  ZC_NONNULL("swiglu_backward", gu);
  if (k->dtype == ZEROC_BF16)
    return swiglu<bf16>(k, s, nullptr, (bf16 *)dgu, (const bf16 *)dout, (const bf16 *)gu, N, F);
  return swiglu<float>(k, s, nullptr, (float *)dgu, (const float *)dout, (const float *)gu, N, F);
}
