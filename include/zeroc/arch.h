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
  zeroc_result_t (*import_weights)(void *self, const char *path);
  zeroc_result_t (*export_weights)(void *self, const char *path);
  /* A sampler holding the current weights, on rank 0 (NULL elsewhere). Collective. */
  zeroc_result_t (*sampler)(void *self, struct zeroc_sampler **out);
  /* Up to `max` prompt tokens from the training data's first sequence. */
  zeroc_result_t (*sample_prompt)(void *self, int max, int32_t *ids, int *n);
} zeroc_arch_t;

/* The architecture that answers to --model `name` (a preset name), or NULL. */
ZEROC_API const zeroc_arch_t *zeroc_arch_find(const char *name);

/* The registered architectures, NULL-terminated. */
ZEROC_API const zeroc_arch_t *const *zeroc_arch_list(void);

#ifdef __cplusplus
}
#endif
#endif
