/*
 * shard/flat.h - one flat parameter per unit: where each parameter sits in the
 * flat buffer and which part of it this rank's shard holds.
 *
 * Parameters are laid out in declaration order, each starting on a 16-byte
 * boundary of bf16 (8 elements; 32 bytes in fp32), and the total is padded to
 * a multiple of 8 x shard size, so the reduce-scatter needs no copy and every
 * shard starts aligned. Rank r of the shard group owns [r*S, (r+1)*S); a shard
 * boundary may cut through a parameter.
 */
#ifndef ZEROC_SHARD_FLAT_H
#define ZEROC_SHARD_FLAT_H

#include <stdint.h>

#include "zeroc/layer.h"

#define ZEROC_FLAT_ALIGN 8 /* elements */

typedef struct zeroc__flat_param {
  uint64_t off, numel; /* in the flat buffer */
  uint64_t lo, hi;     /* this rank's part of it, in flat coordinates (lo == hi: none) */
  uint32_t flags;
} zeroc__flat_param_t;

typedef struct zeroc__flat {
  int n;
  zeroc__flat_param_t *p;
  uint64_t numel;  /* real elements */
  uint64_t N;      /* flat length, a multiple of 8 x shard_size */
  uint64_t S;      /* shard length N / shard_size */
  uint64_t shard_off; /* r * S */
} zeroc__flat_t;

/* Lays out `layer` for rank `shard_rank` of `shard_size`. Fails with
 * ZEROC_ERR_INVALID_ARG for a unit with no parameters or a zero-size one. */
zeroc_result_t zeroc__flat_layout(const zeroc_layer_t *layer, int unit, int shard_size,
                                  int shard_rank, zeroc__flat_t *out);
void zeroc__flat_free(zeroc__flat_t *f);

/* Fills `dst` (S fp32) with the initial values of this rank's shard: each
 * element from its parameter's init rule; padding is zero. */
void zeroc__flat_init_shard(const zeroc_layer_t *layer, int unit, const zeroc__flat_t *f,
                            uint64_t seed, float *dst);

#endif
