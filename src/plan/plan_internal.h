/*
 * plan/plan_internal.h - what plan.c shares with search.c, dlrm.c and
 * train_predict.c: checking a config (zeroc_plan_config_resolve reads it),
 * planning a layout that is already checked, and planning any model of the
 * model interface (zeroc/arch.h) from its pricing.
 */
#ifndef ZEROC_PLAN_INTERNAL_H
#define ZEROC_PLAN_INTERNAL_H

#include "zeroc/arch.h"
#include "zeroc/plan.h"
#include "zeroc/train.h"

/* Checks the model shape, dtype, recompute, offload and cluster fields. */
zeroc_result_t zeroc__plan_check_common(const zeroc_plan_config_t *c);

/* Checks zero, tp, pp, hsdp, microbatches and offload_params against the
 * shape and the gpus. */
zeroc_result_t zeroc__plan_check_layout(const zeroc_plan_config_t *c);

/* Checks the cp and cp_mode fields (the model checks the split itself). */
zeroc_result_t zeroc__plan_check_cp(const zeroc_plan_config_t *c);

/* Plans a layout of the config's decoder (c->model) whose every field has
 * been checked (microbatches >= 1). */
zeroc_result_t zeroc__plan_layout(const zeroc_plan_config_t *c, zeroc_plan_result_t *out);

/* A model as the planner prices it: its architecture and shape (info: the
 * fields its pricing reads, info->model or info->dlrm_model), and where the
 * price depends on them, the run's device (ZEROC_DEVICE_AUTO for a plan), the
 * data-parallel ranks and the one priced, the tables' sharding and host
 * threshold (zeroc_arch_layout_t says what each means). */
typedef struct zeroc__plan_model {
  const zeroc_arch_t *arch;
  const zeroc_train_info_t *info;
  zeroc_device_kind_t device;
  int ranks, rank, embedding_sharding;
  uint64_t host_threshold;
} zeroc__plan_model_t;

/* zeroc_plan_compute's checks of a resolved config for the model pm. */
zeroc_result_t zeroc__plan_check_model(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c);

/* Plans the checked layout c of the model pm: c's model field is not read but
 * for model.batch (the micro-batch per rank). The reported stage's model
 * price (its tables, for DLRM) in *mp. */
zeroc_result_t zeroc__plan_model(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c,
                                 zeroc_plan_result_t *out, zeroc_arch_stage_price_t *mp);

#endif
