/*
 * shard/offload.c - the engine's use of src/offload: where each unit's
 * optimizer state (fp32 master, Adam m and v) and, for ZeRO-3, its parameter
 * shard live when they are offloaded, and how they come back.
 *
 * Optimizer state: `cpu` keeps it in pinned host memory; `nvme` keeps it in
 * io_uring swap files, three units resident at a time (read unit i+1 and write
 * back unit i-1 while unit i is updated). AdamW then runs on the host.
 * Parameter shards (ZeRO-3): `cpu` keeps them in pinned host memory; `nvme` in
 * swap files, read ahead of their gather into a small ring of staging buffers
 * (one read in flight beyond the unit being gathered), written back after the
 * step. On the cuda device a host shard is copied to a device staging buffer
 * before its all-gather (NCCL reads device memory only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "shard/offload.h"
#include "shard/sizes.h"

static size_t esz(zeroc_dtype_t dt) { return zeroc_dtype_size(dt); }

static int any_nvme(const zeroc_model_t *m) {
  return m->cfg.offload_optimizer == ZEROC_OFFLOAD_NVME ||
         m->cfg.offload_params == ZEROC_OFFLOAD_NVME;
}

zeroc_result_t zeroc__moff_init(zeroc_model_t *m, size_t maxS) {
  int oo = m->cfg.offload_optimizer, op = m->cfg.offload_params;
  if (oo == ZEROC_OFFLOAD_NONE && op == ZEROC_OFFLOAD_NONE) return ZEROC_OK;
  /* a staging copy of the largest compute shard (shard/sizes.c) */
  size_t stage_bytes = (size_t)zeroc__shard_staging_bytes((double)maxS, (int)esz(m->pdt));
  CHK(zeroc__pinned_pool_create(zeroc__ctx_pool_env(m->ctx), &m->pool));
  if (any_nvme(m)) {
    zeroc__swap_config_t sc = ZEROC__SWAP_CONFIG_INIT;
    char job[64];
    /* one job directory shared by every rank (<dir>/<job>/rank<r>/): named by
     * world rank 0's pid and a per-process model counter */
    static int models;
    int64_t pid0 = zeroc_ctx_mesh(m->ctx)->rank == 0 ? (int64_t)getpid() : 0;
    CHK(zeroc__allreduce_host(zeroc__ctx_group(m->ctx, ZEROC_GROUP_WORLD), &pid0, 1, ZEROC_INT64,
                              ZEROC_SUM));
    snprintf(job, sizeof job, "zeroc-%lld-%d", (long long)pid0, models++);
    sc.dir = m->cfg.nvme_dir;
    sc.job = job;
    sc.rank = zeroc_ctx_mesh(m->ctx)->rank;
    CHK(zeroc__swap_create(zeroc__ctx_mem(m->ctx), &sc, &m->swap));
  }
  if (oo != ZEROC_OFFLOAD_NONE) {
    size_t *numel = calloc((size_t)m->n, sizeof *numel);
    if (!numel) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "offload sizes");
    for (int i = 0; i < m->n; i++) numel[i] = m->u[i].f.S;
    zeroc_result_t r = zeroc__offload_create(m->pool, oo == ZEROC_OFFLOAD_NVME ? m->swap : NULL,
                                             m->n, numel, 3, &m->ostate);
    free(numel);
    CHK(r);
    /* host copies of the gradient shard (and, on cuda, of the new compute shard) */
    CHK(zeroc__pinned_get(m->pool, (size_t)zeroc__shard_staging_bytes((double)maxS, 4),
                          ZEROC_TAG_BUFFERS, (void **)&m->host_grad));
    CHK(zeroc__pinned_get(m->pool, stage_bytes, ZEROC_TAG_BUFFERS, &m->host_param));
  }
  if (op != ZEROC_OFFLOAD_NONE) {
    /* the ring: K + 2 staging buffers (unit being gathered, K gathers in flight,
     * one read ahead) */
    m->pstage.n = m->K + 2;
    m->pstage.buf = calloc((size_t)m->pstage.n, sizeof *m->pstage.buf);
    m->pstage.dev = calloc((size_t)m->pstage.n, sizeof *m->pstage.dev);
    m->pstage.owner = calloc((size_t)m->pstage.n, sizeof *m->pstage.owner);
    m->pstage.ticket = calloc((size_t)m->pstage.n, sizeof *m->pstage.ticket);
    m->pstage.used = calloc((size_t)m->pstage.n, sizeof *m->pstage.used);
    m->pstage.swap_slot = calloc((size_t)m->n, sizeof *m->pstage.swap_slot);
    if (!m->pstage.buf || !m->pstage.dev || !m->pstage.owner || !m->pstage.ticket ||
        !m->pstage.swap_slot || !m->pstage.used)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "parameter staging tables");
    for (int b = 0; b < m->pstage.n; b++) {
      m->pstage.owner[b] = -1;
      if (op == ZEROC_OFFLOAD_NVME)
        CHK(zeroc__pinned_get(m->pool, stage_bytes, ZEROC_TAG_BUFFERS, &m->pstage.buf[b]));
      /* device staging for the gathers: none where device memory is host memory */
      CHK(zeroc__staging_alloc(zeroc__ctx_devmem(m->ctx), ZEROC_TAG_BUFFERS, stage_bytes,
                               &m->pstage.dev[b]));
    }
    if (op == ZEROC_OFFLOAD_NVME) {
      for (int i = 0; i < m->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "u%d.param", i);
        CHK(zeroc__swap_slot_create(m->swap, name, m->u[i].f.S * esz(m->pdt),
                                    &m->pstage.swap_slot[i]));
      }
    }
  }
  ZINFO(OFFLOAD, "offload: optimizer %s, parameters %s%s",
        oo == 2   ? "nvme"
        : oo == 1 ? "cpu"
                  : "device",
        op == 2   ? "nvme"
        : op == 1 ? "cpu"
                  : "device",
        m->swap ? " (io_uring swap files)" : "");
  return ZEROC_OK;
}

void zeroc__moff_fini(zeroc_model_t *m) {
  if (m->pstage.buf) {
    for (int b = 0; b < m->pstage.n; b++) {
      if (m->pstage.ticket[b]) zeroc__swap_wait(m->swap, m->pstage.ticket[b]);
      if (m->pstage.buf[b]) zeroc__pinned_put(m->pool, m->pstage.buf[b]);
      zeroc_mem_free(m->ctx, m->pstage.dev[b]);
    }
  }
  free(m->pstage.buf);
  free(m->pstage.dev);
  free(m->pstage.owner);
  free(m->pstage.ticket);
  free(m->pstage.used);
  free(m->pstage.swap_slot);
  zeroc__offload_destroy(m->ostate);
  if (m->host_grad) zeroc__pinned_put(m->pool, m->host_grad);
  if (m->host_param) zeroc__pinned_put(m->pool, m->host_param);
  zeroc__swap_destroy(m->swap);
  zeroc__pinned_pool_destroy(m->pool);
}

/* ---- optimizer state -------------------------------------------------------------- */

zeroc_result_t zeroc__moff_state(zeroc_model_t *m, int i, zeroc__state_view_t *v) {
  zeroc__unit_t *u = &m->u[i];
  if (!m->ostate) {
    v->master = u->master, v->m = u->m, v->v = u->v;
    return ZEROC_OK;
  }
  zeroc__offload_view_t ov;
  CHK(zeroc__offload_wait(m->ostate, i, &ov));
  v->master = ov.master, v->m = ov.m, v->v = ov.v;
  return ZEROC_OK;
}

zeroc_result_t zeroc__moff_state_done(zeroc_model_t *m, int i) {
  if (!m->ostate || m->cfg.offload_optimizer != ZEROC_OFFLOAD_NVME) return ZEROC_OK;
  return zeroc__offload_writeback(m->ostate, i);
}

zeroc_result_t zeroc__moff_state_prefetch(zeroc_model_t *m, int i) {
  if (!m->ostate || i < 0 || i >= m->n || m->cfg.offload_optimizer != ZEROC_OFFLOAD_NVME)
    return ZEROC_OK;
  return zeroc__offload_prefetch(m->ostate, i);
}

zeroc_result_t zeroc__moff_flush(zeroc_model_t *m) {
  return m->ostate ? zeroc__offload_flush(m->ostate) : ZEROC_OK;
}

/* ---- parameter shards ----------------------------------------------------------- */

/* A staging buffer nobody needs any more: preferably an empty one, then one a
 * gather has been issued from (once that gather is done), then a read-ahead
 * or a write-back (once its transfer is done). */
static zeroc_result_t free_stage(zeroc_model_t *m, int *out) {
  int pick = -1;
  for (int b = 0; b < m->pstage.n && pick < 0; b++)
    if (m->pstage.owner[b] < 0) pick = b;
  for (int b = 0; b < m->pstage.n && pick < 0; b++)
    if (m->pstage.used[b]) pick = b;
  for (int b = 0; b < m->pstage.n && pick < 0; b++) pick = b;
  if (pick < 0) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "no parameter staging buffers");
  int owner = m->pstage.owner[pick];
  if (owner >= 0 && m->pstage.used[pick]) CHK(zeroc_event_sync(m->u[owner].ev_gathered));
  if (m->pstage.ticket[pick]) {
    CHK(zeroc__swap_wait(m->swap, m->pstage.ticket[pick]));
    m->pstage.ticket[pick] = 0;
  }
  m->pstage.owner[pick] = -1;
  m->pstage.used[pick] = 0;
  *out = pick;
  return ZEROC_OK;
}

static int stage_of(const zeroc_model_t *m, int i) {
  for (int b = 0; b < m->pstage.n; b++)
    if (m->pstage.owner[b] == i) return b;
  return -1;
}

/* Starts reading unit i's parameter shard from its swap file (nvme). */
static zeroc_result_t start_read(zeroc_model_t *m, int i) {
  if (i < 0 || i >= m->n || m->u[i].gathered || stage_of(m, i) >= 0) return ZEROC_OK;
  int b;
  CHK(free_stage(m, &b));
  CHK(zeroc__swap_read(m->swap, m->pstage.swap_slot[i], m->pstage.buf[b], m->u[i].f.S * esz(m->pdt),
                       &m->pstage.ticket[b]));
  m->pstage.owner[b] = i;
  return ZEROC_OK;
}

zeroc_result_t zeroc__moff_param_src(zeroc_model_t *m, int i, int next, const void **src) {
  zeroc__unit_t *u = &m->u[i];
  int op = m->cfg.offload_params;
  if (op == ZEROC_OFFLOAD_NONE) {
    *src = u->cshard;
    return ZEROC_OK;
  }
  size_t bytes = u->f.S * esz(m->pdt);
  const void *host = u->cshard;
  int b = -1;
  if (op == ZEROC_OFFLOAD_NVME) {
    CHK(start_read(m, i));
    b = stage_of(m, i);
    if (m->pstage.ticket[b]) {
      CHK(zeroc__swap_wait(m->swap, m->pstage.ticket[b]));
      m->pstage.ticket[b] = 0;
    }
    host = m->pstage.buf[b];
    m->pstage.used[b] = 1;
    CHK(start_read(m, next)); /* one read ahead, overlapping this unit's gather */
  }
  /* a device view of the host shard, in the gather stream's order (staged in
   * the buffer's device twin where device memory is not host memory) */
  if (b < 0) {
    CHK(free_stage(m, &b));
    m->pstage.owner[b] = i;
    m->pstage.used[b] = 1;
  }
  zeroc__view_t dv; /* no end: staged in our own buffer, read only */
  CHK(zeroc__view_device(zeroc__ctx_devmem(m->ctx), m->gather_s, (void *)host, bytes, ZEROC_VIEW_IN,
                         m->pstage.dev[b], &dv));
  *src = dv.ptr;
  return ZEROC_OK;
}

zeroc_result_t zeroc__moff_param_store(zeroc_model_t *m, int i, const float *master) {
  zeroc__unit_t *u = &m->u[i];
  int op = m->cfg.offload_params;
  size_t S = u->f.S, bytes = S * esz(m->pdt);
  if (op == ZEROC_OFFLOAD_CPU) /* the shard is host memory */
    return zeroc_k_host_cast(u->cshard, m->pdt, master, ZEROC_FP32, S);
  /* nvme: through a staging buffer into the unit's swap file */
  int b;
  CHK(free_stage(m, &b));
  CHK(zeroc_k_host_cast(m->pstage.buf[b], m->pdt, master, ZEROC_FP32, S));
  CHK(zeroc__swap_write(m->swap, m->pstage.swap_slot[i], m->pstage.buf[b], bytes,
                        &m->pstage.ticket[b]));
  /* the buffer holds unit i's new values: a gather of i may use it at once */
  m->pstage.owner[b] = i;
  return ZEROC_OK;
}
