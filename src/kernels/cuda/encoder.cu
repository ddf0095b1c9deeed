/*
 * kernels/cuda/encoder.cu - token + position embedding forward and a deterministic
 * backward without atomics: dwpe sums over the batch in order; for dwte the token
 * positions are stably sorted by token (CUB radix sort, in the scratch), and the
 * first position of each token's run walks the run in position order, so every dwte
 * row receives its contributions in the same order as the cpu twin's loop over (b,t).
 * Token ids must lie in [0, V) (the kernels are not told V).
 */
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/common.cuh"

#define ENC_THREADS 256

// inp (B,T) int32, wte (V,C), wpe (T,C) -> out (B,T,C); one thread per 8 channels of a token
template <typename T>
__global__ void encoder_forward_kernel(T *out, const int32_t *inp, const T *wte, const T *wpe,
                                       int N, int Tn, int C, bool vec) {
  const size_t packs = (size_t)(C + 7) / 8, total = (size_t)N * packs;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int bt = (int)(idx / packs), c = (int)(idx % packs) * 8, t = bt % Tn;
    float a[8], b[8];
    zc_load8(wte + (size_t)inp[bt] * C, c, C, vec, a);
    zc_load8(wpe + (size_t)t * C, c, C, vec, b);
#pragma unroll
    for (int e = 0; e < 8; e++) a[e] += b[e];
    zc_store8(out + (size_t)bt * C, c, C, vec, a);
  }
}

// dout (B,T,C) -> dwpe (T,C) += sum over b, in order of b
template <typename T>
__global__ void encoder_backward_wpe_kernel(T *dwpe, const T *dout, int B, int Tn, int C,
                                            bool vec) {
  const size_t packs = (size_t)(C + 7) / 8, total = (size_t)Tn * packs;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int t = (int)(idx / packs), c = (int)(idx % packs) * 8;
    float acc[8], g[8];
    zc_load8(dwpe + (size_t)t * C, c, C, vec, acc);
    for (int b = 0; b < B; b++) {
      zc_load8(dout + ((size_t)b * Tn + t) * C, c, C, vec, g);
#pragma unroll
      for (int e = 0; e < 8; e++) acc[e] += g[e];
    }
    zc_store8(dwpe + (size_t)t * C, c, C, vec, acc);
  }
}

__global__ void iota_kernel(int32_t *x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
}

/*
 * keys (N) sorted token ids, pos (N) their positions (ascending within a token), dout
 * (N,C) -> dwte (V,C) +=. One thread per (sorted index, 8 channels); only the first
 * index of a token's run works, adding the run's rows in order (4 loads in flight).
 */
template <typename T>
__global__ void encoder_backward_wte_kernel(T *dwte, const T *dout, const int32_t *keys,
                                            const int32_t *pos, int N, int C, bool vec) {
  const size_t packs = (size_t)(C + 7) / 8, total = (size_t)N * packs;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(idx / packs), c = (int)(idx % packs) * 8;
    const int32_t tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) continue; /* not the start of its run */
    float acc[8];
    T *row = dwte + (size_t)tok * C;
    zc_load8(row, c, C, vec, acc);
    for (int j = i; j < N; j += 4) {
      float g[4][8];
      int cnt = 0;
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (cnt == u && j + u < N && keys[j + u] == tok) {
          zc_load8(dout + (size_t)pos[j + u] * C, c, C, vec, g[u]);
          cnt = u + 1;
        }
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (u < cnt)
#pragma unroll
          for (int e = 0; e < 8; e++) acc[e] += g[u][e];
      if (cnt < 4) break;
    }
    zc_store8(row, c, C, vec, acc);
  }
}

static unsigned grid_for(zeroc_kernels_t *k, size_t threads) {
  size_t blocks = (threads + ENC_THREADS - 1) / ENC_THREADS, cap = (size_t)zc_state(k)->sms * 32;
  return (unsigned)(blocks < cap ? blocks : cap);
}

static size_t round256(size_t n) { return (n + 255) / 256 * 256; }

zeroc_result_t zc_sort_tokens(zeroc_kernels_t *k, cudaStream_t st, const int32_t *inp, int N,
                              const char *who, int32_t **keys_out, int32_t **pos_out) {
  zc_state_t *S = zc_state(k);
  /* scratch: positions in, sorted keys, sorted positions, then CUB's temporary storage */
  size_t temp_bytes = 0;
  ZC_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, (const int32_t *)nullptr,
                                          (int32_t *)nullptr, (const int32_t *)nullptr,
                                          (int32_t *)nullptr, N, 0, 32, st));
  const size_t arr = round256((size_t)N * sizeof(int32_t));
  if (3 * arr + temp_bytes > S->scratch_bytes)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: sorting %d tokens needs %zu bytes of scratch, %zu "
                      "available; raise ZEROC_CUDA_SCRATCH_MB",
                      who, N, 3 * arr + temp_bytes, S->scratch_bytes);
  char *base = (char *)S->scratch;
  int32_t *pos_in = (int32_t *)base, *keys = (int32_t *)(base + arr),
          *pos = (int32_t *)(base + 2 * arr);
  void *temp = base + 3 * arr;

  dim3 block(ENC_THREADS), grid(grid_for(k, (size_t)N));
  iota_kernel<<<grid, block, 0, st>>>(pos_in, N);
  ZC_LAUNCHED("iota_kernel", grid, block, 0);
  ZC_CUDA(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, inp, keys, pos_in, pos, N, 0, 32, st));
  *keys_out = keys;
  *pos_out = pos;
  return ZEROC_OK;
}

template <typename T>
static zeroc_result_t encoder_backward(zeroc_kernels_t *k, cudaStream_t st, T *dwte, T *dwpe,
                                       const T *dout, const int32_t *inp, int B, int Tn, int C) {
  const int N = B * Tn;
  const size_t packs = (size_t)(C + 7) / 8;
  const bool vec_pe = C % 8 == 0 && zc_aligned16(dwpe) && zc_aligned16(dout);
  const bool vec_te = C % 8 == 0 && zc_aligned16(dwte) && zc_aligned16(dout);

  dim3 block(ENC_THREADS), grid1(grid_for(k, (size_t)Tn * packs));
  encoder_backward_wpe_kernel<T><<<grid1, block, 0, st>>>(dwpe, dout, B, Tn, C, vec_pe);
  ZC_LAUNCHED("encoder_backward_wpe_kernel", grid1, block, 0);

  int32_t *keys = nullptr, *pos = nullptr;
  ZEROC_CHECK(zc_sort_tokens(k, st, inp, N, "encoder_backward", &keys, &pos));
  dim3 grid3(grid_for(k, (size_t)N * packs));
  encoder_backward_wte_kernel<T><<<grid3, block, 0, st>>>(dwte, dout, keys, pos, N, C, vec_te);
  ZC_LAUNCHED("encoder_backward_wte_kernel", grid3, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_encoder_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *out, const int32_t *inp,
                                                       const void *wte, const void *wpe, int B,
                                                       int T, int C) {
  ZC_NONNULL("encoder_forward", out);
  ZC_NONNULL("encoder_forward", inp);
  ZC_NONNULL("encoder_forward", wte);
  ZC_NONNULL("encoder_forward", wpe);
  cudaStream_t st = zc_stream(k, s);
  const int N = B * T;
  const bool vec = C % 8 == 0 && zc_aligned16(out) && zc_aligned16(wte) && zc_aligned16(wpe);
  dim3 block(ENC_THREADS), grid(grid_for(k, (size_t)N * ((C + 7) / 8)));
  if (k->dtype == ZEROC_BF16)
    encoder_forward_kernel<bf16><<<grid, block, 0, st>>>((bf16 *)out, inp, (const bf16 *)wte,
                                                         (const bf16 *)wpe, N, T, C, vec);
  else
    encoder_forward_kernel<float><<<grid, block, 0, st>>>((float *)out, inp, (const float *)wte,
                                                          (const float *)wpe, N, T, C, vec);
  ZC_LAUNCHED("encoder_forward_kernel", grid, block, 0);
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_encoder_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                        void *dwte, void *dwpe, const void *dout,
                                                        const int32_t *inp, int B, int T, int C) {
  ZC_NONNULL("encoder_backward", dwte);
  ZC_NONNULL("encoder_backward", dwpe);
  ZC_NONNULL("encoder_backward", dout);
  ZC_NONNULL("encoder_backward", inp);
  cudaStream_t st = zc_stream(k, s);
  if (k->dtype == ZEROC_BF16)
    return encoder_backward(k, st, (bf16 *)dwte, (bf16 *)dwpe, (const bf16 *)dout, inp, B, T, C);
  return encoder_backward(k, st, (float *)dwte, (float *)dwpe, (const float *)dout, inp, B, T, C);
}
