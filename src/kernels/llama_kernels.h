/*
 * kernels/llama_kernels.h - the kernels of Llama-family decoders (Llama 3, Qwen2):
 * RMSNorm, rotary position embeddings (RoPE), the SwiGLU gate and grouped-query
 * attention, cpu and cuda twins behind the same dispatch as kernels.h, with its
 * conventions (act tensors in k->dtype, statistics fp32, positions int32 in the
 * device's memory, every backward ACCUMULATES into its gradients unless said otherwise).
 *
 * Letters as in kernels.h, and: NKV key/value heads (NH % NKV == 0; NKV == NH is plain
 * multi-head attention), HS head size, F the MLP's hidden width.
 * The fused q/k/v layout: qkv (B,T,(NH + 2 NKV) HS) = [q (NH heads) | k (NKV) | v (NKV)]
 * per token, head h at columns h*HS of its part; with NKV == NH it is kernels.h's
 * (B,T,3C) layout.
 */
#ifndef ZEROC_KERNELS_LLAMA_KERNELS_H
#define ZEROC_KERNELS_LLAMA_KERNELS_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/rope.h"

/* out (N,C) act = inp * rstd * weight, rstd (N) fp32 = 1 / sqrt(mean over the row of
 * inp^2 + eps), saved for the backward (Llama: eps 1e-5, Qwen2: 1e-6). */
zeroc_result_t zeroc_k_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       float *rstd, const void *inp, const void *weight, float eps,
                                       int N, int C);
/* The residual sum and the RMSNorm of it in one pass: res (N,C) act = a + b (res may alias
 * a or b), rounded to k->dtype as zeroc_k_add stores it; then out, rstd =
 * zeroc_k_rmsnorm_forward of that stored res. The same bits as the two calls; out must not
 * alias res, a or b. */
zeroc_result_t zeroc_k_residual_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res,
                                                void *out, float *rstd, const void *a,
                                                const void *b, const void *weight, float eps, int N,
                                                int C);
/* dweight (C) += sum over rows of dout * inp * rstd; dinp (N,C) += the input gradient
 * rstd (dout weight - xhat mean(dout weight xhat)), xhat = inp * rstd. flags
 * (ZEROC_K_DINP_SET) and dres as zeroc_k_layernorm_backward_ex: set, dinp = dres (NULL: +0)
 * + the gradient, dinp's old contents not read; without flags dres must be NULL. */
zeroc_result_t zeroc_k_rmsnorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                        void *dweight, const void *dout, const void *inp,
                                        const void *weight, const float *rstd, int N, int C,
                                        const void *dres, unsigned flags);

/* RoPE in place on the q and k heads of qkv (N rows of (NH + 2 NKV) HS, the fused layout
 * above; v is not touched): the pair of dims (i, i + HS/2) of each head of row n turns by
 * pos[n] * inv_freq[i] (transformers' rotate-half convention), inv_freq from `rope`
 * (kernels/rope.h: theta, llama3 scaling). pos (N) int32, one per row, any values (context
 * parallelism passes its chunks' global positions). HS even, <= ZEROC_ROPE_HS_MAX. */
zeroc_result_t zeroc_k_rope_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *qkv,
                                    const int32_t *pos, const zeroc_rope_t *rope, int N, int NH,
                                    int NKV, int HS);
/* The backward, in place on dqkv (same layout): the gradient of q and k turned back by the
 * same angles (the rotation's transpose); dv is not touched. In place, not accumulating:
 * run it on the finished dqkv, after the attention's backward. */
zeroc_result_t zeroc_k_rope_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                     const int32_t *pos, const zeroc_rope_t *rope, int N, int NH,
                                     int NKV, int HS);

/* SwiGLU: gu (N,2F) act is the fused gate-up GEMM's output, [gate | up] per row (the
 * weight's rows gate (F) then up (F)); out (N,F) act = silu(gate) * up. */
zeroc_result_t zeroc_k_swiglu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                      const void *gu, int N, int F);
/* dgu (N,2F) += [dout * up * silu'(gate) | dout * silu(gate)]. */
zeroc_result_t zeroc_k_swiglu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dgu,
                                       const void *dout, const void *gu, int N, int F);

/* Causal grouped-query attention: qkv (B,T,(NH + 2 NKV) HS), query head h reads kv head
 * h % NKV (not h / (NH / NKV) as transformers orders them: with the query heads in groups of
 * NKV, every tensor-parallel rank's whole kv heads and the query heads that read them are
 * an equal slice of each group, so the fused weight splits in NH/NKV + 2 equal groups; the
 * model permutes the query heads on import and export, model/gpt_impl.h); out (B,T,NH*HS), lse
 * (B,NH,T) and dropout as zeroc_k_attention_forward. NKV == NH gives zeroc_k_attention_forward's
 * bits (it is that call). On cuda only NKV == NH for now (ZEROC_ERR_UNSUPPORTED otherwise). */
zeroc_result_t zeroc_k_attention_gqa_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                             float *lse, const void *qkv, int B, int T, int NH,
                                             int NKV, int HS, const zeroc_dropout_t *drop);
/* dqkv (B,T,(NH + 2 NKV) HS) += the gradient (= with ZEROC_K_DQKV_SET); dk and dv of a kv
 * head sum over the NH / NKV query heads that read it. */
zeroc_result_t zeroc_k_attention_gqa_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                              const void *dout, const void *qkv, const void *out,
                                              const float *lse, int B, int T, int NH, int NKV,
                                              int HS, const zeroc_dropout_t *drop, unsigned flags);

#endif
