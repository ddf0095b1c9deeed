/*
 * plan/dlrm.c - zeroc_plan_dlrm (zeroc/plan_dlrm.h): per-rank memory by tag of
 * the trainer's DLRM, from the functions its allocators call:
 *   MLPs       each unit's flat length (model/dlrm_sizes.c, the engine's layout),
 *              its shard state and the engine's pools (shard/sizes.c), the
 *              optimizer step's norm accumulator;
 *   model      src/model/dlrm.c's activations and workspace (dlrm_sizes.c);
 *   trainer    the device batch: dense (B, F), labels (B), pooled and its
 *              gradient (B, T, D) each, tag buffers (model/dlrm_run.c);
 *   tables     zeroc_embed_plan's cost for the config the trainer builds
 *              (zeroc__dlrm_embed_config), the numbers zeroc_embed_create allocates.
 * The DLRM computes in fp32 and updates once per backward (no accumulation),
 * so every gradient and reduction is fp32 and no fp32 side copies exist.
 */
#include <string.h>

#include "core/error.h"
#include "model/dlrm_sizes.h"
#include "shard/sizes.h"
#include "zeroc/plan_dlrm.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

static zeroc_result_t check(const zeroc_plan_dlrm_config_t *c) {
  if (c->size != sizeof *c || c->magic != ZEROC_CONFIG_MAGIC)
    return BAD("zeroc_plan_dlrm: config not initialised with ZEROC_PLAN_DLRM_CONFIG_INIT");
  ZEROC_CHECK(zeroc_dlrm_config_check(&c->model));
  if (c->model.batch < 1) return BAD("batch %d: accepted >= 1 (per rank)", c->model.batch);
  if (c->gpus < 1 || c->gpus > 65536) return BAD("gpus %d: accepted 1..65536", c->gpus);
  if (c->zero < 0 || c->zero > 3) return BAD("zero %d: accepted 0..3", c->zero);
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

/* The MLPs' device bytes on any rank (they are the same on every rank). */
static void mlp_memory(const zeroc_plan_dlrm_config_t *c, zeroc_plan_memory_t *m) {
  const zeroc_dlrm_config_t *d = &c->model;
  int nu = d->nbottom + d->ntop, nd = c->zero == 0 ? 1 : c->gpus / c->hsdp;
  double maxN = 0;
  for (int i = 0; i < nu; i++) {
    double N = zeroc__dlrm_unit_flat(d, i, nd);
    zeroc__unit_bytes_t u;
    zeroc__shard_unit_bytes(c->zero, N, nd, 0, 4, 4, 4, zeroc__shard_keeps_master(4, 0, 0), &u);
    m->params += u.params, m->grads += u.grads, m->optimizer += u.optimizer;
    if (N > maxN) maxN = N;
  }
  zeroc__pool_bytes_t p;
  zeroc__shard_pool_bytes(c->zero, c->prefetch, nu, 1, maxN, maxN, nd, 4, 4, &p);
  m->buffers += p.gather_n * p.gather + p.fgrad_n * p.fgrad + p.rs_n * p.rs;
  m->workspace += zeroc__shard_step_bytes();
  zeroc__dlrm_bytes_t b;
  zeroc__dlrm_buffer_bytes(d, d->batch, &b);
  m->activations += b.activations, m->workspace += b.workspace;
  /* the trainer's device batch */
  double B = d->batch;
  m->buffers += 4 * (B * d->dense + B + 2 * B * d->tables * d->dim);
}

static zeroc_result_t plan_rank(const zeroc_plan_dlrm_config_t *c, int rank,
                                zeroc_plan_dlrm_result_t *out) {
  const zeroc_dlrm_config_t *d = &c->model;
  memset(out, 0, sizeof *out);
  out->rank = rank;
  mlp_memory(c, &out->device);
  out->mlp_device = out->device.params + out->device.grads + out->device.optimizer +
                    out->device.activations + out->device.buffers + out->device.workspace;
  zeroc_embed_table_t tabs[ZEROC_DLRM_MAX_TABLES];
  zeroc_embed_config_t ec;
  zeroc__dlrm_embed_config(d, d->batch, c->sharding, 0, c->host_threshold, tabs, &ec);
  zeroc_embed_cost_t *e = &out->embed;
  ZEROC_CHECK(zeroc_embed_plan(&ec, c->gpus, rank, out->sharding, out->owner, e));
  zeroc_plan_memory_t *m = &out->device;
  m->params += (double)e->param_device, m->optimizer += (double)e->optimizer_device;
  m->grads += (double)e->grads_device, m->buffers += (double)e->buffers_device;
  out->tables_device =
      (double)(e->param_device + e->optimizer_device + e->grads_device + e->buffers_device);
  out->host_bytes = (double)(e->param_host + e->optimizer_host + e->buffers_pinned);
  m->total = m->params + m->grads + m->optimizer + m->activations + m->buffers + m->workspace;
  out->mlp_params = zeroc_dlrm_mlp_params(d);
  out->table_params = zeroc_dlrm_table_params(d);
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
