/*
 * kernels/kernels.h - every numeric kernel behind one dispatch.
 *
 * The model and the engine call zeroc_k_*(k, s, ...) and the device of `k`
 * decides: cpu kernels (kernels/cpu/, OpenBLAS + OpenMP, fp32) or cuda kernels
 * (kernels/cuda/, launched on `s`; activations and parameters in k->dtype, fp32
 * or bf16, accumulating in fp32). Kernels know nothing of sharding.
 * On cpu, where `s` runs: the model kernels run on the calling thread, so they
 * take the compute stream (inline on cpu: its work runs on the caller) or NULL;
 * the engine kernels (cast .. adamw below) run in `s`'s order, on the calling
 * thread for the compute stream or NULL, enqueued on the worker thread of any
 * other stream (the engine's gather and reduce streams). The host kernels at
 * the end run on the calling thread on host memory, whatever the device.
 *
 * Conventions:
 * - Dimension letters: B batch, T sequence, C channels, OC output channels,
 *   NH heads, HS head size (C / NH), V vocabulary, Vp padded vocabulary,
 *   N rows (usually B*T).
 * - Tensors marked `act` are `void *` in k->dtype; statistics (mean, rstd,
 *   lse, losses) are always fp32; token ids are int32.
 * - Every backward kernel ACCUMULATES (+=) into every gradient it writes, so a
 *   tensor used twice (a residual, a tied weight) sums its contributions; the
 *   caller zeroes gradients before the first use.
 * - Weights are (OC, C) row-major: out = inp @ weight^T + bias.
 * - Each returns ZEROC_OK or an error (bad shape, CUDA/cuBLAS failure).
 */
#ifndef ZEROC_KERNELS_KERNELS_H
#define ZEROC_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "kernels/dropout.h"
#include "kernels/types.h"
#include "zeroc/device.h"
#include "zeroc/types.h"

/* The kernels object (zeroc_kernels_t), the flags and the argument structs are in
 * kernels/types.h, which the backends share. */

/* Creates the kernels for the device of `mem` (which also supplies their
 * workspace) with `compute` as the stream a NULL `s` stands for; dtype fp32
 * (cpu, cuda) or bf16 (cuda). The context hands both over:
 * zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx). */
zeroc_result_t zeroc_kernels_create(const zeroc__devmem_t *mem, zeroc_stream_t *compute,
                                    zeroc_dtype_t dtype, zeroc_kernels_t **k);
void zeroc_kernels_destroy(zeroc_kernels_t *k);

/* 1: k uses bitwise-repeatable kernels only where a faster non-deterministic one exists
 * (cuda: cuDNN attention's deterministic backward instead of its fp32-atomics one, with a
 * workspace of its own when the kernel scratch is too small). Set before the first
 * attention call; ZEROC_CUDA_DETERMINISTIC=1 in the environment sets it for every
 * kernels object at create. zeroc's own kernels are deterministic either way. */
void zeroc_k_set_deterministic(zeroc_kernels_t *k, int on);

/* The attention kernels a model on `dev` computing in `dtype` runs, in words, into buf[n]:
 * "cpu kernels (zeroc's own, fp32)", "cuDNN SDPA ..." or "zeroc's own cuda kernels: <why
 * not cuDNN>" (cuDNN missing, the shape refused, disabled by ZEROC_CUDA_ATTENTION, fp32).
 * On cuda it is what the process's kernels objects last found: at create (whether cuDNN
 * loads), then at each new shape (whether cuDNN's plans build) and at a failed run. */
void zeroc_k_attention_backend(zeroc_device_kind_t dev, zeroc_dtype_t dtype, char *buf, size_t n);

/* ---- embedding bags (embed/) ---------------------------------------------------
 * fp32 whatever k->dtype. Bag b's output (or gradient) row lies at
 * out + (b / blk) * blk_stride + (b % blk) * ldo: bags come in blocks (one per
 * peer rank of an exchange buffer); blk = nbags makes it plainly (nbags, ldo).
 * idx int64 rows into w (or grad); offs (nbags+1) int32 bag boundaries in idx. */

/* out row of bag b (dc) = sum over i in [offs[b], offs[b+1]) of w[idx[i]*ldw .. + dc);
 * a bag without ids gives 0. */
zeroc_result_t zeroc_k_embedbag_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                        int64_t blk, int64_t blk_stride, int64_t ldo,
                                        const float *w, int64_t ldw, const int64_t *idx,
                                        const int32_t *offs, int64_t nbags, int dc);
/* grad (rows, ldg): grad[idx[i]*ldg .. + dc) += dout row of the bag holding i. */
zeroc_result_t zeroc_k_embedbag_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *grad,
                                         int64_t ldg, const int64_t *idx, const int32_t *offs,
                                         int64_t nbags, const float *dout, int64_t blk,
                                         int64_t blk_stride, int64_t ldo, int dc);
/* ss (U) = sum_j (scale * g[u, j])^2; g (U, dc). */
zeroc_result_t zeroc_k_rowwise_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, float *ss,
                                     const float *g, int64_t U, int dc, float scale);
/* Row-wise AdaGrad on rows r = rows[u] (u when rows is NULL) of w (.., ldw) and
 * state (..): state[r] += ss[u] / D; w[r, j] -= lr * scale * g[u, j] / (sqrt(state[r]) + eps)
 * for j < dc; g (U, dc), ss (U) from zeroc_k_rowwise_sumsq (summed over the row's D
 * columns when they are split over ranks). Rows must be distinct. */
zeroc_result_t zeroc_k_rowwise_adagrad(zeroc_kernels_t *k, zeroc_stream_t *s, float *w,
                                       int64_t ldw, float *state, const int64_t *rows,
                                       const float *g, const float *ss, int64_t U, int dc, int D,
                                       float scale, float lr, float eps);
/* dst (rows, cols) with row stride ldd <- src (rows, cols) with row stride lds (fp32). */
zeroc_result_t zeroc_k_copy2d(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst, int64_t ldd,
                              const float *src, int64_t lds, int64_t rows, int64_t cols);

/* ---- model kernels (GPT-2) ------------------------------------------------------ */

/* out (B,T,C) act = wte[inp[b,t]] + wpe[t]; inp (B,T) int32 in [0, V); wte (V,C), wpe (>=T,C) act
 */
zeroc_result_t zeroc_k_encoder_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       const int32_t *inp, const void *wte, const void *wpe, int B,
                                       int T, int C);
/* dwte (V,C) += scatter of dout rows by token; dwpe (T,C) += sum over b. Deterministic. */
zeroc_result_t zeroc_k_encoder_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                        void *dwpe, const void *dout, const int32_t *inp, int B,
                                        int T, int C);

/* out (N,C) = (inp - mean) * rstd * weight + bias, eps 1e-5; mean, rstd (N) fp32 saved. */
zeroc_result_t zeroc_k_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                         float *mean, float *rstd, const void *inp,
                                         const void *weight, const void *bias, int N, int C);
/* dinp (N,C) +=, dweight (C) +=, dbias (C) += */
zeroc_result_t zeroc_k_layernorm_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                          void *dweight, void *dbias, const void *dout,
                                          const void *inp, const void *weight, const float *mean,
                                          const float *rstd, int N, int C);

/* A residual sum and the LayerNorm of it in one pass (the block's x + attn(..) then ln2):
 * res (N,C) act = a + b (res may alias a or b), rounded to k->dtype as zeroc_k_add stores
 * it; then out, mean, rstd = zeroc_k_layernorm_forward of that stored res. The same bits
 * as the two calls; out must not alias res, a or b. */
zeroc_result_t zeroc_k_residual_layernorm_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *res,
                                                  void *out, float *mean, float *rstd,
                                                  const void *a, const void *b, const void *weight,
                                                  const void *bias, int N, int C);

/* out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC); bias may be NULL. */
zeroc_result_t zeroc_k_matmul_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                      const void *inp, const void *weight, const void *bias, int N,
                                      int C, int OC);
/* dinp (N,C) += dout @ weight (may be NULL: not needed); dweight (OC,C) += dout^T @ inp;
 * dbias (OC) += column sums of dout (may be NULL). */
zeroc_result_t zeroc_k_matmul_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                       void *dweight, void *dbias, const void *dout,
                                       const void *inp, const void *weight, int N, int C, int OC);

/* A linear layer followed by GELU: pre (N,OC) = inp @ weight^T + bias (may be NULL), kept
 * for the backward; out (N,OC) = gelu(pre). On cuda one GEMM with cuBLASLt's GELU_AUX_BIAS
 * epilogue where it has an algorithm for the shape (cpu, or else: the two kernels). */
zeroc_result_t zeroc_k_matmul_forward_gelu(zeroc_kernels_t *k, zeroc_stream_t *s, void *pre,
                                           void *out, const void *inp, const void *weight,
                                           const void *bias, int N, int C, int OC);

/* zeroc_k_matmul_backward with options. flags: ZEROC_K_DINP_SET. pre (N,C) act or NULL:
 * inp is gelu(pre), and dinp = gelu'(pre) * (dout @ weight), the gradient before that GELU
 * (always set, never added); dpre_bias (C) += its column sums, the bias gradient of the
 * layer that made pre (NULL: none; needs pre). On cuda the GELU's gradient and the bias
 * gradients come from cuBLASLt epilogues where it has an algorithm for the shape. */
zeroc_result_t zeroc_k_matmul_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                          void *dweight, void *dbias, const void *dout,
                                          const void *inp, const void *weight, int N, int C,
                                          int OC, const void *pre, void *dpre_bias,
                                          unsigned flags);

/* zeroc_k_layernorm_backward with flags (ZEROC_K_DINP_SET): set, dinp (N,C) = dres + the
 * input gradient, dinp's old contents not read; dres (N,C) act, the gradient that reaches
 * the LayerNorm's input by another path (a residual), so it needs no copy into dinp first;
 * NULL: dinp = +0 + the gradient (no memset); dres == dinp: the plain +=. The same bits
 * as the copy (or memset) then zeroc_k_layernorm_backward. Without flags, dres must be
 * NULL. dweight and dbias are added to as always. */
zeroc_result_t zeroc_k_layernorm_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                             void *dweight, void *dbias, const void *dout,
                                             const void *inp, const void *weight, const float *mean,
                                             const float *rstd, int N, int C, const void *dres,
                                             unsigned flags);

/* Causal multi-head attention, flash style (no T x T matrix kept):
 * qkv (B,T,3C) holds q | k | v, head h in columns [h*HS, (h+1)*HS) of each;
 * out (B,T,C) = softmax(q k^T / sqrt(HS), causal) v per head;
 * lse (B,NH,T) fp32 = log-sum-exp of each row of scaled scores, saved for backward.
 * drop: NULL, or dropout on the probabilities (kernels/dropout.h; lse stays that of
 * the undropped scores).
 * On cuda, with ZEROC_CUDA_ATTENTION=auto or cudnn (the default is zeroc's kernels until
 * cuDNN's path has run on a GPU; attention_cudnn.h), bf16 calls without dropout and with
 * head size a multiple of 8 up to 128 go to cuDNN's fused flash attention when it loads;
 * the backward does so only with ZEROC_K_DQKV_SET. Both paths store the same lse. */
zeroc_result_t zeroc_k_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                         float *lse, const void *qkv, int B, int T, int C, int NH,
                                         const zeroc_dropout_t *drop);
/* dqkv (B,T,3C) += gradient w.r.t. q, k, v, recomputing the scores from qkv and lse (and
 * the forward's mask from `drop`). */
zeroc_result_t zeroc_k_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                          const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int C, int NH,
                                          const zeroc_dropout_t *drop);
/* zeroc_k_attention_backward with flags (ZEROC_K_DQKV_SET). On cpu each head clears its
 * own rows of dqkv just before it adds to them, while they are in cache, instead of a
 * separate pass over the whole (B,T,3C); on cuda it is a memset before the kernels. */
zeroc_result_t zeroc_k_attention_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                             const void *dout, const void *qkv, const void *out,
                                             const float *lse, int B, int T, int C, int NH,
                                             const zeroc_dropout_t *drop, unsigned flags);

/* ---- attention blocks (context parallelism) ----------------------------------------
 * One (query block, key block) pair of causal attention, with q and k/v at separate
 * addresses and strides, for attention split over the sequence (cp/ring.c). A pair is
 * either diagonal (same positions, causal inside) or fully visible; fully masked
 * pairs are never called. Positions are global, so dropout masks (kernels/dropout.h)
 * are the unsplit run's: query i of the block is position q_pos + i, key j k_pos + j.
 * zeroc_attn_block_t (kernels/types.h) describes the pair. */

/* The pair's own attention: pout (B,Tq,NH*HS) act, contiguous, = softmax over the
 * block's visible keys of q k^T / sqrt(HS), times v; plse (B,NH,Tq) fp32 contiguous
 * its log-sum-exp (of the undropped scores, as zeroc_k_attention_forward). */
zeroc_result_t zeroc_k_attention_block_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *pout,
                                               float *plse, const void *q, const void *kk,
                                               const void *v, const zeroc_attn_block_t *blk,
                                               const zeroc_dropout_t *drop);
/* Merges a pair's (pout, plse) (layout as above) into the running (out, lse) of the
 * query block (blk's o_* and l_* layout): lse' = log(e^lse + e^plse), out' = out
 * e^(lse-lse') + pout e^(plse-lse'). first != 0: out, lse <- pout, plse (nothing yet). */
zeroc_result_t zeroc_k_attention_merge(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                       float *lse, const void *pout, const float *plse,
                                       const zeroc_attn_block_t *blk, int first);
/* The pair's backward given the FINAL out and lse of the query rows (D = rowsum(dout *
 * out)): dq (q layout) +=, dk and dv (kv layout) += their part of the gradient. */
zeroc_result_t zeroc_k_attention_block_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dq,
                                                void *dk, void *dv, const void *dout,
                                                const void *q, const void *kk, const void *v,
                                                const void *out, const float *lse,
                                                const zeroc_attn_block_t *blk,
                                                const zeroc_dropout_t *drop);
/* Strided rows of act: dst[r*dst_t + w] = (or += when add) src[r*src_t + w], r < rows,
 * w < width (pack and unpack of the cp transfers). */
zeroc_result_t zeroc_k_copy_rows(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst, size_t dst_t,
                                 const void *src, size_t src_t, size_t rows, size_t width,
                                 int add);

/* GPT-2's tanh GELU: out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
zeroc_result_t zeroc_k_gelu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                    const void *inp, size_t N);
/* dinp (N) += gelu'(inp) * dout */
zeroc_result_t zeroc_k_gelu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp,
                                     const void *inp, const void *dout, size_t N);

/* out (N) = a + b (out may alias a or b) */
zeroc_result_t zeroc_k_residual_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                        const void *a, const void *b, size_t N);
/* y (N) += x */
zeroc_result_t zeroc_k_add(zeroc_kernels_t *k, zeroc_stream_t *s, void *y, const void *x, size_t N);

/* Inverted dropout of token rows: out (N,C) = in * keep / (1 - p) (out may alias in),
 * each element's keep drawn by kernels/dropout.h from its global (row, channel). The
 * forward on an activation and the backward on its gradient are the same call. */
zeroc_result_t zeroc_k_dropout(zeroc_kernels_t *k, zeroc_stream_t *s, void *out, const void *in,
                               const zeroc_dropout_t *drop, int N, int C);

/* Fused softmax + cross-entropy + gradient, in place on the logits:
 * logits (N,Vp) act; the first V columns are real, the rest padding (ignored).
 * losses (N) fp32 = -log softmax(logits[n])[targets[n]]; a negative target
 * means "no loss" (loss 0, gradient 0).
 * When dloss != 0, logits[n] is overwritten with dloss * (softmax - onehot)
 * (padding columns set to 0); when dloss == 0 the logits are left untouched. */
zeroc_result_t zeroc_k_crossentropy_forward_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     float *losses, void *logits,
                                                     const int32_t *targets, int N, int V, int Vp,
                                                     float dloss);

/* ---- vocabulary-parallel kernels (tensor parallelism) ---------------------------
 * A tensor-parallel rank holds rows v0 .. v0+Vl-1 of the padded vocabulary (of
 * wte, and so columns of the logits); global index < V is a real entry, the
 * rest padding. tp/ all-reduces the partial results between these calls. */

/* out (B,T,C) act = [v0 <= inp < v0+Vl] wte[inp - v0] + wpe[t]; wte (Vl,C) act;
 * wpe (>=T,C) act or NULL (then only the token rows, zero elsewhere). */
zeroc_result_t zeroc_k_vocab_embed_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                           const int32_t *inp, const void *wte, const void *wpe,
                                           int B, int T, int C, int v0, int Vl);
/* dwte (Vl,C) += dout rows of tokens in [v0, v0+Vl); dwpe (T,C) += sum over b, when not
 * NULL. Deterministic. */
zeroc_result_t zeroc_k_vocab_embed_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dwte,
                                            void *dwpe, const void *dout, const int32_t *inp, int B,
                                            int T, int C, int v0, int Vl);
/* logits (N,Vl) act -> mx (N) fp32 = max over this slice's real columns (-inf if none);
 * xt (N) fp32 = logits[n, targets[n] - v0] when the target is a real column of this
 * slice, else 0. */
zeroc_result_t zeroc_k_vocab_ce_local(zeroc_kernels_t *k, zeroc_stream_t *s, float *mx, float *xt,
                                      const void *logits, const int32_t *targets, int N, int Vl,
                                      int v0, int V);
/* se (N) fp32 = sum over this slice's real columns of exp(logits - mx); mx the global max. */
zeroc_result_t zeroc_k_vocab_ce_sumexp(zeroc_kernels_t *k, zeroc_stream_t *s, float *se,
                                       const void *logits, const float *mx, int N, int Vl, int v0,
                                       int V);
/* From the global mx, se, xt: losses (N) fp32 = mx + log(se) - xt (target < 0: 0;
 * target >= V: NaN). When dloss != 0, logits (N,Vl) <- dloss * (softmax - onehot) on
 * this slice's real columns, 0 on padding. */
zeroc_result_t zeroc_k_vocab_ce_finish(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                       void *logits, const int32_t *targets, const float *mx,
                                       const float *se, const float *xt, int N, int Vl, int v0,
                                       int V, float dloss);

/* ---- engine kernels (flat shards) --------------------------------------------- */

/* dst (n, dst_dt) = src (n, src_dt); fp32 <-> bf16 (round to nearest even), or a copy. */
zeroc_result_t zeroc_k_cast(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst, zeroc_dtype_t dst_dt,
                            const void *src, zeroc_dtype_t src_dt, size_t n);
/* dst (n) fp32 += scale * src (n, src_dt) */
zeroc_result_t zeroc_k_accumulate(zeroc_kernels_t *k, zeroc_stream_t *s, float *dst,
                                  const void *src, zeroc_dtype_t src_dt, size_t n, float scale);
/* x (n) fp32 *= a */
zeroc_result_t zeroc_k_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *x, size_t n, float a);
/* dst (n, dst_dt) = dst + src (n) fp32, added in fp32 and rounded to dst_dt (nearest even). */
zeroc_result_t zeroc_k_add_to(zeroc_kernels_t *k, zeroc_stream_t *s, void *dst,
                              zeroc_dtype_t dst_dt, const float *src, size_t n);
/* *out (one fp64, device memory) += sum of x[i]^2 (NaN/Inf propagate); x (n) fp32 or bf16,
 * read in its own dtype (a bf16 gradient needs no fp32 copy first). */
zeroc_result_t zeroc_k_sumsq(zeroc_kernels_t *k, zeroc_stream_t *s, double *out, const void *x,
                             zeroc_dtype_t dt, size_t n);
/* *acc (one fp64, device memory) += (float)(sum of x[i] in fp64 / denom): a loss
 * head's mean loss, rounded to fp32 as a host-side loss would be, added on the
 * device so no host waits for it. The cpu twin sums in index order. */
zeroc_result_t zeroc_k_mean_add(zeroc_kernels_t *k, zeroc_stream_t *s, double *acc, const float *x,
                                size_t n, double denom);

/* *scale (one fp32, device memory) = zeroc_i_clip_scale(*sumsq, clip) (kernels/clip.h):
 * the gradient's multiplier from its global sum of squares (one fp64, device memory),
 * NaN to skip a non-finite step; for zeroc_adamw_args_t.scale_dev, so that a step is
 * clipped or skipped without the host reading the norm first. */
zeroc_result_t zeroc_k_clip_scale(zeroc_kernels_t *k, zeroc_stream_t *s, float *scale,
                                  const double *sumsq, float clip);

/* AdamW (decoupled weight decay) on n fp32 elements:
 * g = grad*grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * param -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * param). */
zeroc_result_t zeroc_k_adamw(zeroc_kernels_t *k, zeroc_stream_t *s, float *param, float *m,
                             float *v, const float *grad, size_t n, const zeroc_adamw_args_t *a);

/* zeroc_k_adamw reading the gradient in grad_dt (fp32 or bf16: the reduced shard, no fp32
 * copy) and, when out is not NULL, writing the new param rounded to out_dt (fp32 or bf16:
 * the compute shard) in the same pass; the same bits as cast + adamw + cast. */
zeroc_result_t zeroc_k_adamw_mixed(zeroc_kernels_t *k, zeroc_stream_t *s, float *param, float *m,
                                   float *v, const void *grad, zeroc_dtype_t grad_dt, void *out,
                                   zeroc_dtype_t out_dt, size_t n, const zeroc_adamw_args_t *a);

/* ---- host kernels (host memory, calling thread, any device) ---------------------
 * For state kept on the host (optimizer offload): the same arithmetic as the
 * cpu twins of zeroc_k_cast and zeroc_k_adamw, bit for bit. */

/* dst (n, dst_dt) = src (n, src_dt); fp32 <-> bf16 or a copy; host memory. */
zeroc_result_t zeroc_k_host_cast(void *dst, zeroc_dtype_t dst_dt, const void *src,
                                 zeroc_dtype_t src_dt, size_t n);
/* zeroc_k_adamw on host memory. */
zeroc_result_t zeroc_k_host_adamw(float *param, float *m, float *v, const float *grad, size_t n,
                                  const zeroc_adamw_args_t *a);

/* ZEROC_OK for a NULL descriptor or a valid one (0 <= p < 1, positive sizes); else the
 * error naming `fn` (the attention kernels' check, for llama_kernels.c's too). */
zeroc_result_t zeroc__kernels_check_dropout(const char *fn, const zeroc_dropout_t *d);

/* The bytes of the cuda state's buffers (ZEROC_K_LT_WORKSPACE_BYTES and the rest in
 * kernels/types.h) on `kind` (0 on the cpu, whose kernels allocate nothing of their own). */
size_t zeroc__kernels_device_bytes(zeroc_device_kind_t kind);
/* The cuda reduction scratch's bytes (ZEROC_CUDA_SCRATCH_MB, default 64 MiB): where cuDNN's
 * attention workspace goes when it fits (zeroc__cudnn_ws_own). */
size_t zeroc__kernels_scratch_bytes(void);

/* The dtype the kernels of ctx's device compute in for parameters of
 * `param_dtype`: that dtype on cuda, fp32 on cpu (bf16 parameters are then
 * converted to fp32 compute copies). */
zeroc_dtype_t zeroc_kernels_compute_dtype(zeroc_device_kind_t dev, zeroc_dtype_t param_dtype);

#endif
