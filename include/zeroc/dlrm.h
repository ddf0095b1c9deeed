/*
 * zeroc/dlrm.h - the built-in DLRM (Naumov et al. 2019): its shape, presets,
 * and its dense half as zeroc layers.
 *
 *   dense (B, dense) -> bottom MLP (ReLU on every layer) -> z (B, D)
 *   categorical ids  -> embedding bags (zeroc/embed.h)   -> emb (B, T, D)
 *   interaction: [z, the strict upper triangle of the pairwise dot products of
 *                 the F = T + 1 vectors z, emb[:,0], .., emb[:,T-1]]  (B, D + P)
 *   top MLP (ReLU on all but the last layer, which has 1 output) -> logit (B)
 *   loss: binary cross-entropy with logits, mean over the batch
 *
 * The MLPs are ordinary sharded units (zeroc_shard: ZeRO-0..3, HSDP); the
 * tables are model-parallel and live outside the flat shards: the caller runs
 * the embedding bags before zeroc_model_forward and hands their output in the
 * batch, and after zeroc_model_backward finds the gradient of that output in
 * the batch's `dpooled`, for the embedding's backward.
 */
#ifndef ZEROC_DLRM_H
#define ZEROC_DLRM_H

#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"
#include "zeroc/layer.h"
#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZEROC_DLRM_MAX_TABLES 64
#define ZEROC_DLRM_MAX_LAYERS 8

typedef struct zeroc_dlrm_config {
  int tables;                                 /* T, 1..ZEROC_DLRM_MAX_TABLES */
  int64_t rows[ZEROC_DLRM_MAX_TABLES];        /* rows of each table, >= 1 */
  int dim;                                    /* D: embedding dim = the bottom MLP's last width */
  int dense;                                  /* dense (continuous) features, >= 1 */
  int nbottom, bottom[ZEROC_DLRM_MAX_LAYERS]; /* bottom MLP widths; bottom[nbottom-1] == dim */
  int ntop, top[ZEROC_DLRM_MAX_LAYERS];       /* top MLP widths; top[ntop-1] == 1 */
  int batch;                                  /* default micro-batch per data-parallel rank */
  int hot;                                    /* ids per bag in the synthetic data (sum pooling) */
} zeroc_dlrm_config_t;

/*
 * Fills `out` with a named preset:
 *   "dlrm-tiny": 4 tables of 50..400 rows, dim 8, 4 dense, bottom 16-8, top 32-1 (tests);
 *   "dlrm": 8 tables of 1k..100k rows, dim 16, 13 dense, bottom 64-16, top 64-32-1;
 *   "dlrm-mlperf": shaped like the MLPerf DLRM on Criteo Terabyte: 13 dense, the 26 tables
 *     with MLPerf's row counts (max_ind_range 40M: 187.8M rows, 96 GB of fp32 rows,
 *     given exactly, so a machine that cannot hold them is refused where the tables are
 *     built), dim 128, bottom 512-256-128, top 1024-1024-512-256-1.
 * Returns ZEROC_ERR_INVALID_ARG naming the accepted names.
 */
ZEROC_API zeroc_result_t zeroc_dlrm_preset(const char *name, zeroc_dlrm_config_t *out);

/* 1 when `name` is one of the DLRM presets (the trainer's --model switch). */
ZEROC_API int zeroc_dlrm_is_preset(const char *name);

/* Checks a shape: the counts in range, every width and row count >= 1, the
 * bottom MLP ending in dim, the top MLP ending in 1. ZEROC_ERR_INVALID_ARG. */
ZEROC_API zeroc_result_t zeroc_dlrm_config_check(const zeroc_dlrm_config_t *c);

/* Parameters of the MLPs (weights and biases) and of the tables (sum rows x dim). */
ZEROC_API uint64_t zeroc_dlrm_mlp_params(const zeroc_dlrm_config_t *c);
ZEROC_API uint64_t zeroc_dlrm_table_params(const zeroc_dlrm_config_t *c);

/* Width of the interaction's output, the top MLP's input: D + (T+1) T / 2. */
ZEROC_API int zeroc_dlrm_interaction_width(const zeroc_dlrm_config_t *c);

typedef struct zeroc_dlrm zeroc_dlrm_t;

/* One micro-batch, device memory, fp32. */
typedef struct zeroc_dlrm_batch {
  int B;               /* samples, <= the model's batch */
  const float *dense;  /* (B, dense) */
  const float *labels; /* (B) in [0, 1]; NULL: logits only (no loss, no backward) */
  const float *pooled; /* (B, T, D) the embedding bags' output */
  float *dpooled;      /* (B, T, D) backward writes d loss / d pooled here (overwrites): the
                          gradient of this micro-batch's own mean loss, whatever the data-
                          parallel size (as zeroc_embed_backward takes it) */
} zeroc_dlrm_batch_t;

/*
 * Builds the DLRM's dense half for micro-batches of up to `batch` samples on
 * ctx's device: one unit per bottom layer, then one per top layer (the first
 * also computes the interaction, the last the loss). Every rank builds the
 * same list. fp32 only. Returns ZEROC_ERR_INVALID_ARG (a bad shape or batch),
 * ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_dlrm_create(zeroc_ctx_t *ctx, const zeroc_dlrm_config_t *c,
                                           int batch, zeroc_dlrm_t **out);
ZEROC_API void zeroc_dlrm_destroy(zeroc_dlrm_t *d);

/* The unit list for zeroc_shard (owned by the model); *n receives its length. */
ZEROC_API const zeroc_layer_t *zeroc_dlrm_layers(const zeroc_dlrm_t *d, int *n);

/* The logits (B) of the last forward (device memory), for evaluation (AUC). */
ZEROC_API const float *zeroc_dlrm_logits(const zeroc_dlrm_t *d);

#ifdef __cplusplus
}
#endif
#endif
