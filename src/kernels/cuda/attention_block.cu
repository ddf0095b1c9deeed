/*
 * kernels/cuda/attention_block.cu - the attention pieces of context parallelism
 * (kernels/types.h: zeroc_attn_block_t): one (query block, key block) pair forward, the
 * log-sum-exp merge, the pair's backward, and strided row copies.
 *
 * One warp per row: lane l holds head dimensions l, l+32, .. (head size <= 128), and
 * dot products reduce over the warp with shuffles in a fixed order. The backward is
 * deterministic without atomics, like attention.cu: one kernel per key row walks the
 * query rows and owns its dk, dv; another per query row walks the keys and owns its dq.
 * Plain fp32 arithmetic (no shared-memory tiling): the ring calls these on c x c
 * blocks, and exactness against the cpu twin matters more here than speed.
 */
#include <math.h>

#include "kernels/cuda/common.cuh"

#define AB_HS_MAX 128
#define AB_PER    (AB_HS_MAX / 32) /* head dimensions per lane */

/* This lane's head dimensions of a row (0 past HS). */
template <typename T>
__device__ __forceinline__ void ab_load(float x[AB_PER], const T *row, int HS, int lane) {
#pragma unroll
  for (int u = 0; u < AB_PER; u++) {
    const int d = lane + 32 * u;
    x[u] = d < HS ? zc_f(row[d]) : 0.0f;
  }
}
__device__ __forceinline__ float ab_dot(const float a[AB_PER], const float b[AB_PER]) {
  float s = 0.0f;
#pragma unroll
  for (int u = 0; u < AB_PER; u++) s += a[u] * b[u];
  return zc_warp_sum(s);
}

/* The mask word of (b, h, query position) and whether key position kp is kept. */
__device__ __forceinline__ float ab_mask(const zeroc_dropout_t &dp, bool dr, uint64_t rk,
                                         int64_t kp, uint32_t thr, float dsc) {
  if (!dr) return 1.0f;
  return zeroc_i_dropout_bits(rk, (uint32_t)kp) >= thr ? dsc : 0.0f;
}

// q, k, v -> pout (B,Tq,NH*HS), plse (B,NH,Tq); grid (Tq, NH, B), one warp
template <typename T>
__global__ void block_forward_kernel(T *pout, float *plse, const T *q, const T *k, const T *v,
                                     zeroc_attn_block_t a, float scale, zeroc_dropout_t dp,
                                     bool dr) {
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
  const int HS = a.HS;
  float qi[AB_PER], o[AB_PER], kj[AB_PER], vj[AB_PER];
  ab_load(qi, q + b * a.q_b + (size_t)i * a.q_t + (size_t)h * HS, HS, lane);
#pragma unroll
  for (int u = 0; u < AB_PER; u++) o[u] = 0.0f;
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(dp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(dp.p) : 1.0f;
  const uint64_t rk =
      dr ? zeroc_i_dropout_row_key(dp.key, zeroc_i_dropout_row_att(&dp, b, h, a.q_pos + i)) : 0;
  float m = -INFINITY, l = 0.0f;
  const int jend = a.causal ? i + 1 : a.Tk;
  for (int j = 0; j < jend; j++) {
    const size_t kvo = b * a.kv_b + (size_t)j * a.kv_t + (size_t)h * HS;
    ab_load(kj, k + kvo, HS, lane);
    ab_load(vj, v + kvo, HS, lane);
    const float s = ab_dot(qi, kj) * scale;
    if (s > m) {
      const float r = expf(m - s);
      l *= r;
#pragma unroll
      for (int u = 0; u < AB_PER; u++) o[u] *= r;
      m = s;
    }
    float p = expf(s - m);
    l += p;
    p *= ab_mask(dp, dr, rk, a.k_pos + j, thr, dsc);
#pragma unroll
    for (int u = 0; u < AB_PER; u++) o[u] += p * vj[u];
  }
  const float il = 1.0f / l;
  T *orow = pout + ((size_t)b * a.Tq + i) * ((size_t)a.NH * HS) + (size_t)h * HS;
#pragma unroll
  for (int u = 0; u < AB_PER; u++) {
    const int d = lane + 32 * u;
    if (d < HS) orow[d] = zc_to<T>(o[u] * il);
  }
  if (lane == 0) plse[((size_t)b * a.NH + h) * a.Tq + i] = m + logf(l);
}

// (out, lse) <- merged with (pout, plse); grid (Tq, NH, B), one warp
template <typename T>
__global__ void merge_kernel(T *out, float *lse, const T *pout, const float *plse,
                             zeroc_attn_block_t a, int first) {
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x, HS = a.HS;
  T *o = out + b * a.o_b + (size_t)i * a.o_t + (size_t)h * HS;
  const T *po = pout + ((size_t)b * a.Tq + i) * ((size_t)a.NH * HS) + (size_t)h * HS;
  float *L = lse + b * a.l_b + h * a.l_h + i;
  const float L2 = plse[((size_t)b * a.NH + h) * a.Tq + i];
  /* lane 0 alone reads and (last) writes lse; the shuffle hands its value to the warp */
  const float L1 = zc_warp_max(first || lane ? -INFINITY : *L), M = fmaxf(L1, L2);
  const float Ln = first ? L2 : M + logf(expf(L1 - M) + expf(L2 - M));
  const float w1 = first ? 0.0f : expf(L1 - Ln), w2 = first ? 1.0f : expf(L2 - Ln);
  for (int d = lane; d < HS; d += 32)
    o[d] = zc_to<T>(first ? zc_f(po[d]) : zc_f(o[d]) * w1 + zc_f(po[d]) * w2);
  if (lane == 0) *L = Ln;
}

// dk, dv += for key row j; grid (Tk, NH, B), one warp
template <typename T>
__global__ void block_dkdv_kernel(T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v,
                                  const T *out, const float *lse, zeroc_attn_block_t a, float scale,
                                  zeroc_dropout_t dp, bool dr) {
  const int j = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x, HS = a.HS;
  const size_t kvo = b * a.kv_b + (size_t)j * a.kv_t + (size_t)h * HS;
  float kj[AB_PER], vj[AB_PER], qi[AB_PER], dy[AB_PER], oi[AB_PER], gk[AB_PER], gv[AB_PER];
  ab_load(kj, k + kvo, HS, lane);
  ab_load(vj, v + kvo, HS, lane);
#pragma unroll
  for (int u = 0; u < AB_PER; u++) gk[u] = gv[u] = 0.0f;
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(dp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(dp.p) : 1.0f;
  for (int i = a.causal ? j : 0; i < a.Tq; i++) {
    const size_t qo = b * a.q_b + (size_t)i * a.q_t + (size_t)h * HS;
    const size_t oo = b * a.o_b + (size_t)i * a.o_t + (size_t)h * HS;
    ab_load(qi, q + qo, HS, lane);
    ab_load(dy, dout + oo, HS, lane);
    ab_load(oi, out + oo, HS, lane);
    const float D = ab_dot(dy, oi), L = lse[b * a.l_b + h * a.l_h + i];
    const float p = expf(ab_dot(qi, kj) * scale - L);
    const uint64_t rk =
        dr ? zeroc_i_dropout_row_key(dp.key, zeroc_i_dropout_row_att(&dp, b, h, a.q_pos + i)) : 0;
    const float mk = ab_mask(dp, dr, rk, a.k_pos + j, thr, dsc);
    const float dpv = ab_dot(dy, vj) * mk;
    const float ds = p * (dpv - D) * scale;
#pragma unroll
    for (int u = 0; u < AB_PER; u++) {
      gv[u] += p * mk * dy[u];
      gk[u] += ds * qi[u];
    }
  }
#pragma unroll
  for (int u = 0; u < AB_PER; u++) {
    const int d = lane + 32 * u;
    if (d < HS) {
      dk[kvo + d] = zc_to<T>(zc_f(dk[kvo + d]) + gk[u]);
      dv[kvo + d] = zc_to<T>(zc_f(dv[kvo + d]) + gv[u]);
    }
  }
}

// dq += for query row i; grid (Tq, NH, B), one warp
template <typename T>
__global__ void block_dq_kernel(T *dq, const T *dout, const T *q, const T *k, const T *v,
                                const T *out, const float *lse, zeroc_attn_block_t a, float scale,
                                zeroc_dropout_t dp, bool dr) {
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x, HS = a.HS;
  const size_t qo = b * a.q_b + (size_t)i * a.q_t + (size_t)h * HS;
  const size_t oo = b * a.o_b + (size_t)i * a.o_t + (size_t)h * HS;
  float qi[AB_PER], dy[AB_PER], oi[AB_PER], kj[AB_PER], vj[AB_PER], g[AB_PER];
  ab_load(qi, q + qo, HS, lane);
  ab_load(dy, dout + oo, HS, lane);
  ab_load(oi, out + oo, HS, lane);
#pragma unroll
  for (int u = 0; u < AB_PER; u++) g[u] = 0.0f;
  const float D = ab_dot(dy, oi), L = lse[b * a.l_b + h * a.l_h + i];
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(dp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(dp.p) : 1.0f;
  const uint64_t rk =
      dr ? zeroc_i_dropout_row_key(dp.key, zeroc_i_dropout_row_att(&dp, b, h, a.q_pos + i)) : 0;
  const int jend = a.causal ? i + 1 : a.Tk;
  for (int j = 0; j < jend; j++) {
    const size_t kvo = b * a.kv_b + (size_t)j * a.kv_t + (size_t)h * HS;
    ab_load(kj, k + kvo, HS, lane);
    ab_load(vj, v + kvo, HS, lane);
    const float p = expf(ab_dot(qi, kj) * scale - L);
    const float dpv = ab_dot(dy, vj) * ab_mask(dp, dr, rk, a.k_pos + j, thr, dsc);
    const float ds = p * (dpv - D) * scale;
#pragma unroll
    for (int u = 0; u < AB_PER; u++) g[u] += ds * kj[u];
  }
#pragma unroll
  for (int u = 0; u < AB_PER; u++) {
    const int d = lane + 32 * u;
    if (d < HS) dq[qo + d] = zc_to<T>(zc_f(dq[qo + d]) + g[u]);
  }
}

// dst[r*dt + w] (+)= src[r*st + w]; grid-stride over rows*width
template <typename T>
__global__ void copy_rows_kernel(T *dst, size_t dt, const T *src, size_t st, size_t rows,
                                 size_t width, int add) {
  const size_t n = rows * width;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (size_t)gridDim.x * blockDim.x) {
    const size_t r = e / width, w = e % width;
    const float x = zc_f(src[r * st + w]);
    dst[r * dt + w] = zc_to<T>(add ? zc_f(dst[r * dt + w]) + x : x);
  }
}

/* ---- launchers ---------------------------------------------------------------------- */

static zeroc_result_t ab_check(const char *fn, const zeroc_attn_block_t *a) {
  if (a->HS > AB_HS_MAX)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s: head size %d: accepted 1 to %d", fn, a->HS,
                      AB_HS_MAX);
  if (a->Tq > 65535 * 1024 || a->Tk > 65535 * 1024 || a->NH > 65535 || a->B > 65535)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s: block Tq %d Tk %d NH %d B %d exceeds the grid",
                      fn, a->Tq, a->Tk, a->NH, a->B);
  return ZEROC_OK;
}

extern "C" zeroc_result_t
zeroc_i_cuda_attention_block_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *pout, float *plse,
                                     const void *q, const void *kk, const void *v,
                                     const zeroc_attn_block_t *blk, const zeroc_dropout_t *drop) {
  ZEROC_CHECK(ab_check("attention_block_forward", blk));
  cudaStream_t st = zc_stream(k, s);
  const zeroc_dropout_t dp = drop ? *drop : zeroc_dropout_t{};
  const bool dr = drop && drop->p > 0;
  const float scale = 1.0f / sqrtf((float)blk->HS);
  dim3 grid(blk->Tq, blk->NH, blk->B), block(32);
  if (k->dtype == ZEROC_BF16)
    block_forward_kernel<bf16><<<grid, block, 0, st>>>((bf16 *)pout, plse, (const bf16 *)q,
                                                       (const bf16 *)kk, (const bf16 *)v, *blk,
                                                       scale, dp, dr);
  else
    block_forward_kernel<float><<<grid, block, 0, st>>>((float *)pout, plse, (const float *)q,
                                                        (const float *)kk, (const float *)v, *blk,
                                                        scale, dp, dr);
  ZC_LAUNCHED("block_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_attention_merge(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *out, float *lse, const void *pout,
                                                       const float *plse,
                                                       const zeroc_attn_block_t *blk, int first) {
  cudaStream_t st = zc_stream(k, s);
  dim3 grid(blk->Tq, blk->NH, blk->B), block(32);
  if (k->dtype == ZEROC_BF16)
    merge_kernel<bf16>
        <<<grid, block, 0, st>>>((bf16 *)out, lse, (const bf16 *)pout, plse, *blk, first);
  else
    merge_kernel<float>
        <<<grid, block, 0, st>>>((float *)out, lse, (const float *)pout, plse, *blk, first);
  ZC_LAUNCHED("merge_kernel", grid, block, 0);
  return ZEROC_OK;
}

template <typename T>
static zeroc_result_t block_backward(cudaStream_t st, T *dq, T *dk, T *dv, const T *dout,
                                     const T *q, const T *k, const T *v, const T *out,
                                     const float *lse, const zeroc_attn_block_t *a,
                                     const zeroc_dropout_t *drop) {
  const zeroc_dropout_t dp = drop ? *drop : zeroc_dropout_t{};
  const bool dr = drop && drop->p > 0;
  const float scale = 1.0f / sqrtf((float)a->HS);
  dim3 g1(a->Tk, a->NH, a->B), g2(a->Tq, a->NH, a->B), block(32);
  block_dkdv_kernel<T><<<g1, block, 0, st>>>(dk, dv, dout, q, k, v, out, lse, *a, scale, dp, dr);
  ZC_LAUNCHED("block_dkdv_kernel", g1, block, 0);
  block_dq_kernel<T><<<g2, block, 0, st>>>(dq, dout, q, k, v, out, lse, *a, scale, dp, dr);
  ZC_LAUNCHED("block_dq_kernel", g2, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t
zeroc_i_cuda_attention_block_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dq, void *dk,
                                      void *dv, const void *dout, const void *q, const void *kk,
                                      const void *v, const void *out, const float *lse,
                                      const zeroc_attn_block_t *blk, const zeroc_dropout_t *drop) {
  ZEROC_CHECK(ab_check("attention_block_backward", blk));
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return block_backward<bf16>(st, (bf16 *)dq, (bf16 *)dk, (bf16 *)dv, (const bf16 *)dout,
                                (const bf16 *)q, (const bf16 *)kk, (const bf16 *)v,
                                (const bf16 *)out, lse, blk, drop);
  return block_backward<float>(st, (float *)dq, (float *)dk, (float *)dv, (const float *)dout,
                               (const float *)q, (const float *)kk, (const float *)v,
                               (const float *)out, lse, blk, drop);
}

extern "C" zeroc_result_t zeroc_i_cuda_copy_rows(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                                 size_t dst_t, const void *src, size_t src_t,
                                                 size_t rows, size_t width, int add) {
  cudaStream_t st = zc_stream(k, s);
  const size_t n = rows * width;
  const unsigned blocks = (unsigned)(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
  dim3 grid(blocks), block(256);
  if (k->dtype == ZEROC_BF16)
    copy_rows_kernel<bf16>
        <<<grid, block, 0, st>>>((bf16 *)dst, dst_t, (const bf16 *)src, src_t, rows, width, add);
  else
    copy_rows_kernel<float>
        <<<grid, block, 0, st>>>((float *)dst, dst_t, (const float *)src, src_t, rows, width, add);
  ZC_LAUNCHED("copy_rows_kernel", grid, block, 0);
  return ZEROC_OK;
}
