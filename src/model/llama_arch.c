/*
 * model/llama_arch.c - the Llama family (Llama 3, Qwen2) behind the model
 * interface (zeroc/arch.h): its presets, the config's shape (a preset with
 * overrides, or "llama-custom" with every size given, as a transformers
 * config.json gives them: llama_hf.c) and its rules; its transformers classes
 * (llama_hf.c) and their weights (gpt_io.c). A run is the decoder run
 * of gpt_run.c (data, pipeline, step, checkpoints, weights), whose model builds
 * Llama blocks for this family (llama_block.c); the planner prices it with the
 * decoder's sizes (gpt_sizes.c, gpt_price.c).
 */
#include <string.h>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/gpt_eval.h"
#include "model/gpt_price.h"
#include "model/gpt_run.h"
#include "model/gpt_state.h"
#include "model/llama_hf.h"
#include "model/lm_rules.h"
#include "zeroc/arch.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

static const char *const PRESETS[] = {"llama-tiny",   "qwen-tiny",  "llama3.2-1b",  "llama3.1-8b",
                                      "qwen2.5-0.5b", "qwen2.5-7b", "llama-custom", NULL};

/* An int field of c over the preset's value of g, and the result written back into c. */
#define OVERRIDE_INT(f)                                                                            \
  do {                                                                                             \
    if (c->f != ZEROC_UNSET) g->f = c->f;                                                          \
    c->f = g->f;                                                                                   \
  } while (0)
#define OVERRIDE_REAL(f)                                                                           \
  do {                                                                                             \
    if (c->f != (double)ZEROC_UNSET) g->f = c->f;                                                  \
    c->f = g->f;                                                                                   \
  } while (0)

static zeroc_result_t resolve(zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                              zeroc_train_info_t *info) {
  zeroc_gpt_config_t *g = &info->model;
  (void)mesh;
  if (c->model && !strcmp(c->model, "llama-custom")) {
    /* every size given (a transformers config.json: llama_hf.c), the rest Llama 3's */
    if (c->layers == ZEROC_UNSET || c->hidden == ZEROC_UNSET || c->heads == ZEROC_UNSET ||
        c->vocab == ZEROC_UNSET || c->seq == ZEROC_UNSET || c->kv_heads == ZEROC_UNSET ||
        c->ffn == ZEROC_UNSET)
      return BAD("model llama-custom needs layers, hidden, heads, kv_heads, ffn, vocab and seq");
    ZEROC_CHECK(zeroc_gpt_preset("llama-tiny", g)); /* the micro-batch and the defaults */
    g->untied = 0;
    g->rope_factor = g->rope_low = g->rope_high = g->rope_original = 0;
  } else {
    ZEROC_CHECK(zeroc_gpt_preset(c->model, g));
  }
  OVERRIDE_INT(layers);
  OVERRIDE_INT(hidden);
  OVERRIDE_INT(heads);
  OVERRIDE_INT(vocab);
  OVERRIDE_INT(seq);
  OVERRIDE_INT(batch);
  OVERRIDE_INT(kv_heads);
  OVERRIDE_INT(ffn);
  OVERRIDE_INT(qkv_bias);
  OVERRIDE_INT(untied);
  OVERRIDE_REAL(norm_eps);
  OVERRIDE_REAL(rope_theta);
  OVERRIDE_REAL(rope_factor);
  OVERRIDE_REAL(rope_low);
  OVERRIDE_REAL(rope_high);
  OVERRIDE_REAL(rope_original);
  return ZEROC_OK; /* the shape is checked by check */
}

static zeroc_result_t check(const zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                            const zeroc_train_info_t *info, int names) {
  const zeroc_gpt_config_t *g = &info->model;
  const zeroc__train_names_t *n = zeroc__lm_names(names);
  ZEROC_CHECK(zeroc__lm_check_sizes(g, n));
  ZEROC_CHECK(zeroc__lm_check_family(g, n));
  if (c->dropout > 0)
    return BAD("dropout %g: the Llama family trains without dropout (accepted 0)", c->dropout);
  if (g->ffn % mesh->tp)
    return BAD("%s %d must divide the MLP's %d channels (%s)", n->tp, mesh->tp, g->ffn, n->ffn);
  if (c->max_positions != ZEROC_UNSET && c->max_positions < g->seq)
    return BAD("%s %d: accepted up to max_positions %d (the context the model is made for)", n->seq,
               g->seq, c->max_positions);
  ZEROC_CHECK(zeroc__lm_check_shape(c, g, mesh->tp, n));
  ZEROC_CHECK(zeroc__lm_check_cp(c->cp_mode, g, mesh->tp, mesh->cp, n));
  ZEROC_CHECK(zeroc__lm_check_pipeline(c, g, mesh->pp, n));
  return zeroc__lm_check_outputs(c, n);
}

/* What a resumed run must share with its checkpoint's app object (gpt_run.c writes it). */
static const char *const RESUME_FIELDS[] = {"model.layers",
                                            "model.hidden",
                                            "model.heads",
                                            "model.vocab",
                                            "model.seq",
                                            "model.family",
                                            "model.kv_heads",
                                            "model.ffn",
                                            "model.qkv_bias",
                                            "model.untied",
                                            "model.norm_eps",
                                            "model.rope_theta",
                                            "model.rope_factor",
                                            "model.rope_low",
                                            "model.rope_high",
                                            "model.rope_original",
                                            "data.seed",
                                            "data.shuffle",
                                            "data.seq",
                                            "data.global_batch",
                                            "data.num_sequences",
                                            "data.fingerprint",
                                            NULL};

/* config.json for the run: the shape, and the context the model is made for (an
 * imported config.json's, else the run's). */
static zeroc_result_t hf_config_write(void *self, char **json) {
  const zeroc__gpt_run_t *run = self;
  int P = run->info->config.max_positions;
  return zeroc__llama_hf_config_write(&run->info->model,
                                      P != ZEROC_UNSET ? P : run->info->model.seq, json);
}

const zeroc_arch_t zeroc__arch_llama = {
    .name = "llama",
    .presets = PRESETS,
    .resolve = resolve,
    .check = check,
    .num_units = zeroc__gpt_run_num_units,
    .unit_costs = zeroc__gpt_run_unit_costs,
    .unit_name = zeroc__gpt_run_unit_name,
    .print_schedule = zeroc__gpt_print_schedule,
    .create = zeroc__gpt_run_create,
    .destroy = zeroc__gpt_run_destroy,
    .model = zeroc__gpt_run_model,
    .pipeline = zeroc__gpt_run_pipeline,
    .run_step = zeroc__gpt_run_step,
    .evaluate = zeroc__gpt_evaluate,
    .comm_wait_s = zeroc__gpt_run_comm_wait_s,
    .app_json = zeroc__gpt_run_app_json,
    .resume_fields = RESUME_FIELDS,
    .import_weights = zeroc__gpt_run_import_weights,
    .export_weights = zeroc__gpt_run_export_weights,
    .sampler = zeroc__gpt_run_sampler,
    .sample_prompt = zeroc__gpt_run_sample_prompt,
    .hf_architectures = zeroc__llama_hf_architectures,
    .hf_config_write = hf_config_write,
    .hf_config_read = zeroc__llama_hf_config_read,
    .price_check = zeroc__gpt_price_check,
    .price_unit = zeroc__gpt_price_unit,
    .price_stage = zeroc__gpt_price_stage,
    .figures = zeroc__gpt_figures,
};
