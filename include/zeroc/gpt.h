/*
 * zeroc/gpt.h - the built-in GPT-2: its shape and the named presets.
 *
 * GPT-2 exactly: learned token and position embeddings, pre-LayerNorm blocks,
 * causal multi-head attention, MLP of width 4C with tanh GELU, biases on every
 * linear and LayerNorm, final LayerNorm, LM head tied to the token embedding.
 */
#ifndef ZEROC_GPT_H
#define ZEROC_GPT_H

#include <stdint.h>

#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_gpt_config {
  int layers; /* L */
  int hidden; /* C */
  int heads;  /* NH, divides C */
  int vocab;  /* V */
  int seq;    /* T, the context length (max sequence) */
  int batch;  /* default micro-batch per data-parallel rank */
} zeroc_gpt_config_t;

/*
 * Fills `out` with a named preset: "tiny" (trains in about a minute on 2 CPU
 * cores), "small", "gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1558m".
 * Returns ZEROC_ERR_INVALID_ARG naming the accepted names.
 */
zeroc_result_t zeroc_gpt_preset(const char *name, zeroc_gpt_config_t *out);

/* The preset names, NULL-terminated. */
const char *const *zeroc_gpt_preset_names(void);

/* Checks a shape: every field >= 1, heads divides hidden. */
zeroc_result_t zeroc_gpt_config_check(const zeroc_gpt_config_t *c);

/* Parameters of the model (tied head counted once, vocabulary unpadded):
 * V C + T C + L (12 C^2 + 13 C) + 2 C. */
uint64_t zeroc_gpt_num_params(const zeroc_gpt_config_t *c);

#ifdef __cplusplus
}
#endif
#endif
