/*
 * kernels/cuda/classifier.cu - fused softmax + cross-entropy + gradient, in place on
 * the logits, one block per row and one launch: the first read keeps a running max
 * and sum of exponentials per thread (merged in a fixed tree), the second (only when
 * dloss != 0) overwrites the row with dloss * (softmax - onehot). The row is read at
 * most twice and no probabilities are stored.
 *
 * A negative target means no loss: loss 0, gradient row 0. A target >= V is a caller
 * bug that the kernel cannot report in stream order: its loss is NaN (so the step's
 * loss is visibly non-finite) and its gradient is the plain softmax.
 */
#include <math.h>

#include "kernels/cuda/common.cuh"

#define CE_THREADS 1024

/* Running (max, sum of exp(x - max)) pairs and how two of them merge. */
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f}; /* both empty */
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum ms_add(MaxSum a, float x) {
  if (x > a.m) return {x, a.s * expf(a.m - x) + 1.0f};
  return {a.m, a.s + expf(x - a.m)};
}

// logits (N,Vp) act, targets (N) -> losses (N); logits (N,Vp) = dloss * (softmax - onehot)
template <typename T>
__global__ void __launch_bounds__(CE_THREADS)
    crossentropy_kernel(float *losses, T *logits, const int32_t *targets, int V, int Vp,
                        float dloss, bool vec) {
  __shared__ MaxSum sh[32];
  __shared__ MaxSum total;
  const int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T *x = logits + (size_t)row * Vp;
  const int target = targets[row];

  if (target < 0) { /* no loss, no gradient */
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (dloss != 0.0f) {
      const float zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int c = threadIdx.x * 8; c < Vp; c += CE_THREADS * 8) zc_store8(x, c, Vp, vec, zero);
    }
    return;
  }

  MaxSum acc = {-INFINITY, 0.0f};
  for (int c = threadIdx.x * 8; c < V; c += CE_THREADS * 8) {
    float v[8];
    zc_load8(x, c, Vp, vec, v); /* may read padding columns: ignored below */
#pragma unroll
    for (int e = 0; e < 8; e++)
      if (c + e < V) acc = ms_add(acc, v[e]);
  }
  /* warp tree, then the warps' results in warp order: a fixed order */
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other = {__shfl_xor_sync(0xffffffffu, acc.m, o), __shfl_xor_sync(0xffffffffu, acc.s, o)};
    acc = ms_merge(acc, other);
  }
  if (lane == 0) sh[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum t = sh[0];
    for (int w = 1; w < CE_THREADS / 32; w++) t = ms_merge(t, sh[w]);
    total = t;
    float loss;
    if (target >= V)
      loss = __int_as_float(0x7fc00000); /* NaN: an out-of-range target */
    else
      loss = t.m + logf(t.s) - zc_f(x[target]);
    losses[row] = loss;
  }
  if (dloss == 0.0f) return; /* forward only: the logits stay as they are */
  __syncthreads();           /* everyone reads `total`; x[target] was read before any write */
  const float m = total.m, scale = dloss / total.s;
  const int hot = target < V ? target : -1; /* an out-of-range target marks no column */
  for (int c = threadIdx.x * 8; c < Vp; c += CE_THREADS * 8) {
    float v[8];
    zc_load8(x, c, Vp, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const int j = c + e;
      float g = j < V ? expf(v[e] - m) * scale : 0.0f;
      if (j == hot) g -= dloss;
      v[e] = g;
    }
    zc_store8(x, c, Vp, vec, v);
  }
}

extern "C" zeroc_result_t zeroc_i_cuda_crossentropy_forward_backward(zeroc_kernels_t *k,
                                                                     zeroc_stream_t *s,
                                                                     float *losses, void *logits,
                                                                     const int32_t *targets, int N,
                                                                     int V, int Vp, float dloss) {
  ZC_NONNULL("crossentropy", losses);
  ZC_NONNULL("crossentropy", logits);
  ZC_NONNULL("crossentropy", targets);
  cudaStream_t st = zc_stream(k, s);
  const bool vec = Vp % 8 == 0 && zc_aligned16(logits);
  dim3 grid(N), block(CE_THREADS);
  if (k->dtype == ZEROC_BF16)
    crossentropy_kernel<bf16>
        <<<grid, block, 0, st>>>(losses, (bf16 *)logits, targets, V, Vp, dloss, vec);
  else
    crossentropy_kernel<float>
        <<<grid, block, 0, st>>>(losses, (float *)logits, targets, V, Vp, dloss, vec);
  ZC_LAUNCHED("crossentropy_kernel", grid, block, 0);
  return ZEROC_OK;
}
