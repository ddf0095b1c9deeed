/*
 * model/gpt_sizes.c - the GPT's parameter counts and buffer bytes (gpt_sizes.h).
 */
#include "model/gpt_sizes.h"

#include <math.h>
#include <string.h>

int zeroc__gpt_padded_vocab(int vocab, int tp) {
  return (vocab + 64 * tp - 1) / (64 * tp) * (64 * tp);
}

double zeroc__gpt_unit_params(const zeroc_gpt_config_t *c, int tp, int u, int wte_copy) {
  double C = c->hidden, T = c->seq, t = tp;
  double wte = (double)(zeroc__gpt_padded_vocab(c->vocab, tp) / tp) * C;
  if (c->family != ZEROC_GPT_FAMILY_LLAMA) {
    if (u == 0) return wte + T * C;
    if (u == c->layers + 1) return wte_copy ? wte + 2.0 * C : 2.0 * C;
    return (12.0 * C * C + 7.0 * C) / t + 6.0 * C;
  }
  if (u == 0) return wte;
  if (u == c->layers + 1) return C + (c->untied || wte_copy ? wte : 0);
  double qkv = C + 2.0 * c->kv_heads * (C / c->heads), F = c->ffn;
  return (qkv * C + (c->qkv_bias ? qkv : 0) + C * C + 3.0 * F * C) / t + 2.0 * C;
}

int zeroc__gpt_expands_kv(const zeroc_gpt_config_t *c, int cp, int cuda) {
  return c->family == ZEROC_GPT_FAMILY_LLAMA && c->kv_heads < c->heads && (cp > 1 || cuda);
}

void zeroc__gpt_shape_init(zeroc__gpt_shape_t *s, const zeroc_gpt_config_t *c, int tp, int sp,
                           double BT, double e, int expand) {
  int llama = c->family == ZEROC_GPT_FAMILY_LLAMA;
  double t = tp, C = c->hidden, HS = C / c->heads;
  memset(s, 0, sizeof *s);
  s->BT = BT;
  s->sp = sp && tp > 1;
  s->Nl = s->sp ? ceil(BT / t) : BT;
  s->C = C;
  s->Cl = C / t;
  s->NHl = (double)c->heads / t;
  s->Vl = (double)(zeroc__gpt_padded_vocab(c->vocab, tp) / tp);
  s->e = e;
  s->tp = tp;
  s->llama = llama;
  s->qkv = llama ? (c->heads + 2.0 * c->kv_heads) * HS / t : 3 * s->Cl;
  s->fc = llama ? 2.0 * c->ffn / t : 4 * s->Cl;
  s->fcg = llama ? (double)c->ffn / t : 4 * s->Cl;
  s->expand = llama && expand && c->kv_heads < c->heads;
}

void zeroc__gpt_buffer_bytes(const zeroc__gpt_shape_t *s, zeroc__gpt_bytes_t *b) {
  memset(b, 0, sizeof *b);
  b->resid = s->Nl * s->C * s->e;
  b->stat = s->Nl * 4;
  b->nstat = s->llama ? 2 : 4;
  b->qkv = s->BT * s->qkv * s->e;
  b->atty = s->BT * s->Cl * s->e;
  b->fch = s->BT * s->fc * s->e;
  b->fchg = s->BT * s->fcg * s->e;
  b->lse = s->BT * 4 * s->NHl;
  b->saved = 3 * b->resid + b->qkv + b->atty + b->fch + b->fchg + b->nstat * b->stat + b->lse;
  b->logits = s->BT * s->Vl * s->e;
  b->losses = s->BT * 4;
  if (s->tp > 1) b->ce_stats = 3 * s->BT * 4;
  b->head = 2 * b->resid + b->nstat / 2 * b->stat + b->logits + b->losses + b->ce_stats;
  /* datty (BT,Cl) reuses dln and dqkv reuses dfch: no buffers of their own */
  b->dfch = b->fch > b->qkv ? b->fch : b->qkv;
  if (s->llama) b->dfchg = b->fchg;
  if (s->sp) {
    double a = s->Nl * s->C, c = s->BT * s->Cl;
    b->dln = (a > c ? a : c) * s->e;
    b->gath = s->BT * s->C * s->e;
    b->lngrad = (s->llama ? 2 : 4) * s->C * s->e;
  } else {
    b->dln = s->BT * s->C * s->e;
  }
  if (s->llama) b->rope = s->BT * 4;
  if (s->expand) b->xqkv = 2 * s->BT * 3 * s->Cl * s->e;
  b->scratch =
      b->dfch + b->dfchg + b->dln + 2 * b->resid + 2 * b->gath + b->lngrad + b->rope + b->xqkv;
}

double zeroc__gpt_cp_pos_bytes(int seq, int cp, int C, double e) {
  return cp > 1 ? (double)(seq / cp) * C * e : 0;
}

int zeroc_gpt_num_units(const zeroc_gpt_config_t *c) { return c->layers + 2; }

/* Costs for cutting the unit list into pipeline stages: each unit's share of
 * the forward FLOPs per token (blocks 2 x their matrices + 4TC, head 2C Vp) and of the
 * parameters a stage holds (the head counted with the wte copy it carries
 * whenever it sits on another rank than the embedding), averaged, so a stage
 * is balanced in time and in memory alike. */
void zeroc_gpt_unit_costs(const zeroc_gpt_config_t *c, double *cost) {
  double C = c->hidden, T = c->seq, L = c->layers, Vp = zeroc__gpt_padded_vocab(c->vocab, 1);
  /* a block's matrices: 12 C^2 (GPT-2); q|k|v, o, gate|up, down (Llama) */
  double mat = c->family == ZEROC_GPT_FAMILY_LLAMA
                   ? (C + 2.0 * c->kv_heads * (C / c->heads)) * C + C * C + 3.0 * c->ffn * C
                   : 12 * C * C;
  double f_embed = 2 * C, f_block = 2 * mat + 4 * T * C, f_head = 2 * C * Vp + 8 * C;
  /* parameters at tp 1, the head with its own wte copy */
  double p_embed = zeroc__gpt_unit_params(c, 1, 0, 0), p_block = zeroc__gpt_unit_params(c, 1, 1, 0);
  double p_head = zeroc__gpt_unit_params(c, 1, c->layers + 1, 1);
  double F = f_embed + L * f_block + f_head, P = p_embed + L * p_block + p_head;
  cost[0] = 0.5 * (f_embed / F + p_embed / P);
  for (int l = 0; l < c->layers; l++) cost[1 + l] = 0.5 * (f_block / F + p_block / P);
  cost[c->layers + 1] = 0.5 * (f_head / F + p_head / P);
}
