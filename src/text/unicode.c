/*
 * text/unicode.c - character classes for GPT-2's pattern and UTF-8 decoding;
 * GPT-2's byte <-> unicode map.
 */
#include "text/unicode.h"

#include "text/tokenizer_internal.h"

zeroc__uc_class_t zeroc__uc_class(uint32_t cp) {
  if (cp < 0x80) return (zeroc__uc_class_t)zeroc__uc_ascii[cp];
  size_t lo = 0, hi = zeroc__uc_nranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < zeroc__uc_ranges[mid].lo)
      hi = mid;
    else if (cp > zeroc__uc_ranges[mid].hi)
      lo = mid + 1;
    else
      return (zeroc__uc_class_t)zeroc__uc_ranges[mid].cls;
  }
  return ZEROC_UC_OTHER;
}

/* RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t zeroc__uc_next(const unsigned char *p, size_t avail, uint32_t *cp) {
  unsigned c = p[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, v = c & 0x07, min = 0x10000;
  else
    goto bad;
  if (avail < n) goto bad;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) goto bad;
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) goto bad;
  *cp = v;
  return n;
bad:
  *cp = 0xFFFFFFFFu;
  return 1;
}

/* GPT-2's bytes_to_unicode: the printable bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves; the other 68 bytes, in order, for
 * U+0100, U+0101, ... so that every byte is a visible character. */
static int printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t zeroc__byte_to_cp(unsigned b) {
  if (printable(b)) return b;
  uint32_t k = 0;
  for (unsigned i = 0; i < b; i++) k += !printable(i);
  return 0x100 + k;
}

int zeroc__cp_to_byte(uint32_t cp) {
  if (cp < 0x100) return printable(cp) ? (int)cp : -1;
  if (cp >= 0x100 + 68) return -1;
  uint32_t k = cp - 0x100;
  for (unsigned b = 0; b < 256; b++)
    if (!printable(b) && k-- == 0) return (int)b;
  return -1;
}
