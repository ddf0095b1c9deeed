/*
 * model/dlrm_sizes.h - what a DLRM of a shape allocates, as the planner
 * (src/plan/dlrm.c) and the allocators share it: the embedding layer's
 * config the trainer builds its tables from, the dense units' flat lengths as
 * the shard engine lays them out, and the model's own buffers by tag.
 */
#ifndef ZEROC_MODEL_DLRM_SIZES_H
#define ZEROC_MODEL_DLRM_SIZES_H

#include <stdint.h>

#include "zeroc/dlrm.h"
#include "zeroc/embed.h"

/* The tables of model `c` as zeroc_embed takes them: tabs (c->tables) filled,
 * ec initialised with `batch` samples per rank, c->hot ids per bag, the
 * AdaGrad epsilon of the trainer, `sharding` (zeroc_embed_sharding_t), `seed`
 * and `host_threshold` (bytes per rank above which a table lives in host
 * memory; 0: none). */
void zeroc__dlrm_embed_config(const zeroc_dlrm_config_t *c, int batch, int sharding, uint64_t seed,
                              uint64_t host_threshold, zeroc_embed_table_t *tabs,
                              zeroc_embed_config_t *ec);

/* Unit i's (0 .. nbottom + ntop - 1) flat length in the shard engine for a
 * shard group of `shard_size` ranks: the weight (OC, C) at 0, the bias (OC)
 * at the next multiple of 8 elements, the whole rounded up to 8 x shard_size
 * (src/shard/flat.c's layout). */
double zeroc__dlrm_unit_flat(const zeroc_dlrm_config_t *c, int i, int shard_size);

/* Bytes src/model/dlrm.c allocates for a micro-batch of B samples, by tag. */
typedef struct zeroc__dlrm_bytes {
  double activations; /* every unit's output, the interaction, the per-sample losses */
  double workspace;   /* input gradients handed down, the interaction's gradient, scratch */
} zeroc__dlrm_bytes_t;
void zeroc__dlrm_buffer_bytes(const zeroc_dlrm_config_t *c, int B, zeroc__dlrm_bytes_t *out);

#endif
