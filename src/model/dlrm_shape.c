/*
 * model/dlrm_shape.c - zeroc_train_dlrm_shape (zeroc/plan_dlrm.h): the DLRM
 * shape a train config resolves to, by the trainer's own resolution
 * (zeroc__dlrm_resolve, dlrm_arch.c), so `zeroc plan --model dlrm` and `zeroc train` read
 * the same flags into the same model.
 */
#include <stdlib.h>

#include "core/error.h"
#include "model/dlrm_run.h"
#include "zeroc/plan_dlrm.h"

zeroc_result_t zeroc_train_dlrm_shape(const zeroc_train_config_t *cfg, zeroc_dlrm_config_t *out) {
  if (!cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_train_dlrm_shape: NULL argument");
  if (cfg->magic != ZEROC_CONFIG_MAGIC || cfg->size != sizeof *cfg)
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "zeroc_train_dlrm_shape: config not initialised with ZEROC_TRAIN_CONFIG_INIT");
  if (!cfg->model || !zeroc_dlrm_is_preset(cfg->model))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "model '%s': accepted a DLRM preset (dlrm-tiny, dlrm, dlrm-mlperf)",
                      cfg->model ? cfg->model : "");
  zeroc_train_info_t *info = calloc(1, sizeof *info); /* only the shape is written */
  if (!info) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "train info");
  zeroc_train_config_t c = *cfg;
  zeroc_result_t r = zeroc__dlrm_resolve(&c, NULL, info);
  if (!r) *out = info->dlrm_model;
  free(info);
  return r;
}
