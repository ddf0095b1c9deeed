/*
 * shard/predict.c - zeroc_shard_predict: the memory a user model's zeroc_shard and
 * its steps allocate on one rank, before launch (no MPI, no device). Every size comes
 * from shard/sizes.c, which the engine (engine.c, offload.c) allocates with; this file
 * only mirrors which buffers exist, and tests/test_shard_predict.c holds the two equal
 * to the byte against the accountant.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "offload/offload.h"
#include "shard/engine.h"
#include "shard/flat.h"
#include "shard/rules.h"
#include "shard/sizes.h"
#include "zeroc/mesh.h"

/* What the model's buffers depend on, resolved as zeroc_shard resolves it. */
typedef struct pctx {
  zeroc_shard_config_t c;
  zeroc_device_kind_t device;
  int nd;             /* the shard group: 1 at stage 0, dp_shard x cp otherwise */
  int pb, rb, cb;     /* bytes of a parameter, a reduced gradient, a compute element */
  int master, alias;  /* zeroc__shard_keeps_master, zeroc__shard_alias */
  int conv_p, conv_g; /* compute copies of the parameters and of the gradients */
  zeroc_mem_prediction_t *out;
} pctx_t;

static void add(pctx_t *p, zeroc_memkind_t k, zeroc_memtag_t t, double bytes) {
  p->out->bytes[k][t] += (uint64_t)bytes;
}

/* A buffer from the offload's pinned pool: its capacity is the size class's. */
static void add_pinned(pctx_t *p, zeroc_memtag_t t, double bytes) {
  add(p, ZEROC_MEM_PINNED, t, (double)zeroc__pinned_class_size((size_t)bytes));
}

/* The context's mesh and device as zeroc_ctx_create would lay them out. */
static zeroc_result_t read_mesh(const zeroc_ctx_config_t *cc, int world, zeroc_mesh_info_t *mesh,
                                zeroc_device_kind_t *device) {
  if (cc->magic != ZEROC_CONFIG_MAGIC || cc->size < offsetof(zeroc_ctx_config_t, cp))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_predict: ctx_cfg was not initialised with "
                      "ZEROC_CTX_CONFIG_INIT (size %zu, magic 0x%x)",
                      cc->size, cc->magic);
  if (cc->device != ZEROC_DEVICE_CPU && cc->device != ZEROC_DEVICE_CUDA)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_predict: ctx_cfg device %d; accepted ZEROC_DEVICE_CPU or "
                      "ZEROC_DEVICE_CUDA (AUTO is decided by the device zeroc_ctx_create finds)",
                      (int)cc->device);
  *device = cc->device;
  int cp = cc->size >= offsetof(zeroc_ctx_config_t, cp) + sizeof(int) ? cc->cp : 0;
  return zeroc_mesh_layout_cp(world, cc->tp > 0 ? cc->tp : 1, cp > 0 ? cp : 1,
                              cc->pp > 0 ? cc->pp : 1, cc->hsdp > 0 ? cc->hsdp : 1, 0, mesh);
}

/* shared_alloc, the step accumulators and the kernels object of zeroc_shard (engine.c) */
static void shared_bytes(pctx_t *p, int n, double maxNp, double maxN, double maxws) {
  const zeroc_shard_config_t *c = &p->c;
  zeroc__pool_bytes_t pool;
  zeroc__shard_pool_bytes(c->stage, c->prefetch, n, c->grad_accum, maxNp, maxN, p->nd, p->pb, p->rb,
                          p->cb, p->alias, &pool);
  const zeroc_memkind_t D = ZEROC_MEM_DEVICE;
  if (p->conv_p && maxNp) add(p, D, ZEROC_TAG_WORKSPACE, pool.compute_copy);
  if (p->conv_g && maxNp) add(p, D, ZEROC_TAG_WORKSPACE, pool.compute_copy);
  if (maxNp) add(p, D, ZEROC_TAG_BUFFERS, pool.gather_n * pool.gather);
  if (maxNp) add(p, D, ZEROC_TAG_BUFFERS, pool.fgrad_n * pool.fgrad);
  add(p, D, ZEROC_TAG_BUFFERS, pool.rs_n * pool.rs);
  add(p, D, ZEROC_TAG_WORKSPACE, maxws);
  if (p->rb != 4) add(p, D, ZEROC_TAG_WORKSPACE, pool.fp32_shard);
  add(p, D, ZEROC_TAG_WORKSPACE, zeroc__shard_step_bytes());
  if (p->device == ZEROC_DEVICE_CUDA) /* the pinned read-back of the accumulators */
    add(p, ZEROC_MEM_PINNED, ZEROC_TAG_WORKSPACE, zeroc__shard_step_bytes());
  add(p, D, ZEROC_TAG_WORKSPACE, (double)zeroc__kernels_device_bytes(p->device));
}

/* zeroc__moff_init (offload.c) and zeroc__offload_create (offload/state.c): the
 * offloaded state and its staging, from the pinned pool. */
static void offload_bytes(pctx_t *p, const double *S, int n, double maxS) {
  const int oo = p->c.offload_optimizer, op = p->c.offload_params;
  if (oo == ZEROC_OFFLOAD_NONE && op == ZEROC_OFFLOAD_NONE) return;
  const double stage = zeroc__shard_staging_bytes(maxS, p->pb);
  if (oo != ZEROC_OFFLOAD_NONE) {
    /* master (counted as params), m and v: each unit's own (cpu) or three staging
     * sets of the largest (nvme; the swap files themselves are not memory) */
    for (int i = 0; oo == ZEROC_OFFLOAD_CPU && i < n; i++) {
      add_pinned(p, ZEROC_TAG_PARAMS, 4 * S[i]);
      add_pinned(p, ZEROC_TAG_OPTIMIZER, 4 * S[i]);
      add_pinned(p, ZEROC_TAG_OPTIMIZER, 4 * S[i]);
    }
    for (int s = 0; oo == ZEROC_OFFLOAD_NVME && s < 3; s++) {
      add_pinned(p, ZEROC_TAG_PARAMS, 4 * maxS);
      add_pinned(p, ZEROC_TAG_OPTIMIZER, 4 * maxS);
      add_pinned(p, ZEROC_TAG_OPTIMIZER, 4 * maxS);
    }
    add_pinned(p, ZEROC_TAG_BUFFERS, stage);
  }
  /* the host copy of a gradient shard: with optimizer offload, or for offloaded
   * parameters (engine.c) */
  add_pinned(p, ZEROC_TAG_BUFFERS, zeroc__shard_staging_bytes(maxS, 4));
  if (op == ZEROC_OFFLOAD_NONE) return;
  for (int b = 0; b < p->c.prefetch + 2; b++) { /* the parameters' staging ring */
    if (op == ZEROC_OFFLOAD_NVME) add_pinned(p, ZEROC_TAG_BUFFERS, stage);
    if (p->device == ZEROC_DEVICE_CUDA) add(p, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, stage);
  }
}

/* unit_alloc (engine.c): one unit's own buffers. */
static void unit_bytes(pctx_t *p, double N, int pinned, size_t act_bytes, int slots) {
  const zeroc_shard_config_t *c = &p->c;
  const int st = c->stage;
  const zeroc_memkind_t D = ZEROC_MEM_DEVICE;
  zeroc__unit_bytes_t b;
  zeroc__shard_unit_bytes(st, N, p->nd, pinned, p->pb, p->rb,
                          zeroc__shard_accum_bytes(c->grad_accum, p->rb), p->cb, p->master,
                          p->alias, &b);
  if (c->offload_optimizer == ZEROC_OFFLOAD_NONE)
    add(p, D, ZEROC_TAG_OPTIMIZER, (p->master ? 3 : 2) * b.opt_buffer);
  if (st <= 2 || c->offload_params == ZEROC_OFFLOAD_NONE)
    add(p, D, ZEROC_TAG_PARAMS, b.params);
  else if (c->offload_params == ZEROC_OFFLOAD_CPU)
    add(p, ZEROC_MEM_PINNED, ZEROC_TAG_PARAMS, b.params);
  add(p, D, ZEROC_TAG_BUFFERS, b.own_gather);
  add(p, D, ZEROC_TAG_GRADS, b.grads + (st <= 1 ? b.accum : 0));
  if (st >= 2) add(p, D, ZEROC_TAG_BUFFERS, b.own_fgrad);
  if (pinned) add(p, D, ZEROC_TAG_WORKSPACE, (p->conv_p + p->conv_g) * b.compute_copy);
  add(p, D, ZEROC_TAG_ACTIVATIONS, (double)act_bytes * slots);
}

/* The units' flat lengths (as zeroc_shard lays them out) and their buffers. */
static zeroc_result_t units_bytes(pctx_t *p, const zeroc_layer_t *layers, int n, int slots) {
  double *S = calloc((size_t)n, sizeof *S), *N = calloc((size_t)n, sizeof *N);
  int *pinned = calloc((size_t)n, sizeof *pinned);
  zeroc_result_t res = ZEROC_OK;
  if (!S || !N || !pinned) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc_shard_predict: tables of %d units", n);
    goto exit;
  }
  double maxN = 0, maxNp = 0, maxS = 0, maxws = 0;
  for (int i = 0; i < n; i++) {
    if (layers[i].shares >= i || layers[i].shares < -1) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "unit %d ('%s') shares %d: must be -1 or the index of an earlier unit", i,
                       layers[i].name ? layers[i].name : "?", layers[i].shares);
      goto exit;
    }
    zeroc__flat_t f;
    res = zeroc__flat_layout(&layers[i], i, p->nd, 0, &f);
    if (res) goto exit;
    N[i] = (double)f.N, S[i] = (double)f.S;
    zeroc__flat_free(&f);
    if (layers[i].shares >= 0) pinned[layers[i].shares] = 1;
    maxS = S[i] > maxS ? S[i] : maxS;
    if ((double)layers[i].workspace_bytes > maxws) maxws = (double)layers[i].workspace_bytes;
  }
  for (int i = 0; i < n; i++) {
    maxN = N[i] > maxN ? N[i] : maxN;
    if (!pinned[i] && N[i] > maxNp) maxNp = N[i];
  }
  shared_bytes(p, n, maxNp, maxN, maxws);
  offload_bytes(p, S, n, maxS);
  for (int i = 0; i < n; i++) unit_bytes(p, N[i], pinned[i], layers[i].act_bytes, slots);
exit:
  free(S);
  free(N);
  free(pinned);
  return res;
}

zeroc_result_t zeroc_shard_predict(const zeroc_layer_t *layers, int n,
                                   const zeroc_shard_config_t *cfg,
                                   const zeroc_ctx_config_t *ctx_cfg, int world, int slots,
                                   zeroc_mem_prediction_t *out) {
  if (!layers || !ctx_cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_predict: layers %p, ctx_cfg %p, out %p: all are required",
                      (const void *)layers, (const void *)ctx_cfg, (void *)out);
  memset(out, 0, sizeof *out);
  if (n < 1 || world < 1 || slots < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_predict: %d units, world %d, slots %d: accepted n >= 1, "
                      "world >= 1, slots >= 0 (0: 1)",
                      n, world, slots);
  pctx_t p = {.out = out};
  zeroc_mesh_info_t mesh;
  ZEROC_CHECK(zeroc__shard_read_config(cfg, &p.c));
  ZEROC_CHECK(read_mesh(ctx_cfg, world, &mesh, &p.device));
  const zeroc_shard_config_t *c = &p.c;
  if (c->stage == 0 && mesh.dp_replicate > 1 && mesh.dp_shard > 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "HSDP (%d replicas) needs ZeRO stage 1, 2 or 3; stage 0 replicates over all "
                      "of dp",
                      mesh.dp_replicate);
  const zeroc__rule_names_t names = {"ZeRO stage", "pp", "parameter offload"};
  ZEROC_CHECK(zeroc__shard_check_rules(c->stage, mesh.pp, (int)c->offload_params, &names));
  ZEROC_CHECK(zeroc__shard_check_callbacks(layers, n, p.device, p.device));
  /* the dtypes and aliases zeroc_shard resolves (engine.c) */
  p.nd = c->stage == 0 ? 1 : mesh.dp_shard * mesh.cp;
  p.pb = (int)zeroc_dtype_size(c->param_dtype);
  p.cb = (int)zeroc_dtype_size(zeroc_kernels_compute_dtype(p.device, c->param_dtype));
  p.rb = zeroc__shard_grad_bytes(world, c->grad_accum, p.pb, (int)zeroc_dtype_size(c->reduce_dtype),
                                 p.cb);
  p.conv_p = p.cb != p.pb;
  p.conv_g = p.cb != p.rb;
  p.master = zeroc__shard_keeps_master(p.pb, c->offload_optimizer, c->offload_params);
  p.alias = zeroc__shard_alias(c->stage, p.nd, (int)c->offload_params, c->grad_accum);
  ZEROC_CHECK(units_bytes(&p, layers, n, slots ? slots : 1));
  for (int k = 0; k < ZEROC_MEM_KIND_COUNT; k++)
    for (int t = 0; t < ZEROC_TAG_COUNT; t++) out->total[k] += out->bytes[k][t];
  return ZEROC_OK;
}
