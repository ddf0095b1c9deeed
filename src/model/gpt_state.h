/*
 * model/gpt_state.h - the GPT run's state, which gpt_run.c builds and
 * gpt_batch.c and gpt_eval.c read; the run's functions are in gpt_run.h,
 * gpt_batch.h and gpt_eval.h. The files call down: run -> eval -> batch.
 */
#ifndef ZEROC_MODEL_GPT_STATE_H
#define ZEROC_MODEL_GPT_STATE_H

#include <stddef.h>
#include <stdint.h>

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

#endif
