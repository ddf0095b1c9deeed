/*
 * kernels/attention_cudnn.h - causal attention through cuDNN's fused flash attention
 * (SDPA, cuDNN 9 backend graph API), the fast path in front of zeroc's own cuda kernels
 * (kernels/attention_cudnn_cuda.c). libcudnn.so.9 is loaded with dlopen on first use;
 * without it, or where a call is not one cuDNN takes, zeroc's kernels run as before.
 *
 * Knob ZEROC_CUDA_ATTENTION, read once per kernels object at zeroc_kernels_create:
 * auto (the default: cuDNN where it applies, loads and its plan builds, else zeroc's
 * kernels, said once in the log), cudnn (where it applies cuDNN must work: a failure is an
 * error naming why), zeroc (never).
 * The backward is cuDNN's fast one (dQ accumulated in fp32 with atomics: not bitwise
 * repeatable, as PyTorch's SDPA), or with ZEROC_CUDA_DETERMINISTIC=1 /
 * zeroc_k_set_deterministic (--deterministic) its deterministic one (no dQ atomics; a
 * dP workspace of about B x NH x T x T x 2 bytes), or zeroc's kernel.
 * The workspace a shape runs with is zeroc__cudnn_ws's formula, the one the planner
 * predicts: from the kernel scratch when it fits there, else a buffer of its own (tagged
 * workspace). A plan whose own request exceeds the formula is not used (an error in mode
 * cudnn, a warning naming both sizes in auto), so the prediction holds where cuDNN runs.
 */
#ifndef ZEROC_KERNELS_ATTENTION_CUDNN_H
#define ZEROC_KERNELS_ATTENTION_CUDNN_H

#include <stddef.h>

#include "kernels/types.h"

/* ---- what the runtime and the planner share (attention_cudnn_ws.c; no GPU needed) ---- */

/* ZEROC_CUDA_ATTENTION when unset or empty: the one place the default is written. */
#define ZEROC_CUDA_ATTENTION_DEFAULT "auto"

/* ZEROC_CUDA_ATTENTION's values. */
typedef enum {
  ZEROC__CUDNN_AUTO = 0,
  ZEROC__CUDNN_REQUIRED = 1, /* "cudnn" */
  ZEROC__CUDNN_OFF = 2,      /* "zeroc" */
} zeroc__cudnn_mode_t;

/* `v` (NULL or "": ZEROC_CUDA_ATTENTION_DEFAULT) into *mode; anything else is
 * ZEROC_ERR_INVALID_ARG naming the value and the accepted ones. */
zeroc_result_t zeroc__cudnn_mode_parse(const char *v, zeroc__cudnn_mode_t *mode);

/* ZEROC_CUDA_DETERMINISTIC (unset: 0) into *out: 0 or 1; else ZEROC_ERR_INVALID_ARG. */
zeroc_result_t zeroc__cudnn_deterministic_knob(int *out);

/* What a plan may ask beyond the formula's tensors (cuDNN's SDPA plans on Hopper ask for
 * none or little; a larger request is caught at run time, see the file comment). */
#define ZEROC__CUDNN_PLAN_RESERVE ((size_t)4 << 20)

/* The workspace of one attention shape (B, T, C, NH) on cuDNN, each part a multiple of 256
 * bytes. The backward's is laid out dsum | dqacc | the plan's own. */
typedef struct zeroc__cudnn_ws {
  size_t fwd;      /* the forward plan's own: the reserve */
  size_t dsum;     /* backward: sum(dO*O) per row, (B,NH,T) fp32 */
  size_t dqacc;    /* fast backward: dQ accumulated in fp32, (B,T,C); 0 when deterministic */
  size_t bwd_plan; /* the backward plan's own: the reserve, plus the deterministic one's dP
                      (B,NH,T',T') bf16, T' = T rounded up to 128 */
  size_t bwd;      /* dsum + dqacc + bwd_plan */
  size_t total;    /* both directions (one buffer, one stream): max(fwd, bwd) */
} zeroc__cudnn_ws_t;

/* The formula: what cuDNN's attention of (B, T, C, NH) runs with, fast (deterministic 0) or
 * deterministic backward. The runtime allocates it, the planner predicts it. */
void zeroc__cudnn_ws(int B, int T, int C, int NH, int deterministic, zeroc__cudnn_ws_t *w);
/* The bytes of cuDNN's own workspace buffer for a shape needing `need` (w.total, or w.fwd
 * where only the forward runs on cuDNN) beside a kernel scratch of `scratch_bytes`: 0 when
 * the scratch holds it, else `need`. */
size_t zeroc__cudnn_ws_own(size_t need, size_t scratch_bytes);
/* 1: cuDNN's SDPA takes attention of width C over NH heads (head size a multiple of 8 up to
 * 128); bf16 and no dropout are the caller's to check. */
int zeroc__cudnn_takes(int C, int NH);
/* 1: a bf16 cuda kernels object of this process loaded cuDNN for attention (mode auto or
 * cudnn): what zeroc train's prediction assumes attention runs on. 0 in a build without
 * CUDA. */
int zeroc__cudnn_attention_loaded(void);

#ifdef ZEROC_HAVE_CUDA

/* Reads ZEROC_CUDA_ATTENTION into k's cuDNN state (k->cudnn); loads nothing yet. */
zeroc_result_t zeroc__cudnn_attention_create(zeroc_kernels_t *k);
/* Frees the plans, the cuDNN handle and the library reference (NULL state: nothing). */
void zeroc__cudnn_attention_destroy(zeroc_kernels_t *k);
/* Overrides the knob for k (tests and the kernel benchmark compare both paths). */
void zeroc__cudnn_attention_set_mode(zeroc_kernels_t *k, zeroc__cudnn_mode_t mode);
/* 1: the deterministic backward for shapes not yet built (zeroc_k_set_deterministic). */
void zeroc__cudnn_attention_set_deterministic(zeroc_kernels_t *k, int on);
/* The bytes of k's own cuDNN workspace buffer (0: none; the scratch holds what ran). */
size_t zeroc__cudnn_attention_ws_bytes(const zeroc_kernels_t *k);
/* What the process's bf16 cuda kernels objects last found, in words, into buf[n]
 * (zeroc_k_attention_backend): the backend in use and, when not cuDNN, why. */
void zeroc__cudnn_attention_describe(char *buf, size_t n);

/* zeroc_k_attention_forward through cuDNN: *done = 1 when cuDNN computed out and lse,
 * 0 when the caller's own kernels must (not applicable, or auto and cuDNN failed). */
zeroc_result_t zeroc__cudnn_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                              float *lse, const void *qkv, int B, int T, int C,
                                              int NH, const zeroc_dropout_t *drop, int *done);
/* zeroc_k_attention_backward_ex through cuDNN; only with ZEROC_K_DQKV_SET (cuDNN writes
 * dq, dk, dv; it cannot add). *done as above. */
zeroc_result_t zeroc__cudnn_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                               const void *dout, const void *qkv, const void *out,
                                               const float *lse, int B, int T, int C, int NH,
                                               const zeroc_dropout_t *drop, unsigned flags,
                                               int *done);

/* Loads libcudnn.so.9 (needs no GPU), writes the file it came from into path[n] and its
 * version (cudnnGetVersion, e.g. 91900) into *version, and unloads it. ZEROC_ERR_UNSUPPORTED
 * when it is not found or lacks the backend API (message names why); always so in a build
 * without the cuDNN headers. */
zeroc_result_t zeroc__cudnn_probe(char *path, size_t n, long *version);
#endif

#endif
