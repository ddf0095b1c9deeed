/*
 * zeroc/plan.h - the planner: parameters, FLOPs, per-rank memory and an
 * estimated step time of the built-in GPT on a layout (ZeRO stage, HSDP, TP,
 * PP, offload), and the search over every sensible layout of a cluster.
 * Pure arithmetic: no MPI, no device. docs/plan.md states every formula.
 */
#ifndef ZEROC_PLAN_H
#define ZEROC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h" /* ZEROC_CONFIG_MAGIC */
#include "zeroc/export.h"
#include "zeroc/gpt.h"
#include "zeroc/result.h"
#include "zeroc/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_recompute {
  ZEROC_RECOMPUTE_NONE = 0, /* keep every saved activation */
  ZEROC_RECOMPUTE_FULL = 1, /* keep only each layer's input; rerun the forward in backward */
} zeroc_recompute_t;

typedef enum zeroc_act_model {
  ZEROC_ACT_ZEROC = 0,    /* the tensors zeroc's kernels save (zeroc_plan_act_zeroc) */
  ZEROC_ACT_MEGATRON = 1, /* Korthikanti et al. 2022 (zeroc_plan_act_megatron) */
} zeroc_act_model_t;

/* zeroc_plan_config_t.flash_attention's values: what attention saves and runs on. */
typedef enum zeroc_attention {
  ZEROC_ATTENTION_NAIVE = 0, /* zeroc model: the (B, NH, T, T) scores saved */
  ZEROC_ATTENTION_FLASH = 1, /* zeroc's own flash kernels: the log-sum-exp saved */
  /* cuDNN's flash attention (zeroc train's default on cuda where libcudnn.so.9 loads): as
   * flash, plus cuDNN's workspace where it takes the shape (bf16, head size a multiple of 8
   * up to 128, no dropout) and the kernel scratch does not hold it */
  ZEROC_ATTENTION_CUDNN = 2,
} zeroc_attention_t;

/*
 * What to plan. Initialise with ZEROC_PLAN_CONFIG_INIT, then set fields; an
 * uninitialised struct is rejected. The mesh is the engine's
 * [pp][hsdp][dp/hsdp][cp][tp] with dp = gpus / (tp x pp x cp).
 */
typedef struct zeroc_plan_config {
  size_t size;              /* sizeof(zeroc_plan_config_t), set by the initializer */
  uint32_t magic;           /* ZEROC_CONFIG_MAGIC */
  zeroc_gpt_config_t model; /* the shape; model.batch is the micro-batch per dp rank */
  int gpus;                 /* world size N */
  int zero;                 /* ZeRO stage 0..3 (0 or 1 with pp > 1) */
  int tp, pp;               /* tensor- and pipeline-parallel sizes */
  int hsdp;                 /* replica count R (divides dp); shards span dp / R ranks */
  int microbatches;         /* micro-batches per step (PP's m, else grad accumulation); 0: pp */
  int param_bytes;          /* bytes of a parameter: 2 (bf16) or 4 (fp32) */
  int act_bytes;            /* bytes of an activation element; 0: compute_bytes */
  zeroc_recompute_t recompute;
  int sequence_parallel;             /* 1: LayerNorm/residual activations split over tp as well */
  zeroc_offload_t offload_optimizer; /* master + Adam m, v off the device */
  zeroc_offload_t offload_params;    /* the parameter shard off the device (ZeRO-3 only) */
  int prefetch; /* ZeRO-3 gathers in flight ahead of compute (engine default 2) */
  zeroc_act_model_t act_model;
  int flash_attention;  /* zeroc_attention_t: naive saves the (B, NH, T, T) scores; flash and
                           cudnn (the default) save no scores, cudnn adds its workspace */
  double gpu_mem_gib;   /* device memory per GPU in GiB; 0: fits is always 1 */
  double workspace_mib; /* fixed per-rank workspace (GEMM library, kernels) in MiB */
  /* The cluster, for the step-time estimate (docs/plan.md, "Step time"). */
  int gpus_per_node;
  double peak_tflops;                /* dense bf16 peak per GPU, 1e12 FLOP/s */
  double mfu;                        /* achieved fraction of peak on the FLOPs executed, (0, 1] */
  double bw_intra_gbs;               /* per-GPU link bandwidth inside a node, 1e9 B/s */
  double bw_inter_gbs;               /* per-GPU bandwidth across nodes, 1e9 B/s */
  double lat_intra_us, lat_inter_us; /* per ring step */
  double bw_pcie_gbs;                /* device <-> host per GPU (offload to cpu) */
  double bw_nvme_gbs;                /* NVMe read or write per GPU (offload to nvme) */
  int vpp;           /* model chunks per pipeline rank: 1 (1F1B) or more (interleaved schedule) */
  int compute_bytes; /* bytes the kernels compute in: param_bytes on cuda (0), 4 on cpu, whose
                        kernels are fp32 (16-bit parameters then get fp32 compute copies) */
  /* Context parallelism (docs/cp.md): each of cp ranks holds T / cp tokens of
   * every sequence (two zigzag chunks); parameters shard over dp_shard x cp.
   * zeroc_plan_search reads cp as the largest cp size it may use (1 when
   * unset) and cp_mode as the only mode it may use (both when DEFAULT). */
  int cp; /* context-parallel size (default 1) */
  zeroc_cp_mode_t
      cp_mode; /* ZEROC_CP_MODE_RING (DEFAULT) or ZEROC_CP_MODE_ULYSSES (zeroc/mesh.h) */
  /* bytes of a gradient as it is reduced (appended: older callers' smaller structs get the
   * default): 4, fp32 whatever param_bytes (as Megatron reduces; the engine's default,
   * --grad-reduce-dtype fp32), or 2, bf16 (half the traffic, rounding grows with ranks) [4] */
  int grad_bytes;
  /* (appended) 1: bitwise-repeatable kernels, as zeroc train's --deterministic: cuDNN
   * attention's deterministic backward, whose workspace (B x NH x T x T x 2 bytes) is
   * counted [0: its fast backward, an fp32 dQ accumulator of B x T x C x 4 bytes] */
  int deterministic;
} zeroc_plan_config_t;

/* Every number "unset" (ZEROC_UNSET, zeroc/types.h; the enums none/zeroc):
 * zeroc_plan_compute gives each unset field the library's default, which is
 * gpt2-124m on 1 GPU, ZeRO-3 (ZeRO-1 with pp > 1), micro-batches pp, bf16, no recompute, zeroc
 * activation model with cuDNN's flash attention (fast backward), 80 GiB GPUs, zeroc's cuda kernels'
 * workspace (192 MiB); 8 GPUs per node at 989 TFLOP/s and MFU 0.5, 300 GB/s / 10 us inside a node,
 * 25 GB/s / 20 us across, PCIe 25 GB/s, NVMe 3 GB/s per GPU (the resolved config is in the result's
 * `cfg`). */
#define ZEROC_PLAN_CONFIG_INIT                                                                     \
  {                                                                                                \
    sizeof(zeroc_plan_config_t), ZEROC_CONFIG_MAGIC,                                               \
        {ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, 0,   0,  0, \
         0,           0,           0.0,         0.0,         0.0,         0.0,         0.0, 0.0},  \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, \
        ZEROC_UNSET, ZEROC_RECOMPUTE_NONE, ZEROC_UNSET, ZEROC_OFFLOAD_NONE, ZEROC_OFFLOAD_NONE,    \
        ZEROC_UNSET, ZEROC_ACT_ZEROC, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET,          \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, \
        ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_UNSET, ZEROC_CP_MODE_DEFAULT, ZEROC_UNSET,    \
        ZEROC_UNSET                                                                                \
  }

/* Bytes per rank on the device, by the memory accountant's tags. */
typedef struct zeroc_plan_memory {
  double params;      /* compute-dtype parameters (full or a shard) */
  double grads;       /* gradients (full or a shard) */
  double optimizer;   /* fp32 master + Adam m + v */
  double activations; /* saved for backward, all micro-batches in flight */
  double buffers;     /* ZeRO-2/3 gather/prefetch and full-gradient buffers */
  double workspace;   /* backward scratch and the fixed workspace */
  double total;       /* the sum of the above */
} zeroc_plan_memory_t;

/* Estimated seconds per optimizer step (docs/plan.md, "Step time"). */
typedef struct zeroc_plan_time {
  double compute; /* executed FLOPs / (gpus x mfu x peak) */
  double bubble;  /* pipeline fill and drain: (pp - 1) / m of compute */
  double tp;      /* tensor-parallel all-reduces (not overlapped) */
  double pp;      /* stage-to-stage sends (not overlapped) */
  double dp;      /* ZeRO collectives, the part compute does not hide */
  double offload; /* PCIe / NVMe traffic of offload (not overlapped) */
  double total;
  double cp; /* context-parallel traffic compute does not hide (in total): the ring's K/V
                steps beyond the attention they overlap, all of Ulysses' all-to-alls */
} zeroc_plan_time_t;

/* Bytes one rank sends per optimizer step in its context-parallel group, as
 * the comm counters count them (docs/cp.md, "Communication"). */
typedef struct zeroc_plan_comm {
  double cp_forward;  /* per block and micro-batch, forward: ring, K and V of the other chunks,
                         (N-1) 2X; Ulysses, q, k, v to head-split and the output back, 4X (N-1)/N */
  double cp_backward; /* per block and micro-batch, backward: ring, K and V again and the dK, dV
                         accumulators home, (N-1) 2X + N 2X; Ulysses, 4X (N-1)/N */
  double cp;          /* per step: microbatches x the stage's blocks x (forward, twice with full
                         recompute, + backward); X = B (T/N) (C/tp) act_bytes, N = cp */
} zeroc_plan_comm_t;

typedef struct zeroc_plan_result {
  zeroc_plan_config_t cfg; /* the layout as planned (microbatches, act_bytes resolved) */
  uint64_t params;         /* parameters of the whole model */
  double params_rank;      /* parameters one rank of the reported stage holds before ZeRO */
  int dp, shard;           /* data-parallel size; ZeRO shard group size dp / hsdp */
  int stage;               /* the pp stage reported: the one needing the most device memory */
  int64_t global_batch;    /* sequences per step: batch x microbatches x dp */
  double tokens_per_step;
  double flops_per_step; /* Megatron's formula: 96 (recompute) or 72 (none) form */
  double flops_per_token;
  zeroc_plan_memory_t device; /* per rank, the reported stage */
  double host_bytes;          /* per rank, offloaded to pinned host memory */
  double nvme_bytes;          /* per rank, offloaded to NVMe */
  double gpu_mem_bytes;       /* cfg.gpu_mem_gib in bytes */
  int fits;                   /* device.total <= gpu_mem_bytes */
  zeroc_plan_time_t time;
  zeroc_plan_comm_t comm; /* per rank per step */
  /* An estimate, not in device.total or fits: NCCL's own transfer buffers per
   * rank on the cuda device, NCCL_BUFFSIZE (4 MiB) x 16 channels x the peers of
   * each communicator a step uses (docs/plan.md, "Fits"). */
  double nccl_bytes;
} zeroc_plan_result_t;

/*
 * Plans one layout.
 *   cfg: an initialised config; out: receives the plan.
 * Returns ZEROC_ERR_INVALID_ARG, naming the field, the value and what is
 * accepted, for a bad shape or a layout that does not divide (tp x pp x cp
 * must divide gpus, pp the layers, tp the heads, hsdp the dp size, 2 cp the
 * seq, and with Ulysses cp the heads / tp), ZeRO-2/3 with pp > 1, hsdp > 1
 * with ZeRO-0, offload_params without ZeRO-3, a cp_mode other than ring or
 * ulysses.
 */
ZEROC_API zeroc_result_t zeroc_plan_compute(const zeroc_plan_config_t *cfg,
                                            zeroc_plan_result_t *out);

/* `cfg` with every unset field replaced by the planner's default (what
 * zeroc_plan_compute and zeroc_plan_search start from: zero 1 with pp > 1,
 * microbatches pp, act_bytes and compute_bytes param_bytes), without checking
 * the layout. Returns ZEROC_ERR_INVALID_ARG for a struct not from
 * ZEROC_PLAN_CONFIG_INIT. */
ZEROC_API zeroc_result_t zeroc_plan_config_resolve(const zeroc_plan_config_t *cfg, zeroc_plan_config_t *out);

/*
 * Resolves `cfg` (zeroc_plan_config_resolve) and checks it as
 * zeroc_plan_compute does: the shape, the cluster and the layout, by the rules
 * `zeroc train` applies too (the model's own, through the model interface, and
 * the engine's). The one message names the settings as `names` says
 * (zeroc_names_t: the config's fields, or `zeroc plan`'s flags).
 *   resolved: receives the resolved config when it passes (may be NULL).
 * Returns ZEROC_ERR_INVALID_ARG as zeroc_plan_compute does.
 */
ZEROC_API zeroc_result_t zeroc_plan_config_check(const zeroc_plan_config_t *cfg, int names,
                                                 zeroc_plan_config_t *resolved);

/*
 * Plans every sensible layout of cfg->gpus GPUs for a global batch of
 * `global_batch` sequences (0: cfg->model.batch x cfg->gpus) and keeps those
 * that fit cfg->gpu_mem_gib, fastest first (ties: less memory first).
 * Layouts: tp dividing gpus_per_node, at most 8 and dividing the heads; pp
 * dividing the layers; cp = 1, 2, 4, ... up to cfg->cp (1 when unset) with
 * 2 cp dividing seq, in ring and (where cp divides heads / tp) Ulysses, or
 * only cfg->cp_mode when it is not DEFAULT; dp the rest (dividing
 * global_batch); ZeRO 0-3 with pp == 1, 0-1 with pp > 1; hsdp replica counts
 * dividing dp; for each, the micro-batch count m (dividing global_batch / dp)
 * with the shortest step. cfg's model, dtype, recompute, sequence
 * parallelism, offload, activation model and cluster apply to every layout;
 * its zero, tp, pp, hsdp and microbatches are ignored (cp and cp_mode bound
 * the search, as above). With offload_params only ZeRO-3 is considered.
 *   list: receives a malloc'd array (NULL when count is 0), freed with
 *   zeroc_plan_free; count: receives its length.
 * Returns ZEROC_ERR_INVALID_ARG for a bad config or a global batch outside
 * 1 .. 2^24, ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_plan_search(const zeroc_plan_config_t *cfg, int64_t global_batch,
                                           zeroc_plan_result_t **list, size_t *count);

/* Frees a list from zeroc_plan_search; zeroc_plan_free(NULL) does nothing. */
ZEROC_API void zeroc_plan_free(zeroc_plan_result_t *list);

/*
 * Model-state bytes per rank (the ZeRO paper's model, Rajbhandari et al. 2020,
 * section 5): parameters and gradients of `param_bytes` each and K bytes of
 * optimizer state per parameter: fp32 master + Adam m, v (K = 12) for 16-bit
 * parameters, Adam m, v alone (K = 8) for fp32 ones, which are their own master;
 * stage 0: (2 pb + K) psi, 1: 2 pb psi + K psi / nd, 2: pb psi + (pb + K) psi / nd,
 * 3: (2 pb + K) psi / nd. (zeroc_plan_compute adds the master back where the
 * optimizer state or the parameters are offloaded.)
 *   psi: parameters (>= 0); zero: 0..3; shard: Nd >= 1; param_bytes: 2 or 4.
 *   out: params, grads, optimizer and total are set, the rest zeroed.
 * Returns ZEROC_ERR_INVALID_ARG for a value out of range.
 */
ZEROC_API zeroc_result_t zeroc_plan_model_states(double psi, int zero, int shard, int param_bytes,
                                                 zeroc_plan_memory_t *out);

/*
 * Megatron's training FLOPs per step (Narayanan et al. 2021, section 5.1) for
 * `sequences` sequences of model->seq tokens:
 *   full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
 *   none:           72 B s l h^2 (1 + s/(6h) + V/(12 l h))
 * (the second drops the recomputed forward of the transformer layers; the
 * logit layer's 6 B s h V is the same in both). model->batch is not used.
 */
ZEROC_API double zeroc_plan_flops_megatron(const zeroc_gpt_config_t *model, double sequences,
                                           zeroc_recompute_t recompute);

/* The formula zeroc_plan_flops_megatron uses, as text. */
ZEROC_API const char *zeroc_plan_flops_formula(zeroc_recompute_t recompute);

/*
 * Activation bytes one transformer layer saves for backward, per micro-batch,
 * per TP rank, with 16-bit activations (Korthikanti et al. 2022, "Reducing
 * Activation Recomputation in Large Transformer Models", section 4):
 *   tp 1:                    s b h (34 + 5 a s / h)
 *   tp t:                    s b h (10 + 24/t + 5 a s / (h t))
 *   tp t + sequence parallel: s b h (34/t + 5 a s / (h t))
 *   full recompute:          2 s b h (the layer input; / t with sequence parallel)
 * s seq, b micro-batch, h hidden, a heads, t tp (>= 1).
 */
ZEROC_API double zeroc_plan_act_megatron(double s, double b, double h, double a, int t,
                                         int sequence_parallel, zeroc_recompute_t recompute);

/*
 * Activation bytes one transformer layer saves in zeroc's kernels (no dropout,
 * fused ops), per micro-batch and TP rank, with `bytes` per element (e) and
 * N = s b tokens, r = t with sequence parallelism else 1:
 *   4 e N h / r     LayerNorm 1 and 2 inputs and outputs
 *   12 e N h / t    qkv (3h), attention output (h), MLP pre- and post-GELU (4h each)
 *   16 N / r        LayerNorm mean and rstd (fp32)
 *   flash: 4 b a s / t    attention log-sum-exp (fp32)
 *   else:  e b a s^2 / t  attention probabilities
 *   full recompute: e N h / r (the layer input only)
 * docs/plan.md lists the assumptions; calibrated later against the engine.
 */
ZEROC_API double zeroc_plan_act_zeroc(double s, double b, double h, double a, int t,
                                      int sequence_parallel, zeroc_recompute_t recompute, int bytes,
                                      int flash_attention);

#ifdef __cplusplus
}
#endif
#endif
