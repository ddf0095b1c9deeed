/*
 * kernels/cpu/pending.c - placeholders for the model kernels still being
 * written (each aborts if called). Deleted when kernels/cpu/ defines them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"

#define PENDING(name)                                                                             \
  do {                                                                                            \
    fprintf(stderr, "zeroc: cpu kernel %s not written yet\n", name);                              \
    abort();                                                                                      \
  } while (0)

void zeroc__cpu_encoder_forward(float *out, const int32_t *inp, const float *wte,
                                const float *wpe, int B, int T, int C) { PENDING("encoder_forward"); }
void zeroc__cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                                 int B, int T, int C) { PENDING("encoder_backward"); }
void zeroc__cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C) { PENDING("layernorm_forward"); }
void zeroc__cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                   const float *inp, const float *weight, const float *mean,
                                   const float *rstd, int N, int C) { PENDING("layernorm_backward"); }
void zeroc__cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                  int NH) { PENDING("attention_forward"); }
void zeroc__cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH) { PENDING("attention_backward"); }
void zeroc__cpu_gelu_forward(float *out, const float *inp, size_t N) { PENDING("gelu_forward"); }
void zeroc__cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N) { PENDING("gelu_backward"); }
void zeroc__cpu_residual_forward(float *out, const float *a, const float *b, size_t N) { PENDING("residual_forward"); }
void zeroc__cpu_add(float *y, const float *x, size_t N) { PENDING("add"); }
void zeroc__cpu_crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                              int N, int V, int Vp, float dloss) { PENDING("crossentropy"); }
