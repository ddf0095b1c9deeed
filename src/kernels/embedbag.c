/*
 * kernels/embedbag.c - dispatch of the embedding-bag kernels (kernels.h) to
 * their cpu (kernels/cpu/embedbag.c) or cuda (kernels/cuda/embedbag.cu) twin,
 * after the shape checks both share. On cpu they run on the calling thread.
 */
#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

static zeroc_result_t bags_ok(const char *fn, int64_t blk, int64_t nbags, int dc) {
  if (nbags < 0 || dc < 0 || (nbags > 0 && blk < 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: nbags %lld, blk %lld, dc %d; need nbags >= 0, "
                      "dc >= 0 and blk >= 1",
                      fn, (long long)nbags, (long long)blk, dc);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_embedbag_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                        int64_t blk, int64_t blk_stride, int64_t ldo,
                                        const float *w, int64_t ldw, const int64_t *idx,
                                        const int32_t *offs, int64_t nbags, int dc) {
  ZEROC_CHECK(bags_ok(__func__, blk, nbags, dc));
  if (!nbags || !dc) return ZEROC_OK;
  CUDA_OR_CPU(embedbag_forward, k, s, out, blk, blk_stride, ldo, w, ldw, idx, offs, nbags, dc);
  zeroc__cpu_embedbag_forward(out, blk, blk_stride, ldo, w, ldw, idx, offs, nbags, dc);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_embedbag_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *grad,
                                         int64_t ldg, const int64_t *idx, const int32_t *offs,
                                         int64_t nbags, const float *dout, int64_t blk,
                                         int64_t blk_stride, int64_t ldo, int dc) {
  ZEROC_CHECK(bags_ok(__func__, blk, nbags, dc));
  if (!nbags || !dc) return ZEROC_OK;
  CUDA_OR_CPU(embedbag_backward, k, s, grad, ldg, idx, offs, nbags, dout, blk, blk_stride, ldo, dc);
  zeroc__cpu_embedbag_backward(grad, ldg, idx, offs, nbags, dout, blk, blk_stride, ldo, dc);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_rowwise_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, float *ss,
                                     const float *g, int64_t U, int dc, float scale) {
  if (U <= 0) return ZEROC_OK;
  CUDA_OR_CPU(rowwise_sumsq, k, s, ss, g, U, dc, scale);
  zeroc__cpu_rowwise_sumsq(ss, g, U, dc, scale);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_rowwise_adagrad(zeroc_kernels_t *k, zeroc_stream_t *s, float *w, int64_t ldw,
                                       float *state, const int64_t *rows, const float *g,
                                       const float *ss, int64_t U, int dc, int D, float scale,
                                       float lr, float eps) {
  if (U <= 0) return ZEROC_OK;
  if (D < 1 || dc < 0 || dc > D)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: dc %d of D %d; need 0 <= dc <= D, D >= 1",
                      __func__, dc, D);
  CUDA_OR_CPU(rowwise_adagrad, k, s, w, ldw, state, rows, g, ss, U, dc, D, scale, lr, eps);
  zeroc__cpu_rowwise_adagrad(w, ldw, state, rows, g, ss, U, dc, D, scale, lr, eps);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_copy2d(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst, int64_t ldd,
                              const float *src, int64_t lds, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return ZEROC_OK;
  CUDA_OR_CPU(copy2d, k, s, dst, ldd, src, lds, rows, cols);
  zeroc__cpu_copy2d(dst, ldd, src, lds, rows, cols);
  return ZEROC_OK;
}
