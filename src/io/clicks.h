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

#include "io/clicks_types.h"
#include "io/criteo.h" /* zeroc__clicks_criteo */
#include "zeroc/result.h"

/* The synthetic source: dense x ~ N(0,1); per table `hot` ids from a Zipf(1.2)
 * law over its rows; logit = b + a.x/sqrt(dense) + sum over tables and ids of
 * a hidden per-row score ~ N(0, 0.8^2/T) (rows 0.. most popular); label ~
 * Bernoulli(sigmoid(logit)). Deterministic from `seed`. */
zeroc_result_t zeroc__clicks_synth(const zeroc__click_shape_t *s, uint64_t seed,
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
