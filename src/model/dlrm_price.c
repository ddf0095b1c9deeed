/*
 * model/dlrm_price.c - the DLRM's answers to the planner (zeroc/arch.h,
 * "pricing"; zeroc_plan_dlrm and the trainer's prediction): its MLP units'
 * flat lengths as the shard engine lays them out, its own buffers as dlrm.c
 * allocates them, the trainer's device batch, and the tables by the embedding
 * layer's cost model for the config the trainer builds (zeroc_embed_plan: the
 * numbers zeroc_embed_create allocates). The DLRM computes in fp32 and
 * updates once per backward.
 */
#include <string.h>

#include "core/error.h"
#include "model/dlrm_price.h"
#include "model/dlrm_sizes.h"
#include "model/dlrm_tables.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

_Static_assert(ZEROC_DLRM_MAX_TABLES <= ZEROC_ARCH_MAX_TABLES, "a stage price holds every table");

int zeroc__dlrm_num_units(const zeroc_train_info_t *info) {
  return info->dlrm_model.nbottom + info->dlrm_model.ntop;
}

/* Each MLP's share of the work: its weights (a sample costs 6 per weight). */
void zeroc__dlrm_unit_costs(const zeroc_train_info_t *info, double *cost) {
  int nu = zeroc__dlrm_num_units(info);
  double sum = 0;
  for (int u = 0; u < nu; u++) sum += cost[u] = zeroc__dlrm_unit_flat(&info->dlrm_model, u, 1);
  for (int u = 0; u < nu; u++) cost[u] /= sum;
}

zeroc_result_t zeroc__dlrm_price_check(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                       int names) {
  const zeroc_dlrm_config_t *d = &info->dlrm_model;
  (void)names; /* the DLRM's shape is named by its fields (zeroc_dlrm_config_check) */
  if (!L) {
    ZEROC_CHECK(zeroc_dlrm_config_check(d));
    if (d->batch < 1) return BAD("batch %d: accepted >= 1 (per rank)", d->batch);
    return ZEROC_OK;
  }
  if (L->tp != 1 || L->pp != 1 || L->cp != 1)
    return BAD("tp %d, pp %d, cp %d: the DLRM is data-parallel only (each 1)", L->tp, L->pp, L->cp);
  if (L->device == ZEROC_DEVICE_AUTO) return ZEROC_OK; /* a plan, not a run */
  uint64_t host;
  int embed;
  ZEROC_CHECK(zeroc__tables_env(&host, &embed));
  if (!embed)
    return BAD("the planner prices the model-parallel tables, not the replicated reference "
               "(ZEROC_DLRM_EMBED=0)");
  /* each kernels object on cuda holds a GEMM workspace and reduction scratch
   * (kernels/cuda/init.cu) that the DLRM's price does not count yet */
  if (L->device != ZEROC_DEVICE_CPU)
    return BAD("the DLRM planner is exact on cpu; on cuda the kernels' fixed workspaces are not "
               "priced yet");
  if (info->config.offload_optimizer != ZEROC_OFFLOAD_NONE || L->recompute)
    return BAD("the DLRM planner prices no optimizer offload or recompute yet");
  return ZEROC_OK;
}

void zeroc__dlrm_price_unit(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L, int u,
                            zeroc_arch_unit_price_t *out) {
  memset(out, 0, sizeof *out);
  out->params = zeroc__dlrm_unit_flat(&info->dlrm_model, u, L->shard);
}

zeroc_result_t zeroc__dlrm_price_stage(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                       const zeroc_arch_stage_t *st,
                                       zeroc_arch_stage_price_t *out) {
  const zeroc_dlrm_config_t *d = &info->dlrm_model;
  (void)st;
  memset(out, 0, sizeof *out);
  zeroc__dlrm_bytes_t b;
  zeroc__dlrm_buffer_bytes(d, L->batch, &b);
  out->activations = b.activations;
  out->workspace = b.workspace;
  /* the trainer's device batch: dense (B, F), labels (B), pooled and its
   * gradient (B, T, D) each (model/dlrm_run.c) */
  double B = L->batch;
  out->buffers = 4 * (B * d->dense + B + 2 * B * d->tables * d->dim);
  /* the tables, for the config the trainer builds (dlrm_tables.c); a run
   * reads the host threshold from the environment as the trainer does */
  uint64_t host = L->host_threshold;
  int embed;
  if (L->device != ZEROC_DEVICE_AUTO) ZEROC_CHECK(zeroc__tables_env(&host, &embed));
  zeroc_embed_table_t tabs[ZEROC_DLRM_MAX_TABLES];
  zeroc_embed_config_t ec;
  zeroc__dlrm_embed_config(d, d->batch, L->embedding_sharding, 0, host, tabs, &ec);
  zeroc_embed_cost_t *e = &out->embed;
  ZEROC_CHECK(zeroc_embed_plan(&ec, L->ranks, L->rank, out->sharding, out->owner, e));
  out->ntables = d->tables;
  out->outside[ZEROC_TAG_PARAMS] = (double)e->param_device;
  out->outside[ZEROC_TAG_OPTIMIZER] = (double)e->optimizer_device;
  out->outside[ZEROC_TAG_GRADS] = (double)e->grads_device;
  out->outside[ZEROC_TAG_BUFFERS] = (double)e->buffers_device;
  out->outside_host = (double)(e->param_host + e->optimizer_host + e->buffers_pinned);
  return ZEROC_OK;
}

void zeroc__dlrm_figures(const zeroc_train_info_t *info, double sequences, int recompute,
                         zeroc_arch_figures_t *out) {
  const zeroc_dlrm_config_t *d = &info->dlrm_model;
  (void)recompute;
  out->dense_params = zeroc_dlrm_mlp_params(d);
  out->params = out->dense_params + zeroc_dlrm_table_params(d);
  out->tokens = sequences; /* samples */
  out->flops = out->flops_executed = 6.0 * (double)out->dense_params * sequences;
}
