/*
 * tp/split.c - local <-> unsplit index arithmetic of tensor-parallel
 * parameters. A local index is decomposed as (outer, x, inner) around the
 * split dimension; x picks a group and a position inside this rank's slice
 * of that group.
 */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "tp/split.h"

void zeroc__split_of(const zeroc_param_desc_t *p, zeroc__split_t *out) {
  memset(out, 0, sizeof *out);
  out->ndim = p->ndim;
  if (p->tp_groups <= 0) {
    for (int d = 0; d < p->ndim && d < ZEROC_MAX_DIMS; d++) out->full[d] = p->shape[d];
    out->size = 1;
    return;
  }
  for (int d = 0; d < p->ndim && d < ZEROC_MAX_DIMS; d++) out->full[d] = p->tp_full[d];
  out->groups = p->tp_groups;
  out->dim = p->tp_dim;
  out->size = p->tp_size;
}

zeroc_result_t zeroc__split_check(const zeroc_param_desc_t *p) {
  const char *name = p->name ? p->name : "?";
  if (p->tp_groups <= 0) return ZEROC_OK;
  if (p->tp_size < 1 || p->tp_rank < 0 || p->tp_rank >= p->tp_size || p->tp_dim < 0 ||
      p->tp_dim >= p->ndim)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "parameter '%s': tp rank %d of %d along dimension %d of %d: accepted 0 <= "
                      "rank < size, 0 <= dim < ndim",
                      name, p->tp_rank, p->tp_size, p->tp_dim, p->ndim);
  for (int d = 0; d < p->ndim; d++) {
    int64_t want = d == p->tp_dim ? p->tp_full[d] / p->tp_size : p->tp_full[d];
    int even = d != p->tp_dim || p->tp_full[d] % ((int64_t)p->tp_size * p->tp_groups) == 0;
    if (!even || p->shape[d] != want)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "parameter '%s': local dimension %d is %" PRId64 ", the unsplit %" PRId64
                        " in %d groups over %d tp ranks: the unsplit size must divide evenly "
                        "and the local one be its share",
                        name, d, p->shape[d], p->tp_full[d], p->tp_groups, p->tp_size);
  }
  return ZEROC_OK;
}

uint64_t zeroc__split_full_numel(const zeroc__split_t *s) {
  uint64_t n = 1;
  for (int d = 0; d < s->ndim; d++) n *= (uint64_t)s->full[d];
  return n;
}

/* Elements after the split dimension (one step along it). */
static uint64_t inner_of(const zeroc__split_t *s) {
  uint64_t in = 1;
  for (int d = s->dim + 1; d < s->ndim; d++) in *= (uint64_t)s->full[d];
  return in;
}

uint64_t zeroc__split_to_global(const zeroc__split_t *s, int rank, uint64_t i) {
  if (s->groups <= 0) return i;
  uint64_t inner = inner_of(s), F = (uint64_t)s->full[s->dim];
  uint64_t Ld = F / (uint64_t)s->size, gl = Ld / (uint64_t)s->groups; /* local rows per group */
  uint64_t o = i / (Ld * inner), x = (i / inner) % Ld, in = i % inner;
  uint64_t j = x / gl, w = x % gl;
  uint64_t xg = j * (F / (uint64_t)s->groups) + (uint64_t)rank * gl + w;
  return (o * F + xg) * inner + in;
}

uint64_t zeroc__split_run(const zeroc__split_t *s, uint64_t i) {
  if (s->groups <= 0) return UINT64_MAX;
  uint64_t inner = inner_of(s), F = (uint64_t)s->full[s->dim];
  uint64_t Ld = F / (uint64_t)s->size, gl = Ld / (uint64_t)s->groups;
  /* to the end of this rank's rows of the current group: along them the
   * unsplit index grows by one per element */
  uint64_t r = i % (gl * inner);
  return gl * inner - r;
}

void zeroc__split_to_local(const zeroc__split_t *s, uint64_t g, int *rank, uint64_t *local) {
  if (s->groups <= 0) {
    *rank = 0;
    *local = g;
    return;
  }
  uint64_t inner = inner_of(s), F = (uint64_t)s->full[s->dim];
  uint64_t Ld = F / (uint64_t)s->size, gl = Ld / (uint64_t)s->groups, G = F / (uint64_t)s->groups;
  uint64_t o = g / (F * inner), xg = (g / inner) % F, in = g % inner;
  uint64_t j = xg / G, rem = xg % G;
  *rank = (int)(rem / gl);
  *local = (o * Ld + j * gl + rem % gl) * inner + in;
}

int zeroc__split_remap(uint64_t g, const int64_t *from, const int64_t *to, int ndim,
                       uint64_t *out) {
  uint64_t idx[ZEROC_MAX_DIMS], r = g;
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = r % (uint64_t)from[d];
    r /= (uint64_t)from[d];
  }
  uint64_t o = 0;
  for (int d = 0; d < ndim; d++) {
    if (idx[d] >= (uint64_t)to[d]) return 0;
    o = o * (uint64_t)to[d] + idx[d];
  }
  *out = o;
  return 1;
}

uint64_t zeroc_param_global_index(const zeroc_param_desc_t *p, uint64_t i) {
  if (!p || p->tp_groups <= 0) return i;
  zeroc__split_t s;
  zeroc__split_of(p, &s);
  return zeroc__split_to_global(&s, p->tp_rank, i);
}

void zeroc__split_init_normal_below(float *dst, uint64_t first, size_t n,
                                    const zeroc_param_desc_t *p, uint64_t seed, uint64_t real) {
  zeroc__split_t s;
  zeroc__split_of(p, &s);
  /* a run of consecutive unsplit indices maps once, not element by element */
  for (size_t j = 0; j < n;) {
    uint64_t g = zeroc__split_to_global(&s, p->tp_rank, first + j);
    uint64_t run = zeroc__split_run(&s, first + j);
    size_t m = run < n - j ? (size_t)run : n - j;
    for (size_t k = 0; k < m; k++)
      dst[j + k] =
          g + k < real ? p->init_scale * zeroc_rng_normal(seed, p->init_stream, g + k) : 0.0f;
    j += m;
  }
}

void zeroc__split_init_normal(float *dst, uint64_t first, size_t n, const zeroc_param_desc_t *p,
                              uint64_t seed, void *user) {
  (void)user;
  zeroc__split_init_normal_below(dst, first, n, p, seed, UINT64_MAX);
}
