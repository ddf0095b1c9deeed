/*
 * text/bpe_build.h - assembling a bpe tokenizer (bpe_build.c), for the
 * loaders of tokenizer.json and vocab.json + merges.txt (bpe_load.c).
 *
 * Order: init (the id range known), set every model token then every added
 * token, finish_vocab, merges (the count), merge for each in rank order, then
 * take the tokenizer (or free the builder on any failure).
 */
#ifndef ZEROC_TEXT_BPE_BUILD_H
#define ZEROC_TEXT_BPE_BUILD_H

#include "text/tokenizer_internal.h"

typedef struct zeroc__bpe_builder {
  const char *path;
  zeroc_tokenizer_t *t;
  const char **str_idx; /* [vocab] the string of each id (in the parsed file) */
  size_t *str_len;
  uint8_t *in_model; /* [vocab] the id is in the model's vocab (not only an added token) */
  int32_t n_added, cap_added;
} zeroc__bpe_builder_t;

/* The merge table slot where the search for pair key (a << 32 | b) starts. */
static inline uint64_t zeroc__pair_slot(uint64_t key, uint64_t mask) {
  return ((key * 0x9E3779B97F4A7C15ull) >> 24) & mask;
}

zeroc_result_t zeroc__bpe_builder_init(zeroc__bpe_builder_t *b, const char *path, int32_t vocab);
void zeroc__bpe_builder_free(zeroc__bpe_builder_t *b);
/* Gives id its string s[0..len) (kept by reference until finish_vocab). An id
 * given twice is ZEROC_ERR_CORRUPT, except an added token repeating its own
 * model token. An added token is special or not, and matched after the
 * normalizer (normalized 1) or before it (0). */
zeroc_result_t zeroc__bpe_builder_set(zeroc__bpe_builder_t *b, int32_t id, const char *s,
                                      size_t len, int added, int special, int normalized);
/* With t->nfc set first, normalized added tokens are matched by their NFC. */
zeroc_result_t zeroc__bpe_builder_finish_vocab(zeroc__bpe_builder_t *b);
zeroc_result_t zeroc__bpe_builder_merges(zeroc__bpe_builder_t *b, int32_t n);
/* Adds the merge (a, c) with the next rank; `where` names it in messages
 * ("merge 17", "merges.txt line 18"). */
zeroc_result_t zeroc__bpe_builder_merge(zeroc__bpe_builder_t *b, const char *a, size_t na,
                                        const char *c, size_t nc, const char *where);
/* s[0..n) for a message, as a JSON string body: printable ASCII and UTF-8 as
 * they are, `"` and `\` escaped, other bytes as \n, \t, \u0000 or \x80 (a NUL
 * does not end it); over max bytes, the first max and "...(N bytes)". Returns
 * buf (cap bytes, at least 64). */
const char *zeroc__tok_show(const char *s, size_t n, size_t max, char *buf, size_t cap);
/* The finished tokenizer; the builder is freed. */
zeroc_tokenizer_t *zeroc__bpe_builder_take(zeroc__bpe_builder_t *b);

#endif
