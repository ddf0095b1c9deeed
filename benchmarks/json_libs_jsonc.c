/* benchmarks/json_libs_jsonc.c - json-c behind bench_json_libs' signatures,
 * strict (RFC 8259), validating UTF-8, with zeroc's depth limit. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/json.h"

int bjl_jsonc_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_jsonc_u64(const char *text, uint64_t *v, char *msg, size_t n);

static json_object *parse(const char *buf, size_t len, char *msg, size_t n) {
  json_tokener *t = json_tokener_new_ex(ZEROC_JSON_MAX_DEPTH);
  json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *j = json_tokener_parse_ex(t, buf, (int)len);
  enum json_tokener_error e = json_tokener_get_error(t);
  if (!j || e != json_tokener_success) {
    snprintf(msg, n, "byte %zu: %s", json_tokener_get_parse_end(t), json_tokener_error_desc(e));
    json_object_put(j);
    j = NULL;
  }
  json_tokener_free(t);
  return j;
}

int bjl_jsonc_parse(const char *buf, size_t len, char *msg, size_t n) {
  json_object *j = parse(buf, len, msg, n);
  json_object_put(j);
  return !j;
}

int bjl_jsonc_u64(const char *text, uint64_t *v, char *msg, size_t n) {
  json_object *j = parse(text, strlen(text), msg, n), *x = NULL;
  if (!j) return 1;
  int bad = !json_object_object_get_ex(j, "v", &x) || !json_object_is_type(x, json_type_int);
  if (bad)
    snprintf(msg, n, "not an integer");
  else
    *v = json_object_get_uint64(x);
  json_object_put(j);
  return bad;
}
