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

/* Where parameter p of global unit gu goes (the parameters of
 * zeroc_gpt_unit_params: embedding 0 wte (V,C) then wpe (T,C); block units
 * 1..L the twelve of a block; head L+1 ln_f weight, bias), in zeroc's (out, in)
 * layout; *rows, *cols its shape (cols 0 for a vector). NULL out of range. */
float *zeroc__sampler_param(zeroc_sampler_t *s, int gu, int p, uint64_t *rows, uint64_t *cols);

/* The Hugging Face name of a block parameter p (0..11), without "h.{i}.". */
const char *zeroc__sampler_block_name(int p);

#endif
