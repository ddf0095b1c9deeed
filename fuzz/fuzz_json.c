/*
 * fuzz/fuzz_json.c - the strict JSON parser (io/json.c). Properties: malformed
 * input is rejected with a message naming the input and the byte offset; an
 * accepted document written back by the JSON writer parses again to the same
 * tree (types, numbers, strings with embedded NULs, member order).
 */
#include <math.h>

#include "core/error.h"
#include "fuzz_util.h"
#include "io/json.h"

static int has_nul_key(const zeroc__json_t *v) {
  if (v->type == ZEROC_JSON_ARRAY) {
    for (size_t i = 0; i < v->u.arr.n; i++)
      if (has_nul_key(&v->u.arr.items[i])) return 1;
  } else if (v->type == ZEROC_JSON_OBJECT) {
    for (size_t i = 0; i < v->u.obj.n; i++) {
      const zeroc__json_member_t *m = &v->u.obj.members[i];
      if (strlen(m->key) != m->key_len || has_nul_key(&m->value)) return 1;
    }
  }
  return 0;
}


static int same(const zeroc__json_t *a, const zeroc__json_t *b) {
  if (a->type != b->type) return 0;
  switch (a->type) {
  case ZEROC_JSON_NULL:
    return 1;
  case ZEROC_JSON_BOOL:
    return !a->u.boolean == !b->u.boolean;
  case ZEROC_JSON_NUMBER:
    if (a->u.num.is_int && b->u.num.is_int) return a->u.num.i == b->u.num.i;
    return a->u.num.value == b->u.num.value;
  case ZEROC_JSON_STRING:
    return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
  case ZEROC_JSON_ARRAY:
    if (a->u.arr.n != b->u.arr.n) return 0;
    for (size_t i = 0; i < a->u.arr.n; i++)
      if (!same(&a->u.arr.items[i], &b->u.arr.items[i])) return 0;
    return 1;
  case ZEROC_JSON_OBJECT:
    if (a->u.obj.n != b->u.obj.n) return 0;
    for (size_t i = 0; i < a->u.obj.n; i++)
      if (strcmp(a->u.obj.members[i].key, b->u.obj.members[i].key) ||
          !same(&a->u.obj.members[i].value, &b->u.obj.members[i].value))
        return 0;
    return 1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  zeroc__json_doc_t *doc = NULL, *again = NULL;
  zeroc_result_t r = zeroc__json_parse((const char *)data, size, "fuzz input", &doc);
  if (r != ZEROC_OK) {
    FUZZ_REQUIRE(doc == NULL, "a failed parse returned a document");
    fuzz_check_rejection(r, zeroc__tls_error(), "fuzz input: JSON error at byte ");
    return 0;
  }
  const zeroc__json_t *root = zeroc__json_root(doc);
  FUZZ_REQUIRE(root != NULL, "no root");
  if (!has_nul_key(root)) {
    for (int indent = 0; indent <= 2; indent += 2) {
      zeroc__jw_t w;
      zeroc__jw_init(&w, indent);
      zeroc__jw_value(&w, root);
      const char *text = NULL;
      size_t len = 0;
      r = zeroc__jw_finish(&w, &text, &len);
      FUZZ_REQUIRE(r == ZEROC_OK, "the writer refused a parsed document: %s", zeroc__tls_error());
      r = zeroc__json_parse(text, len, "rewritten", &again);
      FUZZ_REQUIRE(r == ZEROC_OK, "the rewritten document does not parse: %s\n%s",
                   zeroc__tls_error(), text);
      FUZZ_REQUIRE(same(root, zeroc__json_root(again)),
                   "the round trip changed the tree:\n%.*s\n%s", (int)size, (const char *)data,
                   text);
      zeroc__json_free(again);
      zeroc__jw_free(&w);
    }
  }
  zeroc__json_free(doc);
  return 0;
}
