/*
 * runtime/groups.c - the mesh's groups (world, tp, pp, dp, dp_shard,
 * dp_replicate, cp), each an MPI_Comm_split of the context's world, made from the
 * mesh and the comm environment (backend, timeout, watchdog).
 */
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/groups.h"

zeroc_result_t zeroc__mesh_create_groups(zeroc_ctx_t *ctx) {
  const zeroc_mesh_info_t *m = &ctx->mesh;
  int color[ZEROC_GROUP_COUNT], key[ZEROC_GROUP_COUNT];
  int R = m->dp_replicate, S = m->dp_shard, P = m->cp, cr = m->cp_rank;
  /* The cp ranks hold the same parameters and see different tokens of the
   * same sequences: they join the flat-shard group (dp_shard x cp) and the
   * gradient reduction (dp x cp), cp fastest, and leave replication alone. */
  color[ZEROC_GROUP_WORLD] = 0;
  key[ZEROC_GROUP_WORLD] = m->rank;
  color[ZEROC_GROUP_TP] = m->rank / m->tp;
  key[ZEROC_GROUP_TP] = m->tp_rank;
  color[ZEROC_GROUP_PP] =
      ((m->dp_replicate_rank * S + m->dp_shard_rank) * P + cr) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_PP] = m->pp_rank;
  color[ZEROC_GROUP_DP] = m->pp_rank * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP] = m->dp_rank * P + cr;
  color[ZEROC_GROUP_DP_SHARD] = (m->pp_rank * R + m->dp_replicate_rank) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP_SHARD] = m->dp_shard_rank * P + cr;
  color[ZEROC_GROUP_DP_REPLICATE] = ((m->pp_rank * S + m->dp_shard_rank) * P + cr) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_DP_REPLICATE] = m->dp_replicate_rank;
  color[ZEROC_GROUP_CP] = m->rank / (m->tp * P) * m->tp + m->tp_rank;
  key[ZEROC_GROUP_CP] = cr;
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++) {
    MPI_Comm c;
    int e = MPI_Comm_split(ctx->wcomm, color[k], key[k], &c);
    if (e != MPI_SUCCESS)
      return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_split for group %s: error %d",
                        zeroc_group_name((zeroc_group_kind_t)k), e);
    /* the world first (k = 0): every other group's backend communicators are
     * split from its own, in this order on every rank (comm.h, group_connect) */
    zeroc_group_t *parent = k == ZEROC_GROUP_WORLD ? NULL : ctx->groups[ZEROC_GROUP_WORLD];
    ZEROC_CHECK(zeroc__group_create(&ctx->comm_env, c, k, zeroc_group_name((zeroc_group_kind_t)k),
                                    parent, color[k], key[k], &ctx->groups[k]));
  }
  ZINFO(INIT, "mesh: world %d = pp %d x dp %d (replicate %d x shard %d) x cp %d x tp %d; rank %d "
              "at pp %d rep %d shard %d cp %d tp %d",
        m->world, m->pp, m->dp, R, S, P, m->tp, m->rank, m->pp_rank, m->dp_replicate_rank,
        m->dp_shard_rank, cr, m->tp_rank);
  return ZEROC_OK;
}
