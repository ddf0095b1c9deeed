/*
 * model/gpt_hfmap.c - the transformers tensors of each decoder parameter and
 * the copies between them (gpt_hfmap.h): GPT2LMHeadModel's names and Conv1D
 * layout, LlamaForCausalLM's and Qwen2ForCausalLM's separate projections.
 */
#include "model/gpt_hfmap.h"

#include <stdio.h>
#include <string.h>

#include "tp/split.h"

/* The unsplit shape of pd, as a piece's shape. */
static void whole(const zeroc_param_desc_t *pd, zeroc__hf_piece_t *pc) {
  zeroc__split_t sp;
  zeroc__split_of(pd, &sp);
  pc->nd = pd->ndim;
  pc->shape[0] = (uint64_t)sp.full[0];
  pc->shape[1] = pd->ndim == 2 ? (uint64_t)sp.full[1] : 1;
  pc->row0 = 0;
  pc->cols = pc->shape[1];
  pc->map = ZEROC_HF_COPY;
}

static int gpt2_pieces(const zeroc_gpt_config_t *cfg, const zeroc_param_desc_t *pd, int gu,
                       zeroc__hf_piece_t *out) {
  int block = gu > 0 && gu <= cfg->layers;
  whole(pd, out);
  if (block) {
    snprintf(out->name, sizeof out->name, "h.%d.%s", gu - 1, pd->name);
    if (pd->ndim == 2) { /* Conv1D: (in, out) */
      uint64_t r = out->shape[0];
      out->shape[0] = out->shape[1], out->shape[1] = r;
      out->map = ZEROC_HF_TRANSPOSE;
    }
  } else {
    snprintf(out->name, sizeof out->name, "%s", pd->name);
    if (!strcmp(pd->name, "wte.weight")) out->shape[0] = (uint64_t)cfg->vocab; /* no padding */
  }
  return 1;
}

/* Rows [row0, row0 + rows) of pd as transformers' tensor `name` of layer l. */
static void part(const zeroc_param_desc_t *pd, int l, const char *name, uint64_t row0,
                 uint64_t rows, zeroc__hf_piece_t *pc) {
  whole(pd, pc);
  snprintf(pc->name, sizeof pc->name, "layers.%d.%s", l, name);
  pc->row0 = row0;
  pc->shape[0] = rows;
}

static int llama_pieces(const zeroc_gpt_config_t *cfg, const zeroc_param_desc_t *pd, int gu,
                        zeroc__hf_piece_t *out) {
  const uint64_t HS = (uint64_t)(cfg->hidden / cfg->heads), NH = (uint64_t)cfg->heads;
  const uint64_t NKV = (uint64_t)cfg->kv_heads, F = (uint64_t)cfg->ffn;
  const char *n = pd->name;
  if (gu == 0 || gu > cfg->layers) { /* embed_tokens, norm, lm_head: without padding rows */
    whole(pd, out);
    snprintf(out->name, sizeof out->name, "%s", n);
    if (pd->ndim == 2) out->shape[0] = (uint64_t)cfg->vocab;
    return 1;
  }
  int l = gu - 1, bias = strstr(n, ".bias") != NULL;
  if (!strncmp(n, "self_attn.qkv_proj.", 19)) {
    part(pd, l, bias ? "self_attn.q_proj.bias" : "self_attn.q_proj.weight", 0, NH * HS, &out[0]);
    part(pd, l, bias ? "self_attn.k_proj.bias" : "self_attn.k_proj.weight", NH * HS, NKV * HS,
         &out[1]);
    part(pd, l, bias ? "self_attn.v_proj.bias" : "self_attn.v_proj.weight", (NH + NKV) * HS,
         NKV * HS, &out[2]);
    out[0].map = ZEROC_HF_QROWS;
    out[0].hs = (int)HS, out[0].nkv = (int)NKV, out[0].group = (int)(NH / NKV);
    return 3;
  }
  if (!strcmp(n, "mlp.gate_up_proj.weight")) {
    part(pd, l, "mlp.gate_proj.weight", 0, F, &out[0]);
    part(pd, l, "mlp.up_proj.weight", F, F, &out[1]);
    return 2;
  }
  whole(pd, out);
  snprintf(out->name, sizeof out->name, "layers.%d.%s", l, n);
  if (!strcmp(n, "self_attn.o_proj.weight")) {
    out->map = ZEROC_HF_OCOLS;
    out->hs = (int)HS, out->nkv = (int)NKV, out->group = (int)(NH / NKV);
  }
  return 1;
}

int zeroc__hf_pieces(const zeroc_gpt_config_t *cfg, const zeroc_param_desc_t *pd, int gu,
                     zeroc__hf_piece_t out[ZEROC_HF_MAX_PIECES]) {
  memset(out, 0, sizeof(zeroc__hf_piece_t) * ZEROC_HF_MAX_PIECES);
  return cfg->family == ZEROC_GPT_FAMILY_LLAMA ? llama_pieces(cfg, pd, gu, out)
                                               : gpt2_pieces(cfg, pd, gu, out);
}

/* zeroc's head of transformers' query head h: heads come in `group` groups of nkv
 * (zeroc's head j is transformers' (j % nkv) group + j / nkv). */
static uint64_t perm(const zeroc__hf_piece_t *pc, uint64_t h) {
  return (h % (uint64_t)pc->group) * (uint64_t)pc->nkv + h / (uint64_t)pc->group;
}

/* Where element (r, c) of the file's tensor lies in the unsplit parameter of `cols`
 * columns (TRANSPOSE aside: a whole-tensor copy). */
static uint64_t place(const zeroc__hf_piece_t *pc, uint64_t r, uint64_t c) {
  uint64_t hs = (uint64_t)pc->hs;
  if (pc->map == ZEROC_HF_QROWS) r = perm(pc, r / hs) * hs + r % hs;
  if (pc->map == ZEROC_HF_OCOLS) c = perm(pc, c / hs) * hs + c % hs;
  return (pc->row0 + r) * pc->cols + c;
}

void zeroc__hf_piece_get(const zeroc__hf_piece_t *pc, const float *full, float *out) {
  uint64_t R = pc->shape[0], C = pc->shape[1];
  if (pc->map == ZEROC_HF_TRANSPOSE) { /* full (C, R) -> out (R, C) */
    for (uint64_t i = 0; i < C; i++)
      for (uint64_t j = 0; j < R; j++) out[j * C + i] = full[i * R + j];
    return;
  }
  if (pc->map == ZEROC_HF_COPY) {
    memcpy(out, full + pc->row0 * pc->cols, R * C * sizeof(float));
    return;
  }
  for (uint64_t r = 0; r < R; r++)
    for (uint64_t c = 0; c < C; c++) out[r * C + c] = full[place(pc, r, c)];
}

void zeroc__hf_piece_put(const zeroc__hf_piece_t *pc, const float *in, float *full) {
  uint64_t R = pc->shape[0], C = pc->shape[1];
  if (pc->map == ZEROC_HF_TRANSPOSE) { /* in (R, C) -> full (C, R) */
    for (uint64_t j = 0; j < R; j++)
      for (uint64_t i = 0; i < C; i++) full[i * R + j] = in[j * C + i];
    return;
  }
  if (pc->map == ZEROC_HF_COPY) {
    memcpy(full + pc->row0 * pc->cols, in, R * C * sizeof(float));
    return;
  }
  for (uint64_t r = 0; r < R; r++)
    for (uint64_t c = 0; c < C; c++) full[place(pc, r, c)] = in[r * C + c];
}
