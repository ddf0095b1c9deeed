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

zeroc_result_t zeroc__shard_check_callbacks(const zeroc_layer_t *layers, int n,
                                            zeroc_device_kind_t device, zeroc_device_kind_t asked) {
  for (int i = 0; i < n; i++) {
    const char *name = layers[i].name ? layers[i].name : "?";
    zeroc_callbacks_t cb = layers[i].callbacks;
    if (cb != ZEROC_CALLBACKS_HOST && cb != ZEROC_CALLBACKS_DEVICE)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "unit %d ('%s'): callbacks %d; accepted ZEROC_CALLBACKS_HOST (0) or "
                        "ZEROC_CALLBACKS_DEVICE (1)",
                        i, name, (int)cb);
  }
  if (device != ZEROC_DEVICE_CUDA) return ZEROC_OK; /* cpu: the device's memory is host memory */
  for (int i = 0; i < n; i++)
    if (layers[i].callbacks == ZEROC_CALLBACKS_HOST)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "unit %d ('%s') has host callbacks (zeroc_layer_t.callbacks "
                        "ZEROC_CALLBACKS_HOST, the default) but the context's device is cuda%s, "
                        "whose pointers host code cannot use: create the context with device "
                        "ZEROC_DEVICE_CPU, or write device callbacks and set "
                        "ZEROC_CALLBACKS_DEVICE",
                        i, layers[i].name ? layers[i].name : "?",
                        asked == ZEROC_DEVICE_AUTO ? " (ZEROC_DEVICE_AUTO found a GPU)" : "");
  return ZEROC_OK;
}
