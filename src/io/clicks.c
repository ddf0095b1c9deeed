/*
 * io/clicks.c - the synthetic click source with a known hidden model, the
 * source object shared with the Criteo reader, and the AUC / log-loss
 * arithmetic the trainer's evaluation prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/clicks.h"
#include "io/clicks_internal.h"

#define ZIPF_S    1.2
#define TABLE_STD 0.8 /* std of the tables' summed contribution to the logit */
#define DENSE_STD 1.0
#define BIAS      (-0.5)

/* counter-based draws: the same (seed, stream, index) gives the same value anywhere */
static double uni(uint64_t seed, uint64_t stream, uint64_t i) {
  uint64_t h = zeroc__hash2(zeroc__hash2(seed, stream), i);
  return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); /* (0, 1) */
}

static double gauss(uint64_t seed, uint64_t stream, uint64_t i) {
  double u1 = uni(seed, stream, 2 * i), u2 = uni(seed, stream, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* rank (0 = most popular) of a continuous Zipf(s) law over n rows at quantile u */
static int64_t zipf(double u, int64_t n) {
  double a = 1.0 - ZIPF_S, top = pow((double)n + 1.0, a);
  int64_t r = (int64_t)floor(pow((top - 1.0) * u + 1.0, 1.0 / a)) - 1;
  return r < 0 ? 0 : r >= n ? n - 1 : r;
}

enum { S_DENSE = 1, S_IDS = 2, S_LABEL = 3, S_WEIGHT = 4, S_ROW = 100 };

static zeroc_result_t shape_copy(zeroc__clicks_t *c, const zeroc__click_shape_t *s) {
  if (s->tables < 1 || s->tables > 64 || s->dense < 1 || s->hot < 1 || !s->rows)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "click data shape: tables %d, dense %d, hot %d",
                      s->tables, s->dense, s->hot);
  c->T = s->tables, c->ndense = s->dense, c->hot = s->hot;
  memcpy(c->rows, s->rows, sizeof(int64_t) * (size_t)s->tables);
  return ZEROC_OK;
}

zeroc_result_t zeroc__clicks_synth(const zeroc__click_shape_t *s, uint64_t seed,
                                   zeroc__clicks_t **out) {
  zeroc__clicks_t *c = calloc(1, sizeof *c);
  if (!c) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "click source");
  zeroc_result_t r = shape_copy(c, s);
  if (r) {
    free(c);
    return r;
  }
  c->seed = seed;
  *out = c;
  return ZEROC_OK;
}

void zeroc__clicks_destroy(zeroc__clicks_t *c) { zeroc__clicks_free(c); }

uint64_t zeroc__clicks_count(const zeroc__clicks_t *c) { return c->n; }

/* sample i of the synthetic source, row b of the batch */
static void synth_sample(const zeroc__clicks_t *c, uint64_t i, int b, int B,
                         zeroc__click_batch_t *o) {
  double logit = BIAS, wscale = DENSE_STD / sqrt((double)c->ndense);
  for (int f = 0; f < c->ndense; f++) {
    double x = gauss(c->seed, S_DENSE, i * (uint64_t)c->ndense + (uint64_t)f);
    o->dense[(size_t)b * c->ndense + f] = (float)x;
    logit += wscale * gauss(c->seed, S_WEIGHT, (uint64_t)f) * x;
  }
  double tstd = TABLE_STD / sqrt((double)c->T * c->hot);
  for (int t = 0; t < c->T; t++) {
    o->lengths[(size_t)t * B + b] = c->hot;
    int64_t *ids = o->ids + ((size_t)t * B + (size_t)b) * c->hot;
    for (int h = 0; h < c->hot; h++) {
      uint64_t k = (i * (uint64_t)c->T + (uint64_t)t) * (uint64_t)c->hot + (uint64_t)h;
      ids[h] = zipf(uni(c->seed, S_IDS, k), c->rows[t]);
      logit += tstd * gauss(c->seed, S_ROW + (uint64_t)t, (uint64_t)ids[h]);
    }
  }
  double p = 1.0 / (1.0 + exp(-logit));
  o->probs[b] = (float)p;
  o->labels[b] = uni(c->seed, S_LABEL, i) < p ? 1.0f : 0.0f;
}

zeroc_result_t zeroc__clicks_read(const zeroc__clicks_t *c, uint64_t first, int B,
                                  zeroc__click_batch_t *b) {
  if (c->n) return zeroc__criteo_read(c, first, B, b);
  for (int j = 0; j < B; j++) synth_sample(c, first + (uint64_t)j, j, B, b);
  return ZEROC_OK;
}

/* ---- metrics ----------------------------------------------------------------------- */

typedef struct {
  float p, y;
} scored_t;

static int by_score(const void *a, const void *b) {
  float x = ((const scored_t *)a)->p, y = ((const scored_t *)b)->p;
  return x < y ? -1 : x > y;
}

double zeroc__auc(const float *p, const float *y, uint64_t n) {
  scored_t *v = malloc(sizeof *v * (n ? n : 1));
  if (!v) return NAN;
  for (uint64_t i = 0; i < n; i++) v[i] = (scored_t){p[i], y[i]};
  qsort(v, n, sizeof *v, by_score);
  /* sum of the positives' ranks (ties get the mean rank of their run) */
  double pos = 0, rank_sum = 0;
  for (uint64_t i = 0; i < n;) {
    uint64_t j = i;
    while (j < n && v[j].p == v[i].p) j++;
    double mean_rank = 0.5 * (double)(i + 1 + j), npos = 0;
    for (uint64_t k = i; k < j; k++) npos += v[k].y > 0.5f;
    rank_sum += npos * mean_rank;
    pos += npos;
    i = j;
  }
  free(v);
  double neg = (double)n - pos;
  if (pos == 0 || neg == 0) return NAN;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

double zeroc__logloss(const float *p, const float *y, uint64_t n) {
  double s = 0;
  for (uint64_t i = 0; i < n; i++) {
    double q = p[i] < 1e-7f ? 1e-7 : p[i] > 1 - 1e-7f ? 1 - 1e-7 : p[i];
    s -= y[i] > 0.5f ? log(q) : log1p(-q);
  }
  return n ? s / (double)n : NAN;
}

double zeroc__mean_entropy(const float *p, uint64_t n) {
  double s = 0;
  for (uint64_t i = 0; i < n; i++) {
    double q = p[i];
    if (q > 0 && q < 1) s -= q * log(q) + (1 - q) * log1p(-q);
  }
  return n ? s / (double)n : NAN;
}
