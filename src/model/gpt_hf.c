/*
 * model/gpt_hf.c - the GPT as transformers' GPT2LMHeadModel: the config.json
 * that goes with its exported weights (model.safetensors, gpt_io.c's names),
 * and the shape a GPT2LMHeadModel's config.json gives. The keys and their
 * meaning are those of transformers' GPT2Config; zeroc's GPT is the class
 * with GELU's tanh form ("gelu_new"), LayerNorm eps 1e-5, a 4C MLP, the head
 * tied to wte and attention scaled by 1/sqrt(head size).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"
#include "model/gpt_hf.h"
#include "model/lm_rules.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

const char *const zeroc__gpt_hf_architectures[] = {"GPT2LMHeadModel", NULL};

/* ---- write -------------------------------------------------------------------------- */

zeroc_result_t zeroc__hf_config_end(zeroc__jw_t *w, char **json) {
  zeroc__jw_put_bool(w, "use_cache", 1);
  /* the export's tensors are fp32; "dtype" for transformers 5, "torch_dtype" before */
  zeroc__jw_put_str(w, "dtype", "float32");
  zeroc__jw_put_str(w, "torch_dtype", "float32");
  zeroc__jw_object_end(w);
  return zeroc__jw_finish_dup(w, "config.json", json);
}

zeroc_result_t zeroc__gpt_hf_config_write(const zeroc_gpt_config_t *g, int positions,
                                          double dropout, char **json) {
  zeroc__jw_t w;
  zeroc__jw_init(&w, 2);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "architectures");
  zeroc__jw_array_begin(&w);
  zeroc__jw_string(&w, zeroc__gpt_hf_architectures[0]);
  zeroc__jw_array_end(&w);
  zeroc__jw_put_str(&w, "model_type", "gpt2");
  zeroc__jw_put_int(&w, "vocab_size", g->vocab);
  zeroc__jw_put_int(&w, "n_positions", positions);
  zeroc__jw_put_int(&w, "n_embd", g->hidden);
  zeroc__jw_put_int(&w, "n_layer", g->layers);
  zeroc__jw_put_int(&w, "n_head", g->heads);
  zeroc__jw_key(&w, "n_inner");
  zeroc__jw_null(&w); /* 4 n_embd */
  zeroc__jw_put_str(&w, "activation_function", "gelu_new");
  /* --dropout is all three at once (docs/cli.md) */
  zeroc__jw_put_num(&w, "resid_pdrop", dropout);
  zeroc__jw_put_num(&w, "embd_pdrop", dropout);
  zeroc__jw_put_num(&w, "attn_pdrop", dropout);
  zeroc__jw_put_num(&w, "layer_norm_epsilon", 1e-5);
  zeroc__jw_put_num(&w, "initializer_range", 0.02);
  zeroc__jw_put_bool(&w, "scale_attn_weights", 1);
  zeroc__jw_put_bool(&w, "scale_attn_by_inverse_layer_idx", 0);
  zeroc__jw_put_bool(&w, "reorder_and_upcast_attn", 0);
  zeroc__jw_put_bool(&w, "tie_word_embeddings", 1);
  return zeroc__hf_config_end(&w, json);
}

/* ---- read --------------------------------------------------------------------------- */

/* An integer key in lo..hi. */
static zeroc_result_t get_int(const zeroc__json_t *root, const char *key, int64_t lo, int64_t hi,
                              int *out) {
  const zeroc__json_t *v = zeroc__json_get(root, key);
  if (!v) return BAD("config.json has no \"%s\"; a GPT2LMHeadModel config has one", key);
  if (v->type != ZEROC_JSON_NUMBER || !v->u.num.is_int || v->u.num.i < lo || v->u.num.i > hi)
    return BAD("config.json \"%s\": accepted an integer %lld..%lld", key, (long long)lo,
               (long long)hi);
  *out = (int)v->u.num.i;
  return ZEROC_OK;
}

/* A key the GPT honours only at one value: absent, or that value. */
static zeroc_result_t want_bool(const zeroc__json_t *root, const char *key, int want) {
  const zeroc__json_t *v = zeroc__json_get(root, key);
  if (!v) return ZEROC_OK;
  if (v->type != ZEROC_JSON_BOOL || v->u.boolean != want)
    return BAD("config.json \"%s\": zeroc's GPT has %s (%s)", key, want ? "true" : "false",
               v->type == ZEROC_JSON_BOOL ? "got the other value" : "got no boolean");
  return ZEROC_OK;
}

/* The class: "architectures" names GPT2LMHeadModel, or model_type is gpt2. */
static zeroc_result_t check_class(const zeroc__json_t *root) {
  const zeroc__json_t *a = zeroc__json_get(root, "architectures");
  const zeroc__json_t *t = zeroc__json_get(root, "model_type");
  if (a && a->type == ZEROC_JSON_ARRAY)
    for (size_t i = 0; i < a->u.arr.n; i++)
      if (a->u.arr.items[i].type == ZEROC_JSON_STRING &&
          !strcmp(a->u.arr.items[i].u.str.s, "GPT2LMHeadModel"))
        return ZEROC_OK;
  if (t && t->type == ZEROC_JSON_STRING && !strcmp(t->u.str.s, "gpt2")) return ZEROC_OK;
  return BAD("config.json is not a GPT2LMHeadModel's (architectures, model_type \"%s\")",
             t && t->type == ZEROC_JSON_STRING ? t->u.str.s : "?");
}

/* What zeroc's GPT computes, and nothing else: the MLP, the activation, eps,
 * the tied head, the attention's scale. */
static zeroc_result_t check_math(const zeroc__json_t *root, int C) {
  const zeroc__json_t *v = zeroc__json_get(root, "n_inner");
  if (v && v->type != ZEROC_JSON_NULL &&
      !(v->type == ZEROC_JSON_NUMBER && v->u.num.is_int && v->u.num.i == 4LL * C))
    return BAD("config.json \"n_inner\": zeroc's GPT has an MLP of 4 x n_embd = %d (or null)",
               4 * C);
  v = zeroc__json_get(root, "activation_function");
  if (v && !(v->type == ZEROC_JSON_STRING &&
             (!strcmp(v->u.str.s, "gelu_new") || !strcmp(v->u.str.s, "gelu_pytorch_tanh"))))
    return BAD("config.json \"activation_function\" \"%s\": accepted gelu_new or "
               "gelu_pytorch_tanh (GELU's tanh form, zeroc's)",
               v->type == ZEROC_JSON_STRING ? v->u.str.s : "?");
  v = zeroc__json_get(root, "layer_norm_epsilon");
  if (v && !(v->type == ZEROC_JSON_NUMBER && fabs(v->u.num.value - 1e-5) <= 1e-12))
    return BAD("config.json \"layer_norm_epsilon\": accepted 1e-05 (zeroc's LayerNorm)");
  ZEROC_CHECK(want_bool(root, "tie_word_embeddings", 1));
  ZEROC_CHECK(want_bool(root, "scale_attn_weights", 1));
  return want_bool(root, "scale_attn_by_inverse_layer_idx", 0);
}

/* A setting already given must agree with the file. */
static zeroc_result_t agree(int *field, int file, const char *name, const char *key) {
  if (*field != ZEROC_UNSET && *field != file)
    return BAD("%s %d contradicts config.json \"%s\" %d", name, *field, key, file);
  *field = file;
  return ZEROC_OK;
}

static zeroc_result_t read_shape(const zeroc__json_t *root, zeroc_train_config_t *c,
                                 const zeroc__train_names_t *n) {
  int L, C, NH, V, P;
  ZEROC_CHECK(check_class(root));
  ZEROC_CHECK(get_int(root, "n_layer", 1, 1 << 16, &L));
  ZEROC_CHECK(get_int(root, "n_embd", 1, 1 << 20, &C));
  ZEROC_CHECK(get_int(root, "n_head", 1, 1 << 16, &NH));
  ZEROC_CHECK(get_int(root, "vocab_size", 2, 1 << 30, &V));
  ZEROC_CHECK(get_int(root, "n_positions", 1, 1 << 24, &P));
  ZEROC_CHECK(check_math(root, C));
  /* a preset named beside the file must be the file's shape */
  zeroc_gpt_config_t pre;
  if (c->model && strcmp(c->model, "custom") && zeroc_gpt_preset(c->model, &pre) == ZEROC_OK &&
      (pre.layers != L || pre.hidden != C || pre.heads != NH || pre.vocab != V))
    return BAD("%s %s (%d layers, hidden %d, %d heads, vocab %d) contradicts config.json (%d, %d, "
               "%d, %d)",
               n->model, c->model, pre.layers, pre.hidden, pre.heads, pre.vocab, L, C, NH, V);
  ZEROC_CHECK(agree(&c->layers, L, n->layers, "n_layer"));
  ZEROC_CHECK(agree(&c->hidden, C, n->hidden, "n_embd"));
  ZEROC_CHECK(agree(&c->heads, NH, n->heads, "n_head"));
  ZEROC_CHECK(agree(&c->vocab, V, n->vocab, "vocab_size"));
  if (c->seq != ZEROC_UNSET && c->seq > P)
    return BAD("%s %d: accepted up to config.json \"n_positions\" %d", n->seq, c->seq, P);
  if (c->seq == ZEROC_UNSET) c->seq = P;
  c->model = "custom";
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_hf_config_read(const char *json, size_t len, zeroc_train_config_t *c,
                                         int names) {
  zeroc__json_doc_t *doc = NULL;
  ZEROC_CHECK(zeroc__json_parse(json, len, "config.json", &doc));
  const zeroc__json_t *root = zeroc__json_root(doc);
  zeroc_result_t r = root->type == ZEROC_JSON_OBJECT ? read_shape(root, c, zeroc__lm_names(names))
                                                     : BAD("config.json: accepted a JSON object");
  zeroc__json_free(doc);
  return r;
}
