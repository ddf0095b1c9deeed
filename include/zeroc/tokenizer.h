/*
 * zeroc/tokenizer.h - text <-> token ids: a built-in byte tokenizer and
 * byte-level BPE read from a Hugging Face tokenizer.json or GPT-2's
 * vocab.json + merges.txt, encoding and decoding as Hugging Face `tokenizers`
 * does, token for token (docs/tokenizer.md says what is supported and what is
 * refused).
 *
 * A tokenizer is immutable after load: encode and decode may run from several
 * threads at once on one tokenizer. Failures report through
 * zeroc_last_error(NULL) with a one-line message naming the file, the problem
 * and what is accepted.
 */
#ifndef ZEROC_TOKENIZER_H
#define ZEROC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/export.h"
#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_tokenizer zeroc_tokenizer_t;

/* spec: "bytes" (built-in, ids 0..255 = the bytes, no files), a Hugging Face
 * tokenizer.json (byte-level BPE), or a GPT-2 vocab.json (merges.txt beside
 * it), or a file zeroc_tokenizer_save wrote. Immutable after load:
 * encode/decode may run from several threads at once. */
ZEROC_API zeroc_result_t zeroc_tokenizer_load(const char *spec, zeroc_tokenizer_t **out);
ZEROC_API void zeroc_tokenizer_destroy(zeroc_tokenizer_t *t); /* NULL: nothing */
/* Largest id + 1 (may exceed 65536: a caller storing uint16 ids checks it). */
ZEROC_API int zeroc_tokenizer_vocab(const zeroc_tokenizer_t *t);
/* The id that separates documents: "<|endoftext|>" (GPT-2, Qwen2), else an
 * added "<|begin_of_text|>" (Llama 3, which begins each document with it, as
 * llm.c's Llama 3 data does), or -1 (always -1 for "bytes"). */
ZEROC_API int32_t zeroc_tokenizer_eot(const zeroc_tokenizer_t *t);
/* "bytes" or "bpe". */
ZEROC_API const char *zeroc_tokenizer_kind(const zeroc_tokenizer_t *t);
/* ids must hold at least len entries (never more tokens than bytes). *n: tokens
 * written. Any bytes are accepted: a byte that is not part of valid UTF-8 is
 * pre-tokenized as a punctuation character and encoded as its byte. With an
 * NFC normalizer (Qwen2's) the text is normalized first; invalid bytes are
 * kept as they are and the valid UTF-8 between them normalized. (Only a
 * tokenizer.json with add_prefix_space, which puts a space before the text, or
 * with NFC, which lengthens a few rare characters, can need more ids than
 * bytes: ZEROC_ERR_INVALID_ARG then, nothing written past ids[len - 1].) */
ZEROC_API zeroc_result_t zeroc_tokenizer_encode(const zeroc_tokenizer_t *t, const char *text,
                                                size_t len, int32_t *ids, size_t *n);
/* Writes at most cap bytes of the text of ids[0..n) to out; *len gets the
 * whole length (call again with a larger buffer when *len > cap). An id
 * outside the vocab: ZEROC_ERR_INVALID_ARG naming it. Invalid UTF-8 across a
 * token boundary is kept as bytes. Added tokens (<|endoftext|>) decode to their
 * content. */
ZEROC_API zeroc_result_t zeroc_tokenizer_decode(const zeroc_tokenizer_t *t, const int32_t *ids,
                                                size_t n, char *out, size_t cap, size_t *len);
/* Writes a file zeroc_tokenizer_load reads back to the same tokenizer ("bytes"
 * writes a small JSON naming itself; bpe writes a Hugging Face tokenizer.json).
 * Atomic (temp + rename). */
ZEROC_API zeroc_result_t zeroc_tokenizer_save(const zeroc_tokenizer_t *t, const char *path);

#ifdef __cplusplus
}
#endif
#endif
