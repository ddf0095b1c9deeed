/*
 * kernels/cuda/engine.cu - the engine's kernels on flat shards: cast fp32 <-> bf16,
 * accumulate, scale, sum of squares (into a device double, deterministic, on up to
 * ZC_SUMSQ_STREAMS streams at once: each has its own partials) and the fused AdamW
 * (fp32 gradient; or bf16 gradient and a rounded copy of the result). Each
 * elementwise result is computed with the same IEEE operations in the same order as
 * kernels/cpu/engine.c (explicit _rn intrinsics, so nvcc fuses no multiply-add), which
 * makes them match the cpu twins bit for bit.
 */
#include "kernels/clip.h"
#include "kernels/cuda/common.cuh"

// src (n, S) -> dst (n, D), fp32 <-> bf16 rounding to nearest even
template <typename D, typename S> struct Cast {
  D *dst;
  const S *src;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float v[8];
    zc_load8(src, i, n, vec, v);
    zc_store8(dst, i, n, vec, v);
  }
};

// dst (n) fp32 += scale * src (n, S)
template <typename S> struct Accumulate {
  float *dst;
  const S *src;
  float scale;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float d[8], x[8];
    zc_load8(dst, i, n, vec, d);
    zc_load8(src, i, n, vec, x);
#pragma unroll
    for (int e = 0; e < 8; e++) d[e] = __fadd_rn(d[e], __fmul_rn(scale, x[e]));
    zc_store8(dst, i, n, vec, d);
  }
};

// x (n) fp32 *= a
struct Scale {
  float *x;
  float a;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float v[8];
    zc_load8(x, i, n, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], a);
    zc_store8(x, i, n, vec, v);
  }
};

// dst (n, D) = dst + src (n) fp32, added in fp32, rounded to D
template <typename D> struct AddTo {
  D *dst;
  const float *src;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float d[8], x[8];
    zc_load8(dst, i, n, vec, d);
    zc_load8(src, i, n, vec, x);
#pragma unroll
    for (int e = 0; e < 8; e++) d[e] = __fadd_rn(d[e], x[e]);
    zc_store8(dst, i, n, vec, d);
  }
};

/* The AdamW constants, derived on the host exactly as the cpu twin derives them.
 * scale_dev (or NULL): the multiplier in device memory instead of grad_scale, NaN when
 * the step is skipped (zeroc_adamw_args_t). */
struct AdamW {
  float *param, *m, *v;
  const float *grad;
  const float *scale_dev;
  float lr, beta1, beta2, ib1, ib2, rbc1, rbc2, eps, wd, grad_scale;
  __device__ float scale() const { return scale_dev ? *scale_dev : grad_scale; }
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    const float gsc = scale();
    if (gsc != gsc) return; /* NaN: a skipped step writes nothing */
    float p[8], mm[8], vv[8], g[8];
    zc_load8(param, i, n, vec, p);
    zc_load8(m, i, n, vec, mm);
    zc_load8(v, i, n, vec, vv);
    zc_load8(grad, i, n, vec, g);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float gi = __fmul_rn(g[e], gsc);
      float mi = __fadd_rn(__fmul_rn(beta1, mm[e]), __fmul_rn(ib1, gi));
      float vi = __fadd_rn(__fmul_rn(beta2, vv[e]), __fmul_rn(__fmul_rn(ib2, gi), gi));
      mm[e] = mi;
      vv[e] = vi;
      float mhat = __fmul_rn(mi, rbc1), vhat = __fmul_rn(vi, rbc2);
      float step =
          __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)), __fmul_rn(wd, p[e]));
      p[e] = __fsub_rn(p[e], __fmul_rn(lr, step));
    }
    zc_store8(m, i, n, vec, mm);
    zc_store8(v, i, n, vec, vv);
    zc_store8(param, i, n, vec, p);
  }
};

/* AdamW reading the gradient in G (bf16: the reduced shard itself, no fp32 copy) and
 * also writing the new parameter rounded to O (the compute shard, when `out` is set):
 * one pass where there were a cast, AdamW and a cast. The update is AdamW's above,
 * operation for operation, so both write the same bits. */
template <typename G, typename O> struct AdamWMixed {
  AdamW a; /* a.grad unused */
  const G *grad;
  O *out;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    const float gsc = a.scale();
    if (gsc != gsc) return; /* NaN: a skipped step writes nothing */
    float p[8], mm[8], vv[8], g[8];
    zc_load8(a.param, i, n, vec, p);
    zc_load8(a.m, i, n, vec, mm);
    zc_load8(a.v, i, n, vec, vv);
    zc_load8(grad, i, n, vec, g);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float gi = __fmul_rn(g[e], gsc);
      float mi = __fadd_rn(__fmul_rn(a.beta1, mm[e]), __fmul_rn(a.ib1, gi));
      float vi = __fadd_rn(__fmul_rn(a.beta2, vv[e]), __fmul_rn(__fmul_rn(a.ib2, gi), gi));
      mm[e] = mi;
      vv[e] = vi;
      float mhat = __fmul_rn(mi, a.rbc1), vhat = __fmul_rn(vi, a.rbc2);
      float step =
          __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), a.eps)), __fmul_rn(a.wd, p[e]));
      p[e] = __fsub_rn(p[e], __fmul_rn(a.lr, step));
    }
    zc_store8(a.m, i, n, vec, mm);
    zc_store8(a.v, i, n, vec, vv);
    zc_store8(a.param, i, n, vec, p);
    if (out) zc_store8(out, i, n, vec, p);
  }
};

extern "C" zeroc_result_t zeroc_i_cuda_cast(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                            zeroc_dtype_t dst_dt, const void *src,
                                            zeroc_dtype_t src_dt, size_t n) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("cast", dst);
  ZC_NONNULL("cast", src);
  cudaStream_t st = zc_stream(k, s);
  const bool vec = zc_aligned16(dst) && zc_aligned16(src);
  if (dst_dt == src_dt) {
    if (dst != src && n)
      ZC_CUDA(cudaMemcpyAsync(dst, src, n * zeroc_dtype_size(dst_dt), cudaMemcpyDefault, st));
    return ZEROC_OK;
  }
  if (dst_dt == ZEROC_BF16 && src_dt == ZEROC_FP32)
    return zc_launch_packs(k, st, "cast<fp32->bf16>",
                           Cast<bf16, float>{(bf16 *)dst, (const float *)src}, n, vec);
  if (dst_dt == ZEROC_FP32 && src_dt == ZEROC_BF16)
    return zc_launch_packs(k, st, "cast<bf16->fp32>",
                           Cast<float, bf16>{(float *)dst, (const bf16 *)src}, n, vec);
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cast %s -> %s: accepted fp32 and bf16",
                    zeroc_dtype_name(src_dt), zeroc_dtype_name(dst_dt));
}

extern "C" zeroc_result_t zeroc_i_cuda_accumulate(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst,
                                                  const void *src, zeroc_dtype_t src_dt, size_t n,
                                                  float scale) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("accumulate", dst);
  ZC_NONNULL("accumulate", src);
  const bool vec = zc_aligned16(dst) && zc_aligned16(src);
  if (src_dt == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "accumulate<bf16>",
                           Accumulate<bf16>{dst, (const bf16 *)src, scale}, n, vec);
  if (src_dt == ZEROC_FP32)
    return zc_launch_packs(k, zc_stream(k, s), "accumulate<fp32>",
                           Accumulate<float>{dst, (const float *)src, scale}, n, vec);
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "accumulate from %s: accepted fp32, bf16",
                    zeroc_dtype_name(src_dt));
}

extern "C" zeroc_result_t zeroc_i_cuda_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *x,
                                             size_t n, float a) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("scale", x);
  return zc_launch_packs(k, zc_stream(k, s), "scale", Scale{x, a}, n, zc_aligned16(x));
}

extern "C" zeroc_result_t zeroc_i_cuda_add_to(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                              zeroc_dtype_t dst_dt, const float *src, size_t n) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("add_to", dst);
  ZC_NONNULL("add_to", src);
  const bool vec = zc_aligned16(dst) && zc_aligned16(src);
  if (dst_dt == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "add_to<bf16>", AddTo<bf16>{(bf16 *)dst, src}, n, vec);
  if (dst_dt == ZEROC_FP32)
    return zc_launch_packs(k, zc_stream(k, s), "add_to<fp32>", AddTo<float>{(float *)dst, src}, n, vec);
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "add_to into %s: accepted fp32, bf16",
                    zeroc_dtype_name(dst_dt));
}

/* The AdamW functor for param, m, v and grad (NULL for adamw_mixed, which reads its own
 * gradient type) with the step's arguments: one setup for both entry points. */
static AdamW adamw_functor(float *param, float *m, float *v, const float *grad,
                           const zeroc_adamw_args_t *a) {
  AdamW f;
  f.param = param;
  f.m = m;
  f.v = v;
  f.grad = grad;
  f.lr = a->lr;
  f.beta1 = a->beta1;
  f.beta2 = a->beta2;
  f.ib1 = 1.0f - a->beta1;
  f.ib2 = 1.0f - a->beta2;
  f.rbc1 = 1.0f / a->bias_corr1;
  f.rbc2 = 1.0f / a->bias_corr2;
  f.eps = a->eps;
  f.wd = a->weight_decay;
  f.grad_scale = a->grad_scale;
  f.scale_dev = a->scale_dev;
  return f;
}

extern "C" zeroc_result_t zeroc_i_cuda_adamw(zeroc_kernels_t *k, zeroc_stream_t *s, float *param,
                                             float *m, float *v, const float *grad, size_t n,
                                             const zeroc_adamw_args_t *a) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("adamw", param);
  ZC_NONNULL("adamw", m);
  ZC_NONNULL("adamw", v);
  ZC_NONNULL("adamw", grad);
  ZC_NONNULL("adamw", a);
  const AdamW f = adamw_functor(param, m, v, grad, a);
  const bool vec = zc_aligned16(param) && zc_aligned16(m) && zc_aligned16(v) && zc_aligned16(grad);
  return zc_launch_packs(k, zc_stream(k, s), "adamw", f, n, vec);
}

template <typename G, typename O>
static zeroc_result_t adamw_mixed_launch(zeroc_kernels_t *k, cudaStream_t st, const AdamW &f,
                                         const void *grad, void *out, size_t n, bool vec) {
  AdamWMixed<G, O> m{f, (const G *)grad, (O *)out};
  return zc_launch_packs(k, st, "adamw_mixed", m, n, vec);
}

extern "C" zeroc_result_t zeroc_i_cuda_adamw_mixed(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                   float *param, float *m, float *v,
                                                   const void *grad, zeroc_dtype_t grad_dt,
                                                   void *out, zeroc_dtype_t out_dt, size_t n,
                                                   const zeroc_adamw_args_t *a) {
  if (n == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("adamw_mixed", param);
  ZC_NONNULL("adamw_mixed", m);
  ZC_NONNULL("adamw_mixed", v);
  ZC_NONNULL("adamw_mixed", grad);
  ZC_NONNULL("adamw_mixed", a);
  if ((grad_dt != ZEROC_FP32 && grad_dt != ZEROC_BF16) ||
      (out && out_dt != ZEROC_FP32 && out_dt != ZEROC_BF16))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "adamw_mixed: gradient %s, output %s: accepted fp32 and bf16",
                      zeroc_dtype_name(grad_dt), zeroc_dtype_name(out_dt));
  const AdamW f = adamw_functor(param, m, v, NULL, a);
  const bool vec = zc_aligned16(param) && zc_aligned16(m) && zc_aligned16(v) &&
                   zc_aligned16(grad) && (!out || zc_aligned16(out));
  cudaStream_t st = zc_stream(k, s);
  const bool gb = grad_dt == ZEROC_BF16, ob = out && out_dt == ZEROC_BF16;
  if (gb && ob) return adamw_mixed_launch<bf16, bf16>(k, st, f, grad, out, n, vec);
  if (gb) return adamw_mixed_launch<bf16, float>(k, st, f, grad, out, n, vec);
  if (ob) return adamw_mixed_launch<float, bf16>(k, st, f, grad, out, n, vec);
  return adamw_mixed_launch<float, float>(k, st, f, grad, out, n, vec);
}

/* ---- sum of squares: fixed grid and tree, so the double it adds repeats bit for bit -- */

#define SUMSQ_THREADS 256

// x (n, T: fp32 or bf16, widened exactly) -> part (gridDim.x): each block's sum of x^2 in double
template <typename T>
__global__ void sumsq_partial_kernel(double *part, const T *x, size_t n, bool vec) {
  __shared__ double sh[32];
  double acc = 0.0;
  const size_t stride = (size_t)gridDim.x * blockDim.x * 8;
  for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n; i += stride) {
    float v[8];
    zc_load8(x, i, n, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) acc += (double)v[e] * (double)v[e];
  }
  acc = zc_block_sum(acc, sh);
  if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

// part (parts) -> *out += their sum
__global__ void sumsq_final_kernel(double *out, const double *part, int parts) {
  __shared__ double sh[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) acc += part[i];
  acc = zc_block_sum(acc, sh);
  if (threadIdx.x == 0) *out += acc;
}

/* The partials of stream st: its own slot, claimed on its first sumsq. Two streams
 * sharing one buffer would race (one's first pass overwriting what the other's
 * second pass reads); the slots are allocated with the kernels, not here. */
static zeroc_result_t sumsq_slot(zc_state_t *z, cudaStream_t st, double **part) {
  pthread_mutex_lock(&z->sumsq_mu);
  int i = 0;
  while (i < z->sumsq_used && z->sumsq_owner[i] != st) i++;
  if (i == z->sumsq_used && i < ZC_SUMSQ_STREAMS) z->sumsq_owner[z->sumsq_used++] = st;
  pthread_mutex_unlock(&z->sumsq_mu);
  if (i == ZC_SUMSQ_STREAMS)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "sumsq on a %dth stream: accepted at most %d streams per kernels object "
                      "(ZC_SUMSQ_STREAMS)",
                      ZC_SUMSQ_STREAMS + 1, ZC_SUMSQ_STREAMS);
  *part = z->sumsq_part + (size_t)i * ZC_SUMSQ_BLOCKS;
  return ZEROC_OK;
}

extern "C" zeroc_result_t zeroc_i_cuda_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, double *out,
                                             const void *x, zeroc_dtype_t dt, size_t n) {
  ZC_NONNULL("sumsq", out);
  if (n == 0) return ZEROC_OK;
  ZC_NONNULL("sumsq", x);
  cudaStream_t st = zc_stream(k, s);
  /* the grid depends on n only, not on the device, so the order of the sum is fixed */
  size_t blocks = (n + SUMSQ_THREADS * 8 - 1) / (SUMSQ_THREADS * 8);
  if (blocks > ZC_SUMSQ_BLOCKS) blocks = ZC_SUMSQ_BLOCKS;
  dim3 grid1((unsigned)blocks), block1(SUMSQ_THREADS);
  double *part = NULL;
  ZEROC_CHECK(sumsq_slot(zc_state(k), st, &part));
  if (dt == ZEROC_BF16)
    sumsq_partial_kernel<bf16><<<grid1, block1, 0, st>>>(part, (const bf16 *)x, n, zc_aligned16(x));
  else
    sumsq_partial_kernel<float>
        <<<grid1, block1, 0, st>>>(part, (const float *)x, n, zc_aligned16(x));
  ZC_LAUNCHED("sumsq_partial_kernel", grid1, block1, 0);
  dim3 grid2(1), block2(1024);
  sumsq_final_kernel<<<grid2, block2, 0, st>>>(out, part, (int)blocks);
  ZC_LAUNCHED("sumsq_final_kernel", grid2, block2, 0);
  return ZEROC_OK;
}

/* ---- the step's clipping multiplier, decided on the device ------------------------- */

__global__ void clip_scale_kernel(float *scale, const double *sumsq, float clip) {
  if (threadIdx.x == 0) *scale = zeroc_i_clip_scale(*sumsq, clip);
}

extern "C" zeroc_result_t zeroc_i_cuda_clip_scale(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                  float *scale, const double *sumsq, float clip) {
  ZC_NONNULL("clip_scale", scale);
  ZC_NONNULL("clip_scale", sumsq);
  dim3 grid(1), block(32); /* one warp, one thread writing */
  clip_scale_kernel<<<grid, block, 0, zc_stream(k, s)>>>(scale, sumsq, clip);
  ZC_LAUNCHED("clip_scale_kernel", grid, block, 0);
  return ZEROC_OK;
}

/* ---- a loss head's mean, added on the device --------------------------------------- */

// *acc += (float)(sum of x (n) in double / denom); one block, so the order is fixed by n
__global__ void mean_add_kernel(double *acc, const float *x, size_t n, double denom) {
  __shared__ double sh[32];
  double sum = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) sum += (double)x[i];
  sum = zc_block_sum(sum, sh);
  if (threadIdx.x == 0) *acc += (double)(float)(sum / denom);
}

extern "C" zeroc_result_t zeroc_i_cuda_mean_add(zeroc_kernels_t *k, zeroc_stream_t *s, double *acc,
                                                const float *x, size_t n, double denom) {
  ZC_NONNULL("mean_add", acc);
  if (n) ZC_NONNULL("mean_add", x);
  /* the losses of one micro-batch (B x T, a few 10^4): one block reads them in microseconds */
  dim3 grid(1), block(1024);
  mean_add_kernel<<<grid, block, 0, zc_stream(k, s)>>>(acc, x, n, denom);
  ZC_LAUNCHED("mean_add_kernel", grid, block, 0);
  return ZEROC_OK;
}
