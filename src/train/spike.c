/*
 * train/spike.c - trailing-window z-scores for the loss and gradient-norm spike
 * report of the trainer (see spike.h).
 */
#include "train/spike.h"

#include <math.h>

void zeroc__spike_init(zeroc__spike_t *s, int window, double threshold) {
  if (window < 2) window = 2;
  if (window > ZEROC_SPIKE_MAX_WINDOW) window = ZEROC_SPIKE_MAX_WINDOW;
  s->window = window;
  s->min_count = window < 8 ? window : 8;
  s->threshold = threshold;
  s->n = 0;
  s->head = 0;
}

int zeroc__spike_push(zeroc__spike_t *s, double x, double *z) {
  *z = NAN;
  if (!isfinite(x)) return 0;
  int spike = 0;
  if (s->n >= s->min_count) {
    /* two passes over at most `window` values: exact enough, and no running
     * sums to drift over weeks of steps */
    double mean = 0, var = 0;
    for (int i = 0; i < s->n; i++) mean += s->v[i];
    mean /= s->n;
    for (int i = 0; i < s->n; i++) var += (s->v[i] - mean) * (s->v[i] - mean);
    double sd = sqrt(var / (s->n - 1));
    double floor_sd = 1e-3 * fabs(mean);
    if (floor_sd < 1e-12) floor_sd = 1e-12;
    if (sd < floor_sd) sd = floor_sd;
    *z = (x - mean) / sd;
    spike = *z > s->threshold;
  }
  s->v[s->head] = x;
  s->head = (s->head + 1) % s->window;
  if (s->n < s->window) s->n++;
  return spike;
}
