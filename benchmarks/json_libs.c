/*
 * benchmarks/json_libs.c - zeroc's JSON parser (src/io/json.c) side by side
 * with the JSON libraries Debian 12 packages (jansson, cJSON, json-c): parse
 * time and peak heap for the documents zeroc reads (a checkpoint manifest, a
 * safetensors header), and the behaviours zeroc's callers rely on. The reason
 * for keeping our parser (docs/json.md) quotes this program's table.
 *
 *   bench_json_libs MANIFEST.json MODEL.safetensors [runs] [iters]
 *
 * Built only with -DZEROC_BENCH_JSON_LIBS=ON and the three -dev packages
 * (libjansson-dev libcjson-dev libjson-c-dev): zeroc itself needs none of them.
 * Peak heap: this program interposes malloc (all four parsers allocate through
 * it) and reports the most live bytes (malloc_usable_size) above the level
 * before the parse, over one parse and its free.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/json.h"
#include "zeroc/zeroc.h"

/* ---- counting heap ----------------------------------------------------------- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static size_t live, peak, nallocs;

void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  if (p) live += malloc_usable_size(p), nallocs++;
  if (live > peak) peak = live;
  return p;
}
void *calloc(size_t a, size_t b) {
  void *p = __libc_calloc(a, b);
  if (p) live += malloc_usable_size(p), nallocs++;
  if (live > peak) peak = live;
  return p;
}
void *realloc(void *q, size_t n) {
  size_t old = q ? malloc_usable_size(q) : 0;
  void *p = __libc_realloc(q, n);
  if (p) live = live - old + malloc_usable_size(p), nallocs++;
  if (live > peak) peak = live;
  return p;
}
void free(void *p) {
  if (p) live -= malloc_usable_size(p);
  __libc_free(p);
}

/* ---- the four parsers behind one signature -------------------------------------- */

/* Parses and frees; returns 0 on success, else writes the error to msg. */
typedef int (*parse_fn)(const char *buf, size_t len, char *msg, size_t n);

static int p_ours(const char *buf, size_t len, char *msg, size_t n) {
  zeroc__json_doc_t *d = NULL;
  zeroc_result_t r = zeroc__json_parse(buf, len, "input", &d);
  if (r) snprintf(msg, n, "%s", zeroc_last_error(NULL));
  zeroc__json_free(d);
  return r != ZEROC_OK;
}

/* One per library (json_libs_<lib>.c: jansson and json-c cannot share a
 * translation unit, both define json_object_get). Each parses and frees
 * (0 on success, else the library's error in msg) or reads {"v": N} back as
 * an unsigned 64-bit integer (0 on success, else why not in msg). */
int bjl_jansson_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_cjson_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_jsonc_parse(const char *buf, size_t len, char *msg, size_t n);
int bjl_jansson_u64(const char *text, uint64_t *v, char *msg, size_t n);
int bjl_cjson_u64(const char *text, uint64_t *v, char *msg, size_t n);
int bjl_jsonc_u64(const char *text, uint64_t *v, char *msg, size_t n);

static const struct {
  const char *name;
  parse_fn fn;
} LIBS[] = {{"zeroc (src/io/json.c)", p_ours},
            {"jansson 2.14", bjl_jansson_parse},
            {"cJSON 1.7.15", bjl_cjson_parse},
            {"json-c 0.16", bjl_jsonc_parse}};
#define NLIBS (int)(sizeof LIBS / sizeof LIBS[0])

/* ---- measurements ------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void measure(const char *label, const char *buf, size_t len, int runs, int iters) {
  printf("\n%s (%zu bytes)\n", label, len);
  printf(
      "| parser | median parse us | min us | peak heap bytes | mallocs |\n|---|---|---|---|---|\n");
  for (int l = 0; l < NLIBS; l++) {
    char msg[512];
    double t[64];
    if (runs > 64) runs = 64;
    size_t base = live;
    peak = live;
    nallocs = 0;
    if (LIBS[l].fn(buf, len, msg, sizeof msg)) {
      printf("| %s | fails: %s | | | |\n", LIBS[l].name, msg);
      continue;
    }
    size_t pk = peak - base, na = nallocs;
    for (int r = 0; r < runs; r++) {
      double t0 = now();
      for (int i = 0; i < iters; i++) LIBS[l].fn(buf, len, msg, sizeof msg);
      t[r] = (now() - t0) / iters * 1e6;
    }
    qsort(t, (size_t)runs, sizeof t[0], dcmp);
    printf("| %s | %.1f | %.1f | %zu | %zu |\n", LIBS[l].name, t[runs / 2], t[0], pk, na);
  }
}

/* ---- behaviours zeroc's callers rely on ---------------------------------------------- */

static int ours_u64(const char *text, uint64_t *v, char *msg, size_t n) {
  zeroc__json_doc_t *d = NULL;
  int bad = zeroc__json_parse(text, strlen(text), "input", &d) != ZEROC_OK;
  if (bad)
    snprintf(msg, n, "%s", zeroc_last_error(NULL));
  else {
    const zeroc__json_t *x = zeroc__json_get(zeroc__json_root(d), "v");
    bad = !x->u.num.is_u64;
    if (bad) snprintf(msg, n, "not an exact integer (is_u64 0): %.17g", x->u.num.value);
    *v = x->u.num.u;
  }
  zeroc__json_free(d);
  return bad;
}

static int (*const U64[])(const char *, uint64_t *, char *,
                          size_t) = {ours_u64, bjl_jansson_u64, bjl_cjson_u64, bjl_jsonc_u64};

static void verdicts(const char *what, const char *text, size_t len) {
  printf("| %s ", what);
  for (int l = 0; l < NLIBS; l++) {
    char msg[512] = "";
    int bad = LIBS[l].fn(text, len, msg, sizeof msg);
    printf("| %s%s%s ", bad ? "rejected: " : "accepted", bad ? msg : "", "");
  }
  printf("|\n");
}

static void features(void) {
  printf("\nexact integers: {\"v\": N} read back as a 64-bit integer\n| N |");
  for (int l = 0; l < NLIBS; l++) printf(" %s |", LIBS[l].name);
  printf("\n|---|---|---|---|---|\n");
  const char *nums[] = {"1099511627776", "281474976710656", "9007199254740993",
                        "9223372036854775807", "18446744073709551615"};
  for (int i = 0; i < 5; i++) {
    char text[128];
    snprintf(text, sizeof text, "{\"v\": %s}", nums[i]);
    printf("| %s |", nums[i]);
    for (int l = 0; l < NLIBS; l++) {
      char msg[256] = "";
      uint64_t v = 0;
      if (U64[l](text, &v, msg, sizeof msg))
        printf(" error: %s |", msg);
      else
        printf(" %llu%s |", (unsigned long long)v,
               strtoull(nums[i], NULL, 10) == v ? "" : " (WRONG)");
    }
    printf("\n");
  }
  printf("\ninputs zeroc must refuse (jansson with JSON_REJECT_DUPLICATES, json-c with "
         "STRICT|VALIDATE_UTF8 and depth %d)\n",
         ZEROC_JSON_MAX_DEPTH);
  printf("| input |");
  for (int l = 0; l < NLIBS; l++) printf(" %s |", LIBS[l].name);
  printf("\n|---|---|---|---|---|\n");
  verdicts("duplicate key {\"a\":1,\"a\":2}", "{\"a\":1,\"a\":2}", 13);
  verdicts("invalid UTF-8 [\"\\xff\"]", "[\"\xff\"]", 4);
  verdicts("overlong UTF-8 [\"\\xc0\\xaf\"]", "[\"\xc0\xaf\"]", 5);
  verdicts("trailing comma [1,2,]", "[1,2,]", 6);
  verdicts("error position {\"a\": [1, 2,, 3]}", "{\"a\": [1, 2,, 3]}", 17);
  char deep[200];
  for (int d = 64; d <= 65; d++) {
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    char what[32];
    snprintf(what, sizeof what, "nesting depth %d", d);
    verdicts(what, deep, (size_t)(2 * d));
  }
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  verdicts("nesting depth 100", deep, 200);
}

/* ---- main ----------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) b[0] = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MANIFEST.json MODEL.safetensors [runs (9)] [iters (200)]\n",
            argv[0]);
    return 2;
  }
  int runs = argc > 3 ? atoi(argv[3]) : 9, iters = argc > 4 ? atoi(argv[4]) : 200;
  size_t mlen;
  char *man = slurp(argv[1], &mlen), *st = NULL;
  unsigned char le[8];
  uint64_t hlen = 0;
  FILE *f = fopen(argv[2], "rb");
  if (f && fread(le, 1, 8, f) == 8) {
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | le[i];
    if (hlen < (1u << 30) && (st = malloc(hlen)) && fread(st, 1, hlen, f) != hlen) st = NULL;
  }
  if (f) fclose(f);
  if (!man || !st) {
    fprintf(stderr, "cannot read %s or the header of %s\n", argv[1], argv[2]);
    return 1;
  }
  printf("runs %d x %d parses each; times are per parse (parse + free)\n", runs, iters);
  measure(argv[1], man, mlen, runs, iters);
  char label[512];
  snprintf(label, sizeof label, "safetensors header of %s", argv[2]);
  measure(label, st, (size_t)hlen, runs, iters);
  features();
  free(man);
  free(st);
  return 0;
}
