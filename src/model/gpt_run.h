/*
 * model/gpt_run.h - the GPT's run as the trainer drives it through the model
 * interface (zeroc/arch.h): its state and what gpt_run.c (build, step,
 * checkpoints, weights, sampling), gpt_batch.c (the token data),
 * gpt_eval.c (the held-out loss) and gpt_schedule.c (--print-schedule) share.
 * The files call down that list's reverse: run -> eval -> batch, never back.
 */
#ifndef ZEROC_MODEL_GPT_RUN_H
#define ZEROC_MODEL_GPT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/arch.h"
#include "zeroc/data.h"
#include "zeroc/gpt.h"
#include "zeroc/pipeline.h"
#include "zeroc/train.h"

typedef struct zeroc__gpt_run {
  zeroc_ctx_t *ctx;
  zeroc_train_info_t *info; /* the trainer's: config, shape (model), figures */
  int dp, dp_rank, pp, pp_rank, tp;
  int cp, cp_rank; /* context parallelism: this rank keeps its zigzag tokens of each sequence */
  zeroc_data_t *data;
  zeroc_data_t *val; /* val_data, opened at create */
  zeroc_gpt_t *gpt;
  zeroc_model_t *model;
  zeroc_pipeline_t *pipe;
  int *bounds;            /* with a pipeline: the cut into pp x vpp stages */
  zeroc_gpt_batch_t *mbs; /* with a pipeline: the step's micro-batches */
  const void **mbp;
  size_t ntok; /* tokens of one micro-batch on this rank: B x T (B x T/cp with cp) */
  int32_t *inputs, *targets, *dev_in, *dev_tg;
  int32_t *full_in, *full_tg; /* cp > 1: one micro-batch's B x T tokens, before the split */
} zeroc__gpt_run_t;

/* gpt_batch.c: the data stream of the run's shape and order (vocab, seq, global batch,
 * seed) over `source`: the training and the held-out data differ only in
 * source and shuffle. */
zeroc_data_config_t zeroc__gpt_data_config(const zeroc__gpt_run_t *run, const char *source,
                                           int shuffle);

/* Micro-batch u of step `step` of `d` (the training or the held-out data) into
 * the token buffers (with a pipeline, micro-batch u's own), copied to the
 * device where there is one; *b describes it for the model. */
zeroc_result_t zeroc__gpt_load(zeroc__gpt_run_t *run, zeroc_data_t *d, uint64_t step, int u,
                               zeroc_gpt_batch_t *b);

/* gpt_eval.c: opens val_data (when configured) at create: its shape checked
 * against the model's, the global batches of one evaluation resolved
 * (info->val_batches), and the tokens of those batches read once, so a token
 * outside the vocabulary stops the run before it trains. Local; the caller
 * agrees. And the held-out loss (the interface's evaluate). */
zeroc_result_t zeroc__gpt_val_open(zeroc__gpt_run_t *run);
zeroc_result_t zeroc__gpt_evaluate(void *self, double *loss, double *auc, double *logloss);

/* The pipeline of config `c` (tp: its tensor-parallel size), activations
 * crossing stages in `act_dtype`; and the balanced cut of `g`'s units into
 * `stages` stages, bounds[0..stages]. The run and --print-schedule share them,
 * so the schedule printed is the one that runs. */
zeroc_pipeline_config_t zeroc__gpt_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
                                               zeroc_dtype_t act_dtype);
zeroc_result_t zeroc__gpt_partition(const zeroc_gpt_config_t *g, int stages, int *bounds);

/* Copies the consolidated tensors of zeroc__gpt_collect into a sampler (`user`). */
zeroc_result_t zeroc__gpt_sampler_fill(void *user, const float *const *src, uint64_t maxp);

#endif
