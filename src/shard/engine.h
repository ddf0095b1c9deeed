/*
 * shard/engine.h - what the files of src/shard call of each other (engine.c:
 * publishing the parameters, the step's figures; schedule.c: the per-unit
 * schedule, which the pipeline runs on unit ranges), on the model of
 * shard/model.h. The offloaded state's calls are shard/offload.h.
 */
#ifndef ZEROC_SHARD_ENGINE_H
#define ZEROC_SHARD_ENGINE_H

#include "shard/model.h"
#include "shard/offload.h"

/* Copies a caller's versioned zeroc_shard_config_t (NULL: every field unset) into
 * *out with the defaults resolved (usable even when rejected), then checks the
 * values: ZEROC_ERR_INVALID_ARG naming the first bad one. Pure: zeroc_shard and
 * zeroc_shard_predict read their settings with it. */
zeroc_result_t zeroc__shard_read_config(const zeroc_shard_config_t *in, zeroc_shard_config_t *out);

/* ZEROC_OK for a live model (built by zeroc_shard, not destroyed), else
 * ZEROC_ERR_INVALID_ARG with a one-line message naming `fn`. */
zeroc_result_t zeroc__model_check(const zeroc_model_t *m, const char *fn);

/* Casts the host fp32 `master` of unit i into its compute shard, wherever the
 * shard lives. */
zeroc_result_t zeroc__model_store_params_from_host(zeroc_model_t *m, int i, const float *master);
/* Publishes without casting: the stage 1-2 all-gathers of the compute shards. */
zeroc_result_t zeroc__model_publish_gathers(zeroc_model_t *m);

/* Blocks compute on a communication event, counting the wait as exposed
 * communication (cpu: the host thread waits; cuda: stream order). */
zeroc_result_t zeroc__model_wait_comm(zeroc_model_t *m, zeroc_event_t *e);

/* Casts the master shards into the compute parameters and, for stages 1-2,
 * all-gathers them (stage 0: directly; stage 3: gathered lazily). */
zeroc_result_t zeroc__model_publish(zeroc_model_t *m);

/* (Re)allocates unit `unit`'s activation buffers (zeroc_layer_t.act_bytes): frees the
 * old ones, then one buffer of act_bytes per slot, tagged activations; slots 0 only
 * frees. Returns ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__model_acts_alloc(zeroc_model_t *m, int unit, int slots);
/* The bytes of every unit's activation buffers (zeroc_model_activation_bytes). */
uint64_t zeroc__model_act_bytes(const zeroc_model_t *m);

/* Sum of bus bytes over the model's groups (for per-step figures). */
uint64_t zeroc__model_comm_bytes(const zeroc_model_t *m);

/* ---- running parts of the model (pipeline parallelism) ------------------------------
 * A unit range runs the same per-unit schedule as zeroc_model_forward/backward
 * (shard/schedule.c); what a range adds is the checks below. */

/* Keeps `slots` saved inputs per unit, so that `slots` micro-batches can be
 * between their forward and their backward at once (forward_units and
 * backward_units name the slot). Local; call before the first forward.
 * Returns ZEROC_ERR_INVALID_ARG for slots < 1 or while a step is under way,
 * ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__model_set_slots(zeroc_model_t *m, int slots);

/*
 * The gradients of every ZEROC_PARAM_TIED parameter are summed over `g`
 * (the ranks holding a copy, e.g. the first and the last pipeline stage for a
 * tied embedding) before the data-parallel reduction, so every copy takes the
 * same step; only the copy of the rank with `owner` set counts in the gradient
 * norm. `g` must outlive the model. Local.
 */
void zeroc__model_tie(zeroc_model_t *m, zeroc_group_t *g, int owner);

/*
 * Forward of the contiguous units [first, last] of this rank's model for one
 * micro-batch held in `slot`: unit `first` receives `in` (NULL: `batch`), the
 * others the previous unit's output; every unit sees `batch` as io->batch and
 * `micro` as io->micro. *out receives the last unit's output. A unit's loss is
 * added to the step's loss. Stages 0 and 1 only (their parameters stay
 * gathered), and no unit may `share` another's parameters.
 * Returns ZEROC_ERR_INVALID_ARG (a range, slot or micro out of bounds, a
 * whole-model forward waiting for its backward), ZEROC_ERR_UNSUPPORTED (stage
 * 2/3, shared parameters), or the callbacks' errors.
 */
zeroc_result_t zeroc__model_forward_units(zeroc_model_t *m, int first, int last, int slot,
                                          int micro, const void *batch, const void *in,
                                          void **out);

/*
 * Backward of units [last .. first] for the micro-batch in `slot` (whose
 * forward_units ran): unit `last` receives `dout` (NULL for the loss unit),
 * the others the gradient the next unit produced; *din receives unit first's
 * gradient w.r.t. its input. Gradients accumulate over micro-batches; a unit's
 * reduction over data parallelism starts after its grad_accum-th backward of
 * the step. Errors as forward_units.
 */
zeroc_result_t zeroc__model_backward_units(zeroc_model_t *m, int first, int last, int slot,
                                           int micro, const void *batch, const void *dout,
                                           void **din);

/*
 * Forward-only twin of forward_units for an evaluation: nothing of the step
 * changes (no saved activations, no loss added to the step's). *loss receives
 * the sum of the losses the range's units wrote (0 without a loss unit).
 * Errors as forward_units. Bracket a whole evaluation with eval_mark/unmark.
 */
zeroc_result_t zeroc__model_eval_units(zeroc_model_t *m, int first, int last, int slot, int micro,
                                       const void *batch, const void *in, void **out,
                                       float *loss);

/* An evaluation is not part of the training step: unmark takes the
 * communication and the waits since mark out of the step's figures
 * (comm_bytes, exposed_comm_ms of zeroc_model_step). */
typedef struct zeroc__eval_mark {
  uint64_t bytes;
  double exposed_ms;
} zeroc__eval_mark_t;
void zeroc__model_eval_mark(const zeroc_model_t *m, zeroc__eval_mark_t *mark);
void zeroc__model_eval_unmark(zeroc_model_t *m, const zeroc__eval_mark_t *mark);

#endif
