/* benchmarks/json_libs_jansson.c - jansson behind bench_json_libs' signatures. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int bjl_jansson_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_jansson_u64(const char *text, uint64_t *v, char *msg, size_t n);

int bjl_jansson_parse(const char *buf, size_t len, char *msg, size_t n) {
  json_error_t e;
  json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
  if (!j)
    snprintf(msg, n, "line %d column %d position %d: %s", e.line, e.column, e.position, e.text);
  json_decref(j);
  return !j;
}

int bjl_jansson_u64(const char *text, uint64_t *v, char *msg, size_t n) {
  json_error_t e;
  json_t *j = json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &e);
  if (!j) {
    snprintf(msg, n, "%s", e.text);
    return 1;
  }
  json_t *x = json_object_get(j, "v");
  int bad = !json_is_integer(x);
  if (bad)
    snprintf(msg, n, "not an integer");
  else
    *v = (uint64_t)json_integer_value(x);
  json_decref(j);
  return bad;
}
