/*
 * kernels/cpu/cpu_kernels.h - the cpu twins of kernels.h, fp32 only, run on
 * the calling thread with OpenMP. Each is the obviously-right version the
 * cuda kernels are checked against.
 */
#ifndef ZEROC_KERNELS_CPU_H
#define ZEROC_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dropout.h"
#include "kernels/types.h"

void zeroc__cpu_encoder_forward(float *out, const int32_t *inp, const float *wte,
                                const float *wpe, int B, int T, int C);
void zeroc__cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                                 int B, int T, int C);
void zeroc__cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C);
/* res (N,C) = a + b (may alias a or b), then the forward above on res */
void zeroc__cpu_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                           const float *a, const float *b, const float *weight,
                                           const float *bias, int N, int C);
/* dinp = dres + the input gradient: dres (N,C) is dinp's base, NULL for +0 (a zeroed dinp),
 * dinp itself for the plain += */
void zeroc__cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                   const float *inp, const float *weight, const float *mean,
                                   const float *rstd, int N, int C, const float *dres);
void zeroc__cpu_matmul_forward(float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC);
/* out (OC) = weight (OC,C) @ inp (C) + bias (OC, may be NULL): one row (inference) */
void zeroc__cpu_matvec_forward(float *out, const float *inp, const float *weight,
                               const float *bias, int C, int OC);
void zeroc__cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *weight, int N, int C, int OC);
/* zeroc_k_matmul_backward_ex's twin: set_dinp overwrites dinp; pre (N,C) or NULL: dinp =
 * gelu'(pre) * (dout @ weight) (set), dpre_bias (C, may be NULL) += its column sums */
void zeroc__cpu_matmul_backward_ex(float *dinp, float *dweight, float *dbias, const float *dout,
                                   const float *inp, const float *weight, int N, int C, int OC,
                                   const float *pre, float *dpre_bias, int set_dinp);
/* drop: attention dropout on the probabilities, or NULL */
void zeroc__cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                  int NH, const zeroc_dropout_t *drop);
void zeroc__cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                   const float *out, const float *lse, int B, int T, int C, int NH,
                                   const zeroc_dropout_t *drop, int set);
/* grouped-query attention: qkv (B,T,(NH+2*NKV)*HS) = [q | k | v], q head h reading kv head
 * h / (NH/NKV); out (B,T,NH*HS); NKV == NH is the two above, bit for bit */
void zeroc__cpu_attention_gqa_forward(float *out, float *lse, const float *qkv, int B, int T,
                                      int NH, int NKV, int HS, const zeroc_dropout_t *drop);
void zeroc__cpu_attention_gqa_backward(float *dqkv, const float *dout, const float *qkv,
                                       const float *out, const float *lse, int B, int T, int NH,
                                       int NKV, int HS, const zeroc_dropout_t *drop, int set);
/* attention blocks (kernels/types.h: zeroc_attn_block_t) */
void zeroc__cpu_attention_block_forward(float *pout, float *plse, const float *q, const float *k,
                                        const float *v, const zeroc_attn_block_t *blk,
                                        const zeroc_dropout_t *drop);
void zeroc__cpu_attention_merge(float *out, float *lse, const float *pout, const float *plse,
                                const zeroc_attn_block_t *blk, int first);
void zeroc__cpu_attention_block_backward(float *dq, float *dk, float *dv, const float *dout,
                                         const float *q, const float *k, const float *v,
                                         const float *out, const float *lse,
                                         const zeroc_attn_block_t *blk,
                                         const zeroc_dropout_t *drop);
void zeroc__cpu_copy_rows(float *dst, size_t dst_t, const float *src, size_t src_t, size_t rows,
                          size_t width, int add);
void zeroc__cpu_gelu_forward(float *out, const float *inp, size_t N);
void zeroc__cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);
/* d (N) = gelu'(inp) * d, in place; out (N) = gelu(inp), as the forward wrote it */
void zeroc__cpu_gelu_scale(float *d, const float *inp, const float *out, size_t N);
/* the same on d (N,C), and dbias (C) += its column sums (rows in order) */
void zeroc__cpu_gelu_scale_colsum(float *d, const float *inp, const float *out, float *dbias,
                                  int N, int C);
void zeroc__cpu_residual_forward(float *out, const float *a, const float *b, size_t N);
void zeroc__cpu_add(float *y, const float *x, size_t N);
void zeroc__cpu_dropout(float *out, const float *in, const zeroc_dropout_t *d, int N, int C);
void zeroc__cpu_crossentropy_forward_backward(float *losses, float *logits, const int32_t *targets,
                                              int N, int V, int Vp, float dloss);
void zeroc__cpu_vocab_embed_forward(float *out, const int32_t *inp, const float *wte,
                                    const float *wpe, int B, int T, int C, int v0, int Vl);
void zeroc__cpu_vocab_embed_backward(float *dwte, float *dwpe, const float *dout,
                                     const int32_t *inp, int B, int T, int C, int v0, int Vl);
void zeroc__cpu_vocab_ce_local(float *mx, float *xt, const float *logits, const int32_t *targets,
                               int N, int Vl, int v0, int V);
void zeroc__cpu_vocab_ce_sumexp(float *se, const float *logits, const float *mx, int N, int Vl,
                                int v0, int V);
void zeroc__cpu_vocab_ce_finish(float *losses, float *logits, const int32_t *targets,
                                const float *mx, const float *se, const float *xt, int N, int Vl,
                                int v0, int V, float dloss);

void zeroc__cpu_cast(void *dst, int dst_dt, const void *src, int src_dt, size_t n);
void zeroc__cpu_accumulate(float *dst, const void *src, int src_dt, size_t n, float scale);
void zeroc__cpu_scale(float *x, size_t n, float a);
void zeroc__cpu_add_to(void *dst, int dst_dt, const float *src, size_t n);
/* Sum of squares of x (n, dt: fp32 or bf16) in double. */
double zeroc__cpu_sumsq(const void *x, int dt, size_t n);
/* (float)(sum of x in double, in index order / denom), widened back to double. */
double zeroc__cpu_mean(const float *x, size_t n, double denom);
void zeroc__cpu_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, float grad_scale, float bc1,
                      float bc2);
/* grad (n) in grad_dt; out (n) in out_dt, or NULL: = the new param, rounded */
void zeroc__cpu_adamw_mixed(float *param, float *m, float *v, const void *grad, int grad_dt,
                            void *out, int out_dt, size_t n, float lr, float beta1, float beta2,
                            float eps, float wd, float grad_scale, float bc1, float bc2);

/* kernels/cpu/llama.c: the cpu twins of kernels/llama_kernels.h */
void zeroc__cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                                float eps, int N, int C);
void zeroc__cpu_residual_rmsnorm_forward(float *res, float *out, float *rstd, const float *a,
                                         const float *b, const float *weight, float eps, int N,
                                         int C);
/* dres: dinp's base as for the LayerNorm (NULL +0, dinp itself +=) */
void zeroc__cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                 const float *weight, const float *rstd, int N, int C,
                                 const float *dres);
/* x (N rows ld apart, nh heads of HS from column 0) rotated in place by pos (N) x inv_freq
 * (HS/2); inverse: by minus the angle (the backward) */
void zeroc__cpu_rope(float *x, size_t ld, const int32_t *pos, const float *inv_freq, int N, int nh,
                     int HS, int inverse);
void zeroc__cpu_swiglu_forward(float *out, const float *gu, int N, int F);
void zeroc__cpu_swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F);

/* kernels/cpu/embedbag.c */
void zeroc__cpu_embedbag_forward(float *out, int64_t blk, int64_t blk_stride, int64_t ldo,
                                 const float *w, int64_t ldw, const int64_t *idx,
                                 const int32_t *offs, int64_t nbags, int dc);
void zeroc__cpu_embedbag_backward(float *grad, int64_t ldg, const int64_t *idx,
                                  const int32_t *offs, int64_t nbags, const float *dout,
                                  int64_t blk, int64_t blk_stride, int64_t ldo, int dc);
void zeroc__cpu_rowwise_sumsq(float *ss, const float *g, int64_t U, int dc, float scale);
void zeroc__cpu_rowwise_adagrad(float *w, int64_t ldw, float *state, const int64_t *rows,
                                const float *g, const float *ss, int64_t U, int dc, int D,
                                float scale, float lr, float eps);
void zeroc__cpu_copy2d(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                       int64_t cols);

/* kernels/cpu/dlrm.c: the cpu twins of kernels/dlrm_kernels.h */
void zeroc__cpu_relu_forward(float *out, const float *inp, size_t N);
void zeroc__cpu_relu_backward(float *dinp, const float *out, const float *dout, size_t N);
void zeroc__cpu_interact_forward(float *out, const float *z, const float *emb, int B, int T, int D);
void zeroc__cpu_interact_backward(float *dz, float *demb, const float *dout, const float *z,
                                  const float *emb, int B, int T, int D);
void zeroc__cpu_bce(float *losses, float *dlogits, const float *logits, const float *labels, int B,
                    float dloss);

#endif
