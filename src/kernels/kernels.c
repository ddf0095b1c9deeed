/*
 * kernels/kernels.c - the dispatch: each zeroc_k_* checks its shape arguments
 * and runs the cpu twin inline or hands over to the cuda implementation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/env.h"
#include "core/error.h"
#include "device/device.h"
#include "kernels/clip.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#ifdef ZEROC_HAVE_CUDA
#include "kernels/attention_cudnn.h"
#include "kernels/cuda/cuda_kernels.h"
#endif

#define POSITIVE(...) ZEROC_CHECK(positive(__func__, (long[]){__VA_ARGS__}, #__VA_ARGS__))

/* Shape arguments must be >= 1. */
static zeroc_result_t positive(const char *fn, const long *v, const char *names) {
  int n = 1;
  for (const char *p = names; *p; p++) n += *p == ',';
  for (int i = 0; i < n; i++)
    if (v[i] < 1)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: shape (%s) has %ld", fn, names, v[i]);
  return ZEROC_OK;
}

#ifdef ZEROC_HAVE_CUDA
/* The cuda kernels' knobs, read from the environment once per kernels object. */
static zeroc_result_t cuda_knobs(zeroc_i_cuda_knobs_t *kn) {
  ZEROC_CHECK(zeroc__env_i64("ZEROC_CUDA_SCRATCH_MB", ZEROC_K_SCRATCH_MB_DEFAULT, &kn->scratch_mb));
  ZEROC_CHECK(zeroc__env_i64("ZEROC_CUDA_TF32", 0, &kn->tf32));
  ZEROC_CHECK(zeroc__env_i64("ZEROC_CUDA_FLASH", 1, &kn->flash));
  ZEROC_CHECK(zeroc__env_i64("ZEROC_CUDA_LT_EPILOGUE", 1, &kn->lt_epilogue));
  return ZEROC_OK;
}
#endif

zeroc_result_t zeroc_kernels_create(const zeroc__devmem_t *mem, zeroc_stream_t *compute,
                                    zeroc_dtype_t dtype, zeroc_kernels_t **out) {
  zeroc_device_kind_t dev = mem->dev->kind;
  if (dtype != ZEROC_FP32 && dtype != ZEROC_BF16)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "kernel dtype %s: accepted fp32, bf16",
                      zeroc_dtype_name(dtype));
  if (dev == ZEROC_DEVICE_CPU && dtype != ZEROC_FP32)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "cpu kernels compute in fp32 (bf16 parameters are converted for compute)");
  zeroc_kernels_t *k = calloc(1, sizeof *k);
  if (!k) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "kernels");
  k->mem = mem;
  k->compute = compute;
  k->device = dev;
  k->dtype = dtype;
#ifdef ZEROC_HAVE_CUDA
  if (dev == ZEROC_DEVICE_CUDA) {
    zeroc_i_cuda_knobs_t knobs;
    zeroc_result_t r = cuda_knobs(&knobs);
    if (!r) r = zeroc_i_cuda_kernels_init(k, &knobs);
    if (!r) {
      r = zeroc__cudnn_attention_create(k);
      if (r) zeroc_i_cuda_kernels_fini(k);
    }
    if (r) {
      free(k);
      return r;
    }
  }
#endif
  *out = k;
  return ZEROC_OK;
}

void zeroc_kernels_destroy(zeroc_kernels_t *k) {
  if (!k) return;
#ifdef ZEROC_HAVE_CUDA
  if (k->device == ZEROC_DEVICE_CUDA) {
    zeroc_i_cuda_kernels_fini(k); /* synchronises the device: no plan is still running */
    zeroc__cudnn_attention_destroy(k);
  }
#endif
  free(k);
}

void zeroc_k_set_deterministic(zeroc_kernels_t *k, int on) {
  k->deterministic = on != 0;
#ifdef ZEROC_HAVE_CUDA
  if (k->device == ZEROC_DEVICE_CUDA) zeroc__cudnn_attention_set_deterministic(k, on != 0);
#endif
}

void zeroc_k_attention_backend(zeroc_device_kind_t dev, zeroc_dtype_t dtype, char *buf, size_t n) {
  if (!n) return;
  if (dev != ZEROC_DEVICE_CUDA) {
    snprintf(buf, n, "cpu kernels (zeroc's own, fp32)");
    return;
  }
#ifdef ZEROC_HAVE_CUDA
  if (dtype != ZEROC_BF16) {
    snprintf(buf, n, "zeroc's own cuda kernels (%s: cuDNN's path is bf16 only)",
             zeroc_dtype_name(dtype));
    return;
  }
  zeroc__cudnn_attention_describe(buf, n);
#else
  (void)dtype;
  snprintf(buf, n, "none: this zeroc was built without cuda");
#endif
}

zeroc_result_t zeroc_k_encoder_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       const int32_t *inp, const void *wte, const void *wpe, int B,
                                       int T, int C) {
  POSITIVE(B, T, C);
  CUDA_OR_CPU(encoder_forward, k, s, out, inp, wte, wpe, B, T, C);
  zeroc__cpu_encoder_forward(out, inp, wte, wpe, B, T, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_encoder_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                        void *dwpe, const void *dout, const int32_t *inp, int B,
                                        int T, int C) {
  POSITIVE(B, T, C);
  CUDA_OR_CPU(encoder_backward, k, s, dwte, dwpe, dout, inp, B, T, C);
  zeroc__cpu_encoder_backward(dwte, dwpe, dout, inp, B, T, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                         float *mean, float *rstd, const void *inp,
                                         const void *weight, const void *bias, int N, int C) {
  POSITIVE(N, C);
  CUDA_OR_CPU(layernorm_forward, k, s, out, mean, rstd, inp, weight, bias, N, C);
  zeroc__cpu_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_residual_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res,
                                                  void *out, float *mean, float *rstd,
                                                  const void *a, const void *b, const void *weight,
                                                  const void *bias, int N, int C) {
  POSITIVE(N, C);
  if (out && (out == res || out == a || out == b))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "residual_layernorm_forward: out %p aliases res %p, a %p or b %p; accepted "
                      "res aliasing a or b, out apart",
                      out, res, a, b);
  CUDA_OR_CPU(residual_layernorm_forward, k, s, res, out, mean, rstd, a, b, weight, bias, N, C);
  zeroc__cpu_residual_layernorm_forward(res, out, mean, rstd, a, b, weight, bias, N, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_layernorm_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                             void *dweight, void *dbias, const void *dout,
                                             const void *inp, const void *weight, const float *mean,
                                             const float *rstd, int N, int C, const void *dres,
                                             unsigned flags) {
  POSITIVE(N, C);
  if ((flags & ~ZEROC_K_DINP_SET) || (dres && !(flags & ZEROC_K_DINP_SET)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "layernorm_backward_ex: flags 0x%x, dres %p; accepted flags "
                      "ZEROC_K_DINP_SET, dres only with it",
                      flags, dres);
  /* the twins take dinp's base: dres (NULL: +0) when set, else dinp itself (+=) */
  const void *base = flags & ZEROC_K_DINP_SET ? dres : dinp;
  CUDA_OR_CPU(layernorm_backward, k, s, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
              base);
  zeroc__cpu_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, base);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_layernorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                          void *dweight, void *dbias, const void *dout,
                                          const void *inp, const void *weight, const float *mean,
                                          const float *rstd, int N, int C) {
  return zeroc_k_layernorm_backward_ex(k, s, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                       C, NULL, 0);
}

zeroc_result_t zeroc_k_matmul_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                      const void *inp, const void *weight, const void *bias, int N,
                                      int C, int OC) {
  POSITIVE(N, C, OC);
  CUDA_OR_CPU(matmul_forward, k, s, out, inp, weight, bias, N, C, OC);
  zeroc__cpu_matmul_forward(out, inp, weight, bias, N, C, OC);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_matmul_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                       void *dweight, void *dbias, const void *dout,
                                       const void *inp, const void *weight, int N, int C, int OC) {
  POSITIVE(N, C, OC);
  CUDA_OR_CPU(matmul_backward, k, s, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  zeroc__cpu_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_matmul_forward_gelu(zeroc_kernels_t *k, zeroc_stream_t *s, void *pre,
                                           void *out, const void *inp, const void *weight,
                                           const void *bias, int N, int C, int OC) {
  POSITIVE(N, C, OC);
  CUDA_OR_CPU(matmul_forward_gelu, k, s, pre, out, inp, weight, bias, N, C, OC);
  zeroc__cpu_matmul_forward(pre, inp, weight, bias, N, C, OC);
  zeroc__cpu_gelu_forward(out, pre, (size_t)N * (size_t)OC);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_matmul_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                          void *dweight, void *dbias, const void *dout,
                                          const void *inp, const void *weight, int N, int C,
                                          int OC, const void *pre, void *dpre_bias,
                                          unsigned flags) {
  POSITIVE(N, C, OC);
  if ((flags & ~ZEROC_K_DINP_SET) || (pre && !dinp) || (dpre_bias && !pre))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "matmul_backward_ex: flags 0x%x, pre %p, dinp %p, dpre_bias %p; accepted "
                      "flags ZEROC_K_DINP_SET, pre only with dinp, dpre_bias only with pre",
                      flags, pre, dinp, dpre_bias);
  CUDA_OR_CPU(matmul_backward_ex, k, s, dinp, dweight, dbias, dout, inp, weight, N, C, OC, pre,
              dpre_bias, flags);
  zeroc__cpu_matmul_backward_ex(dinp, dweight, dbias, dout, inp, weight, N, C, OC, pre, dpre_bias,
                                (flags & ZEROC_K_DINP_SET) != 0);
  return ZEROC_OK;
}

/* A dropout descriptor: NULL, or 0 <= p < 1 with positive sizes. */
zeroc_result_t zeroc__kernels_check_dropout(const char *fn, const zeroc_dropout_t *d) {
  if (!d) return ZEROC_OK;
  if (!(d->p >= 0 && d->p < 1) || d->T < 1 || d->Tmax < d->T || d->width < 1 || d->first < 0 ||
      d->row0 < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: dropout p %g, T %d, Tmax %d, width %d, first %d, row0 %lld; accepted "
                      "0 <= p < 1, 1 <= T <= Tmax, width >= 1, first and row0 >= 0",
                      fn, (double)d->p, d->T, d->Tmax, d->width, d->first, (long long)d->row0);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                         float *lse, const void *qkv, int B, int T, int C, int NH,
                                         const zeroc_dropout_t *drop) {
  POSITIVE(B, T, C, NH);
  if (C % NH)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "attention: C %d not divisible by NH %d", C, NH);
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
#ifdef ZEROC_HAVE_CUDA
  if (k->device == ZEROC_DEVICE_CUDA) { /* cuDNN's flash attention where it applies */
    int done = 0;
    ZEROC_CHECK(
        zeroc__cudnn_attention_forward(k, s, out, lse, qkv, B, T, C, NH, drop, &done));
    if (done) return ZEROC_OK;
  }
#endif
  CUDA_OR_CPU(attention_forward, k, s, out, lse, qkv, B, T, C, NH, drop);
  zeroc__cpu_attention_forward(out, lse, qkv, B, T, C, NH, drop);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                             const void *dout, const void *qkv, const void *out,
                                             const float *lse, int B, int T, int C, int NH,
                                             const zeroc_dropout_t *drop, unsigned flags) {
  POSITIVE(B, T, C, NH);
  if (C % NH)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "attention: C %d not divisible by NH %d", C, NH);
  if (flags & ~ZEROC_K_DQKV_SET)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "attention_backward_ex: flags 0x%x; accepted ZEROC_K_DQKV_SET", flags);
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  const int set = (flags & ZEROC_K_DQKV_SET) != 0;
#ifdef ZEROC_HAVE_CUDA
  if (k->device == ZEROC_DEVICE_CUDA) { /* cuDNN writes dq, dk, dv: only when setting */
    int done = 0;
    ZEROC_CHECK(zeroc__cudnn_attention_backward(k, s, dqkv, dout, qkv, out, lse, B, T, C, NH,
                                                drop, flags, &done));
    if (done) return ZEROC_OK;
  }
#endif
  if (set && k->device == ZEROC_DEVICE_CUDA && dqkv)
    ZEROC_CHECK(zeroc_memset_async(s ? s : k->compute, dqkv, 0,
                                   (size_t)B * T * 3 * C * zeroc_dtype_size(k->dtype)));
  CUDA_OR_CPU(attention_backward, k, s, dqkv, dout, qkv, out, lse, B, T, C, NH, drop);
  zeroc__cpu_attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, drop, set);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                          const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int C, int NH,
                                          const zeroc_dropout_t *drop) {
  return zeroc_k_attention_backward_ex(k, s, dqkv, dout, qkv, out, lse, B, T, C, NH, drop, 0);
}

static zeroc_result_t check_block(const char *fn, const zeroc_attn_block_t *b) {
  if (!b || b->B < 1 || b->NH < 1 || b->HS < 1 || b->Tq < 1 || b->Tk < 1 ||
      (b->causal && (b->Tq != b->Tk || b->q_pos != b->k_pos)) || b->q_pos < 0 || b->k_pos < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: block B %d NH %d HS %d Tq %d Tk %d causal %d q_pos %lld k_pos %lld; "
                      "accepted positive sizes, a causal block square at one position",
                      fn, b ? b->B : 0, b ? b->NH : 0, b ? b->HS : 0, b ? b->Tq : 0,
                      b ? b->Tk : 0, b ? b->causal : 0, b ? (long long)b->q_pos : 0LL,
                      b ? (long long)b->k_pos : 0LL);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_block_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *pout,
                                               float *plse, const void *q, const void *kk,
                                               const void *v, const zeroc_attn_block_t *blk,
                                               const zeroc_dropout_t *drop) {
  ZEROC_CHECK(check_block(__func__, blk));
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  CUDA_OR_CPU(attention_block_forward, k, s, pout, plse, q, kk, v, blk, drop);
  zeroc__cpu_attention_block_forward(pout, plse, q, kk, v, blk, drop);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_merge(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       float *lse, const void *pout, const float *plse,
                                       const zeroc_attn_block_t *blk, int first) {
  ZEROC_CHECK(check_block(__func__, blk));
  CUDA_OR_CPU(attention_merge, k, s, out, lse, pout, plse, blk, first);
  zeroc__cpu_attention_merge(out, lse, pout, plse, blk, first);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_block_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dq,
                                                void *dk, void *dv, const void *dout,
                                                const void *q, const void *kk, const void *v,
                                                const void *out, const float *lse,
                                                const zeroc_attn_block_t *blk,
                                                const zeroc_dropout_t *drop) {
  ZEROC_CHECK(check_block(__func__, blk));
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  CUDA_OR_CPU(attention_block_backward, k, s, dq, dk, dv, dout, q, kk, v, out, lse, blk, drop);
  zeroc__cpu_attention_block_backward(dq, dk, dv, dout, q, kk, v, out, lse, blk, drop);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_copy_rows(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst, size_t dst_t,
                                 const void *src, size_t src_t, size_t rows, size_t width,
                                 int add) {
  if (!rows || !width) return ZEROC_OK;
  CUDA_OR_CPU(copy_rows, k, s, dst, dst_t, src, src_t, rows, width, add);
  zeroc__cpu_copy_rows(dst, dst_t, src, src_t, rows, width, add);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_gelu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                    const void *inp, size_t N) {
  CUDA_OR_CPU(gelu_forward, k, s, out, inp, N);
  zeroc__cpu_gelu_forward(out, inp, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_gelu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                     const void *inp, const void *dout, size_t N) {
  CUDA_OR_CPU(gelu_backward, k, s, dinp, inp, dout, N);
  zeroc__cpu_gelu_backward(dinp, inp, dout, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_residual_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                        const void *a, const void *b, size_t N) {
  CUDA_OR_CPU(residual_forward, k, s, out, a, b, N);
  zeroc__cpu_residual_forward(out, a, b, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_add(zeroc_kernels_t *k, zeroc_stream_t *s, void *y, const void *x,
                           size_t N) {
  CUDA_OR_CPU(add, k, s, y, x, N);
  zeroc__cpu_add(y, x, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_dropout(zeroc_kernels_t *k, zeroc_stream_t *s, void *out, const void *in,
                               const zeroc_dropout_t *drop, int N, int C) {
  POSITIVE(N, C);
  if (!drop) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_k_dropout: NULL descriptor");
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  CUDA_OR_CPU(dropout, k, s, out, in, drop, N, C);
  zeroc__cpu_dropout(out, in, drop, N, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_crossentropy_forward_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     float *losses, void *logits,
                                                     const int32_t *targets, int N, int V, int Vp,
                                                     float dloss) {
  POSITIVE(N, V, Vp);
  if (Vp < V) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "crossentropy: Vp %d < V %d", Vp, V);
  CUDA_OR_CPU(crossentropy_forward_backward, k, s, losses, logits, targets, N, V, Vp, dloss);
  zeroc__cpu_crossentropy_forward_backward(losses, logits, targets, N, V, Vp, dloss);
  return ZEROC_OK;
}

/* ---- vocabulary-parallel kernels ------------------------------------------------ */

/* The slice [v0, v0+Vl) must be a valid range of rows. */
static zeroc_result_t vocab_slice(const char *fn, int v0, int Vl) {
  if (v0 < 0 || Vl < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: vocabulary slice v0 %d, Vl %d: accepted v0 >= 0, Vl >= 1", fn, v0, Vl);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_vocab_embed_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                           const int32_t *inp, const void *wte, const void *wpe,
                                           int B, int T, int C, int v0, int Vl) {
  POSITIVE(B, T, C);
  ZEROC_CHECK(vocab_slice(__func__, v0, Vl));
  CUDA_OR_CPU(vocab_embed_forward, k, s, out, inp, wte, wpe, B, T, C, v0, Vl);
  zeroc__cpu_vocab_embed_forward(out, inp, wte, wpe, B, T, C, v0, Vl);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_vocab_embed_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                            void *dwpe, const void *dout, const int32_t *inp, int B,
                                            int T, int C, int v0, int Vl) {
  POSITIVE(B, T, C);
  ZEROC_CHECK(vocab_slice(__func__, v0, Vl));
  CUDA_OR_CPU(vocab_embed_backward, k, s, dwte, dwpe, dout, inp, B, T, C, v0, Vl);
  zeroc__cpu_vocab_embed_backward(dwte, dwpe, dout, inp, B, T, C, v0, Vl);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_vocab_ce_local(zeroc_kernels_t *k, zeroc_stream_t *s, float *mx, float *xt,
                                      const void *logits, const int32_t *targets, int N, int Vl,
                                      int v0, int V) {
  POSITIVE(N, Vl, V);
  ZEROC_CHECK(vocab_slice(__func__, v0, Vl));
  CUDA_OR_CPU(vocab_ce_local, k, s, mx, xt, logits, targets, N, Vl, v0, V);
  zeroc__cpu_vocab_ce_local(mx, xt, logits, targets, N, Vl, v0, V);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_vocab_ce_sumexp(zeroc_kernels_t *k, zeroc_stream_t *s, float *se,
                                       const void *logits, const float *mx, int N, int Vl, int v0,
                                       int V) {
  POSITIVE(N, Vl, V);
  ZEROC_CHECK(vocab_slice(__func__, v0, Vl));
  CUDA_OR_CPU(vocab_ce_sumexp, k, s, se, logits, mx, N, Vl, v0, V);
  zeroc__cpu_vocab_ce_sumexp(se, logits, mx, N, Vl, v0, V);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_vocab_ce_finish(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                       void *logits, const int32_t *targets, const float *mx,
                                       const float *se, const float *xt, int N, int Vl, int v0,
                                       int V, float dloss) {
  POSITIVE(N, Vl, V);
  ZEROC_CHECK(vocab_slice(__func__, v0, Vl));
  CUDA_OR_CPU(vocab_ce_finish, k, s, losses, logits, targets, mx, se, xt, N, Vl, v0, V, dloss);
  zeroc__cpu_vocab_ce_finish(losses, logits, targets, mx, se, xt, N, Vl, v0, V, dloss);
  return ZEROC_OK;
}

/* ---- engine kernels -------------------------------------------------------------
 * These also run on the gather and reduce streams. The cpu twins are handed
 * to the stream (zeroc__stream_enqueue), which runs them in its order: at once
 * on the calling thread for the inline compute stream, on the worker thread
 * for the others. A NULL stream runs them on the calling thread. */

typedef struct {
  enum {
    OP_CAST,
    OP_ACCUMULATE,
    OP_SCALE,
    OP_ADD_TO,
    OP_SUMSQ,
    OP_MEAN_ADD,
    OP_CLIP_SCALE,
    OP_ADAMW,
    OP_ADAMW_MIXED
  } op;
  void *dst;
  const void *src;
  int dst_dt, src_dt;
  size_t n;
  float a;
  double denom; /* mean_add */
  float *m, *v; /* adamw */
  void *out;    /* adamw_mixed: the rounded copy (dst_dt), or NULL */
  zeroc_adamw_args_t adam;
} eng_op_t;

/* AdamW's gradient multiplier: decided on the device (read when the op runs, in the
 * stream's order) or given; NaN: a skipped step */
static float adam_scale(const zeroc_adamw_args_t *a) {
  return a->scale_dev ? *a->scale_dev : a->grad_scale;
}

static zeroc_result_t run_eng_op(void *p) {
  eng_op_t *o = p;
  const zeroc_adamw_args_t *a = &o->adam;
  float gs;
  switch (o->op) {
  case OP_CAST:
    zeroc__cpu_cast(o->dst, o->dst_dt, o->src, o->src_dt, o->n);
    break;
  case OP_ACCUMULATE:
    zeroc__cpu_accumulate(o->dst, o->src, o->src_dt, o->n, o->a);
    break;
  case OP_SCALE:
    zeroc__cpu_scale(o->dst, o->n, o->a);
    break;
  case OP_ADD_TO:
    zeroc__cpu_add_to(o->dst, o->dst_dt, o->src, o->n);
    break;
  case OP_SUMSQ:
    *(double *)o->dst += zeroc__cpu_sumsq(o->src, o->src_dt, o->n);
    break;
  case OP_MEAN_ADD:
    *(double *)o->dst += zeroc__cpu_mean(o->src, o->n, o->denom);
    break;
  case OP_CLIP_SCALE:
    *(float *)o->dst = zeroc_i_clip_scale(*(const double *)o->src, o->a);
    break;
  case OP_ADAMW:
    if (isnan(gs = adam_scale(a))) break; /* a skipped step */
    zeroc__cpu_adamw(o->dst, o->m, o->v, o->src, o->n, a->lr, a->beta1, a->beta2, a->eps,
                     a->weight_decay, gs, a->bias_corr1, a->bias_corr2);
    break;
  case OP_ADAMW_MIXED:
    if (isnan(gs = adam_scale(a))) break;
    zeroc__cpu_adamw_mixed(o->dst, o->m, o->v, o->src, o->src_dt, o->out, o->dst_dt, o->n, a->lr,
                           a->beta1, a->beta2, a->eps, a->weight_decay, gs, a->bias_corr1,
                           a->bias_corr2);
    break;
  }
  return ZEROC_OK;
}

/* Runs a cpu engine kernel in `s`'s order. */
static zeroc_result_t cpu_in_order(zeroc_stream_t *s, const eng_op_t *o) {
  if (!s) return run_eng_op((void *)o);
  return zeroc__stream_enqueue(s, run_eng_op, o, sizeof *o);
}

static int fp32_or_bf16(zeroc_dtype_t dt) { return dt == ZEROC_FP32 || dt == ZEROC_BF16; }

zeroc_result_t zeroc_k_cast(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst, zeroc_dtype_t dst_dt,
                            const void *src, zeroc_dtype_t src_dt, size_t n) {
  if (!fp32_or_bf16(dst_dt) || !fp32_or_bf16(src_dt))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cast %s -> %s: accepted fp32 and bf16",
                      zeroc_dtype_name(src_dt), zeroc_dtype_name(dst_dt));
  CUDA_OR_CPU(cast, k, s, dst, dst_dt, src, src_dt, n);
  return cpu_in_order(
      s, &(eng_op_t){
             .op = OP_CAST, .dst = dst, .src = src, .dst_dt = dst_dt, .src_dt = src_dt, .n = n});
}

zeroc_result_t zeroc_k_accumulate(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst,
                                  const void *src, zeroc_dtype_t src_dt, size_t n, float scale) {
  if (!fp32_or_bf16(src_dt))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "accumulate from %s: accepted fp32, bf16",
                      zeroc_dtype_name(src_dt));
  CUDA_OR_CPU(accumulate, k, s, dst, src, src_dt, n, scale);
  return cpu_in_order(
      s, &(eng_op_t){
             .op = OP_ACCUMULATE, .dst = dst, .src = src, .src_dt = src_dt, .n = n, .a = scale});
}

zeroc_result_t zeroc_k_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *x, size_t n, float a) {
  CUDA_OR_CPU(scale, k, s, x, n, a);
  return cpu_in_order(s, &(eng_op_t){.op = OP_SCALE, .dst = x, .n = n, .a = a});
}

zeroc_result_t zeroc_k_add_to(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                              zeroc_dtype_t dst_dt, const float *src, size_t n) {
  if (!fp32_or_bf16(dst_dt))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "add_to into %s: accepted fp32, bf16",
                      zeroc_dtype_name(dst_dt));
  CUDA_OR_CPU(add_to, k, s, dst, dst_dt, src, n);
  return cpu_in_order(
      s, &(eng_op_t){.op = OP_ADD_TO, .dst = dst, .dst_dt = dst_dt, .src = src, .n = n});
}

zeroc_result_t zeroc_k_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, double *out, const void *x,
                             zeroc_dtype_t dt, size_t n) {
  if (!fp32_or_bf16(dt))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "sumsq of %s: accepted fp32, bf16",
                      zeroc_dtype_name(dt));
  CUDA_OR_CPU(sumsq, k, s, out, x, dt, n);
  return cpu_in_order(s, &(eng_op_t){.op = OP_SUMSQ, .dst = out, .src = x, .src_dt = dt, .n = n});
}

zeroc_result_t zeroc_k_mean_add(zeroc_kernels_t *k, zeroc_stream_t *s, double *acc, const float *x,
                                size_t n, double denom) {
  if (!(denom > 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "mean_add: denominator %g: must be > 0", denom);
  CUDA_OR_CPU(mean_add, k, s, acc, x, n, denom);
  return cpu_in_order(s, &(eng_op_t){.op = OP_MEAN_ADD, .dst = acc, .src = x, .n = n, .denom = denom});
}

zeroc_result_t zeroc_k_clip_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *scale,
                                  const double *sumsq, float clip) {
  if (!(clip >= 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "clip_scale: clip %g: accepted >= 0 (0 off)", clip);
  CUDA_OR_CPU(clip_scale, k, s, scale, sumsq, clip);
  return cpu_in_order(s, &(eng_op_t){.op = OP_CLIP_SCALE, .dst = scale, .src = sumsq, .a = clip});
}

zeroc_result_t zeroc_k_adamw(zeroc_kernels_t *k, zeroc_stream_t *s, float *param, float *m,
                             float *v, const float *grad, size_t n, const zeroc_adamw_args_t *a) {
  CUDA_OR_CPU(adamw, k, s, param, m, v, grad, n, a);
  return cpu_in_order(
      s,
      &(eng_op_t){.op = OP_ADAMW, .dst = param, .m = m, .v = v, .src = grad, .n = n, .adam = *a});
}

zeroc_result_t zeroc_k_adamw_mixed(zeroc_kernels_t *k, zeroc_stream_t *s, float *param, float *m,
                                   float *v, const void *grad, zeroc_dtype_t grad_dt, void *out,
                                   zeroc_dtype_t out_dt, size_t n, const zeroc_adamw_args_t *a) {
  if (!fp32_or_bf16(grad_dt) || (out && !fp32_or_bf16(out_dt)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "adamw_mixed: gradient %s, output %s: accepted fp32 and bf16",
                      zeroc_dtype_name(grad_dt), zeroc_dtype_name(out_dt));
  CUDA_OR_CPU(adamw_mixed, k, s, param, m, v, grad, grad_dt, out, out_dt, n, a);
  return cpu_in_order(s, &(eng_op_t){.op = OP_ADAMW_MIXED,
                                     .dst = param,
                                     .m = m,
                                     .v = v,
                                     .src = grad,
                                     .src_dt = grad_dt,
                                     .out = out,
                                     .dst_dt = out_dt,
                                     .n = n,
                                     .adam = *a});
}

/* ---- host kernels ----------------------------------------------------------------- */

zeroc_result_t zeroc_k_host_cast(void *dst, zeroc_dtype_t dst_dt, const void *src,
                                 zeroc_dtype_t src_dt, size_t n) {
  if (!fp32_or_bf16(dst_dt) || !fp32_or_bf16(src_dt))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "host cast %s -> %s: accepted fp32 and bf16",
                      zeroc_dtype_name(src_dt), zeroc_dtype_name(dst_dt));
  zeroc__cpu_cast(dst, dst_dt, src, src_dt, n);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_host_adamw(float *param, float *m, float *v, const float *grad, size_t n,
                                  const zeroc_adamw_args_t *a) {
  if (a->scale_dev)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "host_adamw: the gradient's multiplier must be given as grad_scale, not in "
                      "device memory (scale_dev)");
  zeroc__cpu_adamw(param, m, v, grad, n, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                   a->grad_scale, a->bias_corr1, a->bias_corr2);
  return ZEROC_OK;
}

zeroc_dtype_t zeroc_kernels_compute_dtype(zeroc_device_kind_t dev, zeroc_dtype_t param_dtype) {
  /* the cpu kernels compute in fp32 only; cuda computes in the parameters' dtype */
  return dev == ZEROC_DEVICE_CPU ? ZEROC_FP32 : param_dtype;
}

size_t zeroc__kernels_scratch_bytes(void) {
  int64_t mb = ZEROC_K_SCRATCH_MB_DEFAULT;
  /* a bad value stops zeroc_ctx_create first (zeroc__env_check_all); here it reads as unset */
  if (zeroc__env_i64("ZEROC_CUDA_SCRATCH_MB", ZEROC_K_SCRATCH_MB_DEFAULT, &mb) != ZEROC_OK)
    mb = ZEROC_K_SCRATCH_MB_DEFAULT;
  return (size_t)mb << 20;
}

size_t zeroc__kernels_device_bytes(zeroc_device_kind_t kind) {
  if (kind != ZEROC_DEVICE_CUDA) return 0;
  return ZEROC_K_LT_WORKSPACE_BYTES + zeroc__kernels_scratch_bytes() +
         (size_t)ZEROC_K_SUMSQ_STREAMS * ZEROC_K_SUMSQ_BLOCKS * sizeof(double);
}
