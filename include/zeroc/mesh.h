/*
 * zeroc/mesh.h - the process mesh [pp][dp_replicate][dp_shard][tp], tp fastest.
 *
 * TP stays inside a node, FSDP sharding inside a node or rack, replication and
 * PP cross the slow links. dp = dp_replicate x dp_shard = world / (tp x pp).
 */
#ifndef ZEROC_MESH_H
#define ZEROC_MESH_H

#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_group_kind {
  ZEROC_GROUP_WORLD = 0,
  ZEROC_GROUP_TP = 1,
  ZEROC_GROUP_PP = 2,
  ZEROC_GROUP_DP = 3,           /* dp_replicate x dp_shard */
  ZEROC_GROUP_DP_SHARD = 4,     /* ranks that split one flat parameter */
  ZEROC_GROUP_DP_REPLICATE = 5, /* ranks holding the same shard (HSDP replicas) */
  ZEROC_GROUP_COUNT
} zeroc_group_kind_t;

typedef struct zeroc_mesh_info {
  int world, rank;
  int tp, pp, dp, dp_shard, dp_replicate;            /* sizes */
  int tp_rank, pp_rank, dp_rank, dp_shard_rank, dp_replicate_rank; /* coordinates */
} zeroc_mesh_info_t;

/*
 * Lays out `world` ranks as [pp][hsdp][dp/hsdp][tp] and fills `out` for `rank`.
 * Pure arithmetic, no MPI.
 *   world: number of ranks (>= 1); tp, pp: tensor/pipeline sizes (>= 1);
 *   hsdp: replica count R (>= 1, divides dp); rank: 0 <= rank < world.
 * Returns ZEROC_ERR_INVALID_ARG, naming the numbers, when tp x pp does not
 * divide world or hsdp does not divide dp.
 */
zeroc_result_t zeroc_mesh_layout(int world, int tp, int pp, int hsdp, int rank,
                                 zeroc_mesh_info_t *out);

/* World rank of the rank at the given coordinates of a layout. */
int zeroc_mesh_rank_of(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank, int shard_rank,
                       int tp_rank);

/* "world", "tp", "pp", "dp", "dp_shard", "dp_replicate". */
const char *zeroc_group_name(zeroc_group_kind_t g);

#ifdef __cplusplus
}
#endif
#endif
