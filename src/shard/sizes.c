/*
 * shard/sizes.c - bytes of the engine's buffers per ZeRO stage (sizes.h).
 */
#include "shard/sizes.h"

#include <string.h>

int zeroc__shard_keeps_master(int pb, int offload_optimizer, int offload_params) {
  return pb != 4 || offload_optimizer != 0 || offload_params != 0;
}

int zeroc__shard_compute_copies(int pb, int rb, int cb) { return (cb != pb) + (cb != rb); }

int zeroc__shard_grad_bytes(int world, int grad_accum, int pb, int rb, int cb) {
  return world == 1 && grad_accum == 1 && cb == pb ? pb : rb;
}

int zeroc__shard_accum_bytes(int grad_accum, int rb) {
  /* micro-steps accumulate in fp32 at every stage: 2-3 in the grad shard, 0-1 in a
   * running sum beside the full grads (a 16-bit sum would round every micro-step) */
  return grad_accum > 1 ? 4 : rb;
}

int zeroc__shard_alias(int stage, int nd, int offload_params, int grad_accum) {
  int a = 0;
  if (stage == 3 && nd == 1 && offload_params == 0) a |= ZEROC__ALIAS_PARAMS;
  if (stage >= 2 && nd == 1 && grad_accum == 1) a |= ZEROC__ALIAS_GRADS;
  return a;
}

void zeroc__shard_unit_bytes(int stage, double N, int nd, int pinned, int pb, int rb, int gb,
                             int cb, int master, int alias, zeroc__unit_bytes_t *out) {
  memset(out, 0, sizeof *out);
  if (stage == 0) nd = 1; /* the degenerate shard group of one */
  /* master, m and v are fp32 whatever the compute dtype */
  out->opt_buffer = 4.0 * N / nd;
  out->optimizer = (master ? 12.0 : 8.0) * N / nd;
  out->params = stage >= 3 ? pb * N / nd : pb * N;
  out->grads = stage >= 2 ? gb * N / nd : rb * N;
  if (stage <= 1 && gb != rb) out->accum = gb * N;
  if (pinned && stage == 3 && !(alias & ZEROC__ALIAS_PARAMS)) out->own_gather = pb * N;
  if (pinned && stage >= 2 && !(alias & ZEROC__ALIAS_GRADS)) out->own_fgrad = rb * N;
  if (pinned) out->compute_copy = (double)cb * N;
}

void zeroc__shard_pool_bytes(int stage, int prefetch, int units, int grad_accum,
                             double max_unpinned, double max_unit, int nd, int pb, int rb, int cb,
                             int alias, zeroc__pool_bytes_t *out) {
  memset(out, 0, sizeof *out);
  /* at most prefetch gathers in flight ahead of the one in use, and never
   * more slots than units */
  if (stage == 3 && !(alias & ZEROC__ALIAS_PARAMS))
    out->gather_n = prefetch + 1 < units ? prefetch + 1 : units;
  if (stage >= 2 && !(alias & ZEROC__ALIAS_GRADS)) out->fgrad_n = 2;
  /* stage 1 reduces in place into its block of the full grads (schedule.c) */
  if (stage >= 2 && grad_accum > 1) out->rs_n = 2;
  out->gather = pb * max_unpinned;
  out->fgrad = rb * max_unpinned;
  out->rs = rb * max_unit / (stage == 0 ? 1 : nd);
  out->compute_copy = (double)cb * max_unpinned;
  out->fp32_shard = 4.0 * max_unit / (stage == 0 ? 1 : nd);
}

double zeroc__shard_staging_bytes(double shard_numel, int elem) { return shard_numel * elem + 64; }

double zeroc__shard_step_bytes(void) { return (double)(ZEROC__STEP_ACC * sizeof(double)); }
