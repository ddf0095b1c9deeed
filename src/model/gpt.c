/*
 * model/gpt.c - GPT-2 written as a list of zeroc layers: the embedding unit
 * (wte, wpe), one unit per transformer block, and the head (final LayerNorm,
 * logits through the tied wte, fused softmax cross-entropy). With the
 * context's tp > 1 each unit is split Megatron-style (tp/): qkv and MLP-up
 * column-parallel, attention-out and MLP-down row-parallel, attention heads
 * and the vocabulary split over the tp ranks, optionally sequence parallel.
 * Calls only the kernel dispatch and tp/: it knows nothing of sharding, MPI
 * or CUDA. With pipeline parallelism a rank builds only its chunks of the unit
 * list and keeps one set of activations per in-flight micro-batch (slot); a
 * head without the embedding beside it holds its own copy of wte, tied to the
 * first stage's (ZEROC_PARAM_TIED). Dropout (GPT-2's three sites) draws its
 * masks from global coordinates (kernels/dropout.h), so it needs no state and
 * no buffer: the backward masks its gradients in the residual scratch.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/gpt_impl.h"
#include "model/gpt_sizes.h"
#include "runtime/runtime.h"
#include "tp/split.h"
#include "tp/tp.h"
#include "zeroc/gpt.h"

/* ---- allocation -------------------------------------------------------------------- */

/* Saved for backward (and kept between units). */
static zeroc_result_t act_alloc(zeroc_gpt_t *g, size_t bytes, void **p) {
  return zeroc__gpt_alloc(g, ZEROC_TAG_ACTIVATIONS, bytes, p);
}

/* Backward scratch, reused by every block. */
static zeroc_result_t scratch_alloc(zeroc_gpt_t *g, size_t bytes, void **p) {
  return zeroc__gpt_alloc(g, ZEROC_TAG_WORKSPACE, bytes, p);
}

static zeroc_result_t saved_alloc(zeroc_gpt_t *g, saved_t *s) {
  const zeroc__gpt_bytes_t *z = &g->sz;
  size_t resid = (size_t)z->resid, stat = (size_t)z->stat, fch = (size_t)z->fch;
  CHK(act_alloc(g, resid, &s->ln1));
  CHK(act_alloc(g, (size_t)z->qkv, &s->qkv));
  CHK(act_alloc(g, (size_t)z->atty, &s->atty));
  CHK(act_alloc(g, resid, &s->res2));
  CHK(act_alloc(g, resid, &s->ln2));
  CHK(act_alloc(g, fch, &s->fch));
  CHK(act_alloc(g, (size_t)z->fchg, &s->fchg));
  if (!g->llama) CHK(act_alloc(g, stat, (void **)&s->ln1_mean)); /* RMSNorm keeps no mean */
  CHK(act_alloc(g, stat, (void **)&s->ln1_rstd));
  if (!g->llama) CHK(act_alloc(g, stat, (void **)&s->ln2_mean));
  CHK(act_alloc(g, stat, (void **)&s->ln2_rstd));
  CHK(act_alloc(g, (size_t)z->lse, (void **)&s->lse));
  return ZEROC_OK;
}

/* ---- initialisation ------------------------------------------------------------------ */

/* wte: N(0, 0.02) on the real vocabulary rows, zero on the padding rows; each
 * element drawn at its index in the unsplit (Vp,C) tensor, and since Vp only
 * adds rows at the end, every tp size draws the same values for the real rows. */
static void init_wte(float *dst, uint64_t first, size_t n, const zeroc_param_desc_t *p,
                     uint64_t seed, void *user) {
  (void)user;
  uint64_t C = (uint64_t)p->shape[1], V = (uint64_t)(uintptr_t)p->init_user;
  zeroc__split_init_normal_below(dst, first, n, p, seed, V * C); /* V*C: the real rows */
}

/* ---- the embedding unit ---------------------------------------------------------------- */

/* Dropout's descriptor for `site` of `layer` (the embedding: layer L), or NULL outside
 * training (no dropout, no targets, zeroc_model_eval). Residual sites are this rank's
 * rows (B*T/tp with sequence parallelism) of all C channels; attention's its heads. */
static const zeroc_dropout_t *drop_at(zeroc_gpt_t *g, const zeroc_layer_io_t *io,
                                      const zeroc_gpt_batch_t *b, int layer, int site, int Nl,
                                      zeroc_dropout_t *d) {
  if (!(g->drop > 0) || io->eval || !b->targets) return NULL;
  int att = site == ZEROC_DROP_ATTN;
  *d = (zeroc_dropout_t){g->drop,
                         zeroc_i_dropout_key(g->drop_seed, b->step, layer, site),
                         b->first_slot,
                         g->tp.sp ? (int64_t)g->tp.rank * Nl : 0,
                         b->T,
                         g->cfg.seq,
                         att ? g->cfg.heads : g->cfg.hidden,
                         att ? g->tp.rank * g->NHl : 0};
  return d;
}

/* Residual dropout of Nl token rows (with cp, run by chunk at global positions). */
static zeroc_result_t drop_rows(zeroc_gpt_t *g, zeroc_stream_t *s, void *out, const void *in,
                                const zeroc_dropout_t *d, int Nl) {
  if (g->cp.n > 1) return zeroc__gpt_cp_dropout(&g->cp, s, out, in, d, Nl, g->cfg.hidden);
  return zeroc_k_dropout(g->k, s, out, in, d, Nl, g->cfg.hidden);
}

/* Residual dropout's backward: dy (Nl,C) masked into the residual scratch not `keep` */
static zeroc_result_t drop_grad(zeroc_gpt_t *g, zeroc_stream_t *s, const zeroc_dropout_t *d,
                                const void *dy, const void *keep, int Nl, const void **out) {
  *out = dy;
  if (!d) return ZEROC_OK;
  void *dst = g->dres[0] == keep ? g->dres[1] : g->dres[0];
  CHK(drop_rows(g, s, dst, dy, d, Nl));
  *out = dst;
  return ZEROC_OK;
}

// inp (B,T) -> x0 (Nl,C) = wte[inp] + wpe[t] (vocabulary-parallel over the tp ranks)
static zeroc_result_t embed_forward(zeroc_layer_io_t *io) {
  zeroc_gpt_t *g = io->user;
  const zeroc_gpt_batch_t *b;
  int Nl;
  /* the embedding's input is the batch itself (for a caller driving it directly) */
  if (!io->batch) io->batch = io->in;
  CHK(zeroc__gpt_io_batch(g, io, &b));
  CHK(zeroc__tp_rows(&g->tp, b->B * b->T, &Nl));
  void *x0 = g->act[io->slot].x0;
  /* with cp the positions are added apart, chunk by chunk (gpt_cp.c); Llama has none
   * here (RoPE turns q and k in each block) */
  int cp = g->cp.n > 1 && !g->llama;
  const void *wpe = g->llama ? NULL : cp ? g->cp.pos : io->params[1];
  if (cp) CHK(zeroc_memset_async(io->stream, g->cp.pos, 0, g->cp_pos_bytes));
  CHK(zeroc__tp_embedding_forward(&g->tp, io->stream, x0, g->part, b->inputs, io->params[0], wpe,
                                  b->B, b->T, g->cfg.hidden, g->Vl));
  if (cp)
    CHK(zeroc__gpt_cp_positions(&g->cp, io->stream, x0, io->params[1],
                                g->tp.sp ? (int64_t)g->tp.rank * Nl : 0, Nl, b->B, b->T,
                                g->cfg.hidden, 0));
  zeroc_dropout_t dd;
  const zeroc_dropout_t *d = drop_at(g, io, b, g->cfg.layers, ZEROC_DROP_EMBED, Nl, &dd);
  if (d) CHK(drop_rows(g, io->stream, x0, x0, d, Nl));
  io->out = x0;
  return ZEROC_OK;
}

static zeroc_result_t embed_backward(zeroc_layer_io_t *io) {
  zeroc_gpt_t *g = io->user;
  const zeroc_gpt_batch_t *b;
  int Nl;
  CHK(zeroc__gpt_io_batch(g, io, &b));
  CHK(zeroc__tp_rows(&g->tp, b->B * b->T, &Nl));
  zeroc_dropout_t dd;
  const void *dout;
  CHK(drop_grad(g, io->stream, drop_at(g, io, b, g->cfg.layers, ZEROC_DROP_EMBED, Nl, &dd),
                io->dout, NULL, Nl, &dout));
  int cp = g->cp.n > 1 && !g->llama;
  void *dwpe = g->llama ? NULL : cp ? g->cp.pos : io->grads[1];
  CHK(zeroc__tp_embedding_backward(&g->tp, io->stream, io->grads[0], dwpe, dout, g->gath, b->inputs,
                                   b->B, b->T, g->cfg.hidden, g->Vl));
  /* cp: the position gradients of all B*T local rows (gathered over tp with SP) */
  if (cp)
    CHK(zeroc__gpt_cp_positions(&g->cp, io->stream, (void *)(g->tp.sp ? g->gath : dout),
                                io->grads[1], 0, (int64_t)b->B * b->T, b->B, b->T, g->cfg.hidden,
                                1));
  io->din = NULL;
  return ZEROC_OK;
}

/* ---- a transformer block --------------------------------------------------------------- */

// x (Nl,C) -> out (Nl,C): x2 = x + attn(ln1(x)); out = x2 + mlp(ln2(x2)). qkv and fc are
// column-parallel, the two projections row-parallel; attention runs on this rank's
// NH/tp heads (C/tp channels).
static zeroc_result_t block_forward(zeroc_layer_io_t *io) {
  BLOCK_CTX(io, g, l);
  zeroc_kernels_t *k = g->k;
  zeroc__tp_t *tp = &g->tp;
  zeroc_stream_t *s = io->stream;
  int B = batch_->B, T = batch_->T, C = g->cfg.hidden, Cl = g->Cl;
  int N = B * T, Nl;
  CHK(zeroc__tp_rows(tp, N, &Nl));
  void *const *p = io->params;
  saved_t *a = zeroc__gpt_block_saved(g, io->slot, l);
  zeroc_dropout_t dd[3]; /* masks of the global block ref_->l */
  const zeroc_dropout_t *da = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_ATTN, Nl, &dd[0]);
  const zeroc_dropout_t *dr1 = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_ATTN_RESID, Nl, &dd[1]);
  const zeroc_dropout_t *dr2 = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_MLP_RESID, Nl, &dd[2]);
  CHK(zeroc_k_layernorm_forward(k, s, a->ln1, a->ln1_mean, a->ln1_rstd, io->in, p[LN1W], p[LN1B],
                                Nl, C));
  CHK(zeroc__tp_column_forward(tp, s, a->qkv, a->ln1, g->gath, p[QKVW], p[QKVB], N, C, 3 * Cl));
  if (g->cp.n > 1)
    CHK(zeroc__gpt_cp_attention_forward(&g->cp, s, a->atty, a->lse, a->qkv, B, T, Cl, g->NHl, da));
  else
    CHK(zeroc_k_attention_forward(k, s, a->atty, a->lse, a->qkv, B, T, Cl, g->NHl, da));
  /* attention projection (dropped out), then the residual, into res2 */
  CHK(zeroc__tp_row_forward(tp, s, a->res2, a->atty, g->part, p[ATTPROJW], p[ATTPROJB], N, Cl, C));
  if (dr1) CHK(drop_rows(g, s, a->res2, a->res2, dr1, Nl));
  /* res2 += x and ln2 = its LayerNorm, in one pass over the rows */
  CHK(zeroc_k_residual_layernorm_forward(k, s, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2,
                                         io->in, p[LN2W], p[LN2B], Nl, C));
  /* the MLP's up-projection and its GELU: one GEMM on cuda (the GELU in its epilogue) */
  CHK(zeroc__tp_column_forward_gelu(tp, s, a->fch, a->fchg, a->ln2, g->gath, p[FCW], p[FCB], N, C,
                                    4 * Cl));
  void *out = g->act[io->slot].xout[l];
  CHK(zeroc__tp_row_forward(tp, s, out, a->fchg, g->part, p[FCPROJW], p[FCPROJB], N, 4 * Cl, C));
  if (dr2) CHK(drop_rows(g, s, out, out, dr2, Nl));
  CHK(zeroc_k_add(k, s, out, a->res2, (size_t)Nl * C));
  io->out = out;
  return ZEROC_OK;
}

static zeroc_result_t block_backward(zeroc_layer_io_t *io) {
  BLOCK_CTX(io, g, l);
  zeroc_kernels_t *k = g->k;
  zeroc__tp_t *tp = &g->tp;
  zeroc_stream_t *s = io->stream;
  int B = batch_->B, T = batch_->T, C = g->cfg.hidden, Cl = g->Cl;
  int N = B * T, Nl;
  CHK(zeroc__tp_rows(tp, N, &Nl));
  size_t e = g->es;
  void *const *p = io->params, *const *d = io->grads;
  saved_t *a = zeroc__gpt_block_saved(g, io->slot, l);
  zeroc_dropout_t dd[3]; /* masks of the global block ref_->l */
  const zeroc_dropout_t *da = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_ATTN, Nl, &dd[0]);
  const zeroc_dropout_t *dr1 = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_ATTN_RESID, Nl, &dd[1]);
  const zeroc_dropout_t *dr2 = drop_at(g, io, batch_, ref_->l, ZEROC_DROP_MLP_RESID, Nl, &dd[2]);
  if (tp->sp) CHK(zeroc_memset_async(s, g->lngrad, 0, 4 * (size_t)C * e));
  /* dres2 (dx) = dout (the residual) + the MLP path: written by LayerNorm 2's backward,
   * which reads dout where it would have read a copy of it in dx */
  void *dx = g->dres[g->dres_next];
  g->dres_next ^= 1;
  /* the MLP's output gradient: dout through its dropout, into a residual scratch that is
   * not dout (dout lives until LayerNorm 2's backward reads it): dx when dout is the other
   * one, as from the block above; dx is not read before that backward writes it */
  const void *dout;
  CHK(drop_grad(g, s, dr2, io->dout, io->dout, Nl, &dout));
  /* the down-projection's backward straight through the GELU: dfch (N,4Cl) = gelu'(fch) *
   * (dout @ W), written, not added (no memset), and the up-projection's bias gradient from
   * it (on cuda both in the GEMM's epilogue) */
  CHK(zeroc__tp_row_backward_ex(tp, s, g->dfch, d[FCPROJW], d[FCPROJB], dout, a->fchg, g->gath,
                                p[FCPROJW], N, 4 * Cl, C, a->fch, d[FCB], ZEROC_K_DINP_SET));
  /* dln (Nl,C): the MLP input's gradient, summed over the tp ranks */
  CHK(zeroc__tp_column_backward(tp, s, g->dln, d[FCW], NULL, g->dfch, a->ln2, g->gath, g->part,
                                p[FCW], N, C, 4 * Cl));
  CHK(zeroc_k_layernorm_backward_ex(k, s, dx, zeroc__gpt_norm_grad(g, d, LN2W, 2),
                                    zeroc__gpt_norm_grad(g, d, LN2B, 3), g->dln, a->res2, p[LN2W],
                                    a->ln2_mean, a->ln2_rstd, Nl, C, io->dout, ZEROC_K_DINP_SET));
  /* dx now holds dres2; it is also the gradient of x through the first residual */
  const void *dproj;
  CHK(drop_grad(g, s, dr1, dx, dx, Nl, &dproj));
  CHK(zeroc__tp_row_backward_ex(tp, s, g->datty, d[ATTPROJW], d[ATTPROJB], dproj, a->atty,
                                g->gath, p[ATTPROJW], N, Cl, C, NULL, NULL, ZEROC_K_DINP_SET));
  if (g->cp.n > 1) { /* the ring's blocks add to dqkv */
    CHK(zeroc_memset_async(s, g->dqkv, 0, (size_t)N * 3 * Cl * e));
    CHK(zeroc__gpt_cp_attention_backward(&g->cp, s, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B,
                                         T, Cl, g->NHl, da));
  } else {
    CHK(zeroc_k_attention_backward_ex(k, s, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B, T, Cl,
                                      g->NHl, da, ZEROC_K_DQKV_SET));
  }
  CHK(zeroc__tp_column_backward(tp, s, g->dln, d[QKVW], d[QKVB], g->dqkv, a->ln1, g->gath, g->part,
                                p[QKVW], N, C, 3 * Cl));
  CHK(zeroc_k_layernorm_backward(k, s, dx, zeroc__gpt_norm_grad(g, d, LN1W, 0),
                                 zeroc__gpt_norm_grad(g, d, LN1B, 1), g->dln, io->in, p[LN1W],
                                 a->ln1_mean, a->ln1_rstd, Nl, C));
  void *const lnd[4] = {d[LN1W], d[LN1B], d[LN2W], d[LN2B]};
  CHK(zeroc__gpt_norm_grads_reduce(g, s, lnd, 4));
  io->din = dx;
  return ZEROC_OK;
}

/* ---- the head ------------------------------------------------------------------------------ */

// x (Nl,C) -> lnf -> logits (B,T,Vl) = lnf @ wte^T (this rank's vocabulary rows) -> losses;
// the gradient of the logits is computed in the same pass and kept for backward.
static zeroc_result_t head_forward(zeroc_layer_io_t *io) {
  zeroc_gpt_t *g = io->user;
  zeroc_kernels_t *k = g->k;
  zeroc_stream_t *s = io->stream;
  const zeroc_gpt_batch_t *b;
  CHK(zeroc__gpt_io_batch(g, io, &b));
  slot_act_t *A = &g->act[io->slot];
  int N = b->B * b->T, C = g->cfg.hidden, V = g->cfg.vocab, Nl;
  CHK(zeroc__tp_rows(&g->tp, N, &Nl));
  /* the embedding's wte beside us, or our own tied copy */
  const void *wte = io->shared_params ? io->shared_params[0] : io->params[g->head_w];
  CHK(zeroc__gpt_norm_forward(g, s, A->lnf, A->lnf_mean, A->lnf_rstd, io->in, io->params[0],
                              g->llama ? NULL : io->params[1], Nl));
  CHK(zeroc__tp_column_forward(&g->tp, s, A->logits, A->lnf, g->gath, wte, NULL, N, C, g->Vl));
  io->out = NULL;
  *io->loss = 0;
  if (!b->targets) return ZEROC_OK; /* logits only */
  /* The loss is the mean over the B*T positions (a target of -1 counts as a
   * zero loss), so the gradient of each position is grad_scale / N. With cp the
   * mean is over the cp ranks' N x cp tokens: each rank's loss is its share of
   * it (their sum is the mean), and its gradients sum over the cp ranks. */
  int64_t Ng = (int64_t)N * g->cp.n;
  float dloss = io->grad_scale / (float)Ng;
  CHK(zeroc__tp_crossentropy(&g->tp, s, A->losses, A->logits, b->targets, g->ce_stats, N, V, g->Vl,
                             dloss));
  g->last_losses = A->losses;
  /* the loss: the mean of the per-token losses, kept on the device when the
   * engine offers an accumulator (no host wait per micro-step), else on the host */
  if (io->loss_acc) return zeroc_k_mean_add(k, s, io->loss_acc, A->losses, (size_t)N, (double)Ng);
  CHK(zeroc__memcpy_sync(s, g->losses_host, A->losses, sizeof(float) * (size_t)N));
  double sum = 0;
  for (int i = 0; i < N; i++) sum += g->losses_host[i];
  *io->loss = (float)(sum / (double)Ng);
  return ZEROC_OK;
}

static zeroc_result_t head_backward(zeroc_layer_io_t *io) {
  zeroc_gpt_t *g = io->user;
  zeroc_stream_t *s = io->stream;
  const zeroc_gpt_batch_t *b;
  CHK(zeroc__gpt_io_batch(g, io, &b));
  slot_act_t *A = &g->act[io->slot];
  int N = b->B * b->T, C = g->cfg.hidden, Nl;
  CHK(zeroc__tp_rows(&g->tp, N, &Nl));
  size_t e = g->es;
  if (!b->targets)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpt backward needs targets in the batch");
  const void *wte = io->shared_params ? io->shared_params[0] : io->params[g->head_w];
  void *dwte = io->shared_grads ? io->shared_grads[0] : io->grads[g->head_w];
  int nv = g->llama ? 1 : 2; /* norm vectors */
  if (g->tp.sp) CHK(zeroc_memset_async(s, g->lngrad, 0, (size_t)nv * C * e));
  CHK(zeroc__tp_column_backward(&g->tp, s, g->dln, dwte, NULL, A->logits, A->lnf, g->gath, g->part,
                                wte, N, C, g->Vl));
  void *dx = g->dres[g->dres_next];
  g->dres_next ^= 1;
  /* dx = the LayerNorm's input gradient, written (no memset first) */
  CHK(zeroc__gpt_norm_backward(g, s, dx, zeroc__gpt_norm_grad(g, io->grads, 0, 0),
                               g->llama ? NULL : zeroc__gpt_norm_grad(g, io->grads, 1, 1), g->dln,
                               io->in, io->params[0], A->lnf_mean, A->lnf_rstd, Nl, NULL,
                               ZEROC_K_DINP_SET));
  CHK(zeroc__gpt_norm_grads_reduce(g, s, io->grads, nv));
  io->din = dx;
  return ZEROC_OK;
}

/* ---- building ------------------------------------------------------------------------------ */

/* Reads a caller's options struct (NULL: defaults). */
static zeroc_result_t read_options(const zeroc_gpt_options_t *in, zeroc_gpt_options_t *out) {
  const zeroc_gpt_options_t dflt = ZEROC_GPT_OPTIONS_INIT;
  *out = dflt;
  if (!in) return ZEROC_OK;
  if (in->magic != ZEROC_CONFIG_MAGIC ||
      in->size < offsetof(zeroc_gpt_options_t, batch) + sizeof(int) || in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_gpt_options_t was not initialised with ZEROC_GPT_OPTIONS_INIT (size "
                      "%zu, magic 0x%x)",
                      in->size, in->magic);
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  return ZEROC_OK;
}

zeroc_result_t zeroc_gpt_create(zeroc_ctx_t *ctx, const zeroc_gpt_config_t *cfg, int batch,
                                int recompute, zeroc_dtype_t dtype, zeroc_gpt_t **out) {
  zeroc_gpt_options_t o = ZEROC_GPT_OPTIONS_INIT;
  o.batch = batch;
  o.recompute = recompute;
  o.dtype = dtype;
  return zeroc_gpt_create_ex(ctx, cfg, &o, out);
}

/* One slot's activations for the units this rank holds: BT tokens of the
 * largest micro-batch, Nl of them in the sequence-split regions (the residual
 * stream, the LayerNorms). */
static zeroc_result_t slot_alloc(zeroc_gpt_t *g, slot_act_t *A, int has_embed, int has_head) {
  size_t resid = (size_t)g->sz.resid, stat = (size_t)g->sz.stat;
  if (has_embed) CHK(act_alloc(g, resid, &A->x0));
  A->xout = calloc((size_t)g->nblocks + 1, sizeof *A->xout);
  A->saved = g->recompute ? NULL : calloc((size_t)g->nblocks + 1, sizeof *A->saved);
  if (!A->xout || (!g->recompute && !A->saved))
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "gpt slot tables");
  for (int l = 0; l < g->nblocks; l++) {
    CHK(act_alloc(g, resid, &A->xout[l]));
    if (!g->recompute) CHK(saved_alloc(g, &A->saved[l]));
  }
  if (has_head) {
    CHK(act_alloc(g, resid, &A->lnf));
    if (!g->llama) CHK(act_alloc(g, stat, (void **)&A->lnf_mean)); /* RMSNorm keeps no mean */
    CHK(act_alloc(g, stat, (void **)&A->lnf_rstd));
    CHK(act_alloc(g, (size_t)g->sz.logits, &A->logits));
    CHK(act_alloc(g, (size_t)g->sz.losses, (void **)&A->losses));
  }
  return ZEROC_OK;
}

/* Checks a pipeline rank's part of the unit list. */
static zeroc_result_t check_stage(const zeroc_gpt_stage_t *stage, int L) {
  int NU = L + 2;
  if (stage->nchunks < 1 || stage->nchunks > NU || !stage->first || !stage->count ||
      stage->slots < 1 || stage->slots > 4096)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "gpt stage: %d chunks, %d slots; accepted 1..%d chunks with first/count "
                      "arrays and 1..4096 slots",
                      stage->nchunks, stage->slots, NU);
  for (int c = 0, prev_end = 0; c < stage->nchunks; c++) {
    int f = stage->first[c], n = stage->count[c];
    if (n < 1 || f < prev_end || f + n > NU)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "gpt stage chunk %d: units [%d, %d); accepted non-empty ranges of the %d "
                        "units (embedding, %d blocks, head) in increasing order, not overlapping",
                        c, f, f + n, NU, L);
    prev_end = f + n;
  }
  return ZEROC_OK;
}

/* Block l's twelve parameters, named and initialised as in the unsplit model
 * and cut by zeroc__gpt_tp_split. */
static void block_params(zeroc_gpt_t *g, int l, float std, float proj_std) {
  const int64_t C = g->cfg.hidden;
  const uint32_t nd = ZEROC_PARAM_NO_DECAY, rep = ZEROC_PARAM_TP_REPLICATED;
  zeroc__tp_t *tp = &g->tp;
  zeroc_param_desc_t *p = &g->block_p[(size_t)l * BLOCK_PARAMS];
  uint64_t st = 16 + (uint64_t)l * 16;
  p[LN1W] = zeroc__gpt_pdesc("ln_1.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep, st + 0);
  p[LN1B] = zeroc__gpt_pdesc("ln_1.bias", C, 0, ZEROC_INIT_ZEROS, 0, nd | rep, st + 1);
  p[QKVW] = zeroc__gpt_pdesc("attn.c_attn.weight", 3 * C, C, ZEROC_INIT_NORMAL, std, 0, st + 2);
  p[QKVB] = zeroc__gpt_pdesc("attn.c_attn.bias", 3 * C, 0, ZEROC_INIT_ZEROS, 0, nd, st + 3);
  p[ATTPROJW] =
      zeroc__gpt_pdesc("attn.c_proj.weight", C, C, ZEROC_INIT_NORMAL, proj_std, 0, st + 4);
  p[ATTPROJB] = zeroc__gpt_pdesc("attn.c_proj.bias", C, 0, ZEROC_INIT_ZEROS, 0, nd | rep, st + 5);
  p[LN2W] = zeroc__gpt_pdesc("ln_2.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep, st + 6);
  p[LN2B] = zeroc__gpt_pdesc("ln_2.bias", C, 0, ZEROC_INIT_ZEROS, 0, nd | rep, st + 7);
  p[FCW] = zeroc__gpt_pdesc("mlp.c_fc.weight", 4 * C, C, ZEROC_INIT_NORMAL, std, 0, st + 8);
  p[FCB] = zeroc__gpt_pdesc("mlp.c_fc.bias", 4 * C, 0, ZEROC_INIT_ZEROS, 0, nd, st + 9);
  p[FCPROJW] =
      zeroc__gpt_pdesc("mlp.c_proj.weight", C, 4 * C, ZEROC_INIT_NORMAL, proj_std, 0, st + 10);
  p[FCPROJB] = zeroc__gpt_pdesc("mlp.c_proj.bias", C, 0, ZEROC_INIT_ZEROS, 0, nd | rep, st + 11);
  /* column-parallel: output rows (qkv as three groups q | k | v, so each rank
   * holds whole heads of each); row-parallel: input columns */
  zeroc__gpt_tp_split(&p[QKVW], tp, 0, 3);
  zeroc__gpt_tp_split(&p[QKVB], tp, 0, 3);
  zeroc__gpt_tp_split(&p[ATTPROJW], tp, 1, 1);
  zeroc__gpt_tp_split(&p[FCW], tp, 0, 1);
  zeroc__gpt_tp_split(&p[FCB], tp, 0, 1);
  zeroc__gpt_tp_split(&p[FCPROJW], tp, 1, 1);
}

/* This rank's units, chunk after chunk: the layer list the engine shards. A
 * head without the embedding beside it (`tied`) carries its own wte. */
static void wire_units(zeroc_gpt_t *g, const zeroc_gpt_stage_t *stage, int tied) {
  const int NU = g->cfg.layers + 2;
  int li = 0, embed_local = -1;
  for (int c = 0; c < stage->nchunks; c++) {
    g->chunk_first[c] = li;
    g->chunk_count[c] = stage->count[c];
    for (int u = stage->first[c]; u < stage->first[c] + stage->count[c]; u++, li++) {
      g->gunit[li] = u;
      if (u == 0) {
        embed_local = li;
        g->layers[li] = (zeroc_layer_t){.name = "embed",
                                        .nparams = g->llama ? 1 : 2,
                                        .params = g->embed_p,
                                        .shares = -1,
                                        .forward = embed_forward,
                                        .backward = embed_backward,
                                        .user = g,
                                        .callbacks = ZEROC_CALLBACKS_DEVICE};
      } else if (u == NU - 1) {
        /* beside the embedding the head shares its wte; elsewhere it has its copy; an
         * untied head has its own lm_head everywhere */
        int own = tied || g->cfg.untied;
        g->layers[li] = (zeroc_layer_t){.name = "head",
                                        .nparams = g->head_w + own,
                                        .params = g->head_p,
                                        .shares = own ? -1 : embed_local,
                                        .forward = head_forward,
                                        .backward = head_backward,
                                        .user = g,
                                        .callbacks = ZEROC_CALLBACKS_DEVICE};
      } else {
        int l = u - 1, lb = g->nblocks++;
        g->refs[lb] = (struct blockref){g, l, lb};
        g->layers[li] =
            (zeroc_layer_t){.name = "block",
                            .nparams = g->nbp,
                            .params = &g->block_p[(size_t)l * BLOCK_PARAMS],
                            .shares = -1,
                            .forward = g->llama ? zeroc__llama_block_forward : block_forward,
                            .backward = g->llama ? zeroc__llama_block_backward : block_backward,
                            .user = &g->refs[lb],
                            .callbacks = ZEROC_CALLBACKS_DEVICE};
      }
    }
  }
}

/* The activation slots, the recompute copy, the backward scratch and the
 * host losses, for micro-batches of up to `batch` sequences (sizes from
 * gpt_sizes.c, which the planner calls too). */
static zeroc_result_t alloc_buffers(zeroc_gpt_t *g, int batch, int has_embed, int has_head) {
  const int t = g->t;
  const int64_t C = g->cfg.hidden, T = g->cfg.seq / g->cp.n; /* this rank's tokens */
  zeroc__tp_t *tp = &g->tp;
  /* BT tokens of the largest micro-batch; Nl of them in the sequence-split
   * regions (the residual stream, the norms) */
  size_t BT = (size_t)batch * (size_t)T;
  zeroc__gpt_shape_t shape;
  zeroc__gpt_shape_init(&shape, &g->cfg, t, tp->sp, (double)BT, (double)g->es, g->expand);
  zeroc__gpt_buffer_bytes(&shape, &g->sz);
  for (int sl = 0; sl < g->slots; sl++) CHK(slot_alloc(g, &g->act[sl], has_embed, has_head));
  if (g->recompute && g->nblocks) CHK(saved_alloc(g, &g->shared_saved));
  if (t > 1 && has_head) CHK(act_alloc(g, (size_t)g->sz.ce_stats, (void **)&g->ce_stats));
  /* Backward scratch: a block's gradients live one after the other, so datty
   * (B,T,Cl) reuses dln (consumed by ln_2's backward before datty is written)
   * and dqkv (B,T,qkv) reuses dfch (dead after the MLP's first matmul). dln
   * holds (B,T,C) summed over tp ranks, or (Nl,C) with sequence parallelism.
   * dfchg (Llama): the SwiGLU output's gradient; GPT-2's GELU is fused in the GEMM. */
  CHK(scratch_alloc(g, (size_t)g->sz.dfch, &g->dfch));
  if (g->sz.dfchg > 0) CHK(scratch_alloc(g, (size_t)g->sz.dfchg, &g->dfchg));
  CHK(scratch_alloc(g, (size_t)g->sz.dln, &g->dln));
  g->datty = g->dln;
  g->dqkv = g->dfch;
  CHK(scratch_alloc(g, (size_t)g->sz.resid, &g->dres[0]));
  CHK(scratch_alloc(g, (size_t)g->sz.resid, &g->dres[1]));
  if (tp->sp) {
    CHK(scratch_alloc(g, (size_t)g->sz.gath, &g->gath));
    CHK(scratch_alloc(g, (size_t)g->sz.gath, &g->part));
    CHK(scratch_alloc(g, (size_t)g->sz.lngrad, &g->lngrad));
  }
  if (g->sz.rope > 0) CHK(scratch_alloc(g, (size_t)g->sz.rope, (void **)&g->pos));
  if (g->sz.xqkv > 0) {
    CHK(scratch_alloc(g, (size_t)g->sz.xqkv / 2, &g->xqkv));
    CHK(scratch_alloc(g, (size_t)g->sz.xqkv / 2, &g->dxqkv));
  }
  g->cp_pos_bytes =
      g->llama ? 0 : (size_t)zeroc__gpt_cp_pos_bytes(g->cfg.seq, g->cp.n, (int)C, (double)g->es);
  if (g->cp_pos_bytes) CHK(scratch_alloc(g, g->cp_pos_bytes, &g->cp.pos));
  g->losses_host = malloc(BT * sizeof(float));
  if (!g->losses_host) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "host losses");
  if (has_head) g->last_losses = g->act[0].losses;
  return ZEROC_OK;
}

static zeroc_result_t gpt_create(zeroc_ctx_t *ctx, const zeroc_gpt_config_t *cfg,
                                 const zeroc_gpt_options_t *opts, zeroc_gpt_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_gpt_options_t o;
  *out = NULL;
  CHK(read_options(opts, &o));
  CHK(zeroc_gpt_config_check(cfg));
  int batch = o.batch ? o.batch : cfg->batch, recompute = o.recompute;
  if (batch < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpt micro-batch %d: must be >= 1", batch);
  if (!(o.dropout >= 0 && o.dropout < 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpt dropout %g: accepted 0 <= p < 1",
                      (double)o.dropout);
  int t = zeroc_ctx_mesh(ctx)->tp;
  int llama = cfg->family == ZEROC_GPT_FAMILY_LLAMA;
  /* heads divide hidden (checked above), so tp | heads gives tp | C, 3C, 4C; Llama's tp
   * also divides the kv heads (each rank holds whole ones) */
  if (cfg->heads % t || (llama && cfg->kv_heads % t))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "tensor parallelism over %d ranks splits the %d attention heads: tp must "
                      "divide the heads (and the %d kv heads)",
                      t, cfg->heads, llama ? cfg->kv_heads : cfg->heads);
  if (llama && o.dropout > 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "dropout %g: the Llama family trains without dropout; accepted 0",
                      (double)o.dropout);
  if (llama && cfg->ffn % t)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "tensor parallelism over %d ranks splits the MLP's %d channels (ffn): tp "
                      "must divide them",
                      t, cfg->ffn);
  int L = cfg->layers, NU = L + 2;
  /* without a stage: the whole model, one chunk, one slot */
  int whole_first = 0, whole_count = NU;
  zeroc_gpt_stage_t whole = {1, &whole_first, &whole_count, 1};
  const zeroc_gpt_stage_t *stage = o.stage ? o.stage : &whole;
  CHK(check_stage(stage, L));
  zeroc_gpt_t *g = calloc(1, sizeof *g);
  if (!g) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "gpt struct");
  g->ctx = ctx;
  g->cfg = *cfg;
  g->Bmax = batch;
  g->recompute = recompute;
  g->drop = o.dropout;
  g->drop_seed = o.dropout_seed;
  g->t = t;
  g->slots = stage->slots;
  g->nchunks = stage->nchunks;
  /* the vocabulary padded to a multiple of 64 per tp rank: every rank holds an
   * equal, 64-row-aligned slice (the planner assumes Vp/t = 64 ceil(V / 64t)) */
  g->Vp = zeroc__gpt_padded_vocab(cfg->vocab, t);
  g->Vl = g->Vp / t;
  g->Cl = cfg->hidden / t;
  g->NHl = cfg->heads / t;
  g->es = zeroc_dtype_size(o.dtype);
  g->llama = llama;
  g->HS = cfg->hidden / cfg->heads;
  g->NKVl = llama ? cfg->kv_heads / t : g->NHl;
  g->KVl = g->NKVl * g->HS;
  g->QKVl = g->Cl + 2 * g->KVl;
  g->Fl = llama ? cfg->ffn / t : 4 * g->Cl;
  g->nbp = llama ? LL_QKVB + cfg->qkv_bias + 4 : BLOCK_PARAMS;
  g->head_w = llama ? 1 : HEAD_WTE;
  g->rope = (zeroc_rope_t){cfg->rope_theta, cfg->rope_factor, cfg->rope_low, cfg->rope_high,
                           cfg->rope_original};
  g->expand = zeroc__gpt_expands_kv(cfg, zeroc_ctx_mesh(ctx)->cp,
                                    zeroc_ctx_device(ctx) == ZEROC_DEVICE_CUDA);
  ZEROC_TRY(
      zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), o.dtype, &g->k));
  if (o.deterministic) zeroc_k_set_deterministic(g->k, 1);
  ZEROC_TRY(zeroc__tp_init(&g->tp, ctx, g->k, o.sequence_parallel));
  ZEROC_TRY(zeroc__gpt_cp_init(&g->cp, ctx, g->k, o.dtype, o.cp_mode, batch, cfg->seq, g->Cl,
                               cfg->heads, t));
  zeroc__tp_t *tp = &g->tp;
  int64_t C = cfg->hidden, T = cfg->seq;
  float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)L);
  const uint32_t nd = ZEROC_PARAM_NO_DECAY, rep = ZEROC_PARAM_TP_REPLICATED;
  int has_embed = 0, has_head = 0, nl = 0;
  for (int c = 0; c < stage->nchunks; c++) {
    nl += stage->count[c];
    has_embed |= stage->first[c] == 0;
    has_head |= stage->first[c] + stage->count[c] == NU;
  }
  /* a head without the embedding beside it carries its own copy of wte */
  int tied = has_embed != has_head;
  /* init streams name each tensor of the unsplit model, so any layout draws the
   * same values (the head's wte copy draws wte's); shapes are given unsplit and
   * cut by tp_split */
  g->embed_p[0] = zeroc__gpt_pdesc("wte.weight", g->Vp, C, ZEROC_INIT_CUSTOM, std,
                                   tied ? ZEROC_PARAM_TIED : 0, 1);
  g->embed_p[0].init_fn = init_wte;
  g->embed_p[0].init_user = (void *)(uintptr_t)cfg->vocab;
  zeroc__gpt_tp_split(&g->embed_p[0], tp, 0, 1);
  if (llama) {
    /* Llama's names (transformers' without "model."); an untied lm_head draws its own
     * stream, a tied copy wte's */
    g->embed_p[0].name = "embed_tokens.weight";
    g->head_p[0] = zeroc__gpt_pdesc("norm.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep, 3);
    g->head_p[1] = g->embed_p[0];
    if (cfg->untied) {
      g->embed_p[0].flags &= ~(uint32_t)ZEROC_PARAM_TIED;
      g->head_p[1] = zeroc__gpt_pdesc("lm_head.weight", g->Vp, C, ZEROC_INIT_CUSTOM, std, 0, 5);
      g->head_p[1].init_fn = init_wte;
      g->head_p[1].init_user = (void *)(uintptr_t)cfg->vocab;
      zeroc__gpt_tp_split(&g->head_p[1], tp, 0, 1);
    }
  } else {
    g->embed_p[1] = zeroc__gpt_pdesc("wpe.weight", T, C, ZEROC_INIT_NORMAL, std, rep, 2);
    g->head_p[HEAD_LNFW] = zeroc__gpt_pdesc("ln_f.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep, 3);
    g->head_p[HEAD_LNFB] = zeroc__gpt_pdesc("ln_f.bias", C, 0, ZEROC_INIT_ZEROS, 0, nd | rep, 4);
    g->head_p[HEAD_WTE] = g->embed_p[0]; /* the same vocabulary slice as the embedding's */
  }
  g->block_p = calloc((size_t)L * BLOCK_PARAMS, sizeof *g->block_p);
  g->layers = calloc((size_t)nl, sizeof *g->layers);
  g->gunit = calloc((size_t)nl, sizeof *g->gunit);
  g->chunk_first = calloc((size_t)g->nchunks, sizeof(int));
  g->chunk_count = calloc((size_t)g->nchunks, sizeof(int));
  g->refs = calloc((size_t)L + 1, sizeof *g->refs);
  g->act = calloc((size_t)g->slots, sizeof *g->act);
  if (!g->block_p || !g->layers || !g->gunit || !g->chunk_first || !g->chunk_count || !g->refs ||
      !g->act) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "gpt tables");
    goto fail;
  }
  for (int l = 0; l < L; l++)
    llama ? zeroc__llama_block_params(g, l, std, proj_std) : block_params(g, l, std, proj_std);
  wire_units(g, stage, tied);
  g->nlayers = nl;

  ZEROC_TRY(alloc_buffers(g, batch, has_embed, has_head));
  *out = g;
  return ZEROC_OK;
fail:
  zeroc_gpt_destroy(g);
  return res;
}

zeroc_result_t zeroc_gpt_create_ex(zeroc_ctx_t *ctx, const zeroc_gpt_config_t *cfg,
                                   const zeroc_gpt_options_t *opts, zeroc_gpt_t **out) {
  return zeroc__ctx_ret(ctx, gpt_create(ctx, cfg, opts, out));
}

void zeroc_gpt_destroy(zeroc_gpt_t *g) {
  if (!g) return;
  for (int i = 0; i < g->nallocs; i++) zeroc_mem_free(g->ctx, g->allocs[i]);
  free(g->allocs);
  zeroc__gpt_cp_fini(&g->cp);
  zeroc__tp_fini(&g->tp);
  zeroc_kernels_destroy(g->k);
  for (int sl = 0; g->act && sl < g->slots; sl++) {
    free(g->act[sl].xout);
    free(g->act[sl].saved);
  }
  free(g->act);
  free(g->block_p);
  free(g->layers);
  free(g->gunit);
  free(g->chunk_first);
  free(g->chunk_count);
  free(g->refs);
  free(g->losses_host);
  free(g->wpe_tail);
  free(g);
}
