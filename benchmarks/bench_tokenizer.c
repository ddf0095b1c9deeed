/*
 * benchmarks/bench_tokenizer.c - encode and decode speed of a zeroc tokenizer
 * on a text file, with pthreads splitting the text at document boundaries
 * ("<|endoftext|>", which every document is followed by, as the ids are).
 *
 *   bench_tokenizer TOKENIZER TEXT THREADS [IDS_OUT] [REPEATS]
 *
 * Prints one JSON line: bytes, tokens, encode and decode MB/s (the best of
 * REPEATS, default 3), and whether decode(encode(text)) == text. IDS_OUT gets
 * the ids as int32 little-endian (for benchmarks/tokenizer.py to compare with
 * tokenizers). Each thread encodes its documents one call per document.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zeroc/zeroc.h"

typedef struct {
  const zeroc_tokenizer_t *t;
  const char *text;
  size_t lo, hi; /* the thread's bytes: whole documents */
  int32_t *ids;  /* room for hi - lo ids */
  size_t n;      /* ids written */
  char *back;    /* decode output */
  size_t back_len;
  int failed;
} part_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *encode_part(void *arg) {
  part_t *p = arg;
  p->n = 0;
  size_t i = p->lo;
  while (i < p->hi) {
    const char *e = memmem(p->text + i, p->hi - i, "<|endoftext|>", 13);
    size_t end = e ? (size_t)(e - p->text) + 13 : p->hi; /* the document and its end token */
    size_t k = 0;
    if (zeroc_tokenizer_encode(p->t, p->text + i, end - i, p->ids + p->n, &k) != ZEROC_OK) {
      fprintf(stderr, "encode: %s\n", zeroc_last_error(NULL));
      p->failed = 1;
      return NULL;
    }
    p->n += k;
    i = end;
  }
  return NULL;
}

static void *decode_part(void *arg) {
  part_t *p = arg;
  if (zeroc_tokenizer_decode(p->t, p->ids, p->n, p->back, p->hi - p->lo, &p->back_len) !=
      ZEROC_OK) {
    fprintf(stderr, "decode: %s\n", zeroc_last_error(NULL));
    p->failed = 1;
  }
  return NULL;
}

static double run(part_t *parts, int threads, void *(*fn)(void *)) {
  pthread_t th[256];
  double t0 = now();
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, fn, &parts[i]);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  return now() - t0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TOKENIZER TEXT THREADS [IDS_OUT] [REPEATS]\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[3]), reps = argc > 5 ? atoi(argv[5]) : 3;
  if (threads < 1 || threads > 256 || reps < 1) return 2;
  zeroc_tokenizer_t *t = NULL;
  double t0 = now();
  if (zeroc_tokenizer_load(argv[1], &t) != ZEROC_OK) {
    fprintf(stderr, "%s\n", zeroc_last_error(NULL));
    return 1;
  }
  double load_s = now() - t0;
  FILE *f = fopen(argv[2], "rb");
  if (!f) return perror(argv[2]), 1;
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(len + 1);
  if (fread(text, 1, len, f) != len) return perror("read"), 1;
  fclose(f);
  part_t parts[256];
  size_t lo = 0;
  for (int i = 0; i < threads; i++) { /* cut after the end token nearest the even split */
    size_t hi = i + 1 == threads ? len : len / (size_t)threads * (size_t)(i + 1);
    if (hi < lo) hi = lo;
    const char *e = i + 1 == threads ? NULL : memmem(text + hi, len - hi, "<|endoftext|>", 13);
    if (i + 1 < threads) hi = e ? (size_t)(e - text) + 13 : len;
    parts[i] = (part_t){
        t, text, lo, hi, malloc((hi - lo + 1) * sizeof(int32_t)), 0, malloc(hi - lo + 1), 0, 0};
    lo = hi;
  }
  double enc = 1e30, dec = 1e30;
  for (int r = 0; r < reps; r++) {
    double s = run(parts, threads, encode_part);
    if (s < enc) enc = s;
    s = run(parts, threads, decode_part);
    if (s < dec) dec = s;
  }
  size_t tokens = 0;
  int same = 1, failed = 0;
  for (int i = 0; i < threads; i++) {
    tokens += parts[i].n;
    failed |= parts[i].failed;
    same &= parts[i].back_len == parts[i].hi - parts[i].lo &&
            memcmp(parts[i].back, text + parts[i].lo, parts[i].back_len) == 0;
  }
  if (argc > 4 && strcmp(argv[4], "-") != 0) {
    FILE *o = fopen(argv[4], "wb");
    if (!o) return perror(argv[4]), 1;
    for (int i = 0; i < threads; i++) fwrite(parts[i].ids, sizeof(int32_t), parts[i].n, o);
    fclose(o);
  }
  printf("{\"tokenizer\": \"%s\", \"vocab\": %d, \"threads\": %d, \"bytes\": %zu, \"tokens\": %zu, "
         "\"load_s\": %.3f, \"encode_MBps\": %.2f, \"decode_MBps\": %.2f, \"roundtrip\": %s}\n",
         argv[1], zeroc_tokenizer_vocab(t), threads, len, tokens, load_s, len / enc / 1e6,
         len / dec / 1e6, same ? "true" : "false");
  for (int i = 0; i < threads; i++) free(parts[i].ids), free(parts[i].back);
  free(text);
  zeroc_tokenizer_destroy(t);
  return failed || !same;
}
