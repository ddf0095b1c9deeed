/*
 * text/bpe_encode.c - encoding with a bpe tokenizer, as Hugging Face
 * `tokenizers` does: added tokens with "normalized": false (the special ones,
 * <|endoftext|>) are cut out of the raw text first (leftmost, longest); each
 * piece between them is normalized (NFC, when the file asks for it) and the
 * added tokens with "normalized": true cut out of that; each piece left is
 * pre-tokenized with GPT-2's pattern (or kept whole when use_regex is false),
 * each word's bytes start as one-byte tokens and the pair of lowest merge rank (leftmost on a
 * tie) is merged until no pair has a rank.
 *
 * The patterns, matched by hand (alternatives in order, at each position):
 * GPT-2's
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * and Llama 3's and Qwen2's (llama3_word).
 * Everything here reads the tokenizer and writes the caller's buffers only,
 * so calls may run from several threads at once.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/bpe_build.h"
#include "text/nfc.h"
#include "text/unicode.h"

/* The class and length of the character at p (n > 0 bytes left). */
static inline zeroc__uc_class_t char_at(const unsigned char *p, size_t n, size_t *len) {
  if (p[0] < 0x80) {
    *len = 1;
    return (zeroc__uc_class_t)zeroc__uc_ascii[p[0]];
  }
  uint32_t cp;
  *len = zeroc__uc_next(p, n, &cp);
  return cp == 0xFFFFFFFFu ? ZEROC_UC_OTHER : zeroc__uc_class(cp);
}

/* The end of the run of class c starting at p[i]. */
static inline size_t run_of(const unsigned char *p, size_t n, size_t i, zeroc__uc_class_t c) {
  while (i < n) {
    size_t l;
    if (char_at(p + i, n - i, &l) != c) break;
    i += l;
  }
  return i;
}

/* \s+(?!\S)|\s+ at p[0..n), whose first character (l0 bytes) is a space:
 * the whole run at the end of the text; before a non-space, the run less its
 * last character when that leaves one; else the run. */
static size_t space_run(const unsigned char *p, size_t n, size_t l0) {
  size_t i = l0, last = 0;
  while (i < n) {
    size_t l;
    if (char_at(p + i, n - i, &l) != ZEROC_UC_SPACE) break;
    last = i;
    i += l;
  }
  if (i == n || last == 0) return i;
  return last;
}

/* The length of the pattern's match at the start of p[0..n), n > 0. */
static size_t gpt2_word(const unsigned char *p, size_t n) {
  if (p[0] == '\'' && n >= 2) {
    unsigned c1 = p[1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (n >= 3 &&
        ((c1 == 'r' && p[2] == 'e') || (c1 == 'v' && p[2] == 'e') || (c1 == 'l' && p[2] == 'l')))
      return 3;
  }
  size_t l0;
  zeroc__uc_class_t c0 = char_at(p, n, &l0);
  if (p[0] == ' ' && n > 1) {
    size_t l1;
    zeroc__uc_class_t c1 = char_at(p + 1, n - 1, &l1);
    if (c1 != ZEROC_UC_SPACE) return run_of(p, n, 1 + l1, c1);
  }
  if (c0 != ZEROC_UC_SPACE) return run_of(p, n, l0, c0);
  return space_run(p, n, l0);
}

static inline int is_crlf(unsigned char c) { return c == '\r' || c == '\n'; }
static inline unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* The length of Llama 3's (max_digits 3) or Qwen2's (1) pattern's match at
 * the start of p[0..n), n > 0; the alternatives in order, at one position:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,max}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+          */
static size_t llama3_word(const unsigned char *p, size_t n, int max_digits) {
  if (p[0] == '\'' && n >= 2) {
    unsigned c1 = lower(p[1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (n >= 3) {
      unsigned c2 = lower(p[2]);
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return 3;
    }
  }
  size_t l0, l1 = 0;
  zeroc__uc_class_t c0 = char_at(p, n, &l0), c1 = ZEROC_UC_OTHER;
  if (n > l0) c1 = char_at(p + l0, n - l0, &l1);
  if (c0 == ZEROC_UC_LETTER) return run_of(p, n, l0, ZEROC_UC_LETTER);
  if (c0 != ZEROC_UC_NUMBER && !is_crlf(p[0]) && n > l0 && c1 == ZEROC_UC_LETTER)
    return run_of(p, n, l0 + l1, ZEROC_UC_LETTER);
  if (c0 == ZEROC_UC_NUMBER) {
    size_t i = l0;
    for (int k = 1; k < max_digits && i < n; k++) {
      size_t l;
      if (char_at(p + i, n - i, &l) != ZEROC_UC_NUMBER) break;
      i += l;
    }
    return i;
  }
  size_t i = 0;
  if (p[0] == ' ' && n > 1 && c1 == ZEROC_UC_OTHER) i = l0; /* the optional space */
  if (i || c0 == ZEROC_UC_OTHER) {
    i = run_of(p, n, i, ZEROC_UC_OTHER);
    while (i < n && is_crlf(p[i])) i++;
    return i;
  }
  /* c0 is a space: \s*[\r\n]+ ends after the run's last CR or LF */
  size_t j = 0, after_crlf = 0;
  while (j < n) {
    size_t l;
    if (char_at(p + j, n - j, &l) != ZEROC_UC_SPACE) break;
    if (is_crlf(p[j])) after_crlf = j + 1;
    j += l;
  }
  if (after_crlf) return after_crlf;
  return space_run(p, n, l0);
}

static inline int32_t pair_lookup(const zeroc_tokenizer_t *t, int32_t a, int32_t b, int32_t *id) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  uint64_t h = zeroc__pair_slot(key, t->pair_mask);
  for (;;) {
    const zeroc__tok_pair_t *s = &t->pairs[h];
    if (s->key == key) {
      *id = s->id;
      return s->rank;
    }
    if (s->key == ~0ull) return INT32_MAX;
    h = (h + 1) & t->pair_mask;
  }
}

/* Short words: the symbols in an array, the lowest rank found by a scan. */
static size_t merge_small(const zeroc_tokenizer_t *t, int32_t *s, size_t n) {
  int32_t r[64], m[64];
  for (size_t i = 0; i + 1 < n; i++) r[i] = pair_lookup(t, s[i], s[i + 1], &m[i]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; i++)
      if (r[i] < r[best]) best = i;
    if (r[best] == INT32_MAX) break;
    s[best] = m[best];
    for (size_t i = best + 1; i + 1 < n; i++) { /* short: a loop beats three memmove calls */
      s[i] = s[i + 1];
      r[i] = r[i + 1];
      m[i] = m[i + 1];
    }
    n--;
    if (best > 0) r[best - 1] = pair_lookup(t, s[best - 1], s[best], &m[best - 1]);
    if (best + 1 < n) r[best] = pair_lookup(t, s[best], s[best + 1], &m[best]);
  }
  return n;
}

/* Long words: a linked list of symbols and a min-heap of (rank, position)
 * candidates, stale ones skipped; the same order as the scan. */
typedef struct {
  int32_t rank;
  int32_t pos;
  int32_t left, right; /* the pair it was made for */
} cand_t;

static int cand_less(const cand_t *a, const cand_t *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand_t *h, size_t *n, cand_t c) {
  size_t i = (*n)++;
  while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = c;
}

static cand_t heap_pop(cand_t *h, size_t *n) {
  cand_t top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
    if (!cand_less(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

static zeroc_result_t merge_large(const zeroc_tokenizer_t *t, int32_t *s, size_t *np) {
  size_t n = *np, hn = 0;
  int32_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
  cand_t *heap = malloc(2 * n * sizeof *heap);
  if (!next || !prev || !heap) {
    free(next), free(prev), free(heap);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory for a word of %zu bytes", n);
  }
  for (size_t i = 0; i < n; i++) {
    next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    prev[i] = (int32_t)i - 1;
    int32_t id = 0;
    int32_t rk = i + 1 < n ? pair_lookup(t, s[i], s[i + 1], &id) : INT32_MAX;
    if (rk != INT32_MAX) heap_push(heap, &hn, (cand_t){rk, (int32_t)i, s[i], s[i + 1]});
  }
  while (hn) {
    cand_t c = heap_pop(heap, &hn);
    int32_t i = c.pos, j = next[i];
    if (s[i] != c.left || j < 0 || s[j] != c.right) continue; /* stale */
    int32_t id = c.left;
    pair_lookup(t, s[i], s[j], &id);
    s[i] = id;
    s[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    int32_t p = prev[i], q = next[i], rk;
    if (p >= 0 && (rk = pair_lookup(t, s[p], s[i], &id)) != INT32_MAX)
      heap_push(heap, &hn, (cand_t){rk, p, s[p], s[i]});
    if (q >= 0 && (rk = pair_lookup(t, s[i], s[q], &id)) != INT32_MAX)
      heap_push(heap, &hn, (cand_t){rk, i, s[i], s[q]});
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) s[w++] = s[i];
  *np = w;
  free(next), free(prev), free(heap);
  return ZEROC_OK;
}

/* ---- very long words: merges taken rank by rank ------------------------------------
 * A word of megabytes (a file of spaces is one pre-tokenized word) spent seconds in the
 * heap above, on cache misses of its log n levels. When each merge's rank is above the
 * ranks of the merges that make its two parts (true of a trained BPE: a merge joins
 * tokens that already exist), a merge of rank r only makes pairs of higher rank. Then
 * "the lowest rank first, leftmost on a tie" is: each rank in increasing order, its
 * pairs from left to right. Each rank keeps the positions where its pair was made, in
 * a list; every list is visited once, in rank order: time linear in the word and the
 * merge count, the same ids as the heap. */

typedef struct {
  int32_t pos, next;
} rank_node_t;

/* 1 when every merge's rank is above that of each merge making one of its parts. */
static int merges_ordered(const zeroc_tokenizer_t *t, int32_t *maxc) {
  for (int32_t i = 0; i < t->vocab; i++) maxc[i] = -1;
  for (int32_t m = 0; m < t->n_merges; m++) {
    int32_t id = -1, rk = pair_lookup(t, t->merges[m][0], t->merges[m][1], &id);
    if (id >= 0 && rk > maxc[id]) maxc[id] = rk;
  }
  for (int32_t m = 0; m < t->n_merges; m++) {
    int32_t id, rk = pair_lookup(t, t->merges[m][0], t->merges[m][1], &id);
    if (rk <= maxc[t->merges[m][0]] || rk <= maxc[t->merges[m][1]]) return 0;
  }
  return 1;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

typedef struct {
  const zeroc_tokenizer_t *t;
  int32_t *s, *next, *prev, *head, *tail;
  rank_node_t *node;
  int32_t nn, free; /* nodes used; the visited ranks' nodes, for reuse (-1: none) */
} by_rank_t;

static void rank_push(by_rank_t *b, int32_t rk, int32_t pos) {
  int32_t k = b->free >= 0 ? b->free : b->nn++;
  if (k == b->free) b->free = b->node[k].next;
  b->node[k] = (rank_node_t){pos, -1};
  if (b->head[rk] < 0)
    b->head[rk] = k;
  else
    b->node[b->tail[rk]].next = k;
  b->tail[rk] = k;
}

/* The pair of rank r at position i, if it is still there: merged, and the pairs it
 * makes with its neighbours queued (all of higher rank). */
static void rank_merge_at(by_rank_t *b, int32_t r, int32_t i, int32_t m) {
  int32_t *s = b->s, *next = b->next, *prev = b->prev, j = next[i], id, rk;
  if (j < 0 || s[i] != b->t->merges[r][0] || s[j] != b->t->merges[r][1]) return; /* stale */
  s[i] = m;
  s[j] = -1;
  next[i] = next[j];
  if (next[j] >= 0) prev[next[j]] = i;
  int32_t p = prev[i], q = next[i];
  if (p >= 0 && (rk = pair_lookup(b->t, s[p], m, &id)) != INT32_MAX) rank_push(b, rk, p);
  if (q >= 0 && (rk = pair_lookup(b->t, m, s[q], &id)) != INT32_MAX) rank_push(b, rk, i);
}

/* Every rank's list in rank order, each from left to right (sorted when positions
 * were queued out of order). */
static zeroc_result_t rank_run(by_rank_t *b) {
  int32_t *sorted = NULL;
  size_t cap = 0;
  for (int32_t r = 0; r < b->t->n_merges; r++) {
    if (b->head[r] < 0) continue;
    int32_t m = b->t->merges[r][0];
    pair_lookup(b->t, b->t->merges[r][0], b->t->merges[r][1], &m);
    size_t len = 0, inorder = 1;
    for (int32_t k = b->head[r], last = -1; k >= 0; k = b->node[k].next, len++) {
      inorder &= b->node[k].pos > last;
      last = b->node[k].pos;
    }
    if (inorder) {
      for (int32_t k = b->head[r]; k >= 0; k = b->node[k].next)
        rank_merge_at(b, r, b->node[k].pos, m);
    } else {
      if (len > cap) {
        free(sorted);
        cap = len;
        if (!(sorted = malloc(cap * sizeof *sorted)))
          return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory for a word");
      }
      len = 0;
      for (int32_t k = b->head[r]; k >= 0; k = b->node[k].next) sorted[len++] = b->node[k].pos;
      qsort(sorted, len, sizeof *sorted, cmp_i32);
      for (size_t k = 0; k < len; k++) rank_merge_at(b, r, sorted[k], m);
    }
    /* the list is done with (merges of rank r queue only higher ranks): its nodes are free */
    b->node[b->tail[r]].next = b->free;
    b->free = b->head[r];
  }
  free(sorted);
  return ZEROC_OK;
}

/* Merges s[0..*np) rank by rank; *done 0 (nothing changed) when the merges are not
 * ordered so (then the heap does it). */
static zeroc_result_t merge_by_rank(const zeroc_tokenizer_t *t, int32_t *s, size_t *np, int *done) {
  size_t n = *np, M = (size_t)t->n_merges;
  *done = 0;
  by_rank_t b = {t,
                 s,
                 malloc(n * sizeof(int32_t)),
                 malloc(n * sizeof(int32_t)),
                 malloc((M + 1) * sizeof(int32_t)),
                 malloc((M + 1) * sizeof(int32_t)),
                 malloc(3 * n * sizeof(rank_node_t)),
                 0,
                 -1};
  int32_t *maxc = malloc((size_t)t->vocab * sizeof *maxc);
  zeroc_result_t r = ZEROC_OK;
  if (!b.next || !b.prev || !b.head || !b.tail || !b.node || !maxc) {
    r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory for a word of %zu bytes", n);
    goto out;
  }
  if (!merges_ordered(t, maxc)) goto out;
  for (size_t k = 0; k < M; k++) b.head[k] = -1;
  for (size_t i = 0; i < n; i++) {
    b.next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    b.prev[i] = (int32_t)i - 1;
    int32_t id, rk = i + 1 < n ? pair_lookup(t, s[i], s[i + 1], &id) : INT32_MAX;
    if (rk != INT32_MAX) rank_push(&b, rk, (int32_t)i);
  }
  r = rank_run(&b);
  if (r) goto out;
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = b.next[i]) s[w++] = s[i];
  *np = w;
  *done = 1;
out:
  free(b.next), free(b.prev), free(b.head), free(b.tail), free(b.node), free(maxc);
  return r;
}

/* Encodes one pre-tokenized word w[0..n) into out (room for n ids). */
static zeroc_result_t encode_word(const zeroc_tokenizer_t *t, const unsigned char *w, size_t n,
                                  int32_t *out, size_t *nout, size_t *dropped) {
  if (t->ignore_merges) { /* a word that is a token is taken whole */
    char small[512] = {0}, *s = 2 * n <= sizeof small ? small : calloc(2 * n, 1);
    if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory");
    size_t l = 0;
    for (size_t i = 0; i < n; i++) {
      memcpy(s + l, t->b2s[w[i]], t->b2s_len[w[i]]);
      l += t->b2s_len[w[i]];
    }
    int32_t id = zeroc__tok_find(t, s, l);
    if (s != small) free(s);
    if (id >= 0) {
      out[0] = id;
      *nout = 1;
      return ZEROC_OK;
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = t->byte_id[w[i]];
    if (id < 0) { /* no token for this byte: the unknown token, or dropped */
      if (t->unk < 0) ++*dropped;
      if (t->unk < 0 || (t->fuse_unk && k && out[k - 1] == t->unk)) continue;
      id = t->unk;
    }
    out[k++] = id;
  }
  *nout = k;
  /* rank by rank where the word pays for a pass over the merges (and the check) */
  if (k > 4096 && (size_t)t->n_merges + (size_t)t->vocab <= 8 * k) {
    int done = 0;
    ZEROC_CHECK(merge_by_rank(t, out, nout, &done));
    if (done) return ZEROC_OK;
  }
  if (k > 64) return merge_large(t, out, nout);
  *nout = k > 1 ? merge_small(t, out, k) : k;
  return ZEROC_OK;
}

/* The state of one encode call. A document repeats its words: the call keeps
 * a direct-mapped cache of short words -> ids (its own, so calls from several
 * threads share nothing); made only for texts long enough to pay for it. */
#define CACHE_SLOTS    4096
#define CACHE_WORD_MAX 22
#define CACHE_IDS_MAX  8
#define CACHE_MIN_TEXT 4096

typedef struct {
  uint8_t wlen, nids; /* wlen 0: empty */
  unsigned char word[CACHE_WORD_MAX];
  int32_t ids[CACHE_IDS_MAX];
} cache_ent_t;

typedef struct {
  const zeroc_tokenizer_t *t;
  cache_ent_t *cache; /* NULL: none */
  int32_t *ids;
  size_t cap, k;
  size_t dropped; /* bytes without a token (no unk): left out */
} enc_t;

static zeroc_result_t too_many(size_t cap) {
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "zeroc_tokenizer_encode: more tokens than the %zu ids the buffer holds "
                    "(add_prefix_space adds a space to every piece of text; NFC lengthens a "
                    "few characters, e.g. U+0958 from 3 bytes to 6)",
                    cap);
}

/* One word into e->ids, through the cache when it is short. */
static zeroc_result_t put_word(enc_t *e, const unsigned char *w, size_t wl) {
  cache_ent_t *c = NULL;
  if (e->cache && wl <= CACHE_WORD_MAX) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < wl; i++) h = (h ^ w[i]) * 16777619u;
    c = &e->cache[(h ^ (h >> 15)) & (CACHE_SLOTS - 1)];
    if (c->wlen == wl && memcmp(c->word, w, wl) == 0) {
      if (e->k + c->nids > e->cap) return too_many(e->cap);
      memcpy(e->ids + e->k, c->ids, c->nids * sizeof *c->ids);
      e->k += c->nids;
      return ZEROC_OK;
    }
  }
  size_t got = 0;
  int32_t *out = e->ids + e->k, *tmp = NULL;
  if (e->k + wl > e->cap) { /* only with add_prefix_space: the word may still fit once merged */
    tmp = out = malloc(wl * sizeof *tmp);
    if (!tmp) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory");
  }
  size_t before = e->dropped;
  zeroc_result_t r = encode_word(e->t, w, wl, out, &got, &e->dropped);
  if (e->dropped != before) c = NULL; /* a cached word would hide its dropped bytes */
  if (r == ZEROC_OK && tmp && e->k + got <= e->cap) memcpy(e->ids + e->k, tmp, got * sizeof *tmp);
  free(tmp);
  ZEROC_CHECK(r);
  if (e->k + got > e->cap) return too_many(e->cap);
  if (c && got <= CACHE_IDS_MAX) {
    c->wlen = (uint8_t)wl;
    c->nids = (uint8_t)got;
    memcpy(c->word, w, wl);
    memcpy(c->ids, e->ids + e->k, got * sizeof *c->ids);
  }
  e->k += got;
  return ZEROC_OK;
}

/* Encodes a piece of text between added tokens: pre-tokenized, each word merged. */
static zeroc_result_t encode_piece(enc_t *e, const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t wl = !e->t->use_regex                     ? n - i
                : e->t->pattern == ZEROC__PAT_GPT2   ? gpt2_word(p + i, n - i)
                : e->t->pattern == ZEROC__PAT_LLAMA3 ? llama3_word(p + i, n - i, 3)
                                                     : llama3_word(p + i, n - i, 1);
    ZEROC_CHECK(put_word(e, p + i, wl));
    i += wl;
  }
  return ZEROC_OK;
}

/* A piece with add_prefix_space: a space before it unless it starts with one. */
static zeroc_result_t encode_prefixed(enc_t *e, const unsigned char *p, size_t n) {
  if (!e->t->add_prefix_space || p[0] == ' ') return encode_piece(e, p, n);
  unsigned char *q = malloc(n + 1);
  if (!q) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory for %zu bytes", n);
  q[0] = ' ';
  memcpy(q + 1, p, n);
  zeroc_result_t r = encode_piece(e, q, n + 1);
  free(q);
  return r;
}

/* The longest added token of kind `normalized` at p[0..n), or NULL. */
static const zeroc__tok_added_t *added_at(const zeroc_tokenizer_t *t, const unsigned char *p,
                                          size_t n, int normalized) {
  const zeroc__tok_added_t *best = NULL;
  for (int32_t i = 0; i < t->n_added; i++) {
    const zeroc__tok_added_t *a = &t->added[i];
    if (a->normalized == normalized && a->mlen <= n && (!best || a->mlen > best->mlen) &&
        (unsigned char)a->match[0] == p[0] && memcmp(a->match, p, a->mlen) == 0)
      best = a;
  }
  return best;
}

/* Cuts the added tokens of kind `normalized` out of p[0..n) (leftmost, longest),
 * passing each piece between them to `piece`. */
static zeroc_result_t split_added(enc_t *e, const unsigned char *p, size_t n, int normalized,
                                  zeroc_result_t (*piece)(enc_t *, const unsigned char *, size_t)) {
  const zeroc_tokenizer_t *t = e->t;
  size_t start = 0;
  for (size_t i = 0; t->n_added && i < n; i++) {
    if (!t->added_first[normalized][p[i]]) continue;
    const zeroc__tok_added_t *a = added_at(t, p + i, n - i, normalized);
    if (!a) continue;
    if (i > start) ZEROC_CHECK(piece(e, p + start, i - start));
    if (e->k >= e->cap) return too_many(e->cap);
    e->ids[e->k++] = a->id;
    i += a->mlen - 1;
    start = i + 1;
  }
  return start < n ? piece(e, p + start, n - start) : ZEROC_OK;
}

/* A piece of raw text between the added tokens matched on it: normalized (NFC),
 * then split on the added tokens matched after normalization, as tokenizers'
 * AddedVocabulary does. */
static zeroc_result_t encode_raw(enc_t *e, const unsigned char *p, size_t n) {
  unsigned char *q = NULL;
  size_t qn = n;
  if (e->t->nfc) ZEROC_CHECK(zeroc__nfc(p, n, &q, &qn));
  zeroc_result_t r = split_added(e, q ? q : p, qn, 1, encode_prefixed);
  free(q);
  return r;
}

zeroc_result_t zeroc__bpe_encode(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                 int32_t *ids, size_t cap, size_t *n, size_t *dropped) {
  enc_t e = {
      t, len >= CACHE_MIN_TEXT ? calloc(CACHE_SLOTS, sizeof(cache_ent_t)) : NULL, ids, cap, 0, 0};
  zeroc_result_t r = split_added(&e, (const unsigned char *)text, len, 0, encode_raw);
  free(e.cache);
  if (r == ZEROC_OK) *n = e.k;
  if (r == ZEROC_OK && dropped) *dropped = e.dropped;
  return r;
}
