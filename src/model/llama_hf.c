/*
 * model/llama_hf.c - the Llama family as transformers' LlamaForCausalLM and
 * Qwen2ForCausalLM: the config.json that goes with its exported weights
 * (gpt_io.c, gpt_hfmap.c's names), and the shape such a config.json gives.
 * The keys and their meaning are transformers' LlamaConfig and Qwen2Config, in
 * both of their spellings of the rotary settings (transformers 5's
 * "rope_parameters", and the "rope_theta" and "rope_scaling" of earlier files).
 * zeroc's Llama is the class with SiLU, no o_proj or MLP biases, q/k/v biases
 * only as Qwen2 has them, head_dim = hidden_size / num_attention_heads, full
 * attention in every layer, and RoPE plain or with Llama 3.1's "llama3" scaling.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"
#include "model/gpt_hf.h"
#include "model/llama_hf.h"
#include "model/lm_rules.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

const char *const zeroc__llama_hf_architectures[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", NULL};

/* Without --seq, the context of a model made for more: as far as the presets go. */
enum { DEFAULT_SEQ_MAX = 2048 };

/* ---- write -------------------------------------------------------------------------- */

/* The llama3 scaling's four keys (with rope_type), or only rope_type "default". */
static void put_rope(zeroc__jw_t *w, const zeroc_gpt_config_t *g, int theta) {
  zeroc__jw_object_begin(w);
  zeroc__jw_put_str(w, "rope_type", g->rope_factor > 0 ? "llama3" : "default");
  if (theta) zeroc__jw_put_num(w, "rope_theta", g->rope_theta);
  if (g->rope_factor > 0) {
    zeroc__jw_put_num(w, "factor", g->rope_factor);
    zeroc__jw_put_num(w, "low_freq_factor", g->rope_low);
    zeroc__jw_put_num(w, "high_freq_factor", g->rope_high);
    zeroc__jw_put_num(w, "original_max_position_embeddings", g->rope_original);
  }
  zeroc__jw_object_end(w);
}

zeroc_result_t zeroc__llama_hf_config_write(const zeroc_gpt_config_t *g, int positions,
                                            char **json) {
  int qwen = g->qkv_bias;
  zeroc__jw_t w;
  zeroc__jw_init(&w, 2);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "architectures");
  zeroc__jw_array_begin(&w);
  zeroc__jw_string(&w, zeroc__llama_hf_architectures[qwen]);
  zeroc__jw_array_end(&w);
  zeroc__jw_put_str(&w, "model_type", qwen ? "qwen2" : "llama");
  zeroc__jw_put_int(&w, "vocab_size", g->vocab);
  zeroc__jw_put_int(&w, "hidden_size", g->hidden);
  zeroc__jw_put_int(&w, "intermediate_size", g->ffn);
  zeroc__jw_put_int(&w, "num_hidden_layers", g->layers);
  zeroc__jw_put_int(&w, "num_attention_heads", g->heads);
  zeroc__jw_put_int(&w, "num_key_value_heads", g->kv_heads);
  zeroc__jw_put_int(&w, "head_dim", g->hidden / g->heads);
  zeroc__jw_put_int(&w, "max_position_embeddings", positions);
  zeroc__jw_put_num(&w, "rms_norm_eps", g->norm_eps);
  zeroc__jw_put_str(&w, "hidden_act", "silu");
  /* transformers 5 reads rope_parameters; earlier versions rope_theta and rope_scaling */
  zeroc__jw_key(&w, "rope_parameters");
  put_rope(&w, g, 1);
  zeroc__jw_put_num(&w, "rope_theta", g->rope_theta);
  zeroc__jw_key(&w, "rope_scaling");
  if (g->rope_factor > 0)
    put_rope(&w, g, 0);
  else
    zeroc__jw_null(&w);
  zeroc__jw_put_bool(&w, "tie_word_embeddings", !g->untied);
  if (qwen) {
    zeroc__jw_put_bool(&w, "use_sliding_window", 0);
    zeroc__jw_put_int(&w, "max_window_layers", g->layers);
  } else {
    zeroc__jw_put_bool(&w, "attention_bias", 0);
    zeroc__jw_put_bool(&w, "mlp_bias", 0);
  }
  zeroc__jw_put_num(&w, "attention_dropout", 0.0);
  zeroc__jw_put_num(&w, "initializer_range", 0.02);
  return zeroc__hf_config_end(&w, json);
}

/* ---- read --------------------------------------------------------------------------- */

/* What a config.json says, in zeroc_gpt_config_t's terms. */
typedef struct {
  int qwen, L, C, NH, NKV, F, V, P, untied;
  double eps, theta, factor, low, high, orig;
} hf_shape_t;

static int is_null(const zeroc__json_t *v) { return !v || v->type == ZEROC_JSON_NULL; }

/* An integer key in lo..hi; absent or null: `dflt`, or refused when dflt < 0. */
static zeroc_result_t get_int(const zeroc__json_t *o, const char *key, int64_t lo, int64_t hi,
                              int dflt, int *out) {
  const zeroc__json_t *v = zeroc__json_get(o, key);
  if (is_null(v) && dflt >= 0) return *out = dflt, ZEROC_OK;
  if (is_null(v)) return BAD("config.json has no \"%s\"; a Llama or Qwen2 config has one", key);
  if (v->type != ZEROC_JSON_NUMBER || !v->u.num.is_int || v->u.num.i < lo || v->u.num.i > hi)
    return BAD("config.json \"%s\": accepted an integer %lld..%lld", key, (long long)lo,
               (long long)hi);
  *out = (int)v->u.num.i;
  return ZEROC_OK;
}

/* A number key with lo < value < hi; absent or null: `dflt`, or refused when NaN. */
static zeroc_result_t get_num(const zeroc__json_t *o, const char *key, double lo, double hi,
                              double dflt, double *out) {
  const zeroc__json_t *v = zeroc__json_get(o, key);
  if (is_null(v) && !isnan(dflt)) return *out = dflt, ZEROC_OK;
  if (is_null(v)) return BAD("config.json has no \"%s\"; its rope scaling needs one", key);
  if (v->type != ZEROC_JSON_NUMBER || !(v->u.num.value > lo && v->u.num.value < hi))
    return BAD("config.json \"%s\": accepted a number above %g and below %g", key, lo, hi);
  *out = v->u.num.value;
  return ZEROC_OK;
}

/* A boolean key zeroc honours only when false (absent: false); `why` says what true asks. */
static zeroc_result_t want_false(const zeroc__json_t *o, const char *key, const char *why) {
  const zeroc__json_t *v = zeroc__json_get(o, key);
  if (is_null(v) || (v->type == ZEROC_JSON_BOOL && !v->u.boolean)) return ZEROC_OK;
  return BAD("config.json \"%s\" %s: %s; accepted false", key,
             v->type == ZEROC_JSON_BOOL ? "true" : "(not a boolean)", why);
}

static const char *str_of(const zeroc__json_t *v) {
  return v && v->type == ZEROC_JSON_STRING ? v->u.str.s : NULL;
}

/* The class: "architectures" names LlamaForCausalLM or Qwen2ForCausalLM, or
 * model_type is llama or qwen2. */
static zeroc_result_t check_class(const zeroc__json_t *root, int *qwen) {
  const zeroc__json_t *a = zeroc__json_get(root, "architectures");
  for (size_t i = 0; a && a->type == ZEROC_JSON_ARRAY && i < a->u.arr.n; i++)
    for (int k = 0; k < 2; k++)
      if (str_of(&a->u.arr.items[i]) &&
          !strcmp(a->u.arr.items[i].u.str.s, zeroc__llama_hf_architectures[k]))
        return *qwen = k, ZEROC_OK;
  const char *t = str_of(zeroc__json_get(root, "model_type"));
  if (t && (!strcmp(t, "llama") || !strcmp(t, "qwen2"))) return *qwen = t[0] == 'q', ZEROC_OK;
  return BAD("config.json is not a LlamaForCausalLM's nor a Qwen2ForCausalLM's (architectures, "
             "model_type \"%s\")",
             t ? t : "?");
}

/* RoPE: theta, and llama3 scaling or none, from rope_parameters (transformers 5) or
 * from rope_theta and rope_scaling (earlier files). */
static zeroc_result_t read_rope(const zeroc__json_t *root, hf_shape_t *s) {
  const zeroc__json_t *rp = zeroc__json_get(root, "rope_parameters");
  const zeroc__json_t *sc =
      rp && rp->type == ZEROC_JSON_OBJECT ? rp : zeroc__json_get(root, "rope_scaling");
  ZEROC_CHECK(get_num(root, "rope_theta", 1, 1e12, 10000.0, &s->theta));
  if (sc == rp) ZEROC_CHECK(get_num(rp, "rope_theta", 1, 1e12, s->theta, &s->theta));
  s->factor = s->low = s->high = s->orig = 0;
  if (is_null(sc)) return ZEROC_OK;
  if (sc->type != ZEROC_JSON_OBJECT)
    return BAD("config.json \"rope_scaling\": accepted an object or null");
  const char *type = str_of(zeroc__json_get(sc, "rope_type"));
  if (!type) type = str_of(zeroc__json_get(sc, "type"));
  if (!type || !strcmp(type, "default")) return ZEROC_OK;
  if (strcmp(type, "llama3"))
    return BAD("config.json rope_type \"%s\": accepted default or llama3 (zeroc's RoPE)", type);
  ZEROC_CHECK(get_num(sc, "factor", 0, 1e6, NAN, &s->factor));
  ZEROC_CHECK(get_num(sc, "low_freq_factor", 0, 1e6, NAN, &s->low));
  ZEROC_CHECK(get_num(sc, "high_freq_factor", 0, 1e6, NAN, &s->high));
  ZEROC_CHECK(get_num(sc, "original_max_position_embeddings", 0, 1e9, NAN, &s->orig));
  if (s->factor < 1 || s->high <= s->low)
    return BAD("config.json llama3 rope scaling factor %g, low_freq_factor %g, high_freq_factor "
               "%g: accepted factor >= 1 and low < high",
               s->factor, s->low, s->high);
  return ZEROC_OK;
}

/* What zeroc's Llama computes, and nothing else. */
static zeroc_result_t check_math(const zeroc__json_t *root, const hf_shape_t *s) {
  const char *act = str_of(zeroc__json_get(root, "hidden_act"));
  if (zeroc__json_get(root, "hidden_act") && (!act || strcmp(act, "silu")))
    return BAD("config.json \"hidden_act\" \"%s\": accepted silu (zeroc's SwiGLU)",
               act ? act : "?");
  int hd;
  ZEROC_CHECK(get_int(root, "head_dim", 1, 1 << 16, s->C / s->NH, &hd));
  if (hd * s->NH != s->C)
    return BAD("config.json \"head_dim\" %d with hidden_size %d and %d heads: accepted "
               "hidden_size / num_attention_heads = %d (zeroc's attention)",
               hd, s->C, s->NH, s->C / s->NH);
  ZEROC_CHECK(want_false(root, "mlp_bias", "biases in the MLP, which zeroc's Llama has none of"));
  if (s->qwen) {
    ZEROC_CHECK(want_false(root, "use_sliding_window",
                           "sliding-window attention in some layers, zeroc attends in full"));
    const zeroc__json_t *lt = zeroc__json_get(root, "layer_types");
    for (size_t i = 0; lt && lt->type == ZEROC_JSON_ARRAY && i < lt->u.arr.n; i++) {
      const char *t = str_of(&lt->u.arr.items[i]);
      if (!t || strcmp(t, "full_attention"))
        return BAD("config.json \"layer_types\"[%zu] \"%s\": accepted full_attention", i,
                   t ? t : "?");
    }
    return ZEROC_OK;
  }
  return want_false(root, "attention_bias",
                    "biases in q, k, v and o_proj; zeroc's Llama has none (Qwen2's q/k/v biases "
                    "are Qwen2ForCausalLM)");
}

static zeroc_result_t read_shape(const zeroc__json_t *root, hf_shape_t *s) {
  int tie = 0;
  ZEROC_CHECK(check_class(root, &s->qwen));
  ZEROC_CHECK(get_int(root, "num_hidden_layers", 1, 1 << 16, -1, &s->L));
  ZEROC_CHECK(get_int(root, "hidden_size", 1, 1 << 20, -1, &s->C));
  ZEROC_CHECK(get_int(root, "num_attention_heads", 1, 1 << 16, -1, &s->NH));
  ZEROC_CHECK(get_int(root, "num_key_value_heads", 1, 1 << 16, s->NH, &s->NKV));
  ZEROC_CHECK(get_int(root, "intermediate_size", 1, 1 << 24, -1, &s->F));
  ZEROC_CHECK(get_int(root, "vocab_size", 2, 1 << 30, -1, &s->V));
  ZEROC_CHECK(get_int(root, "max_position_embeddings", 1, 1 << 24, -1, &s->P));
  ZEROC_CHECK(get_num(root, "rms_norm_eps", 0, 1, 1e-6, &s->eps));
  const zeroc__json_t *t = zeroc__json_get(root, "tie_word_embeddings");
  if (!is_null(t) && t->type != ZEROC_JSON_BOOL)
    return BAD("config.json \"tie_word_embeddings\": accepted true or false");
  tie = !is_null(t) && t->u.boolean;
  s->untied = !tie;
  if (s->C % s->NH || s->NH % s->NKV)
    return BAD("config.json hidden_size %d, num_attention_heads %d, num_key_value_heads %d: "
               "accepted heads dividing hidden_size and kv heads dividing heads",
               s->C, s->NH, s->NKV);
  ZEROC_CHECK(read_rope(root, s));
  return check_math(root, s);
}

/* A setting already given must agree with the file. */
static zeroc_result_t agree(int *field, int file, const char *name, const char *key) {
  if (*field != ZEROC_UNSET && *field != file)
    return BAD("%s %d contradicts config.json \"%s\" %d", name, *field, key, file);
  *field = file;
  return ZEROC_OK;
}

static zeroc_result_t agree_real(double *field, double file, const char *name, const char *key) {
  if (*field != (double)ZEROC_UNSET && *field != file)
    return BAD("%s %g contradicts config.json \"%s\" %g", name, *field, key, file);
  *field = file;
  return ZEROC_OK;
}

/* A preset named beside the file must be the file's shape. */
static zeroc_result_t check_preset(const zeroc_train_config_t *c, const hf_shape_t *s,
                                   const zeroc__train_names_t *n) {
  zeroc_gpt_config_t p;
  if (!c->model || !strcmp(c->model, "llama-custom") || zeroc_gpt_preset(c->model, &p))
    return ZEROC_OK;
  if (p.layers == s->L && p.hidden == s->C && p.heads == s->NH && p.kv_heads == s->NKV &&
      p.ffn == s->F && p.vocab == s->V && p.qkv_bias == s->qwen && p.untied == s->untied)
    return ZEROC_OK;
  return BAD("%s %s (%d layers, hidden %d, %d heads, %d kv heads, ffn %d, vocab %d, %s, %s) "
             "contradicts config.json (%d, %d, %d, %d, %d, %d, %s, %s)",
             n->model, c->model, p.layers, p.hidden, p.heads, p.kv_heads, p.ffn, p.vocab,
             p.qkv_bias ? "Qwen2" : "Llama", p.untied ? "untied" : "tied", s->L, s->C, s->NH,
             s->NKV, s->F, s->V, s->qwen ? "Qwen2" : "Llama", s->untied ? "untied" : "tied");
}

static zeroc_result_t apply(zeroc_train_config_t *c, const hf_shape_t *s,
                            const zeroc__train_names_t *n) {
  ZEROC_CHECK(check_preset(c, s, n));
  ZEROC_CHECK(agree(&c->layers, s->L, n->layers, "num_hidden_layers"));
  ZEROC_CHECK(agree(&c->hidden, s->C, n->hidden, "hidden_size"));
  ZEROC_CHECK(agree(&c->heads, s->NH, n->heads, "num_attention_heads"));
  ZEROC_CHECK(agree(&c->kv_heads, s->NKV, n->kv_heads, "num_key_value_heads"));
  ZEROC_CHECK(agree(&c->ffn, s->F, n->ffn, "intermediate_size"));
  ZEROC_CHECK(agree(&c->vocab, s->V, n->vocab, "vocab_size"));
  ZEROC_CHECK(agree(&c->qkv_bias, s->qwen, "qkv_bias", "architectures (Qwen2: 1)"));
  ZEROC_CHECK(agree(&c->untied, s->untied, "untied", "tie_word_embeddings (false: 1)"));
  ZEROC_CHECK(agree(&c->max_positions, s->P, "max_positions", "max_position_embeddings"));
  ZEROC_CHECK(agree_real(&c->norm_eps, s->eps, "norm_eps", "rms_norm_eps"));
  ZEROC_CHECK(agree_real(&c->rope_theta, s->theta, "rope_theta", "rope_theta"));
  ZEROC_CHECK(agree_real(&c->rope_factor, s->factor, "rope_factor", "factor"));
  ZEROC_CHECK(agree_real(&c->rope_low, s->low, "rope_low", "low_freq_factor"));
  ZEROC_CHECK(agree_real(&c->rope_high, s->high, "rope_high", "high_freq_factor"));
  ZEROC_CHECK(
      agree_real(&c->rope_original, s->orig, "rope_original", "original_max_position_embeddings"));
  if (c->seq != ZEROC_UNSET && c->seq > s->P)
    return BAD("%s %d: accepted up to config.json \"max_position_embeddings\" %d", n->seq, c->seq,
               s->P);
  if (c->seq == ZEROC_UNSET) c->seq = s->P < DEFAULT_SEQ_MAX ? s->P : DEFAULT_SEQ_MAX;
  c->model = "llama-custom";
  return ZEROC_OK;
}

zeroc_result_t zeroc__llama_hf_config_read(const char *json, size_t len, zeroc_train_config_t *c,
                                           int names) {
  zeroc__json_doc_t *doc = NULL;
  hf_shape_t s;
  ZEROC_CHECK(zeroc__json_parse(json, len, "config.json", &doc));
  const zeroc__json_t *root = zeroc__json_root(doc);
  zeroc_result_t r = root->type == ZEROC_JSON_OBJECT ? read_shape(root, &s)
                                                     : BAD("config.json: accepted a JSON object");
  if (!r) r = apply(c, &s, zeroc__lm_names(names));
  zeroc__json_free(doc);
  return r;
}
