/*
 * text/tokenizer_internal.h - the tokenizer object shared by the loader
 * (bpe_load.c), the encoder (bpe_encode.c) and the public calls
 * (tokenizer.c). Not installed.
 *
 * Shape of a bpe tokenizer: every id in [0, vocab) is a gap, a model token or
 * an added token. A model token keeps its string as the file spells it (the
 * byte-level alphabet of GPT-2, e.g. "Ġthe") and its bytes ("\x20the"); an
 * added token keeps its content as both. Encoding works on bytes: each byte
 * starts as the id of its one-byte token, and merges are looked up by the pair
 * of ids (a, b) -> (rank, merged id).
 */
#ifndef ZEROC_TEXT_TOKENIZER_INTERNAL_H
#define ZEROC_TEXT_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "zeroc/tokenizer.h"

/* Ids above this are refused at load (a corrupt file, not a vocabulary). */
#define ZEROC_TOK_MAX_ID (1 << 24)
/* Tokenizer files larger than this are refused. */
#define ZEROC_TOK_MAX_FILE ((size_t)1 << 30)

typedef enum { ZEROC_TOK_BYTES = 0, ZEROC_TOK_BPE = 1 } zeroc__tok_kind_t;
typedef enum { ZEROC_TOK_GAP = 0, ZEROC_TOK_MODEL = 1, ZEROC_TOK_ADDED = 2 } zeroc__tok_entry_t;

/* One slot of the merge table: key (a << 32 | b), key ~0 = empty. */
typedef struct zeroc__tok_pair {
  uint64_t key;
  int32_t rank;
  int32_t id;
} zeroc__tok_pair_t;

/* An added token is matched on the raw text (normalized 0: tokenizers'
 * "normalized": false, the special tokens') or, after the normalizer, on the
 * normalized text (1), there by its own normalized form `match`. */
typedef struct zeroc__tok_added {
  const char *content; /* into tok->bytes */
  uint32_t len;
  int32_t id;
  int special, normalized;
  const char *match; /* content, or its NFC in tok->added_norm */
  uint32_t mlen;
} zeroc__tok_added_t;

/* The pre-tokenization patterns zeroc matches (bpe_encode.c), as tokenizers'
 * Split(Regex, Isolated) writes them (bpe_load.c, bpe_save.c). */
typedef enum zeroc__tok_pattern {
  ZEROC__PAT_GPT2 = 0,   /* GPT-2's, ByteLevel's own */
  ZEROC__PAT_LLAMA3 = 1, /* Llama 3's: case-insensitive contractions, digits in runs of 1-3 */
  ZEROC__PAT_QWEN2 = 2,  /* Qwen2's: Llama 3's with single digits */
} zeroc__tok_pattern_t;

/* The Regex string of pattern p in tokenizer.json (after JSON unescaping). */
const char *zeroc__tok_pattern_regex(int p);

struct zeroc_tokenizer {
  zeroc__tok_kind_t kind;
  int vocab;
  int32_t eot;
  /* ---- bpe ---- */
  unsigned char *entry;     /* [vocab] zeroc__tok_entry_t */
  char *bytes;              /* the bytes of every id, concatenated */
  uint64_t *off;            /* [vocab + 1] into bytes */
  char *strs;               /* the file's string of every id, concatenated */
  uint64_t *soff;           /* [vocab + 1] into strs */
  int32_t byte_id[256];     /* the id of each one-byte token, -1: none */
  zeroc__tok_pair_t *pairs; /* open addressing, pair_mask + 1 slots */
  uint64_t pair_mask;
  int32_t (*merges)[2]; /* [n_merges] in rank order (for save) */
  int32_t n_merges;
  int32_t *str_hash; /* ids by string, open addressing, str_mask + 1 slots, -1 empty */
  uint64_t str_mask;
  zeroc__tok_added_t *added; /* sorted by content */
  int32_t n_added;
  unsigned char added_first[2][256]; /* [normalized][b] 1: some such token's match starts with b */
  char *added_norm;                  /* the NFC forms of added tokens' contents that differ */
  int nfc;          /* the normalizer is NFC: encoding normalizes the text first (nfc.c) */
  char b2s[256][2]; /* the byte-level character of each byte, as UTF-8 (1 or 2 bytes) */
  uint8_t b2s_len[256];
  int add_prefix_space, use_regex, ignore_merges;
  int pattern; /* with use_regex: the split's pattern (zeroc__tok_pattern_t) */
  int32_t unk; /* -1: none (a byte without a token is dropped, as tokenizers does) */
  int fuse_unk;
};

/* Frees t and everything it holds (zeroc_tokenizer_destroy); here so that the bpe
 * builder (bpe_build.c, below tokenizer.c) can drop a tokenizer it could not
 * finish. NULL: nothing. */
static inline void zeroc__tok_free(zeroc_tokenizer_t *t) {
  if (!t) return;
  free(t->entry);
  free(t->bytes);
  free(t->off);
  free(t->strs);
  free(t->soff);
  free(t->pairs);
  free(t->merges);
  free(t->str_hash);
  free(t->added);
  free(t->added_norm);
  free(t);
}

/* Builds a bpe tokenizer from the file `path` (tokenizer.json or vocab.json). */
zeroc_result_t zeroc__bpe_load(const char *path, const char *buf, size_t len,
                               zeroc_tokenizer_t **out);
/* Encodes with a bpe tokenizer (the contract of zeroc_tokenizer_encode, with
 * room for cap ids); *dropped (NULL: not asked) counts the bytes left out for
 * want of a token (no one-byte token, no unk). */
zeroc_result_t zeroc__bpe_encode(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                 int32_t *ids, size_t cap, size_t *n, size_t *dropped);
/* zeroc_tokenizer_encode with room for cap ids instead of len, and the bytes
 * dropped (as zeroc__bpe_encode; 0 for bytes) in *dropped when it is not NULL. */
zeroc_result_t zeroc__tokenizer_encode_cap(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                           int32_t *ids, size_t cap, size_t *n, size_t *dropped);
/* The most ids encoding len bytes can give, add_prefix_space's space aside: a
 * token is at least one byte of the text the model sees, which is the text, or
 * with NFC at most 3 times it (U+1D160, 4 bytes, is 12 in NFC). */
static inline size_t zeroc__tok_max_ids(const zeroc_tokenizer_t *t, size_t len) {
  return t->kind == ZEROC_TOK_BPE && t->nfc ? 3 * len : len;
}
/* Writes a bpe tokenizer as a Hugging Face tokenizer.json to `path`. */
zeroc_result_t zeroc__bpe_save(const zeroc_tokenizer_t *t, const char *path);
/* The id of the model token whose file string is s[0..n), or -1. */
int32_t zeroc__tok_find(const zeroc_tokenizer_t *t, const char *s, size_t n);
/* A message from a call below, to wrap in one of this layer's (messages carry
 * no source location: core/error.h). */
static inline const char *zeroc__tok_inner(const char *msg) { return msg; }
/* 64-bit hash of n bytes. */
uint64_t zeroc__tok_hash(const char *s, size_t n);

/* GPT-2's byte <-> unicode map: the code point that stands for byte b, and the
 * byte a code point stands for (-1: none). */
uint32_t zeroc__byte_to_cp(unsigned b);
int zeroc__cp_to_byte(uint32_t cp);

#endif
