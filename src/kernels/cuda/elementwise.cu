/*
 * kernels/cuda/elementwise.cu - GPT-2's tanh GELU forward and backward (adding, or in
 * place on a gradient the matmul backward has just written), the residual
 * sum and the in-place add: memory-bound, 8 elements per thread with 16-byte accesses
 * when every pointer is 16-byte aligned, element by element otherwise and at the tail.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.cuh"

// inp (n) -> out (n)
template <typename T> struct GeluForward {
  T *out;
  const T *inp;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float v[8];
    zc_load8(inp, i, n, vec, v);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = gelu(v[e]);
    zc_store8(out, i, n, vec, v);
  }
};

// inp, dout (n) -> dinp (n) +=
template <typename T> struct GeluBackward {
  T *dinp;
  const T *inp, *dout;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float x[8], g[8], d[8];
    zc_load8(inp, i, n, vec, x);
    zc_load8(dout, i, n, vec, g);
    zc_load8(dinp, i, n, vec, d);
#pragma unroll
    for (int e = 0; e < 8; e++) d[e] += gelu_grad(x[e]) * g[e];
    zc_store8(dinp, i, n, vec, d);
  }
};

// inp (n), d (n) -> d = gelu'(inp) * d: the backward when d was just written (no zeroed
// gradient to add to)
template <typename T> struct GeluScale {
  T *d;
  const T *inp;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float x[8], g[8];
    zc_load8(inp, i, n, vec, x);
    zc_load8(d, i, n, vec, g);
#pragma unroll
    for (int e = 0; e < 8; e++) g[e] = gelu_grad(x[e]) * g[e];
    zc_store8(d, i, n, vec, g);
  }
};

// a, b (n) -> out (n); out may alias a or b: each element is read before it is written
template <typename T> struct Residual {
  T *out;
  const T *a, *b;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float x[8], y[8];
    zc_load8(a, i, n, vec, x);
    zc_load8(b, i, n, vec, y);
#pragma unroll
    for (int e = 0; e < 8; e++) x[e] += y[e];
    zc_store8(out, i, n, vec, x);
  }
};

extern "C" zeroc_result_t zeroc_i_cuda_gelu_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                    void *out, const void *inp, size_t N) {
  if (N == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("gelu_forward", out);
  ZC_NONNULL("gelu_forward", inp);
  const bool vec = zc_aligned16(out) && zc_aligned16(inp);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "gelu_forward<bf16>",
                           GeluForward<bf16>{(bf16 *)out, (const bf16 *)inp}, N, vec);
  return zc_launch_packs(k, zc_stream(k, s), "gelu_forward<fp32>",
                         GeluForward<float>{(float *)out, (const float *)inp}, N, vec);
}

extern "C" zeroc_result_t zeroc_i_cuda_gelu_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     void *dinp, const void *inp, const void *dout,
                                                     size_t N) {
  if (N == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("gelu_backward", dinp);
  ZC_NONNULL("gelu_backward", inp);
  ZC_NONNULL("gelu_backward", dout);
  const bool vec = zc_aligned16(dinp) && zc_aligned16(inp) && zc_aligned16(dout);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "gelu_backward<bf16>",
                           GeluBackward<bf16>{(bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout},
                           N, vec);
  return zc_launch_packs(
      k, zc_stream(k, s), "gelu_backward<fp32>",
      GeluBackward<float>{(float *)dinp, (const float *)inp, (const float *)dout}, N, vec);
}

extern "C" zeroc_result_t zeroc_i_cuda_gelu_scale(zeroc_kernels_t *k, zeroc_stream_t *s, void *d,
                                                  const void *inp, size_t N) {
  if (N == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("gelu_scale", d);
  ZC_NONNULL("gelu_scale", inp);
  const bool vec = zc_aligned16(d) && zc_aligned16(inp);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "gelu_scale<bf16>",
                           GeluScale<bf16>{(bf16 *)d, (const bf16 *)inp}, N, vec);
  return zc_launch_packs(k, zc_stream(k, s), "gelu_scale<fp32>",
                         GeluScale<float>{(float *)d, (const float *)inp}, N, vec);
}

extern "C" zeroc_result_t zeroc_i_cuda_residual_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                        void *out, const void *a, const void *b,
                                                        size_t N) {
  if (N == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("residual_forward", out);
  ZC_NONNULL("residual_forward", a);
  ZC_NONNULL("residual_forward", b);
  const bool vec = zc_aligned16(out) && zc_aligned16(a) && zc_aligned16(b);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "residual_forward<bf16>",
                           Residual<bf16>{(bf16 *)out, (const bf16 *)a, (const bf16 *)b}, N, vec);
  return zc_launch_packs(k, zc_stream(k, s), "residual_forward<fp32>",
                         Residual<float>{(float *)out, (const float *)a, (const float *)b}, N, vec);
}

// y (n) += x (n)
extern "C" zeroc_result_t zeroc_i_cuda_add(zeroc_kernels_t *k, zeroc_stream_t *s, void *y,
                                           const void *x, size_t N) {
  if (N == 0) return ZEROC_OK; /* nothing to do, pointers may be NULL */
  ZC_NONNULL("add", y);
  ZC_NONNULL("add", x);
  const bool vec = zc_aligned16(y) && zc_aligned16(x);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "add<bf16>",
                           Residual<bf16>{(bf16 *)y, (const bf16 *)y, (const bf16 *)x}, N, vec);
  return zc_launch_packs(k, zc_stream(k, s), "add<fp32>",
                         Residual<float>{(float *)y, (const float *)y, (const float *)x}, N, vec);
}

// in (N,C) -> out (N,C) = in * keep / (1 - p), keep from kernels/dropout.h; out may alias in
template <typename T> struct Dropout {
  T *out;
  const T *in;
  zeroc_dropout_t d;
  uint32_t thr;
  float sc;
  int C;
  __device__ void operator()(size_t i, size_t n, bool vec) const {
    float v[8];
    zc_load8(in, i, n, vec, v);
    int64_t row = (int64_t)(i / (size_t)C);
    uint32_t c = (uint32_t)(i % (size_t)C);
    uint64_t rk = zeroc_i_dropout_row_key(d.key, zeroc_i_dropout_row_rc(&d, row));
#pragma unroll
    for (int e = 0; e < 8; e++) {
      v[e] = zeroc_i_dropout_bits(rk, c) >= thr ? v[e] * sc : 0.0f;
      if (++c == (uint32_t)C) { /* the next row: its key comes from its (b, t) */
        c = 0;
        rk = zeroc_i_dropout_row_key(d.key, zeroc_i_dropout_row_rc(&d, ++row));
      }
    }
    zc_store8(out, i, n, vec, v);
  }
};

extern "C" zeroc_result_t zeroc_i_cuda_dropout(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                               const void *in, const zeroc_dropout_t *drop, int N,
                                               int C) {
  ZC_NONNULL("dropout", out);
  ZC_NONNULL("dropout", in);
  const size_t n = (size_t)N * (size_t)C;
  const bool vec = zc_aligned16(out) && zc_aligned16(in);
  const uint32_t thr = zeroc_i_dropout_threshold(drop->p);
  const float sc = zeroc_i_dropout_scale(drop->p);
  if (k->dtype == ZEROC_BF16)
    return zc_launch_packs(k, zc_stream(k, s), "dropout<bf16>",
                           Dropout<bf16>{(bf16 *)out, (const bf16 *)in, *drop, thr, sc, C}, n, vec);
  return zc_launch_packs(k, zc_stream(k, s), "dropout<fp32>",
                         Dropout<float>{(float *)out, (const float *)in, *drop, thr, sc, C}, n,
                         vec);
}
