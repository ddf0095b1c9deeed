/*
 * kernels/cuda/embedbag.cu - the embedding-bag kernels of embed/ on the GPU:
 * sum pooling (one block per bag, threads over the columns), its backward
 * (atomicAdd into the compact row gradient: rows shared by bags add up in any
 * order, so the result may differ from the cpu twin in the last bits), the
 * per-row sums of squares and the row-wise AdaGrad update, and a strided copy.
 * fp32 only. The cpu twins are in kernels/cpu/embedbag.c.
 */
#include "kernels/cuda/common.cuh"

#define EB_THREADS 128

__device__ __forceinline__ int64_t eb_bag_row(int64_t b, int64_t blk, int64_t blk_stride,
                                              int64_t ld) {
  return (b / blk) * blk_stride + (b % blk) * ld;
}

// w (rows, ldw), idx, offs (nbags+1) -> out row of each bag (dc)
__global__ void embedbag_forward_kernel(float *out, int64_t blk, int64_t blk_stride, int64_t ldo,
                                        const float *w, int64_t ldw, const int64_t *idx,
                                        const int32_t *offs, int dc) {
  int64_t b = blockIdx.x;
  float *o = out + eb_bag_row(b, blk, blk_stride, ldo);
  int32_t i0 = offs[b], i1 = offs[b + 1];
  for (int j = threadIdx.x; j < dc; j += blockDim.x) {
    float acc = 0.0f;
    for (int32_t i = i0; i < i1; i++) acc += w[idx[i] * ldw + j];
    o[j] = acc;
  }
}

// dout row of each bag -> grad (rows, ldg) += at the bag's ids
__global__ void embedbag_backward_kernel(float *grad, int64_t ldg, const int64_t *idx,
                                         const int32_t *offs, const float *dout, int64_t blk,
                                         int64_t blk_stride, int64_t ldo, int dc) {
  int64_t b = blockIdx.x;
  const float *d = dout + eb_bag_row(b, blk, blk_stride, ldo);
  int32_t i0 = offs[b], i1 = offs[b + 1];
  for (int j = threadIdx.x; j < dc; j += blockDim.x) {
    float v = d[j];
    for (int32_t i = i0; i < i1; i++) atomicAdd(&grad[idx[i] * ldg + j], v);
  }
}

// g (U, dc) -> ss (U): one block per row
__global__ void rowwise_sumsq_kernel(float *ss, const float *g, int dc, float scale) {
  __shared__ float sh[32];
  int64_t u = blockIdx.x;
  float acc = 0.0f;
  for (int j = threadIdx.x; j < dc; j += blockDim.x) {
    float x = scale * g[u * dc + j];
    acc += x * x;
  }
  acc = zc_block_sum(acc, sh);
  if (threadIdx.x == 0) ss[u] = acc;
}

// one block per row: state[r] += ss[u] / D, then the row's dc columns step
__global__ void rowwise_adagrad_kernel(float *w, int64_t ldw, float *state, const int64_t *rows,
                                       const float *g, const float *ss, int dc, int D, float scale,
                                       float lr, float eps) {
  __shared__ float step;
  int64_t u = blockIdx.x;
  int64_t r = rows ? rows[u] : u;
  if (threadIdx.x == 0) {
    float st = state[r] + ss[u] / (float)D;
    state[r] = st;
    step = lr / (sqrtf(st) + eps);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < dc; j += blockDim.x) w[r * ldw + j] -= step * (scale * g[u * dc + j]);
}

__global__ void copy2d_kernel(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t cols) {
  int64_t i = blockIdx.x;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dst[i * ldd + j] = src[i * lds + j];
}

/* Grids are one block per bag or row; CUDA allows 2^31-1 blocks in x. */
static zeroc_result_t eb_grid(const char *fn, int64_t n, dim3 *grid) {
  if (n > 2147483647LL)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: %lld bags/rows; at most 2^31-1 per call", fn,
                      (long long)n);
  *grid = dim3((unsigned)n);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_embedbag_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                        float *out, int64_t blk, int64_t blk_stride,
                                                        int64_t ldo, const float *w, int64_t ldw,
                                                        const int64_t *idx, const int32_t *offs,
                                                        int64_t nbags, int dc) {
  dim3 grid, block(EB_THREADS);
  ZEROC_CHECK(eb_grid("embedbag_forward", nbags, &grid));
  embedbag_forward_kernel<<<grid, block, 0, zc_stream(k, s)>>>(out, blk, blk_stride, ldo, w, ldw,
                                                               idx, offs, dc);
  ZC_LAUNCHED("embedbag_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_embedbag_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                         float *grad, int64_t ldg,
                                                         const int64_t *idx, const int32_t *offs,
                                                         int64_t nbags, const float *dout,
                                                         int64_t blk, int64_t blk_stride,
                                                         int64_t ldo, int dc) {
  dim3 grid, block(EB_THREADS);
  ZEROC_CHECK(eb_grid("embedbag_backward", nbags, &grid));
  embedbag_backward_kernel<<<grid, block, 0, zc_stream(k, s)>>>(grad, ldg, idx, offs, dout, blk,
                                                                blk_stride, ldo, dc);
  ZC_LAUNCHED("embedbag_backward_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_rowwise_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     float *ss, const float *g, int64_t U, int dc,
                                                     float scale) {
  dim3 grid, block(EB_THREADS);
  ZEROC_CHECK(eb_grid("rowwise_sumsq", U, &grid));
  rowwise_sumsq_kernel<<<grid, block, 0, zc_stream(k, s)>>>(ss, g, dc, scale);
  ZC_LAUNCHED("rowwise_sumsq_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_rowwise_adagrad(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       float *w, int64_t ldw, float *state,
                                                       const int64_t *rows, const float *g,
                                                       const float *ss, int64_t U, int dc, int D,
                                                       float scale, float lr, float eps) {
  dim3 grid, block(EB_THREADS);
  ZEROC_CHECK(eb_grid("rowwise_adagrad", U, &grid));
  rowwise_adagrad_kernel<<<grid, block, 0, zc_stream(k, s)>>>(w, ldw, state, rows, g, ss, dc, D,
                                                              scale, lr, eps);
  ZC_LAUNCHED("rowwise_adagrad_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_copy2d(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst,
                                              int64_t ldd, const float *src, int64_t lds,
                                              int64_t rows, int64_t cols) {
  dim3 grid, block(EB_THREADS);
  ZEROC_CHECK(eb_grid("copy2d", rows, &grid));
  copy2d_kernel<<<grid, block, 0, zc_stream(k, s)>>>(dst, ldd, src, lds, cols);
  ZC_LAUNCHED("copy2d_kernel", grid, block, 0);
  return ZEROC_OK;
}
