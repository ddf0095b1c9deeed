/*
 * embed/persist.c - whole-table access (get/set) and save/load of the
 * sharded tables. A saved shard is one file named by its table and its global
 * row and column range, holding its weights and, for the shard that starts at
 * column 0, the AdaGrad state of its rows; loading on any group size or
 * sharding reads, for each shard it holds, the parts of every file that
 * overlap it (the re-cut), and checks that they cover it.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "embed/embed.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "runtime/runtime.h"

#define EMBED_FILE_MAGIC   0x424d455aU /* "ZEMB" */
/* 2: the header's last word is the CRC-32C of the payload (weights, then state);
 * version 1 files (no checksum) still load */
#define EMBED_FILE_VERSION 2

typedef struct file_hdr {
  uint32_t magic, version;
  int32_t table, dim;
  int64_t rows, r0, r1;
  int32_t c0, c1, has_state;
  uint32_t crc; /* version 2: crc32c of everything after the header; version 1: 0 */
} file_hdr_t;

/* A host view of this rank's shard of x (weights, state); ends with view_end. */
static zeroc_result_t shard_view(zeroc_embed_t *e, zeroc__etab_t *x, int flags, zeroc__view_t *vw,
                                 zeroc__view_t *vs, float **w, float **st) {
  memset(vw, 0, sizeof(*vw));
  memset(vs, 0, sizeof(*vs));
  size_t rows = (size_t)(x->r1 - x->r0), cols = (size_t)(x->c1 - x->c0);
  *w = x->w, *st = x->state;
  if (x->host || !rows || !cols) return ZEROC_OK;
  ZEROC_CHECK(zeroc__view_host(e->s, x->w, rows * cols * 4, flags, NULL, vw));
  zeroc_result_t r = zeroc__view_host(e->s, x->state, rows * 4, flags, NULL, vs);
  if (r != ZEROC_OK) {
    zeroc__view_end(vw);
    return r;
  }
  *w = vw->ptr, *st = vs->ptr;
  return ZEROC_OK;
}

static zeroc_result_t end_views(zeroc__view_t *vw, zeroc__view_t *vs, zeroc_result_t r) {
  zeroc_result_t a = zeroc__view_end(vw), b = zeroc__view_end(vs);
  return r != ZEROC_OK ? r : a != ZEROC_OK ? a : b;
}

/* Whether this rank's copy of x is the one that speaks for it (data-parallel
 * tables: rank 0), and whether it carries the rows' state (column 0). */
static int speaks(const zeroc_embed_t *e, const zeroc__etab_t *x) {
  if (x->sharding == ZEROC_EMBED_DATA) return e->rank == 0;
  return x->r1 > x->r0 && x->c1 > x->c0;
}

static zeroc_result_t table_arg(zeroc_embed_t *e, int t, const void *w, const char *fn) {
  if (!e) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: NULL handle", fn);
  if (t < 0 || t >= e->T || !w)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: table %d (weights %s); accepted 0..%d, weights set", fn, t,
                      w ? "set" : "NULL", e->T - 1);
  return ZEROC_OK;
}

static zeroc_result_t get_table(zeroc_embed_t *e, int t, float *weights, float *state) {
  zeroc__etab_t *x = &e->tab[t];
  size_t D = (size_t)x->dim, R = (size_t)x->rows;
  memset(weights, 0, R * D * 4);
  if (state) memset(state, 0, R * 4);
  zeroc__view_t vw, vs;
  float *w, *st;
  ZEROC_CHECK(shard_view(e, x, ZEROC_VIEW_IN, &vw, &vs, &w, &st));
  int cols = x->c1 - x->c0;
  if (speaks(e, x))
    for (int64_t i = x->r0; i < x->r1; i++) {
      memcpy(weights + (size_t)i * D + x->c0, w + (i - x->r0) * cols, (size_t)cols * 4);
      if (state && x->c0 == 0) state[i] = st[i - x->r0];
    }
  ZEROC_CHECK(end_views(&vw, &vs, ZEROC_OK));
  /* disjoint parts and zeros elsewhere: the sum is exact */
  if (e->N > 1) {
    ZEROC_CHECK(zeroc__allreduce_host(e->g, weights, R * D, ZEROC_FP32, ZEROC_SUM));
    if (state) ZEROC_CHECK(zeroc__allreduce_host(e->g, state, R, ZEROC_FP32, ZEROC_SUM));
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_embed_get_table(zeroc_embed_t *e, int t, float *weights, float *state) {
  ZEROC_CHECK(table_arg(e, t, weights, __func__));
  return zeroc__ctx_ret(e->ctx, get_table(e, t, weights, state));
}

zeroc_result_t zeroc_embed_set_table(zeroc_embed_t *e, int t, const float *weights,
                                     const float *state) {
  ZEROC_CHECK(table_arg(e, t, weights, __func__));
  zeroc__etab_t *x = &e->tab[t];
  size_t D = (size_t)x->dim;
  int cols = x->c1 - x->c0;
  zeroc__view_t vw, vs;
  float *w, *st;
  zeroc_result_t r = shard_view(e, x, ZEROC_VIEW_IN | ZEROC_VIEW_OUT, &vw, &vs, &w, &st);
  if (r != ZEROC_OK) return zeroc__ctx_ret(e->ctx, r);
  for (int64_t i = x->r0; cols > 0 && i < x->r1; i++) {
    memcpy(w + (i - x->r0) * cols, weights + (size_t)i * D + x->c0, (size_t)cols * 4);
    if (state) st[i - x->r0] = state[i];
  }
  return zeroc__ctx_ret(e->ctx, end_views(&vw, &vs, ZEROC_OK));
}

/* ---- save ------------------------------------------------------------------------ */

static zeroc_result_t write_shard(const char *dir, int t, const zeroc__etab_t *x, const float *w,
                                  const float *st) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/embed_t%d_r%" PRId64 "-%" PRId64 "_c%d-%d.bin", dir, t, x->r0,
           x->r1, x->c0, x->c1);
  file_hdr_t h = {EMBED_FILE_MAGIC,
                  EMBED_FILE_VERSION,
                  t,
                  x->dim,
                  x->rows,
                  x->r0,
                  x->r1,
                  x->c0,
                  x->c1,
                  x->c0 == 0,
                  0};
  size_t nw = (size_t)(x->r1 - x->r0) * (size_t)(x->c1 - x->c0),
         ns = h.has_state ? (size_t)(x->r1 - x->r0) : 0;
  h.crc = zeroc__crc32c(zeroc__crc32c(0, w, 4 * nw), st, 4 * ns);
  /* through an exclusive temporary, renamed over the name once whole (io/files.h) */
  zeroc__afile_t f = ZEROC_AFILE_INIT;
  zeroc_result_t res;
  ZEROC_TRY(zeroc__afile_open(&f, path));
  ZEROC_TRY(zeroc__afile_write(&f, &h, sizeof(h)));
  ZEROC_TRY(zeroc__afile_write(&f, w, 4 * nw));
  if (ns) ZEROC_TRY(zeroc__afile_write(&f, st, 4 * ns));
  ZEROC_TRY(zeroc__afile_commit(&f));
  return ZEROC_OK;
fail:
  zeroc__afile_abort(&f);
  return res;
}

static zeroc_result_t save(zeroc_embed_t *e, const char *dir) {
  for (int t = 0; t < e->T; t++) {
    zeroc__etab_t *x = &e->tab[t];
    if (!speaks(e, x)) continue;
    zeroc__view_t vw, vs;
    float *w, *st;
    ZEROC_CHECK(shard_view(e, x, ZEROC_VIEW_IN, &vw, &vs, &w, &st));
    ZEROC_CHECK(end_views(&vw, &vs, write_shard(dir, t, x, w, st)));
  }
  return ZEROC_OK;
}

/* Every rank learns whether any failed (and the files are all there after it). */
static zeroc_result_t agree(zeroc_embed_t *e, zeroc_result_t mine, const char *what) {
  int32_t v = mine != ZEROC_OK ? e->rank + 1 : 0;
  ZEROC_CHECK(zeroc__allreduce_host(e->g, &v, 1, ZEROC_INT32, ZEROC_MAX));
  if (mine != ZEROC_OK) return mine;
  if (v) return ZEROC_FAIL(ZEROC_ERR_REMOTE, "embed %s: rank %d failed", what, v - 1);
  return ZEROC_OK;
}

zeroc_result_t zeroc_embed_save(zeroc_embed_t *e, const char *dir) {
  if (!e || !dir)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_save: NULL %s", e ? "dir" : "handle");
  return zeroc__ctx_ret(e->ctx, agree(e, save(e, dir), "save"));
}

/* ---- load ------------------------------------------------------------------------ */

/* A version 2 file's payload against its header's checksum, and its length: a flipped
 * bit or a cut or padded file is refused (ZEROC_ERR_CORRUPT naming the file). */
static zeroc_result_t verify(FILE *f, const char *path, const file_hdr_t *h) {
  if (h->version < 2) return ZEROC_OK; /* written before the checksum */
  uint64_t nw = (uint64_t)(h->r1 - h->r0) * (uint64_t)(h->c1 - h->c0);
  uint64_t left = 4 * (nw + (h->has_state ? (uint64_t)(h->r1 - h->r0) : 0));
  char buf[65536];
  uint32_t crc = 0;
  if (fseek(f, (long)sizeof *h, SEEK_SET))
    return ZEROC_FAIL(ZEROC_ERR_IO, "embed load: %s: %s", path, strerror(errno));
  while (left > 0) {
    size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
    if (fread(buf, 1, k, f) != k)
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "embed load: %s is short: %llu bytes of its table shard missing", path,
                        (unsigned long long)left);
    crc = zeroc__crc32c(crc, buf, k);
    left -= k;
  }
  if (fgetc(f) != EOF)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "embed load: %s has bytes past its table shard", path);
  if (crc != h->crc)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "embed load: %s: checksum %08x, the header says %08x: the file is damaged",
                      path, crc, h->crc);
  return ZEROC_OK;
}

/* The first non-finite value of v[0..n), or -1. */
static int64_t non_finite(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return (int64_t)i;
  return -1;
}

/* Copies the overlap of file `path` with x's shard into w/st; counts what it covered.
 * Non-finite weights or state are refused (a NaN row would train on, and be saved). */
static zeroc_result_t read_overlap(const char *path, int t, const zeroc__etab_t *x, float *w,
                                   float *st, uint64_t *covered_w, uint64_t *covered_s) {
  FILE *f = fopen(path, "rb");
  if (!f) return ZEROC_FAIL(ZEROC_ERR_IO, "embed load: cannot open %s: %s", path, strerror(errno));
  file_hdr_t h;
  zeroc_result_t r = ZEROC_OK;
  if (fread(&h, sizeof(h), 1, f) != 1 || h.magic != EMBED_FILE_MAGIC || h.version < 1 ||
      h.version > EMBED_FILE_VERSION) {
    r = ZEROC_FAIL(ZEROC_ERR_IO, "embed load: %s is not an embedding shard (short or bad header)",
                   path);
  } else if (h.table != t || h.rows != x->rows || h.dim != x->dim) {
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                   "embed load: %s holds table %d of %lld x %d; this table %d is %lld x %d", path,
                   h.table, (long long)h.rows, h.dim, t, (long long)x->rows, x->dim);
  } else if (h.r0 < 0 || h.r1 < h.r0 || h.r1 > h.rows || h.c0 < 0 || h.c1 < h.c0 || h.c1 > h.dim) {
    r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                   "embed load: %s: rows [%lld, %lld) columns [%d, %d) outside the %lld x %d "
                   "table",
                   path, (long long)h.r0, (long long)h.r1, h.c0, h.c1, (long long)h.rows, h.dim);
  } else {
    r = verify(f, path, &h);
  }
  int64_t a = x->r0 > h.r0 ? x->r0 : h.r0, b = x->r1 < h.r1 ? x->r1 : h.r1;
  int c0 = x->c0 > h.c0 ? x->c0 : h.c0, c1 = x->c1 < h.c1 ? x->c1 : h.c1;
  int64_t fcols = h.c1 - h.c0, scols = x->c1 - x->c0;
  long base = (long)sizeof(h);
  for (int64_t i = a; r == ZEROC_OK && i < b && c1 > c0; i++) {
    long off = base + (long)(((i - h.r0) * fcols + (c0 - h.c0)) * 4);
    size_t n = (size_t)(c1 - c0);
    float *dst = w + (i - x->r0) * scols + (c0 - x->c0);
    if (fseek(f, off, SEEK_SET) || fread(dst, 4, n, f) != n)
      r = ZEROC_FAIL(ZEROC_ERR_IO, "embed load: %s is short (row %lld)", path, (long long)i);
    else if (non_finite(dst, n) >= 0)
      r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "embed load: %s: table %d row %lld column %lld is %g: non-finite weights "
                     "refused",
                     path, t, (long long)i, (long long)(c0 + non_finite(dst, n)),
                     (double)dst[non_finite(dst, n)]);
    *covered_w += n;
  }
  if (r == ZEROC_OK && h.has_state && b > a && x->c1 > x->c0) {
    long off = base + (long)((h.r1 - h.r0) * fcols * 4 + (a - h.r0) * 4);
    size_t n = (size_t)(b - a);
    if (fseek(f, off, SEEK_SET) || fread(st + (a - x->r0), 4, n, f) != n)
      r = ZEROC_FAIL(ZEROC_ERR_IO, "embed load: %s is short (state)", path);
    else if (non_finite(st + (a - x->r0), n) >= 0)
      r = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "embed load: %s: table %d row %lld has a non-finite AdaGrad state: refused",
                     path, t, (long long)(a + non_finite(st + (a - x->r0), n)));
    *covered_s += n;
  }
  fclose(f);
  return r;
}

static zeroc_result_t load_table(zeroc_embed_t *e, const char *dir, int t) {
  zeroc__etab_t *x = &e->tab[t];
  uint64_t need_w = (uint64_t)(x->r1 - x->r0) * (uint64_t)(x->c1 - x->c0);
  if (!need_w) return ZEROC_OK;
  DIR *dp = opendir(dir);
  if (!dp)
    return ZEROC_FAIL(ZEROC_ERR_IO, "embed load: cannot open directory %s: %s", dir,
                      strerror(errno));
  zeroc__view_t vw, vs;
  float *w, *st;
  zeroc_result_t r = shard_view(e, x, ZEROC_VIEW_IN | ZEROC_VIEW_OUT, &vw, &vs, &w, &st);
  uint64_t cw = 0, cs = 0;
  char prefix[32], path[4096];
  snprintf(prefix, sizeof(prefix), "embed_t%d_r", t);
  for (struct dirent *d; r == ZEROC_OK && (d = readdir(dp));) {
    size_t n = strlen(d->d_name);
    if (strncmp(d->d_name, prefix, strlen(prefix)) || n < 4 || strcmp(d->d_name + n - 4, ".bin"))
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
    r = read_overlap(path, t, x, w, st, &cw, &cs);
  }
  closedir(dp);
  if (r == ZEROC_OK && (cw != need_w || cs != (uint64_t)(x->r1 - x->r0)))
    r = ZEROC_FAIL(ZEROC_ERR_IO,
                   "embed load: the shards of table %d in %s cover %llu of %llu weights and %llu "
                   "of %lld state rows of rows [%lld, %lld) columns [%d, %d); missing or "
                   "overlapping files",
                   t, dir, (unsigned long long)cw, (unsigned long long)need_w,
                   (unsigned long long)cs, (long long)(x->r1 - x->r0), (long long)x->r0,
                   (long long)x->r1, x->c0, x->c1);
  return end_views(&vw, &vs, r);
}

zeroc_result_t zeroc_embed_load(zeroc_embed_t *e, const char *dir) {
  if (!e || !dir)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_embed_load: NULL %s", e ? "dir" : "handle");
  zeroc_result_t r = ZEROC_OK;
  for (int t = 0; t < e->T && r == ZEROC_OK; t++) r = load_table(e, dir, t);
  return zeroc__ctx_ret(e->ctx, agree(e, r, "load"));
}
