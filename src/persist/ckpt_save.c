/*
 * persist/ckpt_save.c - writing a sharded checkpoint: one file per shard owner
 * with every unit's master, Adam m and v, and rank 0's manifest with the
 * layout and CRC-32C of each file. Staged in DIR/step_<k>.tmp, published by
 * rename, DIR/latest replaced last. The manifest records how every local
 * tensor maps to the unsplit one (tp/split.h), so a load may re-split onto
 * another tensor-parallel size; with pipeline parallelism it lists every
 * stage's units (gathered to rank 0). Reading it back: ckpt_load.c.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
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

static void shard_file_name(char *buf, size_t n, const zeroc_mesh_info_t *mesh, int shard) {
  snprintf(buf, n, "pp%02d_tp%02d_shard%05d.bin", mesh->pp_rank, mesh->tp_rank, shard);
}

/* Every rank learns each rank's (crc, bytes, written) triple. */
static zeroc_result_t exchange_files(zeroc_ctx_t *ctx, uint64_t crc, uint64_t bytes, int wrote,
                                     uint64_t **table) {
  int W = zeroc_ctx_mesh(ctx)->world, me = zeroc_ctx_mesh(ctx)->rank;
  uint64_t *t = calloc((size_t)W * 3, sizeof *t);
  if (!t) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint file table");
  t[me * 3 + 0] = crc;
  t[me * 3 + 1] = bytes;
  t[me * 3 + 2] = (uint64_t)wrote;
  zeroc_result_t r = zeroc__allreduce_host(zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD), t,
                                           (size_t)W * 3, ZEROC_INT64, ZEROC_SUM);
  if (r) {
    free(t);
    return r;
  }
  *table = t;
  return ZEROC_OK;
}

/* This rank's shard file: for each unit, S floats of master, m and v. */
static zeroc_result_t write_shard_file(zeroc_model_t *m, const char *path, uint64_t step,
                                       uint32_t *crc_out, uint64_t *bytes_out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  zeroc__afile_t f = ZEROC_AFILE_INIT;
  float *buf = NULL;
  uint64_t maxS = 0, bytes = 0;
  uint32_t crc = 0;
  int n = zeroc_model_num_units(m);
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    if (ui.shard_numel > maxS) maxS = ui.shard_numel;
  }
  buf = malloc(maxS * 4 + 4);
  if (!buf) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint staging buffer of %" PRIu64 " floats", maxS);
    goto fail;
  }
  ZEROC_TRY(zeroc__afile_open(&f, path));
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    for (int k = 0; k < STATES; k++) {
      ZEROC_TRY(zeroc_model_get_shard(m, u, (zeroc_state_kind_t)k, buf));
      size_t nb = ui.shard_numel * 4;
      ZEROC_TRY(zeroc__afile_write(&f, buf, nb));
      crc = zeroc__crc32c(crc, buf, nb);
      bytes += nb;
    }
    if (u == n / 2) ZEROC_FAULT_AT(ctx, "ckpt.shard", step, NULL); /* half written */
  }
  ZEROC_TRY(zeroc__afile_commit(&f));
  *crc_out = crc;
  *bytes_out = bytes;
fail:
  zeroc__afile_abort(&f);
  free(buf);
  return res;
}

/* The "units" array: this rank's units and their parameters' flat layout and
 * tensor-parallel split. */
static void write_units(zeroc__jw_t *w, zeroc_model_t *m) {
  int n = zeroc_model_num_units(m);
  zeroc__jw_array_begin(w);
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    zeroc__jw_object_begin(w);
    zeroc__jw_key(w, "name");
    zeroc__jw_string(w, ui.name ? ui.name : "");
    zeroc__jw_key(w, "numel");
    zeroc__jw_uint(w, ui.numel);
    zeroc__jw_key(w, "flat_numel");
    zeroc__jw_uint(w, ui.flat_numel);
    zeroc__jw_key(w, "shard_numel");
    zeroc__jw_uint(w, ui.shard_numel);
    zeroc__jw_key(w, "params");
    zeroc__jw_array_begin(w);
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      zeroc__jw_object_begin(w);
      zeroc__jw_key(w, "name");
      zeroc__jw_string(w, pd->name ? pd->name : "");
      zeroc__jw_key(w, "offset");
      zeroc__jw_uint(w, zeroc_model_param_offset(m, u, p));
      zeroc__jw_key(w, "numel");
      zeroc__jw_uint(w, zeroc_param_numel(pd));
      /* how the local tensor sits in the unsplit one, for re-splitting */
      zeroc__jw_key(w, "shape");
      zeroc__jw_array_begin(w);
      for (int d = 0; d < pd->ndim; d++) zeroc__jw_int(w, pd->shape[d]);
      zeroc__jw_array_end(w);
      zeroc__jw_key(w, "tp_groups");
      zeroc__jw_int(w, pd->tp_groups > 0 ? pd->tp_groups : 0);
      if (pd->tp_groups > 0) {
        zeroc__jw_key(w, "tp_dim");
        zeroc__jw_int(w, pd->tp_dim);
        zeroc__jw_key(w, "tp_full");
        zeroc__jw_array_begin(w);
        for (int d = 0; d < pd->ndim; d++) zeroc__jw_int(w, pd->tp_full[d]);
        zeroc__jw_array_end(w);
      }
      zeroc__jw_object_end(w);
    }
    zeroc__jw_array_end(w);
    zeroc__jw_object_end(w);
  }
  zeroc__jw_array_end(w);
}

/*
 * With pipeline parallelism: the units of every stage, as JSON texts, on
 * rank 0 (texts[s] for stage s, malloc'd), gathered over rank 0's pipeline
 * group (the ranks at dp 0, tp 0 of each stage). Ranks outside that group
 * return at once. A rank that cannot build its text sends an empty one, so
 * nobody is left waiting; rank 0 then fails.
 */
static zeroc_result_t gather_stage_units(zeroc_model_t *m, char ***texts_out) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  *texts_out = NULL;
  if (mesh->pp == 1 || mesh->dp_rank != 0 || mesh->cp_rank != 0 || mesh->tp_rank != 0)
    return ZEROC_OK;
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_PP);
  zeroc_result_t res = ZEROC_OK;
  zeroc__jw_t w;
  zeroc__jw_init(&w, 0);
  write_units(&w, m);
  const char *mine = "";
  size_t mylen = 0;
  if (zeroc__jw_finish(&w, &mine, &mylen) != ZEROC_OK) mine = "", mylen = 0;
  int64_t maxlen = (int64_t)mylen + 1;
  char *all = NULL;
  ZEROC_TRY(zeroc__allreduce_host(g, &maxlen, 1, ZEROC_INT64, ZEROC_MAX));
  all = calloc((size_t)mesh->pp, (size_t)maxlen);
  if (!all) {
    /* still take part: a zero buffer on the stack would be too big, so fail the job */
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "manifest unit lists: %d x %lld bytes", mesh->pp,
                     (long long)maxlen);
    goto fail;
  }
  memcpy(all + (size_t)mesh->pp_rank * (size_t)maxlen, mine, mylen);
  ZEROC_TRY(
      zeroc__allreduce_host(g, all, (size_t)mesh->pp * (size_t)maxlen, ZEROC_UINT8, ZEROC_SUM));
  if (mesh->rank == 0) {
    char **texts = calloc((size_t)mesh->pp, sizeof *texts);
    if (!texts) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "manifest unit lists");
      goto fail;
    }
    for (int s = 0; s < mesh->pp; s++) {
      texts[s] = strndup(all + (size_t)s * (size_t)maxlen, (size_t)maxlen);
      if (!texts[s] || !*texts[s]) {
        if (!res) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline stage %d sent no unit list", s);
      }
    }
    *texts_out = texts;
  }
fail:
  free(all);
  zeroc__jw_free(&w);
  return res;
}

static zeroc_result_t write_manifest(zeroc_model_t *m, const char *path, uint64_t step,
                                     const char *app_json, const uint64_t *table,
                                     char *const *stage_units) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int shard_size;
  zeroc_model_shard_layout(m, NULL, &shard_size, NULL);
  zeroc__jw_t w;
  zeroc__jw_init(&w, 1);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "format");
  zeroc__jw_string(&w, "zeroc-checkpoint");
  zeroc__jw_key(&w, "version");
  zeroc__jw_int(&w, 1);
  zeroc__jw_key(&w, "step");
  zeroc__jw_uint(&w, step);
  /* steps actually applied: fewer than `step` when non-finite steps were
   * skipped; AdamW's bias correction counts these */
  zeroc__jw_key(&w, "optimizer_steps");
  zeroc__jw_uint(&w, zeroc_model_steps(m));
  zeroc__jw_key(&w, "mesh");
  zeroc__jw_object_begin(&w);
  /* the flat shards are cut over dp_shard x cp (shard_size): a load re-cuts them
   * for another dp or cp alike */
  const char *names[] = {"world", "tp", "pp", "dp", "dp_shard", "dp_replicate", "cp"};
  int vals[] = {mesh->world,    mesh->tp,           mesh->pp, mesh->dp,
                mesh->dp_shard, mesh->dp_replicate, mesh->cp};
  for (int i = 0; i < 7; i++) {
    zeroc__jw_key(&w, names[i]);
    zeroc__jw_int(&w, vals[i]);
  }
  zeroc__jw_object_end(&w);
  zeroc__jw_key(&w, "shard_size");
  zeroc__jw_int(&w, shard_size);
  /* stage 0's units (the whole model without a pipeline) */
  zeroc__jw_key(&w, "units");
  write_units(&w, m);
  zeroc_result_t res = ZEROC_OK;
  if (stage_units) {
    zeroc__jw_key(&w, "stages");
    zeroc__jw_array_begin(&w);
    for (int s = 0; s < mesh->pp && !res; s++) {
      zeroc__json_doc_t *doc = NULL;
      res = zeroc__json_parse(stage_units[s], strlen(stage_units[s]), "a stage's unit list", &doc);
      if (res) break;
      zeroc__jw_object_begin(&w);
      zeroc__jw_key(&w, "pp");
      zeroc__jw_int(&w, s);
      zeroc__jw_key(&w, "units");
      zeroc__jw_value(&w, zeroc__json_root(doc));
      zeroc__jw_object_end(&w);
      zeroc__json_free(doc);
    }
    zeroc__jw_array_end(&w);
  }
  zeroc__jw_key(&w, "files");
  zeroc__jw_array_begin(&w);
  for (int r = 0; r < mesh->world; r++) {
    if (!table[r * 3 + 2]) continue;
    zeroc_mesh_info_t rm;
    zeroc_mesh_layout_cp(mesh->world, mesh->tp, mesh->cp, mesh->pp, mesh->dp_replicate, r, &rm);
    /* its place in the flat-shard group (dp_shard x cp, cp fastest) */
    int shard = shard_size == 1 ? 0 : rm.dp_shard_rank * rm.cp + rm.cp_rank;
    char fname[64];
    shard_file_name(fname, sizeof fname, &rm, shard);
    zeroc__jw_object_begin(&w);
    zeroc__jw_key(&w, "name");
    zeroc__jw_string(&w, fname);
    zeroc__jw_key(&w, "pp");
    zeroc__jw_int(&w, rm.pp_rank);
    zeroc__jw_key(&w, "tp");
    zeroc__jw_int(&w, rm.tp_rank);
    zeroc__jw_key(&w, "shard");
    zeroc__jw_int(&w, shard);
    zeroc__jw_key(&w, "bytes");
    zeroc__jw_uint(&w, table[r * 3 + 1]);
    zeroc__jw_key(&w, "crc32c");
    zeroc__jw_uint(&w, table[r * 3 + 0]);
    zeroc__jw_object_end(&w);
  }
  zeroc__jw_array_end(&w);
  zeroc__jw_key(&w, "app");
  zeroc__jw_string(&w, app_json ? app_json : "");
  zeroc__jw_object_end(&w);
  const char *text;
  size_t len;
  char *sealed = NULL;
  if (!res) res = zeroc__jw_finish(&w, &text, &len);
  if (!res) res = zeroc__ckpt_seal_manifest(text, len, &sealed, &len);
  if (!res) res = zeroc__file_write_sync(path, sealed, len);
  free(sealed);
  zeroc__jw_free(&w);
  return res;
}

/* Every parameter's tensor-parallel split must be an even cut of its unsplit
 * shape, or the manifest would describe a layout no loader can rebuild. */
static zeroc_result_t check_splits(zeroc_model_t *m) {
  for (int u = 0; u < zeroc_model_num_units(m); u++) {
    zeroc_unit_info_t ui;
    ZEROC_CHECK(zeroc_model_unit_info(m, u, &ui));
    for (int p = 0; p < ui.nparams; p++)
      ZEROC_CHECK(zeroc__split_check(zeroc_model_param_desc(m, u, p)));
  }
  return ZEROC_OK;
}

/* After a checkpoint is published: removes what crashed saves left in `dir`
 * (staging directories step_*.tmp and temporaries latest.tmp.<pid>). Only one
 * job writes a checkpoint directory, so nothing of these is still in use.
 * Failures are only logged: the checkpoint itself is complete. */
static void sweep_leftovers(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[4400];
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    int stage = !strncmp(e->d_name, "step_", 5) && n > 9 && !strcmp(e->d_name + n - 4, ".tmp");
    int latest = !strncmp(e->d_name, "latest.tmp.", 11);
    if (!stage && !latest) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    zeroc_result_t r = zeroc__rmtree(path);
    if (r)
      ZWARN(IO, "could not remove '%s', left by an interrupted save: %s", path, zeroc__tls_error());
    else
      ZINFO(IO, "removed '%s', left by an interrupted save", path);
  }
  closedir(d);
}

/* The caller's app object: a resume reads it back (zeroc_ckpt_check_resume)
 * and finds it unreadable only then, so text that is not one JSON object is
 * refused before anything is written. NULL or "": none. */
static zeroc_result_t check_app(const char *app_json) {
  if (!app_json || !*app_json) return ZEROC_OK;
  zeroc__json_doc_t *doc = NULL;
  if (zeroc__json_parse(app_json, strlen(app_json), "zeroc_ckpt_save: app_json", &doc)) {
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s (app_json must be one JSON object, or NULL)", msg);
  }
  zeroc__json_type_t t = zeroc__json_root(doc)->type;
  zeroc__json_free(doc);
  if (t != ZEROC_JSON_OBJECT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_ckpt_save: app_json is a JSON %s; it must be one JSON object, or "
                      "NULL",
                      zeroc__json_type_name(t));
  return ZEROC_OK;
}

/* The step of a complete checkpoint's name "step_<digits>" (or with a model's
 * prefix, "<prefix>_step_<digits>" when `prefixed`), else -1. */
static int64_t step_of(const char *name, int prefixed) {
  const char *p = name;
  if (prefixed) {
    const char *q = strstr(name, "_step_");
    if (!q || q == name) return -1;
    p = q + 1;
  }
  if (strncmp(p, "step_", 5) || !p[5]) return -1;
  int64_t k = 0;
  for (p += 5; *p; p++) {
    if (*p < '0' || *p > '9' || k > (int64_t)MAX_STEP) return -1;
    k = k * 10 + (*p - '0');
  }
  return k;
}

static int cmp_i64_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Removes every entry of `dir` that belongs to checkpoint step `k`. */
static void prune_step(const char *dir, int64_t k) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[4400];
  struct dirent *e;
  while ((e = readdir(d))) {
    if (step_of(e->d_name, 0) != k && step_of(e->d_name, 1) != k) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (zeroc__rmtree(path))
      ZWARN(IO, "--save-limit: could not remove '%s': %s", path, zeroc__tls_error());
    else
      ZINFO(IO, "--save-limit: removed '%s'", path);
  }
  closedir(d);
}

void zeroc__ckpt_prune(const char *dir, int keep) {
  if (keep < 1) return;
  char latest[4200], name[64] = "";
  snprintf(latest, sizeof latest, "%s/latest", dir);
  FILE *f = fopen(latest, "r");
  if (!f || !fgets(name, sizeof name, f)) {
    /* no latest: nothing is known complete, so nothing is removed */
    if (f) fclose(f);
    ZWARN(IO, "--save-limit: '%s' unreadable; no checkpoint removed", latest);
    return;
  }
  fclose(f);
  name[strcspn(name, "\r\n")] = 0;
  int64_t named = step_of(name, 0), *steps = NULL;
  size_t n = 0, cap = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    int64_t k = step_of(e->d_name, 0);
    if (k < 0) continue;
    if (n == cap) {
      int64_t *s = realloc(steps, (cap = cap ? 2 * cap : 64) * sizeof *s);
      if (!s) break;
      steps = s;
    }
    steps[n++] = k;
  }
  closedir(d);
  qsort(steps, n, sizeof *steps, cmp_i64_desc);
  for (size_t i = (size_t)keep; i < n; i++)
    if (steps[i] != named) prune_step(dir, steps[i]);
  free(steps);
}

zeroc_result_t zeroc_ckpt_save(zeroc_model_t *m, const char *dir, uint64_t step,
                               const char *app_json) {
  if (zeroc_model_num_units(m) < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_ckpt_save: the model is NULL or not live (destroyed)");
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int root = mesh->rank == 0, shard, shard_size, replica;
  zeroc_model_shard_layout(m, &shard, &shard_size, &replica);
  char final[4096], tmp[4200], path[4400];
  zeroc__watchdog_phase(ctx, "saving checkpoint step %" PRIu64, step);
  if (!dir || !*dir)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "checkpoint directory is empty"));
  snprintf(final, sizeof final, "%s/step_%08" PRIu64, dir, step);
  /* rank 0 stages the directory; everyone waits to hear whether it could */
  zeroc_result_t r = check_splits(m);
  if (!r) r = check_app(app_json);
  snprintf(tmp, sizeof tmp, "%s.tmp", final);
  if (root && !r) r = zeroc__dir_stage(final, tmp, sizeof tmp);
  r = zeroc_ctx_agree(ctx, r);
  if (r) return r;
  ZEROC_FAULT_AT(ctx, "ckpt.stage", step, NULL);
  /* replicas hold identical shards: replica 0 of each shard writes it */
  uint32_t crc = 0;
  uint64_t bytes = 0;
  int writer = replica == 0;
  if (writer) {
    char fname[64];
    shard_file_name(fname, sizeof fname, mesh, shard_size == 1 ? 0 : shard);
    snprintf(path, sizeof path, "%s/%s", tmp, fname);
    r = write_shard_file(m, path, step, &crc, &bytes);
    if (!r) ZEROC_FAULT_AT(ctx, "ckpt.written", step, NULL);
  }
  r = zeroc_ctx_agree(ctx, r);
  uint64_t *table = NULL;
  char **stage_units = NULL;
  if (!r) r = exchange_files(ctx, crc, bytes, writer, &table);
  if (!r) r = zeroc_ctx_agree(ctx, gather_stage_units(m, &stage_units));
  if (r) {
    if (root) zeroc__rmtree(tmp); /* the previous checkpoint stays the latest */
    free(table);
    for (int s = 0; stage_units && s < mesh->pp; s++) free(stage_units[s]);
    free(stage_units);
    return r;
  }
  if (root) {
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    r = write_manifest(m, path, step, app_json, table, stage_units);
    if (!r) ZEROC_FAULT_AT(ctx, "ckpt.manifest", step, NULL);
    if (!r) r = zeroc__dir_publish(tmp, final);
    if (!r) {
      ZEROC_FAULT_AT(ctx, "ckpt.publish", step, NULL);
      char latest[4200], name[64];
      snprintf(latest, sizeof latest, "%s/latest", dir);
      int n = snprintf(name, sizeof name, "step_%08" PRIu64 "\n", step);
      r = zeroc__file_write_atomic(latest, name, (size_t)n);
      if (!r) ZEROC_FAULT_AT(ctx, "ckpt.latest", step, NULL);
    }
    if (r) {
      zeroc__rmtree(tmp);
    } else {
      ZINFO(IO, "checkpoint step %" PRIu64 " published in %s", step, final);
      sweep_leftovers(dir);
    }
  }
  free(table);
  for (int s = 0; stage_units && s < mesh->pp; s++) free(stage_units[s]);
  free(stage_units);
  return zeroc_ctx_agree(ctx, r);
}
