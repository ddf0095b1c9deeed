/*
 * zeroc/mesh.h - the process mesh [pp][dp_replicate][dp_shard][cp][tp], tp fastest.
 *
 * TP stays inside a node, FSDP sharding inside a node or rack, replication and
 * PP cross the slow links. CP (context parallelism: the sequence split over cp
 * ranks) sits next to tp: its ring passes or all-to-alls run in every layer's
 * forward and backward (K/V chunks, or the whole activations), heavier and
 * more latency-bound than FSDP's one gather and one reduce-scatter per unit,
 * so it gets the node's fast links after tp; a cp group of tp-strided ranks
 * fills a node when tp x cp <= the GPUs of one node.
 * dp = dp_replicate x dp_shard = world / (tp x cp x pp): the data-parallel
 * size (the cp ranks of one dp index read the same batch).
 *
 * The cp ranks compute with the same weights, so the flat parameters shard
 * over dp_shard x cp (the group ZEROC_GROUP_DP_SHARD) and the gradients reduce
 * over dp x cp (ZEROC_GROUP_DP); HSDP replicates over dp_replicate only.
 */
#ifndef ZEROC_MESH_H
#define ZEROC_MESH_H

#include "zeroc/export.h"
#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_group_kind {
  ZEROC_GROUP_WORLD = 0,
  ZEROC_GROUP_TP = 1,
  ZEROC_GROUP_PP = 2,
  ZEROC_GROUP_DP = 3,           /* dp_replicate x dp_shard x cp: the gradient reduction */
  ZEROC_GROUP_DP_SHARD = 4,     /* ranks that split one flat parameter: dp_shard x cp */
  ZEROC_GROUP_DP_REPLICATE = 5, /* ranks holding the same shard (HSDP replicas) */
  ZEROC_GROUP_CP = 6,           /* the ranks that split one sequence */
  ZEROC_GROUP_COUNT
} zeroc_group_kind_t;

/* How attention runs over a context-parallel group (0: unset, ring). */
typedef enum zeroc_cp_mode {
  ZEROC_CP_MODE_DEFAULT = 0,
  ZEROC_CP_MODE_RING = 1,    /* K/V chunks passed around the ring, log-sum-exp merge */
  ZEROC_CP_MODE_ULYSSES = 2, /* all-to-all from the sequence split to a head split and back */
} zeroc_cp_mode_t;

/* "ring", "ulysses" ("ring" for DEFAULT, "?" otherwise). */
ZEROC_API const char *zeroc_cp_mode_name(zeroc_cp_mode_t m);

typedef struct zeroc_mesh_info {
  int world, rank;
  int tp, pp, dp, dp_shard, dp_replicate;            /* sizes (dp: data-parallel, without cp) */
  int tp_rank, pp_rank, dp_rank, dp_shard_rank, dp_replicate_rank; /* coordinates */
  int cp, cp_rank; /* context-parallel size and coordinate (1, 0 without cp) */
} zeroc_mesh_info_t;

/*
 * Lays out `world` ranks as [pp][hsdp][dp/hsdp][tp] and fills `out` for `rank`.
 * Pure arithmetic, no MPI.
 *   world: number of ranks (>= 1); tp, pp: tensor/pipeline sizes (>= 1);
 *   hsdp: replica count R (>= 1, divides dp); rank: 0 <= rank < world.
 * Returns ZEROC_ERR_INVALID_ARG, naming the numbers, when tp x pp does not
 * divide world or hsdp does not divide dp.
 */
ZEROC_API zeroc_result_t zeroc_mesh_layout(int world, int tp, int pp, int hsdp, int rank,
                                           zeroc_mesh_info_t *out);

/*
 * The same with a context-parallel size cp (>= 1): the layout
 * [pp][hsdp][dp/hsdp][cp][tp], dp = world / (tp x cp x pp).
 * zeroc_mesh_layout(w, tp, pp, hsdp, r, out) is zeroc_mesh_layout_cp(w, tp, 1, pp, hsdp, r, out).
 * Returns ZEROC_ERR_INVALID_ARG, naming the numbers, when tp x cp x pp does not
 * divide world or hsdp does not divide dp.
 */
ZEROC_API zeroc_result_t zeroc_mesh_layout_cp(int world, int tp, int cp, int pp, int hsdp, int rank,
                                              zeroc_mesh_info_t *out);

/* World rank of the rank at the given coordinates of a layout (cp rank 0). */
ZEROC_API int zeroc_mesh_rank_of(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank,
                                 int shard_rank, int tp_rank);
/* World rank at the given coordinates, with the cp coordinate. */
ZEROC_API int zeroc_mesh_rank_of_cp(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank,
                                    int shard_rank, int cp_rank, int tp_rank);

/* "world", "tp", "pp", "dp", "dp_shard", "dp_replicate", "cp". */
ZEROC_API const char *zeroc_group_name(zeroc_group_kind_t g);

#ifdef __cplusplus
}
#endif
#endif
