/*
 * shard/rules.c - the engine's layout rules (rules.h).
 */
#include "shard/rules.h"

#include "core/error.h"
#include "zeroc/types.h"

zeroc_result_t zeroc__shard_check_rules(int zero, int pp, int offload_params,
                                        const zeroc__rule_names_t *n) {
  static const char *const offloads[] = {"none", "cpu", "nvme"};
  if (pp > 1 && zero > 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s %d with %s %d: pipeline parallelism keeps every micro-batch's gradients "
                      "on its stage and reduces them once per step; accepted %s 0 or 1",
                      n->zero, zero, n->pp, pp, n->zero);
  if (offload_params != ZEROC_OFFLOAD_NONE && zero != 3)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %s needs %s 3 (got %s %d)", n->offload_params,
                      (unsigned)offload_params < 3 ? offloads[offload_params] : "?", n->zero,
                      n->zero, zero);
  return ZEROC_OK;
}

int zeroc__shard_default_stage(int pp) { return pp > 1 ? 1 : 3; }

zeroc_result_t zeroc__shard_check_stage(int zero, const char *name) {
  if (zero < 0 || zero > 3)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d: accepted 0, 1, 2, 3", name, zero);
  return ZEROC_OK;
}
