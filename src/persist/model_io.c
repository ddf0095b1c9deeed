/*
 * persist/model_io.c - a user model's parameters as one safetensors file, by
 * name (zeroc_model_export / zeroc_model_import, zeroc/shard.h): the fp32
 * master weights of every unit, consolidated from whatever layout holds them.
 * ZeRO stages and HSDP replicas are undone by gathering each unit's flat buffer
 * (zeroc_model_gather_unit); a tensor-parallel parameter is rebuilt from the tp
 * ranks' slices with its tp_* fields (tp/split.h). Import is the reverse: every
 * rank reads the whole tensors of its units and keeps its slice of its shard.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "runtime/runtime.h"
#include "shard/engine.h"
#include "tp/split.h"
#include "zeroc/shard.h"

#define NAME_LEN 256 /* a tensor name's bytes, its terminating zero included */

/* One tensor of the file: parameter `param` of unit `unit`, unsplit. */
typedef struct {
  char name[NAME_LEN];
  int unit, param;
  zeroc__split_t sp;
} entry_t;

/* The model's tensors, the same list on every rank. */
typedef struct {
  zeroc_model_t *m;
  zeroc_ctx_t *ctx;
  const zeroc_mesh_info_t *mesh;
  entry_t *e; /* every parameter, unit after unit, in order */
  int ne;
  uint64_t maxflat, maxfull; /* the largest unit's flat length; the largest unsplit tensor */
} table_t;

/* ---- names ------------------------------------------------------------------------- */

static const char *unit_name(const zeroc_unit_info_t *ui) {
  return ui->name && ui->name[0] ? ui->name : "unit";
}

/* "<unit>.<param>"; when several units share a name, "<unit>.<k>.<param>" with k the
 * unit's place (0, 1, ...) among the units of that name; a unit without a name is
 * "unit", a parameter without one goes by its index. */
static zeroc_result_t tensor_name(zeroc_model_t *m, int u, int p, char *out) {
  zeroc_unit_info_t ui, vi;
  ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
  const char *un = unit_name(&ui);
  int k = 0, same = 0, n = zeroc_model_num_units(m);
  for (int v = 0; v < n; v++) {
    ZEROC_CHECK(zeroc_model_unit_info(m, v, &vi));
    if (!strcmp(unit_name(&vi), un)) {
      same++;
      if (v < u) k++;
    }
  }
  const char *pn = zeroc_model_param_desc(m, u, p)->name;
  char idx[16];
  if (!pn || !pn[0]) {
    snprintf(idx, sizeof idx, "%d", p);
    pn = idx;
  }
  int len = same > 1 ? snprintf(out, NAME_LEN, "%s.%d.%s", un, k, pn)
                     : snprintf(out, NAME_LEN, "%s.%s", un, pn);
  if (len < 0 || len >= NAME_LEN)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "the tensor name of parameter %d of unit %d ('%.40s') is over %d bytes", p, u,
                      un, NAME_LEN - 1);
  return ZEROC_OK;
}

/* Every parameter's name and unsplit shape. Two parameters under one name (unit
 * "a.b" with parameter "c" beside unit "a" with "b.c") are refused, naming both. */
static zeroc_result_t table_build(table_t *T, const char *fn) {
  zeroc_model_t *m = T->m;
  int n = zeroc_model_num_units(m), total = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
    total += ui.nparams;
    if (ui.flat_numel > T->maxflat) T->maxflat = ui.flat_numel;
  }
  T->e = calloc((size_t)total, sizeof *T->e);
  if (!T->e) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: a table of %d parameters", fn, total);
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
    for (int p = 0; p < ui.nparams; p++) {
      entry_t *e = &T->e[T->ne];
      ZEROC_CHECK(tensor_name(m, u, p, e->name));
      e->unit = u, e->param = p;
      zeroc__split_of(zeroc_model_param_desc(m, u, p), &e->sp);
      uint64_t full = zeroc__split_full_numel(&e->sp);
      if (full > T->maxfull) T->maxfull = full;
      if (T->mesh->tp > 1 && e->sp.groups > 0 && full > (uint64_t)INT32_MAX)
        return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                          "%s: '%s' has %" PRIu64 " elements, at most %d when split over tp ranks",
                          fn, e->name, full, INT32_MAX);
      for (int j = 0; j < T->ne; j++)
        if (!strcmp(T->e[j].name, e->name))
          return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                            "%s: parameter %d of unit %d and parameter %d of unit %d are both "
                            "named '%s' in the file; rename a unit or a parameter",
                            fn, T->e[j].param, T->e[j].unit, p, u, e->name);
      T->ne++;
    }
  }
  return ZEROC_OK;
}

/* The checks every rank makes alike before any collective: a live model, a path,
 * no pipeline; then the table. ZEROC_OK, or the reason. */
static zeroc_result_t table_open(table_t *T, const char *path, const char *fn) {
  if (!path) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: path is NULL", fn);
  if (!path[0]) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: path is empty", fn);
  if (T->mesh->pp > 1)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s: pp %d: a pipeline stage's model holds only its own units; export and "
                      "import run on models without pipeline parallelism (pp 1)",
                      fn, T->mesh->pp);
  return table_build(T, fn);
}

static void shape_of(const zeroc__split_t *sp, uint64_t *shape) {
  for (int d = 0; d < sp->ndim; d++) shape[d] = (uint64_t)sp->full[d];
}

/* ---- export ------------------------------------------------------------------------ */

/* The unsplit tensor `dst` of e from this rank's local values `src`. Split over
 * tp: each tp rank writes its slice into zeros and the sum over the tp group is
 * the tensor (adding zeros is exact). Not split: every tp rank holds it whole. */
static zeroc_result_t consolidate(const table_t *T, const entry_t *e, const float *src,
                                  float *dst) {
  const zeroc_param_desc_t *pd = zeroc_model_param_desc(T->m, e->unit, e->param);
  uint64_t full = zeroc__split_full_numel(&e->sp), n = zeroc_param_numel(pd);
  if (T->mesh->tp == 1 || e->sp.groups == 0) {
    memcpy(dst, src, n * sizeof(float));
    return ZEROC_OK;
  }
  memset(dst, 0, full * sizeof(float));
  for (uint64_t j = 0; j < n; j++) dst[zeroc__split_to_global(&e->sp, pd->tp_rank, j)] = src[j];
  return zeroc__allreduce_host(zeroc__ctx_group(T->ctx, ZEROC_GROUP_TP), dst, (size_t)full,
                               ZEROC_FP32, ZEROC_SUM);
}

/* Rank 0: the file's header, every tensor declared (values follow in that order). */
static zeroc_result_t header(const table_t *T, const char *path, zeroc__st_writer_t **w) {
  ZEROC_CHECK(zeroc__st_writer_create(path, w));
  ZEROC_CHECK(zeroc__st_writer_metadata(*w, "format", "pt"));
  ZEROC_CHECK(zeroc__st_writer_metadata(*w, "producer", "zeroc"));
  for (int i = 0; i < T->ne; i++) {
    uint64_t shape[ZEROC_MAX_DIMS];
    shape_of(&T->e[i].sp, shape);
    ZEROC_CHECK(zeroc__st_writer_add(*w, T->e[i].name, ZEROC_ST_F32, T->e[i].sp.ndim, shape));
  }
  return ZEROC_OK;
}

/* Every rank gathers each unit and sums the tp slices; rank 0 writes. A failed
 * write on rank 0 stops its writing, not the collectives the others are in. */
static zeroc_result_t export_values(const table_t *T, zeroc__st_writer_t *w, float *flat,
                                    float *full) {
  zeroc_result_t wres = ZEROC_OK;
  int unit = -1;
  for (int i = 0; i < T->ne; i++) {
    const entry_t *e = &T->e[i];
    if (e->unit != unit) {
      unit = e->unit;
      ZEROC_CHECK(zeroc_model_gather_unit(T->m, unit, flat));
    }
    ZEROC_CHECK(consolidate(T, e, flat + zeroc_model_param_offset(T->m, e->unit, e->param), full));
    if (w && wres == ZEROC_OK)
      wres = zeroc__st_writer_write_f32(w, full, (size_t)zeroc__split_full_numel(&e->sp));
  }
  if (w && wres == ZEROC_OK) wres = zeroc__st_writer_finish(w);
  return wres;
}

zeroc_result_t zeroc_model_export(zeroc_model_t *m, const char *path) {
  ZEROC_CHECK(zeroc__model_check(m, "zeroc_model_export"));
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  table_t T = {.m = m, .ctx = ctx, .mesh = zeroc_ctx_mesh(ctx)};
  zeroc__st_writer_t *w = NULL;
  float *flat = NULL, *full = NULL;
  zeroc_result_t res = table_open(&T, path, "zeroc_model_export");
  if (res == ZEROC_OK) {
    flat = malloc(T.maxflat * sizeof(float) + 4);
    full = malloc(T.maxfull * sizeof(float) + 4);
    if (!flat || !full)
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM,
                       "zeroc_model_export: buffers of %" PRIu64 " + %" PRIu64 " floats", T.maxflat,
                       T.maxfull);
  }
  if (res == ZEROC_OK && T.mesh->rank == 0) res = header(&T, path, &w);
  /* every rank goes into the gathers, or none */
  res = zeroc_ctx_agree(ctx, res);
  if (res == ZEROC_OK) res = zeroc_ctx_agree(ctx, export_values(&T, w, flat, full));
  zeroc__st_writer_destroy(w);
  free(flat);
  free(full);
  free(T.e);
  return zeroc__ctx_ret(ctx, res);
}

/* ---- import ------------------------------------------------------------------------ */

/* Every tensor of the table in the file with its unsplit shape, and no other. */
static zeroc_result_t import_check(const table_t *T, const zeroc__st_t *st, const char *path) {
  for (int i = 0; i < T->ne; i++) {
    const entry_t *e = &T->e[i];
    const zeroc__st_tensor_t *t = zeroc__st_find(st, e->name);
    if (!t)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc_model_import: %s has no tensor '%s' (parameter %d of unit %d)", path,
                        e->name, e->param, e->unit);
    int same = t->ndim == e->sp.ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == (uint64_t)e->sp.full[d];
    if (!same) {
      char want[96] = "", got[96] = "";
      for (int d = 0; d < e->sp.ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64, d ? ", " : "",
                 e->sp.full[d]);
      for (int d = 0; d < t->ndim; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRIu64, d ? ", " : "",
                 t->shape[d]);
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc_model_import: tensor '%s' of %s has shape (%s); the model's is (%s)",
                        e->name, path, got, want);
    }
  }
  for (size_t k = 0; k < zeroc__st_count(st); k++) {
    const char *name = zeroc__st_tensor(st, k)->name;
    int known = 0;
    for (int i = 0; i < T->ne && !known; i++) known = !strcmp(T->e[i].name, name);
    if (!known)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc_model_import: %s holds tensor '%s', which is no parameter of the "
                        "model (%d tensors expected, %zu in the file)",
                        path, name, T->ne, zeroc__st_count(st));
  }
  return ZEROC_OK;
}

/* This rank's shard of every unit from the file, into shards[u] (S floats each). */
static zeroc_result_t import_read(const table_t *T, const zeroc__st_t *st, float **shards,
                                  float *flat, float *full) {
  zeroc_model_t *m = T->m;
  for (int i = 0; i < T->ne; i++) {
    const entry_t *e = &T->e[i];
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, e->unit, &ui));
    if (e->param == 0) memset(flat, 0, ui.flat_numel * sizeof(float)); /* padding stays 0 */
    const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, e->unit, e->param);
    uint64_t ne = zeroc_param_numel(pd);
    ZEROC_CHECK(zeroc__st_read_f32(zeroc__st_find(st, e->name), full,
                                   (size_t)zeroc__split_full_numel(&e->sp)));
    float *dst = flat + zeroc_model_param_offset(m, e->unit, e->param);
    for (uint64_t j = 0; j < ne; j++) dst[j] = full[zeroc__split_to_global(&e->sp, pd->tp_rank, j)];
    if (e->param == ui.nparams - 1) {
      shards[e->unit] = malloc(ui.shard_numel * sizeof(float) + 4);
      if (!shards[e->unit])
        return ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc_model_import: the shard of unit %d", e->unit);
      memcpy(shards[e->unit], flat + ui.shard_offset, ui.shard_numel * sizeof(float));
    }
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_model_import(zeroc_model_t *m, const char *path) {
  ZEROC_CHECK(zeroc__model_check(m, "zeroc_model_import"));
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  table_t T = {.m = m, .ctx = ctx, .mesh = zeroc_ctx_mesh(ctx)};
  int n = zeroc_model_num_units(m);
  zeroc__st_t *st = NULL;
  float *flat = NULL, *full = NULL, **shards = calloc((size_t)n, sizeof *shards);
  zeroc_result_t res = shards ? table_open(&T, path, "zeroc_model_import")
                              : ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc_model_import: tables");
  if (res == ZEROC_OK) res = zeroc__st_open(path, &st);
  if (res == ZEROC_OK) res = import_check(&T, st, path);
  if (res == ZEROC_OK) {
    flat = malloc(T.maxflat * sizeof(float) + 4);
    full = malloc(T.maxfull * sizeof(float) + 4);
    res = flat && full
              ? import_read(&T, st, shards, flat, full)
              : ZEROC_FAIL(ZEROC_ERR_NOMEM,
                           "zeroc_model_import: buffers of %" PRIu64 " + %" PRIu64 " floats",
                           T.maxflat, T.maxfull);
  }
  /* nothing changes unless every rank read everything */
  res = zeroc_ctx_agree(ctx, res);
  for (int u = 0; u < n && res == ZEROC_OK; u++)
    res = zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, shards[u]);
  /* set_shard wrote the masters only: the compute parameters follow here */
  if (res == ZEROC_OK) res = zeroc_model_sync_params(m);
  zeroc__st_close(st);
  for (int u = 0; shards && u < n; u++) free(shards[u]);
  free(shards);
  free(flat);
  free(full);
  free(T.e);
  return zeroc__ctx_ret(ctx, res);
}
