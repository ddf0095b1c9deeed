/*
 * io/json_write.c - the JSON writer: tokens appended to a growing buffer,
 * with a nesting stack that catches misuse (a value where a key is due, an
 * unbalanced end). Numbers take the fewest digits that read back exactly.
 */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"
#include "io/json_internal.h"

/* ---- writer ------------------------------------------------------------------- */

void zeroc__jw_init(zeroc__jw_t *w, int indent) {
  memset(w, 0, sizeof *w);
  w->indent = indent < 0 ? 0 : indent;
}

void zeroc__jw_free(zeroc__jw_t *w) {
  free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
}

static void put(zeroc__jw_t *w, const char *s, size_t n) {
  if (w->err) return;
  if (w->len + n + 1 > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n + 1) cap *= 2;
    char *nb = realloc(w->buf, cap);
    if (!nb) {
      w->err = ZEROC_FAIL(ZEROC_ERR_NOMEM, "JSON writer: out of host memory at %zu bytes", w->len);
      return;
    }
    w->buf = nb;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = 0;
}

static void puts_(zeroc__jw_t *w, const char *s) { put(w, s, strlen(s)); }

static void newline(zeroc__jw_t *w, int depth) {
  if (!w->indent) return;
  put(w, "\n", 1);
  for (int i = 0; i < depth * w->indent; i++) put(w, " ", 1);
}

static zeroc_result_t misuse(zeroc__jw_t *w, int line, const char *what) {
  if (!w->err)
    w->err = zeroc__fail(ZEROC_ERR_INTERNAL, __FILE__, line, "JSON writer misuse: %s", what);
  return w->err;
}

/* Separator and checks before any value (scalar or container). */
static zeroc_result_t before_value(zeroc__jw_t *w) {
  if (w->err) return w->err;
  if (w->done) return misuse(w, __LINE__, "a second top-level value");
  if (w->depth > 0 && w->in_object[w->depth] && !w->want_value)
    return misuse(w, __LINE__, "a value inside an object without a key before it");
  if (w->want_value) return ZEROC_OK; /* the key wrote the ": " */
  if (w->depth > 0) {
    if (w->count_nonzero[w->depth]) puts_(w, w->indent ? "," : ", ");
    newline(w, w->depth);
    w->count_nonzero[w->depth] = 1;
  }
  return w->err;
}

static void after_value(zeroc__jw_t *w) {
  w->want_value = 0;
  if (w->depth == 0) w->done = 1;
}

static zeroc_result_t begin(zeroc__jw_t *w, int is_obj) {
  ZEROC_CHECK(before_value(w));
  if (w->depth >= ZEROC_JSON_MAX_DEPTH)
    return misuse(w, __LINE__, "nesting deeper than ZEROC_JSON_MAX_DEPTH");
  put(w, is_obj ? "{" : "[", 1);
  w->want_value = 0;
  w->depth++;
  w->in_object[w->depth] = (unsigned char)is_obj;
  w->count_nonzero[w->depth] = 0;
  return w->err;
}

static zeroc_result_t end(zeroc__jw_t *w, int is_obj) {
  if (w->err) return w->err;
  if (w->depth == 0 || w->in_object[w->depth] != is_obj)
    return misuse(w, __LINE__,
                  is_obj ? "object_end without a matching object_begin"
                         : "array_end without a matching array_begin");
  if (w->want_value) return misuse(w, __LINE__, "object_end right after a key (no value)");
  if (w->count_nonzero[w->depth]) newline(w, w->depth - 1);
  put(w, is_obj ? "}" : "]", 1);
  w->depth--;
  after_value(w);
  return w->err;
}

zeroc_result_t zeroc__jw_object_begin(zeroc__jw_t *w) { return begin(w, 1); }
zeroc_result_t zeroc__jw_object_end(zeroc__jw_t *w) { return end(w, 1); }
zeroc_result_t zeroc__jw_array_begin(zeroc__jw_t *w) { return begin(w, 0); }
zeroc_result_t zeroc__jw_array_end(zeroc__jw_t *w) { return end(w, 0); }

static void put_string(zeroc__jw_t *w, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  put(w, "\"", 1);
  const unsigned char *p = (const unsigned char *)s;
  size_t run = 0; /* bytes copied as they are, flushed in one put */
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    const char *esc = NULL;
    char ubuf[7];
    size_t k = 1;
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\b')
      esc = "\\b";
    else if (c == '\f')
      esc = "\\f";
    else if (c < 0x20) {
      snprintf(ubuf, sizeof ubuf, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
      esc = ubuf;
    } else if (c >= 0x80) {
      k = zeroc__json_utf8_len(p + i, n - i);
      if (!k) {
        esc = "\\ufffd"; /* invalid UTF-8 byte: keep the output valid JSON */
        k = 1;
      }
    }
    if (esc) {
      put(w, s + i - run, run);
      run = 0;
      puts_(w, esc);
    } else {
      run += k;
    }
    i += k;
  }
  put(w, s + n - run, run);
  put(w, "\"", 1);
}

zeroc_result_t zeroc__jw_key(zeroc__jw_t *w, const char *key) {
  return zeroc__jw_keyn(w, key, strlen(key));
}

zeroc_result_t zeroc__jw_keyn(zeroc__jw_t *w, const char *key, size_t n) {
  if (w->err) return w->err;
  if (w->depth == 0 || !w->in_object[w->depth])
    return misuse(w, __LINE__, "a key outside an object");
  if (w->want_value) return misuse(w, __LINE__, "two keys in a row");
  if (w->count_nonzero[w->depth]) puts_(w, w->indent ? "," : ", ");
  newline(w, w->depth);
  w->count_nonzero[w->depth] = 1;
  put_string(w, key, n);
  put(w, ": ", 2);
  w->want_value = 1;
  return w->err;
}

zeroc_result_t zeroc__jw_stringn(zeroc__jw_t *w, const char *s, size_t n) {
  ZEROC_CHECK(before_value(w));
  put_string(w, s, n);
  after_value(w);
  return w->err;
}

zeroc_result_t zeroc__jw_string(zeroc__jw_t *w, const char *s) {
  return zeroc__jw_stringn(w, s, strlen(s));
}

static zeroc_result_t put_scalar(zeroc__jw_t *w, const char *text) {
  ZEROC_CHECK(before_value(w));
  puts_(w, text);
  after_value(w);
  return w->err;
}

zeroc_result_t zeroc__jw_int(zeroc__jw_t *w, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)v);
  return put_scalar(w, b);
}

zeroc_result_t zeroc__jw_uint(zeroc__jw_t *w, uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return put_scalar(w, b);
}

/* The shortest %.<p>g (p <= 9 for a float, 17 for a double) that reads back to
 * exactly `v`, formatted in the C locale. More digits never round-trip worse,
 * so p is found by bisection; the answer is always a tested p, so it always
 * round-trips. */
static int round_trips(char *b, size_t n, double v, int is_float, int p) {
  snprintf(b, n, "%.*g", p, v);
  return is_float ? strtof(b, NULL) == (float)v : strtod(b, NULL) == v;
}

static void format_real(char *b, size_t n, double v, int is_float) {
  locale_t old = uselocale(zeroc__json_c_locale());
  int lo = 1, hi = is_float ? 9 : 17; /* hi always round-trips */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (round_trips(b, n, v, is_float, mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  snprintf(b, n, "%.*g", lo, v);
  uselocale(old);
}

zeroc_result_t zeroc__jw_double(zeroc__jw_t *w, double v) {
  char b[40];
  if (!isfinite(v)) return put_scalar(w, "null");
  format_real(b, sizeof b, v, 0);
  return put_scalar(w, b);
}

zeroc_result_t zeroc__jw_float(zeroc__jw_t *w, float v) {
  char b[40];
  if (!isfinite(v)) return put_scalar(w, "null");
  format_real(b, sizeof b, (double)v, 1);
  return put_scalar(w, b);
}

zeroc_result_t zeroc__jw_bool(zeroc__jw_t *w, int v) { return put_scalar(w, v ? "true" : "false"); }
zeroc_result_t zeroc__jw_null(zeroc__jw_t *w) { return put_scalar(w, "null"); }

zeroc_result_t zeroc__jw_value(zeroc__jw_t *w, const zeroc__json_t *v) {
  switch (v->type) {
  case ZEROC_JSON_OBJECT:
    zeroc__jw_object_begin(w);
    for (size_t i = 0; i < v->u.obj.n; i++) {
      zeroc__jw_key(w, v->u.obj.members[i].key);
      zeroc__jw_value(w, &v->u.obj.members[i].value);
    }
    return zeroc__jw_object_end(w);
  case ZEROC_JSON_ARRAY:
    zeroc__jw_array_begin(w);
    for (size_t i = 0; i < v->u.arr.n; i++) zeroc__jw_value(w, &v->u.arr.items[i]);
    return zeroc__jw_array_end(w);
  case ZEROC_JSON_STRING:
    return zeroc__jw_stringn(w, v->u.str.s, v->u.str.len);
  case ZEROC_JSON_NUMBER:
    return v->u.num.is_int   ? zeroc__jw_int(w, v->u.num.i)
           : v->u.num.is_u64 ? zeroc__jw_uint(w, v->u.num.u)
                             : zeroc__jw_double(w, v->u.num.value);
  case ZEROC_JSON_BOOL:
    return zeroc__jw_bool(w, v->u.boolean);
  case ZEROC_JSON_NULL:
    break;
  }
  return zeroc__jw_null(w);
}

zeroc_result_t zeroc__jw_finish(zeroc__jw_t *w, const char **text, size_t *len) {
  if (w->err) return w->err;
  if (!w->done) {
    char what[96];
    snprintf(what, sizeof what, "finish with %d container(s) still open%s", w->depth,
             w->depth == 0 ? " (nothing written)" : "");
    return misuse(w, __LINE__, what);
  }
  if (text) *text = w->buf;
  if (len) *len = w->len;
  return ZEROC_OK;
}

zeroc_result_t zeroc__jw_put_int(zeroc__jw_t *w, const char *key, int64_t v) {
  zeroc__jw_key(w, key);
  return zeroc__jw_int(w, v);
}

zeroc_result_t zeroc__jw_put_str(zeroc__jw_t *w, const char *key, const char *v) {
  zeroc__jw_key(w, key);
  return zeroc__jw_string(w, v);
}

zeroc_result_t zeroc__jw_put_bool(zeroc__jw_t *w, const char *key, int v) {
  zeroc__jw_key(w, key);
  return zeroc__jw_bool(w, v);
}

zeroc_result_t zeroc__jw_put_num(zeroc__jw_t *w, const char *key, double v) {
  zeroc__jw_key(w, key);
  return zeroc__jw_double(w, v);
}

zeroc_result_t zeroc__jw_finish_dup(zeroc__jw_t *w, const char *what, char **out) {
  const char *text = NULL;
  size_t len = 0;
  *out = NULL;
  zeroc_result_t r = zeroc__jw_finish(w, &text, &len);
  if (!r) {
    *out = malloc(len + 2);
    if (!*out) r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s of %zu bytes", what, len);
  }
  if (!r) memcpy(*out, text, len), (*out)[len] = '\n', (*out)[len + 1] = 0;
  zeroc__jw_free(w);
  return r;
}
