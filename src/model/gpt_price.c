/*
 * model/gpt_price.c - the GPT's answers to the planner (zeroc/arch.h,
 * "pricing"): its rules on a layout, each unit's parameters, what a pipeline
 * stage keeps and moves, and the FLOPs of a step; with the transformer
 * formulas zeroc/plan.h publishes (Megatron's FLOPs, Korthikanti's and
 * zeroc's activations). Every byte comes from gpt_sizes.c, the functions
 * gpt.c sizes its allocations with; docs/plan.md gives the reasoning.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "cp/cp.h"
#include "kernels/attention_cudnn.h"
#include "kernels/kernels.h"
#include "model/gpt_price.h"
#include "model/gpt_sizes.h"
#include "model/lm_rules.h"
#include "zeroc/plan.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

/* ---- the formulas of zeroc/plan.h ------------------------------------------------ */

double zeroc_plan_flops_megatron(const zeroc_gpt_config_t *m, double B, zeroc_recompute_t rc) {
  double s = m->seq, l = m->layers, h = m->hidden, V = m->vocab;
  /* Per layer, one forward pass is 2 B s (its matrices: 12 h^2 for GPT-2; q|k|v, o,
   * gate|up, down for Llama) + 4 B s^2 h; backward is twice that; full recompute adds one
   * more forward of the layers (not the logits). The logit layer is 2 B s h V forward,
   * 6 B s h V in all. */
  double mat = m->family == ZEROC_GPT_FAMILY_LLAMA
                   ? (h + 2.0 * m->kv_heads * (h / m->heads)) * h + h * h + 3.0 * m->ffn * h
                   : 12.0 * h * h;
  double passes = rc == ZEROC_RECOMPUTE_FULL ? 4.0 : 3.0;
  return passes * (2.0 * B * s * l * mat + 4.0 * B * s * s * l * h) + 6.0 * B * s * h * V;
}

const char *zeroc_plan_flops_formula(zeroc_recompute_t rc) {
  return rc == ZEROC_RECOMPUTE_FULL ? "96 B s l h^2 (1 + s/(6h) + V/(16 l h)), full recompute"
                                    : "72 B s l h^2 (1 + s/(6h) + V/(12 l h)), no recompute";
}

double zeroc_plan_act_megatron(double s, double b, double h, double a, int t, int sp,
                               zeroc_recompute_t rc) {
  double sbh = s * b * h;
  if (rc == ZEROC_RECOMPUTE_FULL) return 2.0 * sbh / (sp && t > 1 ? t : 1);
  if (t <= 1) return sbh * (34.0 + 5.0 * a * s / h);
  if (sp) return sbh * (34.0 / t + 5.0 * a * s / (h * t));
  return sbh * (10.0 + 24.0 / t + 5.0 * a * s / (h * t));
}

/* One block's activations for `shape` (b sequences of s tokens, a heads): its output alone
 * with full recompute; else its output and what it saves, the attention's lse with flash,
 * else its softmax probabilities (B,NH,T,T), which gpt.c never keeps. */
static double block_bytes(const zeroc__gpt_shape_t *shape, int recompute, int flash, double b,
                          double a, double s) {
  zeroc__gpt_bytes_t z;
  zeroc__gpt_buffer_bytes(shape, &z);
  if (recompute) return z.resid; /* the block's output, the next one's input */
  double x = z.resid + z.saved - z.lse;
  return x + (flash ? z.lse : shape->e * b * a * s * s / shape->tp);
}

double zeroc_plan_act_zeroc(double s, double b, double h, double a, int t, int sp,
                            zeroc_recompute_t rc, int e, int flash) {
  double n = s * b, r = sp && t > 1 ? t : 1;
  /* the buffers src/model/gpt.c allocates for a GPT-2 block (no vocabulary needed) */
  zeroc__gpt_shape_t shape = {.BT = n,
                              .Nl = n / r,
                              .C = h,
                              .Cl = h / t,
                              .NHl = a / t,
                              .e = e,
                              .tp = t,
                              .sp = sp && t > 1,
                              .qkv = 3 * h / t,
                              .fc = 4 * h / t,
                              .fcg = 4 * h / t};
  return block_bytes(&shape, rc == ZEROC_RECOMPUTE_FULL, flash, b, a, s);
}

/* Unit u's name in messages and schedules. */
void zeroc__gpt_unit_name(const zeroc_gpt_config_t *g, int u, char *buf, size_t n) {
  if (u == 0)
    snprintf(buf, n, "embedding");
  else if (u == g->layers + 1)
    snprintf(buf, n, "head");
  else
    snprintf(buf, n, "block %d", u - 1);
}

/* ---- the model interface's pricing --------------------------------------------------- */

/* the public mode (zeroc/mesh.h) as src/cp names it */
static zeroc__cp_mode_t cp_mode(zeroc_cp_mode_t mode) {
  return mode == ZEROC_CP_MODE_ULYSSES ? ZEROC_CP_ULYSSES : ZEROC_CP_RING;
}

zeroc_result_t zeroc__gpt_price_check(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                      int names) {
  const zeroc_gpt_config_t *m = &info->model;
  const zeroc__train_names_t *n = zeroc__lm_names(names);
  if (!L) return zeroc__lm_check_sizes(m, n);
  /* the rules `zeroc train` applies too (lm_rules.c): tp | heads; the zigzag
   * needs 2 cp | seq, Ulysses cp | heads / tp */
  ZEROC_CHECK(zeroc__lm_check_heads(m, L->tp, n));
  return zeroc__lm_check_cp(L->cp_mode, m, L->tp, L->cp, n);
}

/* Units' parameters as src/model declares them (gpt_sizes.c). The head has its
 * own copy of wte on another rank than the embedding (its gradient is
 * all-reduced with the embedding's); with one stage the embedding is pinned:
 * the head shares it. */
void zeroc__gpt_price_unit(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L, int u,
                           zeroc_arch_unit_price_t *out) {
  int nl = info->model.layers;
  out->params = zeroc__gpt_unit_params(&info->model, L->tp, u, L->pp > 1);
  out->pinned = u == 0 && L->pp == 1 && !info->model.untied; /* an untied head has its own */
  out->block = u > 0 && u <= nl;
  out->output = u == nl + 1;
}

/* Activation bytes of one block per micro-batch: `rc` as asked, and without
 * recompute (what the block being back-propagated rebuilds). With cp a rank's
 * score matrices are (T/cp) x T: as many as cp x heads matrices of (T/cp)^2,
 * which is what the formulas get for s = T/cp. The log-sum-exp (flash) is one
 * per local token and head. */
static void block_act(const zeroc_gpt_config_t *m, const zeroc_arch_layout_t *L, double *layer,
                      double *layer_full) {
  double s = (double)m->seq / L->cp, b = L->batch, C = m->hidden, a = m->heads;
  int t = L->tp, sp = L->sequence_parallel && t > 1, e = L->act_bytes;
  zeroc_recompute_t rc = L->recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  double as = a * L->cp, af = L->flash_attention ? a : as;
  if (L->act_model == ZEROC_ACT_MEGATRON) {
    /* Korthikanti's counts are for 16-bit activations; scaled for fp32. */
    *layer = zeroc_plan_act_megatron(s, b, C, as, t, sp, rc) * e / 2.0;
    *layer_full = zeroc_plan_act_megatron(s, b, C, as, t, sp, ZEROC_RECOMPUTE_NONE) * e / 2.0;
  } else {
    /* the model's own buffers (gpt_sizes.c); af heads: with cp and no flash, the scores */
    zeroc__gpt_shape_t shape;
    zeroc__gpt_shape_init(&shape, m, t, sp, s * b, e, 0);
    *layer = block_bytes(&shape, L->recompute, L->flash_attention, b, af, s);
    *layer_full = block_bytes(&shape, 0, L->flash_attention, b, af, s);
  }
}

/* Whether the run's Llama attention goes through the multi-head kernels (gpt.c's rule) */
static int expand(const zeroc_gpt_config_t *m, const zeroc_arch_layout_t *L) {
  return zeroc__gpt_expands_kv(m, L->cp, L->device == ZEROC_DEVICE_CUDA);
}

/* cuDNN's attention workspace beyond the kernel scratch (kernels/attention_cudnn.h, the
 * formula the runtime allocates by): on cuda (or a plan's device), bf16, a head size cuDNN
 * takes, attention on cuDNN (L->flash_attention). The shape is gpt.c's call (B, T, C/tp,
 * heads/tp); Ulysses runs the forward on T with heads/(tp cp) (its backward, like the ring's
 * blocks, is zeroc's); with dropout only evaluation's forward runs on cuDNN. */
static double cudnn_workspace(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L) {
  const zeroc_gpt_config_t *m = &info->model;
  if (L->flash_attention != ZEROC_ATTENTION_CUDNN || L->device == ZEROC_DEVICE_CPU ||
      L->act_bytes != 2)
    return 0;
  /* the Llama block passes no dropout to attention */
  int split = L->tp, backward = m->family == ZEROC_GPT_FAMILY_LLAMA || !(info->config.dropout > 0);
  if (L->cp > 1) {
    if (L->cp_mode != ZEROC_CP_MODE_ULYSSES) return 0;
    split *= L->cp, backward = 0;
  }
  const int C = m->hidden / split, NH = m->heads / split;
  if (!zeroc__cudnn_takes(C, NH)) return 0;
  zeroc__cudnn_ws_t w;
  zeroc__cudnn_ws(L->batch, m->seq, C, NH, L->deterministic, &w);
  return (double)zeroc__cudnn_ws_own(backward ? w.total : w.fwd, zeroc__kernels_scratch_bytes());
}

zeroc_result_t zeroc__gpt_price_stage(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                      const zeroc_arch_stage_t *st, zeroc_arch_stage_price_t *out) {
  const zeroc_gpt_config_t *m = &info->model;
  /* s: the tokens of a sequence this rank holds, T / cp (its zigzag chunks) */
  double s = (double)m->seq / L->cp, b = L->batch, C = m->hidden, n = s * b;
  int t = L->tp, sp = L->sequence_parallel && t > 1, e = L->act_bytes;
  memset(out, 0, sizeof *out);
  /* src/model/gpt.c's buffers for this shape (gpt_sizes.c) */
  zeroc__gpt_shape_t shape;
  zeroc__gpt_shape_init(&shape, m, t, sp, n, e, expand(m, L));
  zeroc__gpt_bytes_t z;
  zeroc__gpt_buffer_bytes(&shape, &z);
  /* cp: the model's (T/cp, C) position scratch, backward scratch like the rest */
  if (m->family != ZEROC_GPT_FAMILY_LLAMA) /* Llama turns q and k instead */
    z.scratch += zeroc__gpt_cp_pos_bytes(m->seq, L->cp, m->hidden, e);

  double layer, layer_full;
  block_act(m, L, &layer, &layer_full);
  double act = (double)st->inflight * st->blocks * layer;
  /* With recompute, the layer being back-propagated is rebuilt in full; its
   * input is one of the layer inputs already counted. */
  if (L->recompute) act += layer_full - layer;
  /* Context parallelism (src/cp computes the numbers; plan/cp.c says why):
   * what ring or Ulysses keeps per block (only the block being
   * back-propagated with recompute), and its transient buffers, allocated
   * once per rank. */
  if (L->cp > 1) {
    zeroc__cp_mode_t mode = cp_mode(L->cp_mode);
    uint64_t fwd, bwd;
    zeroc__cp_comm_bytes(mode, L->cp, L->batch, m->seq, m->hidden / t, (size_t)e, &fwd, &bwd);
    out->cp_forward = (double)fwd;
    out->cp_backward = (double)bwd;
    /* the model builds its cp object on every stage */
    out->buffers += (double)zeroc__cp_buffer_bytes(mode, L->cp, L->batch, m->seq, m->hidden / t,
                                                   m->heads / t, (size_t)e);
  }
  if (st->output) {
    /* ln_f input and output (B,T,C), its mean/rstd, the logits (B,T,V/t)
     * (the fused cross-entropy overwrites them with their gradient) and the
     * per-token losses (B,T) fp32; with tp the vocabulary-parallel
     * cross-entropy's three per-token statistics (max, target logit, sum of
     * exp) fp32; per activation slot. */
    act += st->inflight * z.head;
  }
  out->activations = act;
  out->workspace = z.scratch; /* the model's backward scratch (gpt_sizes.c lists it) */
  if (st->blocks) out->workspace += cudnn_workspace(info, L); /* the blocks' attention */
  if (L->device == ZEROC_DEVICE_CUDA) {
    /* a run's device copies of the token ids (inputs and targets, gpt_run.c):
     * a pipeline holds the whole step's micro-batches; with cp, this rank's tokens */
    double nmb = L->pp > 1 ? L->microbatches : 1;
    out->buffers += 2.0 * 4.0 * ((double)L->batch * m->seq / L->cp * nmb);
  }
  out->boundary = shape.Nl * C;                       /* one (B*T/r, C) residual stream */
  out->tp_bytes = (double)m->seq / L->cp * b * C * e; /* one (B,T/cp,C) activation */
  out->attn_flops = 4.0 * b * m->seq * m->seq * C / ((double)L->cp * t); /* 4 b T^2 C / (cp t) */
  return ZEROC_OK;
}

void zeroc__gpt_figures(const zeroc_train_info_t *info, double sequences, int recompute,
                        zeroc_arch_figures_t *out) {
  const zeroc_gpt_config_t *m = &info->model;
  out->params = out->dense_params = zeroc_gpt_num_params(m);
  out->tokens = sequences * m->seq;
  /* PaLM's count, as MFU is reported: 6 N per token plus attention's 12 l h s */
  out->flops = 6.0 * (double)out->params * out->tokens +
               12.0 * m->layers * m->hidden * (double)m->seq * out->tokens;
  out->flops_executed = zeroc_plan_flops_megatron(
      m, sequences, recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE);
}
