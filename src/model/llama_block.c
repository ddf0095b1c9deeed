/*
 * model/llama_block.c - the Llama family's block (Llama 3, Qwen2) on the
 * decoder of gpt.c, which builds the units, the activations, the embedding and
 * the head for both families: RMSNorm, q|k|v with rotary positions, grouped-
 * query attention, the output projection, RMSNorm, the SwiGLU MLP. Split over
 * the tp ranks as GPT-2's block (column-parallel q|k|v and gate|up,
 * row-parallel o and down), the norms' regions sequence parallel; with context
 * parallelism the rotary positions are the zigzag chunks' global ones and the
 * attention runs over the cp group with kv heads repeated (the ring and
 * Ulysses move whole heads). Also the norm the head calls for either family.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cp/cp.h"
#include "kernels/kernels.h"
#include "kernels/llama_kernels.h"
#include "model/gpt_impl.h"
#include "runtime/runtime.h"
#include "tp/split.h"
#include "tp/tp.h"

/* block parameter index after q|k|v's weight (and bias) */
static int after_qkv(const zeroc_gpt_t *g, int i) { return LL_QKVB + g->cfg.qkv_bias + i; }
#define LL_OW(g)    after_qkv(g, 0)
#define LL_NORM2(g) after_qkv(g, 1)
#define LL_GUW(g)   after_qkv(g, 2)
#define LL_DOWNW(g) after_qkv(g, 3)

/* ---- parameters ----------------------------------------------------------------------- */

void zeroc__llama_block_params(zeroc_gpt_t *g, int l, float std, float proj_std) {
  const int64_t C = g->cfg.hidden, F = g->cfg.ffn, NH = g->cfg.heads, NKV = g->cfg.kv_heads;
  const int64_t QKV = (NH + 2 * NKV) * g->HS;
  const uint32_t nd = ZEROC_PARAM_NO_DECAY, rep = ZEROC_PARAM_TP_REPLICATED;
  /* the fused q rows come in NH/NKV groups of NKV heads, then k, then v (gpt_impl.h) */
  const int groups = (int)(NH / NKV) + 2;
  zeroc_param_desc_t *p = &g->block_p[(size_t)l * BLOCK_PARAMS];
  uint64_t st = 16 + (uint64_t)l * 16; /* GPT-2's streams per block: 16 each */
  int i = 0;
  p[i++] = zeroc__gpt_pdesc("input_layernorm.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep, st + 0);
  p[i] = zeroc__gpt_pdesc("self_attn.qkv_proj.weight", QKV, C, ZEROC_INIT_NORMAL, std, 0, st + 1);
  zeroc__gpt_tp_split(&p[i++], &g->tp, 0, groups);
  if (g->cfg.qkv_bias) {
    p[i] = zeroc__gpt_pdesc("self_attn.qkv_proj.bias", QKV, 0, ZEROC_INIT_ZEROS, 0, nd, st + 2);
    zeroc__gpt_tp_split(&p[i++], &g->tp, 0, groups);
  }
  p[i] = zeroc__gpt_pdesc("self_attn.o_proj.weight", C, NH * g->HS, ZEROC_INIT_NORMAL, proj_std, 0,
                          st + 3);
  zeroc__gpt_tp_split(&p[i++], &g->tp, 1, (int)(NH / NKV));
  p[i++] = zeroc__gpt_pdesc("post_attention_layernorm.weight", C, 0, ZEROC_INIT_ONES, 0, nd | rep,
                            st + 4);
  p[i] = zeroc__gpt_pdesc("mlp.gate_up_proj.weight", 2 * F, C, ZEROC_INIT_NORMAL, std, 0, st + 5);
  zeroc__gpt_tp_split(&p[i++], &g->tp, 0, 2);
  p[i] = zeroc__gpt_pdesc("mlp.down_proj.weight", C, F, ZEROC_INIT_NORMAL, proj_std, 0, st + 6);
  zeroc__gpt_tp_split(&p[i++], &g->tp, 1, 1);
}

/* ---- positions and repeated kv heads -------------------------------------------------- */

/* The rotary positions of the batch's B x T rows: t, or with context parallelism local
 * token t's global position in the zigzag (zeroc__cp_position). Filled when the batch
 * shape changes (a synchronous copy: rare, and never while a kernel reads them). */
static zeroc_result_t positions(zeroc_gpt_t *g, zeroc_stream_t *s, int B, int T) {
  if (g->pos_B == B && g->pos_T == T) return ZEROC_OK;
  int32_t *h = malloc(sizeof(int32_t) * (size_t)B * (size_t)T);
  if (!h) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "rope positions (%d x %d)", B, T);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      h[(size_t)b * T + t] =
          g->cp.n > 1 ? (int32_t)zeroc__cp_position(g->cp.n, g->cp.rank, T * g->cp.n, t) : t;
  zeroc_result_t r = zeroc__memcpy_sync(s, g->pos, h, sizeof(int32_t) * (size_t)B * (size_t)T);
  free(h);
  if (!r) g->pos_B = B, g->pos_T = T;
  return r;
}

/* qkv (N, Cl + 2 KVl) -> x (N, 3 Cl): q as it is, k and v repeated NHl/NKVl times (query
 * head j reads kv head j % NKVl, so the repeated block is k | k | ... | k). */
static zeroc_result_t expand(zeroc_gpt_t *g, zeroc_stream_t *s, void *x, const void *qkv, int N) {
  const size_t W = (size_t)g->QKVl, Cl = (size_t)g->Cl, KVl = (size_t)g->KVl, e = g->es;
  const int R = g->NHl / g->NKVl;
  CHK(zeroc_k_copy_rows(g->k, s, x, 3 * Cl, qkv, W, (size_t)N, Cl, 0));
  for (int part = 1; part <= 2; part++)
    for (int m = 0; m < R; m++)
      CHK(zeroc_k_copy_rows(g->k, s, (char *)x + (part * Cl + m * KVl) * e, 3 * Cl,
                            (const char *)qkv + (Cl + (part - 1) * KVl) * e, W, (size_t)N, KVl, 0));
  return ZEROC_OK;
}

/* The backward of expand: dqkv (N, Cl + 2 KVl) = dq, and dk, dv summed over their copies. */
static zeroc_result_t reduce(zeroc_gpt_t *g, zeroc_stream_t *s, void *dqkv, const void *dx, int N) {
  const size_t W = (size_t)g->QKVl, Cl = (size_t)g->Cl, KVl = (size_t)g->KVl, e = g->es;
  const int R = g->NHl / g->NKVl;
  CHK(zeroc_k_copy_rows(g->k, s, dqkv, W, dx, 3 * Cl, (size_t)N, Cl, 0));
  for (int part = 1; part <= 2; part++)
    for (int m = 0; m < R; m++)
      CHK(zeroc_k_copy_rows(g->k, s, (char *)dqkv + (Cl + (part - 1) * KVl) * e, W,
                            (const char *)dx + (part * Cl + m * KVl) * e, 3 * Cl, (size_t)N, KVl,
                            m > 0));
  return ZEROC_OK;
}

/* Attention of the turned q|k|v: GQA on this rank's heads, or through the multi-head
 * kernels (expand: the cp group's ring or Ulysses, cuda). */
static zeroc_result_t attention_forward(zeroc_gpt_t *g, zeroc_stream_t *s, saved_t *a, int B,
                                        int T) {
  if (!g->expand && g->cp.n == 1)
    return zeroc_k_attention_gqa_forward(g->k, s, a->atty, a->lse, a->qkv, B, T, g->NHl, g->NKVl,
                                         g->HS, NULL);
  const void *x = a->qkv;
  if (g->expand) {
    CHK(expand(g, s, g->xqkv, a->qkv, B * T));
    x = g->xqkv;
  }
  if (g->cp.n > 1)
    return zeroc__gpt_cp_attention_forward(&g->cp, s, a->atty, a->lse, x, B, T, g->Cl, g->NHl,
                                           NULL);
  return zeroc_k_attention_forward(g->k, s, a->atty, a->lse, x, B, T, g->Cl, g->NHl, NULL);
}

/* dqkv (written) from datty. */
static zeroc_result_t attention_backward(zeroc_gpt_t *g, zeroc_stream_t *s, saved_t *a, int B,
                                         int T) {
  const int N = B * T;
  if (!g->expand && g->cp.n == 1)
    return zeroc_k_attention_gqa_backward(g->k, s, g->dqkv, g->datty, a->qkv, a->atty, a->lse, B, T,
                                          g->NHl, g->NKVl, g->HS, NULL, ZEROC_K_DQKV_SET);
  const void *x = a->qkv;
  void *dx = g->dqkv;
  if (g->expand) {
    CHK(expand(g, s, g->xqkv, a->qkv, N)); /* the forward's copy may be another block's */
    x = g->xqkv, dx = g->dxqkv;
  }
  if (g->cp.n > 1) { /* the ring's blocks add to dx */
    CHK(zeroc_memset_async(s, dx, 0, (size_t)N * 3 * g->Cl * g->es));
    CHK(zeroc__gpt_cp_attention_backward(&g->cp, s, dx, g->datty, x, a->atty, a->lse, B, T, g->Cl,
                                         g->NHl, NULL));
  } else {
    CHK(zeroc_k_attention_backward_ex(g->k, s, dx, g->datty, x, a->atty, a->lse, B, T, g->Cl,
                                      g->NHl, NULL, ZEROC_K_DQKV_SET));
  }
  return g->expand ? reduce(g, s, g->dqkv, dx, N) : ZEROC_OK;
}

/* ---- the block -------------------------------------------------------------------------- */

// x (Nl,C) -> out (Nl,C): x2 = x + o(attn(rope(qkv(rms1(x))))); out = x2 + down(swiglu(gate_up(
// rms2(x2)))). q|k|v and gate|up column-parallel, o and down row-parallel, no biases but
// q|k|v's (Qwen2); attention on this rank's NH/tp query and NKV/tp kv heads.
zeroc_result_t zeroc__llama_block_forward(zeroc_layer_io_t *io) {
  BLOCK_CTX(io, g, l);
  zeroc__tp_t *tp = &g->tp;
  zeroc_stream_t *s = io->stream;
  int B = batch_->B, T = batch_->T, C = g->cfg.hidden, Cl = g->Cl;
  int N = B * T, Nl;
  CHK(zeroc__tp_rows(tp, N, &Nl));
  void *const *p = io->params;
  saved_t *a = zeroc__gpt_block_saved(g, io->slot, l);
  const float eps = (float)g->cfg.norm_eps;
  CHK(positions(g, s, B, T));
  CHK(zeroc_k_rmsnorm_forward(g->k, s, a->ln1, a->ln1_rstd, io->in, p[LL_NORM1], eps, Nl, C));
  CHK(zeroc__tp_column_forward(tp, s, a->qkv, a->ln1, g->gath, p[LL_QKVW],
                               g->cfg.qkv_bias ? p[LL_QKVB] : NULL, N, C, g->QKVl));
  CHK(zeroc_k_rope_forward(g->k, s, a->qkv, g->pos, &g->rope, N, g->NHl, g->NKVl, g->HS));
  CHK(attention_forward(g, s, a, B, T));
  CHK(zeroc__tp_row_forward(tp, s, a->res2, a->atty, g->part, p[LL_OW(g)], NULL, N, Cl, C));
  /* res2 += x and ln2 = its RMSNorm, in one pass over the rows */
  CHK(zeroc_k_residual_rmsnorm_forward(g->k, s, a->res2, a->ln2, a->ln2_rstd, a->res2, io->in,
                                       p[LL_NORM2(g)], eps, Nl, C));
  CHK(zeroc__tp_column_forward(tp, s, a->fch, a->ln2, g->gath, p[LL_GUW(g)], NULL, N, C,
                               2 * g->Fl));
  CHK(zeroc_k_swiglu_forward(g->k, s, a->fchg, a->fch, N, g->Fl));
  void *out = g->act[io->slot].xout[l];
  CHK(zeroc__tp_row_forward(tp, s, out, a->fchg, g->part, p[LL_DOWNW(g)], NULL, N, g->Fl, C));
  CHK(zeroc_k_add(g->k, s, out, a->res2, (size_t)Nl * C));
  io->out = out;
  return ZEROC_OK;
}

zeroc_result_t zeroc__llama_block_backward(zeroc_layer_io_t *io) {
  BLOCK_CTX(io, g, l);
  zeroc__tp_t *tp = &g->tp;
  zeroc_stream_t *s = io->stream;
  int B = batch_->B, T = batch_->T, C = g->cfg.hidden, Cl = g->Cl;
  int N = B * T, Nl;
  CHK(zeroc__tp_rows(tp, N, &Nl));
  size_t e = g->es;
  void *const *p = io->params, *const *d = io->grads;
  saved_t *a = zeroc__gpt_block_saved(g, io->slot, l);
  const int n2 = LL_NORM2(g);
  CHK(positions(g, s, B, T));
  if (tp->sp) CHK(zeroc_memset_async(s, g->lngrad, 0, 2 * (size_t)C * e));
  void *dx = g->dres[g->dres_next];
  g->dres_next ^= 1;
  /* the down-projection: dfchg (N,Fl) = dout @ W, written; then SwiGLU's backward into
   * dfch (N,2Fl), which it adds to */
  CHK(zeroc__tp_row_backward_ex(tp, s, g->dfchg, d[LL_DOWNW(g)], NULL, io->dout, a->fchg, g->gath,
                                p[LL_DOWNW(g)], N, g->Fl, C, NULL, NULL, ZEROC_K_DINP_SET));
  CHK(zeroc_memset_async(s, g->dfch, 0, (size_t)N * 2 * g->Fl * e));
  CHK(zeroc_k_swiglu_backward(g->k, s, g->dfch, g->dfchg, a->fch, N, g->Fl));
  CHK(zeroc__tp_column_backward(tp, s, g->dln, d[LL_GUW(g)], NULL, g->dfch, a->ln2, g->gath,
                                g->part, p[LL_GUW(g)], N, C, 2 * g->Fl));
  /* dx = dout (the residual) + the MLP path's gradient through RMSNorm 2 */
  CHK(zeroc_k_rmsnorm_backward(g->k, s, dx, zeroc__gpt_norm_grad(g, d, n2, 1), g->dln, a->res2,
                               p[n2], a->ln2_rstd, Nl, C, io->dout, ZEROC_K_DINP_SET));
  CHK(zeroc__tp_row_backward_ex(tp, s, g->datty, d[LL_OW(g)], NULL, dx, a->atty, g->gath,
                                p[LL_OW(g)], N, Cl, C, NULL, NULL, ZEROC_K_DINP_SET));
  CHK(attention_backward(g, s, a, B, T));
  CHK(zeroc_k_rope_backward(g->k, s, g->dqkv, g->pos, &g->rope, N, g->NHl, g->NKVl, g->HS));
  CHK(zeroc__tp_column_backward(tp, s, g->dln, d[LL_QKVW], g->cfg.qkv_bias ? d[LL_QKVB] : NULL,
                                g->dqkv, a->ln1, g->gath, g->part, p[LL_QKVW], N, C, g->QKVl));
  CHK(zeroc_k_rmsnorm_backward(g->k, s, dx, zeroc__gpt_norm_grad(g, d, LL_NORM1, 0), g->dln, io->in,
                               p[LL_NORM1], a->ln1_rstd, Nl, C, NULL, 0));
  void *const nd[2] = {d[LL_NORM1], d[n2]};
  CHK(zeroc__gpt_norm_grads_reduce(g, s, nd, 2));
  io->din = dx;
  return ZEROC_OK;
}
