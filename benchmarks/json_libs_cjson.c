/* benchmarks/json_libs_cjson.c - cJSON behind bench_json_libs' signatures. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int bjl_cjson_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_cjson_u64(const char *text, uint64_t *v, char *msg, size_t n);

int bjl_cjson_parse(const char *buf, size_t len, char *msg, size_t n) {
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
  if (!j) snprintf(msg, n, "error near byte %td", end ? end - buf : (ptrdiff_t)-1);
  cJSON_Delete(j);
  return !j;
}

/* cJSON keeps numbers as a double (and an int): nothing above 2^53 is exact. */
int bjl_cjson_u64(const char *text, uint64_t *v, char *msg, size_t n) {
  cJSON *j = cJSON_ParseWithLength(text, strlen(text));
  if (!j) {
    snprintf(msg, n, "parse error");
    return 1;
  }
  double d = cJSON_GetObjectItem(j, "v")->valuedouble;
  int bad = d >= 18446744073709551616.0; /* 2^64: no uint64 holds it */
  if (bad)
    snprintf(msg, n, "read as the double %.17g", d);
  else
    *v = (uint64_t)d;
  cJSON_Delete(j);
  return bad;
}
