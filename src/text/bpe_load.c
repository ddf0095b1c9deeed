/*
 * text/bpe_load.c - reading a Hugging Face tokenizer.json (model BPE with a
 * byte-level pre-tokenizer) or GPT-2's vocab.json + merges.txt into a bpe
 * tokenizer. Everything that would make `tokenizers` encode differently from
 * what zeroc implements is refused with a message naming what is accepted
 * (normalizers: none or NFC).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"
#include "text/bpe_build.h"

/* The Split patterns zeroc matches by hand (bpe_encode.c), exactly as
 * tokenizer.json holds them: GPT-2's, Llama 3's and Qwen2's. */
static const char *const PATTERNS[] = {
    [ZEROC__PAT_GPT2] =
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    [ZEROC__PAT_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [ZEROC__PAT_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

const char *zeroc__tok_pattern_regex(int p) {
  return p >= 0 && p <= ZEROC__PAT_QWEN2 ? PATTERNS[p] : PATTERNS[0];
}

#define ACCEPT_PRE                                                                                 \
  "ByteLevel, or a Sequence of ByteLevel, or of Split(GPT-2's, Llama 3's or Qwen2's pattern, "     \
  "Isolated) and ByteLevel(use_regex false)"

static const char *type_of(const zeroc__json_t *v) {
  const zeroc__json_t *ty = zeroc__json_get(v, "type");
  return ty && ty->type == ZEROC_JSON_STRING ? ty->u.str.s : "(no type)";
}

/* A boolean member: absent or null gives `dflt`; another type is refused. */
static zeroc_result_t get_bool(const char *path, const zeroc__json_t *obj, const char *where,
                               const char *key, int dflt, int *out) {
  const zeroc__json_t *v = zeroc__json_get(obj, key);
  *out = dflt;
  if (!v || v->type == ZEROC_JSON_NULL) return ZEROC_OK;
  if (v->type != ZEROC_JSON_BOOL)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "tokenizer '%s': %s.%s is a %s (accepted: true, false)",
                      path, where, key, zeroc__json_type_name(v->type));
  *out = v->u.boolean;
  return ZEROC_OK;
}

/* An id: an integer in 0..ZEROC_TOK_MAX_ID-1, written as one (tokenizers reads
 * ids as u32: 1.0, 1e3 and "7" are refused there too). The message says which
 * of these it is, never a rounded number. */
static zeroc_result_t get_id(const char *path, const zeroc__json_t *v, const char *what,
                             int32_t *id) {
  if (v && v->type == ZEROC_JSON_NUMBER && v->u.num.is_int && v->u.num.i >= 0 &&
      v->u.num.i < ZEROC_TOK_MAX_ID) {
    *id = (int32_t)v->u.num.i;
    return ZEROC_OK;
  }
  char why[224], num[32] = "";
  if (v && v->type == ZEROC_JSON_NUMBER) { /* the shortest form that reads back the same */
    snprintf(num, sizeof num, "%.15g", v->u.num.value);
    if (strtod(num, NULL) != v->u.num.value) snprintf(num, sizeof num, "%.17g", v->u.num.value);
  }
  if (!v)
    snprintf(why, sizeof why, "has no id");
  else if (v->type == ZEROC_JSON_STRING) {
    char sh[96];
    snprintf(why, sizeof why, "has the string \"%s\" as id, not a number",
             zeroc__tok_show(v->u.str.s, v->u.str.len, 32, sh, sizeof sh));
  } else if (v->type != ZEROC_JSON_NUMBER)
    snprintf(why, sizeof why, "has a%s %s as id, not a number",
             v->type == ZEROC_JSON_ARRAY || v->type == ZEROC_JSON_OBJECT ? "n" : "",
             zeroc__json_type_name(v->type));
  else if (v->u.num.value != floor(v->u.num.value))
    snprintf(why, sizeof why, "has id %s, not an integer", num);
  else if (v->u.num.value >= 0 && v->u.num.value < ZEROC_TOK_MAX_ID)
    snprintf(why, sizeof why, "has id %s written with a point or an exponent", num);
  else
    snprintf(why, sizeof why, "has id %s", num); /* out of range: "accepted" says so */
  return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "tokenizer '%s': %s %s (accepted: an integer 0..%d)", path,
                    what, why, ZEROC_TOK_MAX_ID - 1);
}

static zeroc_result_t check_byte_level(const char *path, const zeroc__json_t *bl, int after_split,
                                       zeroc_tokenizer_t *t) {
  ZEROC_CHECK(get_bool(path, bl, "pre_tokenizer", "add_prefix_space", 1, &t->add_prefix_space));
  ZEROC_CHECK(get_bool(path, bl, "pre_tokenizer", "use_regex", 1, &t->use_regex));
  if (after_split && (t->use_regex || t->add_prefix_space))
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': ByteLevel after Split has use_regex %s, add_prefix_space %s "
                      "(accepted there: both false)",
                      path, t->use_regex ? "true" : "false",
                      t->add_prefix_space ? "true" : "false");
  if (after_split) t->use_regex = 1; /* the Split did GPT-2's split */
  return ZEROC_OK;
}

/* The pattern of a Split zeroc matches (zeroc__tok_pattern_t), or -1. */
static int split_pattern(const zeroc__json_t *s) {
  const zeroc__json_t *pat = zeroc__json_get(s, "pattern");
  const zeroc__json_t *re = pat ? zeroc__json_get(pat, "Regex") : NULL;
  const zeroc__json_t *beh = zeroc__json_get(s, "behavior");
  const zeroc__json_t *inv = zeroc__json_get(s, "invert");
  if (!(re && re->type == ZEROC_JSON_STRING && beh && beh->type == ZEROC_JSON_STRING &&
        strcmp(beh->u.str.s, "Isolated") == 0 &&
        (!inv || (inv->type == ZEROC_JSON_BOOL && !inv->u.boolean))))
    return -1;
  for (int p = 0; p <= ZEROC__PAT_QWEN2; p++)
    if (strcmp(re->u.str.s, PATTERNS[p]) == 0) return p;
  return -1;
}

static zeroc_result_t check_pre(const char *path, const zeroc__json_t *pre, zeroc_tokenizer_t *t) {
  if (!pre || pre->type != ZEROC_JSON_OBJECT)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': pre_tokenizer is %s (accepted: " ACCEPT_PRE ")", path,
                      pre ? zeroc__json_type_name(pre->type) : "missing");
  const char *ty = type_of(pre);
  if (strcmp(ty, "ByteLevel") == 0) return check_byte_level(path, pre, 0, t);
  const zeroc__json_t *seq = zeroc__json_get(pre, "pretokenizers");
  if (strcmp(ty, "Sequence") == 0 && seq && seq->type == ZEROC_JSON_ARRAY) {
    const zeroc__json_t *it = seq->u.arr.items;
    if (seq->u.arr.n == 1 && strcmp(type_of(&it[0]), "ByteLevel") == 0)
      return check_byte_level(path, &it[0], 0, t);
    if (seq->u.arr.n == 2 && strcmp(type_of(&it[0]), "Split") == 0 &&
        strcmp(type_of(&it[1]), "ByteLevel") == 0) {
      int pat = split_pattern(&it[0]);
      if (pat < 0)
        return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                          "tokenizer '%s': pre_tokenizer Split has another pattern, behavior or "
                          "invert (accepted: GPT-2's, Llama 3's or Qwen2's Regex, Isolated, "
                          "invert false)",
                          path);
      t->pattern = pat;
      return check_byte_level(path, &it[1], 1, t);
    }
    char names[256] = "";
    for (size_t i = 0; i < seq->u.arr.n && strlen(names) < 200; i++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
               type_of(&it[i]));
    return ZEROC_FAIL(
        ZEROC_ERR_UNSUPPORTED,
        "tokenizer '%s': pre_tokenizer Sequence [%s] is not supported (accepted: " ACCEPT_PRE ")",
        path, names);
  }
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                    "tokenizer '%s': pre_tokenizer %s is not supported (accepted: " ACCEPT_PRE ")",
                    path, ty);
}

/* A post-processor that leaves the ids of plain text alone: ByteLevel,
 * TemplateProcessing, or a Sequence of them. */
static int post_processor_ok(const zeroc__json_t *v) {
  const char *ty = type_of(v);
  if (!strcmp(ty, "ByteLevel") || !strcmp(ty, "TemplateProcessing")) return 1;
  const zeroc__json_t *seq = zeroc__json_get(v, "processors");
  if (strcmp(ty, "Sequence") || !seq || seq->type != ZEROC_JSON_ARRAY) return 0;
  for (size_t k = 0; k < seq->u.arr.n; k++) {
    const char *t = type_of(&seq->u.arr.items[k]);
    if (strcmp(t, "ByteLevel") && strcmp(t, "TemplateProcessing")) return 0;
  }
  return 1;
}

#define ACCEPT_NORM "null, NFC, a Sequence of NFC only"

/* The normalizer: none, or NFC (Qwen2's; nfc.c), also as tokenizers writes
 * normalizers.Sequence([NFC()]). *nfc: 1 for NFC. */
static zeroc_result_t check_normalizer(const char *path, const zeroc__json_t *root, int *nfc) {
  const zeroc__json_t *v = zeroc__json_get(root, "normalizer");
  *nfc = 0;
  if (!v || v->type == ZEROC_JSON_NULL) return ZEROC_OK;
  const char *ty = v->type == ZEROC_JSON_OBJECT ? type_of(v) : zeroc__json_type_name(v->type);
  if (!strcmp(ty, "NFC")) return (*nfc = 1), ZEROC_OK;
  const zeroc__json_t *seq = zeroc__json_get(v, "normalizers");
  if (strcmp(ty, "Sequence") || !seq || seq->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': normalizer %s is not supported (accepted: " ACCEPT_NORM ")",
                      path, ty);
  char names[256] = "";
  int others = 0;
  for (size_t i = 0; i < seq->u.arr.n; i++) {
    const char *n = type_of(&seq->u.arr.items[i]);
    others += strcmp(n, "NFC") != 0;
    if (strlen(names) < 200)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", n);
  }
  if (others)
    return ZEROC_FAIL(
        ZEROC_ERR_UNSUPPORTED,
        "tokenizer '%s': normalizer Sequence [%s] is not supported (accepted: " ACCEPT_NORM ")",
        path, names);
  *nfc = seq->u.arr.n > 0; /* NFC twice is NFC once */
  return ZEROC_OK;
}

/* post_processor, decoder, truncation, padding: what leaves the ids alone. */
static zeroc_result_t check_parts(const char *path, const zeroc__json_t *root) {
  static const struct {
    const char *key, *accepted;
  } parts[] = {{"post_processor", "null, ByteLevel, TemplateProcessing, a Sequence of them"},
               {"decoder", "null, ByteLevel"},
               {"truncation", "null"},
               {"padding", "null"}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    const zeroc__json_t *v = zeroc__json_get(root, parts[i].key);
    if (!v || v->type == ZEROC_JSON_NULL) continue;
    const char *ty = v->type == ZEROC_JSON_OBJECT ? type_of(v) : zeroc__json_type_name(v->type);
    if (strcmp(parts[i].accepted, "null") != 0 && strcmp(ty, "ByteLevel") == 0) continue;
    /* the post-processor adds special tokens only when asked to (Llama 3's
     * <|begin_of_text|>); zeroc encodes text without them and zeroc data puts
     * the tokenizer's own separator between documents */
    if (!strcmp(parts[i].key, "post_processor") && post_processor_ok(v)) continue;
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': %s %s is not supported (accepted: %s)", path, parts[i].key,
                      ty, parts[i].accepted);
  }
  return ZEROC_OK;
}

/* The BPE options that change encoding: refused unless they keep GPT-2's rules. */
static zeroc_result_t check_model(const char *path, const zeroc__json_t *m, zeroc_tokenizer_t *t) {
  const char *ty = type_of(m);
  if (strcmp(ty, "BPE") != 0 && strcmp(ty, "(no type)") != 0)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': model type %s is not supported (accepted: BPE)", path, ty);
  const zeroc__json_t *d = zeroc__json_get(m, "dropout");
  if (d && d->type != ZEROC_JSON_NULL && !(d->type == ZEROC_JSON_NUMBER && d->u.num.value == 0))
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': model.dropout is set (accepted: null or 0; dropout makes "
                      "encoding random)",
                      path);
  static const char *const empty[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const zeroc__json_t *v = zeroc__json_get(m, empty[i]);
    if (v && v->type != ZEROC_JSON_NULL && !(v->type == ZEROC_JSON_STRING && v->u.str.len == 0))
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "tokenizer '%s': model.%s is set (accepted: null or \"\")", path, empty[i]);
  }
  int fallback = 0;
  ZEROC_CHECK(get_bool(path, m, "model", "byte_fallback", 0, &fallback));
  if (fallback)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "tokenizer '%s': model.byte_fallback is true (accepted: false; byte-level "
                      "BPE needs no fallback)",
                      path);
  ZEROC_CHECK(get_bool(path, m, "model", "fuse_unk", 0, &t->fuse_unk));
  ZEROC_CHECK(get_bool(path, m, "model", "ignore_merges", 0, &t->ignore_merges));
  return ZEROC_OK;
}

/* The largest id of the vocab and the added tokens, checking their shapes. */
static zeroc_result_t scan_ids(const char *path, const zeroc__json_t *vocab,
                               const zeroc__json_t *added, int32_t *max_id) {
  *max_id = -1;
  for (size_t i = 0; i < vocab->u.obj.n; i++) {
    int32_t id;
    char what[160], sh[96];
    const zeroc__json_member_t *e = &vocab->u.obj.members[i];
    snprintf(what, sizeof what, "vocab entry %zu \"%s\"", i,
             zeroc__tok_show(e->key, e->key_len, 32, sh, sizeof sh));
    ZEROC_CHECK(get_id(path, &vocab->u.obj.members[i].value, what, &id));
    if (id > *max_id) *max_id = id;
  }
  for (size_t i = 0; added && i < added->u.arr.n; i++) {
    const zeroc__json_t *a = &added->u.arr.items[i];
    const zeroc__json_t *c = zeroc__json_get(a, "content");
    if (a->type != ZEROC_JSON_OBJECT || !c || c->type != ZEROC_JSON_STRING || !c->u.str.len)
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "tokenizer '%s': added_tokens[%zu] has no content (accepted: objects with "
                        "\"id\" and a non-empty \"content\")",
                        path, i);
    static const char *const flags[] = {"single_word", "lstrip", "rstrip"};
    for (int f = 0; f < 3; f++) {
      int on = 0;
      ZEROC_CHECK(get_bool(path, a, "added_tokens[]", flags[f], 0, &on));
      if (on)
        return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                          "tokenizer '%s': added token \"%.64s\" has %s true (accepted: false)",
                          path, c->u.str.s, flags[f]);
    }
    int32_t id;
    char what[192], sh[160];
    snprintf(what, sizeof what, "added token \"%s\"",
             zeroc__tok_show(c->u.str.s, c->u.str.len, 64, sh, sizeof sh));
    ZEROC_CHECK(get_id(path, zeroc__json_get(a, "id"), what, &id));
    if (id > *max_id) *max_id = id;
  }
  if (*max_id < 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': the vocab is empty (accepted: at least the 256 byte tokens)",
                      path);
  /* the tables are sized by the largest id: a few tokens with a huge id are a
   * corrupt (or hostile) file, not a vocabulary */
  size_t defined = vocab->u.obj.n + (added ? added->u.arr.n : 0);
  if ((size_t)*max_id + 1 > 2 * defined + 1024)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': ids reach %d but only %zu tokens are defined (accepted: "
                      "ids 0..N-1 with at most about half of them unused)",
                      path, (int)*max_id, defined);
  return ZEROC_OK;
}

static zeroc_result_t load_merges_json(zeroc__bpe_builder_t *b, const zeroc__json_t *merges) {
  const char *path = b->path;
  ZEROC_CHECK(zeroc__bpe_builder_merges(b, (int32_t)merges->u.arr.n));
  for (size_t i = 0; i < merges->u.arr.n; i++) {
    const zeroc__json_t *m = &merges->u.arr.items[i];
    char where[64];
    snprintf(where, sizeof where, "merge %zu", i);
    if (m->type == ZEROC_JSON_STRING) {
      const char *sp = memchr(m->u.str.s, ' ', m->u.str.len);
      size_t na = sp ? (size_t)(sp - m->u.str.s) : 0;
      char sh[160];
      if (!sp || na == 0 || na + 1 >= m->u.str.len || memchr(sp + 1, ' ', m->u.str.len - na - 1))
        return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                          "tokenizer '%s': merge %zu \"%s\" is not two tokens (accepted: \"a "
                          "b\" with one space, or [\"a\", \"b\"])",
                          path, i, zeroc__tok_show(m->u.str.s, m->u.str.len, 64, sh, sizeof sh));
      ZEROC_CHECK(
          zeroc__bpe_builder_merge(b, m->u.str.s, na, sp + 1, m->u.str.len - na - 1, where));
    } else if (m->type == ZEROC_JSON_ARRAY && m->u.arr.n == 2 &&
               m->u.arr.items[0].type == ZEROC_JSON_STRING &&
               m->u.arr.items[1].type == ZEROC_JSON_STRING) {
      const zeroc__json_t *p = m->u.arr.items;
      ZEROC_CHECK(zeroc__bpe_builder_merge(b, p[0].u.str.s, p[0].u.str.len, p[1].u.str.s,
                                           p[1].u.str.len, where));
    } else {
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "tokenizer '%s': merge %zu is a %s (accepted: \"a b\" with one space, or "
                        "[\"a\", \"b\"])",
                        path, i, zeroc__json_type_name(m->type));
    }
  }
  return ZEROC_OK;
}

/* unk_token: null, or a token of the vocab. */
static zeroc_result_t resolve_unk(const char *path, const zeroc__json_t *m, zeroc_tokenizer_t *t) {
  const zeroc__json_t *u = zeroc__json_get(m, "unk_token");
  if (!u || u->type == ZEROC_JSON_NULL) return ZEROC_OK;
  if (u->type == ZEROC_JSON_STRING) t->unk = zeroc__tok_find(t, u->u.str.s, u->u.str.len);
  if (u->type != ZEROC_JSON_STRING || t->unk < 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': model.unk_token is not a token of the vocab (accepted: "
                      "null or a vocab token)",
                      path);
  return ZEROC_OK;
}

static zeroc_result_t load_hf(const char *path, const zeroc__json_t *root,
                              zeroc_tokenizer_t **out) {
  const zeroc__json_t *m = zeroc__json_get(root, "model");
  const zeroc__json_t *vocab = zeroc__json_get(m, "vocab");
  const zeroc__json_t *merges = zeroc__json_get(m, "merges");
  const zeroc__json_t *added = zeroc__json_get(root, "added_tokens");
  if (!m || m->type != ZEROC_JSON_OBJECT)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': \"model\" is not an object (accepted: "
                      "a tokenizer.json with a BPE model)",
                      path);
  zeroc_tokenizer_t probe = {.unk = -1};
  ZEROC_CHECK(check_model(path, m, &probe));
  if (!vocab || vocab->type != ZEROC_JSON_OBJECT || !merges || merges->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "tokenizer '%s': model.vocab is %s and model.merges is %s (accepted: an "
                      "object of token -> id and an array of merges)",
                      path, vocab ? zeroc__json_type_name(vocab->type) : "missing",
                      merges ? zeroc__json_type_name(merges->type) : "missing");
  if (added && added->type == ZEROC_JSON_NULL) added = NULL;
  if (added && added->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "tokenizer '%s': added_tokens is a %s (accepted: array)",
                      path, zeroc__json_type_name(added->type));
  ZEROC_CHECK(check_normalizer(path, root, &probe.nfc));
  ZEROC_CHECK(check_parts(path, root));
  ZEROC_CHECK(check_pre(path, zeroc__json_get(root, "pre_tokenizer"), &probe));
  int32_t max_id;
  ZEROC_CHECK(scan_ids(path, vocab, added, &max_id));
  zeroc__bpe_builder_t b;
  zeroc_result_t res;
  ZEROC_TRY(zeroc__bpe_builder_init(&b, path, max_id + 1));
  zeroc_tokenizer_t *t = b.t;
  t->add_prefix_space = probe.add_prefix_space;
  t->use_regex = probe.use_regex;
  t->pattern = probe.pattern;
  t->fuse_unk = probe.fuse_unk;
  t->ignore_merges = probe.ignore_merges;
  t->nfc = probe.nfc;
  for (size_t i = 0; i < vocab->u.obj.n; i++) {
    const zeroc__json_member_t *e = &vocab->u.obj.members[i];
    ZEROC_TRY(zeroc__bpe_builder_set(&b, (int32_t)e->value.u.num.i, e->key, e->key_len, 0, 0, 0));
  }
  for (size_t i = 0; added && i < added->u.arr.n; i++) {
    const zeroc__json_t *a = &added->u.arr.items[i];
    const zeroc__json_t *c = zeroc__json_get(a, "content");
    int special = 0, normalized = 0;
    ZEROC_TRY(get_bool(path, a, "added_tokens[]", "special", 0, &special));
    /* tokenizers requires "normalized"; absent, AddedToken's own default */
    ZEROC_TRY(get_bool(path, a, "added_tokens[]", "normalized", !special, &normalized));
    ZEROC_TRY(zeroc__bpe_builder_set(&b, (int32_t)zeroc__json_get(a, "id")->u.num.i, c->u.str.s,
                                     c->u.str.len, 1, special, normalized));
  }
  ZEROC_TRY(zeroc__bpe_builder_finish_vocab(&b));
  ZEROC_TRY(resolve_unk(path, m, t));
  ZEROC_TRY(load_merges_json(&b, merges));
  *out = zeroc__bpe_builder_take(&b);
  return ZEROC_OK;
fail:
  zeroc__bpe_builder_free(&b);
  return res;
}

/* GPT-2's merges file: "#version" first line skipped, then "a b" per line. */
static zeroc_result_t load_merges_txt(zeroc__bpe_builder_t *b, const char *mpath, char *buf,
                                      size_t len) {
  int32_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
  ZEROC_CHECK(zeroc__bpe_builder_merges(b, lines + 1));
  size_t i = 0;
  for (int line = 1; i < len; line++) {
    char *nl = memchr(buf + i, '\n', len - i);
    size_t e = nl ? (size_t)(nl - buf) : len, n = e - i;
    char *s = buf + i;
    i = e + 1;
    if (n && s[n - 1] == '\r') n--;
    if (line == 1 && n >= 8 && memcmp(s, "#version", 8) == 0) continue;
    if (n == 0 && i >= len) break; /* the last newline */
    char *sp = memchr(s, ' ', n);
    size_t na = sp ? (size_t)(sp - s) : 0;
    char sh[160];
    if (!sp || na == 0 || na + 1 >= n || memchr(sp + 1, ' ', n - na - 1))
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "tokenizer '%s': '%s' line %d \"%s\" is not two tokens (accepted: "
                        "\"a b\" with one space; a first line \"#version...\" is skipped)",
                        b->path, mpath, line, zeroc__tok_show(s, n, 64, sh, sizeof sh));
    char where[512];
    snprintf(where, sizeof where, "'%.400s' line %d", mpath, line);
    ZEROC_CHECK(zeroc__bpe_builder_merge(b, s, na, sp + 1, n - na - 1, where));
  }
  return ZEROC_OK;
}

/* "dir/x-vocab.json" -> "dir/x-merges.txt"; another name: "dir/merges.txt". */
static char *merges_path(const char *path) {
  size_t n = strlen(path);
  char *m = malloc(n + 16);
  if (!m) return NULL;
  if (n >= 10 && strcmp(path + n - 10, "vocab.json") == 0) {
    snprintf(m, n + 16, "%.*smerges.txt", (int)(n - 10), path);
  } else {
    const char *slash = strrchr(path, '/');
    snprintf(m, n + 16, "%.*smerges.txt", slash ? (int)(slash - path + 1) : 0, path);
  }
  return m;
}

static zeroc_result_t load_gpt2(const char *path, const zeroc__json_t *vocab,
                                zeroc_tokenizer_t **out) {
  int32_t max_id;
  ZEROC_CHECK(scan_ids(path, vocab, NULL, &max_id));
  char *mpath = merges_path(path), *mbuf = NULL;
  size_t mlen = 0;
  if (!mpath) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tokenizer '%s': out of host memory", path);
  zeroc_result_t res = zeroc__file_read(mpath, ZEROC_TOK_MAX_FILE, &mbuf, &mlen);
  if (res != ZEROC_OK) {
    res = ZEROC_FAIL(res,
                     "tokenizer '%s': no merges file beside it: %s (accepted: a vocab.json with "
                     "merges.txt, or X-vocab.json with X-merges.txt, in the same folder)",
                     path, zeroc__tok_inner(zeroc__tls_error()));
    free(mpath);
    return res;
  }
  zeroc__bpe_builder_t b;
  ZEROC_TRY(zeroc__bpe_builder_init(&b, path, max_id + 1));
  for (size_t i = 0; i < vocab->u.obj.n; i++) {
    const zeroc__json_member_t *e = &vocab->u.obj.members[i];
    ZEROC_TRY(zeroc__bpe_builder_set(&b, (int32_t)e->value.u.num.i, e->key, e->key_len, 0, 0, 0));
  }
  /* GPT-2's end of text is a special token, as transformers' GPT-2 tokenizers have it */
  for (size_t i = 0; i < vocab->u.obj.n; i++) {
    const zeroc__json_member_t *e = &vocab->u.obj.members[i];
    if (e->key_len == 13 && memcmp(e->key, "<|endoftext|>", 13) == 0)
      ZEROC_TRY(zeroc__bpe_builder_set(&b, (int32_t)e->value.u.num.i, e->key, e->key_len, 1, 1, 0));
  }
  b.t->add_prefix_space = 0;
  ZEROC_TRY(zeroc__bpe_builder_finish_vocab(&b));
  ZEROC_TRY(load_merges_txt(&b, mpath, mbuf, mlen));
  *out = zeroc__bpe_builder_take(&b);
  free(mpath);
  free(mbuf);
  return ZEROC_OK;
fail:
  zeroc__bpe_builder_free(&b);
  free(mpath);
  free(mbuf);
  return res;
}

/* A tokenizer.json that lacks "model": a member of a vocab.json is a number. */
static int not_a_vocab(const zeroc__json_t *root) {
  static const char *const keys[] = {"version", "added_tokens", "pre_tokenizer", "normalizer",
                                     "decoder"};
  for (int i = 0; i < 5; i++) {
    const zeroc__json_t *v = zeroc__json_get(root, keys[i]);
    if (v && v->type != ZEROC_JSON_NUMBER) return 1;
  }
  return 0;
}

zeroc_result_t zeroc__bpe_load(const char *path, const char *buf, size_t len,
                               zeroc_tokenizer_t **out) {
  zeroc__json_doc_t *doc = NULL;
  char what[600];
  snprintf(what, sizeof what, "tokenizer '%.500s'", path);
  ZEROC_CHECK(zeroc__json_parse(buf, len, what, &doc));
  const zeroc__json_t *root = zeroc__json_root(doc);
  zeroc_result_t r;
  if (root->type != ZEROC_JSON_OBJECT)
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "tokenizer '%s': the JSON is a %s (accepted: a tokenizer.json or a GPT-2 "
                   "vocab.json object)",
                   path, zeroc__json_type_name(root->type));
  else if (zeroc__json_get(root, "model"))
    r = load_hf(path, root, out);
  else if (not_a_vocab(root))
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "tokenizer '%s': a tokenizer.json without \"model\" (accepted: a "
                   "tokenizer.json with a BPE model, or a GPT-2 vocab.json of token -> id)",
                   path);
  else
    r = load_gpt2(path, root, out);
  zeroc__json_free(doc);
  return r;
}
