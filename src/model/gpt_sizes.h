/*
 * model/gpt_sizes.h - the built-in decoder's sizes as pure functions of its shape:
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
 * one of tp ranks, before any flat padding. GPT-2: a block's qkv and fc
 * (column-parallel) and projections (row-parallel) are split, its row-parallel
 * biases (2C) and LayerNorms (4C) replicated: (12 C^2 + 7 C) / tp + 6 C; the
 * embedding is wte's slice plus wpe (T C); the head is ln_f (2C), plus its own
 * copy of wte's slice when `wte_copy` (on another rank than the embedding).
 * Llama: a block's q|k|v (and their biases), o, gate|up and down split, its two
 * RMSNorms (2C) replicated; the embedding is wte's slice; the head is the final
 * RMSNorm (C) and lm_head's slice when untied, else the wte copy as GPT-2's. */
double zeroc__gpt_unit_params(const zeroc_gpt_config_t *c, int tp, int u, int wte_copy);

/* One tp rank's view of a micro-batch (zeroc__gpt_shape_init fills it). */
typedef struct zeroc__gpt_shape {
  double BT;  /* tokens of the (largest) micro-batch */
  double Nl;  /* of them in the sequence-split regions: BT, or BT / tp with sequence parallelism */
  double C;   /* channels */
  double Cl;  /* channels per tp rank, C / tp: the attention's output */
  double NHl; /* heads per tp rank */
  double Vl;  /* vocabulary rows per tp rank, Vp / tp */
  double e;   /* bytes of an activation element */
  int tp, sp; /* tp size; sequence parallelism (tp > 1 only) */
  double qkv; /* q | k | v columns per tp rank: 3 Cl (GPT-2), (NH + 2 NKV) HS / tp (Llama) */
  double fc;  /* the MLP's up-projection output: 4 Cl (GPT-2), gate | up 2 F / tp (Llama) */
  double fcg; /* its activation: 4 Cl (GELU), F / tp (SwiGLU) */
  int llama;  /* RMSNorm (one statistic per row; two norm vectors a block), RoPE positions */
  int expand; /* Llama's grouped-query attention through the multi-head kernels (context
                 parallelism, cuda): kv heads repeated into a (BT, 3 Cl) copy, both ways */
} zeroc__gpt_shape_t;

/* 1 when a Llama model's grouped-query attention runs through the multi-head kernels, kv
 * heads repeated (zeroc__gpt_shape_t.expand): with context parallelism (ring and Ulysses
 * move whole heads) or on cuda (its GQA kernels are to come); never with kv_heads = heads. */
int zeroc__gpt_expands_kv(const zeroc_gpt_config_t *c, int cp, int cuda);

/* The shape of micro-batches of BT tokens (this rank's, T / cp each) of model c on one of
 * tp ranks (sp: sequence parallel), activations of e bytes; expand as above. */
void zeroc__gpt_shape_init(zeroc__gpt_shape_t *s, const zeroc_gpt_config_t *c, int tp, int sp,
                           double BT, double e, int expand);

/* The bytes of each buffer gpt.c allocates for that shape. */
typedef struct zeroc__gpt_bytes {
  /* activations */
  double resid;    /* (Nl,C): the residual stream; the embedding and each block output, ln_1,
                      res2, ln_2, ln_f, a stage-boundary tensor */
  double stat;     /* (Nl) fp32: a norm's mean or rstd */
  int nstat;       /* statistics a block keeps: 4 (two LayerNorms' mean and rstd), 2 (RMSNorm) */
  double qkv;      /* (BT,qkv) */
  double atty;     /* (BT,Cl) attention output */
  double fch;      /* (BT,fc): the MLP's up-projection */
  double fchg;     /* (BT,fcg): its activation (GELU, SwiGLU) */
  double lse;      /* (BT,NHl) fp32: attention log-sum-exp */
  double saved;    /* what one block saves for backward (ln1, qkv, atty, res2, ln2, fch, fchg,
                      the norms' statistics, lse), without its output */
  double logits;   /* (BT,Vl) */
  double losses;   /* (BT) fp32 */
  double ce_stats; /* tp > 1: (3,BT) fp32 max, target logit, sum of exp; else 0 */
  double head;     /* what the head keeps per slot: its input and norm output, the norm's
                      statistics, logits, losses, ce_stats */
  /* backward scratch */
  double dfch;    /* the MLP up-projection's output gradient, reused for dqkv: the larger */
  double dfchg;   /* Llama: the SwiGLU output's gradient (BT,fcg); GPT-2 0 (fused in the GEMM) */
  double dln;     /* (BT,C), or with sequence parallelism the larger of (Nl,C) and (BT,Cl) */
  double gath;    /* sequence parallelism: (BT,C) all-gathered input or partial sums; else 0 */
  double lngrad;  /* sequence parallelism: the norm weight gradients (4C, Llama 2C); else 0 */
  double rope;    /* Llama: (BT) int32 positions of the rows; else 0 */
  double xqkv;    /* expand: the repeated (BT,3Cl) q|k|v and its gradient; else 0 */
  double scratch; /* all of it: dfch, dfchg, dln, resid x 2 (dres), gath x 2, lngrad, rope, xqkv */
} zeroc__gpt_bytes_t;

void zeroc__gpt_buffer_bytes(const zeroc__gpt_shape_t *s, zeroc__gpt_bytes_t *out);

/* Context parallelism (cp > 1) adds one backward-scratch buffer (tag
 * workspace) to the model: (T/cp, C) in the activation dtype, the zeros the
 * embedding kernels take for wpe (positions are added by zigzag chunk) and the
 * sink of their wpe gradient. 0 for cp 1. */
double zeroc__gpt_cp_pos_bytes(int seq, int cp, int C, double e);

#endif
