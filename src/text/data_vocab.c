/*
 * text/data_vocab.c - zeroc_data_create: io/data.c opens the data set, and the
 * tokenizer recorded beside the shards is read here, in text, the layer that
 * reads tokenizers (io sits below it and calls nothing of text).
 */
#include "io/data.h"
#include "zeroc/tokenizer.h"

/* The vocabulary of the tokenizer file `path` (zeroc__vocab_probe_t). */
static zeroc_result_t tokenizer_vocab(const char *path, int *vocab) {
  zeroc_tokenizer_t *t = NULL;
  zeroc_result_t r = zeroc_tokenizer_load(path, &t);
  if (r != ZEROC_OK) return r;
  *vocab = zeroc_tokenizer_vocab(t);
  zeroc_tokenizer_destroy(t);
  return ZEROC_OK;
}

zeroc_result_t zeroc_data_create(const zeroc_data_config_t *cfg, zeroc_data_t **out) {
  return zeroc__data_open(cfg, tokenizer_vocab, out);
}
