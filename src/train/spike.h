/*
 * train/spike.h - loss and gradient-norm spike detection for the trainer:
 * the z-score of each new value against the mean and standard deviation of a
 * trailing window of earlier values. Only upward excursions are spikes (a loss
 * that falls fast is training working).
 */
#ifndef ZEROC_TRAIN_SPIKE_H
#define ZEROC_TRAIN_SPIKE_H

#include "zeroc/train.h"

typedef struct zeroc__spike {
  int window;       /* trailing values compared against (2..ZEROC_SPIKE_MAX_WINDOW) */
  int min_count;    /* values needed before a z-score is given */
  double threshold; /* z above this is a spike */
  int n, head;      /* values held, next slot */
  double v[ZEROC_SPIKE_MAX_WINDOW];
} zeroc__spike_t;

/* window clamped to 2..ZEROC_SPIKE_MAX_WINDOW; a z-score is given once
 * min(window, 8) values are held. */
void zeroc__spike_init(zeroc__spike_t *s, int window, double threshold);

/*
 * The z-score of `x` against the window, then `x` joins the window. Returns
 * 1 when x is a spike (z > threshold). *z receives the score, or NaN while
 * the window holds too few values. A non-finite x is neither scored nor kept.
 * The spread is floored at 1e-3 of the mean's magnitude (and 1e-12), so a
 * flat series does not turn rounding noise into a spike.
 */
int zeroc__spike_push(zeroc__spike_t *s, double x, double *z);

#endif
