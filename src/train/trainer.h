/*
 * train/trainer.h - the trainer's insides, shared by the files of src/train (never
 * installed): what create builds and what the step loop reads.
 */
#ifndef ZEROC_TRAIN_TRAINER_H
#define ZEROC_TRAIN_TRAINER_H

#include <stdio.h>

#include "train/spike.h"
#include "zeroc/gpt.h"
#include "zeroc/pipeline.h"
#include "zeroc/train.h"

struct zeroc_trainer {
  zeroc_ctx_t *ctx;
  zeroc_train_info_t info; /* info.config: the resolved config */
  int dtype_given;         /* param_dtype as configured: -1 for "auto" */
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
  int next;         /* 0-based index of the next step */
  int save_pending; /* the cadence's checkpoint after step `next` is due */
  int skipped_total, spikes_total;
  zeroc__spike_t spike_loss, spike_norm;
  struct zeroc__dlrm_run *dlrm; /* --model dlrm: its data, model and tables (dlrm_train.c) */
};

/* The shard engine's settings of a resolved config, parameters in `dtype`
 * (shared by the GPT and the DLRM paths). */
zeroc_shard_config_t zeroc__train_shard_config(const zeroc_train_config_t *c, zeroc_dtype_t dtype);

/* ---- the DLRM path (dlrm_train.c): the same trainer object, step loop, LR
 * schedule, spike report and metrics; its own data, model and evaluation ---- */

/* The DLRM defaults and checks for a config whose model is a DLRM preset. */
zeroc_result_t zeroc__dlrm_resolve(zeroc_trainer_t *tr, zeroc_train_config_t *c);
zeroc_result_t zeroc__dlrm_check(const zeroc_trainer_t *tr, const zeroc_train_config_t *c);
/* Data, model, shards and tables (after the config is agreed). Collective. */
zeroc_result_t zeroc__dlrm_build(zeroc_trainer_t *tr);
/* Step s's micro-batch through tables and MLPs (forward and backward). */
zeroc_result_t zeroc__dlrm_run_batches(zeroc_trainer_t *tr, int s, float lr);
/* The held-out samples: mean loss, AUC and log-loss (the same on every rank). */
zeroc_result_t zeroc__dlrm_evaluate(zeroc_trainer_t *tr, double *loss, double *auc,
                                    double *logloss);
void zeroc__dlrm_destroy(zeroc_ctx_t *ctx, struct zeroc__dlrm_run *d);
/* The planner's per-rank prediction into tr->info (dlrm_predict.c). */
void zeroc__dlrm_predict(zeroc_trainer_t *tr);
/* Checkpoints (dlrm_ckpt.c): the MLP shards and DIR/tables_step_<k>; resume from
 * config.resume (after the build), checked against this run's shape and data. */
zeroc_result_t zeroc__dlrm_save(zeroc_trainer_t *tr, const char *dir, uint64_t step);
zeroc_result_t zeroc__dlrm_resume(zeroc_trainer_t *tr);

/* The manifest's app object: what a resume must match (model shape, data stream). */
void zeroc__train_app_json(const zeroc_trainer_t *tr, uint64_t step, char *buf, size_t n);

/* Writes the checkpoint of step `step` into `dir`. */
zeroc_result_t zeroc__train_save(zeroc_trainer_t *tr, const char *dir, uint64_t step);

/* Micro-batch u of step `step` of `d` (the training or the held-out data) into
 * the token buffers (with a pipeline, micro-batch u's own), copied to the
 * device where there is one; *b describes it for the model. */
zeroc_result_t zeroc__train_load(zeroc_trainer_t *tr, zeroc_data_t *d, uint64_t step, int u,
                                 zeroc_gpt_batch_t *b);

/* Opens val_data (when configured) at create: its shape checked against the
 * model's, the global batches of one evaluation resolved (info.val_batches),
 * and the tokens of those batches read once, so a token outside the
 * vocabulary stops the run before it trains. Local; the caller agrees. */
zeroc_result_t zeroc__train_val_open(zeroc_trainer_t *tr);

/* The data stream of the trainer's shape and order (vocab, seq, global
 * batch, seed) over `source`: the training data and the held-out data differ
 * only in source and shuffle. */
zeroc_data_config_t zeroc__train_data_config(const zeroc_trainer_t *tr, const char *source,
                                             int shuffle);

/* The pipeline of config `c` (tp: its tensor-parallel size), activations
 * crossing stages in `act_dtype`; and the balanced cut of `g`'s units into
 * `stages` stages, bounds[0..stages]. The trainer and --print-schedule share
 * them, so the schedule printed is the one that runs. */
zeroc_pipeline_config_t zeroc__train_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
                                                 zeroc_dtype_t act_dtype);
zeroc_result_t zeroc__train_partition(const zeroc_gpt_config_t *g, int stages, int *bounds);

/* --print-schedule (print_schedule.c): writes to `f` the cut of `g` into
 * pp x c->vpp stages with each stage's units and share of the cost, then
 * every rank's actions (zeroc_pipeline_print_schedule with communication).
 * `c` is the command's config with grad_accum the micro-batches; tp and
 * act_dtype as zeroc__train_pipe_config takes them. Errors: the partition's
 * and the schedule's, ZEROC_ERR_NOMEM, ZEROC_ERR_IO. */
zeroc_result_t zeroc__train_print_schedule(FILE *f, const zeroc_train_config_t *c,
                                           const zeroc_gpt_config_t *g, int pp, int tp,
                                           zeroc_dtype_t act_dtype);

/* ---- the config's rules (check.c), shared with `zeroc train`'s pre-MPI checks ---- */

/* What a rule's message calls each setting: the config's field names
 * (zeroc__train_field_names) or the command's flags (apps/train_flags.c). */
typedef struct zeroc__train_names {
  const char *tp, *pp, *heads, *hidden, *batch, *seq, *layers, *zero, *vpp;
  const char *microbatches; /* grad_accum: the micro-batches with a pipeline */
  const char *interleaved;  /* the interleaved pipeline schedule */
  const char *sequence_parallel, *offload_params, *nvme_dir, *save_every, *save, *resume, *init;
  const char *val_data, *val_every, *val_tokens;
} zeroc__train_names_t;
extern const zeroc__train_names_t zeroc__train_field_names;

/* Each returns ZEROC_ERR_INVALID_ARG with one message naming the settings
 * by `n`, for the first rule the resolved config `c` breaks. */
/* The shape `g` and tensor parallelism: heads | hidden, tp | heads, sequence
 * parallelism needs tp > 1 and tp | batch x seq. */
zeroc_result_t zeroc__train_check_shape(const zeroc_train_config_t *c, const zeroc_gpt_config_t *g,
                                        int tp, const zeroc__train_names_t *n);
/* A pipeline of `pp` ranks (nothing to check when pp is 1): zero 0 or 1, vpp
 * with the interleaved schedule only and >= 2 there, micro-batches (grad_accum)
 * a multiple of pp there, at least pp x vpp units in `g`. */
zeroc_result_t zeroc__train_check_pipeline(const zeroc_train_config_t *c,
                                           const zeroc_gpt_config_t *g, int pp,
                                           const zeroc__train_names_t *n);
/* The rules of the state and outputs: offload_params needs zero 3, nvme
 * offload needs nvme_dir, save_every needs save, resume excludes init;
 * val_every and val_tokens need val_data, val_every >= 0, val_tokens in
 * 0..ZEROC__VAL_TOKENS_MAX (0: unset). */
#define ZEROC__VAL_TOKENS_MAX 1000000000000LL
zeroc_result_t zeroc__train_check_outputs(const zeroc_train_config_t *c,
                                          const zeroc__train_names_t *n);

#endif
