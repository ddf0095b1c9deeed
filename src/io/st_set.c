/*
 * io/st_set.c - a save_pretrained directory's weights as one set of tensors
 * (st_set.h): one safetensors file, or the shards an index names; and the
 * writer that lays tensors out as transformers' save_pretrained does,
 * sharding above a size.
 */
#include "io/st_set.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"

#define INDEX_NAME "model.safetensors.index.json"

struct zeroc__st_set {
  int nfiles;
  zeroc__st_t **files;
  zeroc__json_doc_t *index; /* the index's document (names point into it), or NULL */
  size_t nmap;
  const char **names; /* (nmap) tensor names of the weight map */
  int *file_of;       /* (nmap) the shard holding each */
};

/* ---- read ----------------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static int is_regular(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* A shard name an index may give: a plain file name in the index's directory. */
static int plain_name(const char *s, size_t len) {
  return len > 0 && len < 256 && strlen(s) == len && !strchr(s, '/') && strcmp(s, ".") &&
         strcmp(s, "..");
}

/* The shard named `file` (opened once, in the index's directory `dir`). */
static zeroc_result_t shard_of(zeroc__st_set_t *s, const char *dir, const char *file,
                               const char **opened, int *out) {
  for (int k = 0; k < s->nfiles; k++)
    if (!strcmp(opened[k], file)) return *out = k, ZEROC_OK;
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  ZEROC_CHECK(zeroc__st_open(path, &s->files[s->nfiles]));
  opened[s->nfiles] = file;
  *out = s->nfiles++;
  return ZEROC_OK;
}

/* The shards of index `path` and its weight map, each mapped tensor checked present. */
static zeroc_result_t open_index(zeroc__st_set_t *s, const char *path) {
  char *text = NULL, dir[4096];
  size_t len = 0;
  const char **opened = NULL;
  zeroc_result_t res = ZEROC_OK;
  const char *slash = strrchr(path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  ZEROC_CHECK(zeroc__file_read(path, 256u << 20, &text, &len));
  ZEROC_TRY(zeroc__json_parse(text, len, path, &s->index));
  const zeroc__json_t *map = zeroc__json_get(zeroc__json_root(s->index), "weight_map");
  if (!map || map->type != ZEROC_JSON_OBJECT || map->u.obj.n == 0) {
    res =
        ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "index '%s' has no \"weight_map\" object of tensor names and shard files", path);
    goto fail;
  }
  size_t n = map->u.obj.n;
  s->names = calloc(n, sizeof *s->names);
  s->file_of = calloc(n, sizeof *s->file_of);
  s->files = calloc(n, sizeof *s->files);
  opened = calloc(n, sizeof *opened);
  if (!s->names || !s->file_of || !s->files || !opened) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "index '%s' of %zu tensors", path, n);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    const zeroc__json_member_t *m = &map->u.obj.members[i];
    if (m->value.type != ZEROC_JSON_STRING || !plain_name(m->value.u.str.s, m->value.u.str.len)) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                       "index '%s': tensor '%s' maps to no plain file name beside the index", path,
                       m->key);
      goto fail;
    }
    ZEROC_TRY(shard_of(s, dir, m->value.u.str.s, opened, &s->file_of[i]));
    s->names[i] = m->key;
    s->nmap = i + 1;
    if (!zeroc__st_find(s->files[s->file_of[i]], m->key)) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "index '%s' maps tensor '%s' to '%s', which lacks it",
                       path, m->key, m->value.u.str.s);
      goto fail;
    }
  }
fail:
  free(opened);
  free(text);
  return res;
}

zeroc_result_t zeroc__st_set_open(const char *path, zeroc__st_set_t **out) {
  struct stat st;
  char file[4200];
  *out = NULL;
  zeroc__st_set_t *s = calloc(1, sizeof *s);
  if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "tensor set of '%s'", path);
  zeroc_result_t res = ZEROC_OK;
  int is_dir = !stat(path, &st) && S_ISDIR(st.st_mode);
  const char *one = path;
  if (is_dir) {
    snprintf(file, sizeof file, "%s/model.safetensors", path);
    one = file;
    if (!is_regular(file)) {
      snprintf(file, sizeof file, "%s/" INDEX_NAME, path);
      if (!is_regular(file)) {
        res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                         "directory '%s' has neither model.safetensors nor " INDEX_NAME
                         " (a save_pretrained directory has one of them)",
                         path);
        goto fail;
      }
    }
  }
  if (ends_with(one, ".index.json")) {
    ZEROC_TRY(open_index(s, one));
  } else {
    s->files = calloc(1, sizeof *s->files);
    if (!s->files) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "tensor set of '%s'", path);
      goto fail;
    }
    ZEROC_TRY(zeroc__st_open(one, &s->files[0]));
    s->nfiles = 1;
  }
  *out = s;
  return ZEROC_OK;
fail:
  zeroc__st_set_close(s);
  return res;
}

void zeroc__st_set_close(zeroc__st_set_t *s) {
  if (!s) return;
  for (int k = 0; k < s->nfiles; k++) zeroc__st_close(s->files[k]);
  free(s->files);
  free(s->names);
  free(s->file_of);
  zeroc__json_free(s->index);
  free(s);
}

const zeroc__st_tensor_t *zeroc__st_set_find(const zeroc__st_set_t *s, const char *name) {
  if (!s->index) return zeroc__st_find(s->files[0], name);
  for (size_t i = 0; i < s->nmap; i++)
    if (!strcmp(s->names[i], name)) return zeroc__st_find(s->files[s->file_of[i]], name);
  return NULL;
}

int zeroc__st_set_files(const zeroc__st_set_t *s) { return s->nfiles; }

size_t zeroc__st_set_count(const zeroc__st_set_t *s) {
  size_t n = 0;
  for (int k = 0; k < s->nfiles; k++) n += zeroc__st_count(s->files[k]);
  return n;
}

const zeroc__st_tensor_t *zeroc__st_set_tensor(const zeroc__st_set_t *s, size_t i) {
  for (int k = 0; k < s->nfiles; k++) {
    size_t n = zeroc__st_count(s->files[k]);
    if (i < n) return zeroc__st_tensor(s->files[k], i);
    i -= n;
  }
  return NULL;
}

/* ---- write ---------------------------------------------------------------------------- */

static uint64_t entry_numel(const zeroc__st_entry_t *e) {
  return e->ndim == 2 ? e->shape[0] * e->shape[1] : e->shape[0];
}

/* Entries [first, first + n) as one file `path`. */
static zeroc_result_t write_one(const char *path, const zeroc__st_entry_t *e, size_t first,
                                size_t n, const char *const *meta, zeroc__st_fill_fn fill,
                                void *user, float *buf) {
  zeroc__st_writer_t *w = NULL;
  zeroc_result_t res = ZEROC_OK;
  ZEROC_TRY(zeroc__st_writer_create(path, &w));
  for (int k = 0; meta && meta[k]; k += 2)
    ZEROC_TRY(zeroc__st_writer_metadata(w, meta[k], meta[k + 1]));
  for (size_t i = first; i < first + n; i++)
    ZEROC_TRY(zeroc__st_writer_add(w, e[i].name, ZEROC_ST_F32, e[i].ndim, e[i].shape));
  for (size_t i = first; i < first + n; i++) {
    ZEROC_TRY(fill(user, i, buf));
    ZEROC_TRY(zeroc__st_writer_write_f32(w, buf, entry_numel(&e[i])));
  }
  ZEROC_TRY(zeroc__st_writer_finish(w));
fail:
  zeroc__st_writer_destroy(w);
  return res;
}

/* The shard of each entry as transformers cuts them: a tensor goes into the current
 * shard unless that would pass max_bytes; a tensor larger than that has one to itself.
 * Returns the number of shards. */
static int cut_shards(const zeroc__st_entry_t *e, size_t n, uint64_t max_bytes, int *shard) {
  int k = 0;
  uint64_t in = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t b = entry_numel(&e[i]) * 4;
    if (i > 0 && in + b > max_bytes) k++, in = 0;
    shard[i] = k;
    in += b;
  }
  return n ? k + 1 : 0;
}

static zeroc_result_t write_index(const char *dir, const zeroc__st_entry_t *e, size_t n,
                                  const int *shard, int nshards, uint64_t total) {
  zeroc__jw_t w;
  char file[4400], shard_name[64];
  zeroc__jw_init(&w, 2);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "metadata");
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "total_size");
  zeroc__jw_uint(&w, total);
  zeroc__jw_object_end(&w);
  zeroc__jw_key(&w, "weight_map");
  zeroc__jw_object_begin(&w);
  for (size_t i = 0; i < n; i++) {
    snprintf(shard_name, sizeof shard_name, "model-%05d-of-%05d.safetensors", shard[i] + 1,
             nshards);
    zeroc__jw_key(&w, e[i].name);
    zeroc__jw_string(&w, shard_name);
  }
  zeroc__jw_object_end(&w);
  zeroc__jw_object_end(&w);
  const char *text;
  size_t len;
  zeroc_result_t r = zeroc__jw_finish(&w, &text, &len);
  snprintf(file, sizeof file, "%s/" INDEX_NAME, dir);
  if (!r) r = zeroc__file_write_atomic(file, text, len);
  zeroc__jw_free(&w);
  return r;
}

zeroc_result_t zeroc__st_set_write(const char *path, int dir, const zeroc__st_entry_t *e, size_t n,
                                   uint64_t max_bytes, const char *const *meta,
                                   zeroc__st_fill_fn fill, void *user) {
  uint64_t maxn = 0, total = 0;
  for (size_t i = 0; i < n; i++) {
    if (entry_numel(&e[i]) > maxn) maxn = entry_numel(&e[i]);
    total += entry_numel(&e[i]) * 4;
  }
  float *buf = malloc(maxn * 4 + 4);
  int *shard = malloc(sizeof(int) * n + 1);
  char file[4400];
  zeroc_result_t res = ZEROC_OK;
  if (!buf || !shard) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export buffer of %" PRIu64 " floats", maxn);
    goto fail;
  }
  if (!dir || total <= max_bytes) {
    if (dir) snprintf(file, sizeof file, "%s/model.safetensors", path);
    res = write_one(dir ? file : path, e, 0, n, meta, fill, user, buf);
    goto fail;
  }
  int nshards = cut_shards(e, n, max_bytes, shard);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && shard[j] == shard[i]) j++;
    snprintf(file, sizeof file, "%s/model-%05d-of-%05d.safetensors", path, shard[i] + 1, nshards);
    ZEROC_TRY(write_one(file, e, i, j - i, meta, fill, user, buf));
    i = j;
  }
  res = write_index(path, e, n, shard, nshards, total);
fail:
  free(shard);
  free(buf);
  return res;
}
