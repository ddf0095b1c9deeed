/*
 * kernels/cuda/common.cuh - what the cuda kernel files share: the per-kernels state
 * behind k->cuda, checks that turn CUDA/cuBLAS failures into ZEROC_ERR_CUDA, element
 * loads and stores in fp32 or bf16 (8 elements = 16 or 32 bytes at a time, scalar at
 * the edges), the bf16 rounding of zeroc/types.h, and warp/block reductions.
 *
 * Storage is k->dtype (fp32 or bf16); arithmetic is always fp32 (double for sumsq).
 */
#ifndef ZEROC_KERNELS_CUDA_COMMON_CUH
#define ZEROC_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/cuda_kernels.h"
#include "zeroc/device.h"

/* core/ is C; its headers carry no C++ linkage guards of their own. */
extern "C" {
#include "core/error.h"
}

typedef __nv_bfloat16 bf16;

/* ---- state ---------------------------------------------------------------------- */

/* Blocks of the first sumsq pass. Its partials live in their own small buffers,
 * one per stream (up to ZC_SUMSQ_STREAMS streams, claimed on first use), so sumsq
 * may run on several streams at once and beside the model kernels. */
#define ZC_SUMSQ_BLOCKS ZEROC_K_SUMSQ_BLOCKS
#define ZC_SUMSQ_STREAMS ZEROC_K_SUMSQ_STREAMS

/*
 * k->cuda. The cuBLASLt workspace and the reduction scratch are shared by every
 * launch of this kernels object, so matmul, layernorm_backward, matmul_backward (dbias),
 * encoder_backward and vocab_embed_backward (token sort) must be issued on one stream at
 * a time (or ordered by events),
 * as one cuBLASLt workspace must. The engine kernels (cast, accumulate, scale, adamw)
 * use neither and sumsq uses its own partials: those may run on any stream.
 */
typedef struct zc_state {
  cublasLtHandle_t lt;
  void *lt_ws; /* cuBLASLt workspace */
  size_t lt_ws_bytes;
  void *scratch; /* partial sums of the deterministic reductions, encoder sort */
  size_t scratch_bytes;
  double *sumsq_part; /* ZC_SUMSQ_STREAMS x ZC_SUMSQ_BLOCKS partial sums */
  cudaStream_t sumsq_owner[ZC_SUMSQ_STREAMS]; /* the stream of each slot (claimed: used) */
  int sumsq_used;                             /* slots claimed */
  pthread_mutex_t sumsq_mu;                   /* guards the two above */
  int sms;            /* multiprocessors of the device */
  size_t smem_optin;  /* largest dynamic shared memory a block may opt in to */
  int tf32;           /* fp32 GEMMs may use TF32 tensor cores (ZEROC_CUDA_TF32=1) */
  int flash;          /* bf16 attention on the tensor cores (ZEROC_CUDA_FLASH, default 1) */
  int lt_epilogues;   /* ZEROC_CUDA_LT_EPILOGUE: 0 off, 1 bias grads + bf16 GELU, 2 + fp32 GELU */
  struct zc_lt_cache *lt_cache; /* descriptors and algorithms per GEMM shape (matmul.cu) */
} zc_state_t;

/* Frees the GEMM cache of matmul.cu (NULL: nothing). */
void zc_lt_cache_free(struct zc_lt_cache *c);

static inline zc_state_t *zc_state(zeroc_kernels_t *k) { return (zc_state_t *)k->cuda; }

/* The cudaStream_t of `s`, or of the context's compute stream when `s` is NULL. */
static inline cudaStream_t zc_stream(zeroc_kernels_t *k, zeroc_stream_t *s) {
  if (!s) s = k->compute;
  return (cudaStream_t)zeroc_stream_native(s);
}

static inline bool zc_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- error checks ---------------------------------------------------------------- */

/* Returns ZEROC_ERR_CUDA from the enclosing function when a runtime call fails. */
#define ZC_CUDA(call)                                                                              \
  do {                                                                                             \
    cudaError_t zc_e_ = (call);                                                                    \
    if (zc_e_ != cudaSuccess)                                                                      \
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "%s failed: %s (%s)", #call, cudaGetErrorString(zc_e_),    \
                        cudaGetErrorName(zc_e_));                                                  \
  } while (0)

/* After a <<<...>>> launch: a bad configuration (or an earlier asynchronous fault)
 * becomes ZEROC_ERR_CUDA naming the kernel and its grid. */
#define ZC_LAUNCHED(name, grid, block, smem)                                                       \
  do {                                                                                             \
    cudaError_t zc_e_ = cudaGetLastError();                                                        \
    if (zc_e_ != cudaSuccess)                                                                      \
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "launch of %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s (%s)",  \
                        name, (grid).x, (grid).y, (grid).z, (block).x, (block).y, (block).z,       \
                        (size_t)(smem), cudaGetErrorString(zc_e_), cudaGetErrorName(zc_e_));       \
  } while (0)

/* A required pointer argument. */
#define ZC_NONNULL(fn, p)                                                                          \
  do {                                                                                             \
    if (!(p)) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: %s is NULL", fn, #p);                  \
  } while (0)

/* ---- element conversion ------------------------------------------------------------ */

__device__ __forceinline__ float zc_f(float x) { return x; }
__device__ __forceinline__ float zc_f(bf16 x) {
  return __uint_as_float((uint32_t)__bfloat16_as_ushort(x) << 16);
}

/* fp32 -> bf16, round to nearest even, NaN kept quiet: bit for bit zeroc_f32_to_bf16. */
__device__ __forceinline__ uint16_t zc_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <typename T> __device__ __forceinline__ T zc_to(float x);
template <> __device__ __forceinline__ float zc_to<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 zc_to<bf16>(float x) {
  return __ushort_as_bfloat16(zc_bf16_bits(x));
}

/* ---- 8-element packs --------------------------------------------------------------- */

/* p must be 16-byte aligned. */
__device__ __forceinline__ void zc_ld8(const float *p, float v[8]) {
  float4 a = *reinterpret_cast<const float4 *>(p);
  float4 b = *reinterpret_cast<const float4 *>(p + 4);
  v[0] = a.x;
  v[1] = a.y;
  v[2] = a.z;
  v[3] = a.w;
  v[4] = b.x;
  v[5] = b.y;
  v[6] = b.z;
  v[7] = b.w;
}
__device__ __forceinline__ void zc_ld8(const bf16 *p, float v[8]) {
  uint4 u = *reinterpret_cast<const uint4 *>(p);
  uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void zc_st8(float *p, const float v[8]) {
  *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void zc_st8(bf16 *p, const float v[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    w[i] = (uint32_t)zc_bf16_bits(v[2 * i]) | ((uint32_t)zc_bf16_bits(v[2 * i + 1]) << 16);
  *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

/* Elements [i, i+8) of p (length n): one vector access when `vec` (p 16-byte aligned)
 * and the pack is whole, else element by element; lanes past n read as 0. */
template <typename T>
__device__ __forceinline__ void zc_load8(const T *p, size_t i, size_t n, bool vec, float v[8]) {
  if (vec && i + 8 <= n) {
    zc_ld8(p + i, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) v[e] = i + e < n ? zc_f(p[i + e]) : 0.0f;
}
template <typename T>
__device__ __forceinline__ void zc_store8(T *p, size_t i, size_t n, bool vec, const float v[8]) {
  if (vec && i + 8 <= n) {
    zc_st8(p + i, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++)
    if (i + e < n) p[i + e] = zc_to<T>(v[e]);
}

/* 8 elements of T as they were loaded, for rows held in registers: a bf16 pack takes 4
 * registers instead of the 8 of its floats, so twice the row fits before spilling.
 * zc_raw_load8 reads [i, i+8) of p (length n) as zc_load8 does (lanes past n read 0);
 * zc_raw_unpack8 gives the floats. */
template <typename T> struct zc_raw8;
template <> struct zc_raw8<float> { float v[8]; };
template <> struct zc_raw8<bf16> { uint4 u; };
__device__ __forceinline__ void zc_raw_load8(const float *p, size_t i, size_t n, bool vec,
                                             zc_raw8<float> &r) {
  zc_load8(p, i, n, vec, r.v);
}
__device__ __forceinline__ void zc_raw_load8(const bf16 *p, size_t i, size_t n, bool vec,
                                             zc_raw8<bf16> &r) {
  if (vec && i + 8 <= n) {
    r.u = *reinterpret_cast<const uint4 *>(p + i);
    return;
  }
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const uint32_t lo = i + 2 * k < n ? zc_bf16_bits(zc_f(p[i + 2 * k])) : 0u;
    const uint32_t hi = i + 2 * k + 1 < n ? zc_bf16_bits(zc_f(p[i + 2 * k + 1])) : 0u;
    w[k] = lo | (hi << 16);
  }
  r.u = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void zc_raw_unpack8(const zc_raw8<float> &r, float v[8]) {
#pragma unroll
  for (int e = 0; e < 8; e++) v[e] = r.v[e];
}
__device__ __forceinline__ void zc_raw_unpack8(const zc_raw8<bf16> &r, float v[8]) {
  const uint32_t w[4] = {r.u.x, r.u.y, r.u.z, r.u.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}

/* ---- reductions (fixed order, so results repeat bit for bit) ------------------------ */

template <typename A> __device__ __forceinline__ A zc_warp_sum(A x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float zc_warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
 * the result. `sh` holds 32 values; the call ends with the block synchronised. */
template <typename A> __device__ A zc_block_sum(A x, A *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  x = zc_warp_sum(x);
  __syncthreads(); /* sh may still be read from an earlier call */
  if (lane == 0) sh[warp] = x;
  __syncthreads();
  x = lane < nw ? sh[lane] : (A)0;
  return zc_warp_sum(x);
}

/* Column c's sum over `groups` rows of partial sums part (groups, stride), by a block of
 * (32, ZC_COLSUM_Y) threads, one column per x: thread y adds rows y, y + ZC_COLSUM_Y, ...,
 * then row y = 0 adds the y's in order (a fixed order: the sum repeats bit for bit). Every
 * thread of the block calls it; the result is valid where threadIdx.y == 0. One thread
 * per column walking all the groups left the final passes latency-bound (22 us for 256
 * groups of 2048 columns on an H200, 8 blocks busy). */
#define ZC_COLSUM_Y 16
__device__ __forceinline__ float zc_column_sum(const float *part, int groups, size_t stride, int c,
                                               bool in, float (*sh)[33]) {
  float a = 0.0f;
  if (in)
    for (int g = threadIdx.y; g < groups; g += ZC_COLSUM_Y) a += part[(size_t)g * stride + c];
  __syncthreads(); /* sh may still be read from an earlier call */
  sh[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  float t = 0.0f;
  if (threadIdx.y == 0)
#pragma unroll
    for (int y = 0; y < ZC_COLSUM_Y; y++) t += sh[y][threadIdx.x];
  return t;
}

/* ---- launch helpers ---------------------------------------------------------------- */

/* One thread per pack of 8 elements, grid-striding: f(i, n, vec) handles [i, i+8). */
template <typename F> __global__ void zc_packs_kernel(F f, size_t n, bool vec) {
  const size_t stride = (size_t)gridDim.x * blockDim.x * 8;
  for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n; i += stride)
    f(i, n, vec);
}

#define ZC_PACK_THREADS 256

/* Launches zc_packs_kernel over n elements on `st`; a grid of at most 32 blocks per
 * multiprocessor strides over larger tensors. */
template <typename F>
static zeroc_result_t zc_launch_packs(zeroc_kernels_t *k, cudaStream_t st, const char *name, F f,
                                      size_t n, bool vec) {
  if (n == 0) return ZEROC_OK;
  size_t packs = (n + 7) / 8;
  size_t blocks = (packs + ZC_PACK_THREADS - 1) / ZC_PACK_THREADS;
  size_t cap = (size_t)zc_state(k)->sms * 32;
  dim3 grid((unsigned)(blocks < cap ? blocks : cap)), block(ZC_PACK_THREADS);
  zc_packs_kernel<F><<<grid, block, 0, st>>>(f, n, vec);
  ZC_LAUNCHED(name, grid, block, 0);
  return ZEROC_OK;
}

/* Row groups of a deterministic column reduction over N rows whose partial sums are
 * `width` floats per group: at least 32 rows a group, at most 512 groups, and all the
 * partials fit in the scratch. Depends on N, width and the scratch size only, so the
 * summation order (and the result) is the same on every run. */
static inline zeroc_result_t zc_row_groups(zeroc_kernels_t *k, const char *fn, int N, size_t width,
                                           int *rows_per_group, int *groups) {
  size_t fit = zc_state(k)->scratch_bytes / (width * sizeof(float));
  if (fit == 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: %zu partial sums per row group exceed the %zu-byte scratch; raise "
                      "ZEROC_CUDA_SCRATCH_MB",
                      fn, width, zc_state(k)->scratch_bytes);
  size_t rpg = 32;
  if ((size_t)N > rpg * 512) rpg = ((size_t)N + 511) / 512;
  if (((size_t)N + rpg - 1) / rpg > fit) rpg = ((size_t)N + fit - 1) / fit;
  *rows_per_group = (int)rpg;
  *groups = (int)(((size_t)N + rpg - 1) / rpg);
  return ZEROC_OK;
}

/* ---- token sort (encoder.cu) ---------------------------------------------------------- */

/* The positions 0..N-1 of inp (N token ids) stably sorted by token, in k's reduction
 * scratch: *keys (N) the sorted ids, *pos (N) their positions, ascending within an id.
 * The arrays live until the next kernel that uses the scratch on the stream. `who`
 * names the caller in the error when the scratch is too small. */
zeroc_result_t zc_sort_tokens(zeroc_kernels_t *k, cudaStream_t st, const int32_t *inp, int N,
                              const char *who, int32_t **keys, int32_t **pos);

#endif
