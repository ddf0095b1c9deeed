/*
 * model/dlrm_arch.c - the DLRM behind the model interface (zeroc/arch.h): its
 * configuration (a preset with the --tables/--rows/--dim/--dense/--bottom/--top
 * overrides, its defaults and the layouts it supports) and its table of
 * functions. The run itself is dlrm_run.c, its checkpoints dlrm_ckpt.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/dlrm_price.h"
#include "model/dlrm_run.h"

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
    if (*end && !*p) /* "10," : a trailing comma names a missing integer */
      return BAD("%s '%s': accepted a comma list of 1 to %d integers in %lld..%lld (no empty "
                 "item)",
                 what, s, max, lo, hi);
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

zeroc_result_t zeroc__dlrm_resolve(zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                                   zeroc_train_info_t *info) {
  zeroc_dlrm_config_t *m = &info->dlrm_model;
  (void)mesh;
  ZEROC_CHECK(zeroc_dlrm_preset(c->model, m));
  info->dlrm = 1;
  if (c->tables != ZEROC_UNSET && (c->tables < 1 || c->tables > ZEROC_DLRM_MAX_TABLES))
    return BAD("tables %d: accepted 1..%d", c->tables, ZEROC_DLRM_MAX_TABLES);
  if (c->tables != ZEROC_UNSET) {
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
  if ((c->dim != ZEROC_UNSET && c->dim < 1) || (c->dense != ZEROC_UNSET && c->dense < 1))
    return BAD("dim %d, dense %d: accepted >= 1", c->dim, c->dense);
  if (c->dim != ZEROC_UNSET)
    m->dim = m->bottom[m->nbottom - 1] = c->dim; /* the bottom ends in dim */
  if (c->dense != ZEROC_UNSET) m->dense = c->dense;
  if (c->bottom) ZEROC_CHECK(widths("bottom", c->bottom, m->bottom, &m->nbottom));
  if (c->top) ZEROC_CHECK(widths("top", c->top, m->top, &m->ntop));
  if (c->batch != ZEROC_UNSET) m->batch = c->batch;
  c->batch = m->batch, c->tables = m->tables, c->dim = m->dim, c->dense = m->dense;
  if (c->embedding_sharding != ZEROC_UNSET &&
      (c->embedding_sharding < 0 || c->embedding_sharding > 4))
    return BAD("embedding_sharding %d: accepted 0 auto, 1 table, 2 column, 3 row, 4 data",
               c->embedding_sharding);
  if (c->val_tokens == ZEROC_UNSET) c->val_tokens = 4096; /* samples, for DLRM */
  if (c->param_dtype < 0) c->param_dtype = ZEROC_FP32;
  return zeroc_dlrm_config_check(m);
}

/* What the DLRM path does not do (yet), and its own rules. */
static zeroc_result_t check(const zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                            const zeroc_train_info_t *info, int names) {
  (void)info, (void)names; /* the DLRM's flags and fields share their names */
  /* every rank data-parallel: tp, pp (and any other model-parallel size) 1 */
  if (mesh->dp != mesh->world)
    return BAD(
        "model %s: the mesh has %d data-parallel ranks of %d (pp %d, tp %d, cp %d); the "
        "DLRM's layout is data-parallel MLPs with model-parallel tables over the same ranks, so "
        "pipeline, tensor and context parallelism are for the GPT",
        c->model, mesh->dp, mesh->world, mesh->pp, mesh->tp, mesh->cp);
  if (c->grad_accum != 1)
    return BAD("grad_accum %d with model %s: accepted 1 (the tables update in every backward)",
               c->grad_accum, c->model);
  if (c->init || c->export_path)
    return BAD("model %s: --init and --export are for the GPT (DLRM checkpoints: save, resume)",
               c->model);
  if (c->param_dtype != ZEROC_FP32)
    return BAD("model %s computes in fp32: param_dtype must be fp32 (--dtype fp32)", c->model);
  if (c->grad_reduce_dtype != ZEROC_FP32)
    return BAD("model %s reduces its gradients in fp32: grad_reduce_dtype must be fp32 "
               "(--grad-reduce-dtype fp32)",
               c->model);
  if (c->dropout != 0) return BAD("dropout %g: the DLRM has none", c->dropout);
  if (c->val_tokens < 1 || c->val_tokens > 100000000)
    return BAD("val_tokens %lld (held-out samples for DLRM): accepted 1..1e8",
               (long long)c->val_tokens);
  if (c->val_every < 0) return BAD("val_every %d: accepted >= 0", c->val_every);
  return ZEROC_OK;
}

static zeroc_model_t *model(void *self) { return ((zeroc__dlrm_run_t *)self)->model; }

static zeroc_pipeline_t *no_pipeline(void *self) {
  (void)self;
  return NULL;
}

static double no_wait(void *self) {
  (void)self;
  return 0;
}

static const char *const PRESETS[] = {"dlrm-tiny", "dlrm", "dlrm-mlperf", NULL};

const zeroc_arch_t zeroc__arch_dlrm = {
    .name = "dlrm",
    .presets = PRESETS,
    .resolve = zeroc__dlrm_resolve,
    .check = check,
    .num_units = zeroc__dlrm_num_units,
    .unit_costs = zeroc__dlrm_unit_costs,
    .create = zeroc__dlrm_create,
    .destroy = zeroc__dlrm_destroy,
    .model = model,
    .pipeline = no_pipeline,
    .run_step = zeroc__dlrm_run_step,
    .evaluate = zeroc__dlrm_evaluate,
    .comm_wait_s = no_wait,
    .app_json = zeroc__dlrm_app_json,
    .resume_fields = zeroc__dlrm_resume_fields,
    .save_extra = zeroc__dlrm_save_tables,
    .load_extra = zeroc__dlrm_load_tables,
    /* no import, export or sampling: DLRM checkpoints are save and resume */
    .price_check = zeroc__dlrm_price_check,
    .price_unit = zeroc__dlrm_price_unit,
    .price_stage = zeroc__dlrm_price_stage,
    .figures = zeroc__dlrm_figures,
};
