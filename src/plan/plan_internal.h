/*
 * plan/plan_internal.h - what plan.c shares with search.c: checking a config
 * (zeroc_plan_config_resolve reads it) and planning a layout that is already
 * checked.
 */
#ifndef ZEROC_PLAN_INTERNAL_H
#define ZEROC_PLAN_INTERNAL_H

#include "zeroc/plan.h"

/* Checks the model shape, dtype, recompute, offload and cluster fields. */
zeroc_result_t zeroc__plan_check_common(const zeroc_plan_config_t *c);

/* Checks zero, tp, pp, hsdp, microbatches and offload_params against the
 * shape and the gpus. */
zeroc_result_t zeroc__plan_check_layout(const zeroc_plan_config_t *c);

/* Checks cp and cp_mode against the shape: 2 cp divides seq (zigzag
 * chunks), cp divides heads / tp with Ulysses. */
zeroc_result_t zeroc__plan_check_cp(const zeroc_plan_config_t *c);

/* What context parallelism adds per transformer block and micro-batch
 * (plan/cp.c; docs/cp.md). */
typedef struct zeroc__plan_cp {
  double saved;    /* bytes kept for backward beyond gpt.c's own (activations) */
  double buffers;  /* bytes of transient buffers, allocated once (buffers) */
  double forward;  /* bytes this rank sends in the block's forward */
  double backward; /* bytes this rank sends in its backward */
} zeroc__plan_cp_t;

/* mode ZEROC_PLAN_CP_*, N the cp size, B sequences of T tokens (the whole
 * sequence; a rank holds T/N), Cl channels and NHl heads per tp rank, e bytes
 * per element. N = 1: all zero. */
void zeroc__plan_cp_block(int mode, int N, int B, int T, int Cl, int NHl, int e,
                          zeroc__plan_cp_t *out);

/* Plans a layout whose every field has been checked (microbatches >= 1). */
zeroc_result_t zeroc__plan_layout(const zeroc_plan_config_t *c, zeroc_plan_result_t *out);

#endif
