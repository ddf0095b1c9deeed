/*
 * core/mesh.c - the process mesh [pp][dp_replicate][dp_shard][cp][tp] (tp
 * fastest): its arithmetic only. The groups, each an MPI_Comm_split of the
 * world, are made by the context (runtime/groups.c).
 */
#include <stdio.h>

#include "core/error.h"
#include "zeroc/mesh.h"

zeroc_result_t zeroc_mesh_layout_cp(int world, int tp, int cp, int pp, int hsdp, int rank,
                                    zeroc_mesh_info_t *m) {
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_mesh_layout: NULL output");
  if (world < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "world size %d: must be >= 1", world);
  if (tp < 1 || pp < 1 || hsdp < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "tp=%d pp=%d hsdp=%d: each must be >= 1", tp, pp, hsdp);
  if (cp < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cp=%d: must be >= 1", cp);
  if (cp == 1 && world % (tp * pp))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "tp x pp = %d x %d = %d does not divide the world size %d; the "
                      "data-parallel size is world / (tp x pp)",
                      tp, pp, tp * pp, world);
  if (world % (tp * cp * pp))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "tp x cp x pp = %d x %d x %d = %d does not divide the world size %d; the "
                      "data-parallel size is world / (tp x cp x pp)",
                      tp, cp, pp, tp * cp * pp, world);
  int dp = world / (tp * cp * pp);
  if (dp % hsdp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "hsdp %d does not divide the data-parallel size %d (world %d / (tp %d x cp %d "
                      "x pp %d))",
                      hsdp, dp, world, tp, cp, pp);
  if (rank < 0 || rank >= world)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "rank %d not in [0, %d)", rank, world);
  m->world = world;
  m->rank = rank;
  m->tp = tp;
  m->cp = cp;
  m->pp = pp;
  m->dp = dp;
  m->dp_replicate = hsdp;
  m->dp_shard = dp / hsdp;
  m->tp_rank = rank % tp;
  m->cp_rank = (rank / tp) % cp;
  m->dp_shard_rank = (rank / (tp * cp)) % m->dp_shard;
  m->dp_replicate_rank = (rank / (tp * cp * m->dp_shard)) % hsdp;
  m->pp_rank = rank / (tp * cp * dp);
  m->dp_rank = m->dp_replicate_rank * m->dp_shard + m->dp_shard_rank;
  return ZEROC_OK;
}

zeroc_result_t zeroc_mesh_layout(int world, int tp, int pp, int hsdp, int rank,
                                 zeroc_mesh_info_t *m) {
  return zeroc_mesh_layout_cp(world, tp, 1, pp, hsdp, rank, m);
}

int zeroc_mesh_rank_of_cp(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank, int shard_rank,
                          int cp_rank, int tp_rank) {
  int cp = m->cp > 0 ? m->cp : 1;
  return (((pp_rank * m->dp_replicate + rep_rank) * m->dp_shard + shard_rank) * cp + cp_rank) *
             m->tp +
         tp_rank;
}

int zeroc_mesh_rank_of(const zeroc_mesh_info_t *m, int pp_rank, int rep_rank, int shard_rank,
                       int tp_rank) {
  return zeroc_mesh_rank_of_cp(m, pp_rank, rep_rank, shard_rank, 0, tp_rank);
}

const char *zeroc_group_name(zeroc_group_kind_t g) {
  static const char *names[ZEROC_GROUP_COUNT] = {"world",    "tp",           "pp", "dp",
                                                 "dp_shard", "dp_replicate", "cp"};
  return (unsigned)g < ZEROC_GROUP_COUNT ? names[g] : "?";
}

const char *zeroc_cp_mode_name(zeroc_cp_mode_t m) {
  return m == ZEROC_CP_MODE_DEFAULT || m == ZEROC_CP_MODE_RING ? "ring" : m == ZEROC_CP_MODE_ULYSSES ? "ulysses" : "?";
}
