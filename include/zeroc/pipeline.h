/*
 * zeroc/pipeline.h - pipeline parallelism: cut a model's unit list into
 * stages, and run one optimizer step's micro-batches through them on real
 * ranks with the 1F1B or the interleaved 1F1B schedule.
 *
 * Each pipeline rank builds a model (zeroc_shard, ZeRO stage 0 or 1) of only
 * its own units, v contiguous chunks of the global list (chunk c of rank r is
 * stage c*p + r); the pipeline moves activations forward and their gradients
 * back between neighbouring stages with send/recv on streams of their own, so
 * transfers overlap compute where the schedule allows. Per step:
 *
 *   zeroc_pipeline_run(pl, batches, &stats);  // m micro-batches, forward and backward
 *   zeroc_model_step(model, lr, &info);        // grads reduced once, after the last one
 *
 * The loss and the gradient norm of zeroc_model_step cover the whole pipeline
 * and are identical on every rank. A stage's model runs only through its
 * pipeline: zeroc_model_forward/backward/eval see one stage, not the model;
 * zeroc_pipeline_eval is the pipeline's forward-only evaluation.
 * docs/pp.md has the schedules and figures.
 */
#ifndef ZEROC_PIPELINE_H
#define ZEROC_PIPELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zeroc/export.h"
#include "zeroc/shard.h"
#include "zeroc/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_pipeline_schedule {
  ZEROC_PIPELINE_DEFAULT = ZEROC_UNSET, /* unset: 1F1B */
  ZEROC_PIPELINE_GPIPE = 0,       /* all forwards, then all backwards (m activations alive) */
  ZEROC_PIPELINE_1F1B = 1,        /* one forward, one backward (at most p alive) */
  ZEROC_PIPELINE_INTERLEAVED = 2, /* v chunks per rank, m a multiple of p: bubble / v */
} zeroc_pipeline_schedule_t;

/*
 * A pipeline's settings. Initialise with ZEROC_PIPELINE_CONFIG_INIT: every
 * field starts "unset" (ZEROC_UNSET, see zeroc/types.h) and the library
 * resolves it to the default in brackets when the pipeline is created (or the
 * config is read by zeroc_pipeline_slots / _print_schedule); act_numel has no
 * default and must be set.
 */
typedef struct zeroc_pipeline_config {
  size_t size;                        /* sizeof(zeroc_pipeline_config_t), set by the initializer */
  uint32_t magic;                     /* ZEROC_CONFIG_MAGIC */
  zeroc_pipeline_schedule_t schedule; /* [1F1B] */
  int microbatches;                   /* m >= 1 micro-batches per step (the model's grad_accum) [1] */
  int chunks;       /* v chunks per rank: 1, or > 1 with the interleaved schedule [1] */
  size_t act_numel; /* elements of the activation crossing every stage boundary (its
                       gradient has the same shape), e.g. B*T*C [0: must be set] */
  zeroc_dtype_t act_dtype; /* [fp32] */
} zeroc_pipeline_config_t;

#define ZEROC_PIPELINE_CONFIG_INIT                                                                 \
  {                                                                                                \
    sizeof(zeroc_pipeline_config_t), ZEROC_CONFIG_MAGIC, ZEROC_PIPELINE_DEFAULT, ZEROC_UNSET,      \
        ZEROC_UNSET, 0, ZEROC_DTYPE_UNSET                                                          \
  }

/* "gpipe", "1f1b", "interleaved"; ZEROC_ERR_INVALID_ARG naming the accepted ones. */
ZEROC_API zeroc_result_t zeroc_pipeline_schedule_parse(const char *name,
                                                       zeroc_pipeline_schedule_t *out);

/*
 * Cuts `n` units with costs cost[0..n) into `stages` contiguous, non-empty
 * ranges so that the largest stage's cost is as small as it can be (ties: the
 * earliest cut). bounds[0..stages] receives the cuts: stage s is units
 * [bounds[s], bounds[s+1]). Pure arithmetic. Returns ZEROC_ERR_INVALID_ARG
 * when stages < 1, n < stages (naming both) or a cost is negative or not finite.
 */
ZEROC_API zeroc_result_t zeroc_pipeline_partition(const double *cost, int n, int stages,
                                                  int *bounds);

/*
 * The activation sets (slots) pipeline rank `rank` of `pp` must keep for cfg's
 * schedule: the most micro-batches of one chunk alive at once, from the first
 * action that touches one (a receive may be posted well before its forward)
 * to the end of its backward. 1F1B: min(pp - rank, m). Pure arithmetic.
 * Returns the schedule's validation errors (ZEROC_ERR_INVALID_ARG).
 */
ZEROC_API zeroc_result_t zeroc_pipeline_slots(const zeroc_pipeline_config_t *cfg, int pp, int rank,
                                              int *slots);

/* Prints every rank's action list of cfg's schedule for `pp` ranks (with the
 * communication and its post-together groups when `comm` is set), then the
 * bubble the schedule's simulator finds with equal stages, against
 * (p-1)/(v m). Errors: the schedule's validation errors, ZEROC_ERR_IO. */
ZEROC_API zeroc_result_t zeroc_pipeline_print_schedule(FILE *f, const zeroc_pipeline_config_t *cfg,
                                                       int pp, int comm);

typedef struct zeroc_pipeline zeroc_pipeline_t;

/*
 * Creates the pipeline of this rank. `m` is its model (ZeRO stage 0 or 1, its
 * micro-steps per step, grad_accum or zeroc_model_set_accum's count, equal to
 * microbatches: zeroc_pipeline_run checks it each step; micro-batch slots set
 * here; the model records its pipeline for zeroc_model_eval_mean and for the
 * names of zeroc_model_export / _import);
 * its units are the rank's chunks in order: chunk c is local units
 * [chunk_first[c], chunk_first[c] + chunk_count[c]). Parameters flagged
 * ZEROC_PARAM_TIED on the first and the last stage (a tied embedding) get
 * their gradients summed over the two. Collective over the world; needs
 * pp > 1 in the context's mesh.
 * Returns ZEROC_ERR_INVALID_ARG (a bad config, chunks that do not cover the
 * model's units, a message tag above MPI_TAG_UB, tied parameters that differ
 * between the first and the last stage: the same error on every rank),
 * ZEROC_ERR_UNSUPPORTED (ZeRO stage 2 or 3), ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_pipeline_create(zeroc_model_t *m, const int *chunk_first,
                                               const int *chunk_count,
                                               const zeroc_pipeline_config_t *cfg,
                                               zeroc_pipeline_t **out);

/* Frees the pipeline (local). destroy(NULL) does nothing. */
ZEROC_API void zeroc_pipeline_destroy(zeroc_pipeline_t *p);

/* What one run cost this rank (host clock). On cpu, compute runs on the
 * calling thread, so run_ms - compute_ms is the time this rank's compute
 * stood idle: the bubble. */
typedef struct zeroc_pipeline_stats {
  double run_ms;       /* wall time of zeroc_pipeline_run */
  double compute_ms;   /* forward and backward of this rank's chunks */
  double wait_ms;      /* waiting for receives, send buffers and the final sends */
  double bubble;       /* (run_ms - compute_ms) / run_ms */
  uint64_t sent_bytes; /* activations and gradients this rank sent */
} zeroc_pipeline_stats_t;

/*
 * Runs the forward and backward of every micro-batch through the pipeline:
 * batches[0..m) are the micro-batch inputs (each unit sees its micro-batch as
 * io->batch; the first stage's first unit also as io->in). Every rank passes
 * the same micro-batches (its data-parallel slice). Then call
 * zeroc_model_step. `stats` may be NULL. Collective over the pipeline group.
 * Returns ZEROC_ERR_INVALID_ARG, before anything runs, when the model's count
 * of micro-steps for this step (zeroc_model_accum) is not the pipeline's
 * micro-batches; the model's and the communication's errors; a rank that fails
 * mid step leaves its peers waiting until the communication timeout, so a
 * program should stop the job (zeroc_ctx_abort).
 */
ZEROC_API zeroc_result_t zeroc_pipeline_run(zeroc_pipeline_t *p, const void *const *batches,
                                            zeroc_pipeline_stats_t *stats);

/*
 * Runs the forward of every micro-batch through the pipeline and nothing else
 * (evaluation): the schedule's forwards and activation messages in their
 * order, no gradients, nothing of the training step changes (its loss,
 * gradients and communication figures). *loss receives the mean over the m
 * micro-batches of the loss the last stage computes, the same on every rank
 * of the pipeline group (its mean over the data-parallel ranks:
 * zeroc_ctx_allreduce(ctx, ZEROC_GROUP_DP, loss, 1, ZEROC_AVG)). Call it
 * between steps. Collective over the pipeline group. Errors as
 * zeroc_pipeline_run.
 */
ZEROC_API zeroc_result_t zeroc_pipeline_eval(zeroc_pipeline_t *p, const void *const *batches,
                                             double *loss);

#ifdef __cplusplus
}
#endif
#endif
