/*
 * model/sample_ops.h - the sampler's own steps beside the training kernels, shared by
 * GPT-2's forward (sample.c) and the Llama family's (sample_llama.c): attention of new
 * rows over the KV cache, and a linear layer that takes one row through sgemv.
 */
#ifndef ZEROC_MODEL_SAMPLE_OPS_H
#define ZEROC_MODEL_SAMPLE_OPS_H

#include <stddef.h>

/* out (n,OC) = inp (n,C) @ weight (OC,C)^T + bias (may be NULL). */
void zeroc__sampler_linear(float *out, const float *inp, const float *weight, const float *bias,
                           int n, int C, int OC);

/* The q heads of n rows of qkv (row stride ldq, head h at column h HS) at positions
 * pos..pos+n-1 attending causally over the cache kv (pos+n, 2 KV) -> out (n, NH HS);
 * query head h reads kv head h % NKV, as the training kernels do. */
void zeroc__sampler_attend(float *out, const float *qkv, size_t ldq, const float *kv, int n,
                           int pos, int NH, int NKV, int HS);

#endif
