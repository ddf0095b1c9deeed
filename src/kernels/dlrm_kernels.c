/*
 * kernels/dlrm_kernels.c - the dispatch of the DLRM kernels: shape checks, then
 * the cpu twin inline or the cuda implementation (fp32 only, see the header).
 */
#include "kernels/dlrm_kernels.h"

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"

static zeroc_result_t check(const zeroc_kernels_t *k, const char *fn, long a, long b, long c) {
  if (k->dtype != ZEROC_FP32)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s: the DLRM kernels compute in fp32, not %s", fn,
                      zeroc_dtype_name(k->dtype));
  if (a < 1 || b < 0 || c < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: shape (%ld, %ld, %ld) not accepted", fn, a, b, c);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_relu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                    const float *inp, size_t N) {
  ZEROC_CHECK(check(k, __func__, 1, 0, 1));
  CUDA_OR_CPU(relu_forward, k, s, out, inp, N);
  zeroc__cpu_relu_forward(out, inp, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_relu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dinp,
                                     const float *out, const float *dout, size_t N) {
  ZEROC_CHECK(check(k, __func__, 1, 0, 1));
  CUDA_OR_CPU(relu_backward, k, s, dinp, out, dout, N);
  zeroc__cpu_relu_backward(dinp, out, dout, N);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_interact_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                        const float *z, const float *emb, int B, int T, int D) {
  ZEROC_CHECK(check(k, __func__, B, T, D));
  CUDA_OR_CPU(interact_forward, k, s, out, z, emb, B, T, D);
  zeroc__cpu_interact_forward(out, z, emb, B, T, D);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_interact_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dz,
                                         float *demb, const float *dout, const float *z,
                                         const float *emb, int B, int T, int D) {
  ZEROC_CHECK(check(k, __func__, B, T, D));
  CUDA_OR_CPU(interact_backward, k, s, dz, demb, dout, z, emb, B, T, D);
  zeroc__cpu_interact_backward(dz, demb, dout, z, emb, B, T, D);
  return ZEROC_OK;
}

zeroc_result_t zeroc_k_bce_forward_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                            float *dlogits, const float *logits,
                                            const float *labels, int B, float dloss) {
  ZEROC_CHECK(check(k, __func__, B, 0, 1));
  CUDA_OR_CPU(bce, k, s, losses, dlogits, logits, labels, B, dloss);
  zeroc__cpu_bce(losses, dlogits, logits, labels, B, dloss);
  return ZEROC_OK;
}
