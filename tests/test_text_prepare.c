/*
 * tests/test_text_prepare.c - zeroc_text_prepare (text files to llm.c
 * shards): with the bytes tokenizer the shards, read back through the data
 * layer, are the files' bytes; the validation split (the tail of each
 * document, or whole documents); the same shards for any thread count and
 * piece size; --shard-tokens cuts; --force; each refusal with its message and
 * nothing written; the data layer's check of the recorded tokenizer against
 * the model's vocab. Real text: /usr/share/common-licenses (skipped, 77,
 * where it is missing). argv[1] (optional): a directory of BPE tokenizer
 * fixtures, for the piece-size independence of a BPE tokenizer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "text/prepare_internal.h"
#include "zeroc/prepare.h"
#include "zeroc/zeroc.h"

#define LICENSES "/usr/share/common-licenses"

static char *g_dir;
static const char *g_fixtures;
static const char *g_three[] = {LICENSES "/GPL-3", LICENSES "/BSD", LICENSES "/Apache-2.0"};

/* ---- helpers ------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  *n = fread(b, 1, (size_t)sz, f);
  fclose(f);
  return b;
}

/* The tokens of one shard file (header checked). */
static int32_t *shard_tokens(const char *path, size_t *n) {
  size_t bytes;
  unsigned char *b = (unsigned char *)slurp(path, &bytes);
  *n = 0;
  if (!b || bytes < 1024) {
    free(b);
    return NULL;
  }
  int32_t h[3];
  for (int i = 0; i < 3; i++)
    h[i] = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                     (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24);
  ZT_ASSERT_MSG(h[0] == ZEROC_SHARD_MAGIC && h[1] == 1, "%s: header %d %d", path, h[0], h[1]);
  ZT_ASSERT_MSG((size_t)h[2] * 2 + 1024 == bytes, "%s: count %d for %zu bytes", path, h[2], bytes);
  int32_t *t = malloc(((size_t)h[2] + 1) * sizeof *t);
  for (int32_t i = 0; i < h[2]; i++) t[i] = b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8;
  *n = (size_t)h[2];
  free(b);
  return t;
}

/* All the tokens of a stream ("train" or "val"), shard after shard; *shards
 * gets the count of shards found. */
static int32_t *stream_tokens(const char *dir, const char *stream, size_t *n, int *shards) {
  int32_t *all = NULL;
  *n = 0;
  *shards = 0;
  for (int i = 0;; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s_%06d.bin", dir, stream, i);
    if (access(p, F_OK) != 0) break;
    size_t k;
    int32_t *t = shard_tokens(p, &k);
    all = realloc(all, (*n + k + 1) * sizeof *all);
    memcpy(all + *n, t, k * sizeof *t);
    *n += k;
    free(t);
    (*shards)++;
  }
  return all;
}

static zeroc_prepare_config_t cfg(const char *out, const char **in, int n, const char *tok) {
  zeroc_prepare_config_t c = ZEROC_PREPARE_CONFIG_INIT;
  c.tokenizer = tok;
  c.out_dir = out;
  c.inputs = in;
  c.num_inputs = n;
  return c;
}

static char *sub(const char *name) {
  char *p = malloc(4200);
  snprintf(p, 4200, "%s/%s", g_dir, name);
  return p;
}

static int files_equal(const char *a, const char *b) {
  size_t na = 0, nb = 0;
  char *x = slurp(a, &na), *y = slurp(b, &nb);
  int eq = x && y && na == nb && !memcmp(x, y, na);
  free(x);
  free(y);
  return eq;
}

/* Every shard of two directories is byte for byte the same. */
static void assert_same_shards(const char *a, const char *b) {
  for (int s = 0; s < 2; s++)
    for (int i = 0;; i++) {
      char pa[4200], pb[4200];
      snprintf(pa, sizeof pa, "%s/%s_%06d.bin", a, s ? "val" : "train", i);
      snprintf(pb, sizeof pb, "%s/%s_%06d.bin", b, s ? "val" : "train", i);
      int ea = access(pa, F_OK) == 0, eb = access(pb, F_OK) == 0;
      ZT_ASSERT_MSG(ea == eb, "%s exists %d, %s exists %d", pa, ea, pb, eb);
      if (!ea || !eb) break;
      ZT_ASSERT_MSG(files_equal(pa, pb), "%s and %s differ", pa, pb);
    }
}

/* ---- tests --------------------------------------------------------------------- */

/* No split: the train stream, read back through the data layer from the
 * directory, is the three files' bytes; the set records its tokenizer. */
static void test_bytes_roundtrip(void) {
  char *out = sub("plain");
  zeroc_prepare_config_t c = cfg(out, g_three, 3, "bytes");
  c.val_fraction = 0;
  c.threads = 2;
  zeroc_prepare_stats_t st;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  size_t total = 0;
  char *ref = NULL;
  for (int i = 0; i < 3; i++) {
    size_t n = 0;
    char *b = slurp(g_three[i], &n);
    ref = realloc(ref, total + n);
    memcpy(ref + total, b, n);
    total += n;
    free(b);
  }
  CU_ASSERT_EQUAL(st.documents, 3);
  CU_ASSERT_EQUAL(st.documents_done, 3);
  CU_ASSERT_EQUAL(st.train_tokens, total);
  CU_ASSERT_EQUAL(st.val_tokens, 0);
  CU_ASSERT_EQUAL(st.val_shards, 0);
  CU_ASSERT_EQUAL(st.split, ZEROC_SPLIT_NONE);
  CU_ASSERT_EQUAL(st.vocab, 256);
  CU_ASSERT_EQUAL(st.eot, -1);
  CU_ASSERT(st.done);
  /* through the data layer, the directory standing for its train shards: T = 1
   * makes sequence j the tokens j and j+1 */
  zeroc_data_config_t dc = ZEROC_DATA_CONFIG_INIT;
  dc.source = out;
  dc.vocab = 256;
  dc.seq = 1;
  dc.global_batch = 1;
  zeroc_data_t *d = NULL;
  ZT_OK(zeroc_data_create(&dc, &d));
  CU_ASSERT_FATAL(d != NULL);
  zeroc_data_info_t in;
  zeroc_data_info(d, &in);
  CU_ASSERT_EQUAL(in.num_tokens, total);
  char want[4300];
  snprintf(want, sizeof want, "%s/tokenizer.json", out);
  ZT_ASSERT_MSG(!strcmp(in.tokenizer, want), "tokenizer '%s', want '%s'", in.tokenizer, want);
  CU_ASSERT_EQUAL(in.tokenizer_vocab, 256);
  size_t bad = 0;
  for (uint64_t j = 0; j + 1 < total; j++) {
    int32_t t[2];
    ZT_OK(zeroc_data_read_sequence(d, j, t));
    bad += t[0] != (unsigned char)ref[j] || t[1] != (unsigned char)ref[j + 1];
  }
  ZT_ASSERT_MSG(bad == 0, "%zu sequences differ from the files' bytes", bad);
  zeroc_data_destroy(d);
  free(ref);
  free(out);
}

/* Fewer than 1/F documents: each one's last F, from a line start, is val. */
static void test_val_tail(void) {
  char *out = sub("tail");
  zeroc_prepare_config_t c = cfg(out, g_three, 3, "bytes");
  c.val_fraction = 0.1;
  zeroc_prepare_stats_t st;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  CU_ASSERT_EQUAL(st.split, ZEROC_SPLIT_TAIL);
  size_t nt, nv;
  int ns;
  int32_t *tr = stream_tokens(out, "train", &nt, &ns), *va = stream_tokens(out, "val", &nv, &ns);
  size_t at = 0, av = 0, bad = 0;
  for (int i = 0; i < 3; i++) {
    size_t n = 0;
    char *b = slurp(g_three[i], &n);
    size_t t = n - (size_t)(0.1 * (double)n), cut = t;
    while (cut < n && b[cut - 1] != '\n') cut++;
    ZT_ASSERT_MSG(cut < n && cut - t < 200, "%s: no line start after %zu", g_three[i], t);
    for (size_t k = 0; k < cut; k++) bad += at + k >= nt || tr[at + k] != (unsigned char)b[k];
    for (size_t k = cut; k < n; k++)
      bad += av + k - cut >= nv || va[av + k - cut] != (unsigned char)b[k];
    at += cut;
    av += n - cut;
    free(b);
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(at, nt);
  CU_ASSERT_EQUAL(av, nv);
  CU_ASSERT_EQUAL(st.train_tokens, nt);
  CU_ASSERT_EQUAL(st.val_tokens, nv);
  free(tr);
  free(va);
  free(out);
}

/* At least 1/F documents: each goes whole to train or to val, in order. */
static void test_val_documents(void) {
  char *src = sub("docs");
  mkdir(src, 0755);
  enum { N = 40 };
  char texts[N][64];
  for (int i = 0; i < N; i++) {
    char p[4300];
    snprintf(p, sizeof p, "%s/doc%02d.txt", src, i);
    snprintf(texts[i], sizeof texts[i], "document %d says %.*s\n", i, i % 17 + 1,
             "abcdefghijklmnopq");
    FILE *f = fopen(p, "w");
    fputs(texts[i], f);
    fclose(f);
  }
  char glob[4300];
  snprintf(glob, sizeof glob, "%s/doc*.txt", src);
  const char *in[] = {glob};
  char *out = sub("docs_out");
  zeroc_prepare_config_t c = cfg(out, in, 1, "bytes");
  c.val_fraction = 0.1;
  zeroc_prepare_stats_t st;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  CU_ASSERT_EQUAL(st.split, ZEROC_SPLIT_DOCUMENTS);
  CU_ASSERT_EQUAL(st.documents, N);
  ZT_ASSERT_MSG(st.val_documents >= 1 && st.val_documents < 12, "%d val documents",
                st.val_documents);
  size_t nt, nv;
  int ns;
  int32_t *tr = stream_tokens(out, "train", &nt, &ns), *va = stream_tokens(out, "val", &nv, &ns);
  size_t at = 0, av = 0;
  int nval = 0, ok = 1;
  for (int i = 0; i < N && ok; i++) {
    size_t n = strlen(texts[i]);
    int in_train = at + n <= nt, in_val = av + n <= nv;
    for (size_t k = 0; k < n; k++) {
      in_train = in_train && tr[at + k] == (unsigned char)texts[i][k];
      in_val = in_val && va[av + k] == (unsigned char)texts[i][k];
    }
    ok = in_train != in_val;
    if (in_train)
      at += n;
    else
      av += n, nval++;
  }
  ZT_ASSERT_MSG(ok && at == nt && av == nv, "documents are not whole in one stream");
  CU_ASSERT_EQUAL(nval, st.val_documents);
  /* the draw depends on the documents alone: the same split again */
  char *out2 = sub("docs_out2");
  c.out_dir = out2;
  c.threads = 3;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  assert_same_shards(out, out2);
  free(tr);
  free(va);
  free(out);
  free(out2);
  free(src);
}

/* The pieces a document is cut into, and the thread count, change nothing. */
static void test_threads_and_pieces(void) {
  const char *in[] = {LICENSES "/*"};
  char *a = sub("t1"), *b = sub("t4"), *e = sub("whole");
  zeroc_prepare_config_t c = cfg(a, in, 1, "bytes");
  c.threads = 1;
  c.chunk_bytes = 4096;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  c.out_dir = b;
  c.threads = 4;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  assert_same_shards(a, b);
  c.out_dir = e;
  c.chunk_bytes = 1 << 30;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  assert_same_shards(a, e);
  free(a);
  free(b);
  free(e);
}

/* With BPE tokenizers too (GPT-2's pattern, with and without
 * add_prefix_space, an end-of-text token before each document): pieces of
 * 4 KiB cut at safe places give the tokens of whole documents. */
static void test_bpe_pieces(void) {
  if (!g_fixtures) return;
  const char *names[] = {"bpe1000.json", "bpe300_prefix.json"};
  const char *in[] = {LICENSES "/*"};
  for (int k = 0; k < 2; k++) {
    char tok[4200], a[4300], b[4300];
    snprintf(tok, sizeof tok, "%s/%s", g_fixtures, names[k]);
    snprintf(a, sizeof a, "%s/bpe_small_%d", g_dir, k);
    snprintf(b, sizeof b, "%s/bpe_whole_%d", g_dir, k);
    zeroc_prepare_config_t c = cfg(a, in, 1, tok);
    c.threads = 3;
    c.chunk_bytes = 4096;
    zeroc_prepare_stats_t st;
    ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
    CU_ASSERT(st.eot >= 0);
    CU_ASSERT(st.train_tokens + st.val_tokens < st.bytes_total); /* merges happened */
    c.out_dir = b;
    c.threads = 1;
    c.chunk_bytes = 1 << 30;
    ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
    assert_same_shards(a, b);
    /* the first train token is the end-of-text id */
    char p[4400];
    size_t n;
    snprintf(p, sizeof p, "%s/train_000000.bin", a);
    int32_t *t = shard_tokens(p, &n);
    CU_ASSERT(n > 0 && t[0] == st.eot);
    free(t);
  }
}

/* An NFC tokenizer (Qwen2's normalizer) can make more tokens than bytes:
 * U+1D160 (4 bytes) is U+1D158 U+1D165 U+1D16E (12) in NFC, 6 tokens of
 * qwen2_nfc.json, as tokenizers gives them. zeroc data gives the encoder the
 * room, where zeroc_tokenizer_encode's len ids are too few. */
static void test_nfc_room(void) {
  if (!g_fixtures) return;
  char tok[4200], out[4300], *doc = sub("nfc_room.txt");
  snprintf(tok, sizeof tok, "%s/qwen2_nfc.json", g_fixtures);
  snprintf(out, sizeof out, "%s/nfc_room", g_dir);
  FILE *f = fopen(doc, "wb");
  CU_ASSERT_FATAL(f != NULL);
  for (int i = 0; i < 10; i++) fputs("\xf0\x9d\x85\xa0", f);
  fclose(f);
  const char *in[] = {doc};
  zeroc_prepare_config_t c = cfg(out, in, 1, tok);
  zeroc_prepare_stats_t st;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  size_t n = 0;
  int shards = 0;
  int32_t *t = stream_tokens(out, "train", &n, &shards);
  static const int32_t want[6] = {603, 249, 603, 101, 603, 109}; /* tokenizers 0.23.3 */
  int ok = n == 61 && t[0] == st.eot;
  for (size_t i = 1; ok && i < n; i++) ok = t[i] == want[(i - 1) % 6];
  ZT_ASSERT_MSG(ok, "%zu tokens (want the end of text and 60), first %d %d", n, n ? t[0] : -1,
                n > 1 ? t[1] : -1);
  /* the public call, with ids for the 40 bytes only, refuses instead */
  zeroc_tokenizer_t *k = NULL;
  ZT_OK(zeroc_tokenizer_load(tok, &k));
  int32_t ids[40];
  char text[41];
  for (int i = 0; i < 10; i++) memcpy(text + 4 * i, "\xf0\x9d\x85\xa0", 4);
  CU_ASSERT_EQUAL(zeroc_tokenizer_encode(k, text, 40, ids, &n), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "more tokens than the 40 ids"), "%s",
                zeroc_last_error(NULL));
  zeroc_tokenizer_destroy(k);
  free(t);
  free(doc);
}

/* --shard-tokens cuts the streams into full shards and a last one. */
static void test_shard_split(void) {
  char *a = sub("one"), *b = sub("many");
  zeroc_prepare_config_t c = cfg(a, g_three, 3, "bytes");
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  c.out_dir = b;
  c.shard_tokens = 10000;
  zeroc_prepare_stats_t st;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, &st));
  for (int s = 0; s < 2; s++) {
    size_t n1, n2;
    int k1, k2;
    int32_t *x = stream_tokens(a, s ? "val" : "train", &n1, &k1);
    int32_t *y = stream_tokens(b, s ? "val" : "train", &n2, &k2);
    CU_ASSERT_EQUAL(k1, 1);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT(n1 == n2 && !memcmp(x, y, n1 * sizeof *x));
    ZT_ASSERT_MSG(k2 == (int)((n2 + 9999) / 10000), "%zu tokens in %d shards of 10000", n2, k2);
    CU_ASSERT_EQUAL(k2, s ? st.val_shards : st.train_shards);
    for (int i = 0; i + 1 < k2; i++) {
      char p[4300];
      size_t k;
      snprintf(p, sizeof p, "%s/%s_%06d.bin", b, s ? "val" : "train", i);
      free(shard_tokens(p, &k));
      CU_ASSERT_EQUAL(k, 10000);
    }
    free(x);
    free(y);
  }
  free(a);
  free(b);
}

static void expect_refusal(const zeroc_prepare_config_t *c, const char *msg) {
  zeroc_result_t r = zeroc_text_prepare(c, NULL, NULL, NULL);
  const char *e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG && strstr(e, msg), "want INVALID_ARG '%s', got %s: %s",
                msg, zeroc_result_name(r), e);
}

/* Each refusal: one message naming the value; nothing written. */
static void test_refusals(void) {
  char *out = sub("refused"), *file = sub("a_file");
  FILE *f = fopen(file, "w");
  fputs("x\n", f);
  fclose(f);
  const char *missing[] = {LICENSES "/GPL-3", "/nonexistent/zeroc.txt"};
  const char *empty_glob[] = {"/nonexistent-dir/*.txt"};
  const char *dir_in[] = {LICENSES};
  zeroc_prepare_config_t c = cfg(out, missing, 2, "bytes");
  expect_refusal(&c, "'/nonexistent/zeroc.txt'");
  c = cfg(out, empty_glob, 1, "bytes");
  expect_refusal(&c, "matches no files");
  c = cfg(out, dir_in, 1, "bytes");
  expect_refusal(&c, "is a directory");
  c = cfg(out, g_three, 3, "bytes");
  c.val_fraction = 1;
  expect_refusal(&c, "0 <= F < 1");
  c.val_fraction = -0.5;
  expect_refusal(&c, "0 <= F < 1");
  c = cfg(out, g_three, 3, "bytes");
  c.shard_tokens = 0;
  expect_refusal(&c, "shard tokens (--shard-tokens) 0");
  c.shard_tokens = 1LL << 31;
  expect_refusal(&c, "accepted 1..2147483647");
  c = cfg(out, g_three, 3, "/nonexistent/tokenizer.json");
  expect_refusal(&c, "/nonexistent/tokenizer.json");
  c = cfg(file, g_three, 3, "bytes");
  expect_refusal(&c, "is a regular file");
  /* a tokenizer with ids past what uint16 shards hold: llm.c's uint32 shards */
  char *big = sub("large.json");
  f = fopen(big, "w");
  /* a dense vocab of 70002 ids ("a", "b", "ab" and filler) */
  fputs("{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": "
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"type\": \"BPE\", "
        "\"vocab\": {\"a\": 0, \"b\": 70000, \"ab\": 70001",
        f);
  for (int i = 1; i < 70000; i++) fprintf(f, ", \"t%d\": %d", i, i);
  fputs("}, \"merges\": [\"a b\"]}}", f);
  fclose(f);
  char *abf = sub("ab.txt"), *out32 = sub("out32");
  f = fopen(abf, "w");
  fputs("abab", f);
  fclose(f);
  const char *ab_in[1] = {abf};
  c = cfg(out32, ab_in, 1, big);
  c.val_fraction = 0;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  char shard[4300];
  snprintf(shard, sizeof shard, "%s/train_000000.bin", out32);
  unsigned char b32[1024 + 8 + 1];
  f = fopen(shard, "rb");
  size_t got = f ? fread(b32, 1, sizeof b32, f) : 0;
  if (f) fclose(f);
  int32_t h32[3];
  memcpy(h32, b32, sizeof h32);
  ZT_ASSERT_MSG(got == 1024 + 8 && h32[0] == 20240801 && h32[1] == 7 && h32[2] == 2,
                "uint32 shard: %zu bytes, magic %d version %d count %d", got, h32[0], h32[1],
                h32[2]);
  for (int k = 0; k < 2 && got == 1024 + 8; k++)
    CU_ASSERT_EQUAL(b32[1024 + 4 * k] | b32[1025 + 4 * k] << 8 | b32[1026 + 4 * k] << 16, 70001);
  free(abf);
  free(out32);
  free(big);
  c = cfg(out, g_three, 0, "bytes");
  expect_refusal(&c, "no input files");
  ZT_ASSERT_MSG(access(out, F_OK) != 0, "a refused run created '%s'", out);
  /* existing shards: refused without force; force replaces them and removes
   * the earlier run's extra shards */
  c = cfg(out, g_three, 3, "bytes");
  c.shard_tokens = 5000;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  c.shard_tokens = (int64_t)ZEROC_UNSET;
  expect_refusal(&c, "--force");
  char p[4300];
  snprintf(p, sizeof p, "%s/train_000003.bin", out);
  CU_ASSERT(access(p, F_OK) == 0);
  c.force = 1;
  ZT_OK(zeroc_text_prepare(&c, NULL, NULL, NULL));
  CU_ASSERT(access(p, F_OK) != 0);
  snprintf(p, sizeof p, "%s/train_000000.bin", out);
  CU_ASSERT(access(p, F_OK) == 0);
  /* no temporary files left behind */
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", out);
  CU_ASSERT(system(cmd) != 0);
  free(out);
  free(file);
}

static int stop_at_once(void *user, const zeroc_prepare_stats_t *s) {
  (void)s;
  ++*(int *)user;
  return 1;
}

/* A progress callback that asks to stop: ZEROC_ERR_IO, and nothing is left
 * (the directory it created is gone again). */
static void test_stop(void) {
  char *out = sub("stopped");
  const char *in[] = {LICENSES "/*"};
  zeroc_prepare_config_t c = cfg(out, in, 1, "bytes");
  c.chunk_bytes = 4096;
  c.threads = 2;
  int calls = 0;
  zeroc_result_t r = zeroc_text_prepare(&c, stop_at_once, &calls, NULL);
  ZT_ASSERT_MSG(r == ZEROC_ERR_IO && strstr(zeroc_last_error(NULL), "nothing was written"),
                "got %s: %s", zeroc_result_name(r), zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(calls, 1);
  ZT_ASSERT_MSG(access(out, F_OK) != 0, "'%s' left behind", out);
  free(out);
}

/* The data layer refuses shards whose recorded tokenizer has more ids than
 * the model's vocab, naming both. */
static void test_vocab_check(void) {
  char *out = sub("plain");
  zeroc_data_config_t dc = ZEROC_DATA_CONFIG_INIT;
  char src[4300];
  snprintf(src, sizeof src, "%s/train_*.bin", out);
  dc.source = src;
  dc.vocab = 200;
  dc.seq = 8;
  dc.global_batch = 1;
  zeroc_data_t *d = NULL;
  zeroc_result_t r = zeroc_data_create(&dc, &d);
  const char *e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG && strstr(e, "vocab 256") && strstr(e, "vocab 200"),
                "got %s: %s", zeroc_result_name(r), e);
  CU_ASSERT(d == NULL);
  free(out);
}

/* A --force run's clean-up keeps exactly the names it wrote: 7-digit ones
 * from index 10^6 on too (a run of that many shards cannot be a test). */
static void test_stale_names(void) {
  const int n[2] = {1000001, 3}; /* ZEROC__TRAIN, ZEROC__VAL */
  static const struct {
    const char *name;
    int stale;
  } cases[] = {
      {"train_000000.bin", 0},  {"train_999999.bin", 0},  {"train_1000000.bin", 0},
      {"train_1000001.bin", 1}, {"train_0000005.bin", 1}, {"val_000002.bin", 0},
      {"val_000003.bin", 1},    {"val_0000002.bin", 1},   {"tokenizer.json", 0},
      {"train_000000.txt", 0},  {"notes.bin", 0},
  };
  CU_ASSERT_EQUAL(ZEROC__TRAIN, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ZT_ASSERT_MSG(zeroc__prepare_is_stale(cases[i].name, n) == cases[i].stale, "%s: stale %d",
                  cases[i].name, !cases[i].stale);
}

static const zt_test_t tests[] = {
    {"bytes_roundtrip", test_bytes_roundtrip}, {"val_tail", test_val_tail},
    {"val_documents", test_val_documents},     {"threads_and_pieces", test_threads_and_pieces},
    {"bpe_pieces", test_bpe_pieces},           {"nfc_room", test_nfc_room},
    {"shard_split", test_shard_split},         {"refusals", test_refusals},
    {"vocab_check", test_vocab_check},         {"stop", test_stop},
    {"stale_names", test_stale_names},         ZT_END,
};

int main(int argc, char **argv) {
  if (access(LICENSES "/GPL-3", R_OK) != 0) {
    printf("skipped: no %s\n", LICENSES);
    return ZT_SKIP_CODE;
  }
  g_fixtures = argc > 1 ? argv[1] : NULL;
  g_dir = zt_tempdir("zeroc-prepare");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("text_prepare", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
