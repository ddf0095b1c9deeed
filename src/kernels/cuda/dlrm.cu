/*
 * kernels/cuda/dlrm.cu - the cuda twins of the DLRM kernels (kernels/dlrm_kernels.h):
 * ReLU element-wise, the interaction one block per sample (the F vectors of a
 * sample are small: F*D floats), binary cross-entropy one thread per sample.
 * fp32 only; every backward accumulates, as on cpu.
 */
#include "kernels/cuda/common.cuh"

__global__ void relu_fwd(float *out, const float *inp, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

__global__ void relu_bwd(float *dinp, const float *out, const float *dout, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && out[i] > 0.0f) dinp[i] += dout[i];
}

__device__ __forceinline__ const float *ivec(const float *z, const float *emb, int b, int f, int T,
                                             int D) {
  return f == 0 ? z + (size_t)b * D : emb + ((size_t)b * T + (size_t)(f - 1)) * D;
}

/* pair p (0-based in the strict upper triangle of F x F, row-major) -> (i, j) */
__device__ __forceinline__ void pair_of(int p, int F, int *i, int *j) {
  int r = 0;
  while (p >= F - 1 - r) p -= F - 1 - r, r++;
  *i = r;
  *j = r + 1 + p;
}

// one block per sample b: z (B,D), emb (B,T,D) -> out (B, D + P)
__global__ void interact_fwd(float *out, const float *z, const float *emb, int T, int D) {
  int b = blockIdx.x, F = T + 1, P = F * (F - 1) / 2;
  float *o = out + (size_t)b * (D + P);
  for (int d = threadIdx.x; d < D; d += blockDim.x) o[d] = z[(size_t)b * D + d];
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    int i, j;
    pair_of(p, F, &i, &j);
    const float *vi = ivec(z, emb, b, i, T, D), *vj = ivec(z, emb, b, j, T, D);
    float s = 0;
    for (int d = 0; d < D; d++) s += vi[d] * vj[d];
    o[D + p] = s;
  }
}

// one block per sample b; thread (f, d) owns the gradient of element d of vector f, so no
// two threads write one element: dv_f[d] += sum over partners g of dout[pair(f,g)] v_g[d]
__global__ void interact_bwd(float *dz, float *demb, const float *dout, const float *z,
                             const float *emb, int T, int D) {
  int b = blockIdx.x, F = T + 1, P = F * (F - 1) / 2;
  const float *g = dout + (size_t)b * (D + P);
  for (int e = threadIdx.x; e < F * D; e += blockDim.x) {
    int f = e / D, d = e % D;
    float acc = f == 0 ? g[d] : 0.0f;
    for (int h = 0; h < F; h++) {
      if (h == f) continue;
      int i = f < h ? f : h, j = f < h ? h : f;
      /* index of (i, j): pairs of the rows before i, then j - i - 1 */
      int p = i * F - i * (i + 1) / 2 + (j - i - 1);
      acc += g[D + p] * ivec(z, emb, b, h, T, D)[d];
    }
    if (f == 0)
      dz[(size_t)b * D + d] += acc;
    else
      demb[((size_t)b * T + (size_t)(f - 1)) * D + d] += acc;
  }
}

__global__ void bce_kernel(float *losses, float *dlogits, const float *logits, const float *labels,
                           int B, float dloss) {
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  float x = logits[b], y = labels[b], e = expf(-fabsf(x));
  losses[b] = fmaxf(x, 0.0f) - x * y + log1pf(e);
  if (dlogits) dlogits[b] = dloss * ((x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e)) - y);
}

static unsigned blocks_of(size_t n, unsigned t) { return (unsigned)((n + t - 1) / t); }

extern "C" zeroc_result_t zeroc_i_cuda_relu_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                    float *out, const float *inp, size_t N) {
  if (N == 0) return ZEROC_OK;
  dim3 grid(blocks_of(N, 256)), block(256);
  relu_fwd<<<grid, block, 0, zc_stream(k, s)>>>(out, inp, N);
  ZC_LAUNCHED("relu_fwd", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_relu_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     float *dinp, const float *out,
                                                     const float *dout, size_t N) {
  if (N == 0) return ZEROC_OK;
  dim3 grid(blocks_of(N, 256)), block(256);
  relu_bwd<<<grid, block, 0, zc_stream(k, s)>>>(dinp, out, dout, N);
  ZC_LAUNCHED("relu_bwd", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_interact_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                        float *out, const float *z,
                                                        const float *emb, int B, int T, int D) {
  dim3 grid((unsigned)B), block(128);
  interact_fwd<<<grid, block, 0, zc_stream(k, s)>>>(out, z, emb, T, D);
  ZC_LAUNCHED("interact_fwd", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_interact_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                         float *dz, float *demb, const float *dout,
                                                         const float *z, const float *emb, int B,
                                                         int T, int D) {
  dim3 grid((unsigned)B), block(256);
  interact_bwd<<<grid, block, 0, zc_stream(k, s)>>>(dz, demb, dout, z, emb, T, D);
  ZC_LAUNCHED("interact_bwd", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_bce(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                           float *dlogits, const float *logits, const float *labels,
                                           int B, float dloss) {
  dim3 grid(blocks_of((size_t)B, 256)), block(256);
  bce_kernel<<<grid, block, 0, zc_stream(k, s)>>>(losses, dlogits, logits, labels, B, dloss);
  ZC_LAUNCHED("bce_kernel", grid, block, 0);
  return ZEROC_OK;
}
