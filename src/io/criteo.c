/*
 * io/criteo.c - the Criteo click-logs TSV format: label, 13 integer features,
 * 26 categorical features (hex), tab-separated, any feature may be empty.
 * The file is read whole at open (one pass, every field range-checked, a bad
 * line named by file and line); reading a batch then hashes each categorical
 * value into its table's rows.
 */
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/clicks_internal.h"
#include "io/criteo.h"
#include "io/files.h"

#define NF        (1 + ZEROC__CRITEO_DENSE + ZEROC__CRITEO_TABLES)
#define MAX_LINE  65536
#define DENSE_MAX 1e15 /* integer features above this are refused (the data set's are < 1e10) */

/* One field [s, e) of line `ln` of `path` at position f (0 label, 1..13 dense, 14..39 cat). */
static zeroc_result_t parse_field(const char *path, uint64_t ln, int f, const char *s,
                                  const char *e, float *label, float *dense, int64_t *cat) {
  size_t len = (size_t)(e - s);
  char buf[32];
  if (len >= sizeof buf)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s:%llu: field %d is %zu characters long", path,
                      (unsigned long long)ln, f + 1, len);
  memcpy(buf, s, len);
  buf[len] = 0;
  char *end = NULL;
  errno = 0;
  if (f == 0) {
    if (strcmp(buf, "0") && strcmp(buf, "1"))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s:%llu: label '%s': accepted 0 or 1", path,
                        (unsigned long long)ln, buf);
    *label = buf[0] == '1' ? 1.0f : 0.0f;
  } else if (f <= ZEROC__CRITEO_DENSE) {
    long long v = len ? strtoll(buf, &end, 10) : 0;
    if (len && (errno || *end || v > DENSE_MAX || v < -DENSE_MAX))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s:%llu: integer feature %d '%s': accepted an integer of magnitude at "
                        "most 1e15, or empty",
                        path, (unsigned long long)ln, f, buf);
    *dense = (float)log1p(v > 0 ? (double)v : 0.0); /* negatives (rare in Criteo) count as 0 */
  } else {
    unsigned long long v = len ? strtoull(buf, &end, 16) : 0;
    if (len && (errno || *end || len > 8 || buf[0] == '-' || buf[0] == '+'))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s:%llu: categorical feature %d '%s': accepted 1 to 8 hex digits, or "
                        "empty",
                        path, (unsigned long long)ln, f - ZEROC__CRITEO_DENSE, buf);
    *cat = len ? (int64_t)v : -1;
  }
  return ZEROC_OK;
}

/* Line `ln` (without its newline) into sample `i`. */
static zeroc_result_t parse_line(zeroc__clicks_t *c, const char *path, uint64_t ln, char *line,
                                 uint64_t i) {
  const char *s = line;
  for (int f = 0; f < NF; f++) {
    const char *e = strchr(s, '\t');
    if (!e) e = s + strlen(s);
    if (f < NF - 1 && !*e)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s:%llu: %d fields; accepted 40 tab-separated fields (label, 13 "
                        "integers, 26 hex categoricals)",
                        path, (unsigned long long)ln, f + 1);
    ZEROC_CHECK(parse_field(
        path, ln, f, s, e, &c->labels[i],
        &c->dense[i * ZEROC__CRITEO_DENSE + (uint64_t)(f ? f - 1 : 0)],
        &c->cats[i * ZEROC__CRITEO_TABLES +
                 (uint64_t)(f > ZEROC__CRITEO_DENSE ? f - 1 - ZEROC__CRITEO_DENSE : 0)]));
    if (f == NF - 1 && *e)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "%s:%llu: more than 40 fields; accepted 40 tab-separated fields", path,
                        (unsigned long long)ln);
    s = e + 1;
  }
  return ZEROC_OK;
}

static zeroc_result_t grow(zeroc__clicks_t *c, uint64_t cap) {
  float *l = realloc(c->labels, sizeof(float) * cap);
  if (l) c->labels = l;
  float *d = realloc(c->dense, sizeof(float) * cap * ZEROC__CRITEO_DENSE);
  if (d) c->dense = d;
  int64_t *k = realloc(c->cats, sizeof(int64_t) * cap * ZEROC__CRITEO_TABLES);
  if (k) c->cats = k;
  if (!l || !d || !k)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "Criteo samples (%llu)", (unsigned long long)cap);
  return ZEROC_OK;
}

static zeroc_result_t read_all(zeroc__clicks_t *c, const char *path, FILE *f) {
  char *line = NULL;
  size_t size = 0;
  zeroc_result_t r = ZEROC_OK;
  uint64_t cap = 0, ln = 0;
  ssize_t got;
  /* getline counts the bytes it read, NULs included (fgets and strlen would take a NUL
   * for the end of a line that then looks too long) */
  while (!r && (got = getline(&line, &size, f)) > 0) {
    ln++;
    size_t len = (size_t)got;
    const char *nul = memchr(line, 0, len);
    if (nul) {
      r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "%s:%llu: a NUL byte at column %llu: not a Criteo TSV file (tab-separated "
                     "text; a binary file?)",
                     path, (unsigned long long)ln, (unsigned long long)(nul - line + 1));
      break;
    }
    if (line[len - 1] == '\n') line[--len] = 0;
    if (len > MAX_LINE - 2) {
      r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s:%llu: line of %llu bytes, longer than %d", path,
                     (unsigned long long)ln, (unsigned long long)len, MAX_LINE - 2);
      break;
    }
    if (len && line[len - 1] == '\r') line[--len] = 0;
    if (c->n == cap) r = grow(c, cap = cap ? 2 * cap : 1024);
    if (!r) r = parse_line(c, path, ln, line, c->n);
    if (!r) c->n++;
  }
  if (!r && (ferror(f) || !feof(f))) /* a read error, or getline out of memory */
    r = ZEROC_FAIL(ZEROC_ERR_IO, "%s:%llu: read failed: %s", path, (unsigned long long)ln + 1,
                   strerror(errno));
  if (!r && c->n == 0)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: no samples (an empty Criteo TSV file)", path);
  free(line);
  return r;
}

zeroc_result_t zeroc__clicks_criteo(const char *path, const zeroc__click_shape_t *s,
                                    zeroc__clicks_t **out) {
  if (s->dense != ZEROC__CRITEO_DENSE || s->tables != ZEROC__CRITEO_TABLES || s->hot != 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: Criteo TSV data has 13 dense features and 26 single-id tables, the "
                      "model %d dense, %d tables, %d ids per bag (use --model dlrm-mlperf, or "
                      "--dense 13 --tables 26)",
                      path, s->dense, s->tables, s->hot);
  zeroc__clicks_t *c = calloc(1, sizeof *c);
  if (!c) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "click source");
  c->T = s->tables, c->ndense = s->dense, c->hot = 1;
  memcpy(c->rows, s->rows, sizeof(int64_t) * (size_t)s->tables);
  /* a regular file only: a FIFO would block the open (and the read) with no writer, a
   * directory or device is no TSV; the shared open refuses them by name without blocking */
  int fd = -1;
  struct stat st;
  zeroc_result_t r = zeroc__open_regular(path, "Criteo TSV", &fd, &st);
  FILE *f = NULL;
  if (!r && !(f = fdopen(fd, "r"))) {
    r = ZEROC_FAIL(ZEROC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    close(fd);
  }
  if (!r) r = read_all(c, path, f);
  if (f) fclose(f);
  if (r) {
    zeroc__clicks_free(c);
    return r;
  }
  *out = c;
  return ZEROC_OK;
}

zeroc_result_t zeroc__criteo_read(const zeroc__clicks_t *c, uint64_t first, int B,
                                  zeroc__click_batch_t *b) {
  for (int j = 0; j < B; j++) {
    uint64_t i = (first + (uint64_t)j) % c->n;
    b->labels[j] = c->labels[i];
    b->probs[j] = NAN;
    memcpy(b->dense + (size_t)j * ZEROC__CRITEO_DENSE, c->dense + i * ZEROC__CRITEO_DENSE,
           sizeof(float) * ZEROC__CRITEO_DENSE);
    for (int t = 0; t < ZEROC__CRITEO_TABLES; t++) {
      int64_t v = c->cats[i * ZEROC__CRITEO_TABLES + (uint64_t)t];
      /* a missing value hashes as 2^32 (outside the hex range): a bucket of its own */
      uint64_t h = zeroc__hash2((uint64_t)t + 1, v < 0 ? (1ULL << 32) : (uint64_t)v);
      b->lengths[(size_t)t * B + j] = 1;
      b->ids[(size_t)t * B + j] = (int64_t)(h % (uint64_t)c->rows[t]);
    }
  }
  return ZEROC_OK;
}
