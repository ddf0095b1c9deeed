/*
 * shard/rules.h - the engine's layout rules, written once: the trainer's
 * config (through the language models' rules, model/lm_rules.c) and the
 * planner (plan/plan.c) apply them, each naming the settings its own way.
 */
#ifndef ZEROC_SHARD_RULES_H
#define ZEROC_SHARD_RULES_H

#include "zeroc/layer.h"
#include "zeroc/result.h"

/* What a message calls each setting: a config's field names or a command's flags. */
typedef struct zeroc__rule_names {
  const char *zero, *pp, *offload_params;
} zeroc__rule_names_t;

/* ZEROC_ERR_INVALID_ARG with one message for the first rule broken:
 *   pp > 1 needs zero 0 or 1: a pipeline keeps every micro-batch's gradients
 *     on its stage and reduces them once per step (zeroc_pipeline_create
 *     refuses a ZeRO-2/3 model);
 *   offload_params (zeroc_offload_t) other than none needs zero 3: only a
 *     sharded parameter can live off the device between gathers. */
zeroc_result_t zeroc__shard_check_rules(int zero, int pp, int offload_params,
                                        const zeroc__rule_names_t *n);

/* A ZeRO stage: 0, 1, 2 or 3; ZEROC_ERR_INVALID_ARG "<name> <zero>: accepted 0, 1, 2, 3". */
zeroc_result_t zeroc__shard_check_stage(int zero, const char *name);

/* The ZeRO stage when none is asked for: 3, or 1 with a pipeline (pp > 1),
 * which reduces gradients once per step and allows 0 or 1 only. */
int zeroc__shard_default_stage(int pp);

/* Whether the units' callbacks can use the pointers of a context on `device`
 * (ZEROC_DEVICE_CPU or _CUDA; `asked`: the context config's device, so that
 * the message can say that ZEROC_DEVICE_AUTO chose cuda). Host callbacks
 * (ZEROC_CALLBACKS_HOST) run on cpu only: a cuda context gives
 * ZEROC_ERR_UNSUPPORTED, one line naming the first such unit and both ways
 * out. A `callbacks` value that is no ZEROC_CALLBACKS_* gives
 * ZEROC_ERR_INVALID_ARG. Pure: zeroc_shard calls it with its context's
 * device, tests with any. */
zeroc_result_t zeroc__shard_check_callbacks(const zeroc_layer_t *layers, int n,
                                            zeroc_device_kind_t device, zeroc_device_kind_t asked);

#endif
