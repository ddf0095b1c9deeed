/*
 * io/clicks_types.h - what click sources deal in (io/clicks.h has the sources):
 * the model's shape, a batch of samples, the Criteo format's widths and the
 * opaque source. Shared by clicks.c and the Criteo reader (criteo.c) below it.
 */
#ifndef ZEROC_IO_CLICKS_TYPES_H
#define ZEROC_IO_CLICKS_TYPES_H

#include <stdint.h>

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

#endif
