/*
 * kernels/types.h - what the dispatch (kernels/kernels.h) and its backends (the cpu
 * kernels, the cuda kernels, the cuDNN attention) share: the kernels object, the
 * flags and argument structs of some kernels, and the sizes of the cuda state.
 * The backends include this, not kernels.h, which sits above them.
 */
#ifndef ZEROC_KERNELS_TYPES_H
#define ZEROC_KERNELS_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "kernels/dropout.h"
#include "zeroc/device.h"
#include "zeroc/types.h"

typedef struct zeroc_kernels {
  const zeroc__devmem_t *mem; /* where workspace comes from (cuda) */
  zeroc_stream_t *compute;    /* the stream a NULL `s` means */
  zeroc_device_kind_t device;
  zeroc_dtype_t dtype; /* activations and compute parameters */
  void *cuda;          /* cuda: cuBLASLt handle, workspace (kernels/cuda) */
  void *cudnn;         /* cuda: cuDNN attention plans (kernels/attention_cudnn_cuda.c) */
  int deterministic;   /* 1: bitwise-repeatable kernels only (zeroc_k_set_deterministic) */
} zeroc_kernels_t;

/* Flags of zeroc_k_matmul_backward_ex and zeroc_k_layernorm_backward_ex. */
#define ZEROC_K_DINP_SET 1u /* dinp = dout @ weight: its old contents are not read (no memset) */

/* Flags of zeroc_k_attention_backward_ex. */
#define ZEROC_K_DQKV_SET 1u /* dqkv = the gradient: its old contents are not read (no memset) */

/* One (query block, key block) pair of causal attention (the attention blocks of
 * kernels.h, for context parallelism). */
typedef struct zeroc_attn_block {
  int B, NH, HS;     /* sequences, heads of this call, head size */
  int Tq, Tk;        /* query rows and key rows of the block */
  int causal;        /* 1: diagonal (Tq == Tk, q_pos == k_pos): key j seen by query i iff j <= i */
  size_t q_t, q_b;   /* q and dq: elements between tokens, between sequences; head h at h*HS */
  size_t kv_t, kv_b; /* k, v, dk, dv: likewise */
  size_t o_t, o_b;   /* out and dout: likewise */
  size_t l_h, l_b;   /* lse (fp32): between heads, between sequences; queries adjacent */
  int64_t q_pos, k_pos; /* global positions of query 0 and key 0 */
} zeroc_attn_block_t;

/* The settings of one AdamW update (zeroc_k_adamw and its twins). */
typedef struct zeroc_adamw_args {
  float lr, beta1, beta2, eps, weight_decay;
  float grad_scale; /* multiplies the gradient first (clipping) */
  float bias_corr1; /* 1 - beta1^t */
  float bias_corr2; /* 1 - beta2^t */
  /* NULL, or one fp32 in device memory read instead of grad_scale when the kernel runs:
   * the multiplier zeroc_k_clip_scale left there. NaN there skips the step: the kernel
   * writes nothing. (zeroc_k_host_adamw takes grad_scale only.) */
  const float *scale_dev;
} zeroc_adamw_args_t;

/* What one zeroc_kernels_t holds on a cuda device besides its callers' buffers: the
 * cuBLASLt workspace (what cuBLASLt asks for on Hopper), the reduction scratch
 * (ZEROC_CUDA_SCRATCH_MB, default 64) and the sumsq partial sums of up to 8 streams. The
 * cuda state allocates exactly these and the planner counts them, so both read here. */
#define ZEROC_K_LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define ZEROC_K_SCRATCH_MB_DEFAULT 64
#define ZEROC_K_SUMSQ_BLOCKS       1024
#define ZEROC_K_SUMSQ_STREAMS      8

#endif
