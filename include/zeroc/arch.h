/*
 * zeroc/arch.h - the model interface: what the trainer, the checkpoint code,
 * the pipeline cutter, the evaluator, the sampler and the exporter need of a
 * model, and the registry that maps --model names to the models built in.
 *
 * An architecture (zeroc_arch_t) is a table of functions, one per model
 * family (GPT-2, DLRM); a run of it is an instance the architecture creates
 * and owns (`self`). The trainer (zeroc/train.h) holds one of each and never
 * knows which model it trains:
 *
 *   resolve, check      the config's model fields -> the shape, in info; the
 *                       model's own defaults and layout rules (tp, cp, pp)
 *   num_units, unit_*   the unit list's length, costs and names (pipeline cuts,
 *                       --print-schedule)
 *   create ... destroy  a run: its data, units, shards (zeroc_shard), pipeline
 *                       and buffers
 *   run_step, evaluate  one optimizer step's micro-batches forward and backward;
 *                       the held-out loss (and the model's own figures)
 *   app_json, resume_fields, save_extra, load_extra
 *                       what a checkpoint's manifest records and a resume must
 *                       match; state outside the flat shards (DLRM's tables)
 *   import_weights, export_weights, sampler, sample_prompt
 *                       external formats (safetensors with Hugging Face names)
 *                       and generation; NULL where the model has none
 *   hf_architectures, hf_config_write, hf_config_read
 *                       the transformers class and its config.json: with
 *                       export_weights' files, a save_pretrained directory
 *   price_check, price_unit, price_stage, figures
 *                       the planner's questions (zeroc/plan.h): the model's
 *                       rules on a layout, each unit's parameters, a pipeline
 *                       stage's activations, buffers and traffic, the FLOPs of
 *                       a step. src/plan adds the engine's share (ZeRO states,
 *                       pools, offload, pipeline buffers) and the time model;
 *                       the model's allocators and these call the same size
 *                       functions, so the prediction is the allocation
 *
 * A new model is its own files in src/model/ implementing this table, and one
 * line in the registry (src/model/registry.c).
 */
#ifndef ZEROC_ARCH_H
#define ZEROC_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zeroc/ctx.h"
#include "zeroc/embed.h"
#include "zeroc/mem.h"
#include "zeroc/mesh.h"
#include "zeroc/pipeline.h"
#include "zeroc/result.h"
#include "zeroc/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zeroc_train_config;
struct zeroc_train_info;
struct zeroc_sampler;

/* ---- what the planner asks of a model (pure arithmetic; no context) ---- */

/* The most embedding tables a stage price reports (a model's own limit is at
 * most this: DLRM's ZEROC_DLRM_MAX_TABLES). */
#define ZEROC_ARCH_MAX_TABLES 64

/* One rank's layout, as the planner prices it. */
typedef struct zeroc_arch_layout {
  int tp, pp, vpp, cp;     /* the mesh's sizes (vpp: model chunks per pipeline rank) */
  zeroc_cp_mode_t cp_mode; /* with cp > 1: ZEROC_CP_MODE_RING or ZEROC_CP_MODE_ULYSSES */
  int sequence_parallel;   /* 1 only with tp > 1 */
  int shard;               /* ranks a flat parameter is sharded over (1 with ZeRO-0) */
  int batch;               /* sequences (samples) of a micro-batch on this rank */
  int microbatches;        /* per optimizer step */
  int act_bytes;           /* bytes of an activation element */
  int recompute;           /* 1: full activation recompute */
  int flash_attention;     /* zeroc_attention_t (zeroc/plan.h): flash or cudnn keep the
                              log-sum-exp, not the scores; cudnn adds its workspace */
  int act_model;           /* zeroc_act_model_t (zeroc/plan.h) */
  /* a training run's device, whose own device-side buffers the model adds, or
   * ZEROC_DEVICE_AUTO for a plan (none) */
  zeroc_device_kind_t device;
  /* data-parallel ranks and the one priced, where a model's state differs by
   * rank (embedding tables placed table-wise), its tables' sharding
   * (zeroc_embed_sharding_t) and the bytes per rank above which a table lives
   * in host memory (0: none) */
  int ranks, rank, embedding_sharding;
  uint64_t host_threshold;
  int deterministic; /* 1: bitwise-repeatable kernels (cuDNN's deterministic backward) */
} zeroc_arch_layout_t;

/* One unit on one tp rank. */
typedef struct zeroc_arch_unit_price {
  double params; /* its flat parameter's elements as the engine lays it out, before ZeRO */
  int pinned;    /* 1: stays gathered, a later unit on the rank uses it (a tied embedding) */
  int block;     /* 1: a repeated layer (tensor- and context-parallel traffic) */
  int output;    /* 1: computes the loss */
} zeroc_arch_unit_price_t;

/* A pipeline rank's share, as the planner counts it (zeroc_arch_unit_price_t flags). */
typedef struct zeroc_arch_stage {
  int units, blocks, output;
  int inflight; /* activation slots: micro-batches alive at once per chunk */
} zeroc_arch_stage_t;

/* What the model holds on that rank, and moves per block and micro-batch. */
typedef struct zeroc_arch_stage_price {
  double activations; /* bytes kept for backward, every slot in flight */
  double buffers;     /* the model's transient buffers (context parallelism, a run's batch) */
  double workspace;   /* backward scratch */
  double boundary;    /* elements of one pipeline-boundary tensor */
  double tp_bytes;    /* bytes of one activation a tensor-parallel collective moves */
  double cp_forward, cp_backward; /* bytes a block's context-parallel exchange sends */
  double attn_flops;              /* forward attention FLOPs of one block on this rank's tokens */
  /* state outside the flat shards (embedding tables), by tag, and in host memory */
  double outside[ZEROC_TAG_COUNT], outside_host;
  /* the tables' placement and cost on the rank (ntables 0: the model has none) */
  int ntables;
  zeroc_embed_sharding_t sharding[ZEROC_ARCH_MAX_TABLES]; /* each table's, never AUTO */
  int owner[ZEROC_ARCH_MAX_TABLES];                       /* table-wise: the owning rank, else -1 */
  zeroc_embed_cost_t embed;
} zeroc_arch_stage_price_t;

/* The size of a step. */
typedef struct zeroc_arch_figures {
  uint64_t params;       /* the whole model's parameters */
  uint64_t dense_params; /* of them, outside embedding tables */
  double tokens;         /* tokens (samples) in the step's sequences */
  double flops;          /* training FLOPs as MFU counts them (6 N per token + attention) */
  double flops_executed; /* FLOPs the kernels execute with the recompute asked for */
} zeroc_arch_figures_t;

/* What the trainer hands an architecture's create: the context, the run's
 * resolved config and shape (info->config; the model writes its data figures,
 * info->data, info->val, info->val_batches and its own fields there) and the
 * shard engine's settings of that config. */
typedef struct zeroc_arch_run {
  zeroc_ctx_t *ctx;
  struct zeroc_train_info *info; /* outlives the run */
  zeroc_shard_config_t shard;
  const char **phase; /* where create is, for zeroc_trainer_create_phase: "data", "model" */
  int weights_only;   /* 1: the units and their shards only (no data, no step buffers, no
                         pipeline): a run to load a checkpoint into and sample from */
} zeroc_arch_run_t;

typedef struct zeroc_arch {
  const char *name;           /* "gpt2", "dlrm" */
  const char *const *presets; /* the --model names it answers to, NULL-terminated */

  /* ---- the configuration (no context, no MPI: `zeroc train` runs them too) ---- */
  /* c->model's preset with c's overrides (the fields not ZEROC_UNSET) -> info's
   * shape fields; writes the resolved shape fields (batch, seq, ...) back into
   * c and fills the model's own defaults. Runs before the common defaults of
   * zeroc_train_config_resolve; `mesh` may be NULL where only the shape is
   * wanted. */
  zeroc_result_t (*resolve)(struct zeroc_train_config *c, const zeroc_mesh_info_t *mesh,
                            struct zeroc_train_info *info);
  /* The layouts the model supports on `mesh` and the rules its shape imposes,
   * after every default is resolved. ZEROC_ERR_INVALID_ARG with one message,
   * naming the settings as `names` (a zeroc_names_t) says. */
  zeroc_result_t (*check)(const struct zeroc_train_config *c, const zeroc_mesh_info_t *mesh,
                          const struct zeroc_train_info *info, int names);
  /* The whole model's units, each one's share of work and memory (summing to
   * 1; the pipeline's cut balances them) and its name ("block 3"). */
  int (*num_units)(const struct zeroc_train_info *info);
  void (*unit_costs)(const struct zeroc_train_info *info, double *cost);
  void (*unit_name)(const struct zeroc_train_info *info, int unit, char *buf, size_t n);

  /* The cut of the resolved run `info` into pp x vpp pipeline stages (each
   * stage's units and share of the cost), then every rank's actions, as the run
   * would build them; NULL: the model has no pipeline. No context, no MPI. */
  zeroc_result_t (*print_schedule)(FILE *f, const struct zeroc_train_info *info, int pp, int tp,
                                   zeroc_dtype_t act_dtype);

  /* ---- a run ---- */
  /* Builds this rank's run: data, units, shards, pipeline (pp > 1), buffers.
   * Collective; every failure agreed on by all ranks. */
  zeroc_result_t (*create)(const zeroc_arch_run_t *run, void **self);
  void (*destroy)(void *self);               /* NULL does nothing */
  zeroc_model_t *(*model)(void *self);       /* the sharded units */
  zeroc_pipeline_t *(*pipeline)(void *self); /* NULL without one */
  /* Every micro-batch of 0-based step `step` forward and backward (and what the
   * model updates outside the shards, at `lr`); the pipeline's figures in *pst. */
  zeroc_result_t (*run_step)(void *self, int step, float lr, zeroc_pipeline_stats_t *pst);
  /* The mean held-out loss, the same on every rank; auc and logloss where the
   * model measures them (may be NULL; set to NaN where it does not). Collective. */
  zeroc_result_t (*evaluate)(void *self, double *loss, double *auc, double *logloss);
  /* Seconds the compute stream waited on the model's own transfers (context
   * parallelism) so far: exposed communication beside the engine's. */
  double (*comm_wait_s)(void *self);

  /* ---- checkpoints ---- */
  /* The manifest's app object of step `step`: the shape and data stream. */
  void (*app_json)(void *self, uint64_t step, char *buf, size_t n);
  const char *const *resume_fields; /* what a resume must match, NULL-terminated */
  /* State outside the flat shards, written before the shards (so `latest` moves
   * only after both exist) and read after them; NULL: none. `dir` is the
   * checkpoint directory (DIR, not DIR/step_<k>). Collective. */
  zeroc_result_t (*save_extra)(void *self, const char *dir, uint64_t step);
  zeroc_result_t (*load_extra)(void *self, const char *dir, uint64_t step);

  /* ---- weights in and out, generation (NULL: the model has none) ---- */
  /* `path`: a weights file, or a transformers save_pretrained directory (import:
   * its weights, one file or shards; export: an existing directory the weights are
   * written into, as save_pretrained lays them out, beside hf_config_write's
   * config.json). Collective. */
  zeroc_result_t (*import_weights)(void *self, const char *path);
  zeroc_result_t (*export_weights)(void *self, const char *path);
  /* A sampler holding the current weights, on rank 0 (NULL elsewhere). Collective. */
  zeroc_result_t (*sampler)(void *self, struct zeroc_sampler **out);
  /* Up to `max` prompt tokens from the training data's first sequence. */
  zeroc_result_t (*sample_prompt)(void *self, int max, int32_t *ids, int *n);

  /* ---- Hugging Face transformers (NULL: the model has no transformers class) ---- */
  /* The classes of a config.json's "architectures" it reads and writes
   * ("GPT2LMHeadModel"), NULL-terminated. */
  const char *const *hf_architectures;
  /* The config.json that goes with export_weights' files of the run (its shape,
   * as transformers' class names the keys; dtype float32), as malloc'd text. */
  zeroc_result_t (*hf_config_write)(void *self, char **json);
  /* A config.json's shape into c's shape fields (c->model becomes a name this
   * architecture answers to); `seq` no longer than its positions. A field of c
   * already set to another value, a key the model cannot honour (another
   * activation, untied embeddings where they must be tied, ...) or a missing
   * key: ZEROC_ERR_INVALID_ARG naming the key, its value and the setting as
   * `names` (zeroc_names_t) says. No context. */
  zeroc_result_t (*hf_config_read)(const char *json, size_t n, struct zeroc_train_config *c,
                                   int names);

  /* ---- pricing (zeroc/plan.h; NULL: the planner cannot price the model) ---- */
  /* The shape (L NULL), or the layout `L`, as the planner takes them:
   * ZEROC_ERR_INVALID_ARG with one message naming the settings as `names` (a
   * zeroc_names_t) says, for a shape or split the model refuses (heads not
   * divisible by tp, ...) or a run the planner cannot price. */
  zeroc_result_t (*price_check)(const struct zeroc_train_info *info, const zeroc_arch_layout_t *L,
                                int names);
  /* Unit u (0 .. num_units - 1) on one tp rank. */
  void (*price_unit)(const struct zeroc_train_info *info, const zeroc_arch_layout_t *L, int u,
                     zeroc_arch_unit_price_t *out);
  /* A pipeline rank holding `st`. Errors: the embedding plan's. */
  zeroc_result_t (*price_stage)(const struct zeroc_train_info *info, const zeroc_arch_layout_t *L,
                                const zeroc_arch_stage_t *st, zeroc_arch_stage_price_t *out);
  /* `sequences` sequences (samples) of one step; recompute 1: full. */
  void (*figures)(const struct zeroc_train_info *info, double sequences, int recompute,
                  zeroc_arch_figures_t *out);
} zeroc_arch_t;

/* The architecture that answers to --model `name` (a preset name), or NULL. */
ZEROC_API const zeroc_arch_t *zeroc_arch_find(const char *name);

/* The registered architectures, NULL-terminated. */
ZEROC_API const zeroc_arch_t *const *zeroc_arch_list(void);

/* The architecture that reads and writes transformers' class `name` (a
 * config.json's "architectures" entry, "GPT2LMHeadModel"), or NULL. */
ZEROC_API const zeroc_arch_t *zeroc_arch_find_hf(const char *name);

#ifdef __cplusplus
}
#endif
#endif
