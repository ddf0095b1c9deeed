/*
 * train/dlrm_train.c - the trainer's DLRM path.
 *
 * Design: one trainer object and one step loop for both models. The step
 * (pending checkpoint, LR schedule, zeroc_model_step on the sharded units,
 * spike report, metrics, evaluation cadence) is model-independent already; only
 * three things differ: what builds the run, what one step's batches do, and what
 * an evaluation measures. So the trainer keeps its GPT code and branches to this
 * file at those three points (resolve/build, run_batches, evaluate) instead of
 * growing a model interface of function tables that one caller would use: the
 * smaller change, and the DLRM's extra state lives in one struct here.
 *
 * Per step (grad_accum 1): each rank reads its B samples of the global batch
 * (samples s*G + dp_rank*B ..), the tables pool their bags, the MLPs run as
 * sharded units with the pooled rows in the batch, the pooled rows' gradient
 * goes back to the tables (AdaGrad at this step's learning rate), and the
 * trainer's zeroc_model_step updates the MLPs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "io/clicks.h"
#include "runtime/runtime.h"
#include "train/dlrm_tables.h"
#include "train/trainer.h"
#include "zeroc/device.h"

#define VAL_FIRST ((uint64_t)1 << 40) /* synthetic held-out samples: beyond any run */

#include "train/dlrm_run.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

/* ---- the config ---------------------------------------------------------------------------- */

/* A comma list of n in 1..max integers in [lo, hi] named `what`. */
static zeroc_result_t parse_list(const char *what, const char *s, int max, long long lo,
                                 long long hi, long long *v, int *n) {
  *n = 0;
  const char *p = s;
  while (*p) {
    char *end;
    long long x = strtoll(p, &end, 10);
    if (end == p || x < lo || x > hi || (*end && *end != ',') || *n == max)
      return BAD("%s '%s': accepted a comma list of 1 to %d integers in %lld..%lld", what, s, max,
                 lo, hi);
    v[(*n)++] = x;
    p = *end ? end + 1 : end;
  }
  if (!*n) return BAD("%s is empty: accepted a comma list of integers", what);
  return ZEROC_OK;
}

static zeroc_result_t widths(const char *what, const char *s, int *out, int *n) {
  long long v[ZEROC_DLRM_MAX_LAYERS];
  ZEROC_CHECK(parse_list(what, s, ZEROC_DLRM_MAX_LAYERS, 1, 65536, v, n));
  for (int i = 0; i < *n; i++) out[i] = (int)v[i];
  return ZEROC_OK;
}

zeroc_result_t zeroc__dlrm_resolve(zeroc_trainer_t *tr, zeroc_train_config_t *c) {
  zeroc_dlrm_config_t *m = &tr->info.dlrm_model;
  ZEROC_CHECK(zeroc_dlrm_preset(c->model, m));
  tr->info.dlrm = 1;
  if (c->tables < 0 || c->tables > ZEROC_DLRM_MAX_TABLES)
    return BAD("tables %d: accepted 1..%d", c->tables, ZEROC_DLRM_MAX_TABLES);
  if (c->tables > 0) {
    /* more tables than the preset's: the new ones as large as its last */
    for (int t = m->tables; t < c->tables; t++) m->rows[t] = m->rows[m->tables - 1];
    m->tables = c->tables;
  }
  if (c->rows) {
    long long v[ZEROC_DLRM_MAX_TABLES];
    int n;
    ZEROC_CHECK(parse_list("rows", c->rows, ZEROC_DLRM_MAX_TABLES, 1, 1LL << 40, v, &n));
    if (n != 1 && n != m->tables)
      return BAD("rows '%s': %d counts for %d tables; accepted one count or one per table", c->rows,
                 n, m->tables);
    for (int t = 0; t < m->tables; t++) m->rows[t] = v[n == 1 ? 0 : t];
  }
  if (c->dim < 0 || c->dense < 0) return BAD("dim %d, dense %d: accepted >= 1", c->dim, c->dense);
  if (c->dim > 0) m->dim = m->bottom[m->nbottom - 1] = c->dim; /* the bottom must end in dim */
  if (c->dense > 0) m->dense = c->dense;
  if (c->bottom) ZEROC_CHECK(widths("bottom", c->bottom, m->bottom, &m->nbottom));
  if (c->top) ZEROC_CHECK(widths("top", c->top, m->top, &m->ntop));
  if (c->batch > 0) m->batch = c->batch;
  c->batch = m->batch, c->tables = m->tables, c->dim = m->dim, c->dense = m->dense;
  if (c->embedding_sharding < 0 || c->embedding_sharding > 4)
    return BAD("embedding_sharding %d: accepted 0 auto, 1 table, 2 column, 3 row, 4 data",
               c->embedding_sharding);
  if (c->val_tokens == 0) c->val_tokens = 4096; /* samples, for DLRM */
  return zeroc_dlrm_config_check(m);
}

/* What the DLRM path does not do (yet), and its own rules. */
zeroc_result_t zeroc__dlrm_check(const zeroc_trainer_t *tr, const zeroc_train_config_t *c) {
  /* every rank data-parallel: tp, pp (and any other model-parallel size) 1 */
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(tr->ctx);
  if (mesh->dp != mesh->world)
    return BAD("model %s: the mesh has %d data-parallel ranks of %d (pp %d, tp %d, cp %d); the "
               "DLRM's layout is data-parallel MLPs with model-parallel tables over the same ranks, so "
               "pipeline, tensor and context parallelism are for the GPT",
               c->model, mesh->dp, mesh->world, tr->pp, tr->tp, mesh->cp);
  if (c->grad_accum != 1)
    return BAD("grad_accum %d with model %s: accepted 1 (the tables update in every backward)",
               c->grad_accum, c->model);
  if (c->init || c->export_path)
    return BAD("model %s: --init and --export are for the GPT (DLRM checkpoints: save, resume)",
               c->model);
  if (c->param_dtype != ZEROC_FP32)
    return BAD("model %s computes in fp32: param_dtype must be fp32 (--dtype fp32)", c->model);
  if (c->dropout != 0) return BAD("dropout %g: the DLRM has none", c->dropout);
  if (c->val_tokens < 1 || c->val_tokens > 100000000)
    return BAD("val_tokens %lld (held-out samples for DLRM): accepted 1..1e8",
               (long long)c->val_tokens);
  if (c->val_every < 0) return BAD("val_every %d: accepted >= 0", c->val_every);
  return ZEROC_OK;
}
