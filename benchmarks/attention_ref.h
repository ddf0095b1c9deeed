/* benchmarks/attention_ref.h - the previous cpu attention kernels (attention_ref.c) */
#ifndef ZEROC_BENCH_ATTENTION_REF_H
#define ZEROC_BENCH_ATTENTION_REF_H

#include "kernels/cpu/cpu_kernels.h"

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T), as zeroc__cpu_attention_forward
void bench_ref_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH, const zeroc_dropout_t *drop);
// dout (B,T,C), qkv, out, lse -> dqkv (B,T,3C) +=, as zeroc__cpu_attention_backward
void bench_ref_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  const zeroc_dropout_t *drop);

#endif
