/*
 * model/gpt_sizes.c - the GPT's parameter counts and buffer bytes (gpt_sizes.h).
 */
#include "model/gpt_sizes.h"

#include <string.h>

int zeroc__gpt_padded_vocab(int vocab, int tp) {
  return (vocab + 64 * tp - 1) / (64 * tp) * (64 * tp);
}

double zeroc__gpt_unit_params(const zeroc_gpt_config_t *c, int tp, int u, int wte_copy) {
  double C = c->hidden, T = c->seq, t = tp;
  double wte = (double)(zeroc__gpt_padded_vocab(c->vocab, tp) / tp) * C;
  if (u == 0) return wte + T * C;
  if (u == c->layers + 1) return wte_copy ? wte + 2.0 * C : 2.0 * C;
  return (12.0 * C * C + 7.0 * C) / t + 6.0 * C;
}

void zeroc__gpt_buffer_bytes(const zeroc__gpt_shape_t *s, zeroc__gpt_bytes_t *b) {
  memset(b, 0, sizeof *b);
  b->resid = s->Nl * s->C * s->e;
  b->stat = s->Nl * 4;
  b->qkv = s->BT * 3 * s->Cl * s->e;
  b->atty = s->BT * s->Cl * s->e;
  b->fch = s->BT * 4 * s->Cl * s->e;
  b->lse = s->BT * 4 * s->NHl;
  b->saved = 3 * b->resid + b->qkv + b->atty + 2 * b->fch + 4 * b->stat + b->lse;
  b->logits = s->BT * s->Vl * s->e;
  b->losses = s->BT * 4;
  if (s->tp > 1) b->ce_stats = 3 * s->BT * 4;
  /* datty (BT,Cl) reuses dln and dqkv (BT,3Cl) reuses dfch: no buffers of their own */
  if (s->sp) {
    double a = s->Nl * s->C, c = s->BT * s->Cl;
    b->dln = (a > c ? a : c) * s->e;
    b->gath = s->BT * s->C * s->e;
    b->lngrad = 4 * s->C * s->e;
  } else {
    b->dln = s->BT * s->C * s->e;
  }
  b->scratch = 2 * b->fch + b->dln + 2 * b->resid + 2 * b->gath + b->lngrad;
}
