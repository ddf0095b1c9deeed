/*
 * zeroc/layer.h - how a user describes one unit of a model to zeroc_shard().
 *
 * A unit (an embedding, a transformer block, a head) declares its parameters
 * and a forward and a backward callback. The engine flattens the parameters
 * into one buffer, shards it over the data-parallel group, and gathers it just
 * before each callback; the callbacks see plain views of the full parameters
 * (and, in backward, of the full gradients) in the compute dtype.
 */
#ifndef ZEROC_LAYER_H
#define ZEROC_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/device.h"
#include "zeroc/export.h"
#include "zeroc/result.h"
#include "zeroc/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZEROC_MAX_DIMS 4

typedef enum zeroc_init_kind {
  ZEROC_INIT_NORMAL = 0, /* N(0, scale^2) */
  ZEROC_INIT_ZEROS = 1,
  ZEROC_INIT_ONES = 2,
  ZEROC_INIT_UNIFORM = 3, /* U(-scale, scale) */
  ZEROC_INIT_CUSTOM = 4,  /* init_fn (required: zeroc_shard refuses CUSTOM without one) */
} zeroc_init_kind_t;      /* any other value is refused by zeroc_shard */

/* Parameter flags. */
enum {
  ZEROC_PARAM_NO_DECAY = 1u << 0,      /* no weight decay (biases, norms) */
  ZEROC_PARAM_TP_REPLICATED = 1u << 1, /* identical on every tensor-parallel rank:
                                          counted once in the gradient norm */
  ZEROC_PARAM_TIED = 1u << 2,          /* one of several copies held by different ranks (a
                                          tied embedding on the first and the last pipeline
                                          stage): gradients summed over the copies, counted
                                          once in the gradient norm */
};

struct zeroc_param_desc;

/* Fills dst[0..n) with the values of elements [first, first+n) of the
 * parameter (row-major over its shape). `seed` is the model's seed. Used with
 * ZEROC_INIT_CUSTOM, e.g. by a tensor-parallel layer to draw its slice of the
 * unsplit tensor's values (see zeroc_rng_normal). A large parameter is filled
 * in chunks on several threads at once: the function is called concurrently
 * for disjoint ranges, so it must be a pure function of the element index
 * (no shared state). */
typedef void (*zeroc_init_fn)(float *dst, uint64_t first, size_t n,
                              const struct zeroc_param_desc *p, uint64_t seed, void *user);

typedef struct zeroc_param_desc {
  const char *name;
  int ndim;
  int64_t shape[ZEROC_MAX_DIMS];
  zeroc_init_kind_t init;
  float init_scale;     /* std for NORMAL, bound for UNIFORM */
  uint32_t flags;       /* ZEROC_PARAM_* */
  uint64_t init_stream; /* random stream of this parameter; 0: derived from (unit, index) */
  zeroc_init_fn init_fn;
  void *init_user;
  /* Tensor parallelism (all zero when the parameter is not split): this
   * rank's tensor is a slice of an unsplit tensor of shape tp_full (same
   * ndim). Along dimension tp_dim the unsplit tensor is made of tp_groups
   * equal groups (a fused qkv weight: q | k | v), each cut into tp_size equal
   * slices, and this rank holds slice tp_rank of every group, in group order.
   * Checkpoints use it to re-split a tensor for another tp size, export to
   * rebuild the unsplit tensor, and initialisation to draw each local element
   * at its index in the unsplit tensor (zeroc_param_global_index). */
  int tp_groups; /* 0: not split (replicated on every tp rank, or no tp) */
  int tp_dim, tp_rank, tp_size;
  int64_t tp_full[ZEROC_MAX_DIMS];
} zeroc_param_desc_t;

/*
 * Where a unit's callbacks run, which says what pointers they can take
 * (zeroc_layer_t.callbacks). Every pointer zeroc hands a callback (params,
 * grads, workspace, acts; and the `in`/`out` chain, which zeroc passes along)
 * is memory of the context's device: host memory on a cpu context, GPU memory
 * on a cuda one. Host callbacks on a cuda context are refused rather than moved
 * to the cpu: the context (its device, streams, communicators, other models) is
 * made before zeroc_shard sees a layer list and cannot change device, and a
 * silent fall-back would run a GPU job on the CPU; a program of host callbacks
 * asks for ZEROC_DEVICE_CPU.
 */
typedef enum zeroc_callbacks {
  ZEROC_CALLBACKS_HOST = 0,   /* plain C that reads and writes the pointers on the host: runs
                                 on a cpu context only; zeroc_shard refuses it on a cuda one
                                 (ZEROC_ERR_UNSUPPORTED, naming the unit), ZEROC_DEVICE_AUTO
                                 on a machine with a GPU included. The default (zero), so a
                                 layer list written before this field existed is host code */
  ZEROC_CALLBACKS_DEVICE = 1, /* launches work on io->stream with the device's pointers (cuda
                                 kernels, zeroc's own layers): runs on either device kind */
} zeroc_callbacks_t;

/*
 * What a callback receives. Pointers are device pointers of the context's
 * device (host memory on cpu); params, grads, shared_params and shared_grads
 * are in `dtype`, the compute dtype (fp32 on cpu, whatever the shard config's
 * param_dtype; on cuda the param_dtype).
 */
typedef struct zeroc_layer_io {
  int unit;      /* index of this unit in the layer list */
  int micro;     /* micro-step within the optimizer step (0 .. zeroc_model_accum - 1) */
  int recompute; /* forward: 1 when run again inside backward (activation recompute) */
  int save;      /* forward: 1 when backward will follow from saved activations; 0 on the
                    first forward under recompute (keep only what the next unit needs) */
  void *const *params;        /* per parameter: the full gathered values */
  void *const *grads;         /* backward: per parameter, the full gradient; ACCUMULATE (+=) */
  void *const *shared_params; /* the unit named by `shares` (tied weights), else NULL */
  void *const *shared_grads;  /* backward: its gradients (accumulate), else NULL */
  const void *in;   /* forward: the model input (unit 0) or the previous unit's `out` */
  void *out;        /* forward: set by the callback, passed to the next unit */
  const void *dout; /* backward: gradient w.r.t. `out` (NULL for the last unit) */
  void *din;        /* backward: set by the callback (gradient w.r.t. `in`), passed down */
  zeroc_stream_t *stream; /* compute stream to run on */
  void *workspace;        /* `workspace_bytes` of scratch, valid during the call */
  float grad_scale;       /* the last unit multiplies its loss gradient by this
                             (1 / (this step's micro-steps x data-parallel
                             size); zeroc_model_set_accum chooses the count) */
  float *loss;            /* the last unit's forward writes its mean loss here */
  double *loss_acc;       /* or, instead, adds it to this one fp64 of device memory in
                             stream order (zeroc_k_mean_add in-tree), so that no host
                             waits for it each micro-step; NULL where not offered */
  void *user;             /* the layer's user pointer */
  int slot;               /* which in-flight micro-batch this call belongs to, 0..slots-1:
                             with pipeline parallelism several micro-batches sit between
                             their forward and their backward, so a layer that keeps
                             activations for backward keeps one set per slot; 0 otherwise */
  const void *batch;      /* the micro-batch's model input (what unit 0 gets as `in`), the
                             same for every unit: with pipeline parallelism unit 0 may run
                             on another rank, so a unit that needs the batch (its shape, a
                             loss head's targets) reads it here */
  int eval;               /* forward: 1 in an evaluation (zeroc_model_eval, zeroc_pipeline_eval):
                             no backward follows and nothing of the training state may
                             change (a layer with randomness, such as dropout, turns it off
                             and draws nothing) */
  zeroc_dtype_t dtype;    /* the element type of params, grads, shared_params and shared_grads
                             (ZEROC_FP32 or ZEROC_BF16): a callback written for one type
                             checks it and refuses the other (zeroc_error_set) */
  void *acts;             /* the unit's activation buffer for this `slot`: act_bytes bytes
                             (zeroc_layer_t), 256-byte aligned, the same buffer in the
                             forward and the backward of a micro-batch (and in a recomputed
                             forward), not cleared between them; NULL when act_bytes is 0 */
} zeroc_layer_io_t;

/* zeroc_shard copies a unit's name and its parameter descriptors (names
 * included): the caller's arrays and strings may be freed once it returned.
 * A callback that fails returns its code and says why with zeroc_error_set
 * (zeroc/result.h); the engine adds the unit and the rank to that message. */
typedef struct zeroc_layer {
  const char *name;
  int nparams; /* >= 1 */
  const zeroc_param_desc_t *params;
  int shares; /* -1, or the index of an earlier unit whose parameters this unit also uses
                 (e.g. an LM head tied to the embedding); that unit stays gathered */
  zeroc_result_t (*forward)(zeroc_layer_io_t *io);
  zeroc_result_t (*backward)(zeroc_layer_io_t *io);
  size_t workspace_bytes;
  void *user;
  zeroc_callbacks_t callbacks; /* where forward and backward run: ZEROC_CALLBACKS_HOST (0, the
                                  default) or ZEROC_CALLBACKS_DEVICE; see above */
  /* Activation memory: the bytes this unit keeps from its forward to its backward for
   * ONE micro-batch (what it saves for backward, and its `out` and `din` when it keeps
   * them), on the context's device. zeroc allocates them when the model is built, one
   * buffer per micro-batch in flight (1; a pipeline reallocates them for its slots,
   * zeroc_pipeline_slots), each exactly act_bytes, tagged ZEROC_TAG_ACTIVATIONS in the
   * accountant, and hands the micro-batch's buffer to the callbacks as io->acts (an
   * evaluation's forward gets slot 0's, or its pipeline slot's). So zeroc_ctx_memory's
   * current and peak [ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS] include them and
   * zeroc_model_activation_bytes gives their sum. Fixed for the model's life: size it
   * for the largest micro-batch. 0: none (a unit that keeps its activations elsewhere,
   * e.g. in static arrays, is not counted; memory from zeroc_mem_alloc with
   * ZEROC_TAG_ACTIVATIONS is). Need not agree between ranks. */
  size_t act_bytes;
} zeroc_layer_t;

/* Element count of a parameter (product of its shape). */
ZEROC_API uint64_t zeroc_param_numel(const zeroc_param_desc_t *p);

/* Index (row-major over tp_full) in the unsplit tensor of local element `i`
 * of `p` (row-major over p->shape); `i` itself when p is not split. */
ZEROC_API uint64_t zeroc_param_global_index(const zeroc_param_desc_t *p, uint64_t i);

/* Counter-based random numbers: the same (seed, stream, index) gives the same
 * value on every rank and layout, so a sharded or tensor-split parameter is
 * initialised exactly as the unsplit one. */
ZEROC_API float zeroc_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);
ZEROC_API float zeroc_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index); /* [0, 1) */

#ifdef __cplusplus
}
#endif
#endif
