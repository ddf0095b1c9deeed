/*
 * core/mesh.c - the process mesh [pp][dp_replicate][dp_shard][tp] (tp fastest)
 * and its groups, each an MPI_Comm_split of the world.
 */
#include <stdio.h>

#include "comm/comm.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"

zeroc_result_t zeroc_mesh_layout(int world, int tp, int pp, int hsdp, int rank,
                                 zeroc_mesh_info_t *m) {
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_mesh_layout: NULL output");
  if (world < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "world size %d: must be >= 1", world);
  if (tp < 1 || pp < 1 || hsdp < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "tp=%d pp=%d hsdp=%d: each must be >= 1", tp, pp, hsdp);
  if (world % (tp * pp))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "tp x pp = %d x %d = %d does not divide the world size %d; the "
                      "data-parallel size is world / (tp x pp)",
                      tp, pp, tp * pp, world);
  int dp = world / (tp * pp);
  if (dp % hsdp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "hsdp %d does not divide the data-parallel size %d (world %d / (tp %d x pp %d))",
                      hsdp, dp, world, tp, pp);
  if (rank < 0 || rank >= world)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "rank %d not in [0, %d)", rank, world);
  m->world = world;
  m->rank = rank;
  m->tp = tp;
  m->pp = pp;
  m->dp = dp;
  m->dp_replicate = hsdp;
  m->dp_shard = dp / hsdp;
  m->tp_rank = rank % tp;
  m->dp_shard_rank = (rank / tp) % m->dp_shard;
  m->dp_replicate_rank = (rank / (tp * m->dp_shard)) % hsdp;
  m->pp_rank = rank / (tp * dp);
  m->dp_rank = m->dp_replicate_rank * m->dp_shard + m->dp_shard_rank;
  return ZEROC_OK;
}

int zeroc_mesh_rank_of(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank, int shard_rank,
                       int tp_rank) {
  return ((pp_rank * m->dp_replicate + rep_rank) * m->dp_shard + shard_rank) * m->tp + tp_rank;
}

const char *zeroc_group_name(zeroc_group_kind_t g) {
  static const char *names[ZEROC_GROUP_COUNT] = {"world", "tp", "pp", "dp", "dp_shard",
                                                 "dp_replicate"};
  return (unsigned)g < ZEROC_GROUP_COUNT ? names[g] : "?";
}

zeroc_result_t zeroc__mesh_create_groups(zeroc_ctx_t *ctx) {
  const zeroc_mesh_info_t *m = &ctx->mesh;
  int color[ZEROC_GROUP_COUNT], key[ZEROC_GROUP_COUNT];
  int R = m->dp_replicate, S = m->dp_shard;
  color[ZEROC_GROUP_WORLD] = 0;
  key[ZEROC_GROUP_WORLD] = m->rank;
  color[ZEROC_GROUP_TP] = m->rank / m->tp;
  key[ZEROC_GROUP_TP] = m->tp_rank;
  color[ZEROC_GROUP_PP] = (m->dp_replicate_rank * S + m->dp_shard_rank) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_PP] = m->pp_rank;
  color[ZEROC_GROUP_DP] = m->pp_rank * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP] = m->dp_rank;
  color[ZEROC_GROUP_DP_SHARD] = (m->pp_rank * R + m->dp_replicate_rank) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP_SHARD] = m->dp_shard_rank;
  color[ZEROC_GROUP_DP_REPLICATE] = (m->pp_rank * S + m->dp_shard_rank) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP_REPLICATE] = m->dp_replicate_rank;
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++) {
    MPI_Comm c;
    int e = MPI_Comm_split(ctx->wcomm, color[k], key[k], &c);
    if (e != MPI_SUCCESS)
      return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_split for group %s: error %d",
                        zeroc_group_name((zeroc_group_kind_t)k), e);
    ZEROC_CHECK(zeroc__group_create(ctx, c, k, zeroc_group_name((zeroc_group_kind_t)k),
                                    &ctx->groups[k]));
  }
  ZINFO(INIT, "mesh: world %d = pp %d x dp %d (replicate %d x shard %d) x tp %d; rank %d at "
              "pp %d rep %d shard %d tp %d",
        m->world, m->pp, m->dp, R, S, m->tp, m->rank, m->pp_rank, m->dp_replicate_rank,
        m->dp_shard_rank, m->tp_rank);
  return ZEROC_OK;
}
