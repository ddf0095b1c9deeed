/*
 * model/gpt_impl.h - the GPT's state, shared by the files of the model
 * (gpt.c builds and runs it, gpt_query.c answers questions about it); never
 * seen above model/.
 */
#ifndef ZEROC_MODEL_GPT_IMPL_H
#define ZEROC_MODEL_GPT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/gpt_cp.h"
#include "model/gpt_internal.h"
#include "model/gpt_sizes.h"
#include "tp/tp.h"
#include "zeroc/gpt.h"

enum { BLOCK_PARAMS = 12 };
/* parameter order inside a block unit */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };
/* parameter order inside the head: a head on another rank than the embedding
 * carries its own copy of wte last */
enum { HEAD_LNFW, HEAD_LNFB, HEAD_WTE };

/* What one block keeps for its backward (in the activation dtype; statistics
 * fp32). Per tp rank, with Cl = C/tp, NHl = NH/tp, and Nl = B*T/tp rows under
 * sequence parallelism (else B*T): ln1, res2, ln2 (Nl,C); qkv (B,T,3Cl) as
 * q | k | v of this rank's heads; atty (B,T,Cl); fch, fchg (B,T,4Cl). */
typedef struct {
  void *ln1, *qkv, *atty, *res2, *ln2, *fch, *fchg;
  float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* (Nl) */
  float *lse;                                       /* (B,NHl,T) */
} saved_t;

/* The activations of one in-flight micro-batch (a slot), for the units this
 * rank holds. */
typedef struct {
  void *x0;       /* embedding output (Nl,C): B*T rows, or this rank's B*T/tp with SP */
  void **xout;    /* per local block, its output (Nl,C) */
  saved_t *saved; /* per local block (recompute: NULL, the model's one shared set) */
  void *lnf;      /* head: final LayerNorm output (Nl,C) */
  float *lnf_mean, *lnf_rstd;
  void *logits;  /* (B,T,Vl): this rank's logits, then their gradient in place */
  float *losses; /* (B,T) */
} slot_act_t;

struct zeroc_gpt {
  zeroc_ctx_t *ctx;
  zeroc_gpt_config_t cfg;
  zeroc_kernels_t *k;
  zeroc__tp_t tp;
  zeroc__gpt_cp_t cp; /* context parallelism: a batch's T tokens are this rank's zigzag share */
  size_t cp_pos_bytes; /* cp > 1: the position scratch cp.pos */
  int Bmax, Vp, recompute;
  float drop;            /* dropout probability (0: none) */
  uint64_t drop_seed;    /* with the batch's step and slots, the masks' key */
  int t, Cl, NHl, Vl;    /* tp size; channels, heads and vocabulary rows per tp rank */
  size_t es;             /* activation element size */
  zeroc__gpt_bytes_t sz; /* the bytes of each buffer (gpt_sizes.c, which the planner calls too) */
  zeroc_layer_t *layers; /* this rank's units */
  int nlayers;
  int *gunit;                              /* (nlayers) global unit index of each local unit */
  int nchunks, *chunk_first, *chunk_count; /* local unit ranges of the chunks */
  int nblocks;                             /* blocks held here */
  zeroc_param_desc_t embed_p[2], head_p[3];
  zeroc_param_desc_t *block_p; /* L x 12 */
  /* activations, one set per slot */
  int slots;
  slot_act_t *act;
  saved_t shared_saved; /* recompute: the one set every block recomputes into */
  float *ce_stats; /* tp > 1: (3,B,T) row max, target logit, sum of exp (used inside the head) */
  float *losses_host;
  const float *last_losses; /* the losses of the last head forward */
  /* gradient scratch, one block's worth, and the ping-pong residual gradients */
  void *dfch, *dfchg, *dln, *datty, *dqkv, *dres[2];
  /* sequence parallelism: (B,T,C) all-gathered inputs and partial sums, and the
   * LayerNorm gradients (4C) summed over the tp ranks before they are added */
  void *gath, *part, *lngrad;
  int dres_next;
  struct blockref {
    struct zeroc_gpt *g;
    int l, lb;
  } * refs; /* per local block: global and local index */
  uint64_t act_bytes;
  float *wpe_tail; /* imported position rows beyond seq, kept for export (host) */
  int wpe_tail_rows;
  void **allocs;
  int nallocs;
};

#endif
