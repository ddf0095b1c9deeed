/*
 * shard/flat.c - flat layout of a unit's parameters and their initialisation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "shard/flat.h"

uint64_t zeroc_param_numel(const zeroc_param_desc_t *p) {
  if (p->ndim < 1 || p->ndim > ZEROC_MAX_DIMS) return 0;
  uint64_t n = 1;
  for (int d = 0; d < p->ndim; d++) {
    if (p->shape[d] < 1) return 0;
    n *= (uint64_t)p->shape[d];
  }
  return n;
}

zeroc_result_t zeroc__flat_layout(const zeroc_layer_t *layer, int unit, int shard_size,
                                  int shard_rank, zeroc__flat_t *out) {
  memset(out, 0, sizeof *out);
  const char *name = layer->name ? layer->name : "?";
  if (layer->nparams < 1 || !layer->params)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "unit %d ('%s') declares no parameters; every unit needs at least one", unit,
                      name);
  out->p = calloc((size_t)layer->nparams, sizeof *out->p);
  if (!out->p) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "flat layout of unit %d", unit);
  out->n = layer->nparams;
  uint64_t off = 0;
  for (int i = 0; i < layer->nparams; i++) {
    const zeroc_param_desc_t *pd = &layer->params[i];
    uint64_t numel = zeroc_param_numel(pd);
    if (!numel) {
      zeroc__flat_free(out);
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "unit %d ('%s') parameter %d ('%s') has zero size or a bad shape (ndim "
                        "%d); every dimension must be >= 1, ndim 1..%d",
                        unit, name, i, pd->name ? pd->name : "?", pd->ndim, ZEROC_MAX_DIMS);
    }
    off = (off + ZEROC_FLAT_ALIGN - 1) / ZEROC_FLAT_ALIGN * ZEROC_FLAT_ALIGN;
    out->p[i].off = off;
    out->p[i].numel = numel;
    out->p[i].flags = pd->flags;
    off += numel;
    out->numel += numel;
  }
  uint64_t q = (uint64_t)ZEROC_FLAT_ALIGN * (uint64_t)shard_size;
  out->N = (off + q - 1) / q * q;
  out->S = out->N / (uint64_t)shard_size;
  out->shard_off = (uint64_t)shard_rank * out->S;
  for (int i = 0; i < out->n; i++) {
    uint64_t a = out->p[i].off, b = a + out->p[i].numel;
    uint64_t lo = a > out->shard_off ? a : out->shard_off;
    uint64_t hi = b < out->shard_off + out->S ? b : out->shard_off + out->S;
    out->p[i].lo = lo < hi ? lo : 0;
    out->p[i].hi = lo < hi ? hi : 0;
  }
  return ZEROC_OK;
}

void zeroc__flat_free(zeroc__flat_t *f) {
  free(f->p);
  f->p = NULL;
}

/* ---- counter-based random numbers ------------------------------------------- */

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The bits at `index` are mix(key + index * K + 1) with key = mix(seed * K' +
 * stream): the key is computed once per fill, not twice per element. */
static uint64_t rng_key(uint64_t seed, uint64_t stream) {
  return mix(seed * 0x9e3779b97f4a7c15ULL + stream);
}

static inline uint64_t rng_bits(uint64_t key, uint64_t index) {
  return mix(key + index * 0xd1b54a32d192ed03ULL + 1);
}

float zeroc_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return (float)((double)(rng_bits(rng_key(seed, stream), index) >> 40) * (1.0 / 16777216.0));
}

/* Box-Muller on two independent draws of the same counter. Its values are
 * part of every stored reference (tests, checkpoints, the GPT-2 comparison):
 * the arithmetic (double log, sqrt, cos) must stay exactly this. */
static inline float normal_at(uint64_t key, uint64_t index) {
  uint64_t a = rng_bits(key, 2 * index), b = rng_bits(key, 2 * index + 1);
  double u1 = ((double)(a >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

float zeroc_rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  return normal_at(rng_key(seed, stream), index);
}

/* Elements [first, first+n) of parameter pd into d. */
static void fill_range(const zeroc_param_desc_t *pd, uint64_t stream, uint64_t seed, float *d,
                       uint64_t first, size_t n) {
  uint64_t key = rng_key(seed, stream);
  switch (pd->init) {
  case ZEROC_INIT_ZEROS:
    break; /* the shard was zeroed */
  case ZEROC_INIT_ONES:
    for (size_t j = 0; j < n; j++) d[j] = 1.0f;
    break;
  case ZEROC_INIT_UNIFORM:
    for (size_t j = 0; j < n; j++)
      d[j] = pd->init_scale *
             (2.0f * (float)((double)(rng_bits(key, first + j) >> 40) * (1.0 / 16777216.0)) - 1.0f);
    break;
  case ZEROC_INIT_CUSTOM:
    if (pd->init_fn) pd->init_fn(d, first, n, pd, seed, pd->init_user);
    break;
  case ZEROC_INIT_NORMAL:
  default:
    for (size_t j = 0; j < n; j++) d[j] = pd->init_scale * normal_at(key, first + j);
    break;
  }
}

/* Chunks of a fill, spread over the OpenMP threads the context sized (a 1.3B
 * model's ~1.3e9 draws take about a minute on one core). Every value depends
 * only on its element's index, so any thread count gives the same bits. */
#define INIT_CHUNK ((size_t)1 << 16)

void zeroc__flat_init_shard(const zeroc_layer_t *layer, int unit, const zeroc__flat_t *f,
                            uint64_t seed, float *dst) {
  /* zeroed in chunks too: the first touch of a fresh buffer's pages is a
   * good part of the time */
  size_t nz = (size_t)((f->S + INIT_CHUNK - 1) / INIT_CHUNK);
#pragma omp parallel for if (nz > 1) schedule(static)
  for (size_t c = 0; c < nz; c++) {
    size_t a = c * INIT_CHUNK, n = f->S - a < INIT_CHUNK ? (size_t)(f->S - a) : INIT_CHUNK;
    memset(dst + a, 0, sizeof(float) * n);
  }
  for (int i = 0; i < f->n; i++) {
    const zeroc__flat_param_t *fp = &f->p[i];
    if (fp->lo == fp->hi) continue;
    const zeroc_param_desc_t *pd = &layer->params[i];
    if (pd->init == ZEROC_INIT_ZEROS) continue;
    uint64_t first = fp->lo - fp->off; /* element index within the parameter */
    size_t n = (size_t)(fp->hi - fp->lo);
    float *d = dst + (fp->lo - f->shard_off);
    uint64_t stream = pd->init_stream ? pd->init_stream : ((uint64_t)unit << 16) + (uint64_t)i + 1;
    size_t nc = (n + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for if (nc > 1) schedule(static)
    for (size_t c = 0; c < nc; c++) {
      size_t a = c * INIT_CHUNK;
      fill_range(pd, stream, seed, d + a, first + a, n - a < INIT_CHUNK ? n - a : INIT_CHUNK);
    }
  }
}
