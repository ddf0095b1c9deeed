/*
 * text/tokenizer.c - the public tokenizer calls: load (the built-in "bytes",
 * a file zeroc_tokenizer_save wrote, a Hugging Face tokenizer.json, GPT-2's
 * vocab.json), the byte tokenizer, decode and save.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"
#include "text/tokenizer_internal.h"

static const char BYTES_JSON[] = "{\"zeroc_tokenizer\": \"bytes\"}\n";

static zeroc_result_t bytes_new(zeroc_tokenizer_t **out) {
  zeroc_tokenizer_t *t = calloc(1, sizeof *t);
  if (!t) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer: out of host memory");
  t->kind = ZEROC_TOK_BYTES;
  t->vocab = 256;
  t->eot = -1;
  *out = t;
  return ZEROC_OK;
}

/* A file that zeroc_tokenizer_save wrote for "bytes": {"zeroc_tokenizer": "bytes"}. */
static zeroc_result_t load_zeroc_json(const char *path, const char *buf, size_t len,
                                      zeroc_tokenizer_t **out) {
  zeroc__json_doc_t *doc = NULL;
  char what[512];
  snprintf(what, sizeof what, "tokenizer '%s'", path);
  ZEROC_CHECK(zeroc__json_parse(buf, len, what, &doc));
  const zeroc__json_t *k = zeroc__json_get(zeroc__json_root(doc), "zeroc_tokenizer");
  zeroc_result_t r;
  if (k && k->type == ZEROC_JSON_STRING && strcmp(k->u.str.s, "bytes") == 0)
    r = bytes_new(out);
  else
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "tokenizer '%s': \"zeroc_tokenizer\" is not \"bytes\" (the only kind a zeroc "
                   "tokenizer file names; a bpe tokenizer is saved as a tokenizer.json)",
                   path);
  zeroc__json_free(doc);
  return r;
}

zeroc_result_t zeroc_tokenizer_load(const char *spec, zeroc_tokenizer_t **out) {
  if (!out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_tokenizer_load: out is NULL");
  *out = NULL;
  if (!spec || !*spec)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_tokenizer_load: empty spec (accepted: \"bytes\", a tokenizer.json, "
                      "a GPT-2 vocab.json with merges.txt beside it)");
  if (strcmp(spec, "bytes") == 0) return bytes_new(out);
  char *buf = NULL;
  size_t len = 0;
  zeroc_result_t r = zeroc__file_read(spec, ZEROC_TOK_MAX_FILE, &buf, &len);
  if (r != ZEROC_OK)
    return ZEROC_FAIL(r,
                      "tokenizer '%s': %s (accepted: \"bytes\", a tokenizer.json, a GPT-2 "
                      "vocab.json with merges.txt beside it)",
                      spec, zeroc__tok_inner(zeroc__tls_error()));
  size_t i = 0;
  while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
  if (len >= 3 &&
      !memcmp(buf, "\xEF\xBB\xBF", 3)) /* an editor's; JSON (and tokenizers) refuse it */
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "tokenizer '%s': starts with a UTF-8 byte-order mark (bytes EF BB BF), which "
                   "JSON does not allow (accepted: the same file saved without it)",
                   spec);
  else if (i == len || buf[i] != '{')
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "tokenizer '%s': not a JSON object (accepted: \"bytes\", a tokenizer.json, a "
                   "GPT-2 vocab.json with merges.txt beside it)",
                   spec);
  else if (strstr(buf, "\"zeroc_tokenizer\"") && len < 4096)
    r = load_zeroc_json(spec, buf, len, out);
  else
    r = zeroc__bpe_load(spec, buf, len, out);
  free(buf);
  return r;
}

void zeroc_tokenizer_destroy(zeroc_tokenizer_t *t) { zeroc__tok_free(t); }

int zeroc_tokenizer_vocab(const zeroc_tokenizer_t *t) { return t ? t->vocab : 0; }
int32_t zeroc_tokenizer_eot(const zeroc_tokenizer_t *t) { return t ? t->eot : -1; }
const char *zeroc_tokenizer_kind(const zeroc_tokenizer_t *t) {
  return t && t->kind == ZEROC_TOK_BPE ? "bpe" : "bytes";
}

zeroc_result_t zeroc_tokenizer_encode(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                      int32_t *ids, size_t *n) {
  return zeroc__tokenizer_encode_cap(t, text, len, ids, len, n, NULL);
}

zeroc_result_t zeroc__tokenizer_encode_cap(const zeroc_tokenizer_t *t, const char *text, size_t len,
                                           int32_t *ids, size_t cap, size_t *n, size_t *dropped) {
  if (!t || !n || (len && (!text || !ids)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_tokenizer_encode: NULL argument (tokenizer %p, text %p, ids %p, n %p)",
                      (const void *)t, (const void *)text, (void *)ids, (void *)n);
  *n = 0;
  if (dropped) *dropped = 0;
  if (t->kind == ZEROC_TOK_BPE) return zeroc__bpe_encode(t, text, len, ids, cap, n, dropped);
  if (cap < len)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_tokenizer_encode: %zu bytes need %zu ids, the buffer holds %zu", len,
                      len, cap);
  const unsigned char *p = (const unsigned char *)text;
  for (size_t i = 0; i < len; i++) ids[i] = p[i];
  *n = len;
  return ZEROC_OK;
}

zeroc_result_t zeroc_tokenizer_decode(const zeroc_tokenizer_t *t, const int32_t *ids, size_t n,
                                      char *out, size_t cap, size_t *len) {
  if (!t || !len || (n && !ids) || (cap && !out))
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "zeroc_tokenizer_decode: NULL argument (tokenizer %p, ids %p, out %p, len %p)",
        (const void *)t, (const void *)ids, (void *)out, (void *)len);
  *len = 0;
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= t->vocab || (t->kind == ZEROC_TOK_BPE && t->entry[id] == ZEROC_TOK_GAP))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc_tokenizer_decode: id %d at position %zu is not in the vocab "
                        "(accepted: 0..%d%s)",
                        (int)id, i, t->vocab - 1,
                        t->kind == ZEROC_TOK_BPE ? ", ids the tokenizer file defines" : "");
    if (t->kind == ZEROC_TOK_BYTES) {
      if (w < cap) out[w] = (char)id;
      w++;
      continue;
    }
    size_t b = (size_t)t->off[id], m = (size_t)(t->off[id + 1] - t->off[id]);
    if (w < cap) memcpy(out + w, t->bytes + b, cap - w < m ? cap - w : m);
    w += m;
  }
  *len = w;
  return ZEROC_OK;
}

zeroc_result_t zeroc_tokenizer_save(const zeroc_tokenizer_t *t, const char *path) {
  if (!t || !path || !*path)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_tokenizer_save: NULL tokenizer or empty path");
  if (t->kind == ZEROC_TOK_BPE) return zeroc__bpe_save(t, path);
  return zeroc__file_write_atomic(path, BYTES_JSON, sizeof BYTES_JSON - 1);
}
