/*
 * kernels/llama_kernels.c - the dispatch of the Llama-family kernels (llama_kernels.h):
 * shape checks, then the cpu twin inline or the cuda implementation.
 */
#include "kernels/llama_kernels.h"

#include <math.h>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"

/* Shape arguments N, C (or F) >= 1, eps > 0 (NaN refused) where there is one. */
static zeroc_result_t check_rows(const char *fn, int N, int C, double eps) {
  if (N < 1 || C < 1 || !(eps > 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: N %d, C %d, eps %g; accepted N, C >= 1 and eps > 0", fn, N, C, eps);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       float *rstd, const void *inp, const void *weight, float eps,
                                       int N, int C) {
  ZEROC_CHECK(check_rows(__func__, N, C, eps));
  CUDA_OR_CPU(rmsnorm_forward, k, s, NULL, out, rstd, inp, NULL, weight, eps, N, C);
  zeroc__cpu_rmsnorm_forward(out, rstd, inp, weight, eps, N, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_residual_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res,
                                                void *out, float *rstd, const void *a,
                                                const void *b, const void *weight, float eps, int N,
                                                int C) {
  ZEROC_CHECK(check_rows(__func__, N, C, eps));
  if (!res || !a || !b || out == res || out == a || out == b)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "residual_rmsnorm_forward: out %p, res %p, a %p, b %p; accepted res, a, b "
                      "set, res aliasing a or b, out apart",
                      out, res, a, b);
  CUDA_OR_CPU(rmsnorm_forward, k, s, res, out, rstd, a, b, weight, eps, N, C);
  zeroc__cpu_residual_rmsnorm_forward(res, out, rstd, a, b, weight, eps, N, C);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_rmsnorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                        void *dweight, const void *dout, const void *inp,
                                        const void *weight, const float *rstd, int N, int C,
                                        const void *dres, unsigned flags) {
  ZEROC_CHECK(check_rows(__func__, N, C, 1));
  if ((flags & ~ZEROC_K_DINP_SET) || (dres && !(flags & ZEROC_K_DINP_SET)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "rmsnorm_backward: flags 0x%x, dres %p; accepted flags ZEROC_K_DINP_SET, "
                      "dres only with it",
                      flags, dres);
  /* the twins take dinp's base: dres (NULL: +0) when set, else dinp itself (+=) */
  const void *base = flags & ZEROC_K_DINP_SET ? dres : dinp;
  CUDA_OR_CPU(rmsnorm_backward, k, s, dinp, dweight, dout, inp, weight, rstd, N, C, base);
  zeroc__cpu_rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C, base);
  return ZEROC_OK;
}

/* The heads and the frequencies of a RoPE call: inv_freq (HS/2) from rope. */
static zeroc_result_t check_rope(const char *fn, const zeroc_rope_t *r, int N, int NH, int NKV,
                                 int HS, float *inv_freq) {
  if (N < 1 || NH < 1 || NKV < 1 || NH % NKV || HS < 2 || HS % 2 || HS > ZEROC_ROPE_HS_MAX)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: N %d, NH %d, NKV %d, HS %d; accepted N, NH, NKV >= 1, NH a multiple "
                      "of NKV, HS even in [2, %d]",
                      fn, N, NH, NKV, HS, ZEROC_ROPE_HS_MAX);
  if (!r || !(r->theta > 1) || !isfinite(r->theta) || !(r->factor >= 0) ||
      (r->factor > 0 && !(r->factor >= 1 && r->low_freq_factor > 0 &&
                          r->high_freq_factor > r->low_freq_factor && r->original_max_pos >= 1)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: rope theta %g, factor %g, low_freq_factor %g, high_freq_factor %g, "
                      "original_max_position_embeddings %g; accepted theta > 1, factor 0 (no "
                      "scaling) or >= 1 with 0 < low < high and original >= 1",
                      fn, r ? r->theta : 0, r ? r->factor : 0, r ? r->low_freq_factor : 0,
                      r ? r->high_freq_factor : 0, r ? r->original_max_pos : 0);
  zeroc_i_rope_inv_freq(r, HS, inv_freq);
  return ZEROC_OK;
}

static zeroc_result_t rope(zeroc_kernels_t *k, zeroc_stream_t *s, const char *fn, void *x,
                           const int32_t *pos, const zeroc_rope_t *r, int N, int NH, int NKV,
                           int HS, int inverse) {
  float inv_freq[ZEROC_ROPE_HS_MAX / 2];
  ZEROC_CHECK(check_rope(fn, r, N, NH, NKV, HS, inv_freq));
  const size_t ld = (size_t)(NH + 2 * NKV) * HS;
  CUDA_OR_CPU(rope, k, s, x, ld, pos, inv_freq, N, NH + NKV, HS, inverse);
  zeroc__cpu_rope(x, ld, pos, inv_freq, N, NH + NKV, HS, inverse);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_rope_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *qkv,
                                    const int32_t *pos, const zeroc_rope_t *r, int N, int NH,
                                    int NKV, int HS) {
  return rope(k, s, __func__, qkv, pos, r, N, NH, NKV, HS, 0);
}

zeroc_result_t zeroc_k_rope_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                     const int32_t *pos, const zeroc_rope_t *r, int N, int NH,
                                     int NKV, int HS) {
  return rope(k, s, __func__, dqkv, pos, r, N, NH, NKV, HS, 1);
}

zeroc_result_t zeroc_k_swiglu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                      const void *gu, int N, int F) {
  ZEROC_CHECK(check_rows(__func__, N, F, 1));
  CUDA_OR_CPU(swiglu_forward, k, s, out, gu, N, F);
  zeroc__cpu_swiglu_forward(out, gu, N, F);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_swiglu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dgu,
                                       const void *dout, const void *gu, int N, int F) {
  ZEROC_CHECK(check_rows(__func__, N, F, 1));
  CUDA_OR_CPU(swiglu_backward, k, s, dgu, dout, gu, N, F);
  zeroc__cpu_swiglu_backward(dgu, dout, gu, N, F);
  return ZEROC_OK;
}

/* GQA's shapes; cuda takes NKV == NH only (its kernels index kv heads by query head). */
static zeroc_result_t check_gqa(const zeroc_kernels_t *k, const char *fn, int B, int T, int NH,
                                int NKV, int HS) {
  if (B < 1 || T < 1 || NH < 1 || NKV < 1 || HS < 1 || NH % NKV)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: B %d, T %d, NH %d, NKV %d, HS %d; accepted positive sizes, NH a "
                      "multiple of NKV",
                      fn, B, T, NH, NKV, HS);
  if (k->device == ZEROC_DEVICE_CUDA && NKV != NH)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s: %d kv heads for %d query heads: the cuda attention takes NKV == NH "
                      "only (grouped-query attention runs on the cpu)",
                      fn, NKV, NH);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_gqa_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                             float *lse, const void *qkv, int B, int T, int NH,
                                             int NKV, int HS, const zeroc_dropout_t *drop) {
  ZEROC_CHECK(check_gqa(k, __func__, B, T, NH, NKV, HS));
  if (NKV == NH) return zeroc_k_attention_forward(k, s, out, lse, qkv, B, T, NH * HS, NH, drop);
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  zeroc__cpu_attention_gqa_forward(out, lse, qkv, B, T, NH, NKV, HS, drop);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_attention_gqa_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                              const void *dout, const void *qkv, const void *out,
                                              const float *lse, int B, int T, int NH, int NKV,
                                              int HS, const zeroc_dropout_t *drop, unsigned flags) {
  ZEROC_CHECK(check_gqa(k, __func__, B, T, NH, NKV, HS));
  if (NKV == NH)
    return zeroc_k_attention_backward_ex(k, s, dqkv, dout, qkv, out, lse, B, T, NH * HS, NH, drop,
                                         flags);
  if (flags & ~ZEROC_K_DQKV_SET)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "attention_gqa_backward: flags 0x%x; accepted ZEROC_K_DQKV_SET", flags);
  ZEROC_CHECK(zeroc__kernels_check_dropout(__func__, drop));
  zeroc__cpu_attention_gqa_backward(dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS, drop,
                                    (flags & ZEROC_K_DQKV_SET) != 0);
  return ZEROC_OK;
}
