/* text/bpe_stub.c - placeholder until the bpe loader lands. */
#include "core/error.h"
#include "text/tokenizer_internal.h"

zeroc_result_t zeroc__bpe_load(const char *path, const char *buf, size_t len,
                               zeroc_tokenizer_t **out) {
  (void)buf;
  (void)len;
  (void)out;
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "tokenizer '%s': bpe is not implemented yet", path);
}
zeroc_result_t zeroc__bpe_encode(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                 int32_t *ids, size_t *n) {
  (void)t, (void)text, (void)len, (void)ids, (void)n;
  return ZEROC_ERR_UNSUPPORTED;
}
zeroc_result_t zeroc__bpe_save(const zeroc_tokenizer_t *t, const char *path) {
  (void)t, (void)path;
  return ZEROC_ERR_UNSUPPORTED;
}
