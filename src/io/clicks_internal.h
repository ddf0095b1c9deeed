/*
 * io/clicks_internal.h - the click source's insides, shared by clicks.c and criteo.c;
 * freeing them is here too, so that the Criteo reader below clicks.c can drop a
 * source it could not finish.
 */
#ifndef ZEROC_IO_CLICKS_INTERNAL_H
#define ZEROC_IO_CLICKS_INTERNAL_H

#include <stdlib.h>

#include "io/clicks_types.h"

struct zeroc__clicks {
  int T, ndense, hot;
  int64_t rows[64];
  uint64_t seed; /* synthetic */
  /* a file, read whole: n samples */
  uint64_t n;
  float *labels; /* (n) */
  float *dense;  /* (n, 13) after log(1 + x) */
  int64_t *cats; /* (n, 26): the hex value, or -1 when missing */
};

/* Frees c and what it holds (zeroc__clicks_destroy). NULL: nothing. */
static inline void zeroc__clicks_free(zeroc__clicks_t *c) {
  if (!c) return;
  free(c->labels);
  free(c->dense);
  free(c->cats);
  free(c);
}

#endif
