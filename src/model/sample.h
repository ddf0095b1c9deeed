/*
 * model/sample.h - the sampler's insides shared with the layers that fill its
 * weights (persist: from a file; train: from a trainer). Never installed.
 */
#ifndef ZEROC_MODEL_SAMPLE_H
#define ZEROC_MODEL_SAMPLE_H

#include <stdint.h>

#include "zeroc/sample.h"

/* A sampler of shape `cfg` with its weights unset (zeros). Checks the shape. */
zeroc_result_t zeroc__sampler_create(const zeroc_gpt_config_t *cfg, zeroc_sampler_t **out);

/* The parameters of global unit gu (those of zeroc_gpt_unit_params that hold values):
 * GPT-2's embedding 2 (wte, wpe), blocks 12, head 2 (ln_f weight, bias); Llama's
 * embedding 1 (embed_tokens), blocks 6 or 7 (model/gpt_impl.h's order), head 1 (norm), 2
 * with an untied lm_head. 0 out of range. */
int zeroc__sampler_unit_params(const zeroc_sampler_t *s, int gu);

/* Where parameter p of global unit gu goes (embedding 0, blocks 1..L, head L+1), in
 * zeroc's (out, in) layout; *rows, *cols its shape (cols 0 for a vector); wte and lm_head
 * have the vocabulary's rows, without padding. NULL out of range. */
float *zeroc__sampler_param(zeroc_sampler_t *s, int gu, int p, uint64_t *rows, uint64_t *cols);

/* A Llama-family sampler of shape cfg with the weights of a transformers safetensors file
 * (sample_llama_io.c): errors as zeroc_sampler_load's. */
zeroc_result_t zeroc__sampler_load_llama(const char *path, const zeroc_gpt_config_t *cfg,
                                         zeroc_sampler_t **out);

/* A sampler of model m's current weights (the GPT g, sharded by m): gathered to rank 0 as
 * zeroc_gpt_export does (zeroc__gpt_collect). Collective; rank 0 gets the sampler, every
 * other rank *out = NULL; the result is agreed. (gpt_run.c) */
zeroc_result_t zeroc__gpt_sampler(zeroc_model_t *m, const zeroc_gpt_t *g, zeroc_sampler_t **out);

/* The Hugging Face name of a block parameter p (0..11), without "h.{i}.". */
const char *zeroc__sampler_block_name(int p);

#endif
