/*
 * shard/engine.c - zeroc_shard() and the per-unit schedule of forward and
 * backward: gather (prefetched K units ahead on the gather stream), compute,
 * release; backward, then reduce-scatter on the reduce stream while the next
 * unit computes. The buffers each stage keeps are tabled in shard/engine.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"
#include "runtime/ctx.h" /* m->ctx->fault, until it asks zeroc__ctx_fault */
#include "kernels/cpu/cpu_kernels.h"
#include "shard/engine.h"
#include "shard/sizes.h"

static size_t esz(zeroc_dtype_t dt) { return zeroc_dtype_size(dt); }

/* ---- config ------------------------------------------------------------------ */

static zeroc_result_t read_config(const zeroc_shard_config_t *in, zeroc_shard_config_t *out) {
  const zeroc_shard_config_t dflt = ZEROC_SHARD_CONFIG_INIT;
  *out = dflt;
  if (!in) return ZEROC_OK;
  if (in->magic != ZEROC_CONFIG_MAGIC || in->size < offsetof(zeroc_shard_config_t, stage) + sizeof(int) ||
      in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_config_t was not initialised with ZEROC_SHARD_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in->size, in->magic);
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  if (out->stage < 0 || out->stage > 3)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "ZeRO stage %d: accepted 0, 1, 2, 3", out->stage);
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
  if ((unsigned)out->offload_optimizer > ZEROC_OFFLOAD_NVME || (unsigned)out->offload_params > ZEROC_OFFLOAD_NVME)
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
      for (int d = 0; d < p->ndim && d < ZEROC_MAX_DIMS; d++) h = fnv(h, &p->shape[d], sizeof p->shape[d]);
      h = fnv(h, &p->flags, sizeof p->flags);
      h = fnv(h, &p->init, sizeof p->init);
    }
  }
  return h;
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

/* Takes a free slot; `consumer` (the stream that will write it) waits until the
 * previous user released it. */
static zeroc_result_t slot_acquire(zeroc__pool_t *p, zeroc_stream_t *consumer, zeroc__slot_t **out) {
  *out = NULL; /* written on every path: callers' slots are never left unset */
  for (int i = 0; i < p->n; i++) {
    if (!p->s[i].busy) {
      p->s[i].busy = 1;
      if (consumer) CHK(zeroc_stream_wait_event(consumer, p->s[i].free_ev));
      *out = &p->s[i];
      return ZEROC_OK;
    }
  }
  return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "no free buffer slot among %d (schedule bug)", p->n);
}

/* Gives a slot back once the work enqueued so far on `last_user` is done. */
static zeroc_result_t slot_release(zeroc__slot_t *s, zeroc_stream_t *last_user) {
  if (!s) return ZEROC_OK;
  s->busy = 0;
  return zeroc_event_record(s->free_ev, last_user);
}

zeroc_result_t zeroc__model_wait_comm(zeroc_model_t *m, zeroc_event_t *e) {
  if (m->compute->inline_) {
    int done = 0;
    CHK(zeroc_event_query(e, &done));
    if (done) return zeroc_event_sync(e); /* still returns the comm's error, if any */
    double t0 = zeroc__now_ms();
    zeroc_result_t r = zeroc_event_sync(e);
    m->exposed_ms += zeroc__now_ms() - t0;
    return r;
  }
  return zeroc_stream_wait_event(m->compute, e);
}

uint64_t zeroc__model_comm_bytes(const zeroc_model_t *m) {
  uint64_t b = 0;
  /* the data-parallel collectives, the layers' own tensor-parallel ones, and
   * the pipeline's point-to-point activations and gradients */
  const zeroc_group_t *gs[4] = {m->shard_g, m->rep_g, zeroc__ctx_group(m->ctx, ZEROC_GROUP_TP),
                                zeroc__ctx_group(m->ctx, ZEROC_GROUP_PP)};
  for (int i = 0; i < 4; i++) {
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
                          (int)esz(m->rdt), (int)esz(u->gshard_dt), &b);
  if (m->cfg.offload_optimizer == ZEROC_OFFLOAD_NONE) {
    size_t ob = (size_t)b.opt_buffer;
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
      CHK(zeroc_mem_alloc(m->ctx, ZEROC_MEM_PINNED, ZEROC_TAG_PARAMS, (size_t)b.params, &u->cshard));
    /* nvme: the shard lives in its swap file */
    if (u->pinned) {
      CHK(alloc_dev(m, ZEROC_TAG_BUFFERS, (size_t)b.own_gather, &u->full_own));
      u->own_pslot.ptr = u->full_own;
      CHK(zeroc_event_create(m->ctx, &u->own_pslot.free_ev));
    }
  }
  if (st <= 1) {
    CHK(alloc_dev(m, ZEROC_TAG_GRADS, (size_t)b.grads, &u->fgrad_own));
    u->gshard = st == 0 ? u->fgrad_own : (char *)u->fgrad_own + u->f.shard_off * esz(m->rdt);
  } else {
    CHK(alloc_dev(m, ZEROC_TAG_GRADS, (size_t)b.grads, &u->gshard));
    if (u->pinned) {
      CHK(alloc_dev(m, ZEROC_TAG_BUFFERS, (size_t)b.own_fgrad, &u->fgrad_own));
      u->own_gslot.ptr = u->fgrad_own;
      CHK(zeroc_event_create(m->ctx, &u->own_gslot.free_ev));
    }
  }
  if (m->conv) {
    if (u->pinned) {
      CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)b.fp32_copy, (void **)&u->view));
      CHK(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)b.fp32_copy, (void **)&u->cgrad));
    } else {
      u->view = m->conv_view;
      u->cgrad = m->conv_cgrad;
    }
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
  return ZEROC_OK;
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
  if (m->compute->inline_) {
    zeroc__flat_init_shard(&u->L, i, &u->f, m->cfg.seed, u->master);
    return ZEROC_OK;
  }
  float *tmp = malloc(u->f.S * 4);
  if (!tmp) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "init staging of %llu floats", (unsigned long long)u->f.S);
  zeroc__flat_init_shard(&u->L, i, &u->f, m->cfg.seed, tmp);
  zeroc_result_t r = zeroc_memcpy_async(m->compute, u->master, tmp, u->f.S * 4);
  if (!r) r = zeroc_stream_sync(m->compute);
  free(tmp);
  return r;
}

zeroc_result_t zeroc__model_store_params_from_host(zeroc_model_t *m, int i, const float *master) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.offload_params != ZEROC_OFFLOAD_NONE) return zeroc__moff_param_store(m, i, master);
  if (m->compute->inline_) { /* cpu: the compute shard is host memory */
    zeroc__cpu_cast(u->cshard, m->pdt, master, ZEROC_FP32, u->f.S);
    return ZEROC_OK;
  }
  /* cuda: cast on the host, copy up, and wait before the staging is reused */
  zeroc__cpu_cast(m->host_param, m->pdt, master, ZEROC_FP32, u->f.S);
  CHK(zeroc_memcpy_async(m->compute, u->cshard, m->host_param, u->f.S * esz(m->pdt)));
  return zeroc_stream_sync(m->compute);
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
        float *h = m->host_grad; /* S floats of pinned staging */
        CHK(zeroc_memcpy_async(m->compute, h, u->master, u->f.S * 4));
        CHK(zeroc_stream_sync(m->compute));
        CHK(zeroc__moff_param_store(m, i, h));
      } else {
        CHK(zeroc_k_cast(m->k, m->compute, u->cshard, m->pdt, u->master, ZEROC_FP32, u->f.S));
      }
    }
  }
  return zeroc__model_publish_gathers(m);
}

zeroc_result_t zeroc__model_publish_gathers(zeroc_model_t *m) {
  int st = m->cfg.stage;
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

zeroc_result_t zeroc_shard(zeroc_ctx_t *ctx, const zeroc_layer_t *layers, int n,
                           const zeroc_shard_config_t *cfg, zeroc_model_t **out) {
  zeroc_result_t res = ZEROC_OK;
  if (!ctx || !out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_shard: NULL ctx or output");
  *out = NULL;
  /* The checksums come first, before any check that could fail on one rank
   * only: with identical lists every later check fails identically everywhere.
   * The settings must agree over the world; the layer list only over the
   * data-parallel group, since pipeline stages hold different units. Hashes
   * are cut to 62 bits so that their negation (max via min) cannot overflow. */
  uint64_t hs = 0xcbf29ce484222325ULL;
  if (cfg) { /* the settings every rank must share */
    int v[8] = {cfg->stage,     (int)cfg->param_dtype, (int)cfg->reduce_dtype,
                cfg->prefetch,  cfg->recompute,        cfg->grad_accum,
                (int)cfg->offload_optimizer, (int)cfg->offload_params};
    hs = fnv(hs, v, sizeof v);
  }
  int64_t hl = (int64_t)(layers_checksum(layers, n) >> 2), hw = (int64_t)(hs >> 2);
  int64_t dl[2] = {hl, -hl}, wl[3];
  zeroc_group_t *world = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  CHK(zeroc__ctx_ret(ctx, zeroc__allreduce_host(zeroc__ctx_group(ctx, ZEROC_GROUP_DP), dl, 2,
                                                ZEROC_INT64, ZEROC_MIN)));
  wl[0] = hw, wl[1] = -hw, wl[2] = dl[0] != -dl[1] ? -1 : 0;
  CHK(zeroc__ctx_ret(ctx, zeroc__allreduce_host(world, wl, 3, ZEROC_INT64, ZEROC_MIN)));
  if (wl[0] != -wl[1])
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                          "the shard settings differ between ranks (checksums "
                                          "%015llx and %015llx): every rank must pass the same "
                                          "stage, dtypes, accumulation, recompute and prefetch",
                                          (unsigned long long)wl[0], (unsigned long long)-wl[1]));
  if (wl[2])
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                          "the layer lists differ between ranks of a data-parallel "
                                          "group (this rank's group: checksums %015llx and "
                                          "%015llx): every data-parallel rank must pass the same "
                                          "units, parameter names, shapes and flags",
                                          (unsigned long long)dl[0], (unsigned long long)-dl[1]));
  zeroc_model_t *m = calloc(1, sizeof *m);
  if (!m) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "model struct"));
  m->ctx = ctx;
  m->conv_owner = -1;
  m->slots = 1;
  ZEROC_TRY(read_config(cfg, &m->cfg));
  if (n < 1 || !layers) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_shard: %d units; need at least one", n);
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    if (!layers[i].forward || !layers[i].backward) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "unit %d ('%s') has no forward or backward callback",
                       i, layers[i].name ? layers[i].name : "?");
      goto fail;
    }
    if (layers[i].shares >= i || layers[i].shares < -1) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "unit %d ('%s') shares %d: must be -1 or the index of an earlier unit", i,
                       layers[i].name ? layers[i].name : "?", layers[i].shares);
      goto fail;
    }
  }
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
  m->rdt = m->cfg.reduce_dtype;
  m->cdt = zeroc_ctx_device(ctx) == ZEROC_DEVICE_CPU ? ZEROC_FP32 : m->pdt;
  m->conv = m->cdt != m->pdt || m->cdt != m->rdt;
  m->K = m->cfg.prefetch;
  m->compute = zeroc_ctx_compute_stream(ctx);
  if (st == 0) {
    ZEROC_TRY(zeroc__group_split(world, mesh->rank, 0, "self", &m->self_g));
    m->shard_g = m->self_g;
    m->rep_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP);
  } else {
    m->shard_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP_SHARD);
    m->rep_g = zeroc__ctx_group(ctx, ZEROC_GROUP_DP_REPLICATE);
  }
  ZEROC_TRY(zeroc_kernels_create(ctx, m->cdt, &m->k));
  ZEROC_TRY(zeroc_stream_create(ctx, 1, &m->gather_s));
  ZEROC_TRY(zeroc_stream_create(ctx, 0, &m->reduce_s));
  ZEROC_TRY(zeroc_event_create(ctx, &m->ev_published));

  m->u = calloc((size_t)n, sizeof *m->u);
  if (!m->u) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "units");
    goto fail;
  }
  size_t maxN = 0, maxS = 0, maxNp = 0, maxws = 0;
  for (int i = 0; i < n; i++) {
    zeroc__unit_t *u = &m->u[i];
    u->L = layers[i];
    ZEROC_TRY(zeroc__flat_layout(&layers[i], i, m->shard_g->size, m->shard_g->rank, &u->f));
    if (layers[i].shares >= 0) m->u[layers[i].shares].pinned = 1;
    if (u->f.S > maxS) maxS = u->f.S;
    if (layers[i].workspace_bytes > maxws) maxws = layers[i].workspace_bytes;
  }
  for (int i = 0; i < n; i++) {
    if (m->u[i].f.N > maxN) maxN = m->u[i].f.N;
    if (!m->u[i].pinned && m->u[i].f.N > maxNp) maxNp = m->u[i].f.N;
  }
  /* the bytes of the shared buffers (shard/sizes.c, which the planner calls too) */
  zeroc__pool_bytes_t pb;
  zeroc__shard_pool_bytes(st, m->K, n, m->cfg.grad_accum, (double)maxNp, (double)maxN,
                          m->shard_g->size, (int)esz(m->pdt), (int)esz(m->rdt), &pb);
  if (m->conv && maxNp) {
    ZEROC_TRY(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.fp32_copy, (void **)&m->conv_view));
    ZEROC_TRY(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.fp32_copy, (void **)&m->conv_cgrad));
  }
  if (maxNp) ZEROC_TRY(pool_init(m, &m->gpool, pb.gather_n, (size_t)pb.gather, ZEROC_TAG_BUFFERS));
  if (maxNp) ZEROC_TRY(pool_init(m, &m->fgpool, pb.fgrad_n, (size_t)pb.fgrad, ZEROC_TAG_BUFFERS));
  ZEROC_TRY(pool_init(m, &m->tpool, pb.rs_n, (size_t)pb.rs, ZEROC_TAG_BUFFERS));
  if (maxws) ZEROC_TRY(alloc_dev(m, ZEROC_TAG_WORKSPACE, maxws, &m->ws));
  if (m->rdt != ZEROC_FP32)
    ZEROC_TRY(alloc_dev(m, ZEROC_TAG_WORKSPACE, (size_t)pb.fp32_shard, (void **)&m->adam_tmp));
  ZEROC_TRY(alloc_dev(m, ZEROC_TAG_WORKSPACE, sizeof(double), (void **)&m->norm_acc));
  ZEROC_TRY(zeroc__moff_init(m, maxS));
  if (m->cfg.offload_params != ZEROC_OFFLOAD_NONE && !m->host_grad)
    ZEROC_TRY(zeroc__pinned_get(m->pool, (size_t)zeroc__shard_staging_bytes((double)maxS, 4),
                                ZEROC_TAG_BUFFERS, (void **)&m->host_grad));
  for (int i = 0; i < n; i++) ZEROC_TRY(unit_alloc(m, &m->u[i]));
  for (int i = 0; i < n; i++) ZEROC_TRY(unit_init(m, i));
  /* allocation can fail on one rank only: agree before the first collective */
  ZEROC_TRY(zeroc_ctx_agree(ctx, ZEROC_OK));
  ZEROC_TRY(zeroc__model_publish(m));
  ZEROC_TRY(zeroc_stream_sync(m->gather_s));
  m->bytes_mark = zeroc__model_comm_bytes(m);
  ZINFO(SHARD, "model: %d units, stage %d, shard group %d, replicas %d, prefetch %d, params %s, "
               "reduce %s%s",
        n, st, m->shard_g->size, m->rep_g->size, m->K, zeroc_dtype_name(m->pdt),
        zeroc_dtype_name(m->rdt), m->conv ? " (fp32 compute copies)" : "");
  res = ZEROC_OK;
fail:
  /* A rank that failed tells the others, which are waiting in an agreement. */
  if (res != ZEROC_OK && res != ZEROC_ERR_REMOTE) res = zeroc_ctx_agree(ctx, res);
  if (res == ZEROC_OK) res = zeroc_ctx_agree(ctx, res);
  if (res != ZEROC_OK) {
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc_last_error(ctx));
    zeroc_model_destroy(m);
    zeroc__tls_error_set(msg);
    return zeroc__ctx_ret(ctx, res);
  }
  *out = m;
  return ZEROC_OK;
}

void zeroc_model_destroy(zeroc_model_t *m) {
  if (!m) return;
  if (m->gather_s) zeroc_stream_sync(m->gather_s);
  if (m->reduce_s) zeroc_stream_sync(m->reduce_s);
  for (int i = 0; m->u && i < m->n; i++) {
    zeroc__unit_t *u = &m->u[i];
    zeroc_mem_free(m->ctx, u->master);
    zeroc_mem_free(m->ctx, u->m);
    zeroc_mem_free(m->ctx, u->v);
    if (m->cfg.stage == 3 && m->cfg.offload_params != ZEROC_OFFLOAD_NVME) zeroc_mem_free(m->ctx, u->cshard);
    zeroc_mem_free(m->ctx, u->full_own);
    zeroc_mem_free(m->ctx, u->fgrad_own);
    if (m->cfg.stage >= 2) zeroc_mem_free(m->ctx, u->gshard);
    if (u->pinned && m->conv) {
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
    zeroc__flat_free(&u->f);
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
  zeroc_mem_free(m->ctx, m->norm_acc);
  zeroc_event_destroy(m->ev_published);
  zeroc_stream_destroy(m->gather_s);
  zeroc_stream_destroy(m->reduce_s);
  zeroc__group_destroy(m->self_g);
  zeroc_kernels_destroy(m->k);
  free(m);
}

/* ---- parameters in use ------------------------------------------------------------- */

/* Stage 3: starts the all-gather of unit i (no-op if it is already gathered). */
static zeroc_result_t issue_gather(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.stage != 3 || u->gathered) return ZEROC_OK;
  if (u->pinned) {
    u->pslot = &u->own_pslot;
    CHK(zeroc_stream_wait_event(m->gather_s, u->own_pslot.free_ev));
  } else {
    CHK(slot_acquire(&m->gpool, m->gather_s, &u->pslot));
  }
  u->full = u->pslot->ptr;
  zeroc__watchdog_phase(m->ctx, "gathering unit %d", i);
  const void *src;
  int next = i + m->pass_dir;
  CHK(zeroc__moff_param_src(m, i, next >= 0 && next < m->n ? next : -1, &src));
  CHK(zeroc__allgather(m->shard_g, m->gather_s, src, u->full, u->f.S, m->pdt));
  CHK(zeroc_event_record(u->ev_gathered, m->gather_s));
  u->gathered = 1;
  u->view_ready = 0;
  return ZEROC_OK;
}

/* Stage 3: unit i's gathered params are no longer needed after the work
 * enqueued so far on the compute stream. */
static zeroc_result_t release_params(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  if (m->cfg.stage != 3 || !u->gathered) return ZEROC_OK;
  CHK(slot_release(u->pslot, m->compute));
  u->pslot = NULL;
  u->full = NULL;
  u->gathered = 0;
  u->view_ready = 0;
  if (m->conv_owner == i) m->conv_owner = -1;
  return ZEROC_OK;
}

/* Makes unit i's parameters usable by the compute stream and fills pviews. */
static zeroc_result_t ready_params(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  CHK(zeroc__model_wait_comm(m, u->ev_gathered));
  if (!u->full) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "unit %d used before it was gathered", i);
  char *base = u->full;
  size_t e = esz(m->pdt);
  if (m->conv) {
    int shared_view = !u->pinned;
    if (!u->view_ready || (shared_view && m->conv_owner != i)) {
      CHK(zeroc_k_cast(m->k, m->compute, u->view, ZEROC_FP32, u->full, m->pdt, u->f.N));
      u->view_ready = 1;
      if (shared_view) {
        if (m->conv_owner >= 0) m->u[m->conv_owner].view_ready = 0;
        m->conv_owner = i;
      }
    }
    base = (char *)u->view;
    e = 4;
  }
  for (int j = 0; j < u->f.n; j++) u->pviews[j] = base + u->f.p[j].off * e;
  return ZEROC_OK;
}

/* Makes unit i's full gradient buffer ready for this micro-step (zeroed on
 * first touch) and fills gviews. */
static zeroc_result_t ready_grads(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  int st = m->cfg.stage;
  if (!u->grads_ready) {
    if (st <= 1) {
      u->fgrad = u->fgrad_own;
      if (u->nbwd == 0 && !m->conv)
        CHK(zeroc_memset_async(m->compute, u->fgrad, 0, u->f.N * esz(m->rdt)));
    } else {
      if (u->pinned)
        u->gslot = &u->own_gslot;
      else
        CHK(slot_acquire(&m->fgpool, NULL, &u->gslot));
      /* the slot's previous reduction must finish first: exposed communication */
      CHK(zeroc__model_wait_comm(m, u->gslot->free_ev));
      u->fgrad = u->gslot->ptr;
      if (!m->conv) CHK(zeroc_memset_async(m->compute, u->fgrad, 0, u->f.N * esz(m->rdt)));
    }
    if (m->conv) CHK(zeroc_memset_async(m->compute, u->cgrad, 0, u->f.N * 4));
    u->grads_ready = 1;
  }
  char *base = m->conv ? (char *)u->cgrad : (char *)u->fgrad;
  size_t e = m->conv ? 4 : esz(m->rdt);
  for (int j = 0; j < u->f.n; j++) u->gviews[j] = base + u->f.p[j].off * e;
  return ZEROC_OK;
}

/* fp32 compute grads -> reduce-dtype full grads (cpu with bf16), accumulating
 * over micro-steps where the stage keeps full grads. */
static void conv_grads_out(zeroc_model_t *m, zeroc__unit_t *u) {
  size_t n = u->f.N;
  if (m->cfg.stage <= 1 && u->nbwd > 0) {
    if (m->rdt == ZEROC_FP32) {
      zeroc__cpu_add(u->fgrad, u->cgrad, n);
    } else {
      uint16_t *g = u->fgrad;
      for (size_t j = 0; j < n; j++) g[j] = zeroc_f32_to_bf16(zeroc_bf16_to_f32(g[j]) + u->cgrad[j]);
    }
  } else {
    zeroc__cpu_cast(u->fgrad, m->rdt, u->cgrad, ZEROC_FP32, n);
  }
}

/* Enqueues unit i's gradient reduction on the reduce stream (u->nbwd counts
 * the unit's earlier backward passes of this step). */
static zeroc_result_t reduce_unit(zeroc_model_t *m, int i) {
  zeroc__unit_t *u = &m->u[i];
  int st = m->cfg.stage, last = u->nbwd == m->cfg.grad_accum - 1;
  size_t S = u->f.S;
  zeroc_stream_t *rs = m->reduce_s;
  if (st <= 1 && !last) return ZEROC_OK; /* full grads accumulate locally */
  CHK(zeroc_event_record(u->ev_bwd, m->compute));
  CHK(zeroc_stream_wait_event(rs, u->ev_bwd));
  if (u->tied && m->tie_g && m->tie_g->size > 1) {
    /* every copy of a tied parameter gets the sum of all copies' gradients
     * before the data-parallel reduction (sums commute), so all copies step alike */
    for (int j = 0; j < u->f.n; j++) {
      if (!(u->f.p[j].flags & ZEROC_PARAM_TIED)) continue;
      void *g = (char *)u->fgrad + u->f.p[j].off * esz(m->rdt);
      CHK(zeroc__allreduce(m->tie_g, rs, g, g, u->f.p[j].numel, m->rdt, ZEROC_SUM));
    }
  }
  if (st == 0) {
    if (m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->fgrad, u->fgrad, u->f.N, m->rdt, ZEROC_SUM));
  } else if (st == 1) {
    zeroc__slot_t *t;
    CHK(slot_acquire(&m->tpool, rs, &t));
    CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, t->ptr, S, m->rdt, ZEROC_SUM));
    if (m->rep_g->size > 1) CHK(zeroc__allreduce(m->rep_g, rs, t->ptr, t->ptr, S, m->rdt, ZEROC_SUM));
    CHK(zeroc_k_cast(m->k, rs, u->gshard, m->rdt, t->ptr, m->rdt, S));
    CHK(slot_release(t, rs));
  } else if (m->cfg.grad_accum == 1) {
    CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, u->gshard, S, m->rdt, ZEROC_SUM));
    if (m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->gshard, u->gshard, S, m->rdt, ZEROC_SUM));
  } else {
    zeroc__slot_t *t;
    CHK(slot_acquire(&m->tpool, rs, &t));
    CHK(zeroc__reduce_scatter(m->shard_g, rs, u->fgrad, t->ptr, S, m->rdt, ZEROC_SUM));
    if (u->nbwd == 0)
      CHK(zeroc_k_cast(m->k, rs, u->gshard, ZEROC_FP32, t->ptr, m->rdt, S));
    else
      CHK(zeroc_k_accumulate(m->k, rs, u->gshard, t->ptr, m->rdt, S, 1.0f));
    CHK(slot_release(t, rs));
    if (last && m->rep_g->size > 1)
      CHK(zeroc__allreduce(m->rep_g, rs, u->gshard, u->gshard, S, ZEROC_FP32, ZEROC_SUM));
  }
  CHK(zeroc_event_record(u->ev_reduced, rs));
  if (st >= 2) {
    CHK(slot_release(u->gslot, rs));
    u->gslot = NULL;
    u->fgrad = NULL;
  }
  return ZEROC_OK;
}

/* ---- forward and backward ---------------------------------------------------------- */

static void fill_io(zeroc_model_t *m, int i, int slot, int micro, const void *batch,
                    zeroc_layer_io_t *io) {
  zeroc__unit_t *u = &m->u[i];
  memset(io, 0, sizeof *io);
  io->unit = i;
  io->micro = micro;
  io->slot = slot;
  io->batch = batch;
  io->params = u->pviews;
  io->stream = m->compute;
  io->workspace = m->ws;
  io->user = u->L.user;
  io->grad_scale = 1.0f / ((float)m->cfg.grad_accum * (float)zeroc_ctx_mesh(m->ctx)->dp);
  io->loss = &m->loss_micro;
  if (u->L.shares >= 0) io->shared_params = m->u[u->L.shares].pviews;
}

static zeroc_result_t run_forward(zeroc_model_t *m, int i, int slot, int micro, const void *batch,
                                  const void *in, int save, int recompute, void **out) {
  zeroc__unit_t *u = &m->u[i];
  zeroc_layer_io_t io;
  fill_io(m, i, slot, micro, batch, &io);
  io.in = in;
  io.save = save;
  io.recompute = recompute;
  zeroc__watchdog_phase(m->ctx, "%s unit %d ('%s')", recompute ? "recompute" : "forward", i,
                        u->L.name ? u->L.name : "");
  ZEROC_FAULT_AT(m->ctx, "forward", m->steps + 1, NULL);
  zeroc_result_t r = u->L.forward(&io);
  if (r != ZEROC_OK) return r;
  *out = io.out;
  return ZEROC_OK;
}

/* Test-only (ZEROC_FAULT nan|inf|set=X@grad): the first element of the
 * unit's first parameter in its full gradient takes the value, before the
 * reduction, so it travels to every rank as a real fault would. */
static zeroc_result_t inject_grad(zeroc_model_t *m, zeroc__unit_t *u) {
  double v = 0;
  if (!ZEROC_FAULT_AT(m->ctx, "grad", m->steps + 1, &v)) return ZEROC_OK;
  float f = (float)v;
  uint16_t h = zeroc_f32_to_bf16(f);
  const void *src = m->rdt == ZEROC_BF16 ? (const void *)&h : (const void *)&f;
  CHK(zeroc_memcpy_async(m->compute, (char *)u->fgrad + u->f.p[0].off * esz(m->rdt), src,
                         esz(m->rdt)));
  return zeroc_stream_sync(m->compute); /* the host value must outlive the copy */
}

/* The forward pass; `eval` runs it without a backward to follow. */
static zeroc_result_t forward_pass(zeroc_model_t *m, const void *input, int eval) {
  zeroc_result_t res = ZEROC_OK;
  int n = m->n, K = m->K, next = 0;
  const void *x = input;
  m->loss_micro = 0;
  m->pass_dir = 1;
  for (int i = 0; i < n; i++) {
    zeroc__unit_t *u = &m->u[i];
    if (m->cfg.stage == 3) {
      if (next <= i) next = i;
      for (; next < n && next <= i + K; next++) ZEROC_TRY(issue_gather(m, next));
    }
    ZEROC_TRY(ready_params(m, i));
    if (u->L.shares >= 0) ZEROC_TRY(ready_params(m, u->L.shares));
    u->saved_in[0] = x;
    int save = !eval && !(m->cfg.recompute && i < n - 1);
    void *out = NULL;
    ZEROC_TRY(run_forward(m, i, 0, m->micro, input, x, save, 0, &out));
    x = out;
    if (m->cfg.stage == 3 && !u->pinned && (eval || i < n - 1)) ZEROC_TRY(release_params(m, i));
  }
  if (eval && m->cfg.stage == 3)
    for (int i = 0; i < n; i++) ZEROC_TRY(release_params(m, i));
  return ZEROC_OK;
fail:
  return res;
}

zeroc_result_t zeroc_model_eval(zeroc_model_t *m, const void *input, float *loss) {
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_eval: NULL model");
  if (m->in_forward)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_eval while a forward waits for its backward"));
  float saved = m->loss_micro;
  zeroc_result_t r = forward_pass(m, input, 1);
  if (loss) *loss = m->loss_micro;
  m->loss_micro = saved;
  return zeroc__ctx_ret(m->ctx, r);
}

zeroc_result_t zeroc_model_forward(zeroc_model_t *m, const void *input) {
  zeroc_result_t res = ZEROC_OK;
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_forward: NULL model");
  if (m->in_forward)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_forward called twice without "
                                             "zeroc_model_backward in between"));
  if (m->micro >= m->cfg.grad_accum)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "%d micro-steps already ran (grad_accum %d): call "
                                             "zeroc_model_step first",
                                             m->micro, m->cfg.grad_accum));
  ZEROC_TRY(forward_pass(m, input, 0));
  m->batch = input;
  m->in_forward = 1;
  return ZEROC_OK;
fail:
  return zeroc__ctx_ret(m->ctx, res);
}

zeroc_result_t zeroc_model_backward(zeroc_model_t *m) {
  zeroc_result_t res = ZEROC_OK;
  if (!m) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_model_backward: NULL model");
  if (!m->in_forward)
    return zeroc__ctx_ret(m->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                             "zeroc_model_backward without a forward"));
  int n = m->n, K = m->K, next = n - 1;
  const void *dout = NULL;
  m->pass_dir = -1;
  for (int i = 0; i < n; i++) m->u[i].grads_ready = 0;
  for (int i = n - 1; i >= 0; i--) {
    zeroc__unit_t *u = &m->u[i];
    if (m->cfg.stage == 3) {
      if (next >= i) next = i;
      for (; next >= 0 && next >= i - K; next--) ZEROC_TRY(issue_gather(m, next));
    }
    ZEROC_TRY(ready_params(m, i));
    int sh = u->L.shares;
    if (sh >= 0) ZEROC_TRY(ready_params(m, sh));
    ZEROC_TRY(ready_grads(m, i));
    if (sh >= 0) ZEROC_TRY(ready_grads(m, sh));
    if (m->cfg.recompute && i < n - 1) {
      void *out = NULL;
      ZEROC_TRY(run_forward(m, i, 0, m->micro, m->batch, u->saved_in[0], 1, 1, &out));
    }
    zeroc_layer_io_t io;
    fill_io(m, i, 0, m->micro, m->batch, &io);
    io.grads = u->gviews;
    if (sh >= 0) io.shared_grads = m->u[sh].gviews;
    io.in = u->saved_in[0];
    io.dout = dout;
    zeroc__watchdog_phase(m->ctx, "backward unit %d ('%s')", i, u->L.name ? u->L.name : "");
    ZEROC_FAULT_AT(m->ctx, "backward", m->steps + 1, NULL);
    res = u->L.backward(&io);
    if (res != ZEROC_OK) goto fail;
    dout = io.din;
    /* a pinned unit's gradients are complete only after its own backward */
    if (m->conv) conv_grads_out(m, u);
    if (m->ctx->fault) ZEROC_TRY(inject_grad(m, u));
    ZEROC_TRY(reduce_unit(m, i));
    u->nbwd++;
    if (m->cfg.stage == 3) ZEROC_TRY(release_params(m, i));
  }
  m->loss_sum += m->loss_micro;
  m->micro++;
  m->in_forward = 0;
  return ZEROC_OK;
fail:
  return zeroc__ctx_ret(m->ctx, res);
}

/* ---- running parts of the model (pipeline parallelism) ----------------------------- */

zeroc_result_t zeroc__model_set_slots(zeroc_model_t *m, int slots) {
  if (slots < 1 || slots > 4096)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "micro-batch slots %d: accepted 1..4096", slots);
  for (int i = 0; i < m->n; i++)
    if (m->in_forward || m->micro || m->u[i].nbwd)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "micro-batch slots can change only between optimizer steps");
  for (int i = 0; i < m->n; i++) {
    const void **s = calloc((size_t)slots, sizeof *s);
    if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "saved inputs of %d slots", slots);
    free(m->u[i].saved_in);
    m->u[i].saved_in = s;
  }
  m->slots = slots;
  return ZEROC_OK;
}

void zeroc__model_tie(zeroc_model_t *m, zeroc_group_t *g, int owner) {
  m->tie_g = g;
  m->tie_owner = owner;
}

/* What a range of units may be run with; the same checks for both directions. */
static zeroc_result_t range_check(zeroc_model_t *m, const char *what, int first, int last, int slot,
                                  int micro) {
  if (m->in_forward)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s while a whole-model forward waits for its backward", what);
  if (first < 0 || last >= m->n || first > last)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: units [%d, %d]; accepted 0 <= first <= last < %d",
                      what, first, last, m->n);
  if (slot < 0 || slot >= m->slots)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: slot %d; accepted 0..%d (zeroc__model_set_slots)",
                      what, slot, m->slots - 1);
  if (micro < 0 || micro >= m->cfg.grad_accum)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: micro-batch %d; accepted 0..%d (grad_accum %d)",
                      what, micro, m->cfg.grad_accum - 1, m->cfg.grad_accum);
  if (m->cfg.stage > 1)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s needs ZeRO stage 0 or 1 (stage is %d): with several micro-batches in "
                      "flight the parameters must stay gathered and the gradients are reduced "
                      "once, after the last micro-batch",
                      what, m->cfg.stage);
  for (int i = first; i <= last; i++)
    if (m->u[i].L.shares >= 0 || m->u[i].pinned)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "%s: unit %d ('%s') shares parameters with another unit; a range needs "
                        "units without `shares` (tie copies across ranks with ZEROC_PARAM_TIED)",
                        what, i, m->u[i].L.name ? m->u[i].L.name : "");
  return ZEROC_OK;
}

zeroc_result_t zeroc__model_forward_units(zeroc_model_t *m, int first, int last, int slot,
                                          int micro, const void *batch, const void *in,
                                          void **out) {
  zeroc_result_t res = ZEROC_OK;
  ZEROC_TRY(range_check(m, "forward of a unit range", first, last, slot, micro));
  const void *x = in ? in : batch;
  for (int i = first; i <= last; i++) {
    zeroc__unit_t *u = &m->u[i];
    ZEROC_TRY(ready_params(m, i));
    u->saved_in[slot] = x;
    int save = !(m->cfg.recompute && i < m->n - 1);
    void *y = NULL;
    m->loss_micro = 0;
    ZEROC_TRY(run_forward(m, i, slot, micro, batch, x, save, 0, &y));
    /* only a loss unit writes it; every micro-batch's loss counts once, here */
    m->loss_sum += m->loss_micro;
    x = y;
  }
  *out = (void *)x;
  return ZEROC_OK;
fail:
  return res;
}

zeroc_result_t zeroc__model_backward_units(zeroc_model_t *m, int first, int last, int slot,
                                           int micro, const void *batch, const void *dout,
                                           void **din) {
  zeroc_result_t res = ZEROC_OK;
  ZEROC_TRY(range_check(m, "backward of a unit range", first, last, slot, micro));
  const void *d = dout;
  for (int i = last; i >= first; i--) {
    zeroc__unit_t *u = &m->u[i];
    if (u->nbwd >= m->cfg.grad_accum) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "backward of unit %d: already %d backward passes this step (grad_accum "
                       "%d); call zeroc_model_step",
                       i, u->nbwd, m->cfg.grad_accum);
      goto fail;
    }
    ZEROC_TRY(ready_params(m, i));
    u->grads_ready = 0;
    ZEROC_TRY(ready_grads(m, i));
    /* the loss unit (no incoming gradient) kept its activations; any other
     * unit, the last of a pipeline chunk included, is recomputed */
    if (m->cfg.recompute && !(i == last && !dout)) {
      void *y = NULL;
      ZEROC_TRY(run_forward(m, i, slot, micro, batch, u->saved_in[slot], 1, 1, &y));
    }
    zeroc_layer_io_t io;
    fill_io(m, i, slot, micro, batch, &io);
    io.grads = u->gviews;
    io.in = u->saved_in[slot];
    io.dout = d;
    zeroc__watchdog_phase(m->ctx, "backward unit %d ('%s') micro-batch %d", i,
                          u->L.name ? u->L.name : "", micro);
    ZEROC_FAULT_AT(m->ctx, "backward", m->steps + 1, NULL);
    ZEROC_TRY(u->L.backward(&io));
    d = io.din;
    if (m->conv) conv_grads_out(m, u);
    if (m->ctx->fault) ZEROC_TRY(inject_grad(m, u));
    ZEROC_TRY(reduce_unit(m, i));
    u->nbwd++;
  }
  *din = (void *)d;
  return ZEROC_OK;
fail:
  return res;
}
