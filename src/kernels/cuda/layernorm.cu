/*
 * kernels/cuda/layernorm.cu - LayerNorm forward (one warp per row, fp32 statistics)
 * and backward: dinp one warp per row; dweight and dbias as a deterministic two-pass
 * column reduction (per-group partial sums into the scratch, then a final pass that
 * adds the groups in a fixed order), so no float atomics and repeatable results.
 * The forward may first sum a residual into its input (res = a + b, stored, then the
 * LayerNorm of it); the backward's dinp may start from another gradient instead of its
 * own old value (dres: the residual's, or +0).
 */
#include "kernels/cuda/common.cuh"

#define LN_EPS   1e-5f
#define LN_WARPS 8 /* rows per block */

/* v (a pack of a) += the pack of b at [c, c+8), rounded to T and stored into res there:
 * what zeroc_k_add leaves in memory, so the statistics read the same values. */
template <typename T>
__device__ __forceinline__ void ln_add_pack(T *res, const T *b, size_t c, size_t n, bool vec,
                                            float v[8]) {
  float y[8];
  zc_load8(b, c, n, vec, y);
#pragma unroll
  for (int e = 0; e < 8; e++) v[e] = zc_f(zc_to<T>(v[e] + y[e])); /* past n: 0 */
  zc_store8(res, c, n, vec, v);
}

// inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N); with inp2 (N,C) (else
// NULL): res (N,C) = inp + inp2 first, and the LayerNorm is of res
template <typename T>
__global__ void ln_forward_kernel(T *out, float *mean, float *rstd, T *res, const T *inp,
                                  const T *inp2, const T *weight, const T *bias, int N, int C,
                                  bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const T *x = inp + off;
  T *y = out + off;
  float v[8];
  float sum = 0.0f;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    zc_load8(x, c, C, vec, v);
    if (inp2) ln_add_pack(res + off, inp2 + off, c, C, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) sum += v[e]; /* lanes past C read as 0 */
  }
  if (inp2) x = res + off; /* each lane reads back only what it stored */
  const float m = zc_warp_sum(sum) / (float)C;
  /* second pass over the row (from cache) for a variance free of cancellation */
  float sq = 0.0f;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    zc_load8(x, c, C, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float d = v[e] - m;
      if (c + e < C) sq += d * d;
    }
  }
  const float r = 1.0f / sqrtf(zc_warp_sum(sq) / (float)C + LN_EPS);
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
  for (int c = lane * 8; c < C; c += 32 * 8) {
    float w[8], b[8], o[8];
    zc_load8(x, c, C, vec, v);
    zc_load8(weight, c, C, vec, w);
    zc_load8(bias, c, C, vec, b);
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] = (v[e] - m) * r * w[e] + b[e];
    zc_store8(y, c, C, vec, o);
  }
}

/* Rows of up to LN_REG_PACKS x 256 columns (C 2048) are held in registers: each lane's
 * NP packs of 8 are all loaded before the first is used, so a warp has its whole row in
 * flight at once. The loop kernel above issues one pack per lane per iteration and waits
 * on it (its first pass ran at the latency of memory: ~50% of the copy rate at C 768 on
 * an H100) and reads the row three times. Sums run in the loop kernel's order (packs in
 * order, then the warp's tree), so both give the same bits. */
#define LN_REG_PACKS 8

template <typename T, int NP>
__global__ void ln_forward_rows_kernel(T *out, float *mean, float *rstd, T *res, const T *inp,
                                       const T *inp2, const T *weight, const T *bias, int N, int C,
                                       bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const T *x = inp + off;
  T *y = out + off;
  float v[NP][8];
#pragma unroll
  for (int p = 0; p < NP; p++) zc_load8(x, (size_t)(p * 32 + lane) * 8, C, vec, v[p]);
  if (inp2)
#pragma unroll
    for (int p = 0; p < NP; p++)
      ln_add_pack(res + off, inp2 + off, (size_t)(p * 32 + lane) * 8, C, vec, v[p]);
  float sum = 0.0f;
#pragma unroll
  for (int p = 0; p < NP; p++)
#pragma unroll
    for (int e = 0; e < 8; e++) sum += v[p][e]; /* past C: 0 */
  const float m = zc_warp_sum(sum) / (float)C;
  float sq = 0.0f;
#pragma unroll
  for (int p = 0; p < NP; p++)
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const float d = v[p][e] - m;
      if ((p * 32 + lane) * 8 + e < C) sq += d * d;
    }
  const float r = 1.0f / sqrtf(zc_warp_sum(sq) / (float)C + LN_EPS);
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
#pragma unroll
  for (int p = 0; p < NP; p++) {
    const size_t c = (size_t)(p * 32 + lane) * 8;
    if (c >= (size_t)C) break;
    float w[8], b[8], o[8];
    zc_load8(weight, c, C, vec, w);
    zc_load8(bias, c, C, vec, b);
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] = (v[p][e] - m) * r * w[e] + b[e];
    zc_store8(y, c, C, vec, o);
  }
}

/* The pack of dinp's base at [c, c+8): dres's (which may be dinp itself: +=) or +0 (as a
 * zeroed dinp, so a -0 gradient still comes out +0). */
template <typename T>
__device__ __forceinline__ void ln_base_pack(const T *dres, size_t c, size_t n, bool vec,
                                             float d[8]) {
  if (dres) {
    zc_load8(dres, c, n, vec, d);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) d[e] = 0.0f;
}

// dout (N,C), inp (N,C), weight (C), mean, rstd (N), dres (N,C) or NULL
// -> dinp (N,C) = dres (NULL: +0) + the input gradient
template <typename T>
__global__ void ln_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *weight,
                                        const float *mean, const float *rstd, const T *dres, int N,
                                        int C, bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const float m = mean[row], r = rstd[row];
  float x[8], g[8], w[8];
  /* dnorm = weight * dout; the row needs mean(dnorm) and mean(dnorm * norm) */
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    zc_load8(inp + off, c, C, vec, x);
    zc_load8(dout + off, c, C, vec, g);
    zc_load8(weight, c, C, vec, w);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float dnorm = w[e] * g[e]; /* 0 past C */
      s1 += dnorm;
      s2 += dnorm * (x[e] - m) * r;
    }
  }
  s1 = zc_warp_sum(s1) / (float)C;
  s2 = zc_warp_sum(s2) / (float)C;
  for (int c = lane * 8; c < C; c += 32 * 8) {
    float d[8];
    zc_load8(inp + off, c, C, vec, x);
    zc_load8(dout + off, c, C, vec, g);
    zc_load8(weight, c, C, vec, w);
    ln_base_pack(dres ? dres + off : nullptr, c, C, vec, d);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float norm = (x[e] - m) * r;
      d[e] += (w[e] * g[e] - s1 - norm * s2) * r;
    }
    zc_store8(dinp + off, c, C, vec, d);
  }
}

/* The same with the row's inp and dout in registers (NP packs of 8 per lane, as loaded,
 * C up to ln_reg_packs_bwd<T>() x 256): read once instead of twice, all in flight at once.
 * bf16 rows go to C 2048 (a pack is 4 registers): the 1.3B GPT's LayerNorm backward read
 * its rows twice before, 46-58 us each on an H200 (ncu, 2026-11-28). */
template <typename T> constexpr int ln_reg_packs_bwd() { return sizeof(T) == 2 ? 8 : 4; }

template <typename T, int NP>
__global__ void ln_backward_dinp_rows_kernel(T *dinp, const T *dout, const T *inp, const T *weight,
                                             const float *mean, const float *rstd, const T *dres,
                                             int N, int C, bool vec) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
  if (row >= N) return;
  const size_t off = (size_t)row * C;
  const float m = mean[row], r = rstd[row];
  zc_raw8<T> xr[NP], gr[NP];
#pragma unroll
  for (int p = 0; p < NP; p++) {
    const size_t c = (size_t)(p * 32 + lane) * 8;
    zc_raw_load8(inp + off, c, C, vec, xr[p]);
    zc_raw_load8(dout + off, c, C, vec, gr[p]);
  }
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int p = 0; p < NP; p++) {
    float w[8], x[8], g[8];
    zc_load8(weight, (size_t)(p * 32 + lane) * 8, C, vec, w);
    zc_raw_unpack8(xr[p], x);
    zc_raw_unpack8(gr[p], g);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const float dnorm = w[e] * g[e]; /* 0 past C */
      s1 += dnorm;
      s2 += dnorm * (x[e] - m) * r;
    }
  }
  s1 = zc_warp_sum(s1) / (float)C;
  s2 = zc_warp_sum(s2) / (float)C;
#pragma unroll
  for (int p = 0; p < NP; p++) {
    const size_t c = (size_t)(p * 32 + lane) * 8;
    if (c >= (size_t)C) break;
    float w[8], d[8], x[8], g[8];
    zc_load8(weight, c, C, vec, w);
    zc_raw_unpack8(xr[p], x);
    zc_raw_unpack8(gr[p], g);
    ln_base_pack(dres ? dres + off : nullptr, c, C, vec, d);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const float norm = (x[e] - m) * r;
      d[e] += (w[e] * g[e] - s1 - norm * s2) * r;
    }
    zc_store8(dinp + off, c, C, vec, d);
  }
}

#define LNP_COLS 32
#define LNP_ROWS 8

// dout, inp (N,C), mean, rstd (N) -> part (groups, 2C): [sum dout*norm | sum dout] per group
template <typename T>
__global__ void ln_backward_partial_kernel(float *part, const T *dout, const T *inp,
                                           const float *mean, const float *rstd, int N, int C,
                                           int rows_per_group) {
  __shared__ float sw[LNP_ROWS][LNP_COLS + 1], sb[LNP_ROWS][LNP_COLS + 1];
  const int c = blockIdx.x * LNP_COLS + threadIdx.x, g = blockIdx.y;
  const int r0 = g * rows_per_group, r1 = min(N, r0 + rows_per_group);
  float aw = 0.0f, ab = 0.0f;
  if (c < C)
    for (int r = r0 + threadIdx.y; r < r1; r += LNP_ROWS) {
      const size_t i = (size_t)r * C + c;
      float go = zc_f(dout[i]);
      aw += go * (zc_f(inp[i]) - mean[r]) * rstd[r];
      ab += go;
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tw = 0.0f, tb = 0.0f;
#pragma unroll
    for (int y = 0; y < LNP_ROWS; y++) {
      tw += sw[y][threadIdx.x];
      tb += sb[y][threadIdx.x];
    }
    part[(size_t)g * 2 * C + c] = tw;
    part[(size_t)g * 2 * C + C + c] = tb;
  }
}

// part (groups, 2C) -> dweight (C) +=, dbias (C) +=
template <typename T>
__global__ void ln_backward_final_kernel(T *dweight, T *dbias, const float *part, int groups,
                                         int C) {
  __shared__ float sh[ZC_COLSUM_Y][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const float tw = zc_column_sum(part, groups, (size_t)2 * C, c, c < C, sh);
  const float tb = zc_column_sum(part + C, groups, (size_t)2 * C, c, c < C, sh);
  if (threadIdx.y != 0 || c >= C) return;
  dweight[c] = zc_to<T>(zc_f(dweight[c]) + tw);
  dbias[c] = zc_to<T>(zc_f(dbias[c]) + tb);
}

/* The kernel for np packs of 8 per lane: NP counts up from 1 to the kernel's limit; past
 * it, false (the caller runs the loop kernel). */
template <typename T, int NP>
static bool ln_forward_rows(int np, cudaStream_t st, dim3 grid, dim3 block, T *out, float *mean,
                            float *rstd, T *res, const T *inp, const T *inp2, const T *weight,
                            const T *bias, int N, int C, bool vec) {
  if (np == NP) {
    ln_forward_rows_kernel<T, NP>
        <<<grid, block, 0, st>>>(out, mean, rstd, res, inp, inp2, weight, bias, N, C, vec);
    return true;
  }
  if constexpr (NP < LN_REG_PACKS)
    return ln_forward_rows<T, NP + 1>(np, st, grid, block, out, mean, rstd, res, inp, inp2, weight,
                                      bias, N, C, vec);
  return false;
}

template <typename T, int NP>
static bool ln_dinp_rows(int np, cudaStream_t st, dim3 grid, dim3 block, T *dinp, const T *dout,
                         const T *inp, const T *weight, const float *mean, const float *rstd,
                         const T *dres, int N, int C, bool vec) {
  if (np == NP) {
    ln_backward_dinp_rows_kernel<T, NP>
        <<<grid, block, 0, st>>>(dinp, dout, inp, weight, mean, rstd, dres, N, C, vec);
    return true;
  }
  if constexpr (NP < ln_reg_packs_bwd<T>())
    return ln_dinp_rows<T, NP + 1>(np, st, grid, block, dinp, dout, inp, weight, mean, rstd, dres,
                                   N, C, vec);
  return false;
}

// res and inp2 both NULL (the plain LayerNorm) or both set (res = inp + inp2 first)
template <typename T>
static zeroc_result_t ln_forward(cudaStream_t st, T *out, float *mean, float *rstd, T *res,
                                 const T *inp, const T *inp2, const T *weight, const T *bias, int N,
                                 int C) {
  const bool vec = C % 8 == 0 && zc_aligned16(out) && zc_aligned16(inp) && zc_aligned16(weight) &&
                   zc_aligned16(bias) && zc_aligned16(res) && zc_aligned16(inp2);
  dim3 grid((N + LN_WARPS - 1) / LN_WARPS), block(32 * LN_WARPS);
  if (ln_forward_rows<T, 1>((C + 255) / 256, st, grid, block, out, mean, rstd, res, inp, inp2,
                            weight, bias, N, C, vec)) {
    ZC_LAUNCHED("ln_forward_rows_kernel", grid, block, 0);
    return ZEROC_OK;
  }
  ln_forward_kernel<T>
      <<<grid, block, 0, st>>>(out, mean, rstd, res, inp, inp2, weight, bias, N, C, vec);
  ZC_LAUNCHED("ln_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

template <typename T>
static zeroc_result_t ln_backward(zeroc_kernels_t *k, cudaStream_t st, T *dinp, T *dweight,
                                  T *dbias, const T *dout, const T *inp, const T *weight,
                                  const float *mean, const float *rstd, const T *dres, int N,
                                  int C) {
  int rpg = 0, groups = 0;
  ZEROC_CHECK(zc_row_groups(k, "layernorm_backward", N, 2 * (size_t)C, &rpg, &groups));
  const bool vec = C % 8 == 0 && zc_aligned16(dinp) && zc_aligned16(dout) && zc_aligned16(inp) &&
                   zc_aligned16(weight) && zc_aligned16(dres);
  dim3 grid1((N + LN_WARPS - 1) / LN_WARPS), block1(32 * LN_WARPS);
  if (ln_dinp_rows<T, 1>((C + 255) / 256, st, grid1, block1, dinp, dout, inp, weight, mean, rstd,
                         dres, N, C, vec)) {
    ZC_LAUNCHED("ln_backward_dinp_rows_kernel", grid1, block1, 0);
  } else {
    ln_backward_dinp_kernel<T>
        <<<grid1, block1, 0, st>>>(dinp, dout, inp, weight, mean, rstd, dres, N, C, vec);
    ZC_LAUNCHED("ln_backward_dinp_kernel", grid1, block1, 0);
  }
  float *part = (float *)zc_state(k)->scratch;
  dim3 grid2((C + LNP_COLS - 1) / LNP_COLS, groups), block2(LNP_COLS, LNP_ROWS);
  ln_backward_partial_kernel<T><<<grid2, block2, 0, st>>>(part, dout, inp, mean, rstd, N, C, rpg);
  ZC_LAUNCHED("ln_backward_partial_kernel", grid2, block2, 0);
  dim3 grid3((C + 31) / 32), block3(32, ZC_COLSUM_Y);
  ln_backward_final_kernel<T><<<grid3, block3, 0, st>>>(dweight, dbias, part, groups, C);
  ZC_LAUNCHED("ln_backward_final_kernel", grid3, block3, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                         void *out, float *mean, float *rstd,
                                                         const void *inp, const void *weight,
                                                         const void *bias, int N, int C) {
  ZC_NONNULL("layernorm_forward", out);
  ZC_NONNULL("layernorm_forward", inp);
  ZC_NONNULL("layernorm_forward", weight);
  ZC_NONNULL("layernorm_forward", bias);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return ln_forward(st, (bf16 *)out, mean, rstd, (bf16 *)nullptr, (const bf16 *)inp,
                      (const bf16 *)nullptr, (const bf16 *)weight, (const bf16 *)bias, N, C);
  return ln_forward(st, (float *)out, mean, rstd, (float *)nullptr, (const float *)inp,
                    (const float *)nullptr, (const float *)weight, (const float *)bias, N, C);
}

extern "C" zeroc_result_t
zeroc_i_cuda_residual_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res, void *out,
                                        float *mean, float *rstd, const void *a, const void *b,
                                        const void *weight, const void *bias, int N, int C) {
  ZC_NONNULL("residual_layernorm_forward", res);
  ZC_NONNULL("residual_layernorm_forward", out);
  ZC_NONNULL("residual_layernorm_forward", a);
  ZC_NONNULL("residual_layernorm_forward", b);
  ZC_NONNULL("residual_layernorm_forward", weight);
  ZC_NONNULL("residual_layernorm_forward", bias);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return ln_forward(st, (bf16 *)out, mean, rstd, (bf16 *)res, (const bf16 *)a, (const bf16 *)b,
                      (const bf16 *)weight, (const bf16 *)bias, N, C);
  return ln_forward(st, (float *)out, mean, rstd, (float *)res, (const float *)a, (const float *)b,
                    (const float *)weight, (const float *)bias, N, C);
}

extern "C" zeroc_result_t zeroc_i_cuda_layernorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                          void *dinp, void *dweight, void *dbias,
                                                          const void *dout, const void *inp,
                                                          const void *weight, const float *mean,
                                                          const float *rstd, int N, int C,
                                                          const void *dres) {
  ZC_NONNULL("layernorm_backward", dinp);
  ZC_NONNULL("layernorm_backward", dweight);
  ZC_NONNULL("layernorm_backward", dbias);
  ZC_NONNULL("layernorm_backward", dout);
  ZC_NONNULL("layernorm_backward", inp);
  ZC_NONNULL("layernorm_backward", weight);
  ZC_NONNULL("layernorm_backward", mean);
  ZC_NONNULL("layernorm_backward", rstd);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return ln_backward(k, st, (bf16 *)dinp, (bf16 *)dweight, (bf16 *)dbias, (const bf16 *)dout,
                       (const bf16 *)inp, (const bf16 *)weight, mean, rstd, (const bf16 *)dres, N,
                       C);
  return ln_backward(k, st, (float *)dinp, (float *)dweight, (float *)dbias, (const float *)dout,
                     (const float *)inp, (const float *)weight, mean, rstd, (const float *)dres, N,
                     C);
}
