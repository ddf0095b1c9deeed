/*
 * text/bpe_build.c - assembling a bpe tokenizer from what a loader read: the
 * id table (strings and bytes of every id), the string -> id hash, the
 * merge table (pair of ids -> rank, merged id), the added tokens; and the
 * lookups the encoder shares.
 */
#include "text/bpe_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/nfc.h"
#include "text/unicode.h"

uint64_t zeroc__tok_hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

zeroc_result_t zeroc__bpe_builder_init(zeroc__bpe_builder_t *b, const char *path, int32_t vocab) {
  memset(b, 0, sizeof *b);
  b->path = path;
  zeroc_tokenizer_t *t = calloc(1, sizeof *t);
  if (!t) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer '%s': out of host memory", path);
  b->t = t;
  t->kind = ZEROC_TOK_BPE;
  t->vocab = vocab;
  t->eot = -1;
  t->unk = -1;
  t->use_regex = 1;
  b->str_idx = malloc((size_t)vocab * sizeof *b->str_idx);
  b->str_len = calloc((size_t)vocab, sizeof *b->str_len);
  b->in_model = calloc((size_t)vocab, 1);
  t->entry = calloc((size_t)vocab, 1);
  if (!b->str_idx || !b->str_len || !b->in_model || !t->entry)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer '%s': out of host memory for %d ids", path,
                      (int)vocab);
  return ZEROC_OK;
}

void zeroc__bpe_builder_free(zeroc__bpe_builder_t *b) {
  zeroc__tok_free(b->t);
  free(b->str_idx);
  free(b->str_len);
  free(b->in_model);
  memset(b, 0, sizeof *b);
}

zeroc_result_t zeroc__bpe_builder_set(zeroc__bpe_builder_t *b, int32_t id, const char *s,
                                      size_t len, int added, int special, int normalized) {
  zeroc_tokenizer_t *t = b->t;
  if (id < 0 || id >= t->vocab)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "tokenizer '%s': id %d outside 0..%d", b->path, (int)id,
                      t->vocab - 1);
  if (t->entry[id] != ZEROC_TOK_GAP) {
    /* an added token may repeat its own model token (GPT-2's <|endoftext|>) */
    if (added && t->entry[id] == ZEROC_TOK_MODEL && b->str_len[id] == len &&
        memcmp(b->str_idx[id], s, len) == 0) {
      t->entry[id] = ZEROC_TOK_ADDED;
      goto added_list;
    }
    char s1[160], s2[160];
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': id %d is given to both \"%s\" and \"%s\" (accepted: "
                      "each id once; an added token may repeat its own vocab entry)",
                      b->path, (int)id,
                      zeroc__tok_show(b->str_idx[id], b->str_len[id], 64, s1, sizeof s1),
                      zeroc__tok_show(s, len, 64, s2, sizeof s2));
  }
  if (len == 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': id %d is the empty string (accepted: a "
                      "token of at least one character)",
                      b->path, (int)id);
  t->entry[id] = added ? ZEROC_TOK_ADDED : ZEROC_TOK_MODEL;
  b->str_idx[id] = s;
  b->str_len[id] = len;
  b->in_model[id] = (uint8_t)!added;
  if (!added) return ZEROC_OK;
added_list:
  if (b->n_added == b->cap_added) {
    int32_t c = b->cap_added ? 2 * b->cap_added : 8;
    zeroc__tok_added_t *a = realloc(t->added, (size_t)c * sizeof *a);
    if (!a) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer '%s': out of host memory", b->path);
    t->added = a;
    b->cap_added = c;
  }
  t->added[b->n_added].id = id;
  t->added[b->n_added].special = special;
  t->added[b->n_added].normalized = normalized;
  b->n_added++;
  return ZEROC_OK;
}

static zeroc_result_t nomem(const char *path) {
  return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer '%s': out of host memory", path);
}

/* The bytes a model token stands for: each character through GPT-2's
 * unicode -> byte map; a token with a character outside the map decodes to
 * its own UTF-8 (as the ByteLevel decoder of tokenizers does). */
static size_t token_bytes(const char *s, size_t n, const int16_t *inv, char *out) {
  size_t w = 0, i = 0;
  while (i < n) {
    uint32_t cp;
    size_t l = zeroc__uc_next((const unsigned char *)s + i, n - i, &cp);
    if (cp >= 0x144 || inv[cp] < 0) {
      memcpy(out, s, n);
      return n;
    }
    out[w++] = (char)inv[cp];
    i += l;
  }
  return w;
}

static int cmp_added(const void *pa, const void *pb) {
  const zeroc__tok_added_t *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->content, b->content, n);
  if (c) return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* tokenizers matches a normalized added token in the normalized text by its
 * own normalized content: the NFC of each one whose content is not NFC, kept
 * in t->added_norm. */
static zeroc_result_t normalize_added(zeroc__bpe_builder_t *b) {
  zeroc_tokenizer_t *t = b->t;
  unsigned char **nf = calloc((size_t)t->n_added, sizeof *nf);
  size_t *nl = calloc((size_t)t->n_added, sizeof *nl), total = 0;
  zeroc_result_t r = nf && nl ? ZEROC_OK : nomem(b->path);
  for (int32_t k = 0; r == ZEROC_OK && k < t->n_added; k++)
    if (t->added[k].normalized) {
      r = zeroc__nfc((const unsigned char *)t->added[k].content, t->added[k].len, &nf[k], &nl[k]);
      if (nf[k]) total += nl[k];
    }
  if (r == ZEROC_OK && total && !(t->added_norm = malloc(total))) r = nomem(b->path);
  size_t o = 0;
  for (int32_t k = 0; r == ZEROC_OK && total && k < t->n_added; k++)
    if (nf[k]) {
      memcpy(t->added_norm + o, nf[k], nl[k]);
      t->added[k].match = t->added_norm + o;
      t->added[k].mlen = (uint32_t)nl[k];
      o += nl[k];
    }
  for (int32_t k = 0; nf && k < t->n_added; k++) free(nf[k]);
  free(nf);
  free(nl);
  return r;
}

/* Copies the strings into the tokenizer, computes every id's bytes, builds
 * the string hash, the byte ids and the added-token table. */
zeroc_result_t zeroc__bpe_builder_finish_vocab(zeroc__bpe_builder_t *b) {
  zeroc_tokenizer_t *t = b->t;
  size_t V = (size_t)t->vocab, total = 0;
  for (size_t i = 0; i < V; i++) total += b->str_len[i];
  t->strs = malloc(total + 1);
  t->bytes = malloc(total + 1);
  t->soff = malloc((V + 1) * sizeof *t->soff);
  t->off = malloc((V + 1) * sizeof *t->off);
  t->str_mask = pow2_at_least(2 * V) - 1;
  t->str_hash = malloc((t->str_mask + 1) * sizeof *t->str_hash);
  if (!t->strs || !t->bytes || !t->soff || !t->off || !t->str_hash) return nomem(b->path);
  memset(t->str_hash, 0xff, (t->str_mask + 1) * sizeof *t->str_hash);
  int16_t inv[0x144];
  for (int i = 0; i < 0x144; i++) inv[i] = -1;
  for (unsigned c = 0; c < 256; c++) {
    uint32_t cp = zeroc__byte_to_cp(c);
    inv[cp] = (int16_t)c;
    char u[4];
    size_t l = cp < 0x80 ? (u[0] = (char)cp, 1)
                         : (u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), 2);
    memcpy(t->b2s[c], u, l);
    t->b2s_len[c] = (uint8_t)l;
  }
  size_t so = 0, bo = 0;
  for (size_t i = 0; i < V; i++) {
    t->soff[i] = so;
    t->off[i] = bo;
    size_t n = b->str_len[i];
    if (!n) continue;
    memcpy(t->strs + so, b->str_idx[i], n);
    if (t->entry[i] == ZEROC_TOK_ADDED) {
      memcpy(t->bytes + bo, b->str_idx[i], n);
      bo += n;
    } else {
      bo += token_bytes(b->str_idx[i], n, inv, t->bytes + bo);
    }
    if (b->in_model[i]) { /* merges and byte ids look in the model's vocab only */
      uint64_t h = zeroc__tok_hash(t->strs + so, n) & t->str_mask;
      while (t->str_hash[h] >= 0) h = (h + 1) & t->str_mask;
      t->str_hash[h] = (int32_t)i;
    }
    so += n;
  }
  t->soff[V] = so;
  t->off[V] = bo;
  for (unsigned c = 0; c < 256; c++) t->byte_id[c] = zeroc__tok_find(t, t->b2s[c], t->b2s_len[c]);
  t->n_added = b->n_added;
  for (int32_t k = 0; k < t->n_added; k++) {
    int32_t id = t->added[k].id;
    t->added[k].content = t->bytes + t->off[id];
    t->added[k].len = (uint32_t)(t->off[id + 1] - t->off[id]);
    t->added[k].match = t->added[k].content;
    t->added[k].mlen = t->added[k].len;
    if (t->added[k].len == 13 && memcmp(t->added[k].content, "<|endoftext|>", 13) == 0) t->eot = id;
  }
  if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
  if (t->nfc) ZEROC_CHECK(normalize_added(b));
  for (int32_t k = 0; k < t->n_added; k++)
    t->added_first[t->added[k].normalized][(unsigned char)t->added[k].match[0]] = 1;
  if (t->eot < 0) t->eot = zeroc__tok_find(t, "<|endoftext|>", 13);
  /* Llama 3's: its documents each begin with <|begin_of_text|> */
  for (int32_t k = 0; t->eot < 0 && k < t->n_added; k++)
    if (t->added[k].len == 17 && !memcmp(t->added[k].content, "<|begin_of_text|>", 17))
      t->eot = t->added[k].id;
  return ZEROC_OK;
}

int32_t zeroc__tok_find(const zeroc_tokenizer_t *t, const char *s, size_t n) {
  uint64_t h = zeroc__tok_hash(s, n) & t->str_mask;
  for (;;) {
    int32_t id = t->str_hash[h];
    if (id < 0) return -1;
    size_t l = (size_t)(t->soff[id + 1] - t->soff[id]);
    if (l == n && memcmp(t->strs + t->soff[id], s, n) == 0) return id;
    h = (h + 1) & t->str_mask;
  }
}

zeroc_result_t zeroc__bpe_builder_merges(zeroc__bpe_builder_t *b, int32_t n) {
  zeroc_tokenizer_t *t = b->t;
  t->pair_mask = pow2_at_least(2 * (uint64_t)n + 2) - 1;
  t->pairs = malloc((t->pair_mask + 1) * sizeof *t->pairs);
  t->merges = malloc(((size_t)n + 1) * sizeof *t->merges);
  if (!t->pairs || !t->merges) return nomem(b->path);
  for (uint64_t i = 0; i <= t->pair_mask; i++) t->pairs[i].key = ~0ull;
  t->n_merges = 0;
  return ZEROC_OK;
}

zeroc_result_t zeroc__bpe_builder_merge(zeroc__bpe_builder_t *b, const char *a, size_t na,
                                        const char *c, size_t nc, const char *where) {
  zeroc_tokenizer_t *t = b->t;
  int32_t ia = zeroc__tok_find(t, a, na), ic = zeroc__tok_find(t, c, nc);
  char small[512], *cat = na + nc <= sizeof small ? small : malloc(na + nc);
  if (!cat) return nomem(b->path);
  memcpy(cat, a, na);
  memcpy(cat + na, c, nc);
  int32_t im = zeroc__tok_find(t, cat, na + nc);
  if (cat != small) free(cat);
  if (ia < 0 || ic < 0 || im < 0) {
    /* shown escaped: a NUL or a control byte in a token must not cut or garble the line */
    const char *miss = ia < 0 ? a : ic < 0 ? c : NULL;
    size_t nm = ia < 0 ? na : nc;
    char s1[160], s2[160];
    if (miss)
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "tokenizer '%s': %s names \"%s\", which is not in the vocab (accepted: "
                        "merges of two vocab tokens whose concatenation is in the vocab)",
                        b->path, where, zeroc__tok_show(miss, nm, 64, s1, sizeof s1));
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': %s makes \"%s%s\", which is not in the vocab "
                      "(accepted: merges of two vocab tokens whose concatenation is in the vocab)",
                      b->path, where, zeroc__tok_show(a, na, 64, s1, sizeof s1),
                      zeroc__tok_show(c, nc, 64, s2, sizeof s2));
  }
  uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ic;
  uint64_t h = zeroc__pair_slot(key, t->pair_mask);
  while (t->pairs[h].key != ~0ull && t->pairs[h].key != key) h = (h + 1) & t->pair_mask;
  /* a repeated merge takes its later rank, as tokenizers' merge map does */
  t->pairs[h].key = key;
  t->pairs[h].rank = t->n_merges;
  t->pairs[h].id = im;
  t->merges[t->n_merges][0] = ia;
  t->merges[t->n_merges][1] = ic;
  t->n_merges++;
  return ZEROC_OK;
}

zeroc_tokenizer_t *zeroc__bpe_builder_take(zeroc__bpe_builder_t *b) {
  zeroc_tokenizer_t *t = b->t;
  b->t = NULL;
  zeroc__bpe_builder_free(b);
  return t;
}

const char *zeroc__tok_show(const char *s, size_t n, size_t max, char *buf, size_t cap) {
  const unsigned char *p = (const unsigned char *)s;
  size_t w = 0, i = 0, end = n < max ? n : max, room = cap - 32; /* room for the tail */
  while (i < end && w + 8 < room) {
    unsigned c = p[i];
    uint32_t cp = 0;
    size_t l = c < 0x80 ? 1 : zeroc__uc_next(p + i, n - i, &cp);
    if (c >= 0x80 && cp != 0xFFFFFFFFu && i + l <= end) { /* a whole UTF-8 character */
      memcpy(buf + w, p + i, l);
      w += l, i += l;
      continue;
    }
    if (c == '"' || c == '\\')
      w += (size_t)snprintf(buf + w, cap - w, "\\%c", c);
    else if (c == '\n' || c == '\t' || c == '\r')
      w += (size_t)snprintf(buf + w, cap - w, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
    else if (c < 0x20 || c == 0x7f)
      w += (size_t)snprintf(buf + w, cap - w, "\\u%04x", c);
    else if (c >= 0x80)
      w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", c);
    else
      buf[w++] = (char)c;
    i++;
  }
  if (i < n)
    snprintf(buf + w, cap - w, "...(%zu bytes)", n);
  else
    buf[w] = 0;
  return buf;
}
