/*
 * shard/engine.c - zeroc_shard(): the settings and their defaults, the
 * agreement between ranks, each unit's buffers for its ZeRO stage (tabled in
 * shard/model.h), initial values and publishing the parameters; and
 * zeroc_model_destroy. The per-unit schedule is shard/schedule.c, the
 * optimizer step shard/step.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"
#include "runtime/runtime.h"
#include "shard/engine.h"
#include "shard/rules.h"
#include "shard/sizes.h"

/* zeroc/shard.h's limit: two stream channels per model, besides compute's and p2p's */
_Static_assert(2 * ZEROC_MAX_MODELS == ZEROC_P2P_CHANNEL - 1, "ZEROC_MAX_MODELS and the channels");

static size_t esz(zeroc_dtype_t dt) { return zeroc_dtype_size(dt); }

/* ---- config ------------------------------------------------------------------ */

/* The library's defaults for the fields a caller left unset (ZEROC_UNSET). */
static void resolve_defaults(zeroc_shard_config_t *c) {
  const float unset = (float)ZEROC_UNSET;
  if (c->stage == ZEROC_UNSET) c->stage = 3;
  if (c->param_dtype == ZEROC_DTYPE_UNSET) c->param_dtype = ZEROC_FP32;
  if (c->reduce_dtype == ZEROC_DTYPE_UNSET) c->reduce_dtype = ZEROC_FP32;
  if (c->prefetch == ZEROC_UNSET) c->prefetch = 2;
  if (c->recompute == ZEROC_UNSET) c->recompute = 0;
  if (c->grad_accum == ZEROC_UNSET) c->grad_accum = 1;
  if (c->beta1 == unset) c->beta1 = 0.9f;
  if (c->beta2 == unset) c->beta2 = 0.95f;
  if (c->eps == unset) c->eps = 1e-8f;
  if (c->weight_decay == unset) c->weight_decay = 0.0f;
  if (c->clip == unset) c->clip = 1.0f;
  if (c->seed == (uint64_t)ZEROC_UNSET) c->seed = 1;
  if (c->max_skipped == ZEROC_UNSET) c->max_skipped = 5;
  if (c->optimizer == ZEROC_OPTIMIZER_UNSET) c->optimizer = ZEROC_OPTIMIZER_ADAMW;
}

/* Copies a caller's versioned config over the "unset" initializer (an older,
 * smaller struct keeps the sentinels for the fields it lacks; NULL: all
 * unset) and resolves the defaults; *out is usable even when the struct is
 * rejected. Then checks the values. */
zeroc_result_t zeroc__shard_read_config(const zeroc_shard_config_t *in, zeroc_shard_config_t *out) {
  const zeroc_shard_config_t dflt = ZEROC_SHARD_CONFIG_INIT;
  *out = dflt;
  resolve_defaults(out);
  if (!in) return ZEROC_OK;
  if (in->magic != ZEROC_CONFIG_MAGIC ||
      in->size < offsetof(zeroc_shard_config_t, stage) + sizeof(int) || in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_config_t was not initialised with ZEROC_SHARD_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in->size, in->magic);
  *out = dflt;
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  resolve_defaults(out);
  ZEROC_CHECK(zeroc__shard_check_stage(out->stage, "ZeRO stage"));
  if (out->optimizer != ZEROC_OPTIMIZER_ADAMW)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "optimizer %d: accepted ZEROC_OPTIMIZER_ADAMW (adamw)",
                      (int)out->optimizer);
  if (out->param_dtype != ZEROC_FP32 && out->param_dtype != ZEROC_BF16)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "param dtype %s: accepted fp32, bf16",
                      zeroc_dtype_name(out->param_dtype));
  if (out->reduce_dtype != ZEROC_FP32 && out->reduce_dtype != ZEROC_BF16)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "reduce dtype %s: accepted fp32, bf16",
                      zeroc_dtype_name(out->reduce_dtype));
  if (out->prefetch < 0 || out->prefetch > 64)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "prefetch %d: accepted 0..64", out->prefetch);
  if (out->grad_accum < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "grad_accum %d: must be >= 1", out->grad_accum);
  if (!(out->beta1 >= 0 && out->beta1 < 1) || !(out->beta2 >= 0 && out->beta2 < 1) ||
      !(out->eps > 0) || !(out->weight_decay >= 0) || !(out->clip >= 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "AdamW settings beta1 %g beta2 %g eps %g weight_decay %g clip %g: betas in "
                      "[0, 1), eps > 0, weight_decay >= 0, clip >= 0",
                      out->beta1, out->beta2, out->eps, out->weight_decay, out->clip);
  if (out->max_skipped < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "max_skipped %d: must be >= 0", out->max_skipped);
  if ((unsigned)out->offload_optimizer > ZEROC_OFFLOAD_NVME ||
      (unsigned)out->offload_params > ZEROC_OFFLOAD_NVME)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "offload choice: accepted none, cpu, nvme");
  if (out->offload_params != ZEROC_OFFLOAD_NONE && out->stage != 3)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "parameter offload needs ZeRO stage 3 (stage is %d)",
                      out->stage);
  if ((out->offload_optimizer == ZEROC_OFFLOAD_NVME || out->offload_params == ZEROC_OFFLOAD_NVME) &&
      (!out->nvme_dir || !*out->nvme_dir))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "nvme offload needs an nvme directory");
  return ZEROC_OK;
}

/* A checksum of everything about the layer list that must agree across ranks. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t layers_checksum(const zeroc_layer_t *layers, int n) {
  uint64_t h = fnv(0xcbf29ce484222325ULL, &n, sizeof n);
  if (!layers) return h;
  for (int i = 0; i < n; i++) {
    const zeroc_layer_t *L = &layers[i];
    if (L->name) h = fnv(h, L->name, strlen(L->name));
    h = fnv(h, &L->nparams, sizeof L->nparams);
    h = fnv(h, &L->shares, sizeof L->shares);
    for (int j = 0; L->params && j < L->nparams; j++) {
      const zeroc_param_desc_t *p = &L->params[j];
      if (p->name) h = fnv(h, p->name, strlen(p->name));
      h = fnv(h, &p->ndim, sizeof p->ndim);
      for (int d = 0; d < p->ndim && d < ZEROC_MAX_DIMS; d++)
        h = fnv(h, &p->shape[d], sizeof p->shape[d]);
      h = fnv(h, &p->flags, sizeof p->flags);
      h = fnv(h, &p->init, sizeof p->init);
    }
  }
  return h;
}

/* Agreement before anything can fail on one rank only: with identical inputs
 * every later check fails identically everywhere. The settings must agree over
 * the world; the layer list only over the data-parallel group, since pipeline
 * stages hold different units. Hashes are cut to 62 bits so that their
 * negation (max via min) cannot overflow. */
static zeroc_result_t agree_on_inputs(zeroc_ctx_t *ctx, const zeroc_shard_config_t *c,
                                      const zeroc_layer_t *layers, int n) {
  int v[8] = {c->stage,     (int)c->param_dtype, (int)c->reduce_dtype,      c->prefetch,
              c->recompute, c->grad_accum,       (int)c->offload_optimizer, (int)c->offload_params};
  uint64_t hs = fnv(0xcbf29ce484222325ULL, v, sizeof v);
  int64_t hl = (int64_t)(layers_checksum(layers, n) >> 2), hw = (int64_t)(hs >> 2);
  int64_t dl[2] = {hl, -hl}, wl[3];
  CHK(zeroc__allreduce_host(zeroc__ctx_group(ctx, ZEROC_GROUP_DP), dl, 2, ZEROC_INT64, ZEROC_MIN));
  wl[0] = hw, wl[1] = -hw, wl[2] = dl[0] != -dl[1] ? -1 : 0;
  CHK(zeroc__allreduce_host(zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD), wl, 3, ZEROC_INT64,
                            ZEROC_MIN));
  if (wl[0] != -wl[1])
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "the shard settings differ between ranks (checksums %015llx and %015llx): "
                      "every rank must pass the same stage, dtypes, accumulation, recompute and "
                      "prefetch",
                      (unsigned long long)wl[0], (unsigned long long)-wl[1]);
  if (wl[2])
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "the layer lists differ between ranks of a data-parallel group (this rank's "
                      "group: checksums %015llx and %015llx): every data-parallel rank must pass "
                      "the same units, parameter names, shapes and flags",
                      (unsigned long long)dl[0], (unsigned long long)-dl[1]);
  return ZEROC_OK;
}

/* What the unit list must satisfy before it is flattened. */
static zeroc_result_t check_layers(zeroc_ctx_t *ctx, const zeroc_layer_t *layers, int n) {
  if (!layers)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_shard: the layer list is NULL (n %d)", n);
  if (n < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_shard: %d units; need at least one", n);
  for (int i = 0; i < n; i++) {
    const char *name = layers[i].name ? layers[i].name : "?";
    if (!layers[i].forward || !layers[i].backward)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d ('%s') has no forward or backward callback",
                        i, name);
    if (layers[i].shares >= i || layers[i].shares < -1)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "unit %d ('%s') shares %d: must be -1 or the index of an earlier unit", i,
                        name, layers[i].shares);
    for (int j = 0; layers[i].params && j < layers[i].nparams; j++) {
      const zeroc_param_desc_t *p = &layers[i].params[j];
      const char *pn = p->name ? p->name : "?";
      if ((unsigned)p->init > ZEROC_INIT_CUSTOM)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "unit %d ('%s') parameter %d ('%s'): init kind %d; accepted "
                          "ZEROC_INIT_NORMAL (0), _ZEROS (1), _ONES (2), _UNIFORM (3), _CUSTOM (4)",
                          i, name, j, pn, (int)p->init);
      if (p->init == ZEROC_INIT_CUSTOM && !p->init_fn)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "unit %d ('%s') parameter %d ('%s'): ZEROC_INIT_CUSTOM needs an init_fn",
                          i, name, j, pn);
    }
  }
  /* host callbacks cannot read a cuda context's pointers (zeroc/layer.h) */
  return zeroc__shard_check_callbacks(layers, n, zeroc_ctx_device(ctx),
                                      zeroc__ctx_device_asked(ctx));
}

/* The model keeps its own copy of a unit's descriptors (its name, its
 * parameters and their names): the caller may free or reuse its arrays once
 * zeroc_shard returned. */
static char *dup_name(const char *s) { return s ? strdup(s) : NULL; }

static zeroc_result_t copy_layer(zeroc_layer_t *dst, const zeroc_layer_t *src) {
  *dst = *src;
  dst->name = NULL;
  dst->params = NULL;
  zeroc_param_desc_t *ps = calloc((size_t)src->nparams, sizeof *ps);
  char *name = dup_name(src->name);
  if (!ps || (src->name && !name)) {
    free(ps);
    free(name);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "a copy of unit '%s'", src->name ? src->name : "?");
  }
  dst->name = name;
  dst->params = ps;
  for (int j = 0; j < src->nparams; j++) {
    ps[j] = src->params[j];
    ps[j].name = dup_name(src->params[j].name);
    if (src->params[j].name && !ps[j].name)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "a copy of parameter '%s'", src->params[j].name);
  }
  return ZEROC_OK;
}

static void free_layer_copy(zeroc_layer_t *L) {
  zeroc_param_desc_t *ps = (zeroc_param_desc_t *)L->params;
  for (int j = 0; ps && j < L->nparams; j++) free((char *)ps[j].name);
  free(ps);
  free((char *)L->name);
  L->params = NULL;
  L->name = NULL;
}

zeroc_result_t zeroc__model_check(const zeroc_model_t *m, const char *fn) {
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: the model is NULL", fn);
  if (m->magic != ZEROC__MODEL_MAGIC)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: not a live model (already destroyed, or not made by zeroc_shard)", fn);
  return ZEROC_OK;
}

/* ---- pools ---------------------------------------------------------------------- */

static zeroc_result_t pool_init(zeroc_model_t *m, zeroc__pool_t *p, int n, size_t bytes,
                                zeroc_memtag_t tag) {
  p->n = n;
  p->bytes = bytes;
  if (!n || !bytes) return ZEROC_OK;
  p->s = calloc((size_t)n, sizeof *p->s);
  if (!p->s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pool slots");
  for (int i = 0; i < n; i++) {
    CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, tag, bytes, &p->s[i].ptr));
    CHK(zeroc_event_create(m->ctx, &p->s[i].free_ev));
  }
  return ZEROC_OK;
}

static void pool_fini(zeroc_model_t *m, zeroc__pool_t *p) {
  for (int i = 0; p->s && i < p->n; i++) {
    zeroc_mem_free(m->ctx, p->s[i].ptr);
    zeroc_event_destroy(p->s[i].free_ev);
  }
  free(p->s);
  p->s = NULL;
}

uint64_t zeroc__model_comm_bytes(const zeroc_model_t *m) {
  uint64_t b = 0;
  /* the data-parallel collectives, the layers' own tensor-parallel ones, the
   * pipeline's point-to-point activations and gradients, and context
   * parallelism's K/V hops or all-to-alls */
  const zeroc_group_t *gs[5] = {m->shard_g, m->rep_g, zeroc__ctx_group(m->ctx, ZEROC_GROUP_TP),
                                zeroc__ctx_group(m->ctx, ZEROC_GROUP_PP),
                                zeroc__ctx_group(m->ctx, ZEROC_GROUP_CP)};
  for (int i = 0; i < 5; i++) {
    zeroc_comm_counters_t c;
    zeroc__group_counters(gs[i], &c);
    for (int k = 0; k < ZEROC_COLL_COUNT; k++) b += c.bus_bytes[k];
  }
  return b;
}

/* ---- building the model ---------------------------------------------------------- */

static zeroc_result_t alloc_dev(zeroc_model_t *m, zeroc_memtag_t tag, size_t bytes, void **p) {
  zeroc_result_t r = zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, tag, bytes, p);
  if (!r && (tag == ZEROC_TAG_PARAMS || tag == ZEROC_TAG_GRADS)) m->state_bytes += bytes;
  return r;
}

static zeroc_result_t unit_alloc(zeroc_model_t *m, zeroc__unit_t *u) {
  int st = m->cfg.stage;
  size_t S = u->f.S;
  /* the bytes of each buffer (shard/sizes.c, which the planner calls too) */
  u->gshard_dt = st <= 1 || m->cfg.grad_accum == 1 ? m->rdt : ZEROC_FP32;
  zeroc__unit_bytes_t b;
  zeroc__shard_unit_bytes(st, (double)u->f.N, m->shard_g->size, u->pinned, (int)esz(m->pdt),
                          (int)esz(m->rdt),
                          zeroc__shard_accum_bytes(m->cfg.grad_accum, (int)esz(m->rdt)),
                          (int)esz(m->cdt), !m->master_alias, m->alias, &b);
  if (m->cfg.offload_optimizer == ZEROC_OFFLOAD_NONE) {
    size_t ob = (size_t)b.opt_buffer;
    if (!m->master_alias) /* else the compute shard, once it is allocated below */
      CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER, ob, (void **)&u->master));
    CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER, ob, (void **)&u->m));
    CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_OPTIMIZER, ob, (void **)&u->v));
    m->state_bytes += (size_t)b.optimizer;
    CHK(zeroc_memset_async(m->compute, u->m, 0, S * 4));
    CHK(zeroc_memset_async(m->compute, u->v, 0, S * 4));
  } /* else: master, m and v live in the offload state (shard/offload.c) */
  if (st <= 2) {
    CHK(alloc_dev(m, ZEROC_TAG_PARAMS, (size_t)b.params, &u->full_own));
    u->full = u->full_own;
    u->cshard = (char *)u->full_own + u->f.shard_off * esz(m->pdt);
  } else {
    if (m->cfg.offload_params == ZEROC_OFFLOAD_NONE)
      CHK(alloc_dev(m, ZEROC_TAG_PARAMS, (size_t)b.params, &u->cshard));
    else if (m->cfg.offload_params == ZEROC_OFFLOAD_CPU)
      CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_PINNED, ZEROC_TAG_PARAMS, (size_t)b.params,
                          &u->cshard));
    /* nvme: the shard lives in its swap file */
    if (u->pinned && !(m->alias & ZEROC__ALIAS_PARAMS)) {
      CHK(alloc_dev(m, ZEROC_TAG_BUFFERS, (size_t)b.own_gather, &u->full_own));
      u->own_pslot.ptr = u->full_own;
      CHK(zeroc_event_create(m->ctx, &u->own_pslot.free_ev));
    }
  }
  if (m->master_alias) u->master = (float *)u->cshard; /* fp32: the shard is its own master */
  if (st <= 1) {
    CHK(alloc_dev(m, ZEROC_TAG_GRADS, (size_t)b.grads, &u->fgrad_own));
    u->gshard = st == 0 ? u->fgrad_own : (char *)u->fgrad_own + u->f.shard_off * esz(m->rdt);
    if (b.accum > 0) CHK(alloc_dev(m, ZEROC_TAG_GRADS, (size_t)b.accum, (void **)&u->gacc));
  } else {
    CHK(alloc_dev(m, ZEROC_TAG_GRADS, (size_t)b.grads, &u->gshard));
    if (u->pinned && !(m->alias & ZEROC__ALIAS_GRADS)) {
      CHK(alloc_dev(m, ZEROC_TAG_BUFFERS, (size_t)b.own_fgrad, &u->fgrad_own));
      u->own_gslot.ptr = u->fgrad_own;
      CHK(zeroc_event_create(m->ctx, &u->own_gslot.free_ev));
    }
  }
  if (u->pinned) {
    if (m->conv_p) CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)b.compute_copy, &u->view));
    if (m->conv_g) CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)b.compute_copy, &u->cgrad));
  } else {
    u->view = m->conv_view;
    u->cgrad = m->conv_cgrad;
  }
  CHK(zeroc_event_create(m->ctx, &u->ev_gathered));
  CHK(zeroc_event_create(m->ctx, &u->ev_bwd));
  CHK(zeroc_event_create(m->ctx, &u->ev_reduced));
  u->pviews = calloc((size_t)u->f.n, sizeof(void *));
  u->gviews = calloc((size_t)u->f.n, sizeof(void *));
  u->saved_in = calloc((size_t)m->slots, sizeof(void *));
  if (!u->pviews || !u->gviews || !u->saved_in)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "parameter views");
  for (int j = 0; j < u->f.n; j++) u->tied |= (u->f.p[j].flags & ZEROC_PARAM_TIED) != 0;
  return zeroc__model_acts_alloc(m, (int)(u - m->u), m->slots);
}

zeroc_result_t zeroc__model_acts_alloc(zeroc_model_t *m, int unit, int slots) {
  zeroc__unit_t *u = &m->u[unit];
  for (int s = 0; u->acts && s < u->nacts; s++) zeroc_mem_free(m->ctx, u->acts[s]);
  free(u->acts);
  u->acts = NULL;
  u->nacts = 0;
  if (!slots || !u->L.act_bytes) return ZEROC_OK;
  u->acts = calloc((size_t)slots, sizeof *u->acts);
  if (!u->acts)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "unit %d: activation buffers of %d slots", unit, slots);
  u->nacts = slots;
  /* one allocation per slot of exactly act_bytes: the accountant shows what the layer
   * registered, byte for byte */
  for (int s = 0; s < slots; s++)
    CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, u->L.act_bytes,
                        &u->acts[s]));
  return ZEROC_OK;
}

uint64_t zeroc__model_act_bytes(const zeroc_model_t *m) {
  uint64_t b = 0;
  for (int i = 0; i < m->n; i++) b += (uint64_t)m->u[i].nacts * m->u[i].L.act_bytes;
  return b;
}

/* Initial values: each rank draws its own shard into the master. */
static zeroc_result_t unit_init(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (m->ostate) {
    zeroc__state_view_t v;
    CHK(zeroc__moff_state(m, i, &v));
    zeroc__flat_init_shard(&u->L, i, &u->f, m->cfg.seed, v.master);
    memset(v.m, 0, u->f.S * 4);
    memset(v.v, 0, u->f.S * 4);
    return zeroc__moff_state_done(m, i);
  }
  zeroc__view_t hv;
  CHK(zeroc__view_host(m->compute, u->master, u->f.S * 4, ZEROC_VIEW_OUT, NULL, &hv));
  zeroc__flat_init_shard(&u->L, i, &u->f, m->cfg.seed, hv.ptr);
  return zeroc__view_end(&hv);
}

zeroc_result_t zeroc__model_store_params_from_host(zeroc_model_t *m, int i, const float *master) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.offload_params != ZEROC_OFFLOAD_NONE) return zeroc__moff_param_store(m, i, master);
  /* cast on the host into a host view of the compute shard (staged through
   * the pinned host_param where the shard is not host memory) */
  zeroc__view_t hv;
  CHK(zeroc__view_host(m->compute, u->cshard, u->f.S * esz(m->pdt), ZEROC_VIEW_OUT, m->host_param,
                       &hv));
  zeroc_result_t r = zeroc_k_host_cast(hv.ptr, m->pdt, master, ZEROC_FP32, u->f.S);
  zeroc_result_t e = zeroc__view_end(&hv);
  return r ? r : e;
}

zeroc_result_t zeroc__model_publish(zeroc_model_t *m) {
  if (m->ostate) {
    /* the master is on the host (or on NVMe: three units resident at a time) */
    CHK(zeroc__moff_state_prefetch(m, 0));
    for (int i = 0; i < m->n; i++) {
      zeroc__state_view_t v;
      CHK(zeroc__moff_state_prefetch(m, i + 1));
      CHK(zeroc__moff_state(m, i, &v));
      CHK(zeroc__model_store_params_from_host(m, i, v.master));
      CHK(zeroc__moff_state_done(m, i));
    }
  } else {
    for (int i = 0; i < m->n; i++) {
      zeroc__unit_t *u = &m->u[i];
      if (m->cfg.offload_params != ZEROC_OFFLOAD_NONE) {
        /* offloaded parameters with the optimizer on the device: through the host */
        zeroc__view_t hv; /* staged in host_grad: S floats of pinned memory */
        CHK(zeroc__view_host(m->compute, u->master, u->f.S * 4, ZEROC_VIEW_IN, m->host_grad, &hv));
        zeroc_result_t r = zeroc__moff_param_store(m, i, hv.ptr);
        zeroc_result_t e = zeroc__view_end(&hv);
        CHK(r ? r : e);
      } else if (!m->cshard_current && !m->master_alias) {
        CHK(zeroc_k_cast(m->k, m->compute, u->cshard, m->pdt, u->master, ZEROC_FP32, u->f.S));
      }
    }
  }
  return zeroc__model_publish_gathers(m);
}

zeroc_result_t zeroc__model_publish_gathers(zeroc_model_t *m) {
  int st = m->cfg.stage;
  m->cshard_current = 0;
  for (int i = 0; i < m->n; i++) m->u[i].view_ready = 0;
  m->conv_owner = -1;
  CHK(zeroc_event_record(m->ev_published, m->compute));
  CHK(zeroc_stream_wait_event(m->gather_s, m->ev_published));
  if (st == 1 || st == 2) {
    for (int i = 0; i < m->n; i++) {
      zeroc__unit_t *u = &m->u[i];
      CHK(zeroc__allgather(m->shard_g, m->gather_s, u->cshard, u->full_own, u->f.S, m->pdt));
      CHK(zeroc_event_record(u->ev_gathered, m->gather_s));
    }
  }
  return ZEROC_OK;
}

/* The buffers the units share: compute copies, the gather, full-gradient and
 * reduce-scatter pools, the layers' workspace and AdamW's fp32 shard copy. Their bytes
 * come from shard/sizes.c, which the planner calls too. */
static zeroc_result_t shared_alloc(zeroc_model_t *m, size_t maxNp, size_t maxN, size_t maxws) {
  const int st = m->cfg.stage;
  zeroc__pool_bytes_t pb;
  m->alias =
      zeroc__shard_alias(st, m->shard_g->size, (int)m->cfg.offload_params, m->cfg.grad_accum);
  zeroc__shard_pool_bytes(st, m->K, m->n, m->cfg.grad_accum, (double)maxNp, (double)maxN,
                          m->shard_g->size, (int)esz(m->pdt), (int)esz(m->rdt), (int)esz(m->cdt),
                          m->alias, &pb);
  if (m->conv_p && maxNp)
    CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.compute_copy, &m->conv_view));
  if (m->conv_g && maxNp)
    CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.compute_copy, &m->conv_cgrad));
  if (maxNp && pb.gather_n)
    CHK(pool_init(m, &m->gpool, pb.gather_n, (size_t)pb.gather, ZEROC_TAG_BUFFERS));
  if (maxNp && pb.fgrad_n)
    CHK(pool_init(m, &m->fgpool, pb.fgrad_n, (size_t)pb.fgrad, ZEROC_TAG_BUFFERS));
  CHK(pool_init(m, &m->tpool, pb.rs_n, (size_t)pb.rs, ZEROC_TAG_BUFFERS));
  if (maxws) CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, maxws, &m->ws));
  if (m->rdt != ZEROC_FP32)
    CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.fp32_shard, (void **)&m->adam_tmp));
  return ZEROC_OK;
}

/* Whether the buffers take micro-steps that accumulate, whatever count a step
 * asks for (zeroc_model_set_accum): those of a model made with grad_accum > 1, or
 * at stages 0-1 with fp32 gradients everywhere, where accumulating needs no
 * buffer of its own (no fp32 running sum beside 16-bit grads, no reduce-scatter
 * outputs, no grad shard standing in for the full grads; shard/sizes.c). */
static int accumulates(const zeroc_model_t *m) {
  return m->cfg.grad_accum > 1 ||
         (m->cfg.stage <= 1 && m->rdt == ZEROC_FP32 && m->cfg.reduce_dtype == ZEROC_FP32);
}

static void model_free(zeroc_model_t *m);

zeroc_result_t zeroc_shard(zeroc_ctx_t *ctx, const zeroc_layer_t *layers, int n,
                           const zeroc_shard_config_t *cfg, zeroc_model_t **out) {
  zeroc_result_t res = ZEROC_OK;
  CHK(zeroc__ctx_check(ctx, "zeroc_shard"));
  if (!out)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                          "zeroc_shard: the output pointer is NULL (pass the "
                                          "address of a zeroc_model_t *)"));
  *out = NULL;
  /* the settings, resolved; a rejected config is reported after the agreement */
  zeroc_shard_config_t c;
  char cfg_err[ZEROC_ERRMSG_MAX] = "";
  zeroc_result_t cfg_res = zeroc__shard_read_config(cfg, &c);
  if (cfg_res) snprintf(cfg_err, sizeof cfg_err, "%s", zeroc__tls_error());
  CHK(zeroc__ctx_ret(ctx, agree_on_inputs(ctx, &c, layers, n)));
  zeroc_model_t *m = calloc(1, sizeof *m);
  if (!m) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "model struct"));
  m->ctx = ctx;
  m->inject.specs = zeroc__ctx_fault(ctx);
  m->inject.rank = zeroc_ctx_mesh(ctx)->rank;
  m->conv_owner = -1;
  m->slots = 1;
  m->cfg = c;
  m->run.accum = c.grad_accum;
  if (cfg_res) {
    zeroc__tls_error_set(cfg_err);
    ZEROC_TRY(cfg_res);
  }
  ZEROC_TRY(check_layers(ctx, layers, n));
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int st = m->cfg.stage;
  if (st == 0 && mesh->dp_replicate > 1 && mesh->dp_shard > 1) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "HSDP (%d replicas) needs ZeRO stage 1, 2 or 3; stage 0 replicates over all "
                     "of dp",
                     mesh->dp_replicate);
    goto fail;
  }
  m->n = n;
  m->pdt = m->cfg.param_dtype;
  m->cdt = zeroc_kernels_compute_dtype(zeroc_ctx_device(ctx), m->pdt);
  /* the reduce dtype, or the parameters' where nothing is summed (shard/sizes.c) */
  const int gb = zeroc__shard_grad_bytes(mesh->world, m->cfg.grad_accum, (int)esz(m->pdt),
                                         (int)esz(m->cfg.reduce_dtype), (int)esz(m->cdt));
  m->rdt = gb == (int)esz(m->cfg.reduce_dtype) ? m->cfg.reduce_dtype : m->pdt;
  m->accum_any = accumulates(m);
  m->conv_p = m->cdt != m->pdt;
  m->conv_g = m->cdt != m->rdt;
  m->master_alias =
      !zeroc__shard_keeps_master((int)esz(m->pdt), m->cfg.offload_optimizer, m->cfg.offload_params);
  m->K = m->cfg.prefetch;
  m->compute = zeroc_ctx_compute_stream(ctx);
  if (st == 0) {
    ZEROC_TRY(zeroc__group_split(zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD), mesh->rank, 0, "self",
                                 &m->self_g));
    m->shard_g = m->self_g;
    m->rep_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP);
  } else {
    m->shard_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP_SHARD);
    m->rep_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP_REPLICATE);
  }
  ZEROC_TRY(
      zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), m->cdt, &m->k));
  res = zeroc_stream_create(ctx, 1, &m->gather_s);
  if (!res) res = zeroc_stream_create(ctx, 0, &m->reduce_s);
  if (res == ZEROC_ERR_INVALID_ARG) /* no communicator channel left (zeroc/shard.h) */
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "zeroc_shard: at most %d models can be alive at once on one context, fewer "
                     "with streams of your own (each model's gather and reduce streams hold 2 "
                     "of the context's %d collective channels): destroy a model first",
                     ZEROC_MAX_MODELS, 2 * ZEROC_MAX_MODELS);
  if (res) goto fail;
  ZEROC_TRY(zeroc_event_create(ctx, &m->ev_published));

  m->u = calloc((size_t)n, sizeof *m->u);
  if (!m->u) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "units");
    goto fail;
  }
  size_t maxN = 0, maxS = 0, maxNp = 0, maxws = 0;
  for (int i = 0; i < n; i++) {
    zeroc__unit_t *u = &m->u[i];
    ZEROC_TRY(zeroc__flat_layout(&layers[i], i, m->shard_g->size, m->shard_g->rank, &u->f));
    ZEROC_TRY(copy_layer(&u->L, &layers[i]));
    if (layers[i].shares >= 0) m->u[layers[i].shares].pinned = 1;
    if (u->f.S > maxS) maxS = u->f.S;
    if (layers[i].workspace_bytes > maxws) maxws = layers[i].workspace_bytes;
  }
  for (int i = 0; i < n; i++) {
    if (m->u[i].f.N > maxN) maxN = m->u[i].f.N;
    if (!m->u[i].pinned && m->u[i].f.N > maxNp) maxNp = m->u[i].f.N;
  }
  ZEROC_TRY(shared_alloc(m, maxNp, maxN, maxws));
  ZEROC_TRY(
      alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)zeroc__shard_step_bytes(), (void **)&m->step_acc));
  ZEROC_TRY(zeroc_memset_async(m->compute, m->step_acc, 0, (size_t)zeroc__shard_step_bytes()));
  ZEROC_TRY(zeroc__readback_alloc(zeroc__ctx_devmem(ctx), ZEROC_TAG_WORKSPACE,
                                  (size_t)zeroc__shard_step_bytes(), (void **)&m->step_host));
  ZEROC_TRY(zeroc_event_create(ctx, &m->ev_step));
  ZEROC_TRY(zeroc__moff_init(m, maxS));
  if (m->cfg.offload_params != ZEROC_OFFLOAD_NONE && !m->host_grad)
    ZEROC_TRY(zeroc__pinned_get(m->pool, (size_t)zeroc__shard_staging_bytes((double)maxS, 4),
                                ZEROC_TAG_BUFFERS, (void **)&m->host_grad));
  for (int i = 0; i < n; i++) ZEROC_TRY(unit_alloc(m, &m->u[i]));
  double t_init = zeroc__now_s();
  uint64_t init_n = 0;
  for (int i = 0; i < n; i++) {
    ZEROC_TRY(unit_init(m, i));
    init_n += m->u[i].f.S;
  }
  ZINFO(SHARD, "model: initial values of %llu shard elements in %.2f s (%d threads)",
        (unsigned long long)init_n, zeroc__now_s() - t_init, omp_get_max_threads());
  /* allocation can fail on one rank only: agree before the first collective */
  ZEROC_TRY(zeroc_ctx_agree(ctx, ZEROC_OK));
  ZEROC_TRY(zeroc__model_publish(m));
  ZEROC_TRY(zeroc_stream_sync(m->gather_s));
  m->run.bytes_mark = zeroc__model_comm_bytes(m);
  ZINFO(SHARD,
        "model: %d units, stage %d, shard group %d, replicas %d, prefetch %d, params %s, "
        "reduce %s, compute %s%s%s, activations %llu bytes",
        n, st, m->shard_g->size, m->rep_g->size, m->K, zeroc_dtype_name(m->pdt),
        zeroc_dtype_name(m->rdt), zeroc_dtype_name(m->cdt), m->conv_p ? " (param copies)" : "",
        m->conv_g ? " (grad copies)" : "", (unsigned long long)zeroc__model_act_bytes(m));
  res = ZEROC_OK;
fail:
  /* A rank that failed tells the others, which are waiting in an agreement. */
  if (res != ZEROC_OK && res != ZEROC_ERR_REMOTE) res = zeroc_ctx_agree(ctx, res);
  if (res == ZEROC_OK) res = zeroc_ctx_agree(ctx, res);
  if (res != ZEROC_OK) {
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc_last_error(ctx));
    model_free(m);
    zeroc__tls_error_set(msg);
    return zeroc__ctx_ret(ctx, res);
  }
  m->magic = ZEROC__MODEL_MAGIC;
  zeroc__ctx_models(ctx, +1); /* zeroc_ctx_finalize refuses while it lives */
  *out = m;
  return ZEROC_OK;
}

void zeroc_model_destroy(zeroc_model_t *m) {
  if (!m) return;
  /* a second destroy (or a handle from elsewhere) is said, not freed again */
  if (zeroc__model_check(m, "zeroc_model_destroy")) return;
  zeroc_ctx_t *ctx = m->ctx;
  m->magic = 0;
  if (m->pipe.backref) *m->pipe.backref = NULL; /* its pipeline outlives it */
  model_free(m);
  zeroc__ctx_models(ctx, -1); /* last: it may free a context destroyed before its models */
}

static void model_free(zeroc_model_t *m) {
  if (!m) return;
  if (m->gather_s) zeroc_stream_sync(m->gather_s);
  if (m->reduce_s) zeroc_stream_sync(m->reduce_s);
  for (int i = 0; m->u && i < m->n; i++) {
    zeroc__unit_t *u = &m->u[i];
    if (!m->master_alias) zeroc_mem_free(m->ctx, u->master);
    zeroc_mem_free(m->ctx, u->m);
    zeroc_mem_free(m->ctx, u->v);
    if (m->cfg.stage == 3 && m->cfg.offload_params != ZEROC_OFFLOAD_NVME)
      zeroc_mem_free(m->ctx, u->cshard);
    zeroc_mem_free(m->ctx, u->full_own);
    zeroc_mem_free(m->ctx, u->fgrad_own);
    zeroc_mem_free(m->ctx, u->gacc);
    if (m->cfg.stage >= 2) zeroc_mem_free(m->ctx, u->gshard);
    if (u->pinned) {
      zeroc_mem_free(m->ctx, u->view);
      zeroc_mem_free(m->ctx, u->cgrad);
    }
    zeroc_event_destroy(u->own_pslot.free_ev);
    zeroc_event_destroy(u->own_gslot.free_ev);
    zeroc_event_destroy(u->ev_gathered);
    zeroc_event_destroy(u->ev_bwd);
    zeroc_event_destroy(u->ev_reduced);
    free(u->pviews);
    free(u->gviews);
    free(u->saved_in);
    zeroc__model_acts_alloc(m, i, 0);
    zeroc__flat_free(&u->f);
    free_layer_copy(&u->L);
  }
  free(m->u);
  zeroc__moff_fini(m);
  pool_fini(m, &m->gpool);
  pool_fini(m, &m->fgpool);
  pool_fini(m, &m->tpool);
  zeroc_mem_free(m->ctx, m->conv_view);
  zeroc_mem_free(m->ctx, m->conv_cgrad);
  zeroc_mem_free(m->ctx, m->ws);
  zeroc_mem_free(m->ctx, m->adam_tmp);
  zeroc_mem_free(m->ctx, m->step_acc);
  zeroc_mem_free(m->ctx, m->step_host);
  zeroc_event_destroy(m->ev_step);
  zeroc_event_destroy(m->ev_published);
  zeroc_stream_destroy(m->gather_s);
  zeroc_stream_destroy(m->reduce_s);
  zeroc__group_destroy(m->self_g);
  zeroc_kernels_destroy(m->k);
  zeroc__handle_retire(m); /* its cleared magic catches a later use */
}
