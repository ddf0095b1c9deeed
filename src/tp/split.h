/*
 * tp/split.h - how a tensor-parallel parameter's local tensor maps to the
 * unsplit one (zeroc_param_desc_t's tp_* fields), both ways. Pure arithmetic:
 * initialisation, checkpoint re-splitting and export use it.
 */
#ifndef ZEROC_TP_SPLIT_H
#define ZEROC_TP_SPLIT_H

#include <stdint.h>

#include "zeroc/layer.h"

typedef struct zeroc__split {
  int ndim;
  int64_t full[ZEROC_MAX_DIMS]; /* the unsplit shape */
  int groups;                   /* 0: not split: every rank holds the whole tensor */
  int dim, size;                /* split dimension and tp size */
} zeroc__split_t;

/* The split of `p` (groups 0 and full = shape when p is not split). */
void zeroc__split_of(const zeroc_param_desc_t *p, zeroc__split_t *out);

/* Checks that p's tp fields describe an even split of tp_full into p->shape:
 * ZEROC_ERR_INVALID_ARG naming the parameter and the numbers otherwise. */
zeroc_result_t zeroc__split_check(const zeroc_param_desc_t *p);

/* Elements of the unsplit tensor. */
uint64_t zeroc__split_full_numel(const zeroc__split_t *s);

/* Local element i of tp rank `rank` -> its index in the unsplit tensor. */
uint64_t zeroc__split_to_global(const zeroc__split_t *s, int rank, uint64_t i);

/* How many local elements from i on (at least one) have consecutive unsplit
 * indices: UINT64_MAX when the tensor is not split. */
uint64_t zeroc__split_run(const zeroc__split_t *s, uint64_t i);

/* Index g of the unsplit tensor -> the tp rank holding it (0 when not split:
 * every rank does) and its local index there. */
void zeroc__split_to_local(const zeroc__split_t *s, uint64_t g, int *rank, uint64_t *local);

/* Index g of a row-major tensor of shape `from` -> the same multi-index in a
 * tensor of shape `to` (same ndim). Returns 0 when it falls outside `to`. */
int zeroc__split_remap(uint64_t g, const int64_t *from, const int64_t *to, int ndim, uint64_t *out);

/* A zeroc_init_fn: N(0, init_scale^2) drawn at each element's index in the
 * unsplit tensor, from the parameter's init_stream, so every tp size starts
 * from the same weights. */
void zeroc__split_init_normal(float *dst, uint64_t first, size_t n, const zeroc_param_desc_t *p,
                              uint64_t seed, void *user);

/* The same draw where the unsplit index is below `real`, 0 from there on (a
 * padded tensor: the rows past the real ones). */
void zeroc__split_init_normal_below(float *dst, uint64_t first, size_t n,
                                    const zeroc_param_desc_t *p, uint64_t seed, uint64_t real);

#endif
