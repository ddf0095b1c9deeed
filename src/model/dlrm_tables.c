/*
 * model/dlrm_tables.c - the DLRM trainer's tables: the model-parallel
 * embedding layer (zeroc/embed.h), or with ZEROC_DLRM_EMBED=0 replicated host
 * tables: every rank holds every table, pools its own samples, and the dense
 * table gradients are averaged over the data-parallel group before the AdaGrad
 * update. An AdaGrad update on a row whose gradient is zero changes nothing, so
 * updating every row is the sparse update's arithmetic exactly; fine for the
 * small tables of tests, and the reference the embedding layer must match.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/env.h"
#include "core/error.h"
#include "model/dlrm_sizes.h"
#include "model/dlrm_tables.h"
#include "runtime/runtime.h"
#include "zeroc/device.h"
#include "zeroc/embed.h"

#define EPS 1e-8f

struct zeroc__tables {
  zeroc_ctx_t *ctx;
  zeroc_embed_t *embed; /* the model-parallel layer, or NULL: the replicated tables below */
  int T, D, Bmax, hot, B;
  int64_t rows[ZEROC_DLRM_MAX_TABLES];
  float *w[ZEROC_DLRM_MAX_TABLES], *s[ZEROC_DLRM_MAX_TABLES], *g[ZEROC_DLRM_MAX_TABLES];
  float *pooled, *dpooled; /* (B,T,D) host staging */
  int32_t *lengths;        /* the last forward's */
  int64_t *ids;
};

/* 64-bit counter hash -> uniform in [-1, 1) */
static float sym_uniform(uint64_t seed, uint64_t t, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL ^ (t + 1) * 0xbf58476d1ce4e5b9ULL ^ i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* On cpu the tables live in this node's memory, shared by its ranks: a layout that
 * cannot fit is refused with the figures, before allocating (and touching) them. */
static zeroc_result_t check_fits(zeroc_ctx_t *ctx, double need, const char *what) {
  if (zeroc_ctx_device(ctx) != ZEROC_DEVICE_CPU) return ZEROC_OK; /* the allocator says */
  int local_rank, local_size;
  zeroc_ctx_local(ctx, &local_rank, &local_size);
  double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
  if (need * local_size <= 0.9 * have) return ZEROC_OK;
  return ZEROC_FAIL(ZEROC_ERR_NOMEM,
                    "the DLRM's tables need %.2f GiB per rank (%s), %.2f GiB for the %d ranks "
                    "of this node, which has %.2f GiB: use more ranks (or nodes), or smaller "
                    "--rows",
                    need / 1073741824.0, what, need * local_size / 1073741824.0, local_size,
                    have / 1073741824.0);
}

zeroc_result_t zeroc__tables_env(uint64_t *host_threshold, int *use_embed) {
  int64_t host = 0, embed = 1;
  /* ZEROC_DLRM_HOST_TABLES=BYTES: tables above it per rank in host memory */
  ZEROC_CHECK(zeroc__env_i64("ZEROC_DLRM_HOST_TABLES", 0, &host));
  ZEROC_CHECK(zeroc__env_i64("ZEROC_DLRM_EMBED", 1, &embed));
  *host_threshold = host > 0 ? (uint64_t)host : 0;
  *use_embed = embed != 0;
  return ZEROC_OK;
}

static zeroc_result_t embed_create(zeroc__tables_t *t, const zeroc_dlrm_config_t *c, int batch,
                                   int sharding, uint64_t seed) {
  /* the config the planner prices too (model/dlrm_sizes.c) */
  zeroc_embed_table_t tabs[ZEROC_DLRM_MAX_TABLES];
  zeroc_embed_config_t ec;
  uint64_t host;
  int use_embed;
  ZEROC_CHECK(zeroc__tables_env(&host, &use_embed));
  zeroc__dlrm_embed_config(c, batch, sharding, seed, host, tabs, &ec);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(t->ctx);
  zeroc_embed_cost_t cost;
  ZEROC_CHECK(zeroc_embed_plan(&ec, mesh->dp, mesh->dp_rank, NULL, NULL, &cost));
  double need = (double)cost.param_device + (double)cost.param_host +
                (double)cost.optimizer_device + (double)cost.optimizer_host +
                (double)cost.grads_device + (double)cost.buffers_device +
                (double)cost.buffers_pinned;
  ZEROC_CHECK(check_fits(t->ctx, need, "zeroc_embed_plan's figure for this rank"));
  return zeroc_embed_create(t->ctx, &ec, &t->embed);
}

zeroc_result_t zeroc__tables_create(zeroc_ctx_t *ctx, const zeroc_dlrm_config_t *c, int batch,
                                    int sharding, uint64_t seed, zeroc__tables_t **out) {
  zeroc__tables_t *t = calloc(1, sizeof *t);
  if (!t) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tables");
  uint64_t host;
  int use_embed = 1;
  zeroc_result_t re = zeroc__tables_env(&host, &use_embed);
  t->ctx = ctx;
  if (!re && use_embed) re = embed_create(t, c, batch, sharding, seed);
  if (re || use_embed) {
    if (re)
      zeroc__tables_destroy(t);
    else
      *out = t;
    return re;
  }
  /* replicated whatever `sharding` asked: the fallback has one layout; weights and a
   * dense gradient of every table on every rank */
  double need = 8.0 * (double)zeroc_dlrm_table_params(c);
  zeroc_result_t rf = check_fits(ctx, need, "replicated weights and gradients");
  if (rf) {
    free(t);
    return rf;
  }
  t->ctx = ctx, t->T = c->tables, t->D = c->dim, t->Bmax = batch, t->hot = c->hot;
  size_t BTD = (size_t)batch * c->tables * c->dim;
  t->pooled = malloc(BTD * sizeof(float));
  t->dpooled = malloc(BTD * sizeof(float));
  t->lengths = malloc((size_t)c->tables * batch * sizeof(int32_t));
  t->ids = malloc((size_t)c->tables * batch * c->hot * sizeof(int64_t));
  zeroc_result_t r = t->pooled && t->dpooled && t->lengths && t->ids
                         ? ZEROC_OK
                         : ZEROC_FAIL(ZEROC_ERR_NOMEM, "table staging (%zu floats)", BTD);
  for (int k = 0; !r && k < t->T; k++) {
    size_t n = (size_t)c->rows[k] * c->dim;
    t->rows[k] = c->rows[k];
    t->w[k] = malloc(n * sizeof(float));
    t->g[k] = malloc(n * sizeof(float));
    t->s[k] = calloc((size_t)c->rows[k], sizeof(float));
    if (!t->w[k] || !t->g[k] || !t->s[k]) {
      r = ZEROC_FAIL(ZEROC_ERR_NOMEM,
                     "table %d: %lld rows x %d dim do not fit in host memory (replicated tables)",
                     k, (long long)c->rows[k], c->dim);
      break;
    }
    float a = 1.0f / sqrtf((float)c->rows[k]);
    for (size_t i = 0; i < n; i++) t->w[k][i] = a * sym_uniform(seed, (uint64_t)k, i);
  }
  if (r) {
    zeroc__tables_destroy(t);
    return r;
  }
  *out = t;
  return ZEROC_OK;
}

void zeroc__tables_destroy(zeroc__tables_t *t) {
  if (!t) return;
  zeroc_embed_destroy(t->embed);
  for (int k = 0; k < t->T; k++) free(t->w[k]), free(t->g[k]), free(t->s[k]);
  free(t->pooled), free(t->dpooled), free(t->lengths), free(t->ids);
  free(t);
}

zeroc_result_t zeroc__tables_save(zeroc__tables_t *t, const char *dir) {
  if (!t->embed)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "DLRM checkpoints need the model-parallel tables (ZEROC_DLRM_EMBED=1)");
  return zeroc_embed_save(t->embed, dir);
}

zeroc_result_t zeroc__tables_load(zeroc__tables_t *t, const char *dir) {
  if (!t->embed)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "DLRM checkpoints need the model-parallel tables (ZEROC_DLRM_EMBED=1)");
  return zeroc_embed_load(t->embed, dir);
}

int zeroc__tables_sharding(const zeroc__tables_t *t, int table) {
  return t->embed ? (int)zeroc_embed_table_sharding(t->embed, table) : -1;
}

zeroc_result_t zeroc__tables_forward(zeroc__tables_t *t, int B, const int32_t *lengths,
                                     const int64_t *ids, float *pooled) {
  if (t->embed) return zeroc_embed_forward(t->embed, B, lengths, ids, pooled);
  int T = t->T, D = t->D;
  if (B < 1 || B > t->Bmax) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "tables: B %d", B);
  memset(t->pooled, 0, sizeof(float) * (size_t)B * T * D);
  size_t at = 0;
  for (int k = 0; k < T; k++)
    for (int b = 0; b < B; b++) {
      int L = lengths[(size_t)k * B + b];
      if (L < 0 || L > t->hot)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "table %d sample %d: bag of %d ids, accepted 0..%d", k, b, L, t->hot);
      float *o = t->pooled + ((size_t)b * T + k) * D;
      for (int h = 0; h < L; h++, at++) {
        int64_t id = ids[at];
        if (id < 0 || id >= t->rows[k])
          return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "table %d sample %d: id %lld, accepted 0..%lld",
                            k, b, (long long)id, (long long)t->rows[k] - 1);
        const float *row = t->w[k] + (size_t)id * D;
        for (int d = 0; d < D; d++) o[d] += row[d];
      }
    }
  memcpy(t->lengths, lengths, sizeof(int32_t) * (size_t)T * B);
  memcpy(t->ids, ids, sizeof(int64_t) * at);
  t->B = B;
  zeroc_stream_t *s = zeroc_ctx_compute_stream(t->ctx);
  return zeroc__memcpy_sync(s, pooled, t->pooled, sizeof(float) * (size_t)B * T * D);
}

zeroc_result_t zeroc__tables_backward(zeroc__tables_t *t, const float *dpooled, float lr) {
  if (t->embed) {
    zeroc_embed_set_lr(t->embed, lr);
    return zeroc_embed_backward(t->embed, dpooled);
  }
  int T = t->T, D = t->D, B = t->B;
  zeroc_stream_t *s = zeroc_ctx_compute_stream(t->ctx);
  ZEROC_CHECK(zeroc__memcpy_sync(s, t->dpooled, dpooled, sizeof(float) * (size_t)B * T * D));
  zeroc_group_t *dp = zeroc__ctx_group(t->ctx, ZEROC_GROUP_DP);
  size_t at = 0;
  for (int k = 0; k < T; k++) {
    size_t n = (size_t)t->rows[k] * D;
    memset(t->g[k], 0, n * sizeof(float));
    for (int b = 0; b < B; b++) {
      const float *gd = t->dpooled + ((size_t)b * T + k) * D;
      for (int h = 0; h < t->lengths[(size_t)k * B + b]; h++, at++) {
        float *row = t->g[k] + (size_t)t->ids[at] * D;
        for (int d = 0; d < D; d++) row[d] += gd[d];
      }
    }
    /* each rank's gradient is of its own mean loss: the global mean's is their average */
    ZEROC_CHECK(zeroc__allreduce_host(dp, t->g[k], n, ZEROC_FP32, ZEROC_AVG));
    for (int64_t r = 0; r < t->rows[k]; r++) {
      float *g = t->g[k] + (size_t)r * D, *w = t->w[k] + (size_t)r * D, ss = 0;
      for (int d = 0; d < D; d++) ss += g[d] * g[d];
      if (ss == 0) continue; /* untouched: AdaGrad would change nothing */
      t->s[k][r] += ss / (float)D;
      float step = lr / (sqrtf(t->s[k][r]) + EPS);
      for (int d = 0; d < D; d++) w[d] -= step * g[d];
    }
  }
  return ZEROC_OK;
}
