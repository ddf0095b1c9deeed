/*
 * model/gpt_cp.h - the GPT's context parallelism (the context's cp > 1): what
 * the model does differently when each rank holds only its zigzag tokens of
 * every sequence (chunks r and 2n-1-r of T/(2n) tokens): position ids that follow the chunks, and attention
 * over the whole sequence from the local tokens. Everything else (LayerNorm,
 * MLP, linears, the loss) runs on the local tokens unchanged.
 */
#ifndef ZEROC_MODEL_GPT_CP_H
#define ZEROC_MODEL_GPT_CP_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "cp/cp.h"
#include "kernels/dropout.h"
#include "kernels/kernels.h"
#include "zeroc/ctx.h"

typedef struct zeroc__gpt_cp {
  int n, rank;          /* cp size and this rank's place (1, 0: no context parallelism) */
  zeroc_cp_mode_t mode; /* ring or ulysses */
  zeroc__cp_t *cp;      /* the attention over the cp group (cp/cp.h); NULL when n == 1 */
  zeroc_group_t *g;     /* the cp group */
  zeroc_kernels_t *k;
  zeroc_dtype_t dt; /* activations */
  size_t es;
  /* (Tl,C) zeros handed to the embedding kernels as wpe (the positions are
   * added apart, chunk by chunk), and the sink of their wpe gradient
   * (gpt_sizes.h cp_pos) */
  void *pos;
} zeroc__gpt_cp_t;

/* Fills `cp` from the context's mesh (cp group, size, rank) and creates the
 * attention's cp object (n > 1) in `mode`, its buffers reserved for B
 * sequences of T global tokens, Cl channels and NH / tp heads per tp rank.
 * Checks T and the heads (cp/cp.h). */
zeroc_result_t zeroc__gpt_cp_init(zeroc__gpt_cp_t *cp, zeroc_ctx_t *ctx, zeroc_kernels_t *k,
                                  zeroc_dtype_t dt, zeroc_cp_mode_t mode, int B, int T, int Cl,
                                  int NH, int tp);
/* Frees what init made (pos is the model's). */
void zeroc__gpt_cp_fini(zeroc__gpt_cp_t *cp);

/* Forward (grad 0): x rows [row0, row0+nrows) of the (B*Tl, C) local tokens
 * += wpe at their global positions. Backward (grad 1): wpe at those positions
 * += x rows. */
zeroc_result_t zeroc__gpt_cp_positions(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *x,
                                       void *wpe, int64_t row0, int64_t nrows, int B, int Tl,
                                       int C, int grad);

/* Residual dropout of Nl token rows of the local tokens (rows d->row0 on of
 * the micro-batch's B*T, T = d->T local): each element's mask drawn at its
 * global (sequence, position, channel), as in the unsplit model. */
zeroc_result_t zeroc__gpt_cp_dropout(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *out,
                                     const void *in, const zeroc_dropout_t *d, int Nl, int C);

/* Causal attention of the local queries over the whole sequence: the
 * kernels' shapes with T = Tl local tokens, qkv (B,Tl,3Cl) -> out (B,Tl,Cl),
 * lse (B,NHl,Tl); `drop` (attention dropout) names global positions. */
zeroc_result_t zeroc__gpt_cp_attention_forward(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *out,
                                               float *lse, const void *qkv, int B, int Tl, int Cl,
                                               int NHl, const zeroc_dropout_t *drop);
/* dqkv (B,Tl,3Cl) += the gradient of the local q, k, v from dout (B,Tl,Cl). */
zeroc_result_t zeroc__gpt_cp_attention_backward(zeroc__gpt_cp_t *cp, zeroc_stream_t *s,
                                                void *dqkv, const void *dout, const void *qkv,
                                                const void *out, const float *lse, int B, int Tl,
                                                int Cl, int NHl, const zeroc_dropout_t *drop);

#endif
