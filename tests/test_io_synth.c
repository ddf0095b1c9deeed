/*
 * tests/test_io_synth.c - the synthetic Markov corpus: rows and pi are
 * distributions with pi P = pi; the entropy rate matches a dense
 * computation; long samples agree with the source (empirical conditional
 * entropy, transition and start frequencies, per-position loss under the true
 * model); sequences are a pure function of (seed, index); shards written from
 * the corpus follow it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/synth.h"
#include "testutil.h"
#include "zeroc/data.h"

static char *g_dir;

static zeroc__markov_t *markov(int V, int K, double noise, uint64_t seed) {
  zeroc__markov_t *m = NULL;
  ZT_OK(zeroc__markov_create(V, K, noise, seed, &m));
  CU_ASSERT_FATAL(m != NULL);
  return m;
}

static zeroc_data_config_t synth_cfg(int V, int T, int G, uint64_t seed) {
  zeroc_data_config_t c = ZEROC_DATA_CONFIG_INIT;
  c.source = "synthetic";
  c.vocab = V;
  c.seq = T;
  c.global_batch = G;
  c.seed = seed;
  return c;
}

/* Dense checks on a small source: every row of P sums to 1, pi is a
 * distribution with pi P = pi, and H and H(pi) match their definitions. */
static void test_structure(void) {
  const int V = 64;
  zeroc__markov_t *m = markov(V, 8, 0.05, 3);
  double max_row = 0, max_fix = 0, h = 0, hu = 0, pisum = 0, pimin = 1;
  int nmin = 99, nmax = 0;
  for (int i = 0; i < V; i++) {
    double row = 0, e = 0;
    for (int j = 0; j < V; j++) {
      double p = zeroc__markov_prob(m, i, j);
      row += p;
      e -= p * log(p);
    }
    max_row = fmax(max_row, fabs(row - 1));
    h += m->pi[i] * e;
    hu -= m->pi[i] * log(m->pi[i]);
    pisum += m->pi[i];
    pimin = fmin(pimin, m->pi[i]);
    nmin = m->nsucc[i] < nmin ? m->nsucc[i] : nmin;
    nmax = m->nsucc[i] > nmax ? m->nsucc[i] : nmax;
  }
  for (int j = 0; j < V; j++) {
    double v = 0;
    for (int i = 0; i < V; i++) v += m->pi[i] * zeroc__markov_prob(m, i, j);
    max_fix = fmax(max_fix, fabs(v - m->pi[j]));
  }
  ZT_ASSERT_MSG(max_row < 1e-12, "a row of P sums to 1 +- %g", max_row);
  ZT_ASSERT_MSG(fabs(pisum - 1) < 1e-12, "pi sums to %.17g", pisum);
  ZT_ASSERT_MSG(max_fix < 1e-13, "|pi P - pi| = %g", max_fix);
  CU_ASSERT(pimin > 0);
  ZT_ASSERT_MSG(fabs(h - m->entropy_rate) < 1e-12, "entropy rate %.15f, dense %.15f",
                m->entropy_rate, h);
  CU_ASSERT(fabs(hu - m->unigram_entropy) < 1e-12);
  CU_ASSERT(m->entropy_rate < m->unigram_entropy && m->unigram_entropy <= log(V) + 1e-12);
  CU_ASSERT(nmin >= 4 && nmax <= 8 && nmin < nmax); /* 4..8 likely successors */
  printf("\n    V %d: H = %.6f nats/token, H(pi) = %.6f, ln V = %.6f, %d power iterations\n", V,
         m->entropy_rate, m->unigram_entropy, log(V), m->iterations);
  zeroc__markov_destroy(m);
}

/* A long sample: the plug-in conditional entropy (with the Miller-Madow bias
 * correction) agrees with H, and transition and start counts agree with P
 * and pi cell by cell. */
static void test_empirical_entropy(void) {
  const int V = 32, T = 255, NSEQ = 4096;
  zeroc__markov_t *m = markov(V, 8, 0.05, 17);
  double *cnt = calloc((size_t)V * V, sizeof *cnt), *start = calloc((size_t)V, sizeof *start);
  int32_t *x = malloc(sizeof(int32_t) * (T + 1));
  for (int s = 0; s < NSEQ; s++) {
    zeroc__markov_sequence(m, (uint64_t)s, x, T + 1);
    start[x[0]]++;
    for (int t = 0; t < T; t++) cnt[x[t] * V + x[t + 1]]++;
  }
  double n = (double)NSEQ * T, hplug = 0, worst = 0;
  int nonzero = 0;
  for (int i = 0; i < V; i++) {
    double ci = 0;
    for (int j = 0; j < V; j++) ci += cnt[i * V + j];
    for (int j = 0; j < V; j++) {
      double c = cnt[i * V + j];
      if (c > 0) hplug -= c / n * log(c / ci), nonzero++;
      double expect = ci * zeroc__markov_prob(m, i, j);
      if (expect >= 10) worst = fmax(worst, fabs(c - expect) / sqrt(expect));
    }
  }
  double hmm = hplug + (nonzero - V) / (2 * n);
  /* the statistical error of the estimate is about 1e-3 here; 0.01 nats is
   * a wide margin that still catches a sampler off by a percent */
  ZT_ASSERT_MSG(fabs(hmm - m->entropy_rate) < 0.01,
                "empirical conditional entropy %.5f (plug-in %.5f) vs entropy rate %.5f", hmm,
                hplug, m->entropy_rate);
  /* each cell within 6 standard deviations (about 1e-6 chance per run) */
  ZT_ASSERT_MSG(worst < 6, "a transition count is %.2f sigma from its expectation", worst);
  double worst_start = 0;
  for (int i = 0; i < V; i++) {
    double expect = NSEQ * m->pi[i];
    if (expect >= 10) worst_start = fmax(worst_start, fabs(start[i] - expect) / sqrt(expect));
  }
  ZT_ASSERT_MSG(worst_start < 6, "a start-state count is %.2f sigma from N pi", worst_start);
  printf("\n    %.0f transitions: conditional entropy %.5f (Miller-Madow), rate %.5f\n", n, hmm,
         m->entropy_rate);
  free(cnt);
  free(start);
  free(x);
  zeroc__markov_destroy(m);
}

/* At a GPT-sized vocabulary the plug-in estimate needs too many samples, so
 * check the mean loss of the true model instead: it is H at every target
 * position, the first included (x_0 is drawn from pi). */
static void test_loss_floor_per_position(void) {
  const int V = 2048, T = 64, NSEQ = 4000;
  zeroc_data_config_t c = synth_cfg(V, T, 8, 5);
  zeroc_data_t *d = NULL;
  ZT_OK(zeroc_data_create(&c, &d));
  CU_ASSERT_FATAL(d != NULL);
  zeroc_data_info_t info;
  zeroc_data_info(d, &info);
  zeroc__markov_t *m = markov(V, 8, 0.05, 5); /* the defaults the data set uses */
  CU_ASSERT_EQUAL(info.kind, ZEROC_DATA_SYNTHETIC);
  CU_ASSERT_EQUAL(info.loss_floor, m->entropy_rate);
  CU_ASSERT_EQUAL(info.unigram_entropy, m->unigram_entropy);
  CU_ASSERT(info.loss_floor > 0 && info.loss_floor < info.unigram_entropy &&
            info.unigram_entropy < log(V));
  double *sum = calloc(T, sizeof *sum), *sq = calloc(T, sizeof *sq);
  int32_t *x = malloc(sizeof(int32_t) * (T + 1));
  for (int s = 0; s < NSEQ; s++) {
    ZT_OK(zeroc_data_read_sequence(d, (uint64_t)s * 7919, x));
    for (int t = 0; t < T; t++) {
      double l = -log(zeroc__markov_prob(m, x[t], x[t + 1]));
      sum[t] += l;
      sq[t] += l * l;
    }
  }
  double all = 0, all_sq = 0, worst = 0;
  for (int t = 0; t < T; t++) {
    all += sum[t];
    all_sq += sq[t];
    double mean = sum[t] / NSEQ, sd = sqrt((sq[t] / NSEQ - mean * mean) / NSEQ);
    worst = fmax(worst, fabs(mean - info.loss_floor) / sd);
  }
  double n = (double)NSEQ * T, mean = all / n, sd = sqrt((all_sq / n - mean * mean) / n);
  ZT_ASSERT_MSG(fabs(mean - info.loss_floor) < 5 * sd,
                "mean loss of the true model %.5f, floor %.5f (sd %.5f)", mean, info.loss_floor,
                sd);
  /* 64 positions, each within 4.5 sd: a failure by chance is ~5e-4 */
  ZT_ASSERT_MSG(worst < 4.5, "some position's mean loss is %.2f sd from the floor", worst);
  printf("\n    V %d: floor %.5f, mean loss of the true model %.5f +- %.5f over %.0f targets\n", V,
         info.loss_floor, mean, sd, n);
  free(sum);
  free(sq);
  free(x);
  zeroc__markov_destroy(m);
  zeroc_data_destroy(d);
}

/* Sequences depend on (seed, index) only: not on the handle, the order of
 * access, or which rank asks. */
static void test_determinism(void) {
  enum { V = 256, T = 32, G = 8 };
  zeroc_data_config_t c = synth_cfg(V, T, G, 42);
  zeroc_data_t *a = NULL, *b = NULL, *other = NULL;
  ZT_OK(zeroc_data_create(&c, &a));
  ZT_OK(zeroc_data_create(&c, &b));
  c.seed = 43;
  ZT_OK(zeroc_data_create(&c, &other));
  CU_ASSERT_FATAL(a && b && other);
  int32_t x[T + 1], y[T + 1], z[T + 1];
  const uint64_t js[] = {0, 1, 2, 1000000007ULL, 1ULL << 50, 3};
  ZT_OK(zeroc_data_read_sequence(b, js[3], y)); /* b reads out of order first */
  int same = 0, differ = 0, inrange = 1;
  for (size_t i = 0; i < sizeof js / sizeof *js; i++) {
    ZT_OK(zeroc_data_read_sequence(a, js[i], x));
    ZT_OK(zeroc_data_read_sequence(b, js[i], y));
    ZT_OK(zeroc_data_read_sequence(other, js[i], z));
    same += !memcmp(x, y, sizeof x);
    differ += memcmp(x, z, sizeof x) != 0;
    for (int t = 0; t <= T; t++) inrange &= x[t] >= 0 && x[t] < V;
  }
  CU_ASSERT_EQUAL(same, 6);
  CU_ASSERT_EQUAL(differ, 6);
  CU_ASSERT(inrange);
  ZT_OK(zeroc_data_read_sequence(a, 1, y));
  CU_ASSERT(memcmp(x, y, sizeof x) != 0); /* different indices, different sequences */

  /* rank 3 of dp 4 makes its micro-batch alone, equal to rows 6..7 of the
   * one-rank global batch made by another handle */
  const uint64_t step = 1234567;
  zeroc_data_layout_t one = {1, 0, G, 1}, r3 = {4, 3, 2, 1};
  int32_t in[G * T], tg[G * T], in3[2 * T], tg3[2 * T];
  ZT_OK(zeroc_data_batch(b, &r3, step, 0, in3, tg3));
  ZT_OK(zeroc_data_batch(a, &one, step, 0, in, tg));
  CU_ASSERT(!memcmp(in3, in + 6 * T, sizeof in3) && !memcmp(tg3, tg + 6 * T, sizeof tg3));
  /* synthetic batches are sequences step*G .. step*G+G-1, shuffle or not */
  ZT_OK(zeroc_data_read_sequence(a, step * G + 7, x));
  CU_ASSERT(!memcmp(x, in + 7 * T, T * sizeof *x) && !memcmp(x + 1, tg + 7 * T, T * sizeof *x));
  zeroc_data_position_t pos;
  zeroc_data_position(a, step, &pos);
  CU_ASSERT(pos.epoch == 0 && pos.step_in_epoch == step);
  ZT_OK(zeroc_data_check_position(b, &pos));
  CU_ASSERT_EQUAL(zeroc_data_check_position(other, &pos), ZEROC_ERR_INVALID_ARG);
  zeroc_data_destroy(a);
  zeroc_data_destroy(b);
  zeroc_data_destroy(other);
}

/* The corpus written as llm.c shards: one continuous chain, split into
 * files, that reads back through the file path and follows the source. */
static void test_write_shards(void) {
  enum { V = 256 };
  char prefix[4200], glob[4300];
  snprintf(prefix, sizeof prefix, "%s/synth", g_dir);
  zeroc_data_config_t c = synth_cfg(V, 1, 1, 9);
  int files = 0;
  ZT_OK(zeroc_data_write_synthetic(&c, prefix, 25000, 10000, &files));
  CU_ASSERT_EQUAL(files, 3);
  snprintf(glob, sizeof glob, "%s_*.bin", prefix);
  zeroc_data_config_t fc = synth_cfg(V, 1, 1, 9);
  fc.source = glob;
  zeroc_data_t *d = NULL;
  ZT_OK(zeroc_data_create(&fc, &d));
  CU_ASSERT_FATAL(d != NULL);
  zeroc_data_info_t info;
  zeroc_data_info(d, &info);
  CU_ASSERT(info.num_files == 3 && info.num_tokens == 25000 && info.num_sequences == 24999);
  zeroc__markov_t *m = markov(V, 8, 0.05, 9);
  double sum = 0, sq = 0;
  int32_t pair[2];
  for (uint64_t j = 0; j < info.num_sequences; j++) { /* T = 1: sequence j is tokens j, j+1 */
    ZT_OK(zeroc_data_read_sequence(d, j, pair));
    double l = -log(zeroc__markov_prob(m, pair[0], pair[1]));
    sum += l;
    sq += l * l;
  }
  double n = (double)info.num_sequences, mean = sum / n, sd = sqrt((sq / n - mean * mean) / n);
  ZT_ASSERT_MSG(fabs(mean - m->entropy_rate) < 5 * sd,
                "the written stream has mean loss %.4f under its source, rate %.4f (sd %.4f)", mean,
                m->entropy_rate, sd);
  zeroc__markov_destroy(m);
  zeroc_data_destroy(d);
}

static void test_errors(void) {
  zeroc__markov_t *m;
  CU_ASSERT_EQUAL(zeroc__markov_create(1, 8, 0.05, 1, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "vocab 1; accepted 2..262144"));
  CU_ASSERT_EQUAL(zeroc__markov_create(16, 100, 0.05, 1, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "successors 100; accepted 1..64"));
  zeroc_data_config_t c = synth_cfg(16, 4, 2, 1);
  c.synth_noise = 1.5;
  zeroc_data_t *d = (zeroc_data_t *)1;
  CU_ASSERT_EQUAL(zeroc_data_create(&c, &d), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL), "noise 1.5; accepted a probability in (0, 1)"));
  CU_ASSERT_PTR_NULL(d);
  /* V = 2 with more successors than tokens still forms a valid chain */
  m = markov(2, 8, 0.5, 1);
  CU_ASSERT(m->K == 2 && fabs(m->pi[0] + m->pi[1] - 1) < 1e-15);
  zeroc__markov_destroy(m);
}

static const zt_test_t tests[] = {
    {"structure", test_structure},
    {"empirical_entropy", test_empirical_entropy},
    {"loss_floor_per_position", test_loss_floor_per_position},
    {"determinism", test_determinism},
    {"write_shards", test_write_shards},
    {"errors", test_errors},
    ZT_END,
};

int main(void) {
  g_dir = zt_tempdir("zeroc-io-synth");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("io_synth", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
