/*
 * model/dlrm_run.c - the DLRM's run: build (data, held-out samples, MLPs and
 * their shards, tables), one step's batch and the evaluation (AUC, log-loss).
 * The design is in dlrm_run.h's header.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "model/dlrm_run.h"
#include "runtime/runtime.h"
#include "zeroc/device.h"

/* ---- build ---------------------------------------------------------------------------------- */

static zeroc_result_t open_source(const char *src, const zeroc__click_shape_t *sh, uint64_t seed,
                                  zeroc__clicks_t **out) {
  if (!strcmp(src, "synthetic")) return zeroc__clicks_synth(sh, seed, out);
  return zeroc__clicks_criteo(src, sh, out);
}

static zeroc_result_t host_batch(zeroc__click_batch_t *b, const zeroc_dlrm_config_t *m, int B) {
  b->dense = malloc(sizeof(float) * (size_t)B * m->dense);
  b->labels = malloc(sizeof(float) * (size_t)B);
  b->probs = malloc(sizeof(float) * (size_t)B);
  b->lengths = malloc(sizeof(int32_t) * (size_t)B * m->tables);
  b->ids = malloc(sizeof(int64_t) * (size_t)B * m->tables * m->hot);
  if (!b->dense || !b->labels || !b->probs || !b->lengths || !b->ids)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "dlrm host batch (%d samples)", B);
  return ZEROC_OK;
}

static void host_batch_free(zeroc__click_batch_t *b) {
  free(b->dense), free(b->labels), free(b->probs), free(b->lengths), free(b->ids);
}

/* The held-out samples: whole global batches; their labels (and the true
 * probabilities of synthetic data) read on every rank, for the ceiling and AUC. */
static zeroc_result_t open_val(zeroc__dlrm_run_t *d, const zeroc__click_shape_t *sh) {
  zeroc_train_info_t *in = d->info;
  const zeroc_train_config_t *c = &in->config;
  const char *src = c->val_data ? c->val_data : c->data;
  int G = in->global_batch;
  int64_t nb = (c->val_tokens + G - 1) / G;
  in->val_batches = (int)(nb < 1 ? 1 : nb);
  d->nval = in->val_batches * G;
  /* the training source's held-out samples: synthetic ones from 2^40 on; a file's
   * from its start (give val_data to hold out a file of its own) */
  int same = !c->val_data || !strcmp(c->val_data, c->data);
  if (same && strcmp(src, "synthetic")) {
    d->val = NULL;
  } else {
    ZEROC_CHECK(open_source(src, sh, (uint64_t)c->seed, &d->val));
  }
  d->val_first = !strcmp(src, "synthetic") ? (uint64_t)1 << 40 : 0;
  d->val_labels = malloc(sizeof(float) * (size_t)d->nval);
  d->val_logits = malloc(sizeof(float) * (size_t)d->nval);
  d->val_prob = malloc(sizeof(float) * (size_t)d->nval);
  if (!d->val_labels || !d->val_logits || !d->val_prob)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "held-out samples (%d)", d->nval);
  const zeroc__clicks_t *v = d->val ? d->val : d->data;
  int B = c->batch;
  for (int k = 0; k < d->nval; k += B) {
    ZEROC_CHECK(zeroc__clicks_read(v, d->val_first + (uint64_t)k, B, &d->hb));
    memcpy(d->val_labels + k, d->hb.labels, sizeof(float) * (size_t)B);
    memcpy(d->val_prob + k, d->hb.probs, sizeof(float) * (size_t)B);
  }
  int synth = !strcmp(src, "synthetic");
  in->logloss_floor = synth ? zeroc__mean_entropy(d->val_prob, (uint64_t)d->nval) : NAN;
  in->auc_ceiling = synth ? zeroc__auc(d->val_prob, d->val_labels, (uint64_t)d->nval) : NAN;
  return ZEROC_OK;
}

static zeroc_result_t dev_alloc(zeroc__dlrm_run_t *d, size_t n, float **p) {
  return zeroc_mem_alloc(d->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, n * sizeof(float),
                         (void **)p);
}

static zeroc_result_t build(zeroc__dlrm_run_t *d) {
  zeroc_train_info_t *in = d->info;
  const zeroc_train_config_t *c = &in->config;
  const zeroc_dlrm_config_t *m = &in->dlrm_model;
  int B = c->batch;
  zeroc__click_shape_t sh = {m->tables, m->dense, m->hot, m->rows};
  ZEROC_CHECK(host_batch(&d->hb, m, B));
  ZEROC_CHECK(open_source(c->data, &sh, (uint64_t)c->seed, &d->data));
  ZEROC_CHECK(open_val(d, &sh));
  ZEROC_CHECK(dev_alloc(d, (size_t)B * m->dense, &d->dense));
  ZEROC_CHECK(dev_alloc(d, (size_t)B, &d->labels));
  ZEROC_CHECK(dev_alloc(d, (size_t)B * m->tables * m->dim, &d->pooled));
  ZEROC_CHECK(dev_alloc(d, (size_t)B * m->tables * m->dim, &d->dpooled));
  return zeroc_dlrm_create(d->ctx, m, B, &d->dlrm);
}

zeroc_result_t zeroc__dlrm_create(const zeroc_arch_run_t *run, void **self) {
  zeroc_train_info_t *in = run->info;
  const zeroc_train_config_t *c = &in->config;
  const zeroc_dlrm_config_t *m = &in->dlrm_model;
  zeroc_ctx_t *ctx = run->ctx;
  zeroc__dlrm_run_t *d = calloc(1, sizeof *d);
  *self = d;
  if (d) d->ctx = ctx, d->info = in, d->dp_rank = zeroc_ctx_mesh(ctx)->dp_rank;
  zeroc_result_t r = d ? build(d) : ZEROC_FAIL(ZEROC_ERR_NOMEM, "dlrm run");
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  int n;
  const zeroc_layer_t *layers = zeroc_dlrm_layers(d->dlrm, &n);
  ZEROC_CHECK(zeroc_shard(ctx, layers, n, &run->shard, &d->model));
  r = zeroc__tables_create(ctx, m, c->batch, c->embedding_sharding, (uint64_t)c->seed, &d->tables);
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  for (int t = 0; t < m->tables; t++) in->dlrm_sharding[t] = zeroc__tables_sharding(d->tables, t);
  return ZEROC_OK;
}

void zeroc__dlrm_destroy(void *self) {
  zeroc__dlrm_run_t *d = self;
  if (!d) return;
  zeroc_ctx_t *ctx = d->ctx;
  zeroc_model_destroy(d->model);
  zeroc_mem_free(ctx, d->dense), zeroc_mem_free(ctx, d->labels);
  zeroc_mem_free(ctx, d->pooled), zeroc_mem_free(ctx, d->dpooled);
  zeroc__tables_destroy(d->tables);
  zeroc_dlrm_destroy(d->dlrm);
  zeroc__clicks_destroy(d->data);
  zeroc__clicks_destroy(d->val);
  host_batch_free(&d->hb);
  free(d->val_labels), free(d->val_logits), free(d->val_prob);
  free(d);
}

/* ---- a step and an evaluation -------------------------------------------------------------- */

/* Samples [first, first + B) of `src` through the tables into the model's batch. */
static zeroc_result_t load(zeroc__dlrm_run_t *d, const zeroc__clicks_t *src, uint64_t first,
                           zeroc_dlrm_batch_t *b) {
  const zeroc_dlrm_config_t *m = &d->info->dlrm_model;
  int B = d->info->config.batch;
  zeroc_stream_t *s = zeroc_ctx_compute_stream(d->ctx);
  ZEROC_CHECK(zeroc__clicks_read(src, first, B, &d->hb));
  ZEROC_CHECK(zeroc_memcpy_async(s, d->dense, d->hb.dense, sizeof(float) * (size_t)B * m->dense));
  ZEROC_CHECK(zeroc_memcpy_async(s, d->labels, d->hb.labels, sizeof(float) * (size_t)B));
  ZEROC_CHECK(zeroc__tables_forward(d->tables, B, d->hb.lengths, d->hb.ids, d->pooled));
  *b = (zeroc_dlrm_batch_t){B, d->dense, d->labels, d->pooled, d->dpooled};
  return ZEROC_OK;
}

zeroc_result_t zeroc__dlrm_run_step(void *self, int s, float lr, zeroc_pipeline_stats_t *pst) {
  zeroc__dlrm_run_t *d = self;
  const zeroc_train_info_t *in = d->info;
  (void)pst; /* no pipeline */
  uint64_t first =
      (uint64_t)s * (uint64_t)in->global_batch + (uint64_t)d->dp_rank * (uint64_t)in->config.batch;
  zeroc_dlrm_batch_t b;
  ZEROC_CHECK(load(d, d->data, first, &b));
  ZEROC_CHECK(zeroc_model_forward(d->model, &b));
  ZEROC_CHECK(zeroc_model_backward(d->model));
  return zeroc__tables_backward(d->tables, d->dpooled, lr);
}

zeroc_result_t zeroc__dlrm_evaluate(void *self, double *loss, double *auc, double *logloss) {
  zeroc__dlrm_run_t *d = self;
  int B = d->info->config.batch, G = d->info->global_batch;
  zeroc_stream_t *s = zeroc_ctx_compute_stream(d->ctx);
  const zeroc__clicks_t *src = d->val ? d->val : d->data;
  memset(d->val_logits, 0, sizeof(float) * (size_t)d->nval);
  for (int k = 0; k < d->info->val_batches; k++) {
    size_t at = (size_t)k * G + (size_t)d->dp_rank * B;
    zeroc_dlrm_batch_t b;
    ZEROC_CHECK(load(d, src, d->val_first + at, &b));
    float l;
    ZEROC_CHECK(zeroc_model_eval(d->model, &b, &l));
    ZEROC_CHECK(zeroc__memcpy_sync(s, d->val_logits + at, zeroc_dlrm_logits(d->dlrm),
                                   sizeof(float) * (size_t)B));
  }
  /* each rank filled its own samples and left zeros elsewhere: the sum is every logit */
  ZEROC_CHECK(zeroc__allreduce_host(zeroc__ctx_group(d->ctx, ZEROC_GROUP_DP), d->val_logits,
                                    (size_t)d->nval, ZEROC_FP32, ZEROC_SUM));
  double sum = 0;
  for (int i = 0; i < d->nval; i++) {
    double x = d->val_logits[i], y = d->val_labels[i];
    sum += fmax(x, 0) - x * y + log1p(exp(-fabs(x)));
    d->val_prob[i] = (float)(1.0 / (1.0 + exp(-x)));
  }
  *loss = sum / d->nval;
  if (auc) *auc = zeroc__auc(d->val_prob, d->val_labels, (uint64_t)d->nval);
  if (logloss) *logloss = zeroc__logloss(d->val_prob, d->val_labels, (uint64_t)d->nval);
  return ZEROC_OK;
}
