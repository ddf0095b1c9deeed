/*
 * plan/train_predict.c - the planner's per-rank prediction for a training run,
 * in the trainer's info (predicted_*, with the parameters and FLOPs of a step):
 * the GPT's by zeroc_plan_compute, the DLRM's by zeroc_plan_dlrm on this rank's
 * layout. predicted_by_tag is what the memory tests hold the accountant's
 * peaks to. The planner still knows each model by its own shape (its size
 * functions are the models'); pricing through the model interface is next.
 */
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "kernels/kernels.h"
#include "plan/train_predict.h"
#include "zeroc/plan.h"
#include "zeroc/plan_dlrm.h"

/* The token ids (inputs or targets) a GPT run holds at once (model/gpt_run.c's
 * buffers): a pipeline holds the whole step's micro-batches; with cp, of this
 * rank's tokens. */
static size_t step_tokens(const zeroc_train_info_t *in, const zeroc_mesh_info_t *mesh) {
  const zeroc_train_config_t *c = &in->config;
  size_t nmb = mesh->pp > 1 ? (size_t)c->grad_accum : 1;
  return (size_t)c->batch * (size_t)c->seq / (size_t)mesh->cp * nmb;
}

static void predict_gpt(zeroc_ctx_t *ctx, zeroc_train_info_t *in) {
  const zeroc_train_config_t *c = &in->config;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_plan_config_t pc = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t pr;
  memset(&pr, 0, sizeof pr);
  pc.model = in->model;
  pc.gpus = mesh->world;
  pc.zero = c->zero;
  pc.tp = mesh->tp;
  pc.pp = mesh->pp;
  pc.hsdp = mesh->dp_replicate;
  pc.cp = mesh->cp; /* the planner counts T / cp tokens per rank and the cp buffers */
  pc.cp_mode = c->cp_mode;
  pc.microbatches = c->grad_accum;
  pc.vpp = c->vpp;
  pc.param_bytes = (int)zeroc_dtype_size(in->dtype);
  pc.compute_bytes = (int)zeroc_dtype_size(zeroc_kernels_compute_dtype(in->device, in->dtype));
  pc.recompute = c->recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  pc.sequence_parallel = c->sequence_parallel;
  pc.offload_optimizer = c->offload_optimizer;
  pc.offload_params = c->offload_params;
  pc.prefetch = c->prefetch;
  pc.gpu_mem_gib = 0;
  if (in->device == ZEROC_DEVICE_CPU) pc.workspace_mib = 0; /* no GEMM library workspace on cpu */
  in->plan_error[0] = 0;
  if (zeroc_plan_compute(&pc, &pr) == ZEROC_OK) {
    in->predicted_device = pr.device.total;
    in->predicted_host = pr.host_bytes;
    double t[ZEROC_TAG_COUNT] = {pr.device.params,      pr.device.grads,   pr.device.optimizer,
                                 pr.device.activations, pr.device.buffers, pr.device.workspace};
    if (in->device == ZEROC_DEVICE_CUDA) { /* the run's device copies of the token ids */
      double tok = 2.0 * 4.0 * (double)step_tokens(in, mesh);
      t[ZEROC_TAG_BUFFERS] += tok;
      in->predicted_device += tok;
    }
    memcpy(in->predicted_by_tag, t, sizeof t);
  } else {
    snprintf(in->plan_error, sizeof in->plan_error, "%s", zeroc_last_error(NULL));
  }
  in->params = zeroc_gpt_num_params(&in->model);
  in->tokens_per_step = (double)in->global_batch * in->model.seq;
  in->flops_per_step =
      6.0 * (double)in->params * in->tokens_per_step +
      12.0 * in->model.layers * in->model.hidden * (double)in->model.seq * in->tokens_per_step;
  in->peak_flops = 0;
  if (in->device == ZEROC_DEVICE_CUDA) {
    double tf = zeroc_ctx_peak_tflops(ctx); /* ZEROC_PEAK_TFLOPS: checked by zeroc_ctx_create */
    zeroc__env_f64("ZEROC_PEAK_TFLOPS", tf, &tf);
    in->peak_flops = tf * 1e12 * mesh->world;
  }
}

static void predict_dlrm(zeroc_ctx_t *ctx, zeroc_train_info_t *in) {
  const zeroc_train_config_t *c = &in->config;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  const zeroc_dlrm_config_t *m = &in->dlrm_model;
  in->params = zeroc_dlrm_mlp_params(m) + zeroc_dlrm_table_params(m);
  in->tokens_per_step = in->global_batch; /* samples */
  in->flops_per_step = 6.0 * (double)zeroc_dlrm_mlp_params(m) * in->global_batch;
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  pc.model = in->dlrm_model;
  pc.model.batch = c->batch;
  pc.gpus = mesh->dp;
  pc.zero = c->zero;
  pc.hsdp = mesh->dp_replicate;
  pc.prefetch = c->prefetch;
  pc.sharding = (zeroc_embed_sharding_t)c->embedding_sharding;
  int64_t host = 0, embed = 1;
  zeroc__env_i64("ZEROC_DLRM_HOST_TABLES", 0, &host); /* as model/dlrm_tables.c reads them */
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

void zeroc__plan_train(zeroc_ctx_t *ctx, zeroc_train_info_t *info) {
  if (info->dlrm)
    predict_dlrm(ctx, info);
  else
    predict_gpt(ctx, info);
}
