/*
 * zeroc/train.h - the trainer: a whole training run of a built-in model
 * (GPT-2, DLRM: any architecture of zeroc/arch.h), owned by the library.
 *
 *   zeroc_train_config_t cfg = ZEROC_TRAIN_CONFIG_INIT;   // every field "unset"
 *   cfg.model = "tiny"; cfg.steps = 200;
 *   zeroc_trainer_t *tr;
 *   zeroc_trainer_create(ctx, &cfg, &tr);     // data, model, pipeline, resume
 *   zeroc_train_metrics_t m;
 *   while (zeroc_trainer_step(tr, &m) == ZEROC_OK && !m.done) printf("%g\n", m.loss);
 *   zeroc_trainer_save(tr, "ckpt");
 *   zeroc_trainer_destroy(tr);
 *
 * The trainer resolves the config, has the model's architecture (zeroc/arch.h)
 * build its run (data, units, shards and, with pp > 1 in the context's mesh,
 * the pipeline) and step it; runs the learning-rate schedule; reports
 * loss and gradient-norm spikes; writes checkpoints at the configured cadence;
 * and checks on resume that the checkpoint belongs to the same model and data.
 * The layout (tp, cp, pp, hsdp, dp) is the context's mesh. Every call but the
 * inspection ones is collective over the context's world.
 */
#ifndef ZEROC_TRAIN_H
#define ZEROC_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/data.h"
#include "zeroc/dlrm.h"
#include "zeroc/export.h"
#include "zeroc/gpt.h"
#include "zeroc/mem.h"
#include "zeroc/pipeline.h"
#include "zeroc/plan.h"
#include "zeroc/shard.h"
#include "zeroc/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_trainer zeroc_trainer_t;

/* The most tokens one evaluation may take (val_tokens). */
#define ZEROC_VAL_TOKENS_MAX 1000000000000LL

/* The longest trailing window the spike report keeps (spike_window). */
#define ZEROC_SPIKE_MAX_WINDOW 1024

typedef enum zeroc_lr_schedule {
  ZEROC_LR_DEFAULT = 0,  /* unset: cosine */
  ZEROC_LR_CONSTANT = 1, /* lr after the warm-up */
  ZEROC_LR_COSINE = 2,   /* cosine from lr down to 10% of lr at the last step */
  ZEROC_LR_LINEAR = 3,   /* straight from lr down to 10% of lr at the last step */
} zeroc_lr_schedule_t;

/*
 * The learning rate of 0-based step `s` of a run of `steps` optimizer steps
 * (the trainer's schedules, for a program driving zeroc_model_step itself):
 * a linear warm-up over the first `warmup` steps (lr x (s+1) / warmup), then
 * `schedule` (DEFAULT: cosine) from lr at step `warmup` down to 10% of lr at
 * the last step, steps - 1 (and there after it). Pure: no context, no state.
 * Returns NaN, with zeroc_last_error(NULL) naming the argument, for a schedule
 * that is not a ZEROC_LR_*, lr not finite or < 0, warmup < 0, steps < 1 or s < 0
 * (zeroc_model_step refuses a NaN rate).
 */
ZEROC_API float zeroc_lr_at(zeroc_lr_schedule_t schedule, double lr, int warmup, int steps, int s);

/*
 * A training run. Initialise with ZEROC_TRAIN_CONFIG_INIT: every field starts
 * unset (the value in brackets is what the library then uses), one sentinel for
 * all, as in every config of zeroc (zeroc/types.h): a number is ZEROC_UNSET
 * (cast to its type), a string NULL, an enum its _DEFAULT (or, where it has
 * none, the value in brackets). zeroc_train_config_resolve applies every
 * default and rule.
 */
typedef struct zeroc_train_config {
  size_t size;    /* sizeof(zeroc_train_config_t), set by the initializer */
  uint32_t magic; /* ZEROC_CONFIG_MAGIC */
  /* the model: a preset of a registered architecture (zeroc/arch.h: "tiny", "small",
   * "gpt2-124m", ..., "dlrm-tiny", "dlrm", ...) with overrides */
  const char *model;                     /* NULL: "tiny" */
  int layers, hidden, heads, vocab, seq; /* [the preset's] */
  int batch;                             /* micro-batch per data-parallel rank [the preset's] */
  int grad_accum; /* micro-steps per step; with a pipeline the micro-batches [1, or pp] */
  /* optimisation */
  int steps;                    /* optimizer steps of the run [100] */
  double lr;                    /* peak learning rate [3e-4] */
  int warmup;                   /* linear warm-up steps [0] */
  zeroc_lr_schedule_t schedule; /* DEFAULT: cosine */
  double weight_decay;          /* [0] */
  double clip;                  /* global grad-norm clip, 0 off [1.0] */
  double beta1, beta2, eps;     /* AdamW [0.9, 0.95, 1e-8] */
  int64_t seed;                 /* initialisation, dropout and data order [1] */
  int max_skipped;              /* consecutive non-finite steps tolerated [5] */
  /* layout and memory (tp, pp, cp, hsdp come from the context's mesh) */
  int zero;              /* ZeRO stage [3, or 1 with a pipeline] */
  int param_dtype;       /* ZEROC_FP32 / ZEROC_BF16 [bf16 on cuda, fp32 on cpu] */
  int recompute;         /* 1: recompute activations in backward [0] */
  int prefetch;          /* gathers in flight [2] */
  int sequence_parallel; /* 1: with tp > 1, sequence parallelism [0] */
  zeroc_offload_t offload_optimizer, offload_params; /* [NONE] */
  const char *nvme_dir;                              /* required with nvme offload */
  zeroc_pipeline_schedule_t pp_schedule;             /* DEFAULT: 1F1B; or INTERLEAVED */
  int vpp;                                           /* model chunks per pipeline rank [1] */
  /* data */
  const char *data; /* "synthetic", or a path or glob of llm.c shards [synthetic] */
  int shuffle;      /* [0] */
  /* state */
  const char *init;        /* weights to start from: a safetensors file, or a transformers
                              save_pretrained directory (its config.json gives the model and
                              shape; model.safetensors or shards + index), or NULL */
  const char *resume;      /* checkpoint directory to resume from, or NULL */
  const char *save;        /* checkpoint directory (checked writable at create), or NULL */
  int save_every;          /* with save: a checkpoint every N steps [0: only at the end] */
  const char *export_path; /* checked writable at create; written by zeroc_trainer_export */
  /* reporting */
  int spike_window;  /* trailing steps a spike is measured against, 2..1024 [50] */
  double spike_z;    /* z-score above which a step is a spike, > 0 [6] */
  int reduce_maxima; /* 1: each step also takes maxima over ranks (peak_device_max,
                        pp_compute_max_ms): one more small all-reduce per step [0] */
  /* evaluation (zeroc_trainer_evaluate; zeroc_trainer_step at the val_every cadence) */
  const char *val_data; /* held-out data: a path or glob of llm.c shards, or "synthetic"
                           (sequences from step 2^32 on, which no run reaches); NULL: none.
                           Opened and checked (shape, vocab) at create */
  int64_t val_tokens;   /* tokens per evaluation, rounded up to whole global batches (at most
                           one pass over val_data's files) [65536]; needs val_data.
                           0 is read as unset too (as callers wrote it before ZEROC_UNSET) */
  int val_every;        /* with val_data: zeroc_trainer_step evaluates after every N-th step
                           and after the run's last [0: never] */
  /* regularisation */
  double dropout; /* GPT-2's attention, residual and embedding dropout, 0 <= p < 1, seeded by
                     `seed`, the same masks in every layout (zeroc_gpt_options_t) [0] */
  /* DLRM (model "dlrm-tiny", "dlrm", "dlrm-mlperf", zeroc/dlrm.h) [the preset's].
   * For DLRM, data is "synthetic" or a Criteo TSV file, val_data likewise (NULL: the
   * training source's held-out samples), val_tokens counts samples [4096], and
   * batch is samples per data-parallel rank. */
  int tables;
  const char *rows;         /* one row count for every table, or a comma list of T */
  int dim, dense;           /* embedding dim, dense features */
  const char *bottom, *top; /* comma lists of MLP widths ("512,256,128", "1024,1,"..) */
  int embedding_sharding;   /* zeroc_embed_sharding_t: [0 auto], 1 table, 2 column, 3 row, 4 data */
  /* context parallelism (the context's cp > 1: each sequence split over the cp ranks) */
  zeroc_cp_mode_t cp_mode; /* attention over the cp group: ring or ulysses; DEFAULT: ring */
  /* checkpoint retention (appended: older callers' smaller structs keep it unset) */
  int save_limit; /* with save: keep the newest N checkpoints in it, deleting an older one only
                     once a new one is complete, never the one `latest` names [0: keep all] */
  /* 1: bitwise-repeatable kernels where a faster non-deterministic one exists (cuda:
   * cuDNN attention's deterministic backward, its workspace sized automatically); the
   * environment's ZEROC_CUDA_DETERMINISTIC=1 does the same for every model [0] */
  int deterministic;
  /* The Llama family's shape (models "llama-tiny", "qwen-tiny", "llama3.2-1b", ...,
   * zeroc/gpt.h's fields of the same names) [the preset's]: kv heads, the MLP's width,
   * q/k/v biases (0/1), an untied LM head (0/1), RMSNorm's epsilon, the rotary base and
   * Llama 3.1's rope scaling (factor 0: none; low and high frequency factors, the
   * original positions). GPT-2 and DLRM refuse them. */
  int kv_heads, ffn, qkv_bias, untied;
  double norm_eps, rope_theta, rope_factor, rope_low, rope_high, rope_original;
  /* The Llama family: the context the model is made for (transformers'
   * max_position_embeddings), at least seq; an init directory's config.json sets it
   * and a save_pretrained export writes it back [seq] */
  int max_positions;
  /* The dtype gradients are summed over data-parallel ranks in (appended): ZEROC_FP32 (as
   * Megatron: 16-bit gradients are accumulated into fp32 buffers that are reduced, so no
   * sum over ranks or micro-steps rounds to 8 bits of mantissa) or ZEROC_BF16 (half the
   * traffic and gradient memory; its rounding error grows with the ranks) [fp32] */
  int grad_reduce_dtype;
} zeroc_train_config_t;

#define ZEROC_TRAIN_CONFIG_INIT                                                                    \
  {                                                                                                \
    sizeof(zeroc_train_config_t), ZEROC_CONFIG_MAGIC, NULL, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, (double)ZEROC_UNSET,      \
        ZEROC_UNSET, ZEROC_LR_DEFAULT, (double)ZEROC_UNSET, (double)ZEROC_UNSET,                   \
        (double)ZEROC_UNSET, (double)ZEROC_UNSET, (double)ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET,   \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_OFFLOAD_NONE,       \
        ZEROC_OFFLOAD_NONE, NULL, ZEROC_PIPELINE_DEFAULT, ZEROC_UNSET, NULL, ZEROC_UNSET, NULL,    \
        NULL, NULL, ZEROC_UNSET, NULL, ZEROC_UNSET, (double)ZEROC_UNSET, ZEROC_UNSET, NULL,        \
        ZEROC_UNSET, ZEROC_UNSET, (double)ZEROC_UNSET, ZEROC_UNSET, NULL, ZEROC_UNSET,             \
        ZEROC_UNSET, NULL, NULL, ZEROC_UNSET, ZEROC_CP_MODE_DEFAULT, ZEROC_UNSET, ZEROC_UNSET,     \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, (double)ZEROC_UNSET,                   \
        (double)ZEROC_UNSET, (double)ZEROC_UNSET, (double)ZEROC_UNSET, (double)ZEROC_UNSET,        \
        (double)ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET                                              \
  }

/* What a step's spike report found (bit 0 the loss, bit 1 the gradient norm). */
typedef enum zeroc_spike {
  ZEROC_SPIKE_NONE = 0,
  ZEROC_SPIKE_LOSS = 1,
  ZEROC_SPIKE_GRAD_NORM = 2,
  ZEROC_SPIKE_BOTH = 3,
} zeroc_spike_t;

/* "none", "loss", "grad_norm", "loss+grad_norm". */
ZEROC_API const char *zeroc_spike_name(zeroc_spike_t s);

/* The figures of one optimizer step. */
typedef struct zeroc_train_metrics {
  int step;         /* 1-based number of this step in the run */
  int done;         /* 1: this was the run's last step (or no step was left) */
  double loss;      /* mean over the global batch (NaN on a skipped step) */
  double lr;        /* the learning rate used */
  double grad_norm; /* global, before clipping */
  double tokens;    /* tokens in the global batch */
  double step_ms;   /* wall time of the step on this rank */
  double tokens_per_s;
  double mfu;             /* model FLOPs utilisation on cuda; 0 where the peak is unknown */
  uint64_t comm_bytes;    /* bytes this rank sent in collectives */
  double exposed_comm_ms; /* time compute waited on communication */
  uint64_t peak_device;   /* this rank's peak device bytes so far */
  uint64_t peak_host;     /* pinned + pageable host */
  int64_t
      peak_device_max; /* the maximum of peak_device over ranks (reduce_maxima), else this rank's */
  uint64_t peak_by_tag[ZEROC_TAG_COUNT]; /* this rank's device peak by tag */
  int skipped;       /* 1: non-finite gradients, the step was skipped on every rank */
  int skipped_total; /* skipped steps in this run so far */
  int spikes_total;  /* spike steps in this run so far */
  zeroc_spike_t spike;
  double loss_z, grad_norm_z; /* the z-scores (NaN while the window fills or when skipped) */
  /* with a pipeline (pipeline = 1): this rank's share of the step's schedule */
  int pipeline;
  double pp_bubble, pp_compute_ms, pp_run_ms;
  double pp_compute_max_ms; /* the slowest stage's compute (reduce_maxima), else this rank's */
  /* evaluation (val_every): evaluated is 1 on the steps that ran one, after the step's
   * update, and val_loss is then what zeroc_trainer_evaluate gives (NaN otherwise). Its
   * time is val_ms, not part of step_ms; its communication is not in comm_bytes. */
  int evaluated;
  double val_loss;
  double val_ms;
  double auc, logloss; /* DLRM, on evaluated steps: over the held-out samples (NaN otherwise) */
} zeroc_train_metrics_t;

/* What the trainer resolved: the run's shape, data and the planner's prediction. */
typedef struct zeroc_train_info {
  zeroc_train_config_t config; /* every "unset" field resolved */
  zeroc_gpt_config_t model;    /* the model's shape and micro-batch */
  uint64_t params;             /* parameters of the whole model */
  zeroc_dtype_t dtype;         /* parameter dtype */
  zeroc_device_kind_t device;
  zeroc_data_info_t data;
  int global_batch; /* sequences per step: batch x grad_accum x dp */
  double tokens_per_step;
  double flops_per_step;
  double peak_flops; /* the world's peak (cuda; ZEROC_PEAK_TFLOPS), 0 when unknown */
  int start_step;    /* steps already done (from the checkpoint resumed) */
  /* evaluation (with val_data): the held-out data, and the global batches one
   * evaluation takes: ceil(val_tokens / tokens_per_step), at least 1, and for
   * files at most val_data's steps_per_epoch (no sequence counted twice) */
  zeroc_data_info_t val;
  int val_batches;
  /* the planner's per-rank prediction for this layout; predicted 0 when it refused one */
  double predicted_device, predicted_host;
  double predicted_by_tag[ZEROC_TAG_COUNT];
  char plan_error[256]; /* why the planner refused, or "" */
  /* DLRM (dlrm = 1): its shape, and on the held-out samples the best achievable
   * figures (the synthetic source's true probabilities; NaN for a file) */
  int dlrm;
  zeroc_dlrm_config_t dlrm_model;
  double auc_ceiling, logloss_floor;
  int dlrm_sharding[ZEROC_DLRM_MAX_TABLES]; /* each table's (zeroc_embed_sharding_t, never
                                               auto), or -1: replicated (ZEROC_DLRM_EMBED=0) */
  /* the model's architecture (zeroc/arch.h), the one config.model names */
  const struct zeroc_arch *arch;
  int dtype_given; /* param_dtype as configured: -1 for "auto" (checkpoints record it) */
  /* The attention kernels in use, in words: "cpu kernels", "cuDNN SDPA ..." or "zeroc's own
   * cuda kernels: <why not cuDNN>" (cuDNN missing, the shape refused, disabled by the
   * environment). Before the first step it says what start-up found; zeroc_trainer_info
   * after a step gives what the step really ran. */
  char attention[320];
} zeroc_train_info_t;

/*
 * Resolves a training config once, for a mesh of `mesh`'s sizes on `device`,
 * without a context or MPI: the model's architecture (config.model) resolves
 * its shape and its own defaults, the library fills every other unset field,
 * and every rule (the fields' ranges, the layout's: zero with a pipeline,
 * offload_params with ZeRO-3, the model's tp, cp and pp rules, the outputs')
 * is checked, each written once. The trainer, `zeroc train` (before MPI
 * starts, with the flags' names), `zeroc plan` and `zeroc bench` all call it.
 *   cfg: from ZEROC_TRAIN_CONFIG_INIT; mesh: the layout (zeroc_ctx_mesh, or
 *   zeroc_mesh_layout_cp for a layout not yet launched); names: how messages
 *   name the settings; out: config (resolved), arch, model or dlrm_model (the
 *   shape), dtype, dtype_given, device and global_batch; the rest zero.
 * Returns ZEROC_ERR_INVALID_ARG with one message naming the first broken rule.
 */
ZEROC_API zeroc_result_t zeroc_train_config_resolve(const zeroc_train_config_t *cfg,
                                          const zeroc_mesh_info_t *mesh, zeroc_device_kind_t device,
                                          zeroc_names_t names, zeroc_train_info_t *out);

/*
 * Builds a training run on `ctx`: checks the outputs (save, export_path),
 * opens the data, builds and shards the model (and the pipeline when the mesh
 * has pp > 1), imports `init` or resumes from `resume` (checking that the
 * checkpoint's model shape and data stream are this run's), and allocates the
 * token buffers. Collective; every failure is agreed on by all ranks.
 *   ctx: a live context; cfg: from ZEROC_TRAIN_CONFIG_INIT; out: the trainer.
 * Returns ZEROC_ERR_INVALID_ARG (an uninitialised or inconsistent config, a
 * checkpoint of another run), ZEROC_ERR_IO, ZEROC_ERR_CORRUPT, ZEROC_ERR_NOMEM,
 * ZEROC_ERR_REMOTE (another rank failed), and the errors of the layers below.
 * zeroc_last_error(ctx) names the failure; zeroc_trainer_create_phase() the
 * part of the set-up that failed.
 */
ZEROC_API zeroc_result_t zeroc_trainer_create(zeroc_ctx_t *ctx, const zeroc_train_config_t *cfg,
                                              zeroc_trainer_t **out);

/* The part of the set-up the calling thread's last zeroc_trainer_create was
 * in: "config", "outputs", "data", "model", "start" or "ready". */
ZEROC_API const char *zeroc_trainer_create_phase(void);

/* Frees everything the trainer holds (local; the context stays). destroy(NULL)
 * does nothing. */
ZEROC_API void zeroc_trainer_destroy(zeroc_trainer_t *tr);

/* Fills `out` with what the trainer resolved. */
ZEROC_API void zeroc_trainer_info(const zeroc_trainer_t *tr, zeroc_train_info_t *out);

/*
 * Runs the next optimizer step: the checkpoint the cadence asked for after
 * the previous step (save_every), then every micro-batch's forward and
 * backward (or the pipeline's schedule), the optimizer step, and at the
 * val_every cadence (and after the run's last step) the evaluation of the
 * updated model. `m` receives the step's figures (m->evaluated, m->val_loss);
 * m->done is 1 after the run's last step (a call after it
 * does nothing and returns ZEROC_OK with m->done set and m->step 0).
 * Returns ZEROC_ERR_NUMERIC after more than max_skipped consecutive non-finite
 * steps, with `m` still filled for this step (every rank agrees on it); the
 * errors of the layers below otherwise (then only this rank may know: stop the
 * job with zeroc_ctx_abort).
 */
ZEROC_API zeroc_result_t zeroc_trainer_step(zeroc_trainer_t *tr, zeroc_train_metrics_t *m);

/*
 * The mean loss over info.val_batches global batches of `val_data`, the same
 * batches at every call (each rank its slices; forward only, through the
 * pipeline when there is one; nothing of the training state changes): the
 * same number on every rank, and in every layout of the same global batch to
 * fp32 rounding. zeroc_trainer_step calls it at the val_every cadence.
 * Collective. Returns ZEROC_ERR_INVALID_ARG when the config has no val_data,
 * the data's, the model's and the pipeline's errors.
 */
ZEROC_API zeroc_result_t zeroc_trainer_evaluate(zeroc_trainer_t *tr, double *loss);

/* Writes a sharded checkpoint of the current step to `dir` (its manifest
 * carries what a resume checks). Collective. */
ZEROC_API zeroc_result_t zeroc_trainer_save(zeroc_trainer_t *tr, const char *dir);

/* Writes the consolidated weights to `path` (safetensors, Hugging Face GPT-2
 * names). Collective. */
ZEROC_API zeroc_result_t zeroc_trainer_export(zeroc_trainer_t *tr, const char *path);

/* Steps done so far in this run's numbering (start_step + steps taken). */
ZEROC_API int zeroc_trainer_steps_done(const zeroc_trainer_t *tr);

/* The sharded model the trainer built (owned by the trainer). */
ZEROC_API zeroc_model_t *zeroc_trainer_model(const zeroc_trainer_t *tr);

/* --print-schedule: writes to `f` the cut of a resolved run (`info`, from
 * zeroc_train_config_resolve) into pp x vpp pipeline stages, each stage's
 * units and share of the cost, then every rank's actions with their
 * communication; tp and act_dtype (the dtype crossing stages) as the run
 * would use them. No context, no MPI. Returns ZEROC_ERR_UNSUPPORTED for a
 * model without a pipeline, the partition's and the schedule's errors,
 * ZEROC_ERR_NOMEM, ZEROC_ERR_IO. */
ZEROC_API zeroc_result_t zeroc_train_print_schedule(FILE *f, const zeroc_train_info_t *info, int pp, int tp,
                                          zeroc_dtype_t act_dtype);

/* The learning rate of 0-based step `s` for a resolved config: zeroc_lr_at
 * with its schedule, lr, warmup and steps. */
ZEROC_API float zeroc_train_lr_at(const zeroc_train_config_t *cfg, int s);

#ifdef __cplusplus
}
#endif
#endif
