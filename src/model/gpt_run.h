/*
 * model/gpt_run.h - what gpt_run.c (the GPT behind the model interface: build,
 * step, checkpoints, weights, sampling) gives the files beside and above it:
 * the pipeline's config and cut (gpt_schedule.c prints the schedule that runs).
 * Its state is gpt_state.h; its data gpt_batch.h; its evaluation gpt_eval.h.
 */
#ifndef ZEROC_MODEL_GPT_RUN_H
#define ZEROC_MODEL_GPT_RUN_H

#include "model/gpt_state.h"

/* The pipeline of config `c` (tp: its tensor-parallel size), activations
 * crossing stages in `act_dtype`; and the balanced cut of `g`'s units into
 * `stages` stages, bounds[0..stages]. The run and --print-schedule share them,
 * so the schedule printed is the one that runs. */
zeroc_pipeline_config_t zeroc__gpt_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
                                               zeroc_dtype_t act_dtype);
zeroc_result_t zeroc__gpt_partition(const zeroc_gpt_config_t *g, int stages, int *bounds);

#endif
