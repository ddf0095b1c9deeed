/*
 * persist/model_io.c - a user model's parameters as one safetensors file, by
 * name (zeroc_model_export / zeroc_model_import, zeroc/shard.h): the fp32
 * master weights of every unit, consolidated from whatever layout holds them.
 * ZeRO stages and HSDP replicas are undone by gathering each unit's flat buffer
 * (zeroc_model_gather_unit); a tensor-parallel parameter is rebuilt from the tp
 * ranks' slices with its tp_* fields (tp/split.h); with pipeline parallelism the
 * stages' lists of names are exchanged first, so that every rank knows the
 * whole model's tensors in its order, and each stage's tensors reach rank 0.
 * Import is the reverse: every rank reads the whole tensors of its units and
 * keeps its slice of its shard.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "pp/pipeline.h"
#include "runtime/runtime.h"
#include "shard/engine.h"
#include "tp/split.h"
#include "zeroc/shard.h"

#define NAME_LEN 256 /* a tensor name's bytes, its terminating zero included */

/* One tensor of the file, unsplit: parameter `param` of local unit `unit` where
 * this rank holds it (local), of pipeline stage `stage` (0 without pp). */
typedef struct {
  char name[NAME_LEN];
  int unit, param, stage, local;
  zeroc__split_t sp;
} entry_t;

/* The model's tensors, the same list on every rank: with pp > 1 every stage's,
 * in the whole model's order (stage, then unit, then parameter). */
typedef struct {
  zeroc_model_t *m;
  zeroc_ctx_t *ctx;
  const zeroc_mesh_info_t *mesh;
  entry_t *e; /* every parameter, unit after unit, in order */
  int ne;
  uint64_t maxflat, maxfull; /* this rank's largest unit's flat length; the largest tensor */
} table_t;

/* ---- names ------------------------------------------------------------------------- */

/* What a stage tells the others of one of its parameters (fixed size, so a
 * stage's list travels as bytes). */
typedef struct {
  char unit[NAME_LEN];  /* the unit's name, "unit" for none */
  char param[NAME_LEN]; /* the parameter's name, its index for none */
  int32_t stage, uidx, pidx;
  int32_t local; /* set on arrival: this rank's own */
  zeroc__split_t sp;
} rec_t;

/* This rank's parameters as records, unit after unit, into r (room for all). */
static zeroc_result_t own_records(zeroc_model_t *m, const char *fn, rec_t *r) {
  int nu = zeroc_model_num_units(m), k = 0;
  for (int u = 0; u < nu; u++) {
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
    const char *un = ui.name && ui.name[0] ? ui.name : "unit";
    for (int p = 0; p < ui.nparams; p++, k++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      int a = snprintf(r[k].unit, NAME_LEN, "%s", un);
      int b = pd->name && pd->name[0] ? snprintf(r[k].param, NAME_LEN, "%s", pd->name)
                                      : snprintf(r[k].param, NAME_LEN, "%d", p);
      if (a >= NAME_LEN || b >= NAME_LEN)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "%s: the tensor name of parameter %d of unit %d ('%.40s') is over %d "
                          "bytes",
                          fn, p, u, un, NAME_LEN - 1);
      r[k].stage = zeroc__pipeline_unit_stage(m, u);
      r[k].uidx = u, r[k].pidx = p, r[k].local = 1;
      zeroc__split_of(pd, &r[k].sp);
    }
  }
  return ZEROC_OK;
}

/* This rank's parameter count, with pp > 1 every pipeline rank's (cnt[q]). */
static zeroc_result_t counts(table_t *T, int64_t *cnt) {
  zeroc_model_t *m = T->m;
  int nu = zeroc_model_num_units(m);
  for (int u = 0; u < nu; u++) {
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
    cnt[T->mesh->pp_rank] += ui.nparams;
    if (ui.flat_numel > T->maxflat) T->maxflat = ui.flat_numel;
  }
  if (T->mesh->pp == 1) return ZEROC_OK;
  return zeroc__allreduce_host(zeroc__ctx_group(T->ctx, ZEROC_GROUP_PP), cnt, (size_t)T->mesh->pp,
                               ZEROC_INT64, ZEROC_SUM);
}

/* Every pipeline rank's records, in pipeline-rank order: the ranks of the
 * pipeline group take turns to broadcast theirs (agreed first, world-wide, so
 * that no rank waits in a broadcast another one left). */
static zeroc_result_t all_records(table_t *T, const int64_t *cnt, rec_t *all, const char *fn) {
  int at = 0;
  for (int q = 0; q < T->mesh->pp_rank; q++) at += (int)cnt[q];
  zeroc_result_t r = own_records(T->m, fn, all + at);
  if (T->mesh->pp == 1) return r;
  ZEROC_CHECK(zeroc_ctx_agree(T->ctx, r));
  zeroc_group_t *g = zeroc__ctx_group(T->ctx, ZEROC_GROUP_PP);
  at = 0;
  for (int q = 0; q < T->mesh->pp; at += (int)cnt[q], q++) {
    ZEROC_CHECK(zeroc__broadcast_host(g, all + at, (size_t)cnt[q] * sizeof *all, ZEROC_UINT8, q));
    for (int i = at; i < at + (int)cnt[q]; i++) all[i].local = q == T->mesh->pp_rank;
  }
  return ZEROC_OK;
}

static int rec_order(const void *a, const void *b) {
  const rec_t *x = a, *y = b;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->uidx != y->uidx) return x->uidx < y->uidx ? -1 : 1;
  return x->pidx < y->pidx ? -1 : x->pidx > y->pidx;
}

/* "<unit>.<param>"; when several units of the whole model share a name,
 * "<unit>.<k>.<param>" with k the unit's place (0, 1, ...) among the units of
 * that name. rec[0..n) is in the model's order. */
static zeroc_result_t tensor_name(const rec_t *rec, int n, int i, const char *fn, char *out) {
  int k = 0, same = 0;
  for (int j = 0; j < n; j++) {
    if (rec[j].pidx != 0 || strcmp(rec[j].unit, rec[i].unit)) continue; /* once per unit */
    same++;
    if (rec[j].stage < rec[i].stage || (rec[j].stage == rec[i].stage && rec[j].uidx < rec[i].uidx))
      k++;
  }
  int len = same > 1 ? snprintf(out, NAME_LEN, "%s.%d.%s", rec[i].unit, k, rec[i].param)
                     : snprintf(out, NAME_LEN, "%s.%s", rec[i].unit, rec[i].param);
  if (len < 0 || len >= NAME_LEN)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: the tensor name of parameter %d of unit %d ('%.40s') is over %d bytes",
                      fn, rec[i].pidx, rec[i].uidx, rec[i].unit, NAME_LEN - 1);
  return ZEROC_OK;
}

/* The table's entries from the records, sorted into the model's order. Two
 * parameters under one name (unit "a.b" with parameter "c" beside unit "a"
 * with "b.c") are refused, naming both. */
static zeroc_result_t entries(table_t *T, rec_t *rec, int n, const char *fn) {
  qsort(rec, (size_t)n, sizeof *rec, rec_order);
  T->e = calloc((size_t)n + 1, sizeof *T->e);
  if (!T->e) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: a table of %d parameters", fn, n);
  for (int i = 0; i < n; i++) {
    entry_t *e = &T->e[T->ne];
    ZEROC_CHECK(tensor_name(rec, n, i, fn, e->name));
    e->unit = rec[i].uidx, e->param = rec[i].pidx, e->stage = rec[i].stage;
    e->local = rec[i].local;
    e->sp = rec[i].sp;
    uint64_t full = zeroc__split_full_numel(&e->sp);
    if (full > T->maxfull) T->maxfull = full;
    if (T->mesh->tp > 1 && e->sp.groups > 0 && full > (uint64_t)INT32_MAX)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "%s: '%s' has %" PRIu64 " elements, at most %d when split over tp ranks",
                        fn, e->name, full, INT32_MAX);
    for (int j = 0; j < T->ne; j++) {
      if (strcmp(T->e[j].name, e->name)) continue;
      char sa[32] = "", sb[32] = ""; /* with pp, units are counted on their stage */
      if (T->mesh->pp > 1) {
        snprintf(sa, sizeof sa, " of pipeline stage %d", T->e[j].stage);
        snprintf(sb, sizeof sb, " of pipeline stage %d", e->stage);
      }
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s: parameter %d of unit %d%s and parameter %d of unit %d%s are both "
                        "named '%s' in the file; rename a unit or a parameter",
                        fn, T->e[j].param, T->e[j].unit, sa, e->param, e->unit, sb, e->name);
    }
    T->ne++;
  }
  return ZEROC_OK;
}

/* The checks every rank makes alike, a live model and a path, then the table:
 * every parameter's name and unsplit shape, the whole model's with pp > 1
 * (collective over the world then). ZEROC_OK, or the reason. */
static zeroc_result_t table_open(table_t *T, const char *path, const char *fn) {
  zeroc_result_t r = ZEROC_OK;
  if (!path)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: path is NULL", fn);
  else if (!path[0])
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: path is empty", fn);
  int pp = T->mesh->pp, n = 0;
  int64_t *cnt = calloc((size_t)pp, sizeof *cnt);
  if (!r && !cnt) r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: %d counts", fn, pp);
  if (pp > 1) r = zeroc_ctx_agree(T->ctx, r); /* the counts' all-reduce next: all, or none */
  if (!r) r = counts(T, cnt);
  for (int q = 0; !r && q < pp; q++) n += (int)cnt[q];
  rec_t *rec = r ? NULL : calloc((size_t)n + 1, sizeof *rec);
  if (!r && !rec) r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: a table of %d parameters", fn, n);
  if (pp > 1) r = zeroc_ctx_agree(T->ctx, r);
  if (!r) r = all_records(T, cnt, rec, fn);
  if (!r) r = entries(T, rec, n, fn);
  free(rec);
  free(cnt);
  return r;
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

/* Every rank gathers each of its units and sums the tp slices; rank 0 writes.
 * With pp > 1 the tensors of the other stages reach rank 0 by a broadcast in
 * its pipeline group, in the file's order. A failed write on rank 0 stops its
 * writing, not the collectives the others are in. */
static zeroc_result_t export_values(const table_t *T, zeroc__st_writer_t *w, float *flat,
                                    float *full) {
  const zeroc_mesh_info_t *ms = T->mesh;
  const int to0 = ms->pp > 1 && ms->dp_shard_rank == 0 && ms->dp_replicate_rank == 0 &&
                  ms->cp_rank == 0 && ms->tp_rank == 0; /* in world rank 0's pipeline group */
  zeroc_group_t *ppg = zeroc__ctx_group(T->ctx, ZEROC_GROUP_PP);
  zeroc_result_t wres = ZEROC_OK;
  int unit = -1;
  for (int i = 0; i < T->ne; i++) {
    const entry_t *e = &T->e[i];
    size_t n = (size_t)zeroc__split_full_numel(&e->sp);
    if (e->local) {
      if (e->unit != unit) {
        unit = e->unit;
        ZEROC_CHECK(zeroc_model_gather_unit(T->m, unit, flat));
      }
      ZEROC_CHECK(
          consolidate(T, e, flat + zeroc_model_param_offset(T->m, e->unit, e->param), full));
    }
    if (to0 && e->stage % ms->pp != 0) /* chunk c of pipeline rank q is stage c pp + q */
      ZEROC_CHECK(zeroc__broadcast_host(ppg, full, n, ZEROC_FP32, e->stage % ms->pp));
    if (w && wres == ZEROC_OK) wres = zeroc__st_writer_write_f32(w, full, n);
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

/* This rank's shard of every unit it holds from the file, into shards[u] (S floats each). */
static zeroc_result_t import_read(const table_t *T, const zeroc__st_t *st, float **shards,
                                  float *flat, float *full) {
  zeroc_model_t *m = T->m;
  for (int i = 0; i < T->ne; i++) {
    const entry_t *e = &T->e[i];
    if (!e->local) continue; /* another stage's */
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
  zeroc_result_t res = table_open(&T, path, "zeroc_model_import"); /* collective with pp */
  if (res == ZEROC_OK && !shards) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc_model_import: tables");
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
