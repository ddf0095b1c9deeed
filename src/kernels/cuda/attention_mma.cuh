/*
 * kernels/cuda/attention_mma.cuh - the tensor-core attention of attention_mma.cu, as
 * attention.cu's entry points call it: `takes` says whether a call is one it handles
 * (bf16, head size 64 or 128, no dropout, 16-byte aligned tensors, ZEROC_CUDA_FLASH not
 * 0, the device's shared memory large enough); the others stay on the SIMT kernels.
 */
#ifndef ZEROC_KERNELS_CUDA_ATTENTION_MMA_CUH
#define ZEROC_KERNELS_CUDA_ATTENTION_MMA_CUH

#include "kernels/cuda/common.cuh"

bool zc_attention_mma_takes(zeroc_kernels_t *k, int C, int NH, const zeroc_dropout_t *drop,
                            const void *a, const void *b, const void *c, const void *d);
zeroc_result_t zc_attention_mma_forward(zeroc_kernels_t *k, cudaStream_t st, void *out,
                                        float *lse, const void *qkv, int B, int T, int C, int NH);
zeroc_result_t zc_attention_mma_backward(zeroc_kernels_t *k, cudaStream_t st, void *dqkv,
                                         const void *dout, const void *qkv, const void *out,
                                         const float *lse, int B, int T, int C, int NH);

#endif
