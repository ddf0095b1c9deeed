/*
 * kernels/cuda/tp_pending.cu - placeholders for the vocabulary-parallel
 * kernels (tensor parallelism) until their cuda versions are written: each
 * reports ZEROC_ERR_UNSUPPORTED with a message. Deleted when a real .cu file
 * defines them; until then tensor parallelism runs on the cpu device.
 */
#include "kernels/cuda/common.cuh"

#define TP_PENDING(what)                                                                          \
  ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,                                                               \
             "%s on cuda is not written yet: tensor parallelism (--tp > 1) runs on --device cpu",  \
             what)

extern "C" {
zeroc_result_t zeroc__cuda_vocab_embed_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                               const int32_t *inp, const void *wte,
                                               const void *wpe, int B, int T, int C, int v0,
                                               int Vl) {
  return TP_PENDING("the vocabulary-parallel embedding");
}
zeroc_result_t zeroc__cuda_vocab_embed_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                                void *dwpe, const void *dout, const int32_t *inp,
                                                int B, int T, int C, int v0, int Vl) {
  return TP_PENDING("the vocabulary-parallel embedding backward");
}
zeroc_result_t zeroc__cuda_vocab_ce_local(zeroc_kernels_t *k, zeroc_stream_t *s, float *mx,
                                          float *xt, const void *logits, const int32_t *targets,
                                          int N, int Vl, int v0, int V) {
  return TP_PENDING("the vocabulary-parallel cross-entropy");
}
zeroc_result_t zeroc__cuda_vocab_ce_sumexp(zeroc_kernels_t *k, zeroc_stream_t *s, float *se,
                                           const void *logits, const float *mx, int N, int Vl,
                                           int v0, int V) {
  return TP_PENDING("the vocabulary-parallel cross-entropy");
}
zeroc_result_t zeroc__cuda_vocab_ce_finish(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                           void *logits, const int32_t *targets, const float *mx,
                                           const float *se, const float *xt, int N, int Vl, int v0,
                                           int V, float dloss) {
  return TP_PENDING("the vocabulary-parallel cross-entropy");
}
}
