/*
 * persist/ckpt_load.c - reading a sharded checkpoint back (ckpt_save.c writes
 * it). Loading re-cuts the flat shards when the shard count changed: a
 * parameter sits at the same flat offset for every shard count, only the tail
 * padding differs. Loading onto another tensor-parallel size re-splits each
 * parameter: the manifest records how every local tensor maps to the unsplit
 * one (tp/split.h), so each new element is found in whichever old tp rank's
 * shards hold it. With pipeline parallelism each stage holds other units: the
 * manifest lists every stage's units and a rank checks and loads only its own
 * stage's. Every rank checks its part before anything of the model changes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "io/json.h"
#include "persist/ckpt.h"
#include "runtime/runtime.h"
#include "tp/split.h"
#include "zeroc/ckpt.h"

typedef struct {
  char name[64];
  int pp, tp, shard;
  uint64_t bytes;
  uint32_t crc;
} file_ent_t;

/* Reads, checks and keeps the fp32 contents of shard file `idx` (cached). */
static zeroc_result_t load_file(const char *dir, file_ent_t *fe, float **data) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, fe->name);
  char *buf = NULL;
  size_t len = 0;
  zeroc_result_t r = zeroc__file_read(path, (size_t)fe->bytes + 1, &buf, &len);
  if (r) return r;
  if (len != fe->bytes) {
    free(buf);
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "checkpoint file '%s' has %zu bytes, the manifest says %" PRIu64, path, len,
                      fe->bytes);
  }
  uint32_t crc = zeroc__crc32c(0, buf, len);
  if (crc != fe->crc) {
    free(buf);
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "checkpoint file '%s' fails its checksum (CRC-32C %08x, manifest %08x): it "
                      "was not used",
                      path, crc, fe->crc);
  }
  *data = (float *)buf;
  return ZEROC_OK;
}

/* A parameter as the checkpoint saved it. */
typedef struct {
  uint64_t off, numel;
  zeroc__split_t split; /* how the saved local tensor sits in the unsplit one */
} old_param_t;

/* Reads a small integer array (a shape) of at most ZEROC_MAX_DIMS entries. */
static int get_dims(const zeroc__json_t *o, const char *key, int64_t *v, int *n) {
  const zeroc__json_t *a = zeroc__json_get(o, key);
  if (!a || a->type != ZEROC_JSON_ARRAY || a->u.arr.n < 1 || a->u.arr.n > ZEROC_MAX_DIMS) return -1;
  uint64_t prod = 1;
  for (size_t i = 0; i < a->u.arr.n; i++) {
    const zeroc__json_t *x = &a->u.arr.items[i];
    if (x->type != ZEROC_JSON_NUMBER || !x->u.num.is_int || x->u.num.i < 1) return -1;
    v[i] = x->u.num.i;
    /* the product stays below MAX_NUMEL, so element counts cannot overflow */
    if ((uint64_t)v[i] > MAX_NUMEL) return -1;
    prod *= (uint64_t)v[i];
    if (prod > MAX_NUMEL) return -1;
  }
  *n = (int)a->u.arr.n;
  return 0;
}

/* The saved split of parameter p of unit u (manifest entry pj), checked against
 * the model's parameter pd so that an element of the unsplit tensor means the
 * same in both: the same name and rank of tensor, the same unsplit shape, or
 * (a padded dimension, one group on both sides) a different length along the
 * split dimension whose extra elements must then be zero (checked when
 * loading). */
static zeroc_result_t old_split(const zeroc__json_t *pj, const zeroc_param_desc_t *pd, int old_tp,
                                const char *what, int u, int p, old_param_t *op) {
  const char *name = pd->name ? pd->name : "";
  const zeroc__json_t *nm = zeroc__json_get(pj, "name");
  int64_t shape[ZEROC_MAX_DIMS], full[ZEROC_MAX_DIMS];
  int nd = 0, nf = 0;
  uint64_t groups = 0, dim = 0;
  if (!nm || nm->type != ZEROC_JSON_STRING || strcmp(nm->u.str.s, name))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d parameter %d is '%s' in the checkpoint, '%s' in this model",
                      what, u, p, nm && nm->type == ZEROC_JSON_STRING ? nm->u.str.s : "?", name);
  if (get_dims(pj, "shape", shape, &nd) ||
      zeroc__ckpt_get_u64(pj, "tp_groups", what, MAX_MESH, &groups))
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "%s: parameter '%s' has no tensor-parallel layout (shape, tp_groups): this "
        "checkpoint was saved with tp %d by an older zeroc and can only be loaded with tp %d",
        what, name, old_tp, old_tp);
  memset(op->split.full, 0, sizeof op->split.full);
  op->split.ndim = nd;
  op->split.size = old_tp;
  op->split.groups = (int)groups;
  if (groups) {
    if (zeroc__ckpt_get_u64(pj, "tp_dim", what, ZEROC_MAX_DIMS, &dim) ||
        get_dims(pj, "tp_full", full, &nf) || nf != nd || (int)dim >= nd ||
        groups > (uint64_t)full[dim])
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: parameter '%s': malformed tp_dim / tp_full", what,
                        name);
    op->split.dim = (int)dim;
    for (int d = 0; d < nd; d++) {
      int64_t want = d == (int)dim ? full[d] / old_tp : full[d];
      if (shape[d] != want || (d == (int)dim && full[d] % ((int64_t)old_tp * (int64_t)groups)))
        return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: parameter '%s': shape and tp_full disagree", what,
                          name);
      op->split.full[d] = full[d];
    }
  } else {
    for (int d = 0; d < nd; d++) op->split.full[d] = shape[d];
  }
  zeroc__split_t ns;
  zeroc__split_of(pd, &ns);
  int padded = ns.groups == 1 && op->split.groups == 1 && ns.dim == op->split.dim;
  int same = ns.ndim == nd;
  for (int d = 0; same && d < nd; d++)
    same = ns.full[d] == op->split.full[d] || (padded && d == ns.dim);
  if (!same || (ns.groups > 1 && op->split.groups > 1 && ns.groups != op->split.groups))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: parameter '%s' (unit %d) has another unsplit shape in the checkpoint "
                      "than in this model: a different model shape",
                      what, name, u);
  return ZEROC_OK;
}

/* Loads (cached) the old file of tp rank r, shard s. */
static zeroc_result_t old_file(const char *dir, file_ent_t *files, float **cache, uint64_t nshards,
                               int r, uint64_t s, const float **out) {
  size_t i = (size_t)r * nshards + s;
  if (!cache[i]) ZEROC_CHECK(load_file(dir, &files[i], &cache[i]));
  *out = cache[i];
  return ZEROC_OK;
}

/* Re-split: this rank's new shard of unit u (S floats per state into `dst`),
 * element by element from whichever old tp rank and shard hold it. */
static zeroc_result_t resplit_unit(zeroc_model_t *m, int u, const old_param_t *op, uint64_t old_S,
                                   uint64_t base, const char *dir, file_ent_t *files, float **cache,
                                   uint64_t nshards, float *dst) {
  zeroc_unit_info_t ui;
  ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
  uint64_t S = ui.shard_numel, lo = ui.shard_offset;
  for (int p = 0; p < ui.nparams; p++) {
    const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
    zeroc__split_t ns;
    zeroc__split_of(pd, &ns);
    uint64_t off = zeroc_model_param_offset(m, u, p), n = zeroc_param_numel(pd);
    uint64_t a = off > lo ? off : lo, b = off + n < lo + S ? off + n : lo + S;
    for (uint64_t j = a; j < b; j++) {
      uint64_t g = zeroc__split_to_global(&ns, pd->tp_rank, j - off), go, jo;
      int r;
      /* padding the old tensor did not have stays zero */
      if (!zeroc__split_remap(g, ns.full, op[p].split.full, ns.ndim, &go)) continue;
      zeroc__split_to_local(&op[p].split, go, &r, &jo);
      uint64_t q = op[p].off + jo, s = q / old_S;
      const float *f;
      ZEROC_CHECK(old_file(dir, files, cache, nshards, r, s, &f));
      for (int k = 0; k < STATES; k++)
        dst[(uint64_t)k * S + (j - lo)] = f[base + (uint64_t)k * old_S + q % old_S];
    }
  }
  return ZEROC_OK;
}

/* Re-split: elements of the old unsplit tensors that this model has no place
 * for (padding beyond a smaller padded size) must be zero in every state, or
 * loading would silently drop trained values. */
static zeroc_result_t resplit_dropped(zeroc_model_t *m, int u, const old_param_t *op,
                                      uint64_t old_S, uint64_t base, const char *dir,
                                      file_ent_t *files, float **cache, uint64_t nshards,
                                      int old_tp, const char *what) {
  zeroc_unit_info_t ui;
  ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
  for (int p = 0; p < ui.nparams; p++) {
    const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
    zeroc__split_t ns;
    zeroc__split_of(pd, &ns);
    int shrinks = 0;
    for (int d = 0; d < ns.ndim; d++) shrinks |= op[p].split.full[d] > ns.full[d];
    if (!shrinks) continue;
    uint64_t local =
        zeroc__split_full_numel(&op[p].split) / (uint64_t)(op[p].split.groups ? old_tp : 1);
    for (int r = 0; r < (op[p].split.groups ? old_tp : 1); r++)
      for (uint64_t jo = 0; jo < local; jo++) {
        uint64_t g = zeroc__split_to_global(&op[p].split, r, jo), gn;
        if (zeroc__split_remap(g, op[p].split.full, ns.full, ns.ndim, &gn)) continue;
        uint64_t q = op[p].off + jo, s = q / old_S;
        const float *f;
        ZEROC_CHECK(old_file(dir, files, cache, nshards, r, s, &f));
        for (int k = 0; k < STATES; k++)
          if (f[base + (uint64_t)k * old_S + q % old_S] != 0.0f)
            return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                              "%s: parameter '%s' holds non-zero values at unsplit index %" PRIu64
                              ", which this model's shape has no place for",
                              what, pd->name ? pd->name : "", g);
      }
  }
  return ZEROC_OK;
}

/* Unit u as saved (manifest entry uj, `numel` elements, old_S x shards = old_N)
 * against the model's unit ui: each failure names what differs. */
static zeroc_result_t check_unit(const zeroc__json_t *uj, const zeroc_unit_info_t *ui, int u,
                                 uint64_t numel, uint64_t old_S, uint64_t old_N, uint64_t shards,
                                 int resplit, const char *what) {
  const char *un = ui->name ? ui->name : "";
  const zeroc__json_t *nm = zeroc__json_get(uj, "name");
  if (nm && nm->type == ZEROC_JSON_STRING && strcmp(nm->u.str.s, un))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d is '%s' in the checkpoint, '%s' in this model", what, u,
                      nm->u.str.s, un);
  if (numel != ui->numel && !resplit)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d ('%s') has %" PRIu64 " parameters in the checkpoint, %" PRIu64
                      " in this model: a different model shape",
                      what, u, un, numel, ui->numel);
  const zeroc__json_t *pj = zeroc__json_get(uj, "params");
  if (!pj || pj->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: unit %d ('%s'): field 'params' missing or not an array", what, u, un);
  if (pj->u.arr.n != (size_t)ui->nparams)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d ('%s') has %zu parameter tensors in the checkpoint, %d in this "
                      "model: a different model shape",
                      what, u, un, pj->u.arr.n, ui->nparams);
  if (old_S * shards != old_N || numel > old_N)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: unit %d ('%s'): shard_numel %" PRIu64 " x shard_size %" PRIu64
                      " should be flat_numel %" PRIu64 " (at least numel %" PRIu64 ")",
                      what, u, un, old_S, shards, old_N, numel);
  return ZEROC_OK;
}

/* Parameter p of unit u as saved (manifest entry pj at offset `off`, `pn`
 * elements) against the model's pd at `offset`, when the tensor-parallel size
 * is unchanged: the same name, shape (when the manifest has one: older
 * manifests did not record it), place and size. */
static zeroc_result_t check_param(const zeroc__json_t *pj, const zeroc_param_desc_t *pd, int u,
                                  int p, uint64_t off, uint64_t pn, uint64_t offset,
                                  const char *what) {
  const char *name = pd->name ? pd->name : "";
  const zeroc__json_t *nm = zeroc__json_get(pj, "name");
  if (!nm || nm->type != ZEROC_JSON_STRING || strcmp(nm->u.str.s, name))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d parameter %d is '%s' in the checkpoint, '%s' in this model",
                      what, u, p, nm && nm->type == ZEROC_JSON_STRING ? nm->u.str.s : "?", name);
  if (zeroc__json_get(pj, "shape")) {
    int64_t shape[ZEROC_MAX_DIMS];
    int nd = 0, same;
    if (get_dims(pj, "shape", shape, &nd))
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "%s: parameter '%s': malformed shape (1..%d dimensions of "
                        "1..%llu elements)",
                        what, name, ZEROC_MAX_DIMS, MAX_NUMEL);
    same = nd == pd->ndim;
    for (int d = 0; same && d < nd; d++) same = shape[d] == pd->shape[d];
    if (!same) {
      char a[96] = "", b[96] = "";
      for (int d = 0; d < nd; d++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "x" : "", (long long)shape[d]);
      for (int d = 0; d < pd->ndim; d++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "x" : "",
                 (long long)pd->shape[d]);
      return ZEROC_FAIL(
          ZEROC_ERR_INVALID_ARG,
          "%s: parameter '%s' (unit %d) has shape %s in the checkpoint, %s in this model", what,
          name, u, a, b);
    }
  }
  if (off != offset || pn != zeroc_param_numel(pd))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: parameter '%s' (unit %d) sits at offset %" PRIu64 " with %" PRIu64
                      " elements in the checkpoint, at %" PRIu64 " with %" PRIu64 " in this model",
                      what, name, u, off, pn, offset, zeroc_param_numel(pd));
  return ZEROC_OK;
}

/* ---- loading: the manifest, then the shard files, then the model ------------------------ */

/* What loading reads from the manifest and cuts from the shard files. */
typedef struct {
  zeroc_model_t *m;
  const zeroc_mesh_info_t *mesh;
  char dir[4200], what[4500];
  char *text;
  zeroc__json_doc_t *doc;
  const zeroc__json_t *root, *units; /* units: this rank's pipeline stage's */
  int n, resplit, ntp;               /* ntp: old tp ranks whose files are read */
  uint64_t step, opt_steps, old_shards, old_tp;
  uint64_t *old_S, *old_N; /* per unit: saved shard and flat lengths */
  old_param_t **oldp;      /* re-split: per unit, per parameter */
  file_ent_t *files;       /* [ntp][old_shards] */
  float **cache;           /* their contents, read when first needed */
  float **newstate;        /* per unit: 3 x S_new */
} load_t;

/* Finds and reads the manifest and checks its header: format, version,
 * checksum, step, mesh and this rank's pipeline stage's unit list. */
static zeroc_result_t read_manifest(load_t *L, const char *path) {
  const zeroc_mesh_info_t *mesh = L->mesh;
  const char *what = L->what;
  char mpath[4400];
  size_t len = 0;
  uint64_t version = 0, old_pp = 1;
  ZEROC_CHECK(zeroc__ckpt_resolve(path, L->dir, sizeof L->dir));
  snprintf(mpath, sizeof mpath, "%s/manifest.json", L->dir);
  snprintf(L->what, sizeof L->what, "manifest '%s'", mpath);
  ZEROC_CHECK(zeroc__file_read(mpath, MANIFEST_MAX, &L->text, &len));
  ZEROC_CHECK(zeroc__json_parse(L->text, len, what, &L->doc));
  const zeroc__json_t *root = L->root = zeroc__json_root(L->doc);
  const zeroc__json_t *fmt = zeroc__json_get(root, "format");
  if (!fmt || fmt->type != ZEROC_JSON_STRING || strcmp(fmt->u.str.s, "zeroc-checkpoint"))
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: not a zeroc checkpoint (format field)", what);
  ZEROC_CHECK(zeroc__ckpt_get_u64(root, "version", what, UINT32_MAX, &version));
  if (version != 1)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: version %" PRIu64 " (this zeroc reads version 1)",
                      what, version);
  ZEROC_CHECK(zeroc__ckpt_check_manifest_crc(L->text, len, root, what));
  ZEROC_CHECK(zeroc__ckpt_get_u64(root, "step", what, MAX_STEP, &L->step));
  L->opt_steps = L->step; /* older manifests: no skipped steps recorded */
  if (zeroc__json_get(root, "optimizer_steps"))
    ZEROC_CHECK(zeroc__ckpt_get_u64(root, "optimizer_steps", what, MAX_STEP, &L->opt_steps));
  if (L->opt_steps > L->step)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: optimizer_steps %" PRIu64 " exceeds step %" PRIu64,
                      what, L->opt_steps, L->step);
  ZEROC_CHECK(zeroc__ckpt_get_u64(root, "shard_size", what, MAX_MESH, &L->old_shards));
  const zeroc__json_t *mj = zeroc__json_get(root, "mesh");
  if (mj) {
    ZEROC_CHECK(zeroc__ckpt_get_u64(mj, "tp", what, MAX_MESH, &L->old_tp));
    ZEROC_CHECK(zeroc__ckpt_get_u64(mj, "pp", what, MAX_MESH, &old_pp));
    /* not needed to load, but a manifest claiming nonsense is not trusted */
    const char *more[] = {"world", "dp", "dp_shard", "dp_replicate", "cp"};
    for (int i = 0; i < 5; i++) {
      uint64_t v;
      if (zeroc__json_get(mj, more[i]))
        ZEROC_CHECK(zeroc__ckpt_get_u64(mj, more[i], what, MAX_MESH * MAX_MESH, &v));
    }
  }
  if (old_pp != (uint64_t)mesh->pp || L->old_tp < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: saved with tp %" PRIu64 " and pp %" PRIu64 ", loading needs pp %d "
                      "(re-splitting pipeline parallelism goes through --export/--init)",
                      what, L->old_tp, old_pp, mesh->pp);
  L->resplit = (int)L->old_tp != mesh->tp;
  L->ntp = L->resplit ? (int)L->old_tp : 1;
  /* with a pipeline, this rank's stage's units */
  const zeroc__json_t *units = zeroc__json_get(root, "units");
  const zeroc__json_t *stages = zeroc__json_get(root, "stages");
  if (mesh->pp > 1) {
    units = NULL;
    for (size_t i = 0; stages && stages->type == ZEROC_JSON_ARRAY && i < stages->u.arr.n; i++) {
      uint64_t sp;
      const zeroc__json_t *e = &stages->u.arr.items[i];
      if (!zeroc__ckpt_get_u64(e, "pp", what, MAX_MESH, &sp) && sp == (uint64_t)mesh->pp_rank)
        units = zeroc__json_get(e, "units");
    }
    if (!units)
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: no unit list for pipeline stage %d", what,
                        mesh->pp_rank);
  }
  if (L->old_shards < 1)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: shard_size 0 (accepted 1..%llu)", what, MAX_MESH);
  if (!units || units->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field 'units' missing or not an array", what);
  if (units->u.arr.n != (size_t)L->n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: %zu units saved%s, this model has %d%s", what,
                      units->u.arr.n, mesh->pp > 1 ? " for this pipeline stage" : "", L->n,
                      mesh->pp > 1 ? " (another --vpp or model shape?)" : "");
  L->units = units;
  return ZEROC_OK;
}

/* The saved layout must be the model's, unit by unit and parameter by
 * parameter; when re-splitting, each parameter's old split is kept. */
static zeroc_result_t read_layout(load_t *L) {
  zeroc_model_t *m = L->m;
  const char *what = L->what;
  int n = L->n;
  zeroc_result_t res = ZEROC_OK;
  L->old_S = calloc((size_t)n, sizeof *L->old_S);
  L->old_N = calloc((size_t)n, sizeof *L->old_N);
  L->oldp = calloc((size_t)n, sizeof *L->oldp);
  if (!L->old_S || !L->old_N || !L->oldp) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint layout");
  for (int u = 0; u < n && !res; u++) {
    const zeroc__json_t *uj = &L->units->u.arr.items[u];
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    uint64_t numel;
    res = zeroc__ckpt_get_u64(uj, "numel", what, MAX_NUMEL, &numel);
    if (!res) res = zeroc__ckpt_get_u64(uj, "shard_numel", what, MAX_NUMEL, &L->old_S[u]);
    if (!res) res = zeroc__ckpt_get_u64(uj, "flat_numel", what, MAX_NUMEL, &L->old_N[u]);
    if (res) break;
    res = check_unit(uj, &ui, u, numel, L->old_S[u], L->old_N[u], L->old_shards, L->resplit, what);
    if (res) break;
    const zeroc__json_t *pj = zeroc__json_get(uj, "params");
    old_param_t *op = L->oldp[u] = calloc((size_t)ui.nparams, sizeof *L->oldp[u]);
    if (!op) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint layout of unit %d", u);
      break;
    }
    for (int p = 0; p < ui.nparams && !res; p++) {
      uint64_t off, pn;
      res = zeroc__ckpt_get_u64(&pj->u.arr.items[p], "offset", what, MAX_NUMEL, &off);
      if (!res) res = zeroc__ckpt_get_u64(&pj->u.arr.items[p], "numel", what, MAX_NUMEL, &pn);
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      if (res) break;
      op[p].off = off;
      op[p].numel = pn;
      if (L->resplit) {
        res = old_split(&pj->u.arr.items[p], pd, (int)L->old_tp, what, u, p, &op[p]);
        if (!res &&
            (off + pn > L->old_N[u] || pn * (uint64_t)(op[p].split.groups ? L->old_tp : 1) !=
                                           zeroc__split_full_numel(&op[p].split)))
          res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                           "%s: unit %d parameter %d: offset or size out of place", what, u, p);
      } else {
        res = check_param(&pj->u.arr.items[p], pd, u, p, off, pn, zeroc_model_param_offset(m, u, p),
                          what);
      }
    }
  }
  return res;
}

/* The shard files of this rank's pipeline stage: of its own tp rank, or of
 * every old tp rank when re-splitting (slot = old tp rank), each of the size
 * the units' layout gives. */
static zeroc_result_t read_files(load_t *L) {
  const zeroc_mesh_info_t *mesh = L->mesh;
  const char *what = L->what;
  uint64_t slots = (uint64_t)L->ntp * L->old_shards;
  zeroc_result_t res = ZEROC_OK;
  int nfiles = 0;
  const zeroc__json_t *fj = zeroc__json_get(L->root, "files");
  if (!fj || fj->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: no files list", what);
  L->files = calloc((size_t)slots, sizeof *L->files);
  L->cache = calloc((size_t)slots, sizeof *L->cache);
  if (!L->files || !L->cache) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint file table");
  for (size_t i = 0; i < fj->u.arr.n; i++) {
    const zeroc__json_t *e = &fj->u.arr.items[i];
    uint64_t pp, tp, sh, bytes, crc;
    const zeroc__json_t *nm = zeroc__json_get(e, "name");
    /* a bad integer is named by zeroc__ckpt_get_u64's own message */
    res = zeroc__ckpt_get_u64(e, "pp", what, MAX_MESH, &pp);
    if (!res) res = zeroc__ckpt_get_u64(e, "tp", what, MAX_MESH, &tp);
    if (!res) res = zeroc__ckpt_get_u64(e, "shard", what, MAX_MESH, &sh);
    if (!res) res = zeroc__ckpt_get_u64(e, "bytes", what, MAX_BYTES, &bytes);
    if (!res) res = zeroc__ckpt_get_u64(e, "crc32c", what, UINT32_MAX, &crc);
    if (res) break;
    if (!nm || nm->type != ZEROC_JSON_STRING || nm->u.str.len >= sizeof L->files[0].name ||
        strchr(nm->u.str.s, '/') || sh >= L->old_shards || tp >= L->old_tp) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: files entry %zu is malformed", what, i);
      break;
    }
    if ((int)pp != mesh->pp_rank || (!L->resplit && (int)tp != mesh->tp_rank)) continue;
    file_ent_t *fe = &L->files[(L->resplit ? tp : 0) * L->old_shards + sh];
    if (fe->name[0]) continue; /* listed twice: the first entry holds */
    snprintf(fe->name, sizeof fe->name, "%s", nm->u.str.s);
    fe->pp = (int)pp, fe->tp = (int)tp, fe->shard = (int)sh;
    fe->bytes = bytes;
    fe->crc = (uint32_t)crc;
    nfiles++;
  }
  if (!res && (uint64_t)nfiles != slots)
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: %d of %" PRIu64 " shard files listed for pp %d%s",
                     what, nfiles, slots, mesh->pp_rank, L->resplit ? "" : " and this tp rank");
  uint64_t expect_bytes = 0;
  for (int u = 0; u < L->n && !res; u++)
    if (__builtin_add_overflow(expect_bytes, L->old_S[u] * 4 * STATES, &expect_bytes))
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: the units' shard sizes add up beyond 2^64 bytes",
                       what);
  for (uint64_t s = 0; !res && s < slots; s++)
    if (L->files[s].bytes != expect_bytes)
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                       "%s: file '%s' should hold %" PRIu64 " bytes, listed %" PRIu64, what,
                       L->files[s].name, expect_bytes, L->files[s].bytes);
  return res;
}

/* This rank's new shards, cut from whichever old shards cover them. */
static zeroc_result_t cut_shards(load_t *L) {
  zeroc_model_t *m = L->m;
  zeroc_result_t res = ZEROC_OK;
  uint64_t unit_base = 0; /* floats before unit u in an old shard file */
  L->newstate = calloc((size_t)L->n, sizeof *L->newstate);
  if (!L->newstate) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint state buffers");
  for (int u = 0; u < L->n && !res; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    uint64_t S = ui.shard_numel, lo = ui.shard_offset, oS = L->old_S[u];
    float *dst = L->newstate[u] = calloc(S * STATES + 1, sizeof(float));
    if (!dst) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint state of unit %d", u);
      break;
    }
    if (L->resplit) {
      res = resplit_unit(m, u, L->oldp[u], oS, unit_base, L->dir, L->files, L->cache, L->old_shards,
                         dst);
      if (!res && L->mesh->rank == 0)
        res = resplit_dropped(m, u, L->oldp[u], oS, unit_base, L->dir, L->files, L->cache,
                              L->old_shards, (int)L->old_tp, L->what);
    }
    for (uint64_t j = lo; !L->resplit && j < lo + S && !res;) {
      if (j >= L->old_N[u]) break; /* padding beyond the old flat length: zero */
      uint64_t s = j / oS, s_end = (s + 1) * oS;
      uint64_t hi = lo + S < s_end ? lo + S : s_end;
      if (!L->cache[s]) res = load_file(L->dir, &L->files[s], &L->cache[s]);
      if (res) break;
      for (int k = 0; k < STATES; k++)
        memcpy(dst + k * S + (j - lo), L->cache[s] + unit_base + (uint64_t)k * oS + (j - s * oS),
               (hi - j) * sizeof(float));
      j = hi;
    }
    unit_base += oS * STATES;
  }
  return res;
}

/* Hands the new shards, the step count and the app object to the model and
 * the caller: the only part of loading that changes anything. */
static zeroc_result_t apply(load_t *L, uint64_t *step_out, char **app_out) {
  zeroc_model_t *m = L->m;
  zeroc_result_t res = ZEROC_OK;
  for (int u = 0; u < L->n && !res; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    for (int k = 0; k < STATES && !res; k++)
      res = zeroc_model_set_shard(m, u, (zeroc_state_kind_t)k,
                                  L->newstate[u] + (uint64_t)k * ui.shard_numel);
  }
  if (!res) res = zeroc_model_sync_params(m);
  if (!res) zeroc_model_set_steps(m, L->opt_steps);
  if (!res && app_out) {
    const zeroc__json_t *aj = zeroc__json_get(L->root, "app");
    if (aj && aj->type == ZEROC_JSON_STRING && aj->u.str.len) {
      *app_out = strdup(aj->u.str.s);
      if (!*app_out) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint app object");
    }
  }
  if (!res) *step_out = L->step;
  if (!res && L->resplit)
    ZINFO(IO, "checkpoint step %" PRIu64 " re-split from tp %" PRIu64 " to tp %d", L->step,
          L->old_tp, L->mesh->tp);
  return res;
}

static void load_free(load_t *L) {
  for (int u = 0; L->newstate && u < L->n; u++) free(L->newstate[u]);
  free(L->newstate);
  for (int u = 0; L->oldp && u < L->n; u++) free(L->oldp[u]);
  free(L->oldp);
  for (uint64_t s = 0; L->cache && s < (uint64_t)L->ntp * L->old_shards; s++) free(L->cache[s]);
  free(L->cache);
  free(L->old_S);
  free(L->old_N);
  free(L->files);
  zeroc__json_free(L->doc);
  free(L->text);
}

zeroc_result_t zeroc_ckpt_load(zeroc_model_t *m, const char *path, uint64_t *step_out,
                               char **app_out) {
  if (app_out) *app_out = NULL;
  if (zeroc_model_num_units(m) < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_ckpt_load: the model is NULL or not live (destroyed)");
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  if (!path || !*path)
    return zeroc__ctx_ret(
        ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ckpt_load: the checkpoint path is empty"));
  load_t L = {
      .m = m, .mesh = zeroc_ctx_mesh(ctx), .n = zeroc_model_num_units(m), .ntp = 1, .old_tp = 1};
  if (app_out) *app_out = NULL;
  zeroc__watchdog_phase(ctx, "loading checkpoint");
  ZEROC_FAULT_AT(ctx, "ckpt.load", 0, NULL);
  zeroc_result_t res = read_manifest(&L, path);
  if (!res) res = read_layout(&L);
  if (!res) res = read_files(&L);
  if (!res) res = cut_shards(&L);
  /* every rank checked its part; only now does anything change */
  res = zeroc_ctx_agree(ctx, res);
  if (!res) res = zeroc_ctx_agree(ctx, apply(&L, step_out, app_out));
  load_free(&L);
  return zeroc__ctx_ret(ctx, res);
}
