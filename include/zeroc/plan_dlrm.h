/*
 * zeroc/plan_dlrm.h - the planner's DLRM rows: per-rank memory by the memory
 * accountant's tags of `zeroc train --model dlrm` on N data-parallel ranks, and
 * the tables' traffic. The MLPs are priced as the shard engine allocates any
 * sharded unit (ZeRO-0..3, HSDP; src/shard/sizes.c, as zeroc_plan_compute
 * prices the GPT's), the model's buffers as src/model/dlrm.c allocates them,
 * and the tables by the embedding layer's cost model (zeroc_embed_plan: one
 * source for the planner and the allocator). Pure arithmetic: no MPI, no device.
 */
#ifndef ZEROC_PLAN_DLRM_H
#define ZEROC_PLAN_DLRM_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/dlrm.h"
#include "zeroc/embed.h"
#include "zeroc/export.h"
#include "zeroc/plan.h"
#include "zeroc/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to plan. Initialise with ZEROC_PLAN_DLRM_CONFIG_INIT, then set model
 * (model.batch is the micro-batch per rank) and the layout. */
typedef struct zeroc_plan_dlrm_config {
  size_t size;                     /* sizeof(zeroc_plan_dlrm_config_t), set by the initializer */
  uint32_t magic;                  /* ZEROC_CONFIG_MAGIC */
  zeroc_dlrm_config_t model;       /* the shape (zeroc_dlrm_preset, then overrides) */
  int gpus;                        /* data-parallel ranks N >= 1 (the DLRM is all data-parallel) */
  int zero;                        /* ZeRO stage of the MLPs, 0..3 */
  int hsdp;                        /* replicas R dividing N (ZeRO 1..3); shards span N / R */
  int prefetch;                    /* ZeRO-3 gathers in flight, >= 0 */
  zeroc_embed_sharding_t sharding; /* --embedding-sharding (AUTO: the cost model per table) */
  uint64_t host_threshold; /* tables above this many bytes on a rank in host memory; 0 none */
  int rank;                /* the rank reported; -1: the one needing the most device memory */
} zeroc_plan_dlrm_config_t;

#define ZEROC_PLAN_DLRM_CONFIG_INIT                                                                \
  { sizeof(zeroc_plan_dlrm_config_t), ZEROC_CONFIG_MAGIC, {0}, 1, 3, 1, 2, ZEROC_EMBED_AUTO, 0, -1 }

typedef struct zeroc_plan_dlrm_result {
  int rank;                   /* the rank reported */
  zeroc_plan_memory_t device; /* its device bytes by tag (params, grads, optimizer, activations,
                                 buffers, workspace; total) */
  double host_bytes;          /* its pinned host bytes: host tables, their AdaGrad state, staging */
  double mlp_device;          /* of device.total: the MLPs' sharded state, pools and step scratch */
  double tables_device;       /* of device.total: the tables, their state and exchange buffers */
  uint64_t mlp_params, table_params;
  zeroc_embed_cost_t embed; /* the tables' cost on that rank (bytes, traffic per step) */
  zeroc_embed_sharding_t sharding[ZEROC_DLRM_MAX_TABLES]; /* each table's, never AUTO */
  int owner[ZEROC_DLRM_MAX_TABLES];                       /* table-wise: the owning rank, else -1 */
} zeroc_plan_dlrm_result_t;

/*
 * Plans one DLRM layout. Returns ZEROC_ERR_INVALID_ARG naming the field, the
 * value and what is accepted (a bad shape, zero, hsdp not dividing gpus or with
 * ZeRO-0, rank out of range, a config not made with the initializer).
 */
ZEROC_API zeroc_result_t zeroc_plan_dlrm(const zeroc_plan_dlrm_config_t *cfg,
                                         zeroc_plan_dlrm_result_t *out);

/*
 * The DLRM shape a train config asks for (model a DLRM preset, then tables,
 * rows, dim, dense, bottom, top and batch as zeroc_trainer_create reads them):
 * the planner's model for `zeroc plan --model dlrm` with train's flags.
 * Returns ZEROC_ERR_INVALID_ARG naming the field and what is accepted.
 */
ZEROC_API zeroc_result_t zeroc_train_dlrm_shape(const zeroc_train_config_t *cfg,
                                                zeroc_dlrm_config_t *out);

#ifdef __cplusplus
}
#endif
#endif
