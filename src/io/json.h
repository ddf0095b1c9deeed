/*
 * io/json.h - a strict JSON parser into a small read-only tree, and a JSON
 * writer into a growing buffer; used for checkpoint manifests, --metrics
 * lines and safetensors headers.
 *
 * The parser takes (buffer, length), needs no NUL terminator and accepts
 * exactly RFC 8259 JSON: no comments, no trailing commas, no NaN, no
 * duplicate object keys, valid UTF-8 only, nesting at most
 * ZEROC_JSON_MAX_DEPTH. Every error names the byte offset where it happens.
 * The writer escapes strings and prints numbers with the fewest digits that
 * read back to the same float (at most %.9g) or double (at most %.17g).
 */
#ifndef ZEROC_IO_JSON_H
#define ZEROC_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/result.h"

#define ZEROC_JSON_MAX_DEPTH 64

typedef enum zeroc__json_type {
  ZEROC_JSON_NULL = 0,
  ZEROC_JSON_BOOL,
  ZEROC_JSON_NUMBER,
  ZEROC_JSON_STRING,
  ZEROC_JSON_ARRAY,
  ZEROC_JSON_OBJECT,
} zeroc__json_type_t;

typedef struct zeroc__json zeroc__json_t;
typedef struct zeroc__json_member zeroc__json_member_t;

/* One value of the tree; everything is owned by its document. */
struct zeroc__json {
  zeroc__json_type_t type;
  size_t offset; /* byte offset of the value in the parsed buffer */
  union {
    int boolean;
    struct {
      double value; /* always set (nearest double) */
      int is_int;   /* the literal is an integer (no '.', no exponent) that fits int64 */
      int64_t i;    /* its exact value when is_int */
      int is_u64;   /* a non-negative integer literal that fits uint64 (is_int or above) */
      uint64_t u;   /* its exact value when is_u64 (hashes above 2^63 stay exact) */
    } num;
    struct {
      const char *s; /* UTF-8, NUL-terminated; may hold NULs from \u0000 */
      size_t len;
    } str;
    struct {
      zeroc__json_t *items;
      size_t n;
    } arr;
    struct {
      zeroc__json_member_t *members; /* in document order */
      size_t n;
    } obj;
  } u;
};

struct zeroc__json_member {
  const char *key; /* NUL-terminated */
  size_t key_len;
  size_t key_offset; /* byte offset of the key */
  zeroc__json_t value;
};

typedef struct zeroc__json_doc zeroc__json_doc_t;

/*
 * Parses `len` bytes of `buf` as one JSON value (whitespace around it allowed).
 *   what: names the input in messages ("manifest 'ckpt/manifest.json'").
 * Returns ZEROC_ERR_CORRUPT with "<what>: JSON error at byte N: ..." for
 * malformed input, ZEROC_ERR_NOMEM.
 */
zeroc_result_t zeroc__json_parse(const char *buf, size_t len, const char *what,
                                 zeroc__json_doc_t **doc);
/* Frees a document and every value in it. free(NULL) does nothing. */
void zeroc__json_free(zeroc__json_doc_t *doc);
/* The root value of a parsed document. */
const zeroc__json_t *zeroc__json_root(const zeroc__json_doc_t *doc);

/* The member `key` of an object, or NULL (also when `obj` is not an object). */
const zeroc__json_t *zeroc__json_get(const zeroc__json_t *obj, const char *key);
/* "null", "bool", "number", "string", "array", "object". */
const char *zeroc__json_type_name(zeroc__json_type_t t);

/* ---- writer ------------------------------------------------------------------- */

typedef struct zeroc__jw {
  char *buf;
  size_t len, cap;
  int indent; /* 0: one line; n > 0: n spaces per nesting level */
  int depth;
  unsigned char in_object[ZEROC_JSON_MAX_DEPTH + 1]; /* per open container */
  unsigned char count_nonzero[ZEROC_JSON_MAX_DEPTH + 1];
  int want_value; /* a key was written, its value comes next */
  int done;       /* the top-level value is complete */
  zeroc_result_t err;
} zeroc__jw_t;

/* Starts an empty document. indent 0 writes one line ({"a": 1, "b": [2, 3]},
 * the --metrics form); indent n > 0 pretty-prints with n spaces per level. */
void zeroc__jw_init(zeroc__jw_t *w, int indent);
/* Frees the buffer (the text from zeroc__jw_finish goes with it). */
void zeroc__jw_free(zeroc__jw_t *w);

/* Each call appends one token and returns the writer's first error so far
 * (sticky): ZEROC_ERR_INTERNAL for misuse (a value where a key is due, an
 * unbalanced end, too deep), ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__jw_object_begin(zeroc__jw_t *w);
zeroc_result_t zeroc__jw_object_end(zeroc__jw_t *w);
zeroc_result_t zeroc__jw_array_begin(zeroc__jw_t *w);
zeroc_result_t zeroc__jw_array_end(zeroc__jw_t *w);
zeroc_result_t zeroc__jw_key(zeroc__jw_t *w, const char *key);
/* A key of n bytes (it may hold NULs, as a parsed key from \u0000 may). */
zeroc_result_t zeroc__jw_keyn(zeroc__jw_t *w, const char *key, size_t n);
/* Strings are UTF-8; a byte sequence that is not valid UTF-8 is written as
 * U+FFFD so the output always parses. */
zeroc_result_t zeroc__jw_string(zeroc__jw_t *w, const char *s);
zeroc_result_t zeroc__jw_stringn(zeroc__jw_t *w, const char *s, size_t n);
zeroc_result_t zeroc__jw_int(zeroc__jw_t *w, int64_t v);
zeroc_result_t zeroc__jw_uint(zeroc__jw_t *w, uint64_t v);
/* NaN and infinities have no JSON form and are written as null. */
zeroc_result_t zeroc__jw_double(zeroc__jw_t *w, double v);
zeroc_result_t zeroc__jw_float(zeroc__jw_t *w, float v);
zeroc_result_t zeroc__jw_bool(zeroc__jw_t *w, int v);
zeroc_result_t zeroc__jw_null(zeroc__jw_t *w);
/* zeroc__jw_finish's text with a newline in a malloc'd string (*out; free it), the
 * writer freed: the config.json writers' end. `what` names the document in an error. */
zeroc_result_t zeroc__jw_finish_dup(zeroc__jw_t *w, const char *what, char **out);
/* A key and its value in one call (the config.json writers' form). */
zeroc_result_t zeroc__jw_put_int(zeroc__jw_t *w, const char *key, int64_t v);
zeroc_result_t zeroc__jw_put_str(zeroc__jw_t *w, const char *key, const char *v);
zeroc_result_t zeroc__jw_put_bool(zeroc__jw_t *w, const char *key, int v);
zeroc_result_t zeroc__jw_put_num(zeroc__jw_t *w, const char *key, double v);
/* Appends a parsed value, recursively (objects keep their member order). */
zeroc_result_t zeroc__jw_value(zeroc__jw_t *w, const zeroc__json_t *v);

/* Checks the document is one complete value and returns its text (NUL-
 * terminated, owned by `w`). Returns the sticky error, or ZEROC_ERR_INTERNAL
 * naming what is still open. */
zeroc_result_t zeroc__jw_finish(zeroc__jw_t *w, const char **text, size_t *len);

#endif
