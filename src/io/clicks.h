/*
 * io/clicks.h - click-through data for DLRM: a synthetic generator whose labels
 * come from a known hidden model (clicks.c), and the Criteo TSV format
 * (criteo.c). Formats only: the trainer deals samples to ranks.
 *
 * Sample i of a source is a pure function of (source, i): every rank reads its
 * own samples, and a layout with the same global batch sees the same data.
 */
#ifndef ZEROC_IO_CLICKS_H
#define ZEROC_IO_CLICKS_H

#include <stdint.h>

#include "zeroc/result.h"

#define ZEROC__CRITEO_DENSE  13
#define ZEROC__CRITEO_TABLES 26

typedef struct zeroc__clicks zeroc__clicks_t;

/* The shape the model expects: tables and their rows, dense features, ids per bag. */
typedef struct zeroc__click_shape {
  int tables, dense, hot;
  const int64_t *rows; /* (tables) */
} zeroc__click_shape_t;

/* B samples, host memory. lengths (T,B) and ids table-major then sample, as
 * zeroc_embed_forward takes them; capacity T*B*hot ids. */
typedef struct zeroc__click_batch {
  float *dense;     /* (B, dense) */
  float *labels;    /* (B) 0 or 1 */
  float *probs;     /* (B) the true click probability (synthetic), else NaN */
  int32_t *lengths; /* (T, B) */
  int64_t *ids;
} zeroc__click_batch_t;

/* The synthetic source: dense x ~ N(0,1); per table `hot` ids from a Zipf(1.2)
 * law over its rows; logit = b + a.x/sqrt(dense) + sum over tables and ids of
 * a hidden per-row score ~ N(0, 0.8^2/T) (rows 0.. most popular); label ~
 * Bernoulli(sigmoid(logit)). Deterministic from `seed`. */
zeroc_result_t zeroc__clicks_synth(const zeroc__click_shape_t *s, uint64_t seed,
                                   zeroc__clicks_t **out);

/* The Criteo TSV file `path` read whole: per line a label (0 or 1), 13 integer
 * features (empty: 0; negative clamped to 0, then log(1 + x)) and 26 categorical
 * features (up to 8 hex digits; empty: a bucket of its own), tab-separated;
 * each categorical hashed into its table's rows. The shape must have 13 dense
 * features and 26 tables. A malformed line is ZEROC_ERR_INVALID_ARG naming the
 * file, line, field and what is accepted; an empty file too. */
zeroc_result_t zeroc__clicks_criteo(const char *path, const zeroc__click_shape_t *s,
                                    zeroc__clicks_t **out);

void zeroc__clicks_destroy(zeroc__clicks_t *c);

/* Samples in the source; 0 for the synthetic one (unbounded). */
uint64_t zeroc__clicks_count(const zeroc__clicks_t *c);

/* Samples first .. first+B-1 into `b` (a file source wraps around its samples). */
zeroc_result_t zeroc__clicks_read(const zeroc__clicks_t *c, uint64_t first, int B,
                                  zeroc__click_batch_t *b);

/* ---- metrics of predictions ---------------------------------------------------- */

/* The area under the ROC curve of scores p (n) for labels y (n) in {0, 1}, exactly:
 * sorted by score, ties counted half (the Mann-Whitney statistic). NaN when one
 * class is missing. */
double zeroc__auc(const float *p, const float *y, uint64_t n);

/* Mean binary log-loss of probabilities p (n) against labels y (n), p clamped to
 * [1e-7, 1 - 1e-7]. */
double zeroc__logloss(const float *p, const float *y, uint64_t n);

/* Mean binary entropy of probabilities p (n): the expected log-loss of the true model. */
double zeroc__mean_entropy(const float *p, uint64_t n);

#endif
