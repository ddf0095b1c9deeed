/*
 * model/presets.c - the named GPT shapes and the parameter count.
 */
#include <string.h>

#include "core/error.h"
#include "model/lm_rules.h"
#include "zeroc/gpt.h"

static const struct {
  const char *name;
  zeroc_gpt_config_t c;
} presets[] = {
    /*                layers hidden heads vocab  seq  batch */
    {"tiny", {2, 64, 4, 256, 64, 4}},
    {"small", {4, 128, 4, 512, 128, 4}},
    {"gpt2-124m", {12, 768, 12, 50257, 1024, 4}},
    {"gpt2-350m", {24, 1024, 16, 50257, 1024, 4}},
    {"gpt2-774m", {36, 1280, 20, 50257, 1024, 4}},
    {"gpt2-1558m", {48, 1600, 25, 50257, 1024, 4}},
};

static const char *const names[] = {"tiny", "small", "gpt2-124m", "gpt2-350m", "gpt2-774m",
                                    "gpt2-1558m", NULL};

const char *const *zeroc_gpt_preset_names(void) { return names; }

zeroc_result_t zeroc_gpt_preset(const char *name, zeroc_gpt_config_t *out) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
    if (name && !strcmp(name, presets[i].name)) {
      *out = presets[i].c;
      return ZEROC_OK;
    }
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "model '%s' unknown; accepted: tiny, small, gpt2-124m, gpt2-350m, gpt2-774m, "
                    "gpt2-1558m, custom",
                    name ? name : "(null)");
}

zeroc_result_t zeroc_gpt_config_check(const zeroc_gpt_config_t *c) {
  ZEROC_CHECK(zeroc__lm_check_sizes(c, zeroc__lm_names(ZEROC_NAMES_CONFIG)));
  if (c->vocab > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "vocab %d: at most 65536 (tokens are stored as uint16)", c->vocab);
  return ZEROC_OK;
}

uint64_t zeroc_gpt_num_params(const zeroc_gpt_config_t *c) {
  uint64_t L = (uint64_t)c->layers, C = (uint64_t)c->hidden, V = (uint64_t)c->vocab,
           T = (uint64_t)c->seq;
  return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}
