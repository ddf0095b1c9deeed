/*
 * plan/train_predict.c - the planner's per-rank prediction for a training run,
 * in the trainer's info (predicted_*, with the parameters and FLOPs of a step),
 * for any model of the model interface: the run's layout as a plan config, and
 * the model priced as zeroc_plan_compute prices the GPT (plan.c's
 * zeroc__plan_model). predicted_by_tag is what the memory tests hold the
 * accountant's peaks to.
 */
#include <stdio.h>
#include <string.h>

#include "core/env.h"
#include "kernels/attention_cudnn.h"
#include "kernels/kernels.h"
#include "plan/plan_internal.h"
#include "plan/train_predict.h"

/* The run of info->config on `mesh` as the planner's config: the data-parallel
 * ranks of the mesh, the config's ZeRO stage, micro-batches, dtypes, offload. */
static void plan_config_of(const zeroc_train_info_t *in, const zeroc_mesh_info_t *mesh,
                           zeroc_plan_config_t *pc) {
  const zeroc_train_config_t *c = &in->config;
  zeroc_plan_config_t p = ZEROC_PLAN_CONFIG_INIT;
  p.model = in->model;
  p.model.batch = c->batch;
  p.gpus = mesh->world;
  p.zero = c->zero;
  p.tp = mesh->tp;
  p.pp = mesh->pp;
  p.hsdp = mesh->dp_replicate;
  p.cp = mesh->cp; /* the planner counts T / cp tokens per rank and the cp buffers */
  p.cp_mode = c->cp_mode;
  p.microbatches = c->grad_accum;
  p.vpp = c->vpp;
  p.param_bytes = (int)zeroc_dtype_size(in->dtype);
  p.compute_bytes = (int)zeroc_dtype_size(zeroc_kernels_compute_dtype(in->device, in->dtype));
  p.grad_bytes = (int)zeroc_dtype_size((zeroc_dtype_t)c->grad_reduce_dtype);
  p.recompute = c->recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  p.sequence_parallel = c->sequence_parallel;
  p.offload_optimizer = c->offload_optimizer;
  p.offload_params = c->offload_params;
  p.prefetch = c->prefetch;
  p.gpu_mem_gib = 0;
  if (in->device == ZEROC_DEVICE_CPU) p.workspace_mib = 0; /* no GEMM library workspace on cpu */
  /* attention as the model's kernels run it: cuDNN's where they loaded it (the default
   * ZEROC_CUDA_ATTENTION=auto), its deterministic backward with --deterministic or
   * ZEROC_CUDA_DETERMINISTIC=1 (a bad value stopped the kernels' creation already) */
  int det_env = 0;
  if (zeroc__cudnn_deterministic_knob(&det_env) != ZEROC_OK) det_env = 0;
  p.flash_attention = in->device == ZEROC_DEVICE_CUDA && zeroc__cudnn_attention_loaded()
                          ? ZEROC_ATTENTION_CUDNN
                          : ZEROC_ATTENTION_FLASH;
  p.deterministic = c->deterministic || det_env;
  zeroc_plan_config_resolve(&p, pc);
}

void zeroc__plan_train(zeroc_ctx_t *ctx, zeroc_train_info_t *in) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  const zeroc_arch_t *a = in->arch;
  zeroc_arch_figures_t f;
  a->figures(in, (double)in->global_batch, in->config.recompute, &f);
  in->params = f.params;
  in->tokens_per_step = f.tokens;
  in->flops_per_step = f.flops;
  in->peak_flops = 0;
  if (in->device == ZEROC_DEVICE_CUDA) {
    double tf = zeroc_ctx_peak_tflops(ctx); /* ZEROC_PEAK_TFLOPS: checked by zeroc_ctx_create */
    zeroc__env_f64("ZEROC_PEAK_TFLOPS", tf, &tf);
    in->peak_flops = tf * 1e12 * mesh->world;
  }

  zeroc_plan_config_t pc;
  plan_config_of(in, mesh, &pc);
  zeroc__plan_model_t pm = {
      a, in, in->device, mesh->dp, mesh->dp_rank, in->config.embedding_sharding, 0};
  zeroc_plan_result_t pr;
  zeroc_arch_stage_price_t mp;
  in->plan_error[0] = 0;
  in->predicted_device = in->predicted_host = 0;
  memset(in->predicted_by_tag, 0, sizeof in->predicted_by_tag);
  if (zeroc__plan_check_model(&pm, &pc) || zeroc__plan_model(&pm, &pc, &pr, &mp)) {
    snprintf(in->plan_error, sizeof in->plan_error, "%s", zeroc_last_error(NULL));
    return;
  }
  in->predicted_device = pr.device.total;
  in->predicted_host = pr.host_bytes;
  double t[ZEROC_TAG_COUNT] = {pr.device.params,      pr.device.grads,   pr.device.optimizer,
                               pr.device.activations, pr.device.buffers, pr.device.workspace};
  memcpy(in->predicted_by_tag, t, sizeof t);
}
