/*
 * kernels/cuda/cuda_kernels.h - the cuda implementations behind kernels.h, same
 * arguments; `s` is the cuda stream to launch on. Defined in the .cu files of kernels/cuda.
 *
 * One zeroc_kernels_t owns one cuBLASLt workspace and one reduction scratch, so its
 * matmul, layernorm_backward and encoder_backward calls go on one stream at a time (or
 * streams ordered by events); cast, accumulate, scale, sumsq and adamw may run on any.
 * Knobs, read once by kernels.c and handed to zeroc_i_cuda_kernels_init: ZEROC_CUDA_TF32=1
 * lets fp32 GEMMs use TF32 (default exact fp32), ZEROC_CUDA_SCRATCH_MB sizes the scratch
 * (default 64); kernels/cuda/init.cu has them all.
 *
 * Named zeroc_i_cuda_*, not zeroc__*: C++ (these are .cu files) reserves every name with
 * a double underscore (core/error.h has the naming rule).
 */
#ifndef ZEROC_KERNELS_CUDA_H
#define ZEROC_KERNELS_CUDA_H

#include "kernels/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The environment knobs of the cuda kernels (kernels/cuda/init.cu says what each does). */
typedef struct zeroc_i_cuda_knobs {
  int64_t scratch_mb;  /* ZEROC_CUDA_SCRATCH_MB [ZEROC_K_SCRATCH_MB_DEFAULT] */
  int64_t tf32;        /* ZEROC_CUDA_TF32 [0] */
  int64_t flash;       /* ZEROC_CUDA_FLASH [1] */
  int64_t lt_epilogue; /* ZEROC_CUDA_LT_EPILOGUE [1] */
} zeroc_i_cuda_knobs_t;

zeroc_result_t zeroc_i_cuda_kernels_init(zeroc_kernels_t *k, const zeroc_i_cuda_knobs_t *knobs);
void zeroc_i_cuda_kernels_fini(zeroc_kernels_t *k);
/* k's reduction scratch: where and how many bytes (the cuDNN attention's workspace, used
 * on the same stream as every other scratch user). */
void zeroc_i_cuda_scratch(zeroc_kernels_t *k, void **p, size_t *bytes);
zeroc_result_t zeroc_i_cuda_encoder_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                            const int32_t *inp, const void *wte, const void *wpe,
                                            int B, int T, int C);
zeroc_result_t zeroc_i_cuda_encoder_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                             void *dwpe, const void *dout, const int32_t *inp,
                                             int B, int T, int C);
zeroc_result_t zeroc_i_cuda_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                              float *mean, float *rstd, const void *inp,
                                              const void *weight, const void *bias, int N, int C);
zeroc_result_t zeroc_i_cuda_residual_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *res, void *out, float *mean,
                                                       float *rstd, const void *a, const void *b,
                                                       const void *weight, const void *bias, int N,
                                                       int C);
/* dres: dinp's base (zeroc_k_layernorm_backward_ex resolves its flags): NULL +0, dinp += */
zeroc_result_t zeroc_i_cuda_layernorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                               void *dweight, void *dbias, const void *dout,
                                               const void *inp, const void *weight,
                                               const float *mean, const float *rstd, int N, int C,
                                               const void *dres);
zeroc_result_t zeroc_i_cuda_matmul_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                           const void *inp, const void *weight, const void *bias,
                                           int N, int C, int OC);
zeroc_result_t zeroc_i_cuda_matmul_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                            void *dweight, void *dbias, const void *dout,
                                            const void *inp, const void *weight, int N, int C,
                                            int OC);
zeroc_result_t zeroc_i_cuda_matmul_forward_gelu(zeroc_kernels_t *k, zeroc_stream_t *s, void *pre,
                                                void *out, const void *inp, const void *weight,
                                                const void *bias, int N, int C, int OC);
zeroc_result_t zeroc_i_cuda_matmul_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                               void *dweight, void *dbias, const void *dout,
                                               const void *inp, const void *weight, int N, int C,
                                               int OC, const void *pre, void *dpre_bias,
                                               unsigned flags);
zeroc_result_t zeroc_i_cuda_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                              float *lse, const void *qkv, int B, int T, int C,
                                              int NH, const zeroc_dropout_t *drop);
zeroc_result_t zeroc_i_cuda_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                               const void *dout, const void *qkv, const void *out,
                                               const float *lse, int B, int T, int C, int NH,
                                               const zeroc_dropout_t *drop);
zeroc_result_t zeroc_i_cuda_attention_block_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                    void *pout, float *plse, const void *q,
                                                    const void *kk, const void *v,
                                                    const zeroc_attn_block_t *blk,
                                                    const zeroc_dropout_t *drop);
zeroc_result_t zeroc_i_cuda_attention_merge(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                            float *lse, const void *pout, const float *plse,
                                            const zeroc_attn_block_t *blk, int first);
zeroc_result_t zeroc_i_cuda_attention_block_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     void *dq, void *dk, void *dv, const void *dout,
                                                     const void *q, const void *kk, const void *v,
                                                     const void *out, const float *lse,
                                                     const zeroc_attn_block_t *blk,
                                                     const zeroc_dropout_t *drop);
zeroc_result_t zeroc_i_cuda_copy_rows(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                      size_t dst_t, const void *src, size_t src_t, size_t rows,
                                      size_t width, int add);
zeroc_result_t zeroc_i_cuda_gelu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                         const void *inp, size_t N);
zeroc_result_t zeroc_i_cuda_gelu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                          const void *inp, const void *dout, size_t N);
/* d (N) = gelu'(inp) * d, in place (matmul.cu's fallback for the DGELU epilogue) */
zeroc_result_t zeroc_i_cuda_gelu_scale(zeroc_kernels_t *k, zeroc_stream_t *s, void *d,
                                       const void *inp, size_t N);
zeroc_result_t zeroc_i_cuda_residual_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                             const void *a, const void *b, size_t N);
zeroc_result_t zeroc_i_cuda_add(zeroc_kernels_t *k, zeroc_stream_t *s, void *y, const void *x,
                                size_t N);
zeroc_result_t zeroc_i_cuda_dropout(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                    const void *in, const zeroc_dropout_t *drop, int N, int C);
zeroc_result_t zeroc_i_cuda_crossentropy_forward_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                          float *losses, void *logits,
                                                          const int32_t *targets, int N, int V,
                                                          int Vp, float dloss);
zeroc_result_t zeroc_i_cuda_vocab_embed_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                                const int32_t *inp, const void *wte,
                                                const void *wpe, int B, int T, int C, int v0,
                                                int Vl);
zeroc_result_t zeroc_i_cuda_vocab_embed_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                                 void *dwpe, const void *dout, const int32_t *inp,
                                                 int B, int T, int C, int v0, int Vl);
zeroc_result_t zeroc_i_cuda_vocab_ce_local(zeroc_kernels_t *k, zeroc_stream_t *s, float *mx,
                                           float *xt, const void *logits, const int32_t *targets,
                                           int N, int Vl, int v0, int V);
zeroc_result_t zeroc_i_cuda_vocab_ce_sumexp(zeroc_kernels_t *k, zeroc_stream_t *s, float *se,
                                            const void *logits, const float *mx, int N, int Vl,
                                            int v0, int V);
zeroc_result_t zeroc_i_cuda_vocab_ce_finish(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                            void *logits, const int32_t *targets, const float *mx,
                                            const float *se, const float *xt, int N, int Vl, int v0,
                                            int V, float dloss);
zeroc_result_t zeroc_i_cuda_cast(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                 zeroc_dtype_t dst_dt, const void *src, zeroc_dtype_t src_dt,
                                 size_t n);
zeroc_result_t zeroc_i_cuda_accumulate(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst,
                                       const void *src, zeroc_dtype_t src_dt, size_t n,
                                       float scale);
zeroc_result_t zeroc_i_cuda_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *x, size_t n,
                                  float a);
zeroc_result_t zeroc_i_cuda_add_to(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                                   zeroc_dtype_t dst_dt, const float *src, size_t n);
zeroc_result_t zeroc_i_cuda_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, double *out, const void *x,
                                  zeroc_dtype_t dt, size_t n);
zeroc_result_t zeroc_i_cuda_mean_add(zeroc_kernels_t *k, zeroc_stream_t *s, double *acc,
                                     const float *x, size_t n, double denom);
zeroc_result_t zeroc_i_cuda_clip_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *scale,
                                       const double *sumsq, float clip);
zeroc_result_t zeroc_i_cuda_adamw(zeroc_kernels_t *k, zeroc_stream_t *s, float *param, float *m,
                                  float *v, const float *grad, size_t n,
                                  const zeroc_adamw_args_t *a);
zeroc_result_t zeroc_i_cuda_adamw_mixed(zeroc_kernels_t *k, zeroc_stream_t *s, float *param,
                                        float *m, float *v, const void *grad, zeroc_dtype_t grad_dt,
                                        void *out, zeroc_dtype_t out_dt, size_t n,
                                        const zeroc_adamw_args_t *a);

zeroc_result_t zeroc_i_cuda_embedbag_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                             int64_t blk, int64_t blk_stride, int64_t ldo,
                                             const float *w, int64_t ldw, const int64_t *idx,
                                             const int32_t *offs, int64_t nbags, int dc);
zeroc_result_t zeroc_i_cuda_embedbag_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *grad,
                                              int64_t ldg, const int64_t *idx, const int32_t *offs,
                                              int64_t nbags, const float *dout, int64_t blk,
                                              int64_t blk_stride, int64_t ldo, int dc);
zeroc_result_t zeroc_i_cuda_rowwise_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, float *ss,
                                          const float *g, int64_t U, int dc, float scale);
zeroc_result_t zeroc_i_cuda_rowwise_adagrad(zeroc_kernels_t *k, zeroc_stream_t *s, float *w,
                                            int64_t ldw, float *state, const int64_t *rows,
                                            const float *g, const float *ss, int64_t U, int dc,
                                            int D, float scale, float lr, float eps);
zeroc_result_t zeroc_i_cuda_copy2d(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst, int64_t ldd,
                                   const float *src, int64_t lds, int64_t rows, int64_t cols);

/* kernels/cuda/llama.cu: the cuda twins of kernels/llama_kernels.h. rmsnorm_forward: res and
 * b NULL for the plain RMSNorm of a, else res = a + b first; rmsnorm_backward's dres is
 * dinp's base (NULL +0, dinp +=); rope turns nh heads of HS from column 0 of x's N rows (ld
 * apart) in place, inv_freq (HS/2) on the host, inverse for the backward. */
zeroc_result_t zeroc_i_cuda_rmsnorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res,
                                            void *out, float *rstd, const void *a, const void *b,
                                            const void *weight, float eps, int N, int C);
zeroc_result_t zeroc_i_cuda_rmsnorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                             void *dweight, const void *dout, const void *inp,
                                             const void *weight, const float *rstd, int N, int C,
                                             const void *dres);
zeroc_result_t zeroc_i_cuda_rope(zeroc_kernels_t *k, zeroc_stream_t *s, void *x, size_t ld,
                                 const int32_t *pos, const float *inv_freq, int N, int nh, int HS,
                                 int inverse);
zeroc_result_t zeroc_i_cuda_swiglu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                           const void *gu, int N, int F);
zeroc_result_t zeroc_i_cuda_swiglu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dgu,
                                            const void *dout, const void *gu, int N, int F);

/* kernels/cuda/dlrm.cu: the cuda twins of kernels/dlrm_kernels.h, same contracts, on `s` */
zeroc_result_t zeroc_i_cuda_relu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                         const float *inp, size_t N);
zeroc_result_t zeroc_i_cuda_relu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dinp,
                                          const float *out, const float *dout, size_t N);
zeroc_result_t zeroc_i_cuda_interact_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                             const float *z, const float *emb, int B, int T, int D);
zeroc_result_t zeroc_i_cuda_interact_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dz,
                                              float *demb, const float *dout, const float *z,
                                              const float *emb, int B, int T, int D);
zeroc_result_t zeroc_i_cuda_bce(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                float *dlogits, const float *logits, const float *labels, int B,
                                float dloss);
#ifdef __cplusplus
}
#endif
#endif
