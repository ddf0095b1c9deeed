/*
 * text/nfc.h - Unicode Normalization Form C for the tokenizer.json
 * normalizer "NFC" (Qwen2's), through utf8proc (docs/build.md says why).
 */
#ifndef ZEROC_TEXT_NFC_H
#define ZEROC_TEXT_NFC_H

#include <stddef.h>

#include "zeroc/result.h"

/* The NFC form of s[0..n). *out NULL: s is already NFC (most text: nothing
 * below U+0300 changes), use it as it is; else *out (malloc'd, the caller frees
 * it) holds *outlen bytes. Bytes that are not valid UTF-8 are kept as they are
 * (the byte-level encoder gives each its byte's token) and each run of valid
 * UTF-8 between them is normalized on its own: a combining mark after an
 * invalid byte does not compose across it. NFC may lengthen text (at most 3x:
 * U+0958 is 3 bytes, its NFC U+0915 U+093C 6). */
zeroc_result_t zeroc__nfc(const unsigned char *s, size_t n, unsigned char **out, size_t *outlen);

#endif
