/*
 * io/ckpt.c - sharded checkpoints: one file per shard owner with every unit's
 * master, Adam m and v, and rank 0's manifest with the layout and CRC-32C of
 * each file. Staged in DIR/step_<k>.tmp, published by rename, DIR/latest
 * replaced last. Loading re-cuts the flat shards when the shard count changed:
 * a parameter sits at the same flat offset for every shard count, only the
 * tail padding differs. Loading onto another tensor-parallel size re-splits
 * each parameter: the manifest records how every local tensor maps to the
 * unsplit one (tp/split.h), so each new element is found in whichever old tp
 * rank's shards hold it. With pipeline parallelism each stage holds other
 * units: the manifest lists every stage's units (gathered to rank 0) and a
 * rank checks and loads only its own stage's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "comm/comm.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/watchdog.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "io/json.h"
#include "tp/split.h"
#include "zeroc/ckpt.h"

#define CHK(call) ZEROC_CHECK(call)
#define MANIFEST_MAX (64u << 20)
#define STATES 3 /* master, m, v */
/* Bounds on what a manifest may claim: far beyond any real run, low enough
 * that no product or sum of them below overflows 64 bits or wraps an int. */
#define MAX_STEP (1ull << 48)  /* steps */
#define MAX_MESH 65536ull      /* tp, pp and dp sizes, shards per checkpoint */
#define MAX_NUMEL (1ull << 40) /* elements of one unit or parameter (4 TiB of fp32) */
#define MAX_BYTES (MAX_NUMEL * 4 * STATES)

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
  if (mesh->pp == 1 || mesh->dp_rank != 0 || mesh->tp_rank != 0) return ZEROC_OK;
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

static zeroc_result_t get_u64(const zeroc__json_t *o, const char *key, const char *what,
                              uint64_t max, uint64_t *v);

/* ---- the manifest's own checksum ------------------------------------------------------- */

/* The manifest's last field, "manifest_crc32c", is the CRC-32C of every byte
 * before the comma that precedes its key: the file's own bytes, so no
 * re-serialisation has to agree between writer and reader, and a flipped
 * byte anywhere else (a step, a size, a file's CRC) is caught. */
#define CRC_KEY "\"manifest_crc32c\""

/* `text` (a JSON object) with the checksum field appended: *out malloc'd. */
static zeroc_result_t seal_manifest(const char *text, size_t len, char **out, size_t *out_len) {
  size_t e = len;
  while (e && text[e - 1] != '}') e--;
  if (!e) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "manifest text is not a JSON object");
  e--;
  while (e && (text[e - 1] == '\n' || text[e - 1] == ' ')) e--;
  uint32_t crc = zeroc__crc32c(0, text, e);
  size_t cap = e + 64;
  char *buf = malloc(cap);
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "manifest of %zu bytes", cap);
  memcpy(buf, text, e);
  int n = snprintf(buf + e, cap - e, ",\n " CRC_KEY ": %" PRIu32 "\n}\n", crc);
  *out = buf;
  *out_len = e + (size_t)n;
  return ZEROC_OK;
}

/* Checks the manifest's checksum field when it has one; manifests written
 * before the field existed load without it (the shard files keep their own
 * CRC-32C either way). */
static zeroc_result_t check_manifest_crc(const char *text, size_t len, const zeroc__json_t *root,
                                         const char *what) {
  if (!zeroc__json_get(root, "manifest_crc32c")) return ZEROC_OK;
  uint64_t want;
  ZEROC_CHECK(get_u64(root, "manifest_crc32c", what, UINT32_MAX, &want));
  size_t kl = strlen(CRC_KEY), at = SIZE_MAX;
  for (size_t i = 0; i + kl <= len; i++)
    if (!memcmp(text + i, CRC_KEY, kl)) at = i;
  size_t e = at == SIZE_MAX ? 0 : at;
  while (e && (text[e - 1] == '\n' || text[e - 1] == ' ' || text[e - 1] == '\r' || text[e - 1] == '\t')) e--;
  /* after the key only its number and the closing brace may follow */
  const char *t = at == SIZE_MAX ? text : text + at + kl, *end = text + len;
  while (t < end && (*t == ' ' || *t == ':' || (*t >= '0' && *t <= '9') || *t == '\n' || *t == '}' ||
                     *t == '\r' || *t == '\t'))
    t++;
  if (!e || text[e - 1] != ',' || t != end)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field 'manifest_crc32c' is not the manifest's last field",
                      what);
  uint32_t got = zeroc__crc32c(0, text, e - 1);
  if (got != (uint32_t)want)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: fails its checksum (CRC-32C %08" PRIx32 " of its content, manifest_crc32c "
                      "%08" PRIx32 "): it was not used",
                      what, got, (uint32_t)want);
  return ZEROC_OK;
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
  const char *names[] = {"world", "tp", "pp", "dp", "dp_shard", "dp_replicate"};
  int vals[] = {mesh->world, mesh->tp, mesh->pp, mesh->dp, mesh->dp_shard, mesh->dp_replicate};
  for (int i = 0; i < 6; i++) {
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
    zeroc_mesh_layout(mesh->world, mesh->tp, mesh->pp, mesh->dp_replicate, r, &rm);
    int shard = shard_size == 1 ? 0 : rm.dp_shard_rank;
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
  if (!res) res = seal_manifest(text, len, &sealed, &len);
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
    for (int p = 0; p < ui.nparams; p++) ZEROC_CHECK(zeroc__split_check(zeroc_model_param_desc(m, u, p)));
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
    if (r) ZWARN(IO, "could not remove '%s', left by an interrupted save: %s", path, zeroc__tls_error());
    else ZINFO(IO, "removed '%s', left by an interrupted save", path);
  }
  closedir(d);
}

zeroc_result_t zeroc_ckpt_save(zeroc_model_t *m, const char *dir, uint64_t step,
                               const char *app_json) {
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

/* ---- loading ------------------------------------------------------------------------- */

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/latest -> DIR/<name>, or `path` itself when it holds a manifest. */
static zeroc_result_t resolve(const char *path, char *out, size_t n) {
  char probe[4400];
  snprintf(probe, sizeof probe, "%s/manifest.json", path);
  if (is_file(probe)) {
    snprintf(out, n, "%s", path);
    return ZEROC_OK;
  }
  snprintf(probe, sizeof probe, "%s/latest", path);
  char *text = NULL;
  size_t len = 0;
  zeroc_result_t r = zeroc__file_read(probe, 4096, &text, &len);
  struct stat st;
  if (r && lstat(probe, &st) == 0) return r; /* it is there but unreadable: say why (a fifo...) */
  if (r)
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "'%s' is not a checkpoint: it has neither manifest.json nor a readable "
                      "'latest' file",
                      path);
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = 0;
  /* saves write step_<k>; anything but a plain name (a path, control or
   * non-ASCII bytes) is damage, quoted escaped (zeroc__fail escapes it) */
  int plain = len > 0 && len < 256 && strlen(text) == len && text[0] != '.';
  for (size_t i = 0; plain && i < len; i++) {
    char c = text[i];
    plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-' || c == '.';
  }
  if (!plain) {
    zeroc_result_t r2 = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                                   "'%s' names no checkpoint directory: it holds '%.*s' (accepted: "
                                   "a name such as step_00000008)",
                                   probe, (int)(len < 256 ? len : 256), text);
    free(text);
    return r2;
  }
  snprintf(out, n, "%s/%s", path, text);
  free(text);
  return ZEROC_OK;
}

/* Reads integer field `key` of `o` into *v; it must lie in 0..max. Every
 * integer of a manifest goes through here: a value that would wrap an int or
 * overflow a size computed from it is refused by name, never cast. */
static zeroc_result_t get_u64(const zeroc__json_t *o, const char *key, const char *what,
                              uint64_t max, uint64_t *v) {
  const zeroc__json_t *x = zeroc__json_get(o, key);
  if (!x || x->type != ZEROC_JSON_NUMBER || !x->u.num.is_int || x->u.num.i < 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field '%s' missing or not a non-negative integer",
                      what, key);
  if ((uint64_t)x->u.num.i > max)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field '%s' %" PRIu64 " is out of range (accepted 0..%" PRIu64 ")",
                      what, key, (uint64_t)x->u.num.i, max);
  *v = (uint64_t)x->u.num.i;
  return ZEROC_OK;
}

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
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "checkpoint file '%s' has %zu bytes, the manifest says %" PRIu64,
                      path, len, fe->bytes);
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
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: unit %d parameter %d is '%s' in the checkpoint, '%s' in this model",
                      what, u, p, nm && nm->type == ZEROC_JSON_STRING ? nm->u.str.s : "?", name);
  if (get_dims(pj, "shape", shape, &nd) || get_u64(pj, "tp_groups", what, MAX_MESH, &groups))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: parameter '%s' has no tensor-parallel layout (shape, tp_groups): this "
                      "checkpoint was saved with tp %d by an older zeroc and can only be loaded with tp %d",
                      what, name, old_tp, old_tp);
  memset(op->split.full, 0, sizeof op->split.full);
  op->split.ndim = nd;
  op->split.size = old_tp;
  op->split.groups = (int)groups;
  if (groups) {
    if (get_u64(pj, "tp_dim", what, ZEROC_MAX_DIMS, &dim) || get_dims(pj, "tp_full", full, &nf) || nf != nd ||
        (int)dim >= nd || groups > (uint64_t)full[dim])
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: parameter '%s': malformed tp_dim / tp_full", what, name);
    op->split.dim = (int)dim;
    for (int d = 0; d < nd; d++) {
      int64_t want = d == (int)dim ? full[d] / old_tp : full[d];
      if (shape[d] != want || (d == (int)dim && full[d] % ((int64_t)old_tp * (int64_t)groups)))
        return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: parameter '%s': shape and tp_full disagree", what, name);
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
    uint64_t local = zeroc__split_full_numel(&op[p].split) / (uint64_t)(op[p].split.groups ? old_tp : 1);
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
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: unit %d is '%s' in the checkpoint, '%s' in this model",
                      what, u, nm->u.str.s, un);
  if (numel != ui->numel && !resplit)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: unit %d ('%s') has %" PRIu64 " parameters in the checkpoint, %" PRIu64
                      " in this model: a different model shape",
                      what, u, un, numel, ui->numel);
  const zeroc__json_t *pj = zeroc__json_get(uj, "params");
  if (!pj || pj->type != ZEROC_JSON_ARRAY)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: unit %d ('%s'): field 'params' missing or not an array",
                      what, u, un);
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
static zeroc_result_t check_param(const zeroc__json_t *pj, const zeroc_param_desc_t *pd, int u, int p,
                                  uint64_t off, uint64_t pn, uint64_t offset, const char *what) {
  const char *name = pd->name ? pd->name : "";
  const zeroc__json_t *nm = zeroc__json_get(pj, "name");
  if (!nm || nm->type != ZEROC_JSON_STRING || strcmp(nm->u.str.s, name))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: unit %d parameter %d is '%s' in the checkpoint, '%s' in this model",
                      what, u, p, nm && nm->type == ZEROC_JSON_STRING ? nm->u.str.s : "?", name);
  if (zeroc__json_get(pj, "shape")) {
    int64_t shape[ZEROC_MAX_DIMS];
    int nd = 0, same;
    if (get_dims(pj, "shape", shape, &nd))
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: parameter '%s': malformed shape (1..%d dimensions of "
                        "1..%llu elements)", what, name, ZEROC_MAX_DIMS, MAX_NUMEL);
    same = nd == pd->ndim;
    for (int d = 0; same && d < nd; d++) same = shape[d] == pd->shape[d];
    if (!same) {
      char a[96] = "", b[96] = "";
      for (int d = 0; d < nd; d++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "x" : "", (long long)shape[d]);
      for (int d = 0; d < pd->ndim; d++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "x" : "", (long long)pd->shape[d]);
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s: parameter '%s' (unit %d) has shape %s in the checkpoint, %s in this model",
                        what, name, u, a, b);
    }
  }
  if (off != offset || pn != zeroc_param_numel(pd))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: parameter '%s' (unit %d) sits at offset %" PRIu64 " with %" PRIu64
                      " elements in the checkpoint, at %" PRIu64 " with %" PRIu64 " in this model",
                      what, name, u, off, pn, offset, zeroc_param_numel(pd));
  return ZEROC_OK;
}

zeroc_result_t zeroc_ckpt_load(zeroc_model_t *m, const char *path, uint64_t *step_out,
                               char **app_out) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_result_t res = ZEROC_OK;
  char dir[4200], mpath[4400], what[4500];
  char *text = NULL;
  size_t len = 0;
  zeroc__json_doc_t *doc = NULL;
  file_ent_t *files = NULL;
  float **cache = NULL;
  float **newstate = NULL; /* per unit: 3 x S_new */
  old_param_t **oldp = NULL; /* re-split: per unit, per parameter */
  int n = zeroc_model_num_units(m), nfiles = 0, resplit = 0, ntp = 1;
  uint64_t step = 0, opt_steps = 0, version = 0, old_shards = 0, old_tp = 1, old_pp = 1, unit_base = 0;
  uint64_t *old_S = NULL, *old_N = NULL;
  if (app_out) *app_out = NULL;
  zeroc__watchdog_phase(ctx, "loading checkpoint");
  ZEROC_FAULT_AT(ctx, "ckpt.load", 0, NULL);

  ZEROC_TRY(resolve(path, dir, sizeof dir));
  snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
  snprintf(what, sizeof what, "manifest '%s'", mpath);
  ZEROC_TRY(zeroc__file_read(mpath, MANIFEST_MAX, &text, &len));
  ZEROC_TRY(zeroc__json_parse(text, len, what, &doc));
  const zeroc__json_t *root = zeroc__json_root(doc);
  const zeroc__json_t *fmt = zeroc__json_get(root, "format");
  if (!fmt || fmt->type != ZEROC_JSON_STRING || strcmp(fmt->u.str.s, "zeroc-checkpoint")) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: not a zeroc checkpoint (format field)", what);
    goto fail;
  }
  ZEROC_TRY(get_u64(root, "version", what, UINT32_MAX, &version));
  if (version != 1) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: version %" PRIu64 " (this zeroc reads version 1)", what, version);
    goto fail;
  }
  ZEROC_TRY(check_manifest_crc(text, len, root, what));
  ZEROC_TRY(get_u64(root, "step", what, MAX_STEP, &step));
  opt_steps = step; /* older manifests: no skipped steps recorded */
  if (zeroc__json_get(root, "optimizer_steps")) ZEROC_TRY(get_u64(root, "optimizer_steps", what, MAX_STEP, &opt_steps));
  if (opt_steps > step) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: optimizer_steps %" PRIu64 " exceeds step %" PRIu64, what,
                     opt_steps, step);
    goto fail;
  }
  ZEROC_TRY(get_u64(root, "shard_size", what, MAX_MESH, &old_shards));
  const zeroc__json_t *mj = zeroc__json_get(root, "mesh");
  if (mj) {
    ZEROC_TRY(get_u64(mj, "tp", what, MAX_MESH, &old_tp));
    ZEROC_TRY(get_u64(mj, "pp", what, MAX_MESH, &old_pp));
    /* not needed to load, but a manifest claiming nonsense is not trusted */
    const char *more[] = {"world", "dp", "dp_shard", "dp_replicate"};
    for (int i = 0; i < 4; i++) {
      uint64_t v;
      if (zeroc__json_get(mj, more[i])) ZEROC_TRY(get_u64(mj, more[i], what, MAX_MESH * MAX_MESH, &v));
    }
  }
  if (old_pp != (uint64_t)mesh->pp || old_tp < 1) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "%s: saved with tp %" PRIu64 " and pp %" PRIu64 ", loading needs pp %d "
                     "(re-splitting pipeline parallelism goes through --export/--init)",
                     what, old_tp, old_pp, mesh->pp);
    goto fail;
  }
  resplit = (int)old_tp != mesh->tp;
  ntp = resplit ? (int)old_tp : 1;
  /* with a pipeline, this rank's stage's units */
  const zeroc__json_t *units = zeroc__json_get(root, "units");
  const zeroc__json_t *stages = zeroc__json_get(root, "stages");
  if (mesh->pp > 1) {
    units = NULL;
    for (size_t i = 0; stages && stages->type == ZEROC_JSON_ARRAY && i < stages->u.arr.n; i++) {
      uint64_t sp;
      const zeroc__json_t *e = &stages->u.arr.items[i];
      if (!get_u64(e, "pp", what, MAX_MESH, &sp) && sp == (uint64_t)mesh->pp_rank)
        units = zeroc__json_get(e, "units");
    }
    if (!units) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: no unit list for pipeline stage %d", what,
                       mesh->pp_rank);
      goto fail;
    }
  }
  if (old_shards < 1) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: shard_size 0 (accepted 1..%llu)", what, MAX_MESH);
    goto fail;
  }
  if (!units || units->type != ZEROC_JSON_ARRAY) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field 'units' missing or not an array", what);
    goto fail;
  }
  if (units->u.arr.n != (size_t)n) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: %zu units saved%s, this model has %d%s", what,
                     units->u.arr.n, mesh->pp > 1 ? " for this pipeline stage" : "", n,
                     mesh->pp > 1 ? " (another --vpp or model shape?)" : "");
    goto fail;
  }
  /* the layout must be the model's, unit by unit and parameter by parameter */
  old_S = calloc((size_t)n, sizeof *old_S);
  old_N = calloc((size_t)n, sizeof *old_N);
  oldp = calloc((size_t)n, sizeof *oldp);
  if (!old_S || !old_N || !oldp) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint layout");
    goto fail;
  }
  for (int u = 0; u < n && !res; u++) {
    const zeroc__json_t *uj = &units->u.arr.items[u];
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    uint64_t numel;
    res = get_u64(uj, "numel", what, MAX_NUMEL, &numel);
    if (!res) res = get_u64(uj, "shard_numel", what, MAX_NUMEL, &old_S[u]);
    if (!res) res = get_u64(uj, "flat_numel", what, MAX_NUMEL, &old_N[u]);
    if (res) break;
    res = check_unit(uj, &ui, u, numel, old_S[u], old_N[u], old_shards, resplit, what);
    if (res) break;
    const zeroc__json_t *pj = zeroc__json_get(uj, "params");
    oldp[u] = calloc((size_t)ui.nparams, sizeof *oldp[u]);
    if (!oldp[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint layout of unit %d", u);
      break;
    }
    for (int p = 0; p < ui.nparams && !res; p++) {
      uint64_t off, pn;
      res = get_u64(&pj->u.arr.items[p], "offset", what, MAX_NUMEL, &off);
      if (!res) res = get_u64(&pj->u.arr.items[p], "numel", what, MAX_NUMEL, &pn);
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      if (res) break;
      oldp[u][p].off = off;
      oldp[u][p].numel = pn;
      if (resplit) {
        res = old_split(&pj->u.arr.items[p], pd, (int)old_tp, what, u, p, &oldp[u][p]);
        if (!res && (off + pn > old_N[u] ||
                     pn * (uint64_t)(oldp[u][p].split.groups ? old_tp : 1) !=
                         zeroc__split_full_numel(&oldp[u][p].split)))
          res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: unit %d parameter %d: offset or size out of place",
                           what, u, p);
      } else {
        res = check_param(&pj->u.arr.items[p], pd, u, p, off, pn, zeroc_model_param_offset(m, u, p),
                          what);
      }
    }
  }
  if (res) goto fail;
  /* the shard files of this rank's pipeline stage: of its own tp rank, or of
   * every old tp rank when re-splitting (slot = old tp rank) */
  const zeroc__json_t *fj = zeroc__json_get(root, "files");
  if (!fj || fj->type != ZEROC_JSON_ARRAY) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: no files list", what);
    goto fail;
  }
  files = calloc((size_t)ntp * old_shards, sizeof *files);
  cache = calloc((size_t)ntp * old_shards, sizeof *cache);
  if (!files || !cache) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint file table");
    goto fail;
  }
  for (size_t i = 0; i < fj->u.arr.n; i++) {
    const zeroc__json_t *e = &fj->u.arr.items[i];
    uint64_t pp, tp, sh, bytes, crc;
    const zeroc__json_t *nm = zeroc__json_get(e, "name");
    /* a bad integer is named by get_u64's own message */
    res = get_u64(e, "pp", what, MAX_MESH, &pp);
    if (!res) res = get_u64(e, "tp", what, MAX_MESH, &tp);
    if (!res) res = get_u64(e, "shard", what, MAX_MESH, &sh);
    if (!res) res = get_u64(e, "bytes", what, MAX_BYTES, &bytes);
    if (!res) res = get_u64(e, "crc32c", what, UINT32_MAX, &crc);
    if (res) break;
    if (!nm ||
        nm->type != ZEROC_JSON_STRING || nm->u.str.len >= sizeof files[0].name ||
        strchr(nm->u.str.s, '/') || sh >= old_shards || tp >= old_tp) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: files entry %zu is malformed", what, i);
      break;
    }
    if ((int)pp != mesh->pp_rank || (!resplit && (int)tp != mesh->tp_rank)) continue;
    file_ent_t *fe = &files[(resplit ? tp : 0) * old_shards + sh];
    if (fe->name[0]) continue; /* listed twice: the first entry holds */
    snprintf(fe->name, sizeof fe->name, "%s", nm->u.str.s);
    fe->pp = (int)pp, fe->tp = (int)tp, fe->shard = (int)sh;
    fe->bytes = bytes;
    fe->crc = (uint32_t)crc;
    nfiles++;
  }
  if (!res && (uint64_t)nfiles != (uint64_t)ntp * old_shards)
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: %d of %" PRIu64 " shard files listed for pp %d%s",
                     what, nfiles, (uint64_t)ntp * old_shards, mesh->pp_rank,
                     resplit ? "" : " and this tp rank");
  uint64_t expect_bytes = 0;
  for (int u = 0; u < n && !res; u++)
    if (__builtin_add_overflow(expect_bytes, old_S[u] * 4 * STATES, &expect_bytes))
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: the units' shard sizes add up beyond 2^64 bytes", what);
  for (uint64_t s = 0; !res && s < (uint64_t)ntp * old_shards; s++)
    if (files[s].bytes != expect_bytes)
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: file '%s' should hold %" PRIu64 " bytes, listed %" PRIu64,
                       what, files[s].name, expect_bytes, files[s].bytes);
  /* this rank's new shards, cut from whichever old shards cover them */
  newstate = res ? NULL : calloc((size_t)n, sizeof *newstate);
  if (!res && !newstate) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint state buffers");
  /* unit_base: floats before unit u in an old shard file */
  for (int u = 0; u < n && !res; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    uint64_t S = ui.shard_numel, lo = ui.shard_offset;
    newstate[u] = calloc(S * STATES + 1, sizeof(float));
    if (!newstate[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint state of unit %d", u);
      break;
    }
    if (resplit) {
      res = resplit_unit(m, u, oldp[u], old_S[u], unit_base, dir, files, cache, old_shards, newstate[u]);
      if (!res && mesh->rank == 0)
        res = resplit_dropped(m, u, oldp[u], old_S[u], unit_base, dir, files, cache, old_shards,
                              (int)old_tp, what);
    }
    for (uint64_t j = lo; !resplit && j < lo + S && !res;) {
      if (j >= old_N[u]) break; /* padding beyond the old flat length: zero */
      uint64_t s = j / old_S[u], s_end = (s + 1) * old_S[u];
      uint64_t hi = lo + S < s_end ? lo + S : s_end;
      if (!cache[s]) res = load_file(dir, &files[s], &cache[s]);
      if (res) break;
      for (int k = 0; k < STATES; k++)
        memcpy(newstate[u] + k * S + (j - lo),
               cache[s] + unit_base + (uint64_t)k * old_S[u] + (j - s * old_S[u]),
               (hi - j) * sizeof(float));
      j = hi;
    }
    unit_base += old_S[u] * STATES;
  }
  /* every rank checked its part; only now does anything change */
  res = zeroc_ctx_agree(ctx, res);
  if (res) goto done;
  for (int u = 0; u < n && !res; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    for (int k = 0; k < STATES && !res; k++)
      res = zeroc_model_set_shard(m, u, (zeroc_state_kind_t)k, newstate[u] + (uint64_t)k * ui.shard_numel);
  }
  if (!res) res = zeroc_model_sync_params(m);
  if (!res) zeroc_model_set_steps(m, opt_steps);
  if (!res && app_out) {
    const zeroc__json_t *aj = zeroc__json_get(root, "app");
    if (aj && aj->type == ZEROC_JSON_STRING && aj->u.str.len) {
      *app_out = strdup(aj->u.str.s);
      if (!*app_out) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "checkpoint app object");
    }
  }
  if (!res) *step_out = step;
  if (!res && resplit)
    ZINFO(IO, "checkpoint step %" PRIu64 " re-split from tp %" PRIu64 " to tp %d", step, old_tp, mesh->tp);
  res = zeroc_ctx_agree(ctx, res);
  goto done;
fail:
  res = zeroc_ctx_agree(ctx, res);
done:
  if (newstate)
    for (int u = 0; u < n; u++) free(newstate[u]);
  free(newstate);
  if (oldp)
    for (int u = 0; u < n; u++) free(oldp[u]);
  free(oldp);
  if (cache)
    for (uint64_t s = 0; s < (uint64_t)ntp * old_shards; s++) free(cache[s]);
  free(cache);
  free(old_S);
  free(old_N);
  free(files);
  zeroc__json_free(doc);
  free(text);
  return zeroc__ctx_ret(ctx, res);
}

/* ---- resuming: the caller's own record ----------------------------------------------- */

/* The value at dotted path `path` ("model.heads") of object `o`, or NULL. */
static const zeroc__json_t *get_path(const zeroc__json_t *o, const char *path) {
  char key[64];
  while (o && *path) {
    size_t n = strcspn(path, ".");
    if (n >= sizeof key) return NULL;
    memcpy(key, path, n);
    key[n] = 0;
    o = o->type == ZEROC_JSON_OBJECT ? zeroc__json_get(o, key) : NULL;
    path += n + (path[n] == '.');
  }
  return o;
}

/* A scalar as the message shows it. */
static const char *show(const zeroc__json_t *v, char *buf, size_t n) {
  if (!v) snprintf(buf, n, "missing");
  else if (v->type == ZEROC_JSON_NUMBER && v->u.num.is_u64) snprintf(buf, n, "%" PRIu64, v->u.num.u);
  else if (v->type == ZEROC_JSON_NUMBER && v->u.num.is_int) snprintf(buf, n, "%lld", (long long)v->u.num.i);
  else if (v->type == ZEROC_JSON_NUMBER) snprintf(buf, n, "%.9g", v->u.num.value);
  else if (v->type == ZEROC_JSON_STRING) snprintf(buf, n, "'%.64s'", v->u.str.s);
  else snprintf(buf, n, "not a number or string");
  return buf;
}

static int same_scalar(const zeroc__json_t *a, const zeroc__json_t *b) {
  if (!a || !b || a->type != b->type) return 0;
  if (a->type == ZEROC_JSON_STRING) return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
  if (a->type != ZEROC_JSON_NUMBER || a->u.num.is_int != b->u.num.is_int ||
      a->u.num.is_u64 != b->u.num.is_u64)
    return 0;
  if (a->u.num.is_u64) return a->u.num.u == b->u.num.u; /* exact above 2^63 too */
  return a->u.num.is_int ? a->u.num.i == b->u.num.i : a->u.num.value == b->u.num.value;
}

static zeroc_result_t check_resume(const char *path, uint64_t step, uint64_t run_steps,
                                   const char *saved, const char *current, const char *const *fields) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__json_doc_t *sd = NULL, *cd = NULL;
  char what[4200];
  snprintf(what, sizeof what, "resume from '%s'", path ? path : "");
  if (step > run_steps)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "--steps %" PRIu64 " is below the checkpoint's step %" PRIu64 " ('%s'): a run "
                      "must end at or after the step it resumes from (accepted --steps %" PRIu64
                      " or more)",
                      run_steps, step, path ? path : "", step);
  if (!fields || !*fields) return ZEROC_OK;
  if (!saved || !*saved)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: the manifest's 'app' object is missing or empty, so the model and data "
                      "it continues cannot be checked",
                      what);
  ZEROC_TRY(zeroc__json_parse(saved, strlen(saved), "the checkpoint's app object", &sd));
  ZEROC_TRY(zeroc__json_parse(current ? current : "{}", current ? strlen(current) : 2,
                              "this run's app object", &cd));
  for (const char *const *f = fields; *f && !res; f++) {
    const zeroc__json_t *a = get_path(zeroc__json_root(sd), *f), *b = get_path(zeroc__json_root(cd), *f);
    char x[96], y[96];
    if (!a)
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: the manifest's app object has no '%s'", what, *f);
    else if (!same_scalar(a, b))
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "%s: %s is %s in the checkpoint, %s in this run (accepted: the "
                       "checkpoint's value)",
                       what, *f, show(a, x, sizeof x), show(b, y, sizeof y));
  }
fail:
  zeroc__json_free(sd);
  zeroc__json_free(cd);
  return res;
}

zeroc_result_t zeroc_ckpt_check_resume(zeroc_ctx_t *ctx, const char *path, uint64_t step,
                                       uint64_t run_steps, const char *saved_app,
                                       const char *current_app, const char *const *fields) {
  return zeroc__ctx_ret(ctx, check_resume(path, step, run_steps, saved_app, current_app, fields));
}
