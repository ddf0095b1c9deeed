/*
 * io/json.c - the strict JSON parser: recursive descent into a tree whose
 * values, keys and strings live in one arena per document; and the tree's
 * accessors. The writer is json_write.c, the shared UTF-8 and C-locale
 * helpers json_text.c.
 *
 * Why our own parser and not a packaged library (jansson, cJSON, json-c):
 * docs/json.md, with the measurements (benchmarks/json_libs.c). In short:
 * cJSON rounds integers above 2^53 silently and accepts duplicate keys;
 * jansson refuses integers above 2^63 and has no run-time depth limit; json-c
 * accepts duplicate keys; the three copy every string with one malloc each
 * (3500-4500 mallocs for a GPT-2 124M manifest, against ~600 here), json-c
 * and jansson take about 2x as long, and each is one more shared library to
 * carry to GPU machines that have none installed.
 */
#include "io/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json_internal.h"

/* ---- arena -------------------------------------------------------------------- */

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} chunk_t;

struct zeroc__json_doc {
  chunk_t *chunks;
  zeroc__json_t root;
};

static void *arena_alloc(zeroc__json_doc_t *d, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  chunk_t *c = d->chunks;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = 0;
    c->next = d->chunks;
    d->chunks = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

void zeroc__json_free(zeroc__json_doc_t *doc) {
  if (!doc) return;
  for (chunk_t *c = doc->chunks, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(doc);
}

/* ---- parser ------------------------------------------------------------------- */

typedef struct parser {
  const unsigned char *s;
  size_t len, pos;
  const char *what;
  int depth;
  zeroc__json_doc_t *doc;
} parser_t;

/* Reports a parse error at byte `at`, with the line of json.c that found it. */
__attribute__((format(printf, 4, 5))) static zeroc_result_t perr(const parser_t *P, size_t at,
                                                                 int line, const char *fmt, ...) {
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return zeroc__fail(ZEROC_ERR_CORRUPT, __FILE__, line, "%s: JSON error at byte %zu: %s",
                     P->what ? P->what : "input", at, detail);
}
#define PERR(P, at, ...) perr((P), (at), __LINE__, __VA_ARGS__)

static zeroc_result_t nomem(const parser_t *P) {
  return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: out of host memory parsing %zu bytes of JSON",
                    P->what ? P->what : "input", P->len);
}

/* "'x'" for a printable byte, "byte 0x0a" otherwise, "end of input" past the end. */
static const char *show(const parser_t *P, size_t at, char *buf, size_t n) {
  if (at >= P->len)
    snprintf(buf, n, "end of input");
  else if (P->s[at] >= 0x20 && P->s[at] < 0x7f)
    snprintf(buf, n, "'%c'", P->s[at]);
  else
    snprintf(buf, n, "byte 0x%02x", P->s[at]);
  return buf;
}

static void skip_ws(parser_t *P) {
  while (P->pos < P->len) {
    unsigned char c = P->s[P->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    P->pos++;
  }
}

static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static zeroc_result_t read_hex4(parser_t *P, size_t at, uint32_t *out) {
  if (P->len - at < 4) return PERR(P, at, "\\u escape needs 4 hex digits before the end of input");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(P->s[at + (size_t)i]);
    if (h < 0) {
      char b[24];
      return PERR(P, at + (size_t)i, "\\u escape needs 4 hex digits, found %s",
                  show(P, at + (size_t)i, b, sizeof b));
    }
    v = v << 4 | (uint32_t)h;
  }
  *out = v;
  return ZEROC_OK;
}

/* Parses the string whose opening quote is at P->pos into the arena. The
 * decoded text is never longer than the raw text between the quotes. */
static zeroc_result_t parse_string(parser_t *P, const char **out, size_t *out_len) {
  size_t start = P->pos; /* the opening quote */
  size_t i = start + 1;
  while (i < P->len && P->s[i] != '"') i += (P->s[i] == '\\') ? 2 : 1;
  if (i >= P->len) return PERR(P, start, "string starting here has no closing quote");
  size_t end = i; /* the closing quote */
  char *dst = arena_alloc(P->doc, end - start);
  if (!dst) return nomem(P);
  size_t n = 0;
  for (i = start + 1; i < end;) {
    unsigned char c = P->s[i];
    if (c < 0x20)
      return PERR(P, i, "control character 0x%02x in a string must be escaped (\\n, \\t, \\u00XX)",
                  c);
    if (c != '\\') {
      size_t k = zeroc__json_utf8_len(P->s + i, end - i);
      if (!k) return PERR(P, i, "invalid UTF-8 byte 0x%02x in a string", c);
      memcpy(dst + n, P->s + i, k);
      n += k;
      i += k;
      continue;
    }
    unsigned char e = P->s[i + 1];
    switch (e) {
    case '"':
      dst[n++] = '"';
      break;
    case '\\':
      dst[n++] = '\\';
      break;
    case '/':
      dst[n++] = '/';
      break;
    case 'b':
      dst[n++] = '\b';
      break;
    case 'f':
      dst[n++] = '\f';
      break;
    case 'n':
      dst[n++] = '\n';
      break;
    case 'r':
      dst[n++] = '\r';
      break;
    case 't':
      dst[n++] = '\t';
      break;
    case 'u': {
      uint32_t cp;
      ZEROC_CHECK(read_hex4(P, i + 2, &cp));
      if (cp >= 0xdc00 && cp <= 0xdfff)
        return PERR(P, i, "\\u%04X is a low surrogate without a high surrogate before it", cp);
      if (cp >= 0xd800 && cp <= 0xdbff) {
        uint32_t lo;
        if (i + 12 > end || P->s[i + 6] != '\\' || P->s[i + 7] != 'u')
          return PERR(P, i, "\\u%04X is a high surrogate not followed by a \\u low surrogate", cp);
        ZEROC_CHECK(read_hex4(P, i + 8, &lo));
        if (lo < 0xdc00 || lo > 0xdfff)
          return PERR(P, i + 6, "\\u%04X after high surrogate \\u%04X is not a low surrogate", lo,
                      cp);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i += 6;
      }
      n += zeroc__json_utf8_put(dst + n, cp);
      i += 6;
      continue;
    }
    default: {
      char b[24];
      return PERR(P, i + 1,
                  "invalid escape \\%s in a string; accepted: \\\" \\\\ \\/ \\b \\f \\n "
                  "\\r \\t \\uXXXX",
                  show(P, i + 1, b, sizeof b));
    }
    }
    i += 2;
  }
  dst[n] = 0;
  *out = dst;
  *out_len = n;
  P->pos = end + 1;
  return ZEROC_OK;
}

static zeroc_result_t parse_number(parser_t *P, zeroc__json_t *v) {
  size_t start = P->pos, i = start;
  const unsigned char *s = P->s;
  char b[24];
  int is_int = 1;
  if (i < P->len && s[i] == '-') i++;
  if (i >= P->len || s[i] < '0' || s[i] > '9')
    return PERR(P, i, "a number needs a digit here, found %s", show(P, i, b, sizeof b));
  if (s[i] == '0') {
    i++;
    if (i < P->len && s[i] >= '0' && s[i] <= '9')
      return PERR(P, start, "numbers may not have leading zeros");
  } else {
    while (i < P->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < P->len && s[i] == '.') {
    is_int = 0;
    i++;
    if (i >= P->len || s[i] < '0' || s[i] > '9')
      return PERR(P, i, "a digit must follow the decimal point, found %s", show(P, i, b, sizeof b));
    while (i < P->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < P->len && (s[i] == 'e' || s[i] == 'E')) {
    is_int = 0;
    i++;
    if (i < P->len && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= P->len || s[i] < '0' || s[i] > '9')
      return PERR(P, i, "an exponent needs a digit here, found %s", show(P, i, b, sizeof b));
    while (i < P->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  size_t n = i - start;
  /* strtod needs a terminated copy; the grammar above already holds */
  char small[64], *txt = n < sizeof small ? small : malloc(n + 1);
  if (!txt) return nomem(P);
  memcpy(txt, s + start, n);
  txt[n] = 0;
  errno = 0;
  double d = strtod_l(txt, NULL, zeroc__json_c_locale());
  int range_err = errno == ERANGE && isinf(d);
  int64_t iv = 0;
  uint64_t uv = 0;
  int is_u64 = 0;
  if (is_int) {
    /* exact int64 when it fits (offsets and counts above 2^53 stay exact) */
    errno = 0;
    long long ll = strtoll(txt, NULL, 10);
    if (errno == ERANGE)
      is_int = 0;
    else
      iv = (int64_t)ll;
    if (txt[0] != '-') {
      errno = 0;
      unsigned long long ull = strtoull(txt, NULL, 10);
      is_u64 = errno != ERANGE;
      uv = (uint64_t)ull;
    }
  }
  if (txt != small) free(txt);
  /* a long number is shown by its ends, so that the reason fits in the message */
  if (range_err && n > 40)
    return PERR(P, start, "number %.20s...%.10s (%zu characters) is out of the range of a double",
                (const char *)s + start, (const char *)s + start + n - 10, n);
  if (range_err)
    return PERR(P, start, "number %.*s is out of the range of a double", (int)n,
                (const char *)s + start);
  v->type = ZEROC_JSON_NUMBER;
  v->u.num.value = d;
  v->u.num.is_int = is_int;
  v->u.num.i = iv;
  v->u.num.is_u64 = is_u64;
  v->u.num.u = uv;
  P->pos = i;
  return ZEROC_OK;
}

static zeroc_result_t parse_value(parser_t *P, zeroc__json_t *v);

static int member_cmp(const void *a, const void *b) {
  const zeroc__json_member_t *x = *(const zeroc__json_member_t *const *)a;
  const zeroc__json_member_t *y = *(const zeroc__json_member_t *const *)b;
  size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
  int c = memcmp(x->key, y->key, n);
  if (c) return c;
  if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
  return x->key_offset < y->key_offset ? -1 : 1;
}

/* Objects and arrays collect their children in a malloc'd vector, then move
 * them into the arena once their size is known. */
static zeroc_result_t parse_container(parser_t *P, zeroc__json_t *v, int is_obj) {
  zeroc_result_t res = ZEROC_OK;
  size_t esize = is_obj ? sizeof(zeroc__json_member_t) : sizeof(zeroc__json_t);
  unsigned char *vec = NULL;
  const zeroc__json_member_t **sorted = NULL;
  size_t n = 0, cap = 0;
  char b[24];
  unsigned char close = is_obj ? '}' : ']';
  if (++P->depth > ZEROC_JSON_MAX_DEPTH) {
    res = PERR(P, P->pos, "nesting deeper than %d levels", ZEROC_JSON_MAX_DEPTH);
    goto fail;
  }
  P->pos++; /* '{' or '[' */
  skip_ws(P);
  if (P->pos < P->len && P->s[P->pos] == close) {
    P->pos++;
    goto done;
  }
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      unsigned char *nv = realloc(vec, cap * esize);
      if (!nv) {
        res = nomem(P);
        goto fail;
      }
      vec = nv;
    }
    skip_ws(P);
    if (is_obj) {
      zeroc__json_member_t *m = (zeroc__json_member_t *)(vec + n * esize);
      if (P->pos >= P->len || P->s[P->pos] != '"') {
        res = PERR(P, P->pos, "expected a string key%s, found %s", n ? " after ','" : " or '}'",
                   show(P, P->pos, b, sizeof b));
        goto fail;
      }
      m->key_offset = P->pos;
      ZEROC_TRY(parse_string(P, &m->key, &m->key_len));
      skip_ws(P);
      if (P->pos >= P->len || P->s[P->pos] != ':') {
        res = PERR(P, P->pos, "expected ':' after an object key, found %s",
                   show(P, P->pos, b, sizeof b));
        goto fail;
      }
      P->pos++;
      ZEROC_TRY(parse_value(P, &m->value));
    } else {
      ZEROC_TRY(parse_value(P, (zeroc__json_t *)(vec + n * esize)));
    }
    n++;
    skip_ws(P);
    if (P->pos < P->len && P->s[P->pos] == ',') {
      P->pos++;
      skip_ws(P);
      if (P->pos < P->len && P->s[P->pos] == close) {
        res = PERR(P, P->pos, "trailing ',' before '%c'", close);
        goto fail;
      }
      continue;
    }
    if (P->pos < P->len && P->s[P->pos] == close) {
      P->pos++;
      break;
    }
    res = PERR(P, P->pos, "expected ',' or '%c' after %s, found %s", close,
               is_obj ? "an object member" : "an array element", show(P, P->pos, b, sizeof b));
    goto fail;
  }
  if (is_obj && n > 1) {
    /* duplicate keys make a document mean different things to different
     * readers (the safetensors aliasing problem), so they are rejected */
    sorted = malloc(n * sizeof *sorted);
    if (!sorted) {
      res = nomem(P);
      goto fail;
    }
    for (size_t k = 0; k < n; k++) sorted[k] = (zeroc__json_member_t *)(vec + k * esize);
    qsort(sorted, n, sizeof *sorted, member_cmp);
    for (size_t k = 1; k < n; k++)
      if (sorted[k]->key_len == sorted[k - 1]->key_len &&
          !memcmp(sorted[k]->key, sorted[k - 1]->key, sorted[k]->key_len)) {
        res = PERR(P, sorted[k]->key_offset, "duplicate key \"%s\" (first at byte %zu)",
                   sorted[k]->key, sorted[k - 1]->key_offset);
        goto fail;
      }
  }
done:;
  void *items = NULL;
  if (n) {
    items = arena_alloc(P->doc, n * esize);
    if (!items) {
      res = nomem(P);
      goto fail;
    }
    memcpy(items, vec, n * esize);
  }
  if (is_obj) {
    v->type = ZEROC_JSON_OBJECT;
    v->u.obj.members = items;
    v->u.obj.n = n;
  } else {
    v->type = ZEROC_JSON_ARRAY;
    v->u.arr.items = items;
    v->u.arr.n = n;
  }
  P->depth--;
fail:
  free(sorted);
  free(vec);
  return res;
}

static zeroc_result_t parse_literal(parser_t *P, const char *word, zeroc__json_t *v) {
  size_t n = strlen(word);
  if (P->len - P->pos < n || memcmp(P->s + P->pos, word, n) != 0)
    return PERR(P, P->pos, "invalid literal; accepted: true, false, null");
  P->pos += n;
  if (word[0] == 'n') {
    v->type = ZEROC_JSON_NULL;
  } else {
    v->type = ZEROC_JSON_BOOL;
    v->u.boolean = word[0] == 't';
  }
  return ZEROC_OK;
}

static zeroc_result_t parse_value(parser_t *P, zeroc__json_t *v) {
  char b[24];
  skip_ws(P);
  memset(v, 0, sizeof *v);
  v->offset = P->pos;
  if (P->pos >= P->len) return PERR(P, P->pos, "unexpected end of input, expected a value");
  unsigned char c = P->s[P->pos];
  switch (c) {
  case '{':
    return parse_container(P, v, 1);
  case '[':
    return parse_container(P, v, 0);
  case '"':
    v->type = ZEROC_JSON_STRING;
    return parse_string(P, &v->u.str.s, &v->u.str.len);
  case 't':
    return parse_literal(P, "true", v);
  case 'f':
    return parse_literal(P, "false", v);
  case 'n':
    return parse_literal(P, "null", v);
  default:
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(P, v);
    return PERR(P, P->pos,
                "unexpected %s, expected a value (object, array, string, number, "
                "true, false or null)",
                show(P, P->pos, b, sizeof b));
  }
}

zeroc_result_t zeroc__json_parse(const char *buf, size_t len, const char *what,
                                 zeroc__json_doc_t **doc) {
  zeroc_result_t res = ZEROC_OK;
  char b[24];
  *doc = NULL;
  zeroc__json_doc_t *d = calloc(1, sizeof *d);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: out of host memory", what ? what : "JSON");
  parser_t P = {(const unsigned char *)buf, buf ? len : 0, 0, what, 0, d};
  skip_ws(&P);
  if (P.pos >= P.len) {
    res = PERR(&P, P.pos, "empty input, expected a JSON value");
    goto fail;
  }
  ZEROC_TRY(parse_value(&P, &d->root));
  skip_ws(&P);
  if (P.pos != P.len) {
    res = PERR(&P, P.pos, "unexpected %s after the end of the JSON value",
               show(&P, P.pos, b, sizeof b));
    goto fail;
  }
  *doc = d;
  return ZEROC_OK;
fail:
  zeroc__json_free(d);
  return res;
}

const zeroc__json_t *zeroc__json_root(const zeroc__json_doc_t *doc) { return &doc->root; }

const zeroc__json_t *zeroc__json_get(const zeroc__json_t *obj, const char *key) {
  if (!obj || obj->type != ZEROC_JSON_OBJECT) return NULL;
  size_t kn = strlen(key);
  for (size_t i = 0; i < obj->u.obj.n; i++) {
    const zeroc__json_member_t *m = &obj->u.obj.members[i];
    if (m->key_len == kn && !memcmp(m->key, key, kn)) return &m->value;
  }
  return NULL;
}

const char *zeroc__json_type_name(zeroc__json_type_t t) {
  static const char *const names[] = {"null", "bool", "number", "string", "array", "object"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}
