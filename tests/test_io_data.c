/*
 * tests/test_io_data.c - llm.c token shards and the batching rule: shard round
 * trips (our writer and hand-made files, several files in name order), each
 * validation error naming its file, the union of every layout's micro-batches
 * at step k being exactly the global batch (with and without --shuffle),
 * epochs, the seeded permutation, and resuming at step k.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rng.h"
#include "testutil.h"
#include "zeroc/data.h"

static char *g_dir;

/* The shard set: four files written out of name order; in sorted order
 * (a, b, bb, c) they hold NA + NB + 0 + NC tokens, concatenated in g_ref. */
#define NA    1000
#define NB    37
#define NC    1500
#define VOCAB 1000
#define T     16
#define G     8
static int32_t g_ref[NA + NB + NC];
static char g_glob[4200];

/* Writes an llm.c shard by hand (not through zeroc's writer): header fields
 * as given, then `n` tokens. */
static void write_raw(const char *path, int32_t magic, int32_t version, int32_t count,
                      const int32_t *tok, size_t n) {
  size_t bytes = 1024 + 2 * n;
  unsigned char *b = calloc(1, bytes);
  int32_t h[3] = {magic, version, count};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++) b[4 * i + k] = (unsigned char)((uint32_t)h[i] >> (8 * k));
  for (size_t i = 0; i < n; i++) {
    b[1024 + 2 * i] = (unsigned char)(tok[i] & 0xff);
    b[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
  }
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT(fwrite(b, 1, bytes, f) == bytes);
  fclose(f);
  free(b);
}

static void write_shard(const char *path, const int32_t *tok, size_t n) {
  zeroc_shard_writer_t *w = NULL;
  ZT_OK(zeroc_shard_writer_create(path, &w));
  /* in uneven pieces, to cross the writer's internal chunks */
  for (size_t i = 0; i < n;) {
    size_t k = n - i < 777 ? n - i : 777;
    ZT_OK(zeroc_shard_writer_append(w, tok + i, k));
    i += k;
  }
  ZT_OK(zeroc_shard_writer_finish(w));
  zeroc_shard_writer_destroy(w);
}

static zeroc_data_config_t files_cfg(const char *source, int shuffle, uint64_t seed) {
  zeroc_data_config_t c = ZEROC_DATA_CONFIG_INIT;
  c.source = source;
  c.vocab = VOCAB;
  c.seq = T;
  c.global_batch = G;
  c.shuffle = shuffle;
  c.seed = seed;
  return c;
}

static zeroc_data_t *open_ok(const zeroc_data_config_t *c) {
  zeroc_data_t *d = NULL;
  ZT_OK(zeroc_data_create(c, &d));
  CU_ASSERT_FATAL(d != NULL);
  return d;
}

/* The first test: writes the shard set the others read. */
static void test_write_fixtures(void) {
  uint64_t s = 11;
  for (size_t i = 0; i < NA + NB + NC; i++) g_ref[i] = (int32_t)(zt_rand_u64(&s) % VOCAB);
  char p[4200];
  /* created in the order b, c, a; read in the order a, b, c */
  snprintf(p, sizeof p, "%s/tok_b.bin", g_dir);
  write_shard(p, g_ref + NA, NB);
  snprintf(p, sizeof p, "%s/tok_c.bin", g_dir);
  write_raw(p, ZEROC_SHARD_MAGIC, 1, NC, g_ref + NA + NB, NC); /* a hand-made llm.c file */
  snprintf(p, sizeof p, "%s/tok_a.bin", g_dir);
  write_shard(p, g_ref, NA);
  snprintf(p, sizeof p, "%s/tok_bb.bin", g_dir); /* an empty shard between b and c */
  write_shard(p, g_ref, 0);
  snprintf(g_glob, sizeof g_glob, "%s/tok_*.bin", g_dir);
}

static void test_shard_format(void) {
  /* the writer's bytes are exactly the llm.c layout */
  char p[4200];
  snprintf(p, sizeof p, "%s/tok_a.bin", g_dir);
  FILE *f = fopen(p, "rb");
  CU_ASSERT_FATAL(f != NULL);
  unsigned char *b = malloc(1024 + 2 * NA + 1);
  size_t n = fread(b, 1, 1024 + 2 * NA + 1, f);
  fclose(f);
  CU_ASSERT_EQUAL(n, 1024 + 2 * NA);
  int32_t h[256];
  memcpy(h, b, sizeof h);
  CU_ASSERT_EQUAL(h[0], 20240520);
  CU_ASSERT_EQUAL(h[1], 1);
  CU_ASSERT_EQUAL(h[2], NA);
  int zero = 1;
  for (int i = 3; i < 256; i++) zero &= h[i] == 0;
  CU_ASSERT(zero);
  int same = 1;
  for (int i = 0; i < NA; i++) same &= (b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8) == g_ref[i];
  CU_ASSERT(same);
  free(b);
  /* the writer refuses tokens that do not fit uint16 */
  zeroc_shard_writer_t *w;
  snprintf(p, sizeof p, "%s/bad_tok.bin", g_dir);
  ZT_OK(zeroc_shard_writer_create(p, &w));
  int32_t bad[2] = {5, 65536};
  CU_ASSERT_EQUAL(zeroc_shard_writer_append(w, bad, 2), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "token 65536 (index 1"));
  zeroc_shard_writer_destroy(w);
  struct stat st;
  CU_ASSERT(stat(p, &st) != 0); /* abandoned: nothing left under the final name */
}

/* The uint32 format (llm.c's Llama 3 shards: magic 20240801, version 7), for
 * vocabularies above 65536: the writer's bytes, the reader's ids (above 65535,
 * checked against the vocabulary) in the same stream as a uint16 shard. */
static void test_shard_format_u32(void) {
  char p[4200], q[4200], glob[4200];
  snprintf(p, sizeof p, "%s/w32/a_000000.bin", g_dir);
  snprintf(q, sizeof q, "%s/w32/a_000001.bin", g_dir);
  snprintf(glob, sizeof glob, "%s/w32/a_*.bin", g_dir);
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/w32", g_dir);
  mkdir(dir, 0755);
  CU_ASSERT_EQUAL(zeroc_shard_token_bytes(65536), 2);
  CU_ASSERT_EQUAL(zeroc_shard_token_bytes(65537), 4);
  CU_ASSERT_EQUAL(zeroc_shard_token_bytes(128256), 4);
  enum { N = 300 };
  int32_t tok[N];
  for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919u) % 151936u); /* Qwen2's vocabulary */
  zeroc_shard_writer_t *w = NULL;
  ZT_OK(zeroc_shard_writer_create_width(p, 4, &w));
  ZT_OK(zeroc_shard_writer_append(w, tok, N));
  ZT_OK(zeroc_shard_writer_finish(w));
  zeroc_shard_writer_destroy(w);
  FILE *f = fopen(p, "rb");
  CU_ASSERT_FATAL(f != NULL);
  unsigned char *b = malloc(1024 + 4 * N + 1);
  size_t n = fread(b, 1, 1024 + 4 * N + 1, f);
  fclose(f);
  CU_ASSERT_EQUAL(n, 1024 + 4 * N);
  int32_t h[3];
  memcpy(h, b, sizeof h);
  CU_ASSERT(h[0] == 20240801 && h[1] == 7 && h[2] == N);
  int same = 1;
  for (int i = 0; i < N; i++)
    same &= (int32_t)((uint32_t)b[1024 + 4 * i] | (uint32_t)b[1025 + 4 * i] << 8 |
                      (uint32_t)b[1026 + 4 * i] << 16 | (uint32_t)b[1027 + 4 * i] << 24) == tok[i];
  CU_ASSERT(same);
  free(b);
  /* a uint16 shard beside it: one stream of both widths */
  int32_t small[N];
  for (int i = 0; i < N; i++) small[i] = i % 1000;
  write_shard(q, small, N);
  zeroc_data_config_t c = files_cfg(glob, 0, 1);
  c.vocab = 151936;
  c.seq = N / 2 - 1; /* two sequences per shard */
  c.global_batch = 1;
  zeroc_data_t *d = open_ok(&c);
  if (d) {
    int32_t seq[N];
    ZT_OK(zeroc_data_read_sequence(d, 0, seq));
    int ok = 1;
    for (int i = 0; i < c.seq + 1; i++) ok &= seq[i] == tok[i];
    CU_ASSERT(ok);
    ZT_OK(zeroc_data_read_sequence(d, 3, seq)); /* in the uint16 shard: token 3 T on */
    ok = 1;
    for (int i = 0; i < c.seq + 1; i++) ok &= seq[i] == small[3 * c.seq - N + i];
    CU_ASSERT(ok);
    zeroc_data_destroy(d);
  }
  /* ids the vocabulary does not hold are named */
  c.vocab = 100000;
  d = open_ok(&c);
  if (d) {
    int32_t seq[N];
    CU_ASSERT_EQUAL(zeroc_data_read_sequence(d, 0, seq), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), ">= vocab 100000") != NULL, "message: %s",
                  zeroc_last_error(NULL));
    zeroc_data_destroy(d);
  }
  /* a uint16 shard refuses an id above 65535, naming the uint32 format; uint32 takes it */
  snprintf(p, sizeof p, "%s/w32/big.bin", g_dir);
  ZT_OK(zeroc_shard_writer_create(p, &w));
  int32_t big = 128000;
  CU_ASSERT_EQUAL(zeroc_shard_writer_append(w, &big, 1), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "need the uint32 format") != NULL, "message: %s",
                zeroc_last_error(NULL));
  zeroc_shard_writer_destroy(w);
  CU_ASSERT_EQUAL(zeroc_shard_writer_create_width(p, 3, &w), ZEROC_ERR_INVALID_ARG);
}

static void test_round_trip(void) {
  zeroc_data_config_t c = files_cfg(g_glob, 0, 1);
  zeroc_data_t *d = open_ok(&c);
  zeroc_data_info_t info;
  zeroc_data_info(d, &info);
  CU_ASSERT_EQUAL(info.kind, ZEROC_DATA_FILES);
  CU_ASSERT_EQUAL(info.num_files, 4);
  CU_ASSERT_EQUAL(info.num_tokens, NA + NB + NC);
  CU_ASSERT_EQUAL(info.num_sequences, (NA + NB + NC - 1) / T);
  CU_ASSERT_EQUAL(info.steps_per_epoch, (NA + NB + NC - 1) / T / G);
  CU_ASSERT(info.loss_floor != info.loss_floor); /* NaN: unknown for files */
  /* every sequence, including those spanning file boundaries 1000 and 1037
   * (where the empty shard sits) */
  int32_t tok[T + 1];
  int bad = 0;
  for (uint64_t j = 0; j < info.num_sequences; j++) {
    ZT_OK(zeroc_data_read_sequence(d, j, tok));
    bad += memcmp(tok, g_ref + j * T, sizeof tok) != 0;
  }
  ZT_ASSERT_MSG(bad == 0, "%d of %llu sequences differ from the concatenated shards", bad,
                (unsigned long long)info.num_sequences);
  CU_ASSERT_EQUAL(zeroc_data_read_sequence(d, info.num_sequences, tok), ZEROC_ERR_INVALID_ARG);
  zeroc_data_destroy(d);
  /* one file by its plain path */
  char p[4200];
  snprintf(p, sizeof p, "%s/tok_c.bin", g_dir);
  c = files_cfg(p, 0, 1);
  d = open_ok(&c);
  zeroc_data_info(d, &info);
  CU_ASSERT(info.num_files == 1 && info.num_tokens == NC);
  ZT_OK(zeroc_data_read_sequence(d, 3, tok));
  CU_ASSERT(memcmp(tok, g_ref + NA + NB + 3 * T, sizeof tok) == 0);
  zeroc_data_destroy(d);
}

/* Expects opening `source` to fail with `code` and a message holding both
 * `file` and `msg`. */
static void expect_open_error(const zeroc_data_config_t *c, zeroc_result_t code, const char *file,
                              const char *msg) {
  zeroc_data_t *d = (zeroc_data_t *)1;
  zeroc_result_t r = zeroc_data_create(c, &d);
  const char *e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(r == code && d == NULL && (!file || strstr(e, file)) && strstr(e, msg),
                "got %s: %s\n    wanted %s naming '%s' with '%s'", zeroc_result_name(r), e,
                zeroc_result_name(code), file ? file : "", msg);
}

static void test_validation_errors(void) {
  char p[4200], q[4200];
  int32_t tok[64] = {0};
  zeroc_data_config_t c;

  snprintf(p, sizeof p, "%s/nope.bin", g_dir);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_IO, "nope.bin", "No such file or directory");

  snprintf(p, sizeof p, "%s/zzz_*.bin", g_dir);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, "zzz_*.bin", "the glob matches no files");

  c = files_cfg(g_dir, 0, 1);
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, g_dir, "is a directory; give a .bin file or a glob");

  snprintf(p, sizeof p, "%s/bad/trunc.bin", g_dir);
  snprintf(q, sizeof q, "%s/bad", g_dir);
  mkdir(q, 0755);
  FILE *f = fopen(p, "wb");
  CU_ASSERT(fwrite("\x28\xd6\x34\x01", 1, 4, f) == 4 && fwrite(tok, 1, 96, f) == 96);
  fclose(f);
  c = files_cfg(p, 0, 1);
  expect_open_error(
      &c, ZEROC_ERR_CORRUPT, "trunc.bin",
      "is 100 bytes, shorter than the 1024-byte llm.c shard header (truncated header)");

  snprintf(p, sizeof p, "%s/bad/magic.bin", g_dir);
  write_raw(p, 20240521, 1, 64, tok, 64);
  c = files_cfg(p, 0, 1);
  expect_open_error(
      &c, ZEROC_ERR_CORRUPT, "magic.bin",
      "magic 20240521 (0x0134d889) at byte 0 is not the llm.c token shard magic 20240520");

  snprintf(p, sizeof p, "%s/bad/version.bin", g_dir);
  write_raw(p, ZEROC_SHARD_MAGIC, 2, 64, tok, 64);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_CORRUPT, "version.bin",
                    "shard version 2 at byte 4; supported: 1");

  snprintf(p, sizeof p, "%s/bad/short.bin", g_dir);
  write_raw(p, ZEROC_SHARD_MAGIC, 1, 100, tok, 50);
  c = files_cfg(p, 0, 1);
  expect_open_error(
      &c, ZEROC_ERR_CORRUPT, "short.bin",
      "is 1124 bytes, shorter than its header's count of 100 tokens needs (1224 bytes");

  snprintf(p, sizeof p, "%s/bad/long.bin", g_dir);
  write_raw(p, ZEROC_SHARD_MAGIC, 1, 10, tok, 20);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_CORRUPT, "long.bin",
                    "longer than its header's count of 10 tokens");

  snprintf(p, sizeof p, "%s/bad/negative.bin", g_dir);
  write_raw(p, ZEROC_SHARD_MAGIC, 1, -5, tok, 0);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_CORRUPT, "negative.bin", "token count -5 at byte 8 is negative");

  /* one bad file in a glob: the message names that file */
  snprintf(p, sizeof p, "%s/bad/*.bin", g_dir);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_CORRUPT, "bad/long.bin", "longer than"); /* first in name order */

  /* fewer sequences than one global batch: 100 tokens hold 6 of 17 */
  snprintf(p, sizeof p, "%s/small.bin", g_dir);
  write_shard(p, g_ref, 100);
  c = files_cfg(p, 0, 1);
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, "small.bin",
                    "(1 file, 100 tokens) holds 6 sequences of T+1 = 17 tokens; one global batch "
                    "needs 8 sequences (129 tokens)");
  c.global_batch = 6; /* exactly enough */
  zeroc_data_t *d = open_ok(&c);
  zeroc_data_destroy(d);

  /* bad configuration */
  c = files_cfg(g_glob, 0, 1);
  c.vocab = 1;
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, NULL, "vocab 1; accepted 2..2147483647");
  c = files_cfg(g_glob, 0, 1);
  c.seq = 0;
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, NULL, "seq (T) 0; accepted >= 1");
  c = files_cfg(g_glob, 0, 1);
  c.global_batch = 0;
  expect_open_error(&c, ZEROC_ERR_INVALID_ARG, NULL, "global batch 0");
  zeroc_data_config_t raw;
  memset(&raw, 0, sizeof raw);
  expect_open_error(&raw, ZEROC_ERR_INVALID_ARG, NULL,
                    "not initialised with ZEROC_DATA_CONFIG_INIT");
}

/* A token >= vocab is found when read, named by file and byte offset, and
 * sequences that do not contain it still read. */
static void test_token_out_of_vocab(void) {
  int32_t tok[600];
  for (int i = 0; i < 600; i++) tok[i] = (int32_t)(g_ref[i] % 500);
  tok[300] = 777;
  char p[4200];
  snprintf(p, sizeof p, "%s/vocab.bin", g_dir);
  write_shard(p, tok, 600);
  zeroc_data_config_t c = files_cfg(p, 0, 1);
  c.vocab = 500;
  zeroc_data_t *d = open_ok(&c);
  int32_t seq[T + 1];
  ZT_OK(zeroc_data_read_sequence(d, 0, seq));
  CU_ASSERT(memcmp(seq, tok, sizeof seq) == 0);
  /* sequence 18 holds tokens 288..304 */
  CU_ASSERT_EQUAL(zeroc_data_read_sequence(d, 18, seq), ZEROC_ERR_INVALID_ARG);
  const char *e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(
      strstr(e, "vocab.bin") &&
          strstr(e, "token 777 at byte offset 1624 (token 300 of the file) is >= vocab 500"),
      "%s", e);
  /* the micro-batch that contains it fails the same way */
  zeroc_data_layout_t l = {1, 0, G, 1};
  int32_t in[G * T], tg[G * T];
  CU_ASSERT_EQUAL(zeroc_data_batch(d, &l, 2, 0, in, tg), ZEROC_ERR_INVALID_ARG); /* seqs 16..23 */
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "token 777"));
  ZT_OK(zeroc_data_batch(d, &l, 0, 0, in, tg));
  zeroc_data_destroy(d);
}

/* The sequence ids of a batch row, found by content: the row's inputs and
 * targets must be tokens [jT, jT+T) and [jT+1, jT+T] of the data. */
static int64_t identify(const int32_t *in, const int32_t *tg, uint64_t nseq) {
  for (uint64_t j = 0; j < nseq; j++)
    if (!memcmp(in, g_ref + j * T, T * sizeof *in) &&
        !memcmp(tg, g_ref + j * T + 1, T * sizeof *tg))
      return (int64_t)j;
  return -1;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Collects the sorted sequence ids that every rank and micro-step of a layout
 * reads at `step`; returns how many rows there were (G when right). */
static int layout_ids(const zeroc_data_t *d, int dp, int ga, uint64_t step, uint64_t nseq,
                      int64_t *ids) {
  int b = G / (dp * ga), n = 0;
  int32_t in[G * T], tg[G * T];
  for (int rank = 0; rank < dp; rank++)
    for (int u = 0; u < ga; u++) {
      zeroc_data_layout_t l = {dp, rank, b, ga};
      ZT_OK(zeroc_data_batch(d, &l, step, u, in, tg));
      for (int i = 0; i < b && n < G; i++) ids[n++] = identify(in + i * T, tg + i * T, nseq);
    }
  qsort(ids, (size_t)n, sizeof *ids, cmp_i64);
  return n;
}

static void test_batching_rule(void) {
  const uint64_t steps[] = {0, 1, 5, 18, 19, 20, 40, 57};
  for (int shuffle = 0; shuffle <= 1; shuffle++) {
    zeroc_data_config_t c = files_cfg(g_glob, shuffle, 1234);
    zeroc_data_t *d = open_ok(&c);
    zeroc_data_info_t info;
    zeroc_data_info(d, &info);
    for (size_t si = 0; si < sizeof steps / sizeof *steps; si++) {
      uint64_t k = steps[si];
      /* the reference: one rank, one micro-step, the whole global batch */
      int64_t ref[G], ids[G];
      CU_ASSERT_EQUAL(layout_ids(d, 1, 1, k, info.num_sequences, ref), G);
      for (int i = 0; i < G; i++) CU_ASSERT(ref[i] >= 0);
      if (!shuffle) {
        /* the data contract: step k takes sequences k*G .. k*G+G-1 (wrapping per epoch) */
        uint64_t base = (k % info.steps_per_epoch) * G;
        for (int i = 0; i < G; i++) CU_ASSERT_EQUAL(ref[i], (int64_t)(base + (uint64_t)i));
        if (k < info.steps_per_epoch)
          for (int i = 0; i < G; i++) CU_ASSERT_EQUAL(ref[i], (int64_t)(k * G + (uint64_t)i));
      }
      for (int i = 1; i < G; i++) CU_ASSERT(ref[i] != ref[i - 1]); /* no repeats */
      /* every layout with G = 8 reads exactly this set, each sequence once */
      const int dps[] = {1, 2, 4}, gas[] = {1, 2};
      for (int a = 0; a < 3; a++)
        for (int g = 0; g < 2; g++) {
          int n = layout_ids(d, dps[a], gas[g], k, info.num_sequences, ids);
          ZT_ASSERT_MSG(n == G && !memcmp(ids, ref, sizeof ref),
                        "shuffle %d step %llu dp %d grad-accum %d: the micro-batches do not "
                        "make up the global batch",
                        shuffle, (unsigned long long)k, dps[a], gas[g]);
        }
    }
    zeroc_data_destroy(d);
  }
}

/* With --shuffle each epoch is a permutation: no sequence twice in an epoch,
 * a different order each epoch, a pure function of the seed. */
static void test_shuffle_epochs(void) {
  zeroc_data_config_t c = files_cfg(g_glob, 1, 99);
  zeroc_data_t *d = open_ok(&c), *same = open_ok(&c);
  c.seed = 100;
  zeroc_data_t *other = open_ok(&c);
  zeroc_data_info_t info;
  zeroc_data_info(d, &info);
  uint64_t N = info.num_sequences, spe = info.steps_per_epoch, per_epoch = spe * G;
  char *seen = calloc(N, 1);
  uint64_t *e0 = malloc(per_epoch * sizeof *e0);
  int in_place = 0, dup = 0, differ_epoch = 0, differ_seed = 0, mismatch = 0;
  for (uint64_t epoch = 0; epoch < 3; epoch++) {
    memset(seen, 0, N);
    for (uint64_t s = 0; s < spe; s++)
      for (int slot = 0; slot < G; slot++) {
        uint64_t j, j2, j3, pos = s * G + (uint64_t)slot;
        ZT_OK(zeroc_data_sequence_index(d, epoch * spe + s, slot, &j));
        ZT_OK(zeroc_data_sequence_index(same, epoch * spe + s, slot, &j2));
        ZT_OK(zeroc_data_sequence_index(other, epoch * spe + s, slot, &j3));
        CU_ASSERT(j < N);
        if (j >= N) continue;
        dup += seen[j]++;
        mismatch += j != j2;
        differ_seed += j != j3;
        if (epoch == 0) {
          e0[pos] = j;
          in_place += j == pos;
        } else {
          differ_epoch += j != e0[pos];
        }
      }
  }
  CU_ASSERT_EQUAL(dup, 0);
  CU_ASSERT_EQUAL(mismatch, 0);
  /* a random permutation of 152 positions has about 1 fixed point */
  ZT_ASSERT_MSG(in_place < 10, "%d of %llu positions unshuffled", in_place,
                (unsigned long long)per_epoch);
  CU_ASSERT(differ_epoch > (int)per_epoch);
  CU_ASSERT(differ_seed > (int)per_epoch * 2);
  free(seen);
  free(e0);
  zeroc_data_destroy(d);
  zeroc_data_destroy(same);
  zeroc_data_destroy(other);
}

static void test_permutation(void) {
  const uint64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 100, 1000, 4097, 65537};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (uint64_t key = 0; key < 3; key++) {
      uint64_t n = ns[i];
      char *seen = calloc(n, 1);
      int bad = 0;
      for (uint64_t x = 0; x < n; x++) {
        uint64_t y = zeroc__permute(x, n, key);
        if (y >= n || seen[y]++) bad++;
      }
      ZT_ASSERT_MSG(bad == 0, "permute is not a bijection of [0, %llu) for key %llu",
                    (unsigned long long)n, (unsigned long long)key);
      free(seen);
    }
  /* huge domains: values stay in range, and distinct inputs map apart */
  uint64_t n = ((uint64_t)1 << 40) + 3, prev = UINT64_MAX;
  for (uint64_t x = n - 50; x < n; x++) {
    uint64_t y = zeroc__permute(x, n, 7);
    CU_ASSERT(y < n && y != prev);
    prev = y;
  }
}

/* Resuming at step k from nothing but k gives the batch that iterating from
 * step 0 reaches, and the recorded position checks out (or names the
 * difference). */
static void test_resume(void) {
  zeroc_data_config_t c = files_cfg(g_glob, 1, 7);
  zeroc_data_t *d = open_ok(&c);
  zeroc_data_layout_t l = {2, 1, 2, 2};
  int32_t in[2 * T], tg[2 * T], kept_in[2][2 * T], kept_tg[2][2 * T];
  const uint64_t K = 45; /* in epoch 2 (19 steps per epoch) */
  for (uint64_t k = 0; k <= K; k++)
    for (int u = 0; u < 2; u++) {
      ZT_OK(zeroc_data_batch(d, &l, k, u, in, tg));
      if (k == K) memcpy(kept_in[u], in, sizeof in), memcpy(kept_tg[u], tg, sizeof tg);
    }
  zeroc_data_position_t pos;
  zeroc_data_position(d, K, &pos);
  CU_ASSERT_EQUAL(pos.step, K);
  CU_ASSERT_EQUAL(pos.epoch, 2);
  CU_ASSERT_EQUAL(pos.step_in_epoch, K - 2 * 19);
  zeroc_data_destroy(d);

  d = open_ok(&c); /* a restarted run */
  ZT_OK(zeroc_data_check_position(d, &pos));
  for (int u = 0; u < 2; u++) {
    ZT_OK(zeroc_data_batch(d, &l, pos.step, u, in, tg));
    CU_ASSERT(!memcmp(in, kept_in[u], sizeof in) && !memcmp(tg, kept_tg[u], sizeof tg));
  }
  zeroc_data_destroy(d);

  zeroc_data_config_t c2 = c;
  c2.seed = 8;
  d = open_ok(&c2);
  CU_ASSERT_EQUAL(zeroc_data_check_position(d, &pos), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL), "seed 7 with shuffle on; this run has seed 8"));
  zeroc_data_destroy(d);
  c2 = c;
  c2.global_batch = 4;
  d = open_ok(&c2);
  CU_ASSERT_EQUAL(zeroc_data_check_position(d, &pos), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL), "global batch 8; this run has seq 16 and global batch 4"));
  zeroc_data_destroy(d);
  char p[4200];
  snprintf(p, sizeof p, "%s/tok_[ab].bin", g_dir);
  c2 = c;
  c2.source = p;
  d = open_ok(&c2);
  CU_ASSERT_EQUAL(zeroc_data_check_position(d, &pos), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "written with other data"));
  zeroc_data_destroy(d);
}

static void test_layout_errors(void) {
  zeroc_data_config_t c = files_cfg(g_glob, 0, 1);
  zeroc_data_t *d = open_ok(&c);
  int first;
  zeroc_data_layout_t l = {2, 0, 3, 1};
  CU_ASSERT_EQUAL(zeroc_data_first_slot(d, &l, 0, &first), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(
      zeroc_last_error(NULL),
      "dp 2 x micro_batch 3 x grad_accum 1 = 6 sequences, but the data set's global batch is 8"));
  l = (zeroc_data_layout_t){2, 2, 4, 1};
  CU_ASSERT_EQUAL(zeroc_data_first_slot(d, &l, 0, &first), ZEROC_ERR_INVALID_ARG);
  l = (zeroc_data_layout_t){2, 1, 2, 2};
  CU_ASSERT_EQUAL(zeroc_data_first_slot(d, &l, 2, &first), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "micro-step 2; accepted 0..1"));
  ZT_OK(zeroc_data_first_slot(d, &l, 1, &first));
  CU_ASSERT_EQUAL(first, (1 * 2 + 1) * 2);
  uint64_t j;
  CU_ASSERT_EQUAL(zeroc_data_sequence_index(d, 0, G, &j), ZEROC_ERR_INVALID_ARG);
  zeroc_data_destroy(d);
}

static const zt_test_t tests[] = {
    {"write_fixtures", test_write_fixtures},
    {"shard_format", test_shard_format},
    {"shard_format_u32", test_shard_format_u32},
    {"round_trip", test_round_trip},
    {"validation_errors", test_validation_errors},
    {"token_out_of_vocab", test_token_out_of_vocab},
    {"batching_rule", test_batching_rule},
    {"shuffle_epochs", test_shuffle_epochs},
    {"permutation", test_permutation},
    {"resume", test_resume},
    {"layout_errors", test_layout_errors},
    ZT_END,
};

int main(void) {
  g_dir = zt_tempdir("zeroc-io-data");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("io_data", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
