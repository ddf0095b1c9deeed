/*
 * shard/sizes.h - the bytes of every buffer the engine allocates (engine.c),
 * as pure functions of the shape: the engine sizes its allocations with them
 * and the planner (src/plan) predicts with them, so the two cannot drift.
 *
 * Sizes are doubles: the planner passes a stage's parameter count, whose
 * share N / nd need not be whole; the engine passes padded flat lengths (nd
 * divides N) and gets whole byte counts, exact below 2^53.
 */
#ifndef ZEROC_SHARD_SIZES_H
#define ZEROC_SHARD_SIZES_H

/* One unit's buffers (the table in shard/model.h): N flat elements, sharded
 * over nd ranks (stage 0 shards nothing). Per buffer, its bytes; 0 when the
 * stage does not keep it. */
typedef struct zeroc__unit_bytes {
  double opt_buffer; /* each of the fp32 master, Adam m and Adam v: 4 N / nd */
  double optimizer;  /* m and v, and the master where it is kept: 12 or 8 N / nd */
  double params;     /* compute params: N (stages 0-2) or the shard N / nd (3) */
  double grads;      /* full grads N (stages 0-1) or the grad shard N / nd (2-3) */
  double own_gather; /* stage 3, pinned unit: its dedicated gathered params, N */
  double own_fgrad;  /* stages 2-3, pinned unit: its dedicated full grads, N */
  double compute_copy; /* a pinned unit's compute-dtype copy (params or grads), cb N */
  double accum;      /* stages 0-1, gb != rb: the fp32 running sum of the full grads, 4 N */
} zeroc__unit_bytes_t;

/* pb, rb, gb, cb: bytes of a parameter, of a reduced gradient, of an element
 * of the gradient buffer the stage accumulates micro-steps in (fp32 where rb is
 * 16 bits and micro-steps accumulate: stages 2-3 keep the grad shard in it,
 * stages 0-1 a running sum of the full grads beside them); pinned: a later
 * unit shares its parameters; master: an fp32 master copy is kept beside the
 * compute parameters (zeroc__shard_keeps_master). cb: bytes of the kernels'
 * compute dtype (compute copies exist where it differs from pb or rb:
 * zeroc__shard_compute_copies); alias: zeroc__shard_alias's bits. */
void zeroc__shard_unit_bytes(int stage, double N, int nd, int pinned, int pb, int rb, int gb,
                             int cb, int master, int alias, zeroc__unit_bytes_t *out);

/* How many compute copies (0-2) a unit holds: one of the parameters where the
 * kernels compute in another dtype than the parameters' (cpu, bf16), one of
 * the gradients where they compute in another dtype than the reduction's (cpu
 * with bf16 reduction; cuda with bf16 parameters and fp32 reduction, whose bf16
 * gradients are accumulated into the fp32 ones that are reduced). */
int zeroc__shard_compute_copies(int pb, int rb, int cb);

/* A shard group of one rank keeps every parameter and gradient whole, so the
 * gather and reduce-scatter buffers would hold copies of the shards: the engine
 * uses the shards in their place (ZEROC__ALIAS_PARAMS: ZeRO-3's gathered params
 * are the compute shard, unless it lives off the device; ZEROC__ALIAS_GRADS:
 * ZeRO-2/3's full grads are the grad shard, unless micro-steps accumulate, where
 * the shard is fp32). The bitmask of zeroc__shard_alias goes to the two size
 * functions; the engine and the planner both ask it. */
/* The bytes of the gradients the engine keeps and reduces: rb (fp32 by default), except
 * where nothing is ever summed (world 1, one micro-step) and the kernels compute in the
 * parameters' dtype (pb == cb: cuda with bf16): there pb, since an fp32 copy of bf16
 * gradients would hold the same numbers bit for bit, at twice the bytes and a cast per
 * unit. The engine and the planner both ask it. */
int zeroc__shard_grad_bytes(int world, int grad_accum, int pb, int rb, int cb);

/* gb of zeroc__shard_unit_bytes as the engine allocates it: 4 where micro-steps
 * accumulate (grad_accum > 1: in fp32 whatever the reduce dtype), else rb. */
int zeroc__shard_accum_bytes(int grad_accum, int rb);

#define ZEROC__ALIAS_PARAMS 1
#define ZEROC__ALIAS_GRADS  2
int zeroc__shard_alias(int stage, int nd, int offload_params, int grad_accum);

/* Whether the optimizer keeps an fp32 master copy of the parameter shard: unless
 * the parameters are fp32 (pb 4) and neither they nor the optimizer state are
 * offloaded. fp32 parameters on the device are their own master: AdamW updates
 * the shard in place (the same bits: the master was the shard, value for value),
 * which saves 4 N / nd bytes, a quarter of fp32 ZeRO-3's model states. Offloaded,
 * the optimizer's copy and the device's are two buffers in two places. */
int zeroc__shard_keeps_master(int pb, int offload_optimizer, int offload_params);

/* The engine's pools shared by the units that are not pinned: slot counts
 * and the bytes of one slot. */
typedef struct zeroc__pool_bytes {
  int gather_n;      /* stage 3: min(prefetch + 1, units) slots of gathered params */
  int fgrad_n;       /* stages 2-3: two full-gradient slots */
  int rs_n;          /* stages 2-3 accumulating micro-steps: two reduce-scatter outputs */
  double gather;     /* the largest unpinned unit in the param dtype */
  double fgrad;      /* the largest unpinned unit in the reduce dtype */
  double rs;         /* the largest unit's shard in the reduce dtype */
  double compute_copy; /* compute-dtype copy of the largest unpinned unit (params or grads) */
  double fp32_shard; /* fp32 copy of the largest shard (AdamW on a 16-bit grad shard) */
} zeroc__pool_bytes_t;

/* units: units on the rank; max_unpinned, max_unit: the largest flat length
 * among the unpinned units and among all of them. */
void zeroc__shard_pool_bytes(int stage, int prefetch, int units, int grad_accum,
                             double max_unpinned, double max_unit, int nd, int pb, int rb, int cb,
                             int alias, zeroc__pool_bytes_t *out);

/* The optimizer step's device accumulators (tag workspace), whatever the
 * model: ZEROC__STEP_ACC doubles (shard/model.h: the gradient norm's sum of
 * squares, the step's loss, an evaluation's loss, the clipping multiplier). */
#define ZEROC__STEP_ACC 4
double zeroc__shard_step_bytes(void);

/* A host or device staging copy of a shard of `shard_numel` elements of
 * `elem` bytes (offloaded state moving through PCIe), with 64 bytes of slack
 * so the copy may start aligned. */
double zeroc__shard_staging_bytes(double shard_numel, int elem);

#endif
