/*
 * train/sample.c - sampling from a training run (the model's sampler hooks,
 * zeroc/arch.h: its weights gathered to rank 0 into a sampler, which
 * generates there while the other ranks wait in the agreement), and from a
 * GPT-2 or Llama checkpoint (the GPT rebuilt on this mesh, loaded, gathered).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/runtime.h"
#include "train/trainer.h"
#include "zeroc/ckpt.h"
#include "zeroc/sample.h"

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

/* The model fields of `arch`'s resume fields: what a checkpoint to sample from must match. */
static int model_fields(const zeroc_arch_t *arch, const char **out, int max) {
  int n = 0;
  for (int k = 0; arch->resume_fields[k] && n < max - 1; k++)
    if (!strncmp(arch->resume_fields[k], "model.", 6)) out[n++] = arch->resume_fields[k];
  out[n] = NULL;
  return n;
}

/* The GPT of shape `cfg` rebuilt on this mesh through its architecture (a
 * weights-only run: fp32, one sequence, ZeRO-3, or ZeRO-1 with a pipeline of
 * vpp chunks per rank), the checkpoint loaded into it and checked to be of
 * that shape, then gathered into a sampler on rank 0. */
zeroc_result_t zeroc_sampler_from_checkpoint(zeroc_ctx_t *ctx, const char *dir,
                                             const zeroc_gpt_config_t *cfg, int vpp,
                                             zeroc_sampler_t **out) {
  if (!ctx || !dir || !cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_sampler_from_checkpoint: NULL argument");
  *out = NULL;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "tiny"; /* every size given below */
  c.layers = cfg->layers, c.hidden = cfg->hidden, c.heads = cfg->heads;
  c.vocab = cfg->vocab, c.seq = cfg->seq, c.batch = 1;
  if (cfg->family == ZEROC_GPT_FAMILY_LLAMA) { /* the Llama family's every field too */
    c.model = "llama-custom";
    c.kv_heads = cfg->kv_heads, c.ffn = cfg->ffn, c.qkv_bias = cfg->qkv_bias;
    c.untied = cfg->untied, c.norm_eps = cfg->norm_eps, c.rope_theta = cfg->rope_theta;
    c.rope_factor = cfg->rope_factor, c.rope_low = cfg->rope_low;
    c.rope_high = cfg->rope_high, c.rope_original = cfg->rope_original;
  }
  c.vpp = vpp > 0 ? vpp : 1;
  if (c.vpp > 1) c.pp_schedule = ZEROC_PIPELINE_INTERLEAVED;
  c.param_dtype = ZEROC_FP32; /* the master weights are fp32; the sampler reads them */
  zeroc_train_info_t info;
  memset(&info, 0, sizeof info); /* arch stays NULL if resolve fails before filling it */
  zeroc_result_t r =
      zeroc_train_config_resolve(&c, mesh, zeroc_ctx_device(ctx), ZEROC_NAMES_CONFIG, &info);
  const zeroc_arch_t *arch = info.arch;
  if (!r && !arch->sampler)
    r = ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "model %s has no sampler", c.model);
  void *net = NULL;
  zeroc_sampler_t *s = NULL;
  char *app = NULL;
  uint64_t step = 0;
  if (!r) {
    const char *phase = "model";
    zeroc_arch_run_t run = {ctx, &info, zeroc__train_shard_config(&info.config, ZEROC_FP32),
                            &phase, 1};
    r = arch->create(&run, &net); /* agreed on by every rank */
  } else {
    r = zeroc_ctx_agree(ctx, r);
  }
  if (!r) r = zeroc_ckpt_load(arch->model(net), dir, &step, &app);
  if (!r) {
    /* the checkpoint's model must be this shape (the trainer's app object) */
    const char *fields[16];
    char cur[4096];
    model_fields(arch, fields, 16);
    arch->app_json(net, step, cur, sizeof cur);
    r = zeroc_ckpt_check_resume(ctx, dir, step, UINT64_MAX, app, cur, fields);
  }
  r = zeroc_ctx_agree(ctx, r);
  if (!r) r = arch->sampler(net, &s);
  free(app);
  if (arch) arch->destroy(net);
  if (r) {
    zeroc_sampler_destroy(s);
    return zeroc__ctx_ret(ctx, r);
  }
  *out = s;
  return ZEROC_OK;
}
