/*
 * model/gpt_sizes.h - the built-in GPT's sizes as pure functions of its shape:
 * the vocabulary padding, the parameters of each unit, and the bytes of every
 * activation and backward-scratch buffer gpt.c allocates. gpt.c sizes its
 * allocations with them and the planner (src/plan) predicts with them.
 *
 * Bytes are doubles so the planner can pass a shape whose split need not be
 * whole (B*T / tp under sequence parallelism, which the runtime refuses);
 * gpt.c passes whole counts and gets whole bytes, exact below 2^53.
 */
#ifndef ZEROC_MODEL_GPT_SIZES_H
#define ZEROC_MODEL_GPT_SIZES_H

#include "zeroc/gpt.h"

/* The vocabulary padded to a multiple of 64 x tp: every tp rank holds an
 * equal, 64-row-aligned slice of wte, Vp / tp = 64 ceil(V / 64 tp) rows. */
int zeroc__gpt_padded_vocab(int vocab, int tp);

/* Parameters of unit u (0 the embedding, 1..L the blocks, L + 1 the head) on
 * one of tp ranks, before any flat padding: a block's qkv and fc (column-
 * parallel) and projections (row-parallel) are split, its row-parallel biases
 * (2C) and LayerNorms (4C) replicated: (12 C^2 + 7 C) / tp + 6 C; the
 * embedding is wte's slice plus wpe (T C); the head is ln_f (2C), plus its own
 * copy of wte's slice when `wte_copy` (on another rank than the embedding). */
double zeroc__gpt_unit_params(const zeroc_gpt_config_t *c, int tp, int u, int wte_copy);

/* One tp rank's view of a micro-batch. */
typedef struct zeroc__gpt_shape {
  double BT;  /* tokens of the (largest) micro-batch */
  double Nl;  /* of them in the sequence-split regions: BT, or BT / tp with sequence parallelism */
  double C;   /* channels */
  double Cl;  /* channels per tp rank, C / tp */
  double NHl; /* heads per tp rank */
  double Vl;  /* vocabulary rows per tp rank, Vp / tp */
  double e;   /* bytes of an activation element */
  int tp, sp; /* tp size; sequence parallelism (tp > 1 only) */
} zeroc__gpt_shape_t;

/* The bytes of each buffer gpt.c allocates for that shape. */
typedef struct zeroc__gpt_bytes {
  /* activations */
  double resid;    /* (Nl,C): the residual stream; the embedding and each block output, ln_1,
                      res2, ln_2, ln_f, a stage-boundary tensor */
  double stat;     /* (Nl) fp32: a LayerNorm's mean or rstd */
  double qkv;      /* (BT,3Cl) */
  double atty;     /* (BT,Cl) attention output */
  double fch;      /* (BT,4Cl): the MLP before or after GELU, or its gradient */
  double lse;      /* (BT,NHl) fp32: attention log-sum-exp */
  double saved;    /* what one block saves for backward (ln1, qkv, atty, res2, ln2, fch, fchg,
                      four LayerNorm statistics, lse), without its output */
  double logits;   /* (BT,Vl) */
  double losses;   /* (BT) fp32 */
  double ce_stats; /* tp > 1: (3,BT) fp32 max, target logit, sum of exp; else 0 */
  /* backward scratch */
  double dln;     /* (BT,C), or with sequence parallelism the larger of (Nl,C) and (BT,Cl) */
  double gath;    /* sequence parallelism: (BT,C) all-gathered input or partial sums; else 0 */
  double lngrad;  /* sequence parallelism: 4C LayerNorm weight gradients; else 0 */
  double scratch; /* all of it: fch x 2, dln, resid x 2 (dres), gath x 2, lngrad */
} zeroc__gpt_bytes_t;

void zeroc__gpt_buffer_bytes(const zeroc__gpt_shape_t *s, zeroc__gpt_bytes_t *out);

/* Context parallelism (cp > 1) adds one backward-scratch buffer (tag
 * workspace) to the model: (T/cp, C) in the activation dtype, the zeros the
 * embedding kernels take for wpe (positions are added by zigzag chunk) and the
 * sink of their wpe gradient. 0 for cp 1. */
double zeroc__gpt_cp_pos_bytes(int seq, int cp, int C, double e);

#endif
