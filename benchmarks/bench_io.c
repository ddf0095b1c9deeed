/*
 * benchmarks/bench_io.c - speeds of the io module: CRC-32C (instruction and
 * table paths), reading micro-batches from llm.c shards (sequential and
 * shuffled), generating the synthetic corpus, writing and parsing JSON, and
 * safetensors write and read. Also prints the synthetic corpus's loss floors.
 *
 * Usage: bench_io [DIR]   (DIR: where temporary files go; default TMPDIR or /tmp)
 * Each figure is the median of 5 runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "io/synth.h"
#include "zeroc/data.h"

#define REPS 5

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *t) {
  qsort(t, REPS, sizeof *t, cmp_d);
  return t[REPS / 2];
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    zeroc_result_t r_ = (call);                                                                    \
    if (r_ != ZEROC_OK) {                                                                          \
      fprintf(stderr, "%s: %s: %s\n", #call, zeroc_result_name(r_), zeroc_last_error(NULL));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static void bench_crc(void) {
  size_t n = 64u << 20;
  unsigned char *buf = malloc(n);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
  double t[REPS];
  volatile uint32_t sink = 0;
  for (int r = 0; r < REPS; r++) {
    double t0 = zeroc__now_s();
    sink ^= zeroc__crc32c(0, buf, n);
    t[r] = zeroc__now_s() - t0;
  }
  printf("crc32c %-9s %8.2f GB/s\n", zeroc__crc32c_hw() ? "(sse4.2)" : "(table)",
         n / median(t) / 1e9);
  for (int r = 0; r < REPS; r++) {
    double t0 = zeroc__now_s();
    sink ^= zeroc__crc32c_sw(0, buf, n);
    t[r] = zeroc__now_s() - t0;
  }
  printf("crc32c (table)    %8.2f GB/s\n", n / median(t) / 1e9);
  free(buf);
}

static void bench_data(const char *dir) {
  /* GPT-2-like shapes: V 50257, T 1024, micro-batch 8, 16 M tokens in 4 shards */
  const int V = 50257, T = 1024, B = 8;
  const uint64_t tokens = 16u << 20;
  char prefix[4200], glob[4300];
  snprintf(prefix, sizeof prefix, "%s/bench_tok", dir);
  snprintf(glob, sizeof glob, "%s_*.bin", prefix);
  zeroc_data_config_t c = ZEROC_DATA_CONFIG_INIT;
  c.vocab = V;
  c.seq = T;
  c.global_batch = B;
  c.seed = 1;
  double t0 = zeroc__now_s();
  int files;
  CHECK(zeroc_data_write_synthetic(&c, prefix, tokens, tokens / 4, &files));
  double tw = zeroc__now_s() - t0;
  printf("write synthetic shards   %8.1f M tokens/s (%d files, %llu M tokens, incl. fsync)\n",
         tokens / tw / 1e6, files, (unsigned long long)(tokens >> 20));
  int32_t *in = malloc(sizeof(int32_t) * B * T), *tg = malloc(sizeof(int32_t) * B * T);
  zeroc_data_layout_t l = {1, 0, B, 1};
  for (int shuffle = 0; shuffle <= 1; shuffle++) {
    c.source = glob;
    c.shuffle = shuffle;
    zeroc_data_t *d;
    CHECK(zeroc_data_create(&c, &d));
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
      double s0 = zeroc__now_s();
      for (uint64_t k = 0; k < 200; k++) CHECK(zeroc_data_batch(d, &l, k + 200 * r, 0, in, tg));
      t[r] = zeroc__now_s() - s0;
    }
    printf("read shards (%s) %8.1f M tokens/s (micro-batch %d x %d, page cache)\n",
           shuffle ? "shuffled" : "in order", 200.0 * B * T / median(t) / 1e6, B, T);
    zeroc_data_destroy(d);
  }
  c.source = "synthetic";
  zeroc_data_t *d;
  t0 = zeroc__now_s();
  CHECK(zeroc_data_create(&c, &d));
  double topen = zeroc__now_s() - t0;
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double s0 = zeroc__now_s();
    for (uint64_t k = 0; k < 50; k++) CHECK(zeroc_data_batch(d, &l, k, 0, in, tg));
    t[r] = zeroc__now_s() - s0;
  }
  printf("synthetic batches        %8.1f M tokens/s (V %d; building the source took %.3f s)\n",
         50.0 * B * T / median(t) / 1e6, V, topen);
  zeroc_data_destroy(d);
  for (int f = 0; f < files; f++) {
    char p[4400];
    snprintf(p, sizeof p, "%s_%06d.bin", prefix, f);
    unlink(p);
  }
  free(in);
  free(tg);
}

static void bench_floors(void) {
  const int vs[] = {256, 512, 50257};
  for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) {
    zeroc__markov_t *m;
    CHECK(zeroc__markov_create(vs[i], 8, 0.05, 1, &m));
    printf("synthetic V %5d: floor H %.4f, H(pi) %.4f, ln V %.4f nats (%d power iterations)\n",
           vs[i], m->entropy_rate, m->unigram_entropy, log(vs[i]), m->iterations);
    zeroc__markov_destroy(m);
  }
}

static void bench_json(void) {
  /* a --metrics-like line, written and parsed many times */
  double tw[REPS], tp[REPS];
  size_t bytes = 0;
  for (int r = 0; r < REPS; r++) {
    zeroc__jw_t w;
    zeroc__jw_init(&w, 0);
    double t0 = zeroc__now_s();
    zeroc__jw_array_begin(&w);
    for (int i = 0; i < 20000; i++) {
      zeroc__jw_object_begin(&w);
      zeroc__jw_key(&w, "step");
      zeroc__jw_int(&w, i);
      zeroc__jw_key(&w, "loss");
      zeroc__jw_float(&w, 5.5f / (1 + i * 1e-3f));
      zeroc__jw_key(&w, "lr");
      zeroc__jw_double(&w, 3e-4 * cos(i * 1e-4));
      zeroc__jw_key(&w, "name");
      zeroc__jw_string(&w, "h.11.attn.c_proj.weight");
      zeroc__jw_object_end(&w);
    }
    zeroc__jw_array_end(&w);
    const char *text;
    CHECK(zeroc__jw_finish(&w, &text, &bytes));
    tw[r] = zeroc__now_s() - t0;
    zeroc__json_doc_t *doc;
    t0 = zeroc__now_s();
    CHECK(zeroc__json_parse(text, bytes, "bench", &doc));
    tp[r] = zeroc__now_s() - t0;
    zeroc__json_free(doc);
    zeroc__jw_free(&w);
  }
  printf("json write               %8.1f MB/s\n", bytes / median(tw) / 1e6);
  printf("json parse               %8.1f MB/s\n", bytes / median(tp) / 1e6);
}

static void bench_safetensors(const char *dir) {
  /* 48 tensors of 768 x 768 fp32: 113 MB */
  char path[4200];
  snprintf(path, sizeof path, "%s/bench.safetensors", dir);
  const int NT = 48, C = 768;
  float *x = malloc(sizeof(float) * C * C);
  for (int i = 0; i < C * C; i++) x[i] = (float)sin(i);
  double tw[REPS], tr[REPS];
  size_t bytes = (size_t)NT * C * C * 4;
  for (int r = 0; r < REPS; r++) {
    double t0 = zeroc__now_s();
    zeroc__st_writer_t *w;
    CHECK(zeroc__st_writer_create(path, &w));
    uint64_t shape[2] = {C, C};
    for (int t = 0; t < NT; t++) {
      char name[64];
      snprintf(name, sizeof name, "h.%d.mlp.c_fc.weight", t);
      CHECK(zeroc__st_writer_add(w, name, ZEROC_ST_F32, 2, shape));
    }
    for (int t = 0; t < NT; t++) CHECK(zeroc__st_writer_write_f32(w, x, (size_t)C * C));
    CHECK(zeroc__st_writer_finish(w));
    zeroc__st_writer_destroy(w);
    tw[r] = zeroc__now_s() - t0;
    t0 = zeroc__now_s();
    zeroc__st_t *st;
    CHECK(zeroc__st_open(path, &st));
    for (size_t t = 0; t < zeroc__st_count(st); t++)
      CHECK(zeroc__st_read_f32(zeroc__st_tensor(st, t), x, (size_t)C * C));
    zeroc__st_close(st);
    tr[r] = zeroc__now_s() - t0;
  }
  printf("safetensors write        %8.1f MB/s (%zu MB, incl. fsync)\n", bytes / median(tw) / 1e6,
         bytes >> 20);
  printf("safetensors read f32     %8.1f MB/s (mmap, page cache)\n", bytes / median(tr) / 1e6);
  unlink(path);
  free(x);
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR");
  const char *dir = argc > 1 ? argv[1] : (tmp && *tmp ? tmp : "/tmp");
  bench_floors();
  bench_crc();
  bench_json();
  bench_data(dir);
  bench_safetensors(dir);
  return 0;
}
