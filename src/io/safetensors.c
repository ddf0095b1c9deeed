/*
 * io/safetensors.c - the strict safetensors reader (buffer or mmap'd file)
 * and the streaming writer (header first, then tensor bytes, through an
 * atomic temporary file).
 */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"
#include "zeroc/types.h"

/* Tensor bytes are copied as they are: the format is little-endian and so is
 * every host zeroc targets. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors I/O assumes a little-endian host");

static const struct {
  const char *name;
  size_t size;
} dtypes[ZEROC_ST_DTYPE_COUNT] = {
    [ZEROC_ST_BOOL] = {"BOOL", 1},       [ZEROC_ST_U8] = {"U8", 1},
    [ZEROC_ST_I8] = {"I8", 1},           [ZEROC_ST_F8_E4M3] = {"F8_E4M3", 1},
    [ZEROC_ST_F8_E5M2] = {"F8_E5M2", 1}, [ZEROC_ST_I16] = {"I16", 2},
    [ZEROC_ST_U16] = {"U16", 2},         [ZEROC_ST_F16] = {"F16", 2},
    [ZEROC_ST_BF16] = {"BF16", 2},       [ZEROC_ST_I32] = {"I32", 4},
    [ZEROC_ST_U32] = {"U32", 4},         [ZEROC_ST_F32] = {"F32", 4},
    [ZEROC_ST_I64] = {"I64", 8},         [ZEROC_ST_U64] = {"U64", 8},
    [ZEROC_ST_F64] = {"F64", 8},
};

const char *zeroc__st_dtype_name(zeroc__st_dtype_t dt) {
  return (unsigned)dt < ZEROC_ST_DTYPE_COUNT ? dtypes[dt].name : "?";
}

size_t zeroc__st_dtype_size(zeroc__st_dtype_t dt) {
  return (unsigned)dt < ZEROC_ST_DTYPE_COUNT ? dtypes[dt].size : 0;
}

static int dtype_of(const char *s, size_t n, zeroc__st_dtype_t *out) {
  for (int i = 0; i < ZEROC_ST_DTYPE_COUNT; i++)
    if (strlen(dtypes[i].name) == n && !memcmp(dtypes[i].name, s, n)) {
      *out = (zeroc__st_dtype_t)i;
      return 1;
    }
  return 0;
}

/* "[768, 2304]" for messages. */
static const char *shape_str(const uint64_t *shape, int ndim, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* ---- reader ------------------------------------------------------------------- */

struct zeroc__st {
  zeroc__json_doc_t *doc;
  zeroc__st_tensor_t *tensors; /* sorted by begin */
  size_t n;
  const zeroc__json_t *meta; /* the __metadata__ object, or NULL */
  void *map;                 /* the mapping when opened from a file */
  size_t map_len;
};

static int by_begin(const void *a, const void *b) {
  const zeroc__st_tensor_t *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Reads a JSON integer >= 0 into *out, or fails naming `field` of `name`. */
static zeroc_result_t get_u64(const zeroc__json_t *v, const char *what, const char *name,
                              const char *field, uint64_t *out) {
  if (v->type != ZEROC_JSON_NUMBER || !v->u.num.is_int || v->u.num.i < 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s': %s holds a %s at header byte %zu; a non-negative "
                      "integer is required",
                      what, name, field,
                      v->type == ZEROC_JSON_NUMBER ? "non-integer or negative number"
                                                   : zeroc__json_type_name(v->type),
                      v->offset);
  *out = (uint64_t)v->u.num.i;
  return ZEROC_OK;
}

/* Fills `t` from the header entry `v` of tensor `name`. */
static zeroc_result_t parse_entry(const char *what, const char *name, const zeroc__json_t *v,
                                  uint64_t data_len, zeroc__st_tensor_t *t) {
  char sh[256];
  if (v->type != ZEROC_JSON_OBJECT)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' is a %s at header byte %zu; an object with dtype, shape "
                      "and data_offsets is required",
                      what, name, zeroc__json_type_name(v->type), v->offset);
  const zeroc__json_t *dt = NULL, *shape = NULL, *offs = NULL;
  for (size_t i = 0; i < v->u.obj.n; i++) {
    const zeroc__json_member_t *m = &v->u.obj.members[i];
    if (!strcmp(m->key, "dtype"))
      dt = &m->value;
    else if (!strcmp(m->key, "shape"))
      shape = &m->value;
    else if (!strcmp(m->key, "data_offsets"))
      offs = &m->value;
    else
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                        "%s: tensor '%s' has unknown field \"%s\" at header byte %zu; accepted: "
                        "dtype, shape, data_offsets",
                        what, name, m->key, m->key_offset);
  }
  if (!dt || !shape || !offs)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: tensor '%s' lacks \"%s\"", what, name,
                      !dt      ? "dtype"
                      : !shape ? "shape"
                               : "data_offsets");
  if (dt->type != ZEROC_JSON_STRING || !dtype_of(dt->u.str.s, dt->u.str.len, &t->dtype))
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' has dtype %s%.*s%s at header byte %zu; accepted: BOOL, U8, "
                      "I8, F8_E4M3, F8_E5M2, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64",
                      what, name, dt->type == ZEROC_JSON_STRING ? "\"" : "(a ",
                      dt->type == ZEROC_JSON_STRING ? (int)dt->u.str.len : 0,
                      dt->type == ZEROC_JSON_STRING ? dt->u.str.s : "",
                      dt->type == ZEROC_JSON_STRING ? "\"" : "non-string)", dt->offset);
  if (shape->type != ZEROC_JSON_ARRAY || shape->u.arr.n > ZEROC_ST_MAX_DIMS)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' shape at header byte %zu must be an array of at most %d "
                      "integers",
                      what, name, shape->offset, ZEROC_ST_MAX_DIMS);
  t->ndim = (int)shape->u.arr.n;
  t->numel = 1;
  for (int i = 0; i < t->ndim; i++) {
    ZEROC_CHECK(get_u64(&shape->u.arr.items[i], what, name, "shape", &t->shape[i]));
    if (__builtin_mul_overflow(t->numel, t->shape[i], &t->numel))
      return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: tensor '%s' shape %s overflows 64 bits", what, name,
                        shape_str(t->shape, i + 1, sh, sizeof sh));
  }
  if (offs->type != ZEROC_JSON_ARRAY || offs->u.arr.n != 2)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' data_offsets at header byte %zu must be [begin, end]", what,
                      name, offs->offset);
  ZEROC_CHECK(get_u64(&offs->u.arr.items[0], what, name, "data_offsets", &t->begin));
  ZEROC_CHECK(get_u64(&offs->u.arr.items[1], what, name, "data_offsets", &t->end));
  if (t->end < t->begin)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' data_offsets [%llu, %llu) end before they begin", what, name,
                      (unsigned long long)t->begin, (unsigned long long)t->end);
  if (t->end > data_len)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' data_offsets [%llu, %llu) run past the end of the data "
                      "section (%llu bytes)",
                      what, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                      (unsigned long long)data_len);
  uint64_t need;
  if (__builtin_mul_overflow(t->numel, (uint64_t)dtypes[t->dtype].size, &need) ||
      need != t->end - t->begin)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: tensor '%s' data_offsets [%llu, %llu) hold %llu bytes, but shape %s of "
                      "%s needs %llu x %zu bytes",
                      what, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                      (unsigned long long)(t->end - t->begin),
                      shape_str(t->shape, t->ndim, sh, sizeof sh), dtypes[t->dtype].name,
                      (unsigned long long)t->numel, dtypes[t->dtype].size);
  return ZEROC_OK;
}

zeroc_result_t zeroc__st_parse(const void *buf, size_t len, const char *what, zeroc__st_t **out) {
  zeroc_result_t res = ZEROC_OK;
  const unsigned char *b = buf;
  char hwhat[512];
  *out = NULL;
  if (!what) what = "safetensors input";
  zeroc__st_t *st = calloc(1, sizeof *st);
  if (!st) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: out of host memory", what);
  if (!b || len < 8) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "%s: %zu bytes is too short: a safetensors file starts with an 8-byte "
                     "header length",
                     what, b ? len : 0);
    goto fail;
  }
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
  if (hlen > ZEROC_ST_MAX_HEADER) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "%s: header length %llu is larger than the %llu-byte limit (not a "
                     "safetensors file, or a corrupt one)",
                     what, (unsigned long long)hlen, ZEROC_ST_MAX_HEADER);
    goto fail;
  }
  if (hlen > len - 8) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "%s: header length %llu runs past the end of the input (%zu bytes, so at "
                     "most %zu; truncated file?)",
                     what, (unsigned long long)hlen, len, len - 8);
    goto fail;
  }
  if (hlen < 2 || b[8] != '{') {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "%s: the header (%llu bytes at byte 8) must be a JSON object starting with "
                     "'{'",
                     what, (unsigned long long)hlen);
    goto fail;
  }
  uint64_t data_len = len - 8 - hlen;
  snprintf(hwhat, sizeof hwhat, "%s: header (byte offsets from its start at file byte 8)", what);
  ZEROC_TRY(zeroc__json_parse((const char *)b + 8, (size_t)hlen, hwhat, &st->doc));
  const zeroc__json_t *root = zeroc__json_root(st->doc);
  if (root->type != ZEROC_JSON_OBJECT) { /* unreachable after the '{' check; kept as a guard */
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: the header is not a JSON object", what);
    goto fail;
  }
  st->tensors = calloc(root->u.obj.n ? root->u.obj.n : 1, sizeof *st->tensors);
  if (!st->tensors) {
    res =
        ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s: out of host memory for %zu tensors", what, root->u.obj.n);
    goto fail;
  }
  for (size_t i = 0; i < root->u.obj.n; i++) {
    const zeroc__json_member_t *m = &root->u.obj.members[i];
    if (!strcmp(m->key, "__metadata__") && m->key_len == strlen("__metadata__")) {
      if (m->value.type != ZEROC_JSON_OBJECT) {
        res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                         "%s: __metadata__ is a %s; an object of strings is required", what,
                         zeroc__json_type_name(m->value.type));
        goto fail;
      }
      for (size_t k = 0; k < m->value.u.obj.n; k++)
        if (m->value.u.obj.members[k].value.type != ZEROC_JSON_STRING) {
          res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                           "%s: __metadata__ \"%s\" is a %s; only string values are allowed", what,
                           m->value.u.obj.members[k].key,
                           zeroc__json_type_name(m->value.u.obj.members[k].value.type));
          goto fail;
        }
      st->meta = &m->value;
      continue;
    }
    if (m->key_len != strlen(m->key)) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: a tensor name at header byte %zu contains a NUL",
                       what, m->key_offset);
      goto fail;
    }
    zeroc__st_tensor_t *t = &st->tensors[st->n++];
    t->name = m->key;
    ZEROC_TRY(parse_entry(what, m->key, &m->value, data_len, t));
  }
  qsort(st->tensors, st->n, sizeof *st->tensors, by_begin);
  /* The ranges must tile [0, data_len): each begins where the previous ended.
   * This rejects overlaps (two names for the same bytes) and holes (bytes
   * no tensor owns, where a second file format could hide). */
  uint64_t expect = 0;
  const zeroc__st_tensor_t *prev = NULL;
  for (size_t i = 0; i < st->n; i++) {
    const zeroc__st_tensor_t *t = &st->tensors[i];
    if (t->begin < expect) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                       "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", what,
                       prev->name, (unsigned long long)prev->begin, (unsigned long long)prev->end,
                       t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
      goto fail;
    }
    if (t->begin > expect) {
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                       "%s: data bytes [%llu, %llu) before tensor '%s' belong to no tensor (the "
                       "format allows no gaps)",
                       what, (unsigned long long)expect, (unsigned long long)t->begin, t->name);
      goto fail;
    }
    expect = t->end;
    if (t->end > t->begin || !prev) prev = t;
    st->tensors[i].data = b + 8 + hlen + t->begin;
  }
  if (expect != data_len) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "%s: the last %llu data bytes [%llu, %llu) belong to no tensor (the format "
                     "allows no trailing data)",
                     what, (unsigned long long)(data_len - expect), (unsigned long long)expect,
                     (unsigned long long)data_len);
    goto fail;
  }
  *out = st;
  return ZEROC_OK;
fail:
  zeroc__st_close(st);
  return res;
}

zeroc_result_t zeroc__st_open(const char *path, zeroc__st_t **out) {
  zeroc_result_t res = ZEROC_OK;
  char what[512];
  void *map = NULL;
  size_t len = 0;
  unsigned char small[8];
  struct stat sb;
  *out = NULL;
  snprintf(what, sizeof what, "safetensors '%s'", path);
  int fd;
  ZEROC_CHECK(zeroc__open_regular(path, "safetensors file", &fd, &sb));
  len = (size_t)sb.st_size;
  if (len < sizeof small) {
    /* too short to map usefully; let the parser say what is wrong */
    ssize_t got = pread(fd, small, len, 0);
    res = zeroc__st_parse(small, got > 0 ? (size_t)got : 0, what, out);
    goto fail;
  }
  map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    map = NULL;
    res = ZEROC_FAIL(ZEROC_ERR_IO, "mmap('%s', %zu bytes): %s", path, len, strerror(errno));
    goto fail;
  }
  ZEROC_TRY(zeroc__st_parse(map, len, what, out));
  (*out)->map = map;
  (*out)->map_len = len;
  close(fd);
  return ZEROC_OK;
fail:
  if (map) munmap(map, len);
  close(fd);
  return res;
}

void zeroc__st_close(zeroc__st_t *st) {
  if (!st) return;
  zeroc__json_free(st->doc);
  free(st->tensors);
  if (st->map) munmap(st->map, st->map_len);
  free(st);
}

size_t zeroc__st_count(const zeroc__st_t *st) { return st->n; }

const zeroc__st_tensor_t *zeroc__st_tensor(const zeroc__st_t *st, size_t i) {
  return i < st->n ? &st->tensors[i] : NULL;
}

const zeroc__st_tensor_t *zeroc__st_find(const zeroc__st_t *st, const char *name) {
  for (size_t i = 0; i < st->n; i++)
    if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
  return NULL;
}

const char *zeroc__st_metadata(const zeroc__st_t *st, const char *key) {
  const zeroc__json_t *v = zeroc__json_get(st->meta, key);
  return v ? v->u.str.s : NULL;
}

/* IEEE half to float, exact (every half is a float). */
static float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
  } else if (exp) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man) { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      man <<= 1;
    } while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  } else {
    bits = sign;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

zeroc_result_t zeroc__st_read_f32(const zeroc__st_tensor_t *t, float *out, size_t n) {
  char sh[256];
  if (n != t->numel)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors tensor '%s' has shape %s (%llu elements); the caller expects "
                      "%zu",
                      t->name, shape_str(t->shape, t->ndim, sh, sizeof sh),
                      (unsigned long long)t->numel, n);
  const unsigned char *p = t->data;
  switch (t->dtype) {
  case ZEROC_ST_F32:
    memcpy(out, p, n * 4);
    break;
  case ZEROC_ST_BF16:
    for (size_t i = 0; i < n; i++)
      out[i] = zeroc_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    break;
  case ZEROC_ST_F16:
    for (size_t i = 0; i < n; i++) out[i] = half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    break;
  default:
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors tensor '%s' has dtype %s; readable as fp32: F32, BF16, F16",
                      t->name, dtypes[t->dtype].name);
  }
  return ZEROC_OK;
}

/* ---- writer ------------------------------------------------------------------- */

typedef struct wtensor {
  char *name;
  zeroc__st_dtype_t dtype;
  int ndim;
  uint64_t shape[ZEROC_ST_MAX_DIMS];
  uint64_t bytes;
} wtensor_t;

struct zeroc__st_writer {
  zeroc__afile_t f;
  wtensor_t *t;
  size_t n, cap;
  char **meta; /* key, value, key, value, ... */
  size_t nmeta, capmeta;
  int started, finished;
  uint64_t total;   /* declared data bytes */
  uint64_t written; /* data bytes written so far */
  size_t cur;       /* the tensor that holds byte `written` */
  uint64_t cur_begin;
};

zeroc_result_t zeroc__st_writer_create(const char *path, zeroc__st_writer_t **out) {
  zeroc_result_t res = ZEROC_OK;
  *out = NULL;
  zeroc__st_writer_t *w = calloc(1, sizeof *w);
  if (!w)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "safetensors writer for '%s': out of host memory", path);
  w->f.fd = -1;
  ZEROC_TRY(zeroc__afile_open(&w->f, path));
  *out = w;
  return ZEROC_OK;
fail:
  free(w);
  return res;
}

static zeroc_result_t writer_state(zeroc__st_writer_t *w, const char *call) {
  if (w->started || w->finished)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer '%s': %s after tensor data was written; declare every "
                      "tensor and metadata pair first",
                      w->f.path ? w->f.path : "?", call);
  return ZEROC_OK;
}

zeroc_result_t zeroc__st_writer_metadata(zeroc__st_writer_t *w, const char *key,
                                         const char *value) {
  ZEROC_CHECK(writer_state(w, "metadata"));
  for (size_t i = 0; i < w->nmeta; i++)
    if (!strcmp(w->meta[2 * i], key))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "safetensors writer '%s': metadata key '%s' given twice", w->f.path, key);
  if (w->nmeta == w->capmeta) {
    size_t cap = w->capmeta ? 2 * w->capmeta : 8;
    char **nm = realloc(w->meta, 2 * cap * sizeof *nm);
    if (!nm) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "safetensors writer: out of host memory");
    w->meta = nm;
    w->capmeta = cap;
  }
  char *k = strdup(key), *v = strdup(value);
  if (!k || !v) {
    free(k);
    free(v);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "safetensors writer: out of host memory");
  }
  w->meta[2 * w->nmeta] = k;
  w->meta[2 * w->nmeta + 1] = v;
  w->nmeta++;
  return ZEROC_OK;
}

zeroc_result_t zeroc__st_writer_add(zeroc__st_writer_t *w, const char *name,
                                    zeroc__st_dtype_t dtype, int ndim, const uint64_t *shape) {
  char sh[256];
  ZEROC_CHECK(writer_state(w, "add"));
  if ((unsigned)dtype >= ZEROC_ST_DTYPE_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer: tensor '%s' dtype %d unknown",
                      name, (int)dtype);
  if (ndim < 0 || ndim > ZEROC_ST_MAX_DIMS)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer: tensor '%s' ndim %d; accepted 0..%d", name, ndim,
                      ZEROC_ST_MAX_DIMS);
  if (!strcmp(name, "__metadata__"))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer: '__metadata__' is reserved and cannot name a tensor");
  for (size_t i = 0; i < w->n; i++)
    if (!strcmp(w->t[i].name, name))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer '%s': tensor '%s' added twice",
                        w->f.path, name);
  uint64_t numel = 1, bytes;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(numel, shape[i], &numel))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer: tensor '%s' shape %s overflows",
                        name, shape_str(shape, ndim, sh, sizeof sh));
  if (__builtin_mul_overflow(numel, (uint64_t)dtypes[dtype].size, &bytes) ||
      __builtin_add_overflow(w->total, bytes, &w->total))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer: tensor '%s' shape %s overflows",
                      name, shape_str(shape, ndim, sh, sizeof sh));
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 32;
    wtensor_t *nt = realloc(w->t, cap * sizeof *nt);
    if (!nt) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "safetensors writer: out of host memory");
    w->t = nt;
    w->cap = cap;
  }
  wtensor_t *t = &w->t[w->n];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  if (!t->name) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "safetensors writer: out of host memory");
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->bytes = bytes;
  w->n++;
  return ZEROC_OK;
}

/* Builds and writes the length prefix and the header, padded with spaces so
 * the data starts on an 8-byte boundary of the file. */
static zeroc_result_t write_header(zeroc__st_writer_t *w) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__jw_t jw;
  const char *text;
  size_t len;
  uint64_t off = 0;
  zeroc__jw_init(&jw, 0);
  zeroc__jw_object_begin(&jw);
  if (w->nmeta) {
    zeroc__jw_key(&jw, "__metadata__");
    zeroc__jw_object_begin(&jw);
    for (size_t i = 0; i < w->nmeta; i++) {
      zeroc__jw_key(&jw, w->meta[2 * i]);
      zeroc__jw_string(&jw, w->meta[2 * i + 1]);
    }
    zeroc__jw_object_end(&jw);
  }
  for (size_t i = 0; i < w->n; i++) {
    const wtensor_t *t = &w->t[i];
    zeroc__jw_key(&jw, t->name);
    zeroc__jw_object_begin(&jw);
    zeroc__jw_key(&jw, "dtype");
    zeroc__jw_string(&jw, dtypes[t->dtype].name);
    zeroc__jw_key(&jw, "shape");
    zeroc__jw_array_begin(&jw);
    for (int d = 0; d < t->ndim; d++) zeroc__jw_uint(&jw, t->shape[d]);
    zeroc__jw_array_end(&jw);
    zeroc__jw_key(&jw, "data_offsets");
    zeroc__jw_array_begin(&jw);
    zeroc__jw_uint(&jw, off);
    zeroc__jw_uint(&jw, off + t->bytes);
    zeroc__jw_array_end(&jw);
    zeroc__jw_object_end(&jw);
    off += t->bytes;
  }
  zeroc__jw_object_end(&jw);
  ZEROC_TRY(zeroc__jw_finish(&jw, &text, &len));
  size_t padded = (len + 7) & ~(size_t)7; /* 8 + padded is a multiple of 8 */
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  ZEROC_TRY(zeroc__afile_write(&w->f, prefix, 8));
  ZEROC_TRY(zeroc__afile_write(&w->f, text, len));
  ZEROC_TRY(zeroc__afile_write(&w->f, "        ", padded - len));
  w->started = 1;
  w->cur = 0;
  w->cur_begin = 0;
fail:
  zeroc__jw_free(&jw);
  return res;
}

/* Moves `cur` past tensors that are already complete (and empty ones). */
static void advance(zeroc__st_writer_t *w) {
  while (w->cur < w->n && w->written >= w->cur_begin + w->t[w->cur].bytes) {
    w->cur_begin += w->t[w->cur].bytes;
    w->cur++;
  }
}

zeroc_result_t zeroc__st_writer_write(zeroc__st_writer_t *w, const void *bytes, size_t n) {
  if (w->finished)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer: write after finish");
  if (!w->started) ZEROC_CHECK(write_header(w));
  if (n > w->total - w->written)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer '%s': writing %zu bytes at data byte %llu passes the "
                      "%llu bytes the declared tensors hold",
                      w->f.path, n, (unsigned long long)w->written, (unsigned long long)w->total);
  ZEROC_CHECK(zeroc__afile_write(&w->f, bytes, n));
  w->written += n;
  advance(w);
  return ZEROC_OK;
}

zeroc_result_t zeroc__st_writer_write_f32(zeroc__st_writer_t *w, const float *x, size_t n) {
  if (w->finished)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "safetensors writer: write after finish");
  if (!w->started) ZEROC_CHECK(write_header(w));
  advance(w);
  if (w->cur >= w->n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer '%s': write_f32 of %zu values after every declared "
                      "tensor is complete",
                      w->f.path, n);
  const wtensor_t *t = &w->t[w->cur];
  size_t es = dtypes[t->dtype].size;
  uint64_t done = w->written - w->cur_begin;
  if ((t->dtype != ZEROC_ST_F32 && t->dtype != ZEROC_ST_BF16) || done % es ||
      (uint64_t)n > (t->bytes - done) / es)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer '%s': write_f32 of %zu values into tensor '%s' (%s, "
                      "%llu of %llu bytes written): accepted only for F32/BF16 tensors and "
                      "within one tensor",
                      w->f.path, n, t->name, dtypes[t->dtype].name, (unsigned long long)done,
                      (unsigned long long)t->bytes);
  if (t->dtype == ZEROC_ST_F32) return zeroc__st_writer_write(w, x, n * 4);
  uint16_t buf[4096];
  for (size_t i = 0; i < n;) {
    size_t k = n - i < 4096 ? n - i : 4096;
    for (size_t j = 0; j < k; j++) buf[j] = zeroc_f32_to_bf16(x[i + j]);
    ZEROC_CHECK(zeroc__st_writer_write(w, buf, k * 2));
    i += k;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__st_writer_finish(zeroc__st_writer_t *w) {
  if (w->finished) return ZEROC_OK;
  if (!w->started) ZEROC_CHECK(write_header(w));
  advance(w);
  if (w->written != w->total)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "safetensors writer '%s': finish with tensor '%s' incomplete (%llu of "
                      "%llu data bytes written)",
                      w->f.path, w->t[w->cur].name, (unsigned long long)w->written,
                      (unsigned long long)w->total);
  ZEROC_CHECK(zeroc__afile_commit(&w->f));
  w->finished = 1;
  return ZEROC_OK;
}

void zeroc__st_writer_destroy(zeroc__st_writer_t *w) {
  if (!w) return;
  zeroc__afile_abort(&w->f);
  for (size_t i = 0; i < w->n; i++) free(w->t[i].name);
  for (size_t i = 0; i < 2 * w->nmeta; i++) free(w->meta[i]);
  free(w->t);
  free(w->meta);
  free(w);
}
