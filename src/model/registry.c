/*
 * model/registry.c - the models built in, by name: the --model names (presets)
 * each architecture answers to. A new model adds its table here.
 */
#include <stdio.h>
#include <string.h>

#include "model/arch_registry.h"

static const zeroc_arch_t *const ARCHS[] = {&zeroc__arch_gpt2, &zeroc__arch_llama,
                                            &zeroc__arch_dlrm, NULL};

const zeroc_arch_t *const *zeroc_arch_list(void) { return ARCHS; }

const zeroc_arch_t *zeroc_arch_find(const char *name) {
  if (!name) return NULL;
  for (int a = 0; ARCHS[a]; a++)
    for (int p = 0; ARCHS[a]->presets[p]; p++)
      if (!strcmp(name, ARCHS[a]->presets[p])) return ARCHS[a];
  return NULL;
}

const zeroc_arch_t *zeroc_arch_find_hf(const char *name) {
  if (!name) return NULL;
  for (int a = 0; ARCHS[a]; a++)
    for (int k = 0; ARCHS[a]->hf_architectures && ARCHS[a]->hf_architectures[k]; k++)
      if (!strcmp(name, ARCHS[a]->hf_architectures[k])) return ARCHS[a];
  return NULL;
}

void zeroc__arch_preset_list(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int a = 0; ARCHS[a]; a++)
    for (int p = 0; ARCHS[a]->presets[p] && at < n; p++) {
      int k = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", ARCHS[a]->presets[p]);
      if (k < 0) break;
      at += (size_t)k;
    }
}

void zeroc__arch_hf_list(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int a = 0; ARCHS[a]; a++)
    for (int k = 0; ARCHS[a]->hf_architectures && ARCHS[a]->hf_architectures[k] && at < n; k++) {
      int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", ARCHS[a]->hf_architectures[k]);
      if (w < 0) break;
      at += (size_t)w;
    }
}
