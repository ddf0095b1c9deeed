/*
 * model/presets.c - the named decoder shapes (GPT-2 and the Llama family), the
 * shape check and the parameter count.
 */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/rope.h"
#include "model/lm_rules.h"
#include "zeroc/gpt.h"

#define LLAMA ZEROC_GPT_FAMILY_LLAMA
/* GPT-2: the Llama fields 0 */
#define GPT2(L, C, NH, V, T, B)                                                                    \
  { .layers = L, .hidden = C, .heads = NH, .vocab = V, .seq = T, .batch = B }

static const struct {
  const char *name;
  zeroc_gpt_config_t c;
} presets[] = {
    /*                layers hidden heads vocab  seq  batch */
    {"tiny", GPT2(2, 64, 4, 256, 64, 4)},
    {"small", GPT2(4, 128, 4, 512, 128, 4)},
    {"gpt2-124m", GPT2(12, 768, 12, 50257, 1024, 4)},
    {"gpt2-350m", GPT2(24, 1024, 16, 50257, 1024, 4)},
    {"gpt2-774m", GPT2(36, 1280, 20, 50257, 1024, 4)},
    {"gpt2-1558m", GPT2(48, 1600, 25, 50257, 1024, 4)},
    /* the Llama family: ... family, kv_heads, ffn, qkv_bias, untied, eps, theta,
     * llama3 scaling (factor, low, high, original) as the published config.json files */
    {"llama-tiny", {2, 64, 4, 256, 64, 4, LLAMA, 2, 160, 0, 1, 1e-5, 5e5, 32, 1, 4, 8192}},
    {"qwen-tiny", {2, 64, 4, 256, 64, 4, LLAMA, 2, 192, 1, 0, 1e-6, 1e6, 0, 0, 0, 0}},
    {"llama3.2-1b",
     {16, 2048, 32, 128256, 2048, 1, LLAMA, 8, 8192, 0, 0, 1e-5, 5e5, 32, 1, 4, 8192}},
    {"llama3.1-8b",
     {32, 4096, 32, 128256, 2048, 1, LLAMA, 8, 14336, 0, 1, 1e-5, 5e5, 8, 1, 4, 8192}},
    {"qwen2.5-0.5b", {24, 896, 14, 151936, 2048, 1, LLAMA, 2, 4864, 1, 0, 1e-6, 1e6, 0, 0, 0, 0}},
    {"qwen2.5-7b", {28, 3584, 28, 152064, 2048, 1, LLAMA, 4, 18944, 1, 1, 1e-6, 1e6, 0, 0, 0, 0}},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

static const char *const names[] = {"tiny",        "small",       "gpt2-124m",    "gpt2-350m",
                                    "gpt2-774m",   "gpt2-1558m",  "llama-tiny",   "qwen-tiny",
                                    "llama3.2-1b", "llama3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b",
                                    NULL};

const char *const *zeroc_gpt_preset_names(void) { return names; }

zeroc_result_t zeroc_gpt_preset(const char *name, zeroc_gpt_config_t *out) {
  for (size_t i = 0; i < NPRESETS; i++)
    if (name && !strcmp(name, presets[i].name)) {
      *out = presets[i].c;
      return ZEROC_OK;
    }
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "model '%s' unknown; accepted: tiny, small, gpt2-124m, gpt2-350m, gpt2-774m, "
                    "gpt2-1558m, llama-tiny, qwen-tiny, llama3.2-1b, llama3.1-8b, qwen2.5-0.5b, "
                    "qwen2.5-7b",
                    name ? name : "(null)");
}

zeroc_result_t zeroc_gpt_config_check(const zeroc_gpt_config_t *c) {
  const zeroc__train_names_t *n = zeroc__lm_names(ZEROC_NAMES_CONFIG);
  ZEROC_CHECK(zeroc__lm_check_sizes(c, n));
  return zeroc__lm_check_family(c, n);
}

uint64_t zeroc_gpt_num_params(const zeroc_gpt_config_t *c) {
  uint64_t L = (uint64_t)c->layers, C = (uint64_t)c->hidden, V = (uint64_t)c->vocab,
           T = (uint64_t)c->seq;
  if (c->family != ZEROC_GPT_FAMILY_LLAMA) return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  uint64_t K = (uint64_t)c->kv_heads * (C / (uint64_t)c->heads), F = (uint64_t)c->ffn;
  uint64_t block = 2 * C * C + 2 * K * C + 3 * F * C + 2 * C + (c->qkv_bias ? C + 2 * K : 0);
  return V * C * (c->untied ? 2 : 1) + L * block + C;
}
