/* embed/stub.c - placeholders while the exchange is written (removed before the end). */
#include "core/error.h"
#include "embed/embed.h"

zeroc_result_t zeroc_embed_forward(zeroc_embed_t *e, int B, const int32_t *lengths,
                                   const int64_t *ids, float *pooled) {
  (void)e, (void)B, (void)lengths, (void)ids, (void)pooled;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_forward: not yet");
}
zeroc_result_t zeroc_embed_backward(zeroc_embed_t *e, const float *dpooled) {
  (void)e, (void)dpooled;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_backward: not yet");
}
zeroc_result_t zeroc_embed_get_table(zeroc_embed_t *e, int t, float *weights, float *state) {
  (void)e, (void)t, (void)weights, (void)state;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "not yet");
}
zeroc_result_t zeroc_embed_set_table(zeroc_embed_t *e, int t, const float *weights,
                                     const float *state) {
  (void)e, (void)t, (void)weights, (void)state;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "not yet");
}
zeroc_result_t zeroc_embed_save(zeroc_embed_t *e, const char *dir) {
  (void)e, (void)dir;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "not yet");
}
zeroc_result_t zeroc_embed_load(zeroc_embed_t *e, const char *dir) {
  (void)e, (void)dir;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "not yet");
}
