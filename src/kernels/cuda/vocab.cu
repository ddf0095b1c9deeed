/*
 * kernels/cuda/vocab.cu - the vocabulary-parallel embedding and cross-entropy
 * (tensor parallelism) on the GPU, twins of kernels/cpu/vocab.c: a rank holds
 * rows v0 .. v0+Vl-1 of the padded vocabulary; tp/ all-reduces the per-row
 * statistics between the cross-entropy passes, so the logits are never
 * gathered. No float atomics: every reduction has a fixed order.
 */
#include <math.h>

#include "kernels/cuda/common.cuh"

#define VT 256 /* threads per block */

// inp (B,T), wte (Vl,C) rows v0.., wpe (>=T,C) or NULL -> out (B,T,C)
template <typename T>
__global__ void vocab_embed_forward_kernel(T *out, const int32_t *inp, const T *wte, const T *wpe,
                                           int Tn, int C, int v0, int Vl, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t bt = i / (size_t)C;
    const int c = (int)(i % (size_t)C), id = inp[bt] - v0;
    float v = id >= 0 && id < Vl ? zc_f(wte[(size_t)id * C + c]) : 0.0f;
    if (wpe) v += zc_f(wpe[(bt % (size_t)Tn) * C + c]);
    out[i] = zc_to<T>(v);
  }
}

/*
 * keys (N) the token ids sorted, pos (N) their positions (ascending within an id;
 * zc_sort_tokens), dout (N,C) -> dwte (Vl,C) rows v0.. +=. One thread per (sorted
 * index, 8 channels); only the first index of a run of this slice's tokens works,
 * adding the run's rows in position order, each sum rounded to T as it is stored:
 * the additions and roundings of the cpu twin's walk over (b,t), in parallel over
 * rows and channels, no atomics.
 */
template <typename T>
__global__ void vocab_embed_backward_wte_kernel(T *dwte, const T *dout, const int32_t *keys,
                                                const int32_t *pos, int N, int C, int v0, int Vl,
                                                bool vec) {
  const size_t packs = (size_t)(C + 7) / 8, total = (size_t)N * packs;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(idx / packs), c = (int)(idx % packs) * 8;
    const int32_t tok = keys[i], id = tok - v0;
    if (id < 0 || id >= Vl || (i > 0 && keys[i - 1] == tok)) continue;
    float acc[8], g[8];
    T *row = dwte + (size_t)id * C;
    zc_load8(row, c, C, vec, acc);
    for (int j = i; j < N && keys[j] == tok; j++) {
      zc_load8(dout + (size_t)pos[j] * C, c, C, vec, g);
#pragma unroll
      for (int e = 0; e < 8; e++) acc[e] = zc_f(zc_to<T>(acc[e] + g[e]));
    }
    zc_store8(row, c, C, vec, acc);
  }
}

// dout (B,T,C) -> dwpe (T,C) += sum over b, in b order
template <typename T>
__global__ void vocab_embed_backward_wpe_kernel(T *dwpe, const T *dout, int B, int Tn, int C) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)Tn * C) return;
  float acc = zc_f(dwpe[i]);
  for (int b = 0; b < B; b++) acc += zc_f(dout[(size_t)b * Tn * C + i]);
  dwpe[i] = zc_to<T>(acc);
}

static __device__ __forceinline__ int real_cols(int Vl, int v0, int V) {
  int r = V - v0;
  return r < 0 ? 0 : (r > Vl ? Vl : r);
}

// logits (N,Vl) -> mx (N) max over this slice's real columns, xt (N) the target's logit
template <typename T>
__global__ void vocab_ce_local_kernel(float *mx, float *xt, const T *logits, const int32_t *targets,
                                      int Vl, int v0, int V) {
  __shared__ float sh[32];
  const int row = blockIdx.x, R = real_cols(Vl, v0, V);
  const T *x = logits + (size_t)row * Vl;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < R; i += blockDim.x) m = fmaxf(m, zc_f(x[i]));
  m = zc_warp_max(m);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < (int)(blockDim.x >> 5) ? sh[lane] : -INFINITY;
    m = zc_warp_max(m);
    if (lane == 0) {
      mx[row] = m;
      const int t = targets[row], tg = t - v0;
      xt[row] = t >= 0 && t < V && tg >= 0 && tg < R ? zc_f(x[tg]) : 0.0f;
    }
  }
}

// se (N) = sum over this slice's real columns of exp(logits - mx)
template <typename T>
__global__ void vocab_ce_sumexp_kernel(float *se, const T *logits, const float *mx, int Vl, int v0,
                                       int V) {
  __shared__ float sh[32];
  const int row = blockIdx.x, R = real_cols(Vl, v0, V);
  const T *x = logits + (size_t)row * Vl;
  const float m = mx[row];
  float s = 0.0f;
  for (int i = threadIdx.x; i < R; i += blockDim.x) s += expf(zc_f(x[i]) - m);
  s = zc_block_sum(s, sh);
  if (threadIdx.x == 0) se[row] = s;
}

// losses (N) = mx + log(se) - xt; logits <- dloss (softmax - onehot) on real columns, 0 on padding
template <typename T>
__global__ void vocab_ce_finish_kernel(float *losses, T *logits, const int32_t *targets,
                                       const float *mx, const float *se, const float *xt, int Vl,
                                       int v0, int V, float dloss) {
  const int row = blockIdx.x, R = real_cols(Vl, v0, V), tg = targets[row];
  const bool grad = dloss != 0.0f;
  T *x = logits + (size_t)row * Vl;
  if (tg < 0) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (grad)
      for (int i = threadIdx.x; i < Vl; i += blockDim.x) x[i] = zc_to<T>(0.0f);
    return;
  }
  if (tg >= V) { /* as the unsplit kernel: a NaN loss the step's check refuses */
    if (threadIdx.x == 0) losses[row] = NAN;
    if (grad)
      for (int i = threadIdx.x; i < Vl; i += blockDim.x) x[i] = zc_to<T>(i < R ? NAN : 0.0f);
    return;
  }
  if (threadIdx.x == 0) losses[row] = (float)((double)mx[row] + log((double)se[row]) - (double)xt[row]);
  if (!grad) return;
  const float m = mx[row], sc = dloss / se[row];
  for (int i = threadIdx.x; i < Vl; i += blockDim.x) {
    float g = i < R ? expf(zc_f(x[i]) - m) * sc : 0.0f;
    if (i < R && i == tg - v0) g -= dloss;
    x[i] = zc_to<T>(g);
  }
}

/* ---- launches ----------------------------------------------------------------------- */

static unsigned blocks_for(size_t n) {
  size_t b = (n + VT - 1) / VT;
  return (unsigned)(b > 65535u * 8u ? 65535u * 8u : (b ? b : 1));
}

extern "C" {

zeroc_result_t zeroc_i_cuda_vocab_embed_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                                const int32_t *inp, const void *wte,
                                                const void *wpe, int B, int T, int C, int v0,
                                                int Vl) {
  ZC_NONNULL("vocab_embed_forward", out);
  ZC_NONNULL("vocab_embed_forward", inp);
  ZC_NONNULL("vocab_embed_forward", wte);
  cudaStream_t st = zc_stream(k, s);
  size_t n = (size_t)B * T * C;
  dim3 grid(blocks_for(n)), block(VT);
  if (k->dtype == ZEROC_BF16)
    vocab_embed_forward_kernel<bf16><<<grid, block, 0, st>>>((bf16 *)out, inp, (const bf16 *)wte,
                                                             (const bf16 *)wpe, T, C, v0, Vl, n);
  else
    vocab_embed_forward_kernel<float><<<grid, block, 0, st>>>((float *)out, inp, (const float *)wte,
                                                              (const float *)wpe, T, C, v0, Vl, n);
  ZC_LAUNCHED("vocab_embed_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

zeroc_result_t zeroc_i_cuda_vocab_embed_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                                 void *dwpe, const void *dout, const int32_t *inp,
                                                 int B, int T, int C, int v0, int Vl) {
  ZC_NONNULL("vocab_embed_backward", dwte);
  ZC_NONNULL("vocab_embed_backward", dout);
  ZC_NONNULL("vocab_embed_backward", inp);
  cudaStream_t st = zc_stream(k, s);
  const int N = B * T;
  int32_t *keys = nullptr, *pos = nullptr;
  ZEROC_CHECK(zc_sort_tokens(k, st, inp, N, "vocab_embed_backward", &keys, &pos));
  const bool vec = C % 8 == 0 && zc_aligned16(dwte) && zc_aligned16(dout);
  dim3 g1(blocks_for((size_t)N * ((C + 7) / 8))), block(VT);
  if (k->dtype == ZEROC_BF16)
    vocab_embed_backward_wte_kernel<bf16><<<g1, block, 0, st>>>(
        (bf16 *)dwte, (const bf16 *)dout, keys, pos, N, C, v0, Vl, vec);
  else
    vocab_embed_backward_wte_kernel<float><<<g1, block, 0, st>>>(
        (float *)dwte, (const float *)dout, keys, pos, N, C, v0, Vl, vec);
  ZC_LAUNCHED("vocab_embed_backward_wte_kernel", g1, block, 0);
  if (dwpe) {
    dim3 g2(blocks_for((size_t)T * C));
    if (k->dtype == ZEROC_BF16)
      vocab_embed_backward_wpe_kernel<bf16><<<g2, block, 0, st>>>((bf16 *)dwpe, (const bf16 *)dout, B, T, C);
    else
      vocab_embed_backward_wpe_kernel<float><<<g2, block, 0, st>>>((float *)dwpe, (const float *)dout, B, T, C);
    ZC_LAUNCHED("vocab_embed_backward_wpe_kernel", g2, block, 0);
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_i_cuda_vocab_ce_local(zeroc_kernels_t *k, zeroc_stream_t *s, float *mx,
                                           float *xt, const void *logits, const int32_t *targets,
                                           int N, int Vl, int v0, int V) {
  ZC_NONNULL("vocab_ce_local", mx);
  ZC_NONNULL("vocab_ce_local", xt);
  ZC_NONNULL("vocab_ce_local", logits);
  ZC_NONNULL("vocab_ce_local", targets);
  cudaStream_t st = zc_stream(k, s);
  dim3 grid(N), block(VT);
  if (k->dtype == ZEROC_BF16)
    vocab_ce_local_kernel<bf16><<<grid, block, 0, st>>>(mx, xt, (const bf16 *)logits, targets, Vl, v0, V);
  else
    vocab_ce_local_kernel<float><<<grid, block, 0, st>>>(mx, xt, (const float *)logits, targets, Vl, v0, V);
  ZC_LAUNCHED("vocab_ce_local_kernel", grid, block, 0);
  return ZEROC_OK;
}

zeroc_result_t zeroc_i_cuda_vocab_ce_sumexp(zeroc_kernels_t *k, zeroc_stream_t *s, float *se,
                                            const void *logits, const float *mx, int N, int Vl,
                                            int v0, int V) {
  ZC_NONNULL("vocab_ce_sumexp", se);
  ZC_NONNULL("vocab_ce_sumexp", logits);
  ZC_NONNULL("vocab_ce_sumexp", mx);
  cudaStream_t st = zc_stream(k, s);
  dim3 grid(N), block(VT);
  if (k->dtype == ZEROC_BF16)
    vocab_ce_sumexp_kernel<bf16><<<grid, block, 0, st>>>(se, (const bf16 *)logits, mx, Vl, v0, V);
  else
    vocab_ce_sumexp_kernel<float><<<grid, block, 0, st>>>(se, (const float *)logits, mx, Vl, v0, V);
  ZC_LAUNCHED("vocab_ce_sumexp_kernel", grid, block, 0);
  return ZEROC_OK;
}

zeroc_result_t zeroc_i_cuda_vocab_ce_finish(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                            void *logits, const int32_t *targets, const float *mx,
                                            const float *se, const float *xt, int N, int Vl, int v0,
                                            int V, float dloss) {
  ZC_NONNULL("vocab_ce_finish", losses);
  ZC_NONNULL("vocab_ce_finish", logits);
  ZC_NONNULL("vocab_ce_finish", targets);
  cudaStream_t st = zc_stream(k, s);
  dim3 grid(N), block(VT);
  if (k->dtype == ZEROC_BF16)
    vocab_ce_finish_kernel<bf16>
        <<<grid, block, 0, st>>>(losses, (bf16 *)logits, targets, mx, se, xt, Vl, v0, V, dloss);
  else
    vocab_ce_finish_kernel<float>
        <<<grid, block, 0, st>>>(losses, (float *)logits, targets, mx, se, xt, Vl, v0, V, dloss);
  ZC_LAUNCHED("vocab_ce_finish_kernel", grid, block, 0);
  return ZEROC_OK;
}

} /* extern "C" */
