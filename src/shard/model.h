/*
 * shard/model.h - the sharded model's insides: units, their buffers per ZeRO
 * stage, the buffer pools and the streams. Shared by the files of src/shard (and
 * the pipeline, through shard/engine.h); their functions are in shard/engine.h
 * and, for the offloaded state, shard/offload.h.
 *
 * Buffers per unit (N flat length, S = N / shard size; see the README, "The engine API"):
 *   stage | master,m,v | compute params          | full grads               | grad shard
 *   0     | N fp32     | full N (persistent)     | N (persistent)           | = full grads
 *   1     | S fp32     | full N (persistent)     | N (persistent)           | view of full grads
 *   2     | S fp32     | full N (persistent)     | pool slot, per backward  | S
 *   3     | S fp32     | shard S + pool slot     | pool slot, per backward  | S
 * With fp32 params on the device (nothing offloaded) the master is not a buffer of
 * its own but the compute shard itself (master_alias; shard/sizes.h). On a shard
 * group of one, stage 3's pool slot is the compute shard itself and stages 2-3's
 * full grads are the grad shard (zeroc__shard_alias): no gather, no reduce-scatter
 * copy, no pool.
 * Stage 0 is the degenerate HSDP layout: shard group of one, all-reduce over dp.
 * Units used by a later unit (`shares`, tied weights) are pinned: they keep
 * dedicated gather and gradient buffers from first to last use in a step.
 */
#ifndef ZEROC_SHARD_MODEL_H
#define ZEROC_SHARD_MODEL_H

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "offload/offload.h"
#include "runtime/runtime.h"
#include "shard/flat.h"
#include "shard/sizes.h"
#include "zeroc/shard.h"

typedef struct zeroc__slot {
  void *ptr;
  zeroc_event_t *free_ev; /* recorded where the last user finished with ptr */
  int busy;
} zeroc__slot_t;

typedef struct zeroc__pool {
  zeroc__slot_t *s;
  int n;
  size_t bytes;
} zeroc__pool_t;

typedef struct zeroc__unit {
  zeroc_layer_t L; /* the caller's unit, its name and parameter descriptors copied (owned) */
  zeroc__flat_t f;
  int pinned; /* a later unit shares its parameters */

  /* persistent state */
  float *master, *m, *v; /* S fp32 (optimizer tag) */
  void *cshard;          /* compute shard: S param dtype (stage 3) or a view into full */
  void *full_own;        /* stages 0-2: persistent full params; stage 3 pinned: dedicated */
  void *fgrad_own;       /* stages 0/1: persistent full grads; stage 2/3 pinned: dedicated */
  void *gshard;          /* grad shard */
  zeroc_dtype_t gshard_dt;
  /* stages 0/1 accumulating micro-steps in a 16-bit reduce dtype: the full grads'
   * running sum in fp32 (fgrad holds one micro-step's, rounded once at the end) */
  float *gacc;
  /* compute-dtype copies: view of the params where the kernels' dtype differs from
   * theirs (cpu bf16), cgrad of the grads where it differs from the reduction's */
  void *view, *cgrad;
  zeroc__slot_t own_pslot, own_gslot; /* dedicated slots of a pinned unit */

  /* per step / micro-step */
  void *full;  /* gathered params in use (own or pool) */
  void *fgrad; /* full grads in use (own or pool) */
  zeroc__slot_t *pslot, *gslot;
  int gathered;    /* stage 3: a gather into `full` has been issued this pass */
  int grads_ready; /* full grads acquired and zeroed this micro-step */
  int view_ready;  /* `view` holds the current params (conversion done) */
  zeroc_event_t *ev_gathered, *ev_bwd, *ev_reduced;
  void **pviews, **gviews; /* per parameter pointers handed to callbacks */
  const void **saved_in;   /* (slots) the input of the last forward of each in-flight slot */
  void **acts;             /* (nacts) the layer's activation buffers, act_bytes each, one per
                              slot (zeroc__model_acts_alloc); NULL when act_bytes is 0 */
  int nacts;
  void *workspace;
  int nbwd; /* backward passes of this unit finished this optimizer step */
  int tied; /* holds a ZEROC_PARAM_TIED parameter */
} zeroc__unit_t;

/* the doubles of step_acc (ZEROC__STEP_ACC); ACC_SCALE holds one fp32: the step's
 * clipping multiplier when the device decides it (shard/step.c) */
enum { ACC_SUMSQ, ACC_LOSS, ACC_EVAL, ACC_SCALE };

/* A unit's optimizer state where it currently is (device, or host when offloaded). */
typedef struct zeroc__state_view {
  float *master, *m, *v;
} zeroc__state_view_t;

/* A live model's `magic`; cleared by zeroc_model_destroy, so that a second
 * destroy or a use after it is caught while the memory is still unchanged. */
#define ZEROC__MODEL_MAGIC 0x7a6d646cu /* "zmdl" */

struct zeroc_model {
  uint32_t magic; /* ZEROC__MODEL_MAGIC from a successful zeroc_shard until destroy */
  zeroc_ctx_t *ctx;
  zeroc_shard_config_t cfg;
  int n;
  zeroc__unit_t *u;
  zeroc_kernels_t *k;
  zeroc_dtype_t pdt, rdt, cdt;             /* param, reduce and compute (kernel) dtypes */
  int conv_p, conv_g; /* compute copies of params (cdt != pdt) and of grads (cdt != rdt) */
  int K;                                   /* prefetch depth */
  zeroc_group_t *shard_g, *rep_g, *self_g; /* self_g: size-1 group for stage 0 */
  zeroc_stream_t *compute, *gather_s, *reduce_s;
  zeroc__pool_t gpool;           /* stage 3 gather slots (param dtype, max N) */
  zeroc__pool_t fgpool;          /* stage 2/3 full-grad slots (reduce dtype, max N) */
  zeroc__pool_t tpool;           /* reduce-scatter outputs (reduce dtype, max S) */
  void *conv_view, *conv_cgrad;  /* shared compute copies of non-pinned units */
  int conv_owner;                /* unit whose params conv_view holds, -1 none */
  int alias; /* zeroc__shard_alias: shards used in place of gather/reduce buffers */
  int cshard_current;            /* AdamW wrote the compute shards: publish skips its cast */
  int master_alias; /* fp32 params on the device: each unit's master is its compute shard */
  void *ws;         /* workspace for callbacks (max workspace_bytes) */
  float *adam_tmp;  /* fp32 copy of a bf16 grad shard for AdamW (max S) */
  /* device doubles (ZEROC__STEP_ACC), so the step's figures stay on the device
   * until one read per step: [ACC_SUMSQ] the gradient's sum of squares (this rank's,
   * then the job's after the step's device all-reduce),
   * [ACC_LOSS] the step's loss (loss units add theirs, zeroc_layer_io_t.loss_acc),
   * [ACC_EVAL] an evaluation pass's loss */
  double *step_acc;
  double *step_host;      /* pinned read-back of step_acc (NULL on the cpu) */
  zeroc_event_t *ev_step; /* marks the read-back (waited with the polled wait) */
  zeroc_event_t *ev_published;
  int slots;            /* micro-batches in flight (saved inputs per unit); 1 */
  uint64_t state_bytes; /* persistent params + grads + optimizer bytes */

  struct {
    zeroc_group_t *g; /* ranks holding a copy of the ZEROC_PARAM_TIED params */
    int owner;        /* 1: this rank's copy counts in the gradient norm */
  } tie;

  struct {                      /* test-only fault injection (core/fault.h), fetched at creation */
    struct zeroc__fault *specs; /* NULL: off */
    int rank;                   /* world rank the specs name */
  } inject;

  int accum_any; /* the buffers accumulate micro-steps (zeroc_model_set_accum may ask > 1) */

  struct { /* the pipeline this model is a stage of (pp/pipeline.c registers it), or zeros */
    void *p;
    /* one micro-batch's forward through every stage: the loss on the last
     * stage's ranks, 0 elsewhere (zeroc_model_eval_mean with pp > 1) */
    zeroc_result_t (*eval)(void *p, const void *input, float *loss);
    void **backref; /* the pipeline's pointer to this model: NULLed when it is destroyed */
  } pipe;

  struct {             /* progress of the current step (shard/schedule.c, shard/step.c) */
    int accum;         /* micro-steps of this optimizer step (cfg.grad_accum, or
                          zeroc_model_set_accum's count) */
    int micro;         /* whole-model micro-steps whose backward completed */
    int in_forward;    /* a whole-model forward ran, its backward has not */
    const void *batch; /* whole-model path: the input of the running micro-step */
    int pass_dir;      /* +1 forward, -1 backward: which unit a read-ahead fetches */
    double loss_sum;   /* sum over micro-batches of the loss units' losses */
    float loss_micro;  /* the loss a unit's forward writes */
    uint64_t steps;    /* optimizer steps applied (AdamW's t) */
    uint64_t attempts; /* steps begun, skipped ones included: the step a message or a fault
                          filter names, as the caller counts them */
    int consecutive_skips;
    double exposed_ms;
    uint64_t bytes_mark; /* comm bus bytes at the start of the step */
  } run;

  /* offload (shard/offload.c) */
  zeroc__pinned_pool_t *pool;
  zeroc__swap_t *swap;
  zeroc__offload_t *ostate; /* optimizer state off the device */
  float *host_grad;         /* pinned copy of a gradient shard (cuda, or bf16 grads) */
  void *host_param;         /* pinned staging of a new compute shard (cuda) */
  struct { /* the staging ring of offloaded ZeRO-3 parameter shards (shard/offload.c) */
    int n;
    void **buf;              /* pinned host buffers (nvme) */
    void **dev;              /* their device twins for the gathers (NULL where not needed) */
    int *owner;              /* unit whose shard a buffer holds, -1 none */
    int *used;               /* a gather has been issued from it */
    zeroc__ticket_t *ticket; /* its swap transfer in flight, 0 none */
    int *swap_slot;          /* per unit: its swap file slot */
  } pstage;
};

#endif
