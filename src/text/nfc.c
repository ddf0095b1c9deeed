/*
 * text/nfc.c - Unicode Normalization Form C of a piece of text, for a
 * tokenizer.json whose normalizer is NFC (Qwen2's), as Hugging Face
 * `tokenizers` applies it before pre-tokenization. The Unicode tables are
 * utf8proc's (Debian's libutf8proc-dev): thousands of decompositions and
 * composition pairs zeroc does not keep by hand. Where `tokenizers`' older
 * tables differ from utf8proc's, the text is split so that they agree.
 */
#include "text/nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"

/* Every code point below U+0300 is NFC and composes with nothing before it
 * (the combining marks and Hangul jamo that compose start at U+0300), and
 * each of them is encoded with lead bytes below 0xCC: text without such a byte
 * is NFC as it is. */
#define NFC_FIRST_LEAD 0xCC

/* `tokenizers` 0.23.3 normalizes with Unicode 9.0's tables (the
 * unicode-normalization-alignments crate), utf8proc 2.8 with 15.0's. They
 * agree on every code point's NFC and its decomposition's, except that to
 * `tokenizers` the combining marks assigned after 9.0 are starters (it
 * neither reorders them nor composes across them), and it does not compose
 * U+11935 U+11930 (U+11938, Unicode 13). These code points are kept as they
 * are and the text on each side normalized on its own, which gives
 * `tokenizers`' NFC: tests/fixtures/tokenizer/probe_nfc.py finds them and
 * checks that over every code point and every mark in context. */
static const uint32_t HF_STARTERS[][2] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},
    {0xC3C, 0xC3C},     {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},
    {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},   {0xA82C, 0xA82C},   {0x10D24, 0x10D27},
    {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85},
    {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A},
    {0x11930, 0x11930}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42},
    {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1},
    {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF},
    {0x1E4EC, 0x1E4EF},
};

static int hf_starter(uint32_t cp) {
  if (cp < HF_STARTERS[0][0]) return 0;
  size_t lo = 0, hi = sizeof HF_STARTERS / sizeof HF_STARTERS[0];
  while (lo < hi) { /* the first range ending at or after cp */
    size_t mid = (lo + hi) / 2;
    if (HF_STARTERS[mid][1] < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < sizeof HF_STARTERS / sizeof HF_STARTERS[0] && HF_STARTERS[lo][0] <= cp;
}

static int may_change(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] >= NFC_FIRST_LEAD) return 1;
  return 0;
}

typedef struct {
  unsigned char *b;
  size_t len, cap;
} buf_t;

static zeroc_result_t put(buf_t *o, const unsigned char *s, size_t n) {
  if (!n) return ZEROC_OK; /* an empty run: nothing to copy (and o->b may still be NULL) */
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap : 64;
    while (cap < o->len + n) cap *= 2;
    unsigned char *b = realloc(o->b, cap);
    if (!b)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory for %zu bytes of NFC text",
                        cap);
    o->b = b;
    o->cap = cap;
  }
  memcpy(o->b + o->len, s, n);
  o->len += n;
  return ZEROC_OK;
}

/* Appends the NFC form of the valid UTF-8 s[0..n). */
static zeroc_result_t put_nfc(buf_t *o, const unsigned char *s, size_t n) {
  if (!may_change(s, n)) return put(o, s, n);
  utf8proc_uint8_t *d = NULL;
  utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &d,
                                    (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (m < 0) {
    free(d);
    return ZEROC_FAIL(m == UTF8PROC_ERROR_NOMEM ? ZEROC_ERR_NOMEM : ZEROC_ERR_INTERNAL,
                      "tokenizer: utf8proc_map (NFC) of %zu bytes failed: %s", n,
                      utf8proc_errmsg(m));
  }
  zeroc_result_t r = put(o, d, (size_t)m);
  free(d);
  return r;
}

zeroc_result_t zeroc__nfc(const unsigned char *s, size_t n, unsigned char **out, size_t *outlen) {
  *out = NULL;
  *outlen = n;
  if (!may_change(s, n)) return ZEROC_OK;
  buf_t o = {0};
  zeroc_result_t r = ZEROC_OK;
  size_t seg = 0, i = 0;
  while (i < n && r == ZEROC_OK) {
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t l = s[i] < 0x80 ? 1 : utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (l > 0 && (cp < 0 || !hf_starter((uint32_t)cp))) {
      i += (size_t)l;
      continue;
    }
    /* a byte that is not UTF-8, or one of HF_STARTERS: kept as it is, the
     * text before it normalized */
    size_t k = l > 0 ? (size_t)l : 1;
    r = put_nfc(&o, s + seg, i - seg);
    if (r == ZEROC_OK) r = put(&o, s + i, k);
    i += k;
    seg = i;
  }
  if (r == ZEROC_OK) r = put_nfc(&o, s + seg, n - seg);
  if (r != ZEROC_OK) {
    free(o.b);
    return r;
  }
  *out = o.b; /* not NULL: the text had a byte, so has its NFC */
  *outlen = o.len;
  return ZEROC_OK;
}
