/*
 * runtime/groups.h - the mesh's communication groups (runtime/groups.c).
 */
#ifndef ZEROC_RUNTIME_GROUPS_H
#define ZEROC_RUNTIME_GROUPS_H

#include "runtime/context.h"

/* Creates the mesh groups (world, tp, pp, dp, dp_shard, dp_replicate, cp) from
 * ctx->mesh, ctx->wcomm and ctx->comm_env (runtime/groups.c). */
zeroc_result_t zeroc__mesh_create_groups(zeroc_ctx_t *ctx);

#endif
