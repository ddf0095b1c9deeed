/*
 * train/trainer.h - the trainer's insides, shared by the files of src/train (never
 * installed): what create builds and what the step loop reads.
 */
#ifndef ZEROC_TRAIN_TRAINER_H
#define ZEROC_TRAIN_TRAINER_H

#include "train/spike.h"
#include "zeroc/gpt.h"
#include "zeroc/pipeline.h"
#include "zeroc/train.h"

struct zeroc_trainer {
  zeroc_ctx_t *ctx;
  zeroc_train_info_t info; /* info.config: the resolved config */
  int dtype_given;         /* param_dtype as configured: -1 for "auto" */
  int dp, dp_rank, pp, pp_rank, tp;
  zeroc_data_t *data;
  zeroc_data_t *val; /* val_data, opened by the first evaluation */
  zeroc_gpt_t *gpt;
  zeroc_model_t *model;
  zeroc_pipeline_t *pipe;
  int *bounds;            /* with a pipeline: the cut into pp x vpp stages */
  zeroc_gpt_batch_t *mbs; /* with a pipeline: the step's micro-batches */
  const void **mbp;
  size_t ntok; /* tokens of one micro-batch: B x T */
  int32_t *inputs, *targets, *dev_in, *dev_tg;
  int next;         /* 0-based index of the next step */
  int save_pending; /* the cadence's checkpoint after step `next` is due */
  int skipped_total, spikes_total;
  zeroc__spike_t spike_loss, spike_norm;
};

/* The manifest's app object: what a resume must match (model shape, data stream). */
void zeroc__train_app_json(const zeroc_trainer_t *tr, uint64_t step, char *buf, size_t n);

/* Writes the checkpoint of step `step` into `dir`. */
zeroc_result_t zeroc__train_save(zeroc_trainer_t *tr, const char *dir, uint64_t step);

/* The data stream of the trainer's shape and order (vocab, seq, global
 * batch, seed) over `source`: the training data and the held-out data differ
 * only in source and shuffle. */
zeroc_data_config_t zeroc__train_data_config(const zeroc_trainer_t *tr, const char *source,
                                             int shuffle);

/* The pipeline of config `c` (tp: its tensor-parallel size), activations
 * crossing stages in `act_dtype`; and the balanced cut of `g`'s units into
 * `stages` stages, bounds[0..stages]. The trainer and --print-schedule share
 * them, so the schedule printed is the one that runs. */
zeroc_pipeline_config_t zeroc__train_pipe_config(const zeroc_train_config_t *c, int tp,
                                                 zeroc_dtype_t act_dtype);
zeroc_result_t zeroc__train_partition(const zeroc_gpt_config_t *g, int stages, int *bounds);

#endif
