/*
 * tests/test_io_json.c - the JSON writer and parser: round trips of every
 * value kind (random doubles and floats bit-exact), the exact one-line form of
 * --metrics, escaping, and rejection of malformed input with the byte offset.
 */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "testutil.h"

static double rand_double(uint64_t *s) {
  for (;;) {
    uint64_t bits = zt_rand_u64(s);
    double d;
    memcpy(&d, &bits, 8);
    if (isfinite(d)) return d;
  }
}

static float rand_float(uint64_t *s) {
  for (;;) {
    uint32_t bits = (uint32_t)zt_rand_u64(s);
    float f;
    memcpy(&f, &bits, 4);
    if (isfinite(f)) return f;
  }
}

static void test_exact_line(void) {
  zeroc__jw_t w;
  const char *text;
  size_t len;
  zeroc__jw_init(&w, 0);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "step");
  zeroc__jw_int(&w, 1);
  zeroc__jw_key(&w, "loss");
  zeroc__jw_float(&w, 5.5412f);
  zeroc__jw_key(&w, "lr");
  zeroc__jw_double(&w, 3e-4);
  zeroc__jw_key(&w, "ok");
  zeroc__jw_bool(&w, 1);
  zeroc__jw_key(&w, "nan");
  zeroc__jw_double(&w, NAN);
  zeroc__jw_key(&w, "peak");
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "device");
  zeroc__jw_uint(&w, 1234);
  zeroc__jw_object_end(&w);
  zeroc__jw_key(&w, "a");
  zeroc__jw_array_begin(&w);
  zeroc__jw_int(&w, -2);
  zeroc__jw_array_begin(&w);
  zeroc__jw_array_end(&w);
  zeroc__jw_null(&w);
  zeroc__jw_array_end(&w);
  zeroc__jw_object_end(&w);
  ZT_OK(zeroc__jw_finish(&w, &text, &len));
  const char *want = "{\"step\": 1, \"loss\": 5.5412, \"lr\": 0.0003, \"ok\": true, \"nan\": null, "
                     "\"peak\": {\"device\": 1234}, \"a\": [-2, [], null]}";
  ZT_ASSERT_MSG(!strcmp(text, want), "got  %s\nwant %s", text, want);
  CU_ASSERT_EQUAL(len, strlen(want));
  zeroc__jw_free(&w);

  zeroc__jw_init(&w, 2);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "a");
  zeroc__jw_array_begin(&w);
  zeroc__jw_int(&w, 1);
  zeroc__jw_int(&w, 2);
  zeroc__jw_array_end(&w);
  zeroc__jw_key(&w, "e");
  zeroc__jw_object_begin(&w);
  zeroc__jw_object_end(&w);
  zeroc__jw_object_end(&w);
  ZT_OK(zeroc__jw_finish(&w, &text, &len));
  want = "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": {}\n}";
  ZT_ASSERT_MSG(!strcmp(text, want), "got  %s\nwant %s", text, want);
  zeroc__jw_free(&w);
}

/* Every kind of value, written compact and pretty, parses back exactly. */
static void test_round_trip(void) {
  enum { ND = 3000, NF = 3000 };
  static double ds[ND];
  static float fs[NF];
  uint64_t s = 7;
  for (int i = 0; i < ND; i++) ds[i] = rand_double(&s);
  for (int i = 0; i < NF; i++) fs[i] = rand_float(&s);
  double specials[] = {0.0, -0.0, 1.0, 0.1, 1e-300, 4.9e-324, 1.7976931348623157e308, M_PI, -2.5};
  const char *strs[] = {"plain", "quote \" backslash \\ slash /", "ctl \b\f\n\r\t \x01\x1f end",
                        "utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", ""};
  for (int indent = 0; indent <= 3; indent += 3) {
    zeroc__jw_t w;
    zeroc__jw_init(&w, indent);
    zeroc__jw_object_begin(&w);
    zeroc__jw_key(&w, "doubles");
    zeroc__jw_array_begin(&w);
    for (int i = 0; i < ND; i++) zeroc__jw_double(&w, ds[i]);
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
      zeroc__jw_double(&w, specials[i]);
    zeroc__jw_array_end(&w);
    zeroc__jw_key(&w, "floats");
    zeroc__jw_array_begin(&w);
    for (int i = 0; i < NF; i++) zeroc__jw_float(&w, fs[i]);
    zeroc__jw_array_end(&w);
    zeroc__jw_key(&w, "ints");
    zeroc__jw_array_begin(&w);
    zeroc__jw_int(&w, INT64_MIN);
    zeroc__jw_int(&w, INT64_MAX);
    zeroc__jw_int(&w, 0);
    zeroc__jw_uint(&w, (uint64_t)1 << 62);
    zeroc__jw_array_end(&w);
    zeroc__jw_key(&w, "strings");
    zeroc__jw_array_begin(&w);
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) zeroc__jw_string(&w, strs[i]);
    zeroc__jw_stringn(&w, "nul\0inside", 10);
    zeroc__jw_string(&w, "bad \xff utf8");
    zeroc__jw_array_end(&w);
    zeroc__jw_key(&w, "key with \"quotes\"\n");
    zeroc__jw_bool(&w, 0);
    zeroc__jw_key(&w, "deep");
    for (int d = 0; d < 40; d++) zeroc__jw_array_begin(&w);
    for (int d = 0; d < 40; d++) zeroc__jw_array_end(&w);
    zeroc__jw_object_end(&w);
    const char *text;
    size_t len;
    ZT_OK(zeroc__jw_finish(&w, &text, &len));

    zeroc__json_doc_t *doc = NULL;
    ZT_OK(zeroc__json_parse(text, len, "round trip", &doc));
    if (!doc) {
      zeroc__jw_free(&w);
      continue;
    }
    const zeroc__json_t *root = zeroc__json_root(doc);
    CU_ASSERT_EQUAL(root->type, ZEROC_JSON_OBJECT);
    const zeroc__json_t *a = zeroc__json_get(root, "doubles");
    CU_ASSERT_FATAL(a && a->type == ZEROC_JSON_ARRAY &&
                    a->u.arr.n == ND + sizeof specials / sizeof *specials);
    int bad = 0;
    for (int i = 0; i < ND; i++) bad += a->u.arr.items[i].u.num.value != ds[i];
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
      double v = a->u.arr.items[ND + i].u.num.value;
      bad += v != specials[i] || signbit(v) != signbit(specials[i]);
    }
    ZT_ASSERT_MSG(bad == 0, "%d doubles did not read back bit-exact (indent %d)", bad, indent);
    a = zeroc__json_get(root, "floats");
    bad = 0;
    for (int i = 0; i < NF; i++) bad += (float)a->u.arr.items[i].u.num.value != fs[i];
    ZT_ASSERT_MSG(bad == 0, "%d floats did not read back exact", bad);
    a = zeroc__json_get(root, "ints");
    CU_ASSERT(a->u.arr.items[0].u.num.is_int && a->u.arr.items[0].u.num.i == INT64_MIN);
    CU_ASSERT(a->u.arr.items[1].u.num.is_int && a->u.arr.items[1].u.num.i == INT64_MAX);
    CU_ASSERT(a->u.arr.items[3].u.num.i == (int64_t)1 << 62);
    a = zeroc__json_get(root, "strings");
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
      ZT_ASSERT_MSG(a->u.arr.items[i].u.str.len == strlen(strs[i]) &&
                        !memcmp(a->u.arr.items[i].u.str.s, strs[i], strlen(strs[i])),
                    "string %zu came back as '%s'", i, a->u.arr.items[i].u.str.s);
    size_t k = sizeof strs / sizeof *strs;
    CU_ASSERT(a->u.arr.items[k].u.str.len == 10 &&
              !memcmp(a->u.arr.items[k].u.str.s, "nul\0inside", 10));
    CU_ASSERT_STRING_EQUAL(a->u.arr.items[k + 1].u.str.s, "bad \xef\xbf\xbd utf8");
    const zeroc__json_t *kq = zeroc__json_get(root, "key with \"quotes\"\n");
    CU_ASSERT(kq && kq->type == ZEROC_JSON_BOOL && kq->u.boolean == 0);
    CU_ASSERT_PTR_NULL(zeroc__json_get(root, "missing"));
    zeroc__json_free(doc);
    zeroc__jw_free(&w);
  }
}

/* The parser reads exactly `len` bytes: no terminator needed, none read past. */
static void test_parse_buffer(void) {
  const char buf[] = "123garbage";
  zeroc__json_doc_t *doc;
  ZT_OK(zeroc__json_parse(buf, 3, "buf", &doc));
  const zeroc__json_t *v = zeroc__json_root(doc);
  CU_ASSERT(v->type == ZEROC_JSON_NUMBER && v->u.num.is_int && v->u.num.i == 123);
  zeroc__json_free(doc);
  /* a heap copy without NUL, so ASan would see an overread */
  const char *src = " {\"a\": [true, false, null, -0.5e+2, \"\\u00e9\\ud83d\\ude00\"]} ";
  size_t n = strlen(src);
  char *heap = malloc(n);
  memcpy(heap, src, n);
  ZT_OK(zeroc__json_parse(heap, n, "heap", &doc));
  const zeroc__json_t *a = zeroc__json_get(zeroc__json_root(doc), "a");
  CU_ASSERT(a && a->u.arr.n == 5);
  if (a && a->u.arr.n == 5) {
    CU_ASSERT(a->u.arr.items[0].type == ZEROC_JSON_BOOL && a->u.arr.items[0].u.boolean == 1);
    CU_ASSERT(a->u.arr.items[2].type == ZEROC_JSON_NULL);
    CU_ASSERT(a->u.arr.items[3].u.num.value == -50.0 && !a->u.arr.items[3].u.num.is_int);
    CU_ASSERT_STRING_EQUAL(a->u.arr.items[4].u.str.s, "\xc3\xa9\xf0\x9f\x98\x80");
    CU_ASSERT_EQUAL(a->u.arr.items[4].offset, (size_t)(strstr(src, "\"\\u00e9") - src));
  }
  zeroc__json_free(doc);
  free(heap);
  /* exactly the depth limit parses; one more does not */
  char deep[2 * ZEROC_JSON_MAX_DEPTH + 4];
  for (int i = 0; i < ZEROC_JSON_MAX_DEPTH; i++)
    deep[i] = '[', deep[2 * ZEROC_JSON_MAX_DEPTH - 1 - i] = ']';
  ZT_OK(zeroc__json_parse(deep, 2 * ZEROC_JSON_MAX_DEPTH, "deep", &doc));
  zeroc__json_free(doc);
}

static void test_reject(void) {
  static const struct {
    const char *in;
    size_t len; /* 0: strlen */
    size_t at;
    const char *msg;
  } cases[] = {
      {"", 0, 0, "empty input"},
      {"   ", 0, 3, "empty input"},
      {"{", 0, 1, "expected a string key or '}'"},
      {"[1,]", 0, 3, "trailing ','"},
      {"{\"a\":1,}", 0, 7, "trailing ','"},
      {"{\"a\" 1}", 0, 5, "expected ':'"},
      {"{1:2}", 0, 1, "expected a string key"},
      {"[1 2]", 0, 3, "expected ',' or ']'"},
      {"{\"a\":1 \"b\":2}", 0, 7, "expected ',' or '}'"},
      {"01", 0, 0, "leading zeros"},
      {"1.", 0, 2, "digit must follow the decimal point"},
      {"-", 0, 1, "a number needs a digit"},
      {"+1", 0, 0, "unexpected '+'"},
      {"1e", 0, 2, "an exponent needs a digit"},
      {".5", 0, 0, "unexpected '.'"},
      {"tru", 0, 0, "invalid literal"},
      {"nul", 0, 0, "invalid literal"},
      {"NaN", 0, 0, "unexpected 'N'"},
      {"1e999", 0, 0, "out of the range of a double"},
      {"\"abc", 0, 0, "no closing quote"},
      {"\"a\\x\"", 0, 3, "invalid escape \\'x'"},
      {"\"\\u12G4\"", 0, 5, "4 hex digits"},
      {"\"\\ud800\"", 0, 1, "high surrogate not followed"},
      {"\"\\ud800\\u0041\"", 0, 7, "is not a low surrogate"},
      {"\"\\udc00\"", 0, 1, "low surrogate without"},
      {"\"a\x01\"", 0, 2, "control character 0x01"},
      {"\"\xff\"", 0, 1, "invalid UTF-8 byte 0xff"},
      {"\"\xc0\xaf\"", 0, 1, "invalid UTF-8 byte 0xc0"},
      {"\"\xed\xa0\x80\"", 0, 1, "invalid UTF-8"}, /* an encoded surrogate */
      {"{} x", 0, 3, "unexpected 'x' after the end"},
      {"[1]\0", 4, 3, "unexpected byte 0x00 after the end"},
      {"{\"a\":1,\"a\":2}", 0, 7, "duplicate key \"a\" (first at byte 1)"},
      {"/* c */ 1", 0, 0, "unexpected '/'"},
      {"[1,2", 0, 4, "expected ',' or ']' after an array element, found end of input"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    zeroc__json_doc_t *doc = (zeroc__json_doc_t *)1;
    size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);
    zeroc_result_t r = zeroc__json_parse(cases[i].in, len, "case", &doc);
    char want[64];
    snprintf(want, sizeof want, "case: JSON error at byte %zu: ", cases[i].at);
    const char *e = zeroc_last_error(NULL);
    ZT_ASSERT_MSG(r == ZEROC_ERR_CORRUPT && doc == NULL && strstr(e, want) &&
                      strstr(e, cases[i].msg),
                  "case %zu '%s': %s: %s (wanted '%s...%s')", i, cases[i].in, zeroc_result_name(r),
                  e, want, cases[i].msg);
  }
  /* one level too deep */
  char deep[2 * ZEROC_JSON_MAX_DEPTH + 4];
  memset(deep, '[', sizeof deep);
  zeroc__json_doc_t *doc;
  CU_ASSERT_EQUAL(zeroc__json_parse(deep, sizeof deep, "deep", &doc), ZEROC_ERR_CORRUPT);
  char want[64];
  snprintf(want, sizeof want, "byte %d: nesting deeper than %d", ZEROC_JSON_MAX_DEPTH,
           ZEROC_JSON_MAX_DEPTH);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), want), "%s", zeroc_last_error(NULL));
}

/* Random garbage and mutations of a valid document never crash the parser
 * and either parse or fail with ZEROC_ERR_CORRUPT. */
static void test_mutations(void) {
  const char *base = "{\"a\": [1, -2.5e3, \"x\\n\\u00e9\", true, null], \"b\": {\"c\": \"d\"}}";
  size_t n = strlen(base);
  char *buf = malloc(n);
  uint64_t s = 99;
  int ok = 0, bad = 0, other = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, base, n);
    int flips = 1 + (int)(zt_rand_u64(&s) % 3);
    for (int f = 0; f < flips; f++) buf[zt_rand_u64(&s) % n] = (char)zt_rand_u64(&s);
    size_t len = it % 5 ? n : (size_t)(zt_rand_u64(&s) % (n + 1));
    zeroc__json_doc_t *doc;
    zeroc_result_t r = zeroc__json_parse(buf, len, "fuzz", &doc);
    if (r == ZEROC_OK)
      ok++, zeroc__json_free(doc);
    else if (r == ZEROC_ERR_CORRUPT)
      bad++;
    else
      other++;
  }
  CU_ASSERT_EQUAL(other, 0);
  CU_ASSERT(ok > 0 && bad > 0);
  free(buf);
}

static void test_writer_misuse(void) {
  zeroc__jw_t w;
  zeroc__jw_init(&w, 0);
  zeroc__jw_object_begin(&w);
  CU_ASSERT_EQUAL(zeroc__jw_int(&w, 1), ZEROC_ERR_INTERNAL); /* no key */
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "without a key"));
  CU_ASSERT_EQUAL(zeroc__jw_finish(&w, NULL, NULL), ZEROC_ERR_INTERNAL); /* sticky */
  zeroc__jw_free(&w);

  zeroc__jw_init(&w, 0);
  zeroc__jw_array_begin(&w);
  CU_ASSERT_EQUAL(zeroc__jw_object_end(&w), ZEROC_ERR_INTERNAL);
  zeroc__jw_free(&w);

  zeroc__jw_init(&w, 0);
  zeroc__jw_array_begin(&w);
  CU_ASSERT_EQUAL(zeroc__jw_finish(&w, NULL, NULL), ZEROC_ERR_INTERNAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "1 container(s) still open"));
  zeroc__jw_free(&w);

  zeroc__jw_init(&w, 0);
  zeroc__jw_int(&w, 1);
  CU_ASSERT_EQUAL(zeroc__jw_int(&w, 2), ZEROC_ERR_INTERNAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "second top-level value"));
  zeroc__jw_free(&w);
}

/* Numbers use '.' whatever LC_NUMERIC says (when a comma locale exists). */
static void test_locale(void) {
  const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", NULL};
  const char *got = NULL;
  for (int i = 0; names[i] && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
  if (!got) {
    printf("\n    no comma-decimal locale installed; locale independence not exercised\n");
    return;
  }
  zeroc__jw_t w;
  const char *text;
  zeroc__jw_init(&w, 0);
  zeroc__jw_double(&w, 1.5);
  ZT_OK(zeroc__jw_finish(&w, &text, NULL));
  CU_ASSERT_STRING_EQUAL(text, "1.5");
  zeroc__json_doc_t *doc;
  ZT_OK(zeroc__json_parse("2.25", 4, "locale", &doc));
  CU_ASSERT_EQUAL(zeroc__json_root(doc)->u.num.value, 2.25);
  zeroc__json_free(doc);
  zeroc__jw_free(&w);
  setlocale(LC_NUMERIC, "C");
}

static const zt_test_t tests[] = {
    {"exact_line", test_exact_line},
    {"round_trip", test_round_trip},
    {"parse_buffer", test_parse_buffer},
    {"reject_with_offsets", test_reject},
    {"mutations", test_mutations},
    {"writer_misuse", test_writer_misuse},
    {"locale", test_locale},
    ZT_END,
};

int main(void) { return zt_run("io_json", tests); }
