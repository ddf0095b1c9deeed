/*
 * model/arch_registry.h - the built-in architectures' tables (each defined in
 * its model's files) and the registry's helpers for messages.
 */
#ifndef ZEROC_MODEL_ARCH_REGISTRY_H
#define ZEROC_MODEL_ARCH_REGISTRY_H

#include <stddef.h>

#include "zeroc/arch.h"

extern const zeroc_arch_t zeroc__arch_gpt2; /* gpt_run.c */
extern const zeroc_arch_t zeroc__arch_llama; /* llama_arch.c */
extern const zeroc_arch_t zeroc__arch_dlrm; /* dlrm_arch.c */

/* Every registered preset name, comma-separated, for "accepted: ..." messages. */
void zeroc__arch_preset_list(char *buf, size_t n);
/* Every transformers class a model reads ("GPT2LMHeadModel, ..."), likewise. */
void zeroc__arch_hf_list(char *buf, size_t n);

#endif
