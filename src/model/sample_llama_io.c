/*
 * model/sample_llama_io.c - a Llama-family sampler's weights from a safetensors file as
 * transformers' save_pretrained writes LlamaForCausalLM and Qwen2ForCausalLM
 * (model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...,
 * model.norm.weight, lm_head.weight; "model." may be absent), F32/BF16/F16: q|k|v and
 * gate|up fused, the query heads (and o_proj's input columns) put in zeroc's grouped
 * order (model/gpt_impl.h: internal head j is transformers' head (j % NKV) (NH/NKV) +
 * j / NKV). Rotate-half RoPE needs no reordering of a head's rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/st_set.h"
#include "model/gpt_file.h"
#include "model/sample.h"

typedef struct {
  zeroc__st_set_t *st;
  const char *path, *prefix;
} file_t;

// tensor `name` (prefixed unless bare) of shape (rows, cols), or (rows) when cols is 0 -> out
static zeroc_result_t read_tensor(const file_t *f, const char *name, int bare, uint64_t rows,
                                  uint64_t cols, float *out) {
  char full[160];
  snprintf(full, sizeof full, "%s%s", bare ? "" : f->prefix, name);
  const zeroc__st_tensor_t *t = zeroc__st_set_find(f->st, full);
  if (!t)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "'%s' has no tensor '%s' (a transformers Llama/Qwen2 file of this shape "
                      "has)",
                      f->path, full);
  int nd = cols ? 2 : 1;
  if (t->ndim != nd || t->shape[0] != rows || (cols && t->shape[1] != cols))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "'%s': tensor '%s' has %d dimensions (%llu, %llu), this model needs "
                      "(%llu%s%llu)",
                      f->path, full, t->ndim, (unsigned long long)t->shape[0],
                      (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0), (unsigned long long)rows,
                      cols ? ", " : "", (unsigned long long)cols);
  return zeroc__st_read_f32(t, out, t->numel);
}

/* transformers' head of internal query head j (G = NH / NKV query heads per kv head) */
static int hf_head(int j, int NKV, int G) { return (j % NKV) * G + j / NKV; }

// q (NH HS, cols or 1) rows in transformers' head order -> dst in zeroc's
static void permute_rows(float *dst, const float *q, int NH, int NKV, int HS, uint64_t cols) {
  const uint64_t w = cols ? cols : 1, head = (uint64_t)HS * w;
  for (int j = 0; j < NH; j++)
    memcpy(dst + (uint64_t)j * head, q + (uint64_t)hf_head(j, NKV, NH / NKV) * head,
           head * sizeof(float));
}

// o (C, NH HS) with input columns in transformers' head order -> dst in zeroc's
static void permute_cols(float *dst, const float *o, int C, int NH, int NKV, int HS) {
  const uint64_t W = (uint64_t)NH * HS;
  for (int r = 0; r < C; r++)
    for (int j = 0; j < NH; j++)
      memcpy(dst + r * W + (uint64_t)j * HS, o + r * W + (uint64_t)hf_head(j, NKV, NH / NKV) * HS,
             (size_t)HS * sizeof(float));
}

/* Block l's tensors (gu = l + 1) into the sampler; tmp holds C x C floats. */
static zeroc_result_t read_block(const file_t *f, zeroc_sampler_t *s, int l, float *tmp) {
  const zeroc_gpt_config_t *c = zeroc_sampler_config(s);
  const int C = c->hidden, NH = c->heads, NKV = c->kv_heads, HS = C / NH, F = c->ffn;
  const uint64_t KV = (uint64_t)NKV * HS;
  const int o_w = 2 + c->qkv_bias; /* then norm2, gate|up, down */
  float *p[7];
  uint64_t r, k;
  for (int i = 0; i < zeroc__sampler_unit_params(s, l + 1); i++)
    p[i] = zeroc__sampler_param(s, l + 1, i, &r, &k);
  char n[128];
#define NAME(x) (snprintf(n, sizeof n, "layers.%d.%s", l, x), n)
  CHK(read_tensor(f, NAME("input_layernorm.weight"), 0, C, 0, p[0]));
  CHK(read_tensor(f, NAME("self_attn.q_proj.weight"), 0, C, C, tmp));
  permute_rows(p[1], tmp, NH, NKV, HS, C);
  CHK(read_tensor(f, NAME("self_attn.k_proj.weight"), 0, KV, C, p[1] + (uint64_t)C * C));
  CHK(read_tensor(f, NAME("self_attn.v_proj.weight"), 0, KV, C, p[1] + (C + KV) * C));
  if (c->qkv_bias) {
    CHK(read_tensor(f, NAME("self_attn.q_proj.bias"), 0, C, 0, tmp));
    permute_rows(p[2], tmp, NH, NKV, HS, 0);
    CHK(read_tensor(f, NAME("self_attn.k_proj.bias"), 0, KV, 0, p[2] + C));
    CHK(read_tensor(f, NAME("self_attn.v_proj.bias"), 0, KV, 0, p[2] + C + KV));
  }
  CHK(read_tensor(f, NAME("self_attn.o_proj.weight"), 0, C, C, tmp));
  permute_cols(p[o_w], tmp, C, NH, NKV, HS);
  CHK(read_tensor(f, NAME("post_attention_layernorm.weight"), 0, C, 0, p[o_w + 1]));
  CHK(read_tensor(f, NAME("mlp.gate_proj.weight"), 0, F, C, p[o_w + 2]));
  CHK(read_tensor(f, NAME("mlp.up_proj.weight"), 0, F, C, p[o_w + 2] + (uint64_t)F * C));
  CHK(read_tensor(f, NAME("mlp.down_proj.weight"), 0, C, F, p[o_w + 3]));
#undef NAME
  return ZEROC_OK;
}

/* A tied model's file may carry lm_head.weight too (a copy of the embedding): refused when
 * it is another matrix, which only an untied model has. */
static zeroc_result_t check_tied(const file_t *f, const float *wte, uint64_t V, uint64_t C) {
  const zeroc__st_tensor_t *t = zeroc__st_set_find(f->st, "lm_head.weight");
  if (!t) return ZEROC_OK;
  float *h = t->numel == V * C ? malloc(V * C * sizeof(float)) : NULL;
  zeroc_result_t r = h ? zeroc__st_read_f32(t, h, V * C) : ZEROC_OK;
  if (!r && (!h || memcmp(h, wte, V * C * sizeof(float))))
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                   "'%s': lm_head.weight is not the embedding: an untied head, and this model's "
                   "is tied (accepted: a file without lm_head.weight or with the embedding's)",
                   f->path);
  free(h);
  return r;
}

zeroc_result_t zeroc__sampler_load_llama(const char *path, const zeroc_gpt_config_t *cfg,
                                         zeroc_sampler_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_sampler_t *s = NULL;
  float *tmp = NULL;
  file_t f = {NULL, path, "model."};
  *out = NULL;
  CHK(zeroc__sampler_create(cfg, &s));
  const uint64_t C = (uint64_t)cfg->hidden, V = (uint64_t)cfg->vocab;
  ZEROC_TRY(zeroc__st_set_open(path, &f.st));
  if (!zeroc__st_set_find(f.st, "model.embed_tokens.weight")) f.prefix = ""; /* a bare LlamaModel */
  ZEROC_TRY(zeroc__gpt_check_layers(f.st, path, cfg->layers));
  tmp = malloc(C * C * sizeof(float));
  if (!tmp) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler load buffer of %llu floats",
                     (unsigned long long)(C * C));
    goto fail;
  }
  uint64_t r, k;
  float *wte = zeroc__sampler_param(s, 0, 0, &r, &k);
  ZEROC_TRY(read_tensor(&f, "embed_tokens.weight", 0, V, C, wte));
  for (int l = 0; l < cfg->layers; l++) ZEROC_TRY(read_block(&f, s, l, tmp));
  ZEROC_TRY(
      read_tensor(&f, "norm.weight", 0, C, 0, zeroc__sampler_param(s, cfg->layers + 1, 0, &r, &k)));
  if (cfg->untied)
    ZEROC_TRY(read_tensor(&f, "lm_head.weight", 1, V, C,
                          zeroc__sampler_param(s, cfg->layers + 1, 1, &r, &k)));
  else
    ZEROC_TRY(check_tied(&f, wte, V, C));
  *out = s;
  s = NULL;
fail:
  free(tmp);
  zeroc__st_set_close(f.st);
  zeroc_sampler_destroy(s);
  return res;
}
