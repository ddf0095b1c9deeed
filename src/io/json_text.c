/*
 * io/json_text.c - what the JSON parser and writer share: the C locale that
 * numbers are converted in, and UTF-8 validation and encoding.
 *
 * Numbers are converted in the C locale whatever the program's locale is, so
 * a manifest written in one locale reads back in another.
 */
#include <locale.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "io/json_internal.h"

/* ---- the C locale ------------------------------------------------------------- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }
locale_t zeroc__json_c_locale(void) {
  pthread_once(&c_locale_once, make_c_locale);
  return c_locale;
}

/* ---- UTF-8 -------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence starting at p (1..4), or 0 when the bytes
 * there are not one (overlong forms, surrogates and values above U+10FFFF are
 * invalid, per RFC 3629). */
size_t zeroc__json_utf8_len(const unsigned char *p, size_t avail) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c == 0xe0)
    n = 3, lo = 0xa0;
  else if (c >= 0xe1 && c <= 0xec)
    n = 3;
  else if (c == 0xed)
    n = 3, hi = 0x9f;
  else if (c >= 0xee && c <= 0xef)
    n = 3;
  else if (c == 0xf0)
    n = 4, lo = 0x90;
  else if (c >= 0xf1 && c <= 0xf3)
    n = 4;
  else if (c == 0xf4)
    n = 4, hi = 0x8f;
  else
    return 0;
  if (avail < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return n;
}

/* Writes code point cp as 1..4 bytes of UTF-8; returns the count. */
size_t zeroc__json_utf8_put(char *out, uint32_t cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}
