/*
 * io/json_internal.h - shared by the JSON parser (json.c), the writer
 * (json_write.c) and their common text helpers (json_text.c). Not installed.
 */
#ifndef ZEROC_IO_JSON_INTERNAL_H
#define ZEROC_IO_JSON_INTERNAL_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>

/* The "C" locale, made once: numbers are read and written in it. */
locale_t zeroc__json_c_locale(void);
/* Length of the valid UTF-8 sequence starting at p (1..4, reading at most
 * `avail` bytes), or 0 when the bytes there are not one (RFC 3629). */
size_t zeroc__json_utf8_len(const unsigned char *p, size_t avail);
/* Writes code point cp (at most U+10FFFF) as 1..4 bytes of UTF-8 at out;
 * returns the number of bytes. */
size_t zeroc__json_utf8_put(char *out, uint32_t cp);

#endif
