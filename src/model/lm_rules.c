/*
 * model/lm_rules.c - the rules a language model's training config must meet
 * that the shape, the tensor- and pipeline-parallel sizes and the outputs
 * impose, each with its one message. The model's check runs them after the
 * trainer fills in its defaults;
 * `zeroc train` runs the same ones before MPI starts, so a bad flag fails
 * once, on rank 0, with the flag's name (the caller passes the names).
 * They need no MPI and no context: only the config, the shape and pp, tp.
 */
#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/rope.h"
#include "model/lm_rules.h"
#include "shard/rules.h"

/* The config's fields: the messages of zeroc_train_config_resolve for a program. */
static const zeroc__train_names_t FIELD_NAMES = {
    .tp = "tp",
    .pp = "pp",
    .cp = "cp",
    .cp_ulysses = "cp_mode ulysses",
    .heads = "heads",
    .hidden = "hidden",
    .batch = "batch",
    .seq = "seq",
    .layers = "layers",
    .vocab = "vocab",
    .model = "model",
    .kv_heads = "kv_heads",
    .ffn = "ffn",
    .zero = "zero",
    .vpp = "vpp",
    .microbatches = "grad_accum",
    .interleaved = "pp_schedule INTERLEAVED",
    .sequence_parallel = "sequence_parallel",
    .offload_params = "offload_params",
    .nvme_dir = "nvme_dir",
    .save_every = "save_every",
    .save = "save",
    .resume = "resume",
    .init = "init",
    .val_data = "val_data",
    .val_every = "val_every",
    .val_tokens = "val_tokens",
};

/* The flags of `zeroc train` (docs/cli.md): the messages a user of the command
 * reads before MPI starts. */
static const zeroc__train_names_t FLAG_NAMES = {
    .tp = "--tp",
    .pp = "--pp",
    .cp = "--cp",
    .cp_ulysses = "--cp-mode ulysses",
    .heads = "--heads",
    .hidden = "--hidden",
    .batch = "--batch",
    .seq = "--seq",
    .layers = "--layers",
    .vocab = "--vocab",
    .model = "--model",
    .kv_heads = "--kv-heads",
    .ffn = "--ffn",
    .zero = "--zero",
    .vpp = "--vpp",
    .microbatches = "--microbatches",
    .interleaved = "--pp-schedule interleaved",
    .sequence_parallel = "--sequence-parallel",
    .offload_params = "--offload-params",
    .nvme_dir = "--nvme-dir",
    .save_every = "--save-every",
    .save = "--save DIR",
    .resume = "--resume",
    .init = "--init",
    .val_data = "--val-data",
    .val_every = "--val-every",
    .val_tokens = "--val-tokens",
};

const zeroc__train_names_t *zeroc__lm_names(int names) {
  return names == ZEROC_NAMES_FLAGS ? &FLAG_NAMES : &FIELD_NAMES;
}

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

zeroc_result_t zeroc__lm_check_sizes(const zeroc_gpt_config_t *g, const zeroc__train_names_t *n) {
  if (g->layers < 1 || g->hidden < 1 || g->heads < 1 || g->vocab < 2 || g->seq < 1 || g->batch < 1)
    return BAD("model shape %s %d, %s %d, %s %d, %s %d, %s %d, %s %d: each must be >= 1 "
               "(%s >= 2)",
               n->layers, g->layers, n->hidden, g->hidden, n->heads, g->heads, n->vocab, g->vocab,
               n->seq, g->seq, n->batch, g->batch, n->vocab);
  if (g->vocab > ZEROC_GPT_VOCAB_MAX)
    return BAD("%s %d: at most %d (token ids are 32-bit; above 65536 data shards store uint32)",
               n->vocab, g->vocab, ZEROC_GPT_VOCAB_MAX);
  return zeroc__lm_check_heads(g, 0, n);
}

const char *zeroc__lm_llama_field_set(const zeroc_train_config_t *c) {
  const int iv[] = {c->kv_heads, c->ffn, c->qkv_bias, c->untied, c->max_positions};
  const char *const in[] = {"kv_heads", "ffn", "qkv_bias", "untied", "max_positions"};
  const double dv[] = {c->norm_eps, c->rope_theta, c->rope_factor,
                       c->rope_low, c->rope_high,  c->rope_original};
  const char *const dn[] = {"norm_eps", "rope_theta", "rope_factor",
                            "rope_low", "rope_high",  "rope_original"};
  for (int i = 0; i < 5; i++)
    if (iv[i] != ZEROC_UNSET) return in[i];
  for (int i = 0; i < 6; i++)
    if (dv[i] != (double)ZEROC_UNSET) return dn[i];
  return NULL;
}

/* a double in (lo, hi), finite */
static int within(double x, double lo, double hi) { return isfinite(x) && x > lo && x < hi; }

zeroc_result_t zeroc__lm_check_family(const zeroc_gpt_config_t *g, const zeroc__train_names_t *n) {
  if (g->family == ZEROC_GPT_FAMILY_GPT2) {
    if (g->kv_heads || g->ffn || g->qkv_bias || g->untied || g->norm_eps != 0 ||
        g->rope_theta != 0 || g->rope_factor != 0 || g->rope_low != 0 || g->rope_high != 0 ||
        g->rope_original != 0)
      return BAD("a GPT-2 shape takes none of the Llama family's settings (kv_heads %d, ffn %d, "
                 "qkv_bias %d, untied %d, norm_eps %g, rope_theta %g, rope scaling %g): accepted "
                 "all 0, or family llama",
                 g->kv_heads, g->ffn, g->qkv_bias, g->untied, g->norm_eps, g->rope_theta,
                 g->rope_factor);
    return ZEROC_OK;
  }
  if (g->family != ZEROC_GPT_FAMILY_LLAMA)
    return BAD("decoder family %d: accepted 0 (GPT-2) or 1 (Llama)", g->family);
  if (g->kv_heads < 1 || g->heads % g->kv_heads)
    return BAD("%s %d must divide %s %d (grouped-query attention: each kv head serves a whole "
               "group of query heads)",
               n->kv_heads, g->kv_heads, n->heads, g->heads);
  int hs = g->hidden / g->heads;
  if (hs % 2 || hs > ZEROC_ROPE_HS_MAX)
    return BAD("head size %s / %s = %d: rotary embeddings need it even and at most %d", n->hidden,
               n->heads, hs, ZEROC_ROPE_HS_MAX);
  if (g->ffn < 1) return BAD("%s %d: accepted >= 1 (the MLP's width)", n->ffn, g->ffn);
  if ((g->qkv_bias != 0 && g->qkv_bias != 1) || (g->untied != 0 && g->untied != 1))
    return BAD("qkv_bias %d, untied %d: accepted 0 or 1", g->qkv_bias, g->untied);
  if (!within(g->norm_eps, 0, 1))
    return BAD("norm_eps (rms_norm_eps) %g: accepted 0 < eps < 1", g->norm_eps);
  if (!within(g->rope_theta, 1, 1e12))
    return BAD("rope_theta %g: accepted 1 < theta < 1e12", g->rope_theta);
  if (g->rope_factor == 0) {
    if (g->rope_low != 0 || g->rope_high != 0 || g->rope_original != 0)
      return BAD("rope scaling low %g, high %g, original %g without a factor: accepted all 0, or "
                 "factor >= 1",
                 g->rope_low, g->rope_high, g->rope_original);
    return ZEROC_OK;
  }
  if (!(isfinite(g->rope_factor) && g->rope_factor >= 1 && g->rope_factor < 1e6) ||
      !within(g->rope_low, 0, 1e6) || !within(g->rope_high, g->rope_low, 1e6) ||
      !(isfinite(g->rope_original) && g->rope_original >= 1 && g->rope_original < 1e9))
    return BAD("llama3 rope scaling factor %g, low_freq_factor %g, high_freq_factor %g, "
               "original_max_position_embeddings %g: accepted factor >= 1, 0 < low < high, "
               "original >= 1",
               g->rope_factor, g->rope_low, g->rope_high, g->rope_original);
  return ZEROC_OK;
}

zeroc_result_t zeroc__lm_check_heads(const zeroc_gpt_config_t *g, int tp,
                                     const zeroc__train_names_t *n) {
  if (g->heads < 1 || g->hidden % g->heads)
    return BAD("%s %d must divide %s %d", n->heads, g->heads, n->hidden, g->hidden);
  if (tp > 0 && g->heads % tp)
    return BAD("%s %d must divide the %d attention heads (%s)", n->tp, tp, g->heads, n->heads);
  /* each tp rank holds whole kv heads (Megatron would replicate them instead; zeroc
   * refuses, so every kv head has one owner and one gradient) */
  if (tp > 0 && g->family == ZEROC_GPT_FAMILY_LLAMA && g->kv_heads > 0 && g->kv_heads % tp)
    return BAD("%s %d must divide the %d key/value heads (%s): each tensor-parallel rank holds "
               "whole kv heads",
               n->tp, tp, g->kv_heads, n->kv_heads);
  return ZEROC_OK;
}

zeroc_result_t zeroc__lm_check_shape(const zeroc_train_config_t *c, const zeroc_gpt_config_t *g,
                                     int tp, const zeroc__train_names_t *n) {
  ZEROC_CHECK(zeroc__lm_check_heads(g, tp, n));
  if (c->sequence_parallel && tp < 2)
    return BAD("%s needs %s > 1 (it splits the tensor-parallel ranks' LayerNorm regions)",
               n->sequence_parallel, n->tp);
  if (c->sequence_parallel && ((int64_t)g->batch * g->seq) % tp)
    return BAD("%s with %s %d needs %s x %s (%d x %d) to be a multiple of %d", n->sequence_parallel,
               n->tp, tp, n->batch, n->seq, g->batch, g->seq, tp);
  return ZEROC_OK;
}

zeroc_result_t zeroc__lm_check_cp(zeroc_cp_mode_t mode, const zeroc_gpt_config_t *g, int tp, int cp,
                                  const zeroc__train_names_t *n) {
  if (cp == 1) return ZEROC_OK;
  if (g->seq % (2 * cp))
    return BAD("%s %d is not divisible by 2 x %s = %d: context parallelism deals each sequence "
               "out in 2 x cp zigzag chunks",
               n->seq, g->seq, n->cp, 2 * cp);
  if (mode == ZEROC_CP_MODE_ULYSSES && (g->heads / tp) % cp)
    return BAD("%s splits the %d heads of each tp rank (%s %d / %s %d) over %s %d ranks: cp must "
               "divide them (or use ring attention)",
               n->cp_ulysses, g->heads / tp, n->heads, g->heads, n->tp, tp, n->cp, cp);
  return ZEROC_OK;
}

zeroc_result_t zeroc__lm_check_pipeline(const zeroc_train_config_t *c, const zeroc_gpt_config_t *g,
                                        int pp, const zeroc__train_names_t *n) {
  int il = c->pp_schedule == ZEROC_PIPELINE_INTERLEAVED;
  if (pp == 1) return ZEROC_OK;
  zeroc__rule_names_t rn = {n->zero, n->pp, n->offload_params};
  ZEROC_CHECK(zeroc__shard_check_rules(c->zero, pp, ZEROC_OFFLOAD_NONE, &rn));
  if (il && c->vpp < 2)
    return BAD("%s needs %s >= 2 (model chunks per pipeline rank)", n->interleaved, n->vpp);
  if (!il && c->vpp > 1) return BAD("%s %d needs %s", n->vpp, c->vpp, n->interleaved);
  if (il && c->grad_accum % pp)
    return BAD("%s %d with %s: accepted a multiple of %s %d", n->microbatches, c->grad_accum,
               n->interleaved, n->pp, pp);
  int nu = zeroc_gpt_num_units(g);
  if (nu < pp * c->vpp)
    return BAD("%s %d x %s %d = %d pipeline stages need as many units; the model has %d "
               "(embedding, %d layers, head): use more %s",
               n->pp, pp, n->vpp, c->vpp, pp * c->vpp, nu, g->layers, n->layers);
  return ZEROC_OK;
}

zeroc_result_t zeroc__lm_check_outputs(const zeroc_train_config_t *c,
                                       const zeroc__train_names_t *n) {
  zeroc__rule_names_t rn = {n->zero, n->pp, n->offload_params};
  ZEROC_CHECK(zeroc__shard_check_rules(c->zero, 1, (int)c->offload_params, &rn));
  if ((c->offload_optimizer == ZEROC_OFFLOAD_NVME || c->offload_params == ZEROC_OFFLOAD_NVME) &&
      !c->nvme_dir)
    return BAD("%s is required with nvme offload", n->nvme_dir);
  if (c->save_every && !c->save) return BAD("%s needs %s", n->save_every, n->save);
  if (c->resume && c->init) return BAD("%s and %s exclude each other", n->resume, n->init);
  if (c->val_every < 0) return BAD("%s %d: accepted >= 0 (0: off)", n->val_every, c->val_every);
  if (c->val_tokens != ZEROC_UNSET && (c->val_tokens < 1 || c->val_tokens > ZEROC_VAL_TOKENS_MAX))
    return BAD("%s %lld: accepted 1..%lld", n->val_tokens, (long long)c->val_tokens,
               ZEROC_VAL_TOKENS_MAX);
  if ((c->val_every || c->val_tokens != ZEROC_UNSET) && !c->val_data)
    return BAD("%s needs %s (the held-out data to evaluate on)",
               c->val_every ? n->val_every : n->val_tokens, n->val_data);
  return ZEROC_OK;
}
