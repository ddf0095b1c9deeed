/*
 * io/criteo.h - the Criteo click-logs TSV format (io/criteo.c), one kind of click
 * source (io/clicks.h, which includes this).
 */
#ifndef ZEROC_IO_CRITEO_H
#define ZEROC_IO_CRITEO_H

#include <stdint.h>

#include "io/clicks_types.h"
#include "zeroc/result.h"

/* The Criteo TSV file `path` read whole: per line a label (0 or 1), 13 integer
 * features (empty: 0; negative clamped to 0, then log(1 + x)) and 26 categorical
 * features (up to 8 hex digits; empty: a bucket of its own), tab-separated;
 * each categorical hashed into its table's rows. The shape must have 13 dense
 * features and 26 tables. A malformed line is ZEROC_ERR_INVALID_ARG naming the
 * file, line, field and what is accepted; an empty file too. */
zeroc_result_t zeroc__clicks_criteo(const char *path, const zeroc__click_shape_t *s,
                                    zeroc__clicks_t **out);

/* Samples first .. first+B-1 of a Criteo source into `b`, wrapping around its
 * samples (zeroc__clicks_read's file case). */
zeroc_result_t zeroc__criteo_read(const zeroc__clicks_t *c, uint64_t first, int B,
                                  zeroc__click_batch_t *b);

#endif
