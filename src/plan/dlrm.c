/*
 * plan/dlrm.c - zeroc_plan_dlrm (zeroc/plan_dlrm.h): per-rank memory by tag of
 * the trainer's DLRM, planned as any model of the model interface is
 * (plan.c's zeroc__plan_model): the engine's share of its MLP units (their
 * shard state, pools and the optimizer step's accumulator, shard/sizes.c)
 * and what the DLRM prices itself (model/dlrm_price.c): the units' flat
 * lengths, its activations and workspace, the trainer's device batch, and
 * the tables by the embedding layer's cost model. The DLRM computes in fp32
 * and updates once per backward (no accumulation), so every gradient and
 * reduction is fp32 and no fp32 side copies exist.
 */
#include <string.h>

#include "core/error.h"
#include "plan/plan_internal.h"
#include "shard/rules.h"
#include "zeroc/plan_dlrm.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

static zeroc_result_t check(const zeroc_plan_dlrm_config_t *c) {
  if (c->size != sizeof *c || c->magic != ZEROC_CONFIG_MAGIC)
    return BAD("zeroc_plan_dlrm: config not initialised with ZEROC_PLAN_DLRM_CONFIG_INIT");
  zeroc_train_info_t info;
  memset(&info, 0, sizeof info);
  info.dlrm_model = c->model;
  const zeroc_arch_t *a = zeroc_arch_find("dlrm");
  ZEROC_CHECK(a->price_check(&info, NULL, ZEROC_NAMES_CONFIG)); /* the shape and the batch */
  if (c->gpus < 1 || c->gpus > 65536) return BAD("gpus %d: accepted 1..65536", c->gpus);
  ZEROC_CHECK(zeroc__shard_check_stage(c->zero, "zero"));
  if (c->hsdp < 1 || c->gpus % c->hsdp)
    return BAD("hsdp %d: accepted a divisor of gpus %d", c->hsdp, c->gpus);
  if (c->hsdp > 1 && c->zero == 0) return BAD("hsdp %d with ZeRO-0: accepted hsdp 1", c->hsdp);
  if (c->prefetch < 0) return BAD("prefetch %d: accepted >= 0", c->prefetch);
  if (c->sharding < 0 || c->sharding >= ZEROC_EMBED_SHARDING_COUNT)
    return BAD("sharding %d: accepted 0 auto .. 4 data", (int)c->sharding);
  if (c->rank < -1 || c->rank >= c->gpus)
    return BAD("rank %d: accepted -1 (the largest) or 0..%d", c->rank, c->gpus - 1);
  return ZEROC_OK;
}

/* The planner's config of the DLRM's data-parallel layout: fp32 parameters,
 * activations and compute, one micro-batch per step, no offload, no fixed
 * workspace (the DLRM's plan is for cpu, whose kernels allocate none). */
static void layout_config(const zeroc_plan_dlrm_config_t *c, zeroc_plan_config_t *pc) {
  zeroc_plan_config_t in = ZEROC_PLAN_CONFIG_INIT;
  in.gpus = c->gpus;
  in.zero = c->zero;
  in.tp = in.pp = in.cp = in.vpp = 1;
  in.hsdp = c->hsdp;
  in.microbatches = 1;
  in.model.batch = c->model.batch;
  in.param_bytes = in.compute_bytes = in.act_bytes = 4;
  in.prefetch = c->prefetch;
  in.workspace_mib = 0;
  in.gpu_mem_gib = 0;
  zeroc_plan_config_resolve(&in, pc);
}

static zeroc_result_t plan_rank(const zeroc_plan_dlrm_config_t *c, int rank,
                                zeroc_plan_dlrm_result_t *out) {
  zeroc_train_info_t info;
  memset(&info, 0, sizeof info);
  info.dlrm = 1;
  info.dlrm_model = c->model;
  info.arch = zeroc_arch_find("dlrm");
  zeroc__plan_model_t pm = {info.arch, &info,       ZEROC_DEVICE_AUTO, c->gpus,
                            rank,      c->sharding, c->host_threshold};
  zeroc_plan_config_t pc;
  layout_config(c, &pc);
  zeroc_plan_result_t r;
  zeroc_arch_stage_price_t mp;
  ZEROC_CHECK(zeroc__plan_model(&pm, &pc, &r, &mp));
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->device = r.device;
  out->host_bytes = r.host_bytes;
  const zeroc_embed_cost_t *e = &mp.embed;
  out->embed = *e;
  out->tables_device =
      (double)(e->param_device + e->optimizer_device + e->grads_device + e->buffers_device);
  out->mlp_device = out->device.total - out->tables_device;
  for (int k = 0; k < mp.ntables; k++)
    out->sharding[k] = mp.sharding[k], out->owner[k] = mp.owner[k];
  zeroc_arch_figures_t f;
  info.arch->figures(&info, 1, 0, &f);
  out->mlp_params = f.dense_params;
  out->table_params = f.params - f.dense_params;
  return ZEROC_OK;
}

zeroc_result_t zeroc_plan_dlrm(const zeroc_plan_dlrm_config_t *cfg, zeroc_plan_dlrm_result_t *out) {
  if (!cfg || !out) return BAD("zeroc_plan_dlrm: NULL %s", cfg ? "out" : "cfg");
  ZEROC_CHECK(check(cfg));
  if (cfg->rank >= 0) return plan_rank(cfg, cfg->rank, out);
  /* the rank needing the most device memory (table-wise placement differs by rank) */
  zeroc_plan_dlrm_result_t r;
  for (int k = 0; k < cfg->gpus; k++) {
    ZEROC_CHECK(plan_rank(cfg, k, &r));
    if (k == 0 || r.device.total > out->device.total) *out = r;
  }
  return ZEROC_OK;
}
