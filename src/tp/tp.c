/*
 * tp/tp.c - tensor-parallel layers: the kernels of each layer with the
 * collectives of Megatron's conjugate operators around them (see tp/tp.h).
 * With one tp rank every function is its plain kernel, so the single-rank
 * model runs exactly the unsplit code.
 */
#include "tp/tp.h"

#include "core/error.h"
#include "runtime/runtime.h"

static int split(const zeroc__tp_t *tp) { return tp->size > 1; }
static int seqsplit(const zeroc__tp_t *tp) { return tp->sp && tp->size > 1; }

zeroc_result_t zeroc__tp_init(zeroc__tp_t *tp, zeroc_ctx_t *ctx, zeroc_kernels_t *k,
                              int sequence_parallel) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_TP);
  if (!g) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "the context has no tp group");
  tp->k = k;
  tp->g = g;
  tp->rank = g->rank;
  tp->size = g->size;
  tp->sp = sequence_parallel && g->size > 1;
  tp->dt = k->dtype;
  tp->cs = NULL;
  tp->ev_din = tp->ev_red = NULL;
  if (!split(tp)) return ZEROC_OK;
  CHK(zeroc_stream_create(ctx, 1, &tp->cs));
  CHK(zeroc_event_create(ctx, &tp->ev_din));
  return zeroc_event_create(ctx, &tp->ev_red);
}

void zeroc__tp_fini(zeroc__tp_t *tp) {
  zeroc_stream_destroy(tp->cs); /* waits for its work first */
  zeroc_event_destroy(tp->ev_din);
  zeroc_event_destroy(tp->ev_red);
  tp->cs = NULL;
  tp->ev_din = tp->ev_red = NULL;
}

zeroc_result_t zeroc__tp_rows(const zeroc__tp_t *tp, int N, int *Nl) {
  if (!seqsplit(tp)) {
    *Nl = N;
    return ZEROC_OK;
  }
  if (N % tp->size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "sequence parallelism over %d tp ranks needs the micro-batch's B*T tokens "
                      "(%d) to be a multiple of %d",
                      tp->size, N, tp->size);
  *Nl = N / tp->size;
  return ZEROC_OK;
}

zeroc_result_t zeroc__tp_allreduce(zeroc__tp_t *tp, zeroc_stream_t *s, void *buf, size_t n,
                                   zeroc_dtype_t dt, zeroc_redop_t op) {
  if (!split(tp)) return ZEROC_OK;
  return zeroc__allreduce(tp->g, s, buf, buf, n, dt, op);
}

/* full (N,C) <- the ranks' row blocks local (N/size, C), in rank order. */
static zeroc_result_t gather_rows(zeroc__tp_t *tp, zeroc_stream_t *s, void *full, const void *local,
                                  int N, int C) {
  return zeroc__allgather(tp->g, s, local, full, (size_t)(N / tp->size) * (size_t)C, tp->dt);
}

/* local (N/size, C) <- this rank's row block of the sum over ranks of full (N,C). */
static zeroc_result_t scatter_rows(zeroc__tp_t *tp, zeroc_stream_t *s, void *local,
                                   const void *full, int N, int C) {
  return zeroc__reduce_scatter(tp->g, s, full, local, (size_t)(N / tp->size) * (size_t)C, tp->dt,
                               ZEROC_SUM);
}

/* ---- linear layers ------------------------------------------------------------ */

// in (Nl,C) -> [f: all-gather with SP] -> (N,C) @ w (OCl,C)^T + b -> out (N,OCl)
zeroc_result_t zeroc__tp_column_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out,
                                        const void *in, void *gathered, const void *w,
                                        const void *b, int N, int C, int OCl) {
  const void *x = in;
  if (seqsplit(tp)) {
    CHK(gather_rows(tp, s, gathered, in, N, C));
    x = gathered;
  }
  return zeroc_k_matmul_forward(tp->k, s, out, x, w, b, N, C, OCl);
}

// in (Nl,C) -> [f] -> pre (N,OCl) = (N,C) @ w^T + b, out = gelu(pre)
zeroc_result_t zeroc__tp_column_forward_gelu(zeroc__tp_t *tp, zeroc_stream_t *s, void *pre,
                                             void *out, const void *in, void *gathered,
                                             const void *w, const void *b, int N, int C, int OCl) {
  const void *x = in;
  if (seqsplit(tp)) {
    CHK(gather_rows(tp, s, gathered, in, N, C));
    x = gathered;
  }
  return zeroc_k_matmul_forward_gelu(tp->k, s, pre, out, x, w, b, N, C, OCl);
}

// dout (N,OCl) -> din (Nl,C) = [f backward: all-reduce, or reduce-scatter with SP] of dout @ w
// The input gradient's collective runs on the tp stream while this stream computes dw and
// db (Megatron's overlap of the f-backward all-reduce with the weight-gradient GEMM); the
// function returns with both done in this stream's order.
zeroc_result_t zeroc__tp_column_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                         void *db, const void *dout, const void *in, void *gathered,
                                         void *partial, const void *w, int N, int C, int OCl) {
  /* din (or partial) is written by the GEMM (beta 0), not zeroed and added to */
  if (!split(tp))
    return zeroc_k_matmul_backward_ex(tp->k, s, din, dw, db, dout, in, w, N, C, OCl, NULL, NULL,
                                      ZEROC_K_DINP_SET);
  const void *x = in;
  void *dst = din;
  if (seqsplit(tp)) { /* only the rank's rows of the input were kept: gather them for dw */
    CHK(gather_rows(tp, s, gathered, in, N, C));
    x = gathered;
    dst = partial;
  }
  CHK(zeroc_k_matmul_backward_ex(tp->k, s, dst, NULL, NULL, dout, x, w, N, C, OCl, NULL, NULL,
                                 ZEROC_K_DINP_SET));
  CHK(zeroc_event_record(tp->ev_din, s));
  CHK(zeroc_stream_wait_event(tp->cs, tp->ev_din));
  if (seqsplit(tp))
    CHK(scatter_rows(tp, tp->cs, din, partial, N, C));
  else
    CHK(zeroc__allreduce(tp->g, tp->cs, din, din, (size_t)N * (size_t)C, tp->dt, ZEROC_SUM));
  CHK(zeroc_event_record(tp->ev_red, tp->cs));
  if (dw || db)
    CHK(zeroc_k_matmul_backward_ex(tp->k, s, NULL, dw, db, dout, x, w, N, C, OCl, NULL, NULL, 0));
  return zeroc_stream_wait_event(s, tp->ev_red);
}

// in (N,Cl) @ w (OC,Cl)^T -> [g: all-reduce, or reduce-scatter with SP] -> + b -> out (Nl,OC)
zeroc_result_t zeroc__tp_row_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out, const void *in,
                                     void *partial, const void *w, const void *b, int N, int Cl,
                                     int OC) {
  /* the bias is replicated: one rank adds it to its partial sum, so the
   * reduction adds it exactly once */
  const void *bias = tp->rank == 0 ? b : NULL;
  if (!seqsplit(tp)) {
    CHK(zeroc_k_matmul_forward(tp->k, s, out, in, w, bias, N, Cl, OC));
    return zeroc__tp_allreduce(tp, s, out, (size_t)N * (size_t)OC, tp->dt, ZEROC_SUM);
  }
  CHK(zeroc_k_matmul_forward(tp->k, s, partial, in, w, bias, N, Cl, OC));
  return scatter_rows(tp, s, out, partial, N, OC);
}

// dout (Nl,OC) -> [g backward: identity, or all-gather with SP] -> din (N,Cl) +=, dw +=, db +=
zeroc_result_t zeroc__tp_row_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                      void *db, const void *dout, const void *in, void *gathered,
                                      const void *w, int N, int Cl, int OC) {
  const void *d = dout;
  if (seqsplit(tp)) {
    CHK(gather_rows(tp, s, gathered, dout, N, OC));
    d = gathered;
  }
  return zeroc_k_matmul_backward(tp->k, s, din, dw, db, d, in, w, N, Cl, OC);
}

zeroc_result_t zeroc__tp_row_backward_ex(zeroc__tp_t *tp, zeroc_stream_t *s, void *din, void *dw,
                                         void *db, const void *dout, const void *in,
                                         void *gathered, const void *w, int N, int Cl, int OC,
                                         const void *pre, void *dpre_bias, unsigned flags) {
  const void *d = dout;
  if (seqsplit(tp)) {
    CHK(gather_rows(tp, s, gathered, dout, N, OC));
    d = gathered;
  }
  return zeroc_k_matmul_backward_ex(tp->k, s, din, dw, db, d, in, w, N, Cl, OC, pre, dpre_bias,
                                    flags);
}

/* ---- vocabulary-parallel embedding and cross-entropy ------------------------------ */

// inp (B,T) -> out (Nl,C)
zeroc_result_t zeroc__tp_embedding_forward(zeroc__tp_t *tp, zeroc_stream_t *s, void *out,
                                           void *partial, const int32_t *inp, const void *wte,
                                           const void *wpe, int B, int T, int C, int Vl) {
  /* no positions (Llama's rotary ones are in its blocks): the one slice of all the rows */
  if (!split(tp) && !wpe)
    return zeroc_k_vocab_embed_forward(tp->k, s, out, inp, wte, NULL, B, T, C, 0, Vl);
  if (!split(tp)) return zeroc_k_encoder_forward(tp->k, s, out, inp, wte, wpe, B, T, C);
  int N = B * T;
  void *dst = seqsplit(tp) ? partial : out;
  CHK(zeroc_k_vocab_embed_forward(tp->k, s, dst, inp, wte, tp->rank == 0 ? wpe : NULL, B, T, C,
                                  tp->rank * Vl, Vl));
  if (seqsplit(tp)) return scatter_rows(tp, s, out, partial, N, C);
  return zeroc__tp_allreduce(tp, s, out, (size_t)N * (size_t)C, tp->dt, ZEROC_SUM);
}

// dout (Nl,C) -> dwte (Vl,C) +=, dwpe (T,C) +=
zeroc_result_t zeroc__tp_embedding_backward(zeroc__tp_t *tp, zeroc_stream_t *s, void *dwte,
                                            void *dwpe, const void *dout, void *gathered,
                                            const int32_t *inp, int B, int T, int C, int Vl) {
  if (!split(tp) && !dwpe)
    return zeroc_k_vocab_embed_backward(tp->k, s, dwte, NULL, dout, inp, B, T, C, 0, Vl);
  if (!split(tp)) return zeroc_k_encoder_backward(tp->k, s, dwte, dwpe, dout, inp, B, T, C);
  const void *d = dout;
  if (seqsplit(tp)) {
    CHK(gather_rows(tp, s, gathered, dout, B * T, C));
    d = gathered;
  }
  return zeroc_k_vocab_embed_backward(tp->k, s, dwte, dwpe, d, inp, B, T, C, tp->rank * Vl, Vl);
}

// logits (N,Vl) -> losses (N); logits <- dloss * dlogits
zeroc_result_t zeroc__tp_crossentropy(zeroc__tp_t *tp, zeroc_stream_t *s, float *losses,
                                      void *logits, const int32_t *targets, float *stats, int N,
                                      int V, int Vl, float dloss) {
  if (!split(tp))
    return zeroc_k_crossentropy_forward_backward(tp->k, s, losses, logits, targets, N, V, Vl,
                                                 dloss);
  int v0 = tp->rank * Vl;
  float *mx = stats, *xt = stats + N, *se = stats + 2 * (size_t)N;
  CHK(zeroc_k_vocab_ce_local(tp->k, s, mx, xt, logits, targets, N, Vl, v0, V));
  /* 1: the row max, so that every rank exponentiates against the same shift */
  CHK(zeroc__tp_allreduce(tp, s, mx, (size_t)N, ZEROC_FP32, ZEROC_MAX));
  /* 2: the target's logit, held by exactly one rank (the others add 0) */
  CHK(zeroc__tp_allreduce(tp, s, xt, (size_t)N, ZEROC_FP32, ZEROC_SUM));
  /* 3: the softmax denominator */
  CHK(zeroc_k_vocab_ce_sumexp(tp->k, s, se, logits, mx, N, Vl, v0, V));
  CHK(zeroc__tp_allreduce(tp, s, se, (size_t)N, ZEROC_FP32, ZEROC_SUM));
  return zeroc_k_vocab_ce_finish(tp->k, s, losses, logits, targets, mx, se, xt, N, Vl, v0, V,
                                 dloss);
}
