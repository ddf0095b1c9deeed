/*
 * model/gpt_hf.h - the GPT's transformers class (GPT2LMHeadModel) and its
 * config.json, both ways (gpt_hf.c), for the model interface (gpt_run.c).
 */
#ifndef ZEROC_MODEL_GPT_HF_H
#define ZEROC_MODEL_GPT_HF_H

#include <stddef.h>

#include "io/json.h"
#include "zeroc/gpt.h"
#include "zeroc/train.h"

extern const char *const zeroc__gpt_hf_architectures[];

/* The config.json of shape `g` with `positions` rows of wpe and dropout
 * `dropout`, as malloc'd text. */
/* The end every config.json writer shares: use_cache, the fp32 dtype (both spellings),
 * the closing brace and the text in *json (malloc'd, newline-terminated). */
zeroc_result_t zeroc__hf_config_end(zeroc__jw_t *w, char **json);
zeroc_result_t zeroc__gpt_hf_config_write(const zeroc_gpt_config_t *g, int positions,
                                          double dropout, char **json);

/* zeroc_arch_t's hf_config_read for the GPT. */
zeroc_result_t zeroc__gpt_hf_config_read(const char *json, size_t n, zeroc_train_config_t *c,
                                         int names);

#endif
