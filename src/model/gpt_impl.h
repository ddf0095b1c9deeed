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
#include "kernels/rope.h"
#include "model/gpt_cp.h"
#include "model/gpt_internal.h"
#include "model/gpt_sizes.h"
#include "tp/tp.h"
#include "zeroc/gpt.h"

/* the most parameters of a block unit (GPT-2's twelve) */
enum { BLOCK_PARAMS = 12 };
/* GPT-2's parameter order inside a block unit */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };
/* GPT-2's parameter order inside the head: a head on another rank than the
 * embedding carries its own copy of wte last. Llama's head is [norm, lm_head or
 * the wte copy] (zeroc_gpt.head_w says where the output weight is). */
enum { HEAD_LNFW, HEAD_LNFB, HEAD_WTE };
/* Llama's parameter order inside a block unit (llama_block.c), without qkv bias one fewer:
 *   input_layernorm.weight (C)                          replicated
 *   self_attn.qkv_proj.weight ((NH + 2 NKV) HS, C)      column-parallel, NH/NKV + 2 groups
 *   self_attn.qkv_proj.bias ((NH + 2 NKV) HS)           only with qkv_bias
 *   self_attn.o_proj.weight (C, NH HS)                  row-parallel, NH/NKV groups
 *   post_attention_layernorm.weight (C)                 replicated
 *   mlp.gate_up_proj.weight (2F, C)                     column-parallel, gate | up
 *   mlp.down_proj.weight (C, F)                         row-parallel
 * The fused q rows hold the query heads in groups of NKV: internal head j is transformers'
 * head (j % NKV) (NH/NKV) + j / NKV and reads kv head j % NKV (kernels/llama_kernels.h),
 * o_proj's input columns likewise; export and import permute them (gpt_io.c). Every
 * tp rank's share of each group is then whole kv heads and the query heads reading them. */
enum { LL_NORM1, LL_QKVW, LL_QKVB };

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
  /* Llama (cfg.family): kv heads and their channels per tp rank, the head size, q|k|v's
   * and the MLP's widths per tp rank, the block's parameter count, and where the head's
   * output weight sits in head_p (GPT-2: HEAD_WTE) */
  int llama, NKVl, KVl, HS, QKVl, Fl, nbp, head_w;
  zeroc_rope_t rope;
  int32_t *pos;          /* Llama: (B*T) positions of the rows (device), filled for pos_B x pos_T */
  int pos_B, pos_T;      /* the batch shape pos holds (0: none yet) */
  int expand;            /* zeroc__gpt_expands_kv: GQA through the multi-head kernels */
  void *xqkv, *dxqkv;    /* expand: the repeated (BT,3Cl) q|k|v and its gradient */
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
  zeroc_param_desc_t *block_p; /* L x BLOCK_PARAMS, the first nbp of each used */
  /* activations, one set per slot */
  int slots;
  slot_act_t *act;
  saved_t shared_saved; /* recompute: the one set every block recomputes into */
  float *ce_stats; /* tp > 1: (3,B,T) row max, target logit, sum of exp (used inside the head) */
  float *losses_host;
  const float *last_losses; /* the losses of the last head forward */
  /* gradient scratch, one block's worth, and the ping-pong residual gradients */
  void *dfch, *dfchg, *dln, *datty, *dqkv, *dres[2]; /* dfchg: Llama only */
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

/* A block's user pointer names the model, the block's global index (its
 * parameters' names) and its index among the blocks this rank holds (its
 * activations), so the unit list can be cut into pipeline stages. */
#define BLOCK_CTX(io, g, l)                                                                        \
  struct blockref *ref_ = (io)->user;                                                              \
  zeroc_gpt_t *g = ref_->g;                                                                        \
  int l = ref_->lb;                                                                                \
  const zeroc_gpt_batch_t *batch_;                                                                 \
  CHK(zeroc__gpt_io_batch(g, (io), &batch_))

/* ---- shared by gpt.c and llama_block.c ---- */
/* The micro-batch a unit reads its shape from, checked against the model's capacity. */
zeroc_result_t zeroc__gpt_io_batch(zeroc_gpt_t *g, const zeroc_layer_io_t *io,
                                   const zeroc_gpt_batch_t **out);
/* What block lb keeps for backward in slot `slot` (recompute: the one shared set). */
saved_t *zeroc__gpt_block_saved(zeroc_gpt_t *g, int slot, int lb);
/* Where norm vector `idx` of d gets its gradient: d[idx], or with sequence parallelism
 * vector `slot` of lngrad, summed over the tp ranks by zeroc__gpt_norm_grads_reduce. */
void *zeroc__gpt_norm_grad(zeroc_gpt_t *g, void *const *d, int idx, int slot);
zeroc_result_t zeroc__gpt_norm_grads_reduce(zeroc_gpt_t *g, zeroc_stream_t *s, void *const *dst,
                                            int n);
/* A parameter's descriptor with its unsplit shape (d1 0: 1-D), and its split over the tp
 * ranks along `dim` in `groups` equal groups: its shape becomes this rank's share and a
 * normal initialisation draws at the unsplit indices (recorded even with one tp rank, so
 * a checkpoint of any tp size can be re-split for another). */
zeroc_param_desc_t zeroc__gpt_pdesc(const char *name, int64_t d0, int64_t d1,
                                    zeroc_init_kind_t init, float scale, uint32_t flags,
                                    uint64_t stream);
void zeroc__gpt_tp_split(zeroc_param_desc_t *p, const zeroc__tp_t *tp, int dim, int groups);
/* An activation or scratch buffer of the model (freed with it). */
zeroc_result_t zeroc__gpt_alloc(zeroc_gpt_t *g, zeroc_memtag_t tag, size_t bytes, void **p);

/* ---- llama_block.c ---- */
/* Block l's parameters (g->nbp of them), named and initialised as in the unsplit model. */
void zeroc__llama_block_params(zeroc_gpt_t *g, int l, float std, float proj_std);
zeroc_result_t zeroc__llama_block_forward(zeroc_layer_io_t *io);
zeroc_result_t zeroc__llama_block_backward(zeroc_layer_io_t *io);
/* The model's norm: LayerNorm (GPT-2) or RMSNorm (Llama, b and mean unused). */
zeroc_result_t zeroc__gpt_norm_forward(zeroc_gpt_t *g, zeroc_stream_t *s, void *out, float *mean,
                                       float *rstd, const void *in, const void *w, const void *b,
                                       int N);
zeroc_result_t zeroc__gpt_norm_backward(zeroc_gpt_t *g, zeroc_stream_t *s, void *dinp, void *dw,
                                        void *db, const void *dout, const void *in, const void *w,
                                        const float *mean, const float *rstd, int N,
                                        const void *dres, unsigned flags);

#endif
