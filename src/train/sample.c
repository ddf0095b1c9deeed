/*
 * train/sample.c - sampling from a training run (the model's sampler hooks,
 * zeroc/arch.h: its weights gathered to rank 0 into a sampler, which
 * generates there while the other ranks wait in the agreement), and from a
 * GPT checkpoint (the GPT rebuilt on this mesh, loaded, gathered).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_file.h"
#include "model/gpt_run.h"
#include "model/sample.h"
#include "runtime/runtime.h"
#include "shard/engine.h"
#include "train/trainer.h"
#include "zeroc/ckpt.h"

zeroc_result_t zeroc_sampler_from_trainer(zeroc_trainer_t *tr, zeroc_sampler_t **out) {
  if (!tr || !out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_sampler_from_trainer: NULL");
  *out = NULL;
  if (!tr->arch->sampler)
    return zeroc__ctx_ret(tr->ctx, ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                                              "zeroc_sampler_from_trainer: model %s has no sampler",
                                              tr->info.config.model));
  return zeroc__ctx_ret(tr->ctx, tr->arch->sampler(tr->net, out));
}

zeroc_result_t zeroc_trainer_sample(zeroc_trainer_t *tr, const int32_t *prompt, int n,
                                    const zeroc_sample_config_t *cfg, int32_t *out) {
  const zeroc_sample_config_t dflt = ZEROC_SAMPLE_CONFIG_INIT;
  zeroc_sample_config_t c = dflt;
  if (!tr) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_sample: NULL trainer");
  if (!cfg || cfg->magic != ZEROC_CONFIG_MAGIC ||
      cfg->size < offsetof(zeroc_sample_config_t, tokens) + sizeof(int) || cfg->size > 65536)
    return zeroc__ctx_ret(tr->ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                              "zeroc_sample_config_t was not initialised with "
                                              "ZEROC_SAMPLE_CONFIG_INIT"));
  memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
  zeroc_sampler_t *s = NULL;
  CHK(zeroc_sampler_from_trainer(tr, &s));
  zeroc_result_t r = ZEROC_OK;
  if (s) {
    zeroc_sampler_set_vocab(s, c.vocab);
    r = zeroc_sampler_generate(s, prompt, n, c.tokens, c.temperature, c.top_k, c.seed, out);
  }
  zeroc_sampler_destroy(s);
  return zeroc__ctx_ret(tr->ctx, zeroc_ctx_agree(tr->ctx, r));
}

zeroc_result_t zeroc_trainer_sample_prompt(zeroc_trainer_t *tr, int32_t eot, int max, int32_t *ids,
                                           int *n) {
  *n = 0;
  if (max < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "sample prompt of %d tokens", max);
  if (eot >= 0) {
    ids[0] = eot;
    *n = 1;
    return ZEROC_OK;
  }
  if (!tr->arch->sample_prompt)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "sample prompt: model %s has no sampler",
                      tr->info.config.model);
  return tr->arch->sample_prompt(tr->net, max, ids, n);
}

/* ---- from a checkpoint: the model rebuilt on this mesh, loaded, gathered ------------------- */

/* This rank's chunks of a pipeline of pp x vpp stages, cut as the trainer cuts. */
static zeroc_result_t stage_of(const zeroc_gpt_config_t *cfg, int pp, int pp_rank, int vpp,
                               int *first, int *count) {
  int S = pp * vpp;
  int *bounds = malloc(sizeof(int) * (size_t)(S + 1));
  if (!bounds) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline partition (%d stages)", S);
  zeroc_result_t r = zeroc__gpt_partition(cfg, S, bounds);
  for (int k = 0; !r && k < vpp; k++) {
    first[k] = bounds[k * pp + pp_rank];
    count[k] = bounds[k * pp + pp_rank + 1] - first[k];
  }
  free(bounds);
  return r;
}

zeroc_result_t zeroc_sampler_from_checkpoint(zeroc_ctx_t *ctx, const char *dir,
                                             const zeroc_gpt_config_t *cfg, int vpp,
                                             zeroc_sampler_t **out) {
  if (!ctx || !dir || !cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_sampler_from_checkpoint: NULL argument");
  *out = NULL;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_gpt_t *g = NULL;
  zeroc_model_t *m = NULL;
  zeroc_sampler_t *s = NULL;
  char *app = NULL;
  uint64_t step = 0;
  int first[64], count[64];
  vpp = vpp > 0 ? vpp : 1;
  zeroc_gpt_stage_t st = {vpp, first, count, 1};
  zeroc_gpt_options_t go = ZEROC_GPT_OPTIONS_INIT;
  go.batch = 1;
  go.dtype = ZEROC_FP32; /* the master weights are fp32; the sampler reads them */
  zeroc_result_t r = zeroc_gpt_config_check(cfg);
  if (!r && vpp > 64) r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "vpp %d: accepted 1..64", vpp);
  if (!r && mesh->pp > 1) {
    r = stage_of(cfg, mesh->pp, mesh->pp_rank, vpp, first, count);
    go.stage = &st;
  }
  if (!r) r = zeroc_gpt_create_ex(ctx, cfg, &go, &g);
  r = zeroc_ctx_agree(ctx, r);
  if (!r) {
    int n;
    const zeroc_layer_t *layers = zeroc_gpt_layers(g, &n);
    zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
    sc.stage = mesh->pp > 1 ? 1 : 3;
    r = zeroc_shard(ctx, layers, n, &sc, &m);
  }
  if (!r) r = zeroc_ckpt_load(m, dir, &step, &app);
  if (!r) {
    /* the checkpoint's model must be this shape (the trainer's app object) */
    static const char *const fields[] = {"model.layers", "model.hidden", "model.heads",
                                         "model.vocab",  "model.seq",    NULL};
    char cur[256];
    snprintf(cur, sizeof cur,
             "{\"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"vocab\": %d, "
             "\"seq\": %d}}",
             cfg->layers, cfg->hidden, cfg->heads, cfg->vocab, cfg->seq);
    r = zeroc_ckpt_check_resume(ctx, dir, step, UINT64_MAX, app, cur, fields);
  }
  r = zeroc_ctx_agree(ctx, r);
  if (!r && mesh->rank == 0) r = zeroc__sampler_create(cfg, &s);
  r = zeroc_ctx_agree(ctx, r);
  if (!r) r = zeroc__gpt_collect(m, g, zeroc__gpt_sampler_fill, s);
  free(app);
  zeroc_model_destroy(m);
  zeroc_gpt_destroy(g);
  if (r) {
    zeroc_sampler_destroy(s);
    return zeroc__ctx_ret(ctx, r);
  }
  *out = s;
  return ZEROC_OK;
}
