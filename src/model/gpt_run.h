/*
 * model/gpt_run.h - what gpt_run.c (the GPT behind the model interface: build,
 * step, checkpoints, weights, sampling) gives the files beside and above it:
 * the pipeline's config and cut (gpt_schedule.c prints the schedule that runs).
 * Its state is gpt_state.h; its data gpt_batch.h; its evaluation gpt_eval.h.
 */
#ifndef ZEROC_MODEL_GPT_RUN_H
#define ZEROC_MODEL_GPT_RUN_H

#include "model/gpt_state.h"
#include "zeroc/arch.h"

/* The pipeline of config `c` (tp: its tensor-parallel size), activations
 * crossing stages in `act_dtype`; and the balanced cut of `g`'s units into
 * `stages` stages, bounds[0..stages]. The run and --print-schedule share them,
 * so the schedule printed is the one that runs. */
zeroc_pipeline_config_t zeroc__gpt_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
                                               zeroc_dtype_t act_dtype);
zeroc_result_t zeroc__gpt_partition(const zeroc_gpt_config_t *g, int stages, int *bounds);

/* The model interface's functions of a decoder run (zeroc/arch.h), the same for GPT-2
 * and the Llama family (llama_arch.c's table points at them too): the run's state is
 * zeroc__gpt_run_t, its model zeroc_gpt_t of either family. */
zeroc_result_t zeroc__gpt_run_create(const zeroc_arch_run_t *a, void **self);
void zeroc__gpt_run_destroy(void *self);
zeroc_model_t *zeroc__gpt_run_model(void *self);
zeroc_pipeline_t *zeroc__gpt_run_pipeline(void *self);
zeroc_result_t zeroc__gpt_run_step(void *self, int s, float lr, zeroc_pipeline_stats_t *pst);
double zeroc__gpt_run_comm_wait_s(void *self);
/* The checkpoint's app object: the shape (a Llama model's family fields too) and data. */
void zeroc__gpt_run_app_json(void *self, uint64_t step, char *buf, size_t n);
zeroc_result_t zeroc__gpt_run_import_weights(void *self, const char *path);
zeroc_result_t zeroc__gpt_run_export_weights(void *self, const char *path);
zeroc_result_t zeroc__gpt_run_sampler(void *self, struct zeroc_sampler **out);
zeroc_result_t zeroc__gpt_run_sample_prompt(void *self, int max, int32_t *ids, int *n);
int zeroc__gpt_run_num_units(const zeroc_train_info_t *info);
void zeroc__gpt_run_unit_costs(const zeroc_train_info_t *info, double *cost);
void zeroc__gpt_run_unit_name(const zeroc_train_info_t *info, int u, char *buf, size_t n);

#endif
