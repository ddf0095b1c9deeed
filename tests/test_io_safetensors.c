/*
 * tests/test_io_safetensors.c - safetensors round trips (F32 exact, BF16
 * within its rounding, metadata, scalars, empty tensors, 8-byte alignment),
 * writer misuse, and rejection of malformed files with a message naming the
 * problem; random mutations never read outside the buffer.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/files.h"
#include "io/safetensors.h"
#include "testutil.h"

static char *g_dir;

/* Builds an image: 8-byte length, `header`, then `data_len` bytes of data. */
static unsigned char *image(const char *header, size_t data_len, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + data_len;
  unsigned char *b = calloc(1, *len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (unsigned char)(i * 7 + 1);
  return b;
}

static void test_round_trip(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
  enum { V = 50, C = 24 };
  float *wte = malloc(sizeof(float) * V * C), ln[C], bf[3 * 5], scalar = 0.125f;
  zt_fill_normal(wte, V * C, 1, 0.02f);
  zt_fill_uniform(ln, C, 2, 0.5f, 1.5f);
  zt_fill_normal(bf, 15, 3, 1.0f);
  int32_t ids[4] = {7, -1, 65536, 3};
  uint64_t s_wte[2] = {V, C}, s_ln[1] = {C}, s_bf[2] = {3, 5}, s_empty[2] = {0, 4}, s_ids[1] = {4};

  zeroc__st_writer_t *w = NULL;
  ZT_OK(zeroc__st_writer_create(path, &w));
  CU_ASSERT_FATAL(w != NULL);
  ZT_OK(zeroc__st_writer_metadata(w, "format", "pt"));
  ZT_OK(zeroc__st_writer_metadata(w, "zeroc \"step\"", "12\n"));
  ZT_OK(zeroc__st_writer_add(w, "wte.weight", ZEROC_ST_F32, 2, s_wte));
  ZT_OK(zeroc__st_writer_add(w, "h.0.ln_1.weight", ZEROC_ST_F32, 1, s_ln));
  ZT_OK(zeroc__st_writer_add(w, "scalar", ZEROC_ST_F32, 0, NULL));
  ZT_OK(zeroc__st_writer_add(w, "ids", ZEROC_ST_I32, 1, s_ids));
  ZT_OK(zeroc__st_writer_add(w, "empty", ZEROC_ST_F32, 2, s_empty));
  ZT_OK(zeroc__st_writer_add(w, "bf", ZEROC_ST_BF16, 2, s_bf));
  /* wte in two pieces, the rest whole; raw bytes for the int tensor */
  ZT_OK(zeroc__st_writer_write_f32(w, wte, 17));
  ZT_OK(zeroc__st_writer_write_f32(w, wte + 17, V * C - 17));
  ZT_OK(zeroc__st_writer_write_f32(w, ln, C));
  ZT_OK(zeroc__st_writer_write_f32(w, &scalar, 1));
  ZT_OK(zeroc__st_writer_write(w, ids, sizeof ids));
  ZT_OK(zeroc__st_writer_write_f32(w, bf, 15));
  struct stat st;
  CU_ASSERT(stat(path, &st) != 0); /* nothing at the final name before finish */
  ZT_OK(zeroc__st_writer_finish(w));
  zeroc__st_writer_destroy(w);
  CU_ASSERT_FATAL(stat(path, &st) == 0);

  /* from the file (mmap) and from a memory copy */
  char *buf;
  size_t len;
  ZT_OK(zeroc__file_read(path, 1 << 20, &buf, &len));
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)buf[i];
  CU_ASSERT_EQUAL((8 + hlen) % 8, 0); /* data starts 8-byte aligned */
  for (int from = 0; from < 2; from++) {
    zeroc__st_t *st_ = NULL;
    if (from == 0)
      ZT_OK(zeroc__st_open(path, &st_));
    else
      ZT_OK(zeroc__st_parse(buf, len, "memory", &st_));
    CU_ASSERT_FATAL(st_ != NULL);
    CU_ASSERT_EQUAL(zeroc__st_count(st_), 6);
    CU_ASSERT_STRING_EQUAL(zeroc__st_metadata(st_, "format"), "pt");
    CU_ASSERT_STRING_EQUAL(zeroc__st_metadata(st_, "zeroc \"step\""), "12\n");
    CU_ASSERT_PTR_NULL(zeroc__st_metadata(st_, "nope"));
    const zeroc__st_tensor_t *t = zeroc__st_find(st_, "wte.weight");
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT(t->dtype == ZEROC_ST_F32 && t->ndim == 2 && t->shape[0] == V && t->shape[1] == C);
    if (from == 1) CU_ASSERT_EQUAL(((const char *)t->data - buf) % 8, 0); /* first tensor */
    float *got = malloc(sizeof(float) * V * C);
    ZT_OK(zeroc__st_read_f32(t, got, V * C));
    CU_ASSERT(memcmp(got, wte, sizeof(float) * V * C) == 0); /* F32: bit-exact */
    CU_ASSERT_EQUAL(zeroc__st_read_f32(t, got, V * C - 1), ZEROC_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "wte.weight"));
    t = zeroc__st_find(st_, "h.0.ln_1.weight");
    ZT_OK(zeroc__st_read_f32(t, got, C));
    CU_ASSERT(memcmp(got, ln, sizeof ln) == 0);
    t = zeroc__st_find(st_, "scalar");
    CU_ASSERT(t->ndim == 0 && t->numel == 1);
    ZT_OK(zeroc__st_read_f32(t, got, 1));
    CU_ASSERT_EQUAL(got[0], 0.125f);
    t = zeroc__st_find(st_, "ids");
    CU_ASSERT(t->dtype == ZEROC_ST_I32 && memcmp(t->data, ids, sizeof ids) == 0);
    CU_ASSERT_EQUAL(zeroc__st_read_f32(t, got, 4), ZEROC_ERR_INVALID_ARG); /* not a float type */
    t = zeroc__st_find(st_, "empty");
    CU_ASSERT(t->numel == 0 && t->begin == t->end);
    t = zeroc__st_find(st_, "bf");
    CU_ASSERT(t->dtype == ZEROC_ST_BF16 && t->end - t->begin == 30);
    ZT_OK(zeroc__st_read_f32(t, got, 15));
    /* BF16 keeps 8 mantissa bits: relative error <= 2^-9 per element, and
     * exactly round-to-nearest-even of the fp32 source */
    int exact = 1;
    for (int i = 0; i < 15; i++) exact &= got[i] == zeroc_bf16_to_f32(zeroc_f32_to_bf16(bf[i]));
    CU_ASSERT(exact);
    double err = zt_rel_err(got, bf, 15);
    ZT_ASSERT_MSG(err < 4e-3 && err > 0, "bf16 relative error %g", err);
    /* tensors come in data order and tile the data */
    uint64_t at = 0;
    for (size_t i = 0; i < zeroc__st_count(st_); i++) {
      CU_ASSERT_EQUAL(zeroc__st_tensor(st_, i)->begin, at);
      at = zeroc__st_tensor(st_, i)->end;
    }
    free(got);
    zeroc__st_close(st_);
  }
  free(buf);
  free(wte);
}

static void test_writer_misuse(void) {
  char path[4200], tmpname[4300];
  snprintf(path, sizeof path, "%s/bad.safetensors", g_dir);
  uint64_t shape[1] = {4};
  zeroc__st_writer_t *w = NULL;
  ZT_OK(zeroc__st_writer_create(path, &w));
  ZT_OK(zeroc__st_writer_add(w, "a", ZEROC_ST_F32, 1, shape));
  CU_ASSERT_EQUAL(zeroc__st_writer_add(w, "a", ZEROC_ST_F32, 1, shape), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "'a' added twice"));
  CU_ASSERT_EQUAL(zeroc__st_writer_add(w, "__metadata__", ZEROC_ST_F32, 1, shape),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__st_writer_add(w, "c", ZEROC_ST_F32, 9, shape), ZEROC_ERR_INVALID_ARG);
  float x[5] = {1, 2, 3, 4, 5};
  CU_ASSERT_EQUAL(zeroc__st_writer_write_f32(w, x, 5), ZEROC_ERR_INVALID_ARG); /* past tensor a */
  ZT_OK(zeroc__st_writer_write_f32(w, x, 3));
  CU_ASSERT_EQUAL(zeroc__st_writer_add(w, "late", ZEROC_ST_F32, 1, shape), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "after tensor data was written"));
  CU_ASSERT_EQUAL(zeroc__st_writer_finish(w), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "tensor 'a' incomplete (12 of 16"));
  CU_ASSERT_EQUAL(zeroc__st_writer_write(w, x, 8), ZEROC_ERR_INVALID_ARG); /* 12 + 8 > 16 */
  char prefix[4300];
  snprintf(prefix, sizeof prefix, "%s.tmp.%ld", path, (long)getpid());
  CU_ASSERT_EQUAL(zt_find_prefixed(prefix, tmpname, sizeof tmpname), 0);
  struct stat st;
  CU_ASSERT(stat(tmpname, &st) == 0);
  zeroc__st_writer_destroy(w); /* abandoned: the temporary goes, nothing appears */
  CU_ASSERT(stat(tmpname, &st) != 0);
  CU_ASSERT(stat(path, &st) != 0);
}

/* Each malformed header is rejected with ZEROC_ERR_CORRUPT and its reason. */
static void test_reject(void) {
  static const struct {
    const char *header;
    size_t data;
    const char *msg;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
       "tensor 'a' data_offsets [0, 16) run past the end of the data section (8 bytes)"},
      {"{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "tensor 'a' has dtype \"F33\""},
      {"{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "has dtype (a non-string)"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
       "hold 8 bytes, but shape [3] of F32 needs 3 x 4 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
       20, "data bytes [8, 12) before tensor 'b' belong to no tensor"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
       "the last 4 data bytes [8, 12) belong to no tensor"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
       "end before they begin"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
       "shape holds a non-integer or negative number"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", 8,
       "data_offsets holds a non-integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "must be [begin, end]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor 'a' lacks \"data_offsets\""},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
       "unknown field \"x\""},
      {"{\"a\":[1]}", 0, "tensor 'a' is a array"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
       "overflows 64 bits"},
      {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ \"k\" is a number; only string values"},
      {"{\"__metadata__\":[]}", 0, "__metadata__ is a array"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
       8, "duplicate key \"a\""},
      {"{\"a\":{\"dtype\":\"F32\",}}", 0, "JSON error at byte 20: trailing ','"},
      {"{\"a\":{\"dtype\" \"F32\"}}", 0, "JSON error at byte 14: expected ':'"},
      {"[]", 0, "must be a JSON object starting with '{'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t len;
    unsigned char *b = image(cases[i].header, cases[i].data, &len);
    zeroc__st_t *st = (zeroc__st_t *)1;
    zeroc_result_t r = zeroc__st_parse(b, len, "case", &st);
    const char *e = zeroc_last_error(NULL);
    ZT_ASSERT_MSG(r == ZEROC_ERR_CORRUPT && st == NULL && strstr(e, cases[i].msg),
                  "case %zu: %s: %s (wanted '%s')", i, zeroc_result_name(r), e, cases[i].msg);
    free(b);
  }

  /* header length: huge, past the end, too short a file */
  unsigned char b[64] = {0};
  uint64_t huge = (uint64_t)1 << 40;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(huge >> (8 * i));
  zeroc__st_t *st;
  CU_ASSERT_EQUAL(zeroc__st_parse(b, sizeof b, "case", &st), ZEROC_ERR_CORRUPT);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL),
             "header length 1099511627776 is larger than the 100000000-byte limit"));
  memset(b, 0, 8);
  b[0] = 100;
  b[8] = '{';
  CU_ASSERT_EQUAL(zeroc__st_parse(b, sizeof b, "case", &st), ZEROC_ERR_CORRUPT);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL), "header length 100 runs past the end of the input (64 bytes"));
  CU_ASSERT_EQUAL(zeroc__st_parse(b, 5, "case", &st), ZEROC_ERR_CORRUPT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "5 bytes is too short"));
  CU_ASSERT_EQUAL(zeroc__st_parse(NULL, 0, "case", &st), ZEROC_ERR_CORRUPT);

  /* a real file cut short, read through the file path */
  char path[4200], cut[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
  snprintf(cut, sizeof cut, "%s/cut.safetensors", g_dir);
  char *whole;
  size_t n;
  ZT_OK(zeroc__file_read(path, 1 << 20, &whole, &n));
  ZT_OK(zeroc__file_write_atomic(cut, whole, n - 6));
  CU_ASSERT_EQUAL(zeroc__st_open(cut, &st), ZEROC_ERR_CORRUPT);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "cut.safetensors") &&
                    strstr(zeroc_last_error(NULL), "run past the end of the data section"),
                "%s", zeroc_last_error(NULL));
  ZT_OK(zeroc__file_write_atomic(cut, whole, 20)); /* cut inside the header */
  CU_ASSERT_EQUAL(zeroc__st_open(cut, &st), ZEROC_ERR_CORRUPT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "runs past the end of the input"));
  ZT_OK(zeroc__file_write_atomic(cut, whole, 3));
  CU_ASSERT_EQUAL(zeroc__st_open(cut, &st), ZEROC_ERR_CORRUPT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "3 bytes is too short"));
  snprintf(cut, sizeof cut, "%s/missing.safetensors", g_dir);
  CU_ASSERT_EQUAL(zeroc__st_open(cut, &st), ZEROC_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "missing.safetensors"));
  free(whole);
}

/* Byte flips in a small valid file (so most flips land in the header): the
 * parser either rejects it or returns tensors whose bytes lie inside the
 * buffer. */
static void test_mutations(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/small.safetensors", g_dir);
  uint64_t shape[2] = {2, 3};
  float x[6] = {1, 2, 3, 4, 5, 6};
  zeroc__st_writer_t *w;
  ZT_OK(zeroc__st_writer_create(path, &w));
  ZT_OK(zeroc__st_writer_metadata(w, "k", "v"));
  ZT_OK(zeroc__st_writer_add(w, "x", ZEROC_ST_F32, 2, shape));
  ZT_OK(zeroc__st_writer_add(w, "y", ZEROC_ST_BF16, 2, shape));
  ZT_OK(zeroc__st_writer_write_f32(w, x, 6));
  ZT_OK(zeroc__st_writer_write_f32(w, x, 6));
  ZT_OK(zeroc__st_writer_finish(w));
  zeroc__st_writer_destroy(w);
  char *good;
  size_t n;
  ZT_OK(zeroc__file_read(path, 1 << 20, &good, &n));
  unsigned char *buf = malloc(n);
  uint64_t s = 5;
  int ok = 0, rejected = 0, other = 0, outside = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, good, n);
    int flips = 1 + (int)(zt_rand_u64(&s) % 2);
    for (int f = 0; f < flips; f++) {
      size_t at = (size_t)(zt_rand_u64(&s) % n);
      /* digits and punctuation keep more mutants parseable */
      static const char alphabet[] = "0123456789,:[]{}\" ";
      buf[at] = it % 2 ? (unsigned char)zt_rand_u64(&s)
                       : (unsigned char)alphabet[zt_rand_u64(&s) % (sizeof alphabet - 1)];
    }
    zeroc__st_t *st;
    zeroc_result_t r = zeroc__st_parse(buf, n, "mutant", &st);
    if (r == ZEROC_OK) {
      ok++;
      for (size_t i = 0; i < zeroc__st_count(st); i++) {
        const zeroc__st_tensor_t *t = zeroc__st_tensor(st, i);
        const unsigned char *p = t->data;
        if (p < buf || p + (t->end - t->begin) > buf + n) outside++;
      }
      zeroc__st_close(st);
    } else if (r == ZEROC_ERR_CORRUPT) {
      rejected++;
    } else {
      other++;
    }
  }
  printf("\n    %d mutants parsed, %d rejected\n", ok, rejected);
  CU_ASSERT_EQUAL(outside, 0);
  CU_ASSERT_EQUAL(other, 0);
  CU_ASSERT(rejected > 0 && ok > 0);
  free(buf);
  free(good);
}

static const zt_test_t tests[] = {
    {"round_trip", test_round_trip},
    {"writer_misuse", test_writer_misuse},
    {"reject_malformed", test_reject},
    {"mutations", test_mutations},
    ZT_END,
};

int main(void) {
  g_dir = zt_tempdir("zeroc-io-st");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("io_safetensors", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
