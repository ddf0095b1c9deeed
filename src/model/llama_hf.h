/*
 * model/llama_hf.h - the Llama family's transformers classes (LlamaForCausalLM,
 * Qwen2ForCausalLM) and their config.json, both ways (llama_hf.c), for the model
 * interface (llama_arch.c).
 */
#ifndef ZEROC_MODEL_LLAMA_HF_H
#define ZEROC_MODEL_LLAMA_HF_H

#include <stddef.h>

#include "zeroc/gpt.h"
#include "zeroc/train.h"

extern const char *const zeroc__llama_hf_architectures[];

/* The config.json of shape `g` made for `positions` positions
 * (max_position_embeddings), as malloc'd text: Qwen2ForCausalLM with q/k/v
 * biases, else LlamaForCausalLM. */
zeroc_result_t zeroc__llama_hf_config_write(const zeroc_gpt_config_t *g, int positions,
                                            char **json);

/* zeroc_arch_t's hf_config_read for the Llama family. */
zeroc_result_t zeroc__llama_hf_config_read(const char *json, size_t n, zeroc_train_config_t *c,
                                           int names);

#endif
