/*
 * zeroc/sample.h - text generation with the built-in decoder (GPT-2, and the
 * Llama family: RoPE, a grouped-query KV cache of the kv heads only):
 * inference with a KV cache on the whole (unsharded) model in host memory,
 * fp32, on the cpu kernels (OpenBLAS), whatever device trained it.
 *
 *   zeroc_sampler_t *s;
 *   zeroc_sampler_load("model.safetensors", &cfg, &s);      // or from a trainer
 *   zeroc_sampler_generate(s, prompt, n, 64, 1.0, 40, 7, out);
 *   zeroc_sampler_destroy(s);
 *
 * The context window is cfg->seq tokens. A prompt longer than that keeps its
 * last seq tokens; when generation fills the window it slides: each further
 * token is predicted from the last seq tokens (the cache is recomputed from
 * them, which costs a whole-window forward per token from then on).
 * Generation is deterministic for a seed: temperature 0 is greedy (the first
 * largest logit), otherwise softmax(logits / temperature) over the top_k
 * largest logits (0: all), drawn with xoshiro256** seeded by `seed`.
 */
#ifndef ZEROC_SAMPLE_H
#define ZEROC_SAMPLE_H

#include <stdint.h>

#include "zeroc/export.h"
#include "zeroc/gpt.h"
#include "zeroc/result.h"
#include "zeroc/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_sampler zeroc_sampler_t;

/*
 * A sampler of the model of shape `cfg` (layers, hidden, heads, vocab, seq)
 * with the weights of a safetensors file, read as zeroc_gpt_import reads them
 * (both name layouts, a tied lm_head, a longer wpe whose first seq rows are
 * used, F32/BF16/F16). Local (no MPI). Returns ZEROC_ERR_IO, ZEROC_ERR_CORRUPT,
 * ZEROC_ERR_INVALID_ARG (a bad shape, a missing tensor or another shape,
 * naming it), ZEROC_ERR_NOMEM. A Llama-family shape reads the file as
 * transformers' save_pretrained writes LlamaForCausalLM and Qwen2ForCausalLM
 * (model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...,
 * model.norm.weight, lm_head.weight when untied; F32/BF16/F16).
 */
ZEROC_API zeroc_result_t zeroc_sampler_load(const char *path, const zeroc_gpt_config_t *cfg,
                                            zeroc_sampler_t **out);

/*
 * A sampler of the trainer's current weights: the shards (and tp slices,
 * pipeline stages) are gathered to rank 0 as zeroc_trainer_export does.
 * Collective; rank 0 gets the sampler, every other rank *out = NULL.
 */
ZEROC_API zeroc_result_t zeroc_sampler_from_trainer(zeroc_trainer_t *tr, zeroc_sampler_t **out);

/*
 * A sampler of the weights of a checkpoint directory (DIR, its latest, or
 * DIR/step_<k>) that `zeroc train --save` wrote for a model of shape `cfg`:
 * the model is rebuilt on the context's mesh (the checkpoint's pipeline size,
 * and its `vpp` chunks per rank, 0: 1; any data-parallel or tensor-parallel
 * size), loaded and gathered to rank 0. Collective; rank 0 gets the sampler,
 * every other rank *out = NULL. Returns the errors of zeroc_ckpt_load, and
 * ZEROC_ERR_INVALID_ARG naming the field when the checkpoint's model has
 * another shape.
 */
ZEROC_API zeroc_result_t zeroc_sampler_from_checkpoint(zeroc_ctx_t *ctx, const char *dir,
                                                       const zeroc_gpt_config_t *cfg, int vpp,
                                                       zeroc_sampler_t **out);

/* Frees the sampler. destroy(NULL) does nothing. */
ZEROC_API void zeroc_sampler_destroy(zeroc_sampler_t *s);

/* The model's shape. */
ZEROC_API const zeroc_gpt_config_t *zeroc_sampler_config(const zeroc_sampler_t *s);

/* 1 (the default): keep a KV cache; 0: every token recomputes the whole
 * window (the same tokens; for measuring what the cache saves). */
ZEROC_API void zeroc_sampler_set_cache(zeroc_sampler_t *s, int on);

/* Draws (and greedy picks) only ids below n: a tokenizer's vocabulary when
 * the model's is padded beyond it (0 or n >= vocab: every id). */
ZEROC_API void zeroc_sampler_set_vocab(zeroc_sampler_t *s, int n);

/*
 * The logits (n, vocab) of every position of ids[0..n), 1 <= n <= seq, fed
 * one token at a time through the KV cache (what generation computes); with
 * the cache off (zeroc_sampler_set_cache), position i's from a forward of
 * ids[0..i] at once (what generation without the cache computes).
 * Returns ZEROC_ERR_INVALID_ARG for n or an id out of range.
 */
ZEROC_API zeroc_result_t zeroc_sampler_logits(zeroc_sampler_t *s, const int32_t *ids, int n,
                                              float *logits);

/*
 * Writes `tokens` generated ids after prompt[0..n) (n >= 1) to out.
 *   temperature: 0 greedy, > 0 the softmax temperature; top_k: 0 all, else
 *   the k largest logits; seed: the draws' generator.
 * Returns ZEROC_ERR_INVALID_ARG (n < 1, tokens < 0, an id outside the
 * vocabulary, temperature < 0 or not finite, top_k < 0), ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_sampler_generate(zeroc_sampler_t *s, const int32_t *prompt, int n,
                                                int tokens, double temperature, int top_k,
                                                uint64_t seed, int32_t *out);

/* Called after each generated token: out[0..count) are the tokens so far.
 * A non-zero return stops the generation there (an interrupted sample). */
typedef int (*zeroc_sample_token_fn)(void *user, const int32_t *out, int count);

/*
 * zeroc_sampler_generate, calling on_token (may be NULL) after each token, so
 * a caller can print tokens as they come and stop early; *generated (may be
 * NULL) gets the number of tokens written to out (tokens, unless on_token
 * stopped it). The tokens are those zeroc_sampler_generate writes.
 */
ZEROC_API zeroc_result_t zeroc_sampler_generate_each(zeroc_sampler_t *s, const int32_t *prompt,
                                                     int n, int tokens, double temperature,
                                                     int top_k, uint64_t seed, int32_t *out,
                                                     zeroc_sample_token_fn on_token, void *user,
                                                     int *generated);

/* What a trainer's sample generates. Initialise with ZEROC_SAMPLE_CONFIG_INIT. */
typedef struct zeroc_sample_config {
  size_t size;        /* sizeof(zeroc_sample_config_t), set by the initializer */
  uint32_t magic;     /* ZEROC_CONFIG_MAGIC */
  int tokens;         /* tokens to generate [64] */
  double temperature; /* 0 greedy [1] */
  int top_k;          /* 0 all [0] */
  uint64_t seed;      /* the draws [1] */
  int vocab;          /* draw only ids below this (a tokenizer's vocabulary); 0 all [0] */
} zeroc_sample_config_t;

#define ZEROC_SAMPLE_CONFIG_INIT                                                                   \
  { sizeof(zeroc_sample_config_t), ZEROC_CONFIG_MAGIC, 64, 1.0, 0, 1, 0 }

/*
 * zeroc_sampler_from_trainer, then generate `cfg->tokens` tokens after
 * prompt[0..n), then destroy: on rank 0 `out` receives the tokens (other
 * ranks' `out` is untouched and may be NULL). Nothing of the training state
 * changes (the losses of the following steps are bitwise those of a run
 * without it). Collective; the result is agreed. Returns
 * ZEROC_ERR_INVALID_ARG for an uninitialised config and generate's errors.
 */
ZEROC_API zeroc_result_t zeroc_trainer_sample(zeroc_trainer_t *tr, const int32_t *prompt, int n,
                                              const zeroc_sample_config_t *cfg, int32_t *out);

/*
 * The fixed prompt a training run samples from: `eot` alone when >= 0 (a
 * tokenizer's end-of-text token, as GPT-2 starts a document), else the first
 * min(max, seq / 2) tokens of the training data (its sequence 0). Local: the
 * same on every rank. ids holds max entries; *n the count written.
 */
ZEROC_API zeroc_result_t zeroc_trainer_sample_prompt(zeroc_trainer_t *tr, int32_t eot, int max,
                                                     int32_t *ids, int *n);

#ifdef __cplusplus
}
#endif
#endif
