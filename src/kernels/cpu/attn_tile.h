/*
 * kernels/cpu/attn_tile.h - causal or full attention of ONE head of one
 * sequence, in tiles of queries x keys that stay in the L1/L2 cache: what
 * attention.c (a whole sequence, q k v interleaved in qkv) and attention_block.c
 * (a (query block, key block) pair of a sequence split over ranks) both run per
 * (b, h), so the arithmetic is written once.
 *
 * The forward keeps a running max and sum per query row (online softmax) and
 * saves only the row's log-sum-exp; the backward recomputes each tile of
 * probabilities from q, k and that log-sum-exp. Neither keeps a T x T matrix:
 * the tiles live on the calling thread's stack.
 *
 * Dropout on the probabilities (drop non-NULL, p > 0): the row's sum l and its
 * log-sum-exp are those of the undropped probabilities; only what multiplies v
 * is dropped (and scaled), and the backward redraws the same mask from the hash
 * of (row (b, h, q_pos + i), column k_pos + j).
 */
#ifndef ZEROC_KERNELS_CPU_ATTN_TILE_H
#define ZEROC_KERNELS_CPU_ATTN_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dropout.h"

/* One head: row i of q is q + i*q_t (HS floats), row j of k and v k + j*kv_t and
 * v + j*kv_t; out and dout rows o_t apart; lse one float per query row. */
typedef struct zeroc__attn_head {
  const float *q, *k, *v;
  size_t q_t, kv_t, o_t;
  int Tq, Tk, HS;
  int causal;                  /* 1: key j is seen by query i iff j <= i (Tq == Tk) */
  const zeroc_dropout_t *drop; /* NULL or p == 0: none */
  int64_t b, h;                /* the head's sequence and (local) head, for the dropout rows */
  int64_t q_pos, k_pos;        /* global positions of query 0 and key 0 */
} zeroc__attn_head_t;

/* -> o (Tq rows o_t apart, HS each) = softmax(q k^T / sqrt(HS)) v, lse (Tq) */
void zeroc__attn_head_forward(const zeroc__attn_head_t *a, float *o, float *lse);

/* dout, out (rows o_t apart), lse (Tq, the FINAL log-sum-exp of the rows) ->
 * dq (rows q_t apart) +=, dk, dv (rows kv_t apart) += (=, the old values never read,
 * with set: each row's first product stores instead of adding) */
void zeroc__attn_head_backward(const zeroc__attn_head_t *a, float *dq, float *dk, float *dv,
                               const float *dout, const float *out, const float *lse, int set);

#endif
