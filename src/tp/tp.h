/*
 * tp/tp.h - Megatron-style tensor-parallel layers on the context's tp group:
 * column- and row-parallel linear layers with their conjugate operators, the
 * vocabulary-parallel embedding and cross-entropy, and sequence parallelism.
 *
 * Without sequence parallelism the activations outside the parallel regions
 * (LayerNorms, residuals) are replicated (N rows on every rank): a
 * column-parallel layer's input passes forward unchanged and its gradient is
 * all-reduced ("f"), a row-parallel layer's output is all-reduced forward and
 * its gradient passes back unchanged ("g"). With sequence parallelism those
 * regions hold N/tp rows per rank (rank r the rows [r N/tp, (r+1) N/tp) of
 * the (B*T) tokens): the all-reduce of g becomes a reduce-scatter, f's
 * identity an all-gather, and the conjugates swap likewise.
 *
 * Everything runs in order on the stream given (the compute stream), its
 * collectives on the tp group (the one exception, invisible to the caller: a
 * column-parallel backward reduces its input gradient on the tp stream while
 * the weight gradient's GEMM runs, and waits for it before returning); with one tp rank nothing communicates and each
 * layer is the plain kernel. `model` calls these, never MPI.
 * Shapes: N tokens (B*T) of the micro-batch, Nl = N/tp with sequence
 * parallelism else N, C channels, Cl = C/tp, OCl = OC/tp, Vl = Vp/tp.
 */
#ifndef ZEROC_TP_TP_H
#define ZEROC_TP_TP_H

#include "comm/comm.h"
#include "kernels/kernels.h"

typedef struct zeroc__tp {
  zeroc_kernels_t *k;
  zeroc_group_t *g; /* the tp group */
  int rank, size;
  int sp;           /* sequence parallel (only ever set with size > 1) */
  zeroc_dtype_t dt; /* activations (the kernels' dtype) */
  /* with size > 1: the stream that reduces a column-parallel layer's input
   * gradient while the compute stream runs its weight gradient, and the events
   * handing the buffer over and back */
  zeroc_stream_t *cs;
  zeroc_event_t *ev_din, *ev_red;
} zeroc__tp_t;

/* Binds `tp` to ctx's tp group and the kernels `k`; sequence_parallel is
 * ignored with one tp rank. */
zeroc_result_t zeroc__tp_init(zeroc__tp_t *tp, zeroc_ctx_t *ctx, zeroc_kernels_t *k,
                              int sequence_parallel);

/* Frees what zeroc__tp_init created (after waiting for its stream); safe on a
 * zeroed or half-initialised `tp`. */
void zeroc__tp_fini(zeroc__tp_t *tp);

/* Rows of the sequence-split regions for N tokens (N/size with sequence
 * parallelism, else N); ZEROC_ERR_INVALID_ARG when size does not divide N. */
zeroc_result_t zeroc__tp_rows(const zeroc__tp_t *tp, int N, int *Nl);

/* buf (n, dt) <- its sum (or max) over the tp ranks, in place. */
zeroc_result_t zeroc__tp_allreduce(zeroc__tp_t *tp, zeroc_stream_t *s, void *buf, size_t n,
                                   zeroc_dtype_t dt, zeroc_redop_t op);

/* ---- linear layers ------------------------------------------------------------ */

/* Column-parallel: in (Nl,C) -> out (N,OCl) = f(in) @ w^T + b; w (OCl,C) and b (OCl)
 * are this rank's rows of the unsplit (OC,C) and (OC). `gathered` (N,C) receives
 * the all-gathered input with sequence parallelism (unused otherwise). */
zeroc_result_t zeroc__tp_column_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out,
                                        const void *in, void *gathered, const void *w,
                                        const void *b, int N, int C, int OCl);
/* zeroc__tp_column_forward followed by GELU (zeroc_k_matmul_forward_gelu): pre (N,OCl)
 * the linear output kept for the backward, out (N,OCl) = gelu(pre). */
zeroc_result_t zeroc__tp_column_forward_gelu(zeroc__tp_t *tp, zeroc_stream_t *s, void *pre,
                                             void *out, const void *in, void *gathered,
                                             const void *w, const void *b, int N, int C, int OCl);
/* dout (N,OCl) -> din (Nl,C) = (overwritten) the gradient w.r.t. in, summed over
 * the tp ranks; dw (OCl,C) +=, db (OCl) += (db may be NULL). Without sequence
 * parallelism din must hold (N,C); with it, `gathered` and `partial` are (N,C)
 * scratch (the input is all-gathered again rather than kept). */
zeroc_result_t zeroc__tp_column_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                         void *db, const void *dout, const void *in, void *gathered,
                                         void *partial, const void *w, int N, int C, int OCl);

/* Row-parallel: in (N,Cl) -> out (Nl,OC) = g(in @ w^T) + b; w (OC,Cl) is this
 * rank's columns of the unsplit (OC,C), b (OC) replicated (added once).
 * Without sequence parallelism out holds (N,OC) and the all-reduce runs in
 * place; with it `partial` (N,OC) is scratch for the reduce-scatter. */
zeroc_result_t zeroc__tp_row_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out, const void *in,
                                     void *partial, const void *w, const void *b, int N, int Cl,
                                     int OC);
/* dout (Nl,OC) -> din (N,Cl) +=, dw (OC,Cl) +=, db (OC) += the column sums of the
 * whole dout (the same on every rank; db may be NULL). `gathered` (N,OC) receives
 * the all-gathered dout with sequence parallelism. */
zeroc_result_t zeroc__tp_row_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                      void *db, const void *dout, const void *in, void *gathered,
                                      const void *w, int N, int Cl, int OC);
/* zeroc__tp_row_backward with zeroc_k_matmul_backward_ex's pre, dpre_bias and flags: din
 * overwritten with ZEROC_K_DINP_SET; with pre (N,Cl), in = gelu(pre) and din = the
 * gradient before the GELU, dpre_bias (Cl) += its column sums (the column-parallel
 * layer's bias before it: this rank's slice, nothing to reduce). */
zeroc_result_t zeroc__tp_row_backward_ex(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                         void *db, const void *dout, const void *in,
                                         void *gathered, const void *w, int N, int Cl, int OC,
                                         const void *pre, void *dpre_bias, unsigned flags);

/* ---- vocabulary-parallel embedding and cross-entropy ------------------------------ */

/* inp (B,T) ids -> out (Nl,C) = wte[inp] + wpe[t]: wte (Vl,C) holds rows
 * [rank Vl, (rank+1) Vl) of the padded vocabulary; each rank writes the rows of
 * its tokens (zeros elsewhere, rank 0 adding wpe) and the partial sums are
 * all-reduced (reduce-scattered from `partial` (N,C) with sequence parallelism).
 * Exactly one term of each sum is non-zero, so the result is bit-identical to
 * the unsplit embedding. */
zeroc_result_t zeroc__tp_embedding_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out,
                                           void *partial, const int32_t *inp, const void *wte,
                                           const void *wpe, int B, int T, int C, int Vl);
/* dout (Nl,C) -> dwte (Vl,C) += rows of this rank's tokens, dwpe (T,C) += (replicated:
 * computed from the whole dout, all-gathered into `gathered` (N,C) with sequence
 * parallelism). */
zeroc_result_t zeroc__tp_embedding_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *dwte,
                                            void *dwpe, const void *dout, void *gathered,
                                            const int32_t *inp, int B, int T, int C, int Vl);

/* Cross-entropy over logits split by vocabulary: logits (N,Vl) are this rank's
 * columns [rank Vl, (rank+1) Vl) of (N,Vp), real where the global column < V.
 * losses (N) fp32 (the same on every rank) = logsumexp - target logit, from three
 * all-reduces of per-row statistics (max; target logit; sum of exp) kept in
 * `stats` (3N fp32 scratch). When dloss != 0 the logits become dloss times
 * their gradient (softmax - onehot), padding 0. A negative target is no loss. */
zeroc_result_t zeroc__tp_crossentropy(zeroc__tp_t *tp, zeroc_stream_t *s, float *losses,
                                      void *logits, const int32_t *targets, float *stats, int N,
                                      int V, int Vl, float dloss);

#endif
