/*
 * zeroc/shard.h - a sharded model: zeroc_shard() and the training calls.
 *
 * zeroc_shard() flattens each unit's parameters into one buffer, shards it
 * over the data-parallel group (ZeRO stage 1-3; HSDP: shard inside
 * dp_shard, replicate across dp_replicate) and allocates exactly the buffers
 * the stage keeps. Then, per optimizer step:
 *
 *   for (u = 0; u < grad_accum; u++) {
 *     zeroc_model_forward(model, input[u]);   // gathers unit i+1 while unit i runs
 *     zeroc_model_backward(model);            // reduce-scatters unit i while unit i-1 runs
 *   }
 *   zeroc_model_step(model, lr, &info);        // grad norm, clip, the optimizer on the shards
 *
 * grad_accum is the default count; zeroc_model_set_accum chooses another
 * before any step begins (1, then 4, then 2, ...), and io->grad_scale and the
 * step's loss follow the count of the step they belong to.
 *
 * With the same world size and data, stages 1, 2 and 3 give bitwise identical
 * parameters (grad_accum 1; with accumulation stage 1 sums full gradients
 * before reducing, so it agrees to rounding).
 *
 * Besides the shards, stage 3 keeps min(prefetch + 1, units) gather buffers and
 * stages 2-3 two full-gradient buffers, each the size of the largest unit (a unit
 * another one shares keeps its own pair): memory that a model of few large units
 * notices. On a shard group of one rank the shards are whole and serve in their
 * place: no gather or full-gradient buffers (unless the parameters are offloaded,
 * or micro-steps accumulate into an fp32 shard). `zeroc plan` prints them as
 * "buffers" (docs/plan.md, "Buffers").
 */
#ifndef ZEROC_SHARD_H
#define ZEROC_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"
#include "zeroc/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_model zeroc_model_t;

/*
 * At most this many models can be alive at once on one context (a fourth
 * zeroc_shard fails with ZEROC_ERR_INVALID_ARG naming the limit; destroy one
 * first; there is no limit on models built one after another). Why: each
 * model's gather and reduce streams issue collectives that must overlap, and
 * collectives on one MPI or NCCL communicator serialise, so every stream owns
 * one of the context's duplicated communicators ("channels"), which each
 * group creates once, collectively, when the context is made: 8 per group,
 * one for the compute stream, one for point-to-point, 6 for the models.
 * Streams a program makes with zeroc_stream_create take channels too.
 */
#define ZEROC_MAX_MODELS 3

/* The optimizer zeroc_model_step runs on every shard. Its state is the fp32
 * master plus up to two moment buffers per parameter (ZEROC_STATE_MOMENT1/2). */
typedef enum zeroc_optimizer {
  ZEROC_OPTIMIZER_UNSET = ZEROC_UNSET, /* a config's "unset": the library's default (AdamW) */
  ZEROC_OPTIMIZER_ADAMW = 0, /* AdamW, decoupled weight decay; moment 1 = m, moment 2 = v */
} zeroc_optimizer_t;

/*
 * The settings of zeroc_shard(). Initialise with ZEROC_SHARD_CONFIG_INIT: every
 * field starts "unset" (ZEROC_UNSET, see zeroc/types.h; offloads start NONE,
 * nvme_dir NULL) and the library resolves it to the default in brackets when
 * the model is created, so a default can change without recompiling the
 * caller. Any other value is used as given.
 */
typedef struct zeroc_shard_config {
  size_t size;    /* sizeof(zeroc_shard_config_t), set by the initializer */
  uint32_t magic; /* ZEROC_CONFIG_MAGIC */
  int stage;      /* ZeRO stage 0-3 [3] */
  zeroc_dtype_t param_dtype;  /* gathered/compute params: fp32 or bf16 [fp32] */
  zeroc_dtype_t reduce_dtype; /* full gradients and their reduction: fp32 or bf16 [fp32] */
  int prefetch;   /* gathers in flight ahead of compute (stage 3); 0 disables [2] */
  int recompute;  /* 1: run each unit's forward again inside backward [0] */
  int grad_accum; /* micro-steps per optimizer step, the default of every step (>= 2:
                     the buffers accumulate, so zeroc_model_set_accum may ask any
                     count) [1] */
  zeroc_offload_t offload_optimizer; /* master, m, v: device (none), host (cpu) or nvme [none] */
  zeroc_offload_t offload_params;    /* stage 3 parameter shards: none, cpu or nvme [none] */
  const char *nvme_dir;              /* required with nvme [NULL] */
  float beta1, beta2, eps, weight_decay; /* the optimizer's (AdamW) [0.9, 0.95, 1e-8, 0] */
  float clip;          /* global gradient-norm clip; 0 turns clipping off [1] */
  uint64_t seed;       /* initialisation seed [1] */
  int max_skipped;     /* consecutive non-finite steps tolerated [5] */
  zeroc_optimizer_t optimizer; /* the update rule of zeroc_model_step [adamw] */
} zeroc_shard_config_t;

#define ZEROC_SHARD_CONFIG_INIT                                                                    \
  {                                                                                                \
    sizeof(zeroc_shard_config_t), ZEROC_CONFIG_MAGIC, ZEROC_UNSET, ZEROC_DTYPE_UNSET,              \
        ZEROC_DTYPE_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_OFFLOAD_NONE,              \
        ZEROC_OFFLOAD_NONE, NULL, (float)ZEROC_UNSET, (float)ZEROC_UNSET, (float)ZEROC_UNSET,      \
        (float)ZEROC_UNSET, (float)ZEROC_UNSET, (uint64_t)ZEROC_UNSET, ZEROC_UNSET,                \
        ZEROC_OPTIMIZER_UNSET                                                                      \
  }

/*
 * Builds a sharded model from `n` units and initialises the parameters
 * (each rank only its shard, from counter-based random numbers, so every
 * layout starts from the same weights). Collective over the world.
 *   ctx: the context (its mesh gives dp_shard / dp_replicate); layers: the unit
 *   list, identical on every data-parallel rank (checked with a checksum);
 *   n >= 1; cfg: ZEROC_SHARD_CONFIG_INIT-initialised (NULL: every field unset);
 *   out: the model.
 * The model copies what it keeps of `layers`: each unit's name, its parameter
 * descriptors and their names, so the caller may free or reuse those arrays
 * and strings as soon as zeroc_shard returns. It keeps, and calls, only the
 * pointers the caller means it to: the callbacks, `user` and each parameter's
 * init_fn / init_user (used during zeroc_shard only).
 * Returns ZEROC_ERR_INVALID_ARG (a NULL or dead ctx, a NULL layers or out, bad
 * stage, dtype or optimizer, a unit without parameters or with a zero-size
 * one, an init kind that is not a ZEROC_INIT_* or ZEROC_INIT_CUSTOM without
 * init_fn, a `shares` index that is not earlier, layer lists that differ
 * between ranks: the same error on every rank; ZEROC_MAX_MODELS models already
 * alive on ctx; a `callbacks` that is no ZEROC_CALLBACKS_*), ZEROC_ERR_UNSUPPORTED
 * (a unit with host callbacks, ZEROC_CALLBACKS_HOST, on a cuda context: zeroc/layer.h),
 * ZEROC_ERR_NOMEM (activation buffers included).
 */
ZEROC_API zeroc_result_t zeroc_shard(zeroc_ctx_t *ctx, const zeroc_layer_t *layers, int n,
                                     const zeroc_shard_config_t *cfg, zeroc_model_t **out);

/* Frees the model's buffers (local). destroy(NULL) does nothing; a second
 * destroy of the same handle (or of one zeroc_shard did not make) frees
 * nothing and says so in zeroc_last_error(NULL): a destroyed handle's magic is
 * cleared and its few bytes stay allocated a while, so that a use after
 * destroy is caught as well (ZEROC_ERR_INVALID_ARG, "not a live model"). */
ZEROC_API void zeroc_model_destroy(zeroc_model_t *m);

/* Runs the forward pass of one micro-step on `input` (given to unit 0). The
 * last unit's loss is kept for zeroc_model_step. */
ZEROC_API zeroc_result_t zeroc_model_forward(zeroc_model_t *m, const void *input);

/* Runs a forward pass that will have no backward (evaluation): nothing of the
 * training step changes. *loss (may be NULL) receives this rank's loss from
 * the last unit; zeroc_model_eval_mean gives the mean over the data-parallel
 * ranks. Local: no collective beyond the forward's own gathers. */
ZEROC_API zeroc_result_t zeroc_model_eval(zeroc_model_t *m, const void *input, float *loss);

/* zeroc_model_eval, then *loss becomes the mean of the data-parallel ranks'
 * losses (the group ZEROC_GROUP_DP: dp x cp ranks; tensor-parallel ranks hold
 * the same loss already), identical on each of them: the global batch's mean
 * loss when every rank's micro-batch has the same size (each rank's loss
 * counts once). Collective over ZEROC_GROUP_DP.
 * A model that is one stage of a pipeline (pp > 1) evaluates through its
 * pipeline (zeroc_pipeline_create must have run): `input` goes through every
 * stage in order, one micro-batch, forward only, and the last stage's loss is
 * averaged over the data-parallel ranks and given to every rank of every stage.
 * Collective over the world then; the pipeline's own zeroc_pipeline_eval runs
 * its m micro-batches instead.
 * Returns zeroc_model_eval's errors, ZEROC_ERR_INVALID_ARG for a NULL loss or
 * a pipeline stage whose pipeline was not created, ZEROC_ERR_REMOTE on the
 * other ranks when the evaluation failed on one (a stage that fails mid-pipeline
 * leaves the later stages waiting for its activations until the communication
 * timeout), ZEROC_ERR_MPI / _TIMEOUT from the all-reduce. */
ZEROC_API zeroc_result_t zeroc_model_eval_mean(zeroc_model_t *m, const void *input, double *loss);

/* Runs the backward pass of the micro-step whose forward ran last. */
ZEROC_API zeroc_result_t zeroc_model_backward(zeroc_model_t *m);

/*
 * Chooses the micro-steps (forward and backward pairs) of the optimizer steps
 * from the next one on, until it is called again: `micro_steps` >= 1, or 0 for
 * the model's grad_accum (its default). Call it between steps: before a step's
 * first forward or after zeroc_model_step. Each micro-step's loss gradient is
 * scaled by io->grad_scale = 1 / (micro_steps x dp) and the step's loss is the
 * mean over its micro-steps and the data-parallel ranks, so a step of 4
 * micro-batches of b rows computes what one of 1 micro-batch of 4b rows does.
 * Collective over the world: every rank calls it with the same count (the
 * reductions fire after the count-th backward); ranks that choose different
 * counts, or one that refuses, make it fail on every rank and keep the count
 * (a rank that does not call it makes the others fail with ZEROC_ERR_TIMEOUT
 * after the context's timeout). With a pipeline, the count
 * must equal its micro-batches (zeroc_pipeline_run refuses another).
 * Counts above 1 need buffers that accumulate: a model made with grad_accum
 * >= 2 takes any count; one made with grad_accum 1 takes them only at ZeRO
 * stage 0-1 with fp32 gradients (reduce dtype and, on one rank, parameters),
 * where accumulating needs no buffer of its own. The count is no part of a
 * checkpoint: a model made anew starts with its grad_accum.
 * Returns ZEROC_ERR_INVALID_ARG (a NULL or dead model; micro_steps < 0; a
 * change in the middle of a step, naming the micro-steps done; a count above 1
 * the buffers cannot accumulate, naming the stage and the remedy; counts that
 * differ between ranks, naming the range), ZEROC_ERR_MPI, ZEROC_ERR_TIMEOUT.
 */
ZEROC_API zeroc_result_t zeroc_model_set_accum(zeroc_model_t *m, int micro_steps);

/* The micro-steps of the current (or next) optimizer step; -1 for a NULL or
 * destroyed model. */
ZEROC_API int zeroc_model_accum(const zeroc_model_t *m);

typedef struct zeroc_step_info {
  uint64_t step;          /* optimizer steps applied so far (skipped ones not counted) */
  float loss;             /* mean loss over the global batch, identical on every rank */
  float grad_norm;        /* global gradient norm before clipping */
  int skipped;            /* 1: non-finite norm, the step was skipped on every rank */
  int consecutive_skips;
  uint64_t comm_bytes;    /* bytes this rank sent in collectives this step (ring count) */
  double exposed_comm_ms; /* time compute waited on communication this step */
} zeroc_step_info_t;

/*
 * Finishes the optimizer step: waits for the reductions, computes the global
 * gradient norm, clips, skips the step on a non-finite norm (on every rank),
 * runs the optimizer (cfg->optimizer: AdamW) with learning rate `lr` on every
 * shard, and publishes the new parameters. `info` (may be NULL) receives the
 * step's figures.
 * Returns ZEROC_ERR_NUMERIC after more than max_skipped consecutive skips.
 */
ZEROC_API zeroc_result_t zeroc_model_step(zeroc_model_t *m, float lr, zeroc_step_info_t *info);

/* ---- inspection and state (checkpoints, export, tests) --------------------------
 * Every call below checks its handle, indices and pointers: a NULL or destroyed
 * model, a unit or parameter index out of range or a NULL output gives
 * ZEROC_ERR_INVALID_ARG, or, where the call returns a value, the impossible one
 * it names (-1, UINT64_MAX, NULL, 0), with a one-line message in
 * zeroc_last_error (the model's context's, or the thread's for a NULL model). */

typedef struct zeroc_unit_info {
  const char *name;
  uint64_t numel;      /* real parameter elements */
  uint64_t flat_numel; /* N: flat length with alignment and padding */
  uint64_t shard_numel;/* S = N / shard group size */
  uint64_t shard_offset; /* this rank's first element in the flat buffer */
  int nparams;
} zeroc_unit_info_t;

/* The number of units; -1 for a NULL or destroyed model. */
ZEROC_API int zeroc_model_num_units(const zeroc_model_t *m);
ZEROC_API zeroc_result_t zeroc_model_unit_info(const zeroc_model_t *m, int unit,
                                               zeroc_unit_info_t *out);
/* Offset of parameter `p` of `unit` in the flat buffer; UINT64_MAX when there
 * is no such parameter. */
ZEROC_API uint64_t zeroc_model_param_offset(const zeroc_model_t *m, int unit, int p);
/* The descriptor of parameter `p` of `unit`: the model's copy of what was
 * given to zeroc_shard, valid until zeroc_model_destroy; NULL when there is no
 * such parameter. */
ZEROC_API const zeroc_param_desc_t *zeroc_model_param_desc(const zeroc_model_t *m, int unit, int p);

/* Where this rank sits in the model's sharding: its shard group (rank, size)
 * and its replica index (HSDP, or dp for stage 0); replica 0 holds the copy a
 * checkpoint writes. Each output may be NULL; a dead model gives -1, 0, -1. */
ZEROC_API void zeroc_model_shard_layout(const zeroc_model_t *m, int *shard_rank, int *shard_size,
                                        int *replica);

typedef enum zeroc_state_kind {
  ZEROC_STATE_MASTER = 0,  /* fp32 master weights */
  ZEROC_STATE_MOMENT1 = 1, /* the optimizer's first moment (AdamW: m) */
  ZEROC_STATE_MOMENT2 = 2, /* the optimizer's second moment (AdamW: v) */
  ZEROC_STATE_GRAD = 3,    /* the reduced gradient shard (read only; valid after the last
                              micro-step's backward, before zeroc_model_step) */
  ZEROC_STATE_COUNT
} zeroc_state_kind_t;

/* Copies this rank's shard (S fp32 values) of a state buffer to / from host
 * memory `buf` (synchronously). Setting MASTER changes the master weights only:
 * the compute parameters the callbacks see follow after zeroc_model_sync_params
 * (call it once after the set_shard calls, on every rank). */
ZEROC_API zeroc_result_t zeroc_model_get_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind,
                                               float *buf);
ZEROC_API zeroc_result_t zeroc_model_set_shard(zeroc_model_t *m, int unit, zeroc_state_kind_t kind,
                                               const float *buf);
/* Publishes the master weights to the compute parameters after set_shard calls
 * (collective over the shard group). */
ZEROC_API zeroc_result_t zeroc_model_sync_params(zeroc_model_t *m);

/* Gathers the full fp32 master values of `unit` (flat_numel floats) into host
 * `buf` on every rank. Collective over the shard group. */
ZEROC_API zeroc_result_t zeroc_model_gather_unit(zeroc_model_t *m, int unit, float *buf);

/* ---- export and import of the parameters by name --------------------------------
 * One safetensors file (F32, "__metadata__" format "pt", producer "zeroc") holding
 * every parameter's fp32 master values, consolidated from any layout: ZeRO stage
 * 0-3, HSDP, and tensor-parallel parameters rebuilt to their unsplit shape (tp_full,
 * from the tp_* fields of their descriptors). A file exported by one layout imports
 * into any other layout of the same layer list, and opens in Python with
 * safetensors' load_file.
 * Tensor names: "<unit name>.<parameter name>", e.g. "fc1.w". When several units
 * share a name, each gets its place among the units of that name:
 * "block.0.w", "block.1.w", ... (the k-th unit called "block", counting from 0).
 * A unit without a name is called "unit"; a parameter without a name goes by its
 * index ("head.0"). Two parameters that would get the same name (a unit "a.b"
 * with parameter "c" beside a unit "a" with parameter "b.c") are refused, naming
 * both. Names are at most 255 bytes.
 * Pipelines (pp > 1): each stage's model holds only its own units; the stages
 * exchange their lists of names and shapes, so that names and order are the
 * whole model's (the file is the one the unsplit layer list writes, byte for
 * byte). A stage's place is its pipeline rank, or, once zeroc_pipeline_create
 * registered its chunks, stage c x pp + r for chunk c of pipeline rank r (call
 * it first with several chunks per rank). Export brings every stage's tensors
 * to world rank 0; import reads on each rank the tensors of its own units (and
 * checks the whole file against the whole model). Tied copies
 * (ZEROC_PARAM_TIED on the first and the last stage) are two tensors under
 * their own units' names. */

/*
 * Writes the model's parameters to `path` (through a temporary name: nothing
 * appears at `path` unless the whole file was written). Every rank gathers each
 * unit in turn (one unit's flat buffer and its largest tensor in host memory),
 * world rank 0 writes. Collective over the world; the model's training state
 * is unchanged.
 * Returns ZEROC_ERR_INVALID_ARG (a NULL or dead model, a NULL or empty path, two
 * parameters under one name or a name too long), ZEROC_ERR_UNSUPPORTED (a tensor
 * split over tp ranks of more than 2^31-1 elements), ZEROC_ERR_IO
 * (rank 0 could not write; the others get ZEROC_ERR_REMOTE with its message),
 * ZEROC_ERR_NOMEM and the gathers' errors; every rank returns an error when one
 * fails.
 */
ZEROC_API zeroc_result_t zeroc_model_export(zeroc_model_t *m, const char *path);

/*
 * Replaces the model's weights by the tensors of `path` (written by
 * zeroc_model_export from any layout, or by any program that uses the same
 * names and shapes; F32, BF16 or F16 values, read as fp32): every rank reads
 * the tensors of its units and keeps its own slice and shard, then the compute
 * parameters are republished. The optimizer's moments and the step count are
 * not touched. The file must hold exactly the model's tensors: a missing one,
 * one of another shape (both shapes named) or one the model does not have is
 * refused, and the model is left unchanged on every rank. Collective over the
 * world.
 * Returns ZEROC_ERR_INVALID_ARG (a NULL or dead model, a NULL or empty path,
 * the file's tensors not the model's, names as for export), ZEROC_ERR_IO /
 * ZEROC_ERR_CORRUPT (the file cannot be read or is no
 * safetensors file), ZEROC_ERR_NOMEM; ZEROC_ERR_REMOTE on the ranks where the
 * reason lay on another.
 */
ZEROC_API zeroc_result_t zeroc_model_import(zeroc_model_t *m, const char *path);

/* Optimizer steps applied (0 for a dead model); set when resuming from a checkpoint. */
ZEROC_API uint64_t zeroc_model_steps(const zeroc_model_t *m);
ZEROC_API void zeroc_model_set_steps(zeroc_model_t *m, uint64_t steps);

/* The context the model was built on (NULL for a dead model). */
ZEROC_API zeroc_ctx_t *zeroc_model_ctx(const zeroc_model_t *m);

/* Bytes of model state (params, grads, optimizer) this rank holds persistently. */
ZEROC_API uint64_t zeroc_model_state_bytes(const zeroc_model_t *m);

/* Bytes of the activation buffers this rank holds for the units' act_bytes
 * (zeroc/layer.h): the sum over units of act_bytes x micro-batch slots, the same
 * bytes zeroc_ctx_memory counts under [ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS] for
 * this model; 0 for a dead model or one whose units registered none. */
ZEROC_API uint64_t zeroc_model_activation_bytes(const zeroc_model_t *m);

/* ---- planning before launch ---------------------------------------------------------- */

/* What zeroc_shard_predict fills: bytes per memory kind and tag, as zeroc_ctx_memory's
 * peak[kind][tag] counts them (zeroc/mem.h), for one rank; total[kind]: their sum. */
typedef struct zeroc_mem_prediction {
  uint64_t bytes[ZEROC_MEM_KIND_COUNT][ZEROC_TAG_COUNT];
  uint64_t total[ZEROC_MEM_KIND_COUNT];
} zeroc_mem_prediction_t;

/*
 * Predicts, without MPI and without opening a device, the memory zeroc_shard and the
 * steps after it allocate on one rank for this layer list: the bytes the accountant
 * (zeroc_ctx_memory) then shows as the model's peak per kind and tag, to the byte. The
 * engine sizes its buffers with the same functions (src/shard/sizes.c), so the two
 * cannot drift; tests/test_shard_predict.c checks them equal on 1, 2 and 4 ranks.
 *   layers, n: the unit list this rank will pass to zeroc_shard (a pipeline stage: its
 *   own units); cfg: its zeroc_shard_config_t (NULL: every field unset); ctx_cfg: the
 *   zeroc_ctx_config_t the context will be made with: its device (ZEROC_DEVICE_CPU or
 *   _CUDA; AUTO is refused, since only an opened device says which) and mesh (tp, pp,
 *   cp, hsdp); world: the ranks of that context (>= 1); slots: the activation sets
 *   each unit keeps, 1 for a model trained with zeroc_model_forward/backward, or
 *   zeroc_pipeline_slots' count for a pipeline stage (0: 1); out: the prediction.
 * Counted (bytes of this rank; every rank of a data-parallel group gets the same):
 *   params, grads, optimizer: the shards and full buffers of the ZeRO stage, in the
 *     dtypes and places of cfg (device, or pinned host memory with cpu offload, where
 *     the optimizer's fp32 master counts as params);
 *   buffers: the gather, full-gradient and reduce-scatter pools, a pinned unit's own
 *     buffers, offload's staging copies (pinned, rounded to the pool's size classes);
 *   activations: the sum over units of act_bytes x slots (zeroc_layer_t.act_bytes);
 *   workspace: the largest workspace_bytes, the compute-dtype copies, AdamW's fp32
 *     shard copy with 16-bit gradients, the step's accumulators, and on cuda the
 *     engine's kernels' own workspace (cuBLASLt, scratch: ZEROC_CUDA_SCRATCH_MB).
 * Left out: what the context itself holds (communicators, its own kernels), memory
 * the callbacks allocate themselves, a pipeline's boundary tensors and gradient
 * buffers (zeroc_pipeline_create, counted as activations and buffers), NVMe offload's
 * swap files and the swapper's host bounce pages, and on cuda the short-lived
 * workspace of a host-to-device view (checkpoint import, offloaded state without a
 * staging buffer) and the CUDA runtime's, cuBLAS' and NCCL's own memory.
 * Returns ZEROC_ERR_INVALID_ARG (a NULL layers, ctx_cfg or out; n < 1; world < 1; a
 * slots < 0; a bad shard config, as zeroc_shard; device AUTO or unknown; a mesh that
 * does not divide world; a unit without parameters or sharing a later unit; HSDP at
 * stage 0; pp > 1 with stage 2-3), ZEROC_ERR_UNSUPPORTED (host callbacks on cuda),
 * ZEROC_ERR_NOMEM; one line in zeroc_last_error(NULL). Local and thread-safe.
 */
ZEROC_API zeroc_result_t zeroc_shard_predict(const zeroc_layer_t *layers, int n,
                                             const zeroc_shard_config_t *cfg,
                                             const zeroc_ctx_config_t *ctx_cfg, int world,
                                             int slots, zeroc_mem_prediction_t *out);

#ifdef __cplusplus
}
#endif
#endif
