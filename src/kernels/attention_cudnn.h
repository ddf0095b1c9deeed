/*
 * kernels/attention_cudnn.h - causal attention through cuDNN's fused flash attention
 * (SDPA, cuDNN 9 backend graph API), the fast path in front of zeroc's own cuda kernels
 * (kernels/attention_cudnn_cuda.c). libcudnn.so.9 is loaded with dlopen on first use;
 * without it, or where a call is not one cuDNN takes, zeroc's kernels run as before.
 *
 * Knob ZEROC_CUDA_ATTENTION, read once per kernels object at zeroc_kernels_create:
 * auto (cuDNN where it applies, loads and its plan builds, else zeroc's kernels), cudnn
 * (where it applies cuDNN must work: a failure is an error naming why), zeroc (never).
 * The default is zeroc until this path has run on a GPU (it was written and checked against
 * cuDNN's descriptor validation without one); benchmarks/gpu/ scripts ask for auto.
 * The backward is cuDNN's fast one (dQ accumulated in fp32 with atomics: not bitwise
 * repeatable), or with ZEROC_CUDA_DETERMINISTIC=1 / zeroc_k_set_deterministic its
 * deterministic one (no dQ atomics; a workspace of about B x NH x T x T x 2 bytes, from the
 * kernel scratch or, when that is too small, a buffer of its own), or zeroc's kernel.
 * A fast plan that does not build falls back to the deterministic one.
 */
#ifndef ZEROC_KERNELS_ATTENTION_CUDNN_H
#define ZEROC_KERNELS_ATTENTION_CUDNN_H

#include <stddef.h>

#include "kernels/types.h"

#ifdef ZEROC_HAVE_CUDA
/* ZEROC_CUDA_ATTENTION when unset or empty: the one place the default is written. */
#define ZEROC_CUDA_ATTENTION_DEFAULT "zeroc"

/* ZEROC_CUDA_ATTENTION's values. */
typedef enum {
  ZEROC__CUDNN_AUTO = 0,
  ZEROC__CUDNN_REQUIRED = 1, /* "cudnn" */
  ZEROC__CUDNN_OFF = 2,      /* "zeroc" */
} zeroc__cudnn_mode_t;

/* `v` (NULL or "": ZEROC_CUDA_ATTENTION_DEFAULT) into *mode; anything else is ZEROC_ERR_INVALID_ARG naming the
 * value and the accepted ones. Needs no GPU and no cuDNN. */
zeroc_result_t zeroc__cudnn_mode_parse(const char *v, zeroc__cudnn_mode_t *mode);

/* Reads ZEROC_CUDA_ATTENTION into k's cuDNN state (k->cudnn); loads nothing yet. */
zeroc_result_t zeroc__cudnn_attention_create(zeroc_kernels_t *k);
/* Frees the plans, the cuDNN handle and the library reference (NULL state: nothing). */
void zeroc__cudnn_attention_destroy(zeroc_kernels_t *k);
/* Overrides the knob for k (tests and the kernel benchmark compare both paths). */
void zeroc__cudnn_attention_set_mode(zeroc_kernels_t *k, zeroc__cudnn_mode_t mode);
/* 1: the deterministic backward for shapes not yet built (zeroc_k_set_deterministic). */
void zeroc__cudnn_attention_set_deterministic(zeroc_kernels_t *k, int on);
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
