/*
 * io/clicks_internal.h - the click source's insides, shared by clicks.c and criteo.c.
 */
#ifndef ZEROC_IO_CLICKS_INTERNAL_H
#define ZEROC_IO_CLICKS_INTERNAL_H

#include "io/clicks.h"

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

zeroc_result_t zeroc__criteo_read(const zeroc__clicks_t *c, uint64_t first, int B,
                                  zeroc__click_batch_t *b);

#endif
