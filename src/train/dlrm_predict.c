/*
 * train/dlrm_predict.c - the planner's per-rank prediction for the DLRM run
 * (zeroc_plan_dlrm on this rank's layout), in the trainer's info as the GPT's
 * is: predicted_by_tag is what test_plan_dlrm holds the accountant's peaks to.
 */
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "train/trainer.h"
#include "zeroc/plan_dlrm.h"

void zeroc__dlrm_predict(zeroc_trainer_t *tr) {
  zeroc_train_info_t *in = &tr->info;
  const zeroc_train_config_t *c = &in->config;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(tr->ctx);
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  pc.model = in->dlrm_model;
  pc.model.batch = c->batch;
  pc.gpus = mesh->dp;
  pc.zero = c->zero;
  pc.hsdp = mesh->dp_replicate;
  pc.prefetch = c->prefetch;
  pc.sharding = (zeroc_embed_sharding_t)c->embedding_sharding;
  int64_t host = 0, embed = 1;
  zeroc__env_i64("ZEROC_DLRM_HOST_TABLES", 0, &host); /* as train/dlrm_tables.c reads them */
  zeroc__env_i64("ZEROC_DLRM_EMBED", 1, &embed);
  pc.host_threshold = host > 0 ? (uint64_t)host : 0;
  pc.rank = mesh->dp_rank;
  in->plan_error[0] = 0;
  in->predicted_device = in->predicted_host = 0;
  memset(in->predicted_by_tag, 0, sizeof in->predicted_by_tag);
  zeroc_plan_dlrm_result_t r;
  if (!embed) {
    snprintf(in->plan_error, sizeof in->plan_error,
             "the planner prices the model-parallel tables, not the replicated reference "
             "(ZEROC_DLRM_EMBED=0)");
  } else if (in->device != ZEROC_DEVICE_CPU) {
    /* each kernels object on cuda holds a GEMM workspace and reduction scratch
     * (kernels/cuda/init.cu) that the DLRM plan does not count yet */
    snprintf(in->plan_error, sizeof in->plan_error,
             "the DLRM planner is exact on cpu; on cuda the kernels' fixed workspaces are not "
             "priced yet");
  } else if (c->offload_optimizer != ZEROC_OFFLOAD_NONE || c->recompute) {
    snprintf(in->plan_error, sizeof in->plan_error,
             "the DLRM planner prices no optimizer offload or recompute yet");
  } else if (zeroc_plan_dlrm(&pc, &r) != ZEROC_OK) {
    snprintf(in->plan_error, sizeof in->plan_error, "%s", zeroc_last_error(NULL));
  } else {
    in->predicted_device = r.device.total;
    in->predicted_host = r.host_bytes;
    double t[ZEROC_TAG_COUNT] = {r.device.params,      r.device.grads,   r.device.optimizer,
                                 r.device.activations, r.device.buffers, r.device.workspace};
    memcpy(in->predicted_by_tag, t, sizeof t);
  }
}
