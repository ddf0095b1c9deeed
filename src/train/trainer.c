/*
 * train/trainer.c - building a training run: the config and its defaults, the
 * outputs checked before hours of training depend on them, the model's run
 * (data, units, shards, pipeline: built by its architecture, zeroc/arch.h),
 * the starting point (weights or a checkpoint, with the resume checks) and the
 * planner's prediction. The step loop is train/step.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "kernels/kernels.h"
#include "persist/ckpt.h"
#include "plan/train_predict.h"
#include "runtime/runtime.h"
#include "train/export_path.h"
#include "train/trainer.h"
#include "zeroc/ckpt.h"

/* the part of zeroc_trainer_create the calling thread is (or was last) in */
static _Thread_local const char *create_phase = "config";

const char *zeroc_trainer_create_phase(void) { return create_phase; }

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

/* ---- the model's run ----------------------------------------------------------------- */

/* ---- checkpoints --------------------------------------------------------------------- */

zeroc_result_t zeroc__train_save(zeroc_trainer_t *tr, const char *dir, uint64_t step) {
  if (tr->arch->save_extra) ZEROC_CHECK(tr->arch->save_extra(tr->net, dir, step));
  char app[4096];
  tr->arch->app_json(tr->net, step, app, sizeof app);
  ZEROC_CHECK(zeroc_ckpt_save(tr->model, dir, step, app));
  /* retention in the run's own directory, once the new checkpoint is complete */
  const zeroc_train_config_t *c = &tr->info.config;
  if (c->save_limit > 0 && c->save && !strcmp(dir, c->save) && zeroc_ctx_mesh(tr->ctx)->rank == 0)
    zeroc__ckpt_prune(dir, c->save_limit);
  return ZEROC_OK;
}

/* The checkpoint directory of `resume`, which names DIR (its latest) or
 * DIR/step_<k>: where the model's state outside the shards lies. */
static void ckpt_dir(const char *resume, char *buf, size_t n) {
  const char *slash = strrchr(resume, '/'), *base = slash ? slash + 1 : resume;
  int in_step = !strncmp(base, "step_", 5);
  int dlen = in_step ? (slash ? (int)(slash - resume) : 1) : (int)strlen(resume);
  snprintf(buf, n, "%.*s", dlen, in_step && !slash ? "." : resume);
}

/* --init's weights, or --resume's checkpoint with the checks that it is this run's. */
static zeroc_result_t start_point(zeroc_trainer_t *tr) {
  const zeroc_train_config_t *c = &tr->info.config;
  if (c->init) {
    if (!tr->arch->import_weights)
      return BAD("init: model %s (%s) has no weights import", c->model, tr->arch->name);
    /* a file, or a transformers directory (config.json gave the shape) whose
     * weights the model finds: model.safetensors, or shards and their index */
    ZEROC_CHECK(tr->arch->import_weights(tr->net, c->init));
  }
  if (!c->resume) return ZEROC_OK;
  uint64_t k = 0;
  char *app = NULL;
  zeroc_result_t r = zeroc_ckpt_load(tr->model, c->resume, &k, &app);
  if (r == ZEROC_OK) {
    /* the same model and data stream, at the same place; nothing written yet */
    char cur[4096];
    tr->arch->app_json(tr->net, k, cur, sizeof cur);
    r = zeroc_ckpt_check_resume(tr->ctx, c->resume, k, (uint64_t)c->steps, app, cur,
                                tr->arch->resume_fields);
  }
  free(app);
  if (r == ZEROC_OK && tr->arch->load_extra) {
    char dir[4200];
    ckpt_dir(c->resume, dir, sizeof dir);
    r = tr->arch->load_extra(tr->net, dir, k);
  }
  if (r == ZEROC_OK) tr->next = tr->info.start_step = (int)k; /* <= steps, checked above */
  return r;
}

/* ---- create and destroy ---------------------------------------------------------------- */

/* The set-up after the config: each part agreed on by every rank. */
static zeroc_result_t build(zeroc_trainer_t *tr) {
  zeroc_ctx_t *ctx = tr->ctx;
  const zeroc_train_config_t *c = &tr->info.config;
  int root = zeroc_ctx_mesh(ctx)->rank == 0;
  create_phase = "outputs";
  zeroc_result_t r = c->save ? zeroc__dir_check_writable(c->save, "--save") : ZEROC_OK;
  if (!r && root && c->export_path) r = zeroc__export_check(tr->arch, c->export_path);
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  create_phase = "model"; /* the model's run says when it is at its data */
  zeroc_arch_run_t run = {ctx, &tr->info, zeroc__train_shard_config(c, tr->info.dtype),
                          &create_phase, 0};
  ZEROC_CHECK(tr->arch->create(&run, &tr->net));
  tr->model = tr->arch->model(tr->net);
  create_phase = "start";
  ZEROC_CHECK(zeroc_ctx_agree(ctx, start_point(tr)));
  zeroc__plan_train(ctx, &tr->info);
  zeroc__spike_init(&tr->spike_loss, c->spike_window, c->spike_z);
  zeroc__spike_init(&tr->spike_norm, c->spike_window, c->spike_z);
  zeroc_ctx_memory_reset_peak(ctx);
  create_phase = "ready";
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_create(zeroc_ctx_t *ctx, const zeroc_train_config_t *cfg,
                                    zeroc_trainer_t **out) {
  create_phase = "config";
  if (!ctx || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_create: NULL %s", ctx ? "out" : "ctx");
  *out = NULL;
  zeroc_trainer_t *tr = calloc(1, sizeof *tr);
  if (!tr) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "trainer struct"));
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  tr->ctx = ctx;
  zeroc_result_t r =
      zeroc_train_config_resolve(cfg, mesh, zeroc_ctx_device(ctx), ZEROC_NAMES_CONFIG, &tr->info);
  tr->arch = tr->info.arch;
  /* the same config on every rank gives the same verdict; agreeing costs little */
  r = zeroc_ctx_agree(ctx, r);
  if (!r) r = build(tr);
  if (r != ZEROC_OK) {
    /* the message outlives the clean-up, which may fail in its own way */
    char msg[ZEROC_ERRMSG_MAX];
    zeroc__ctx_ret(ctx, r);
    snprintf(msg, sizeof msg, "%s", zeroc_last_error(ctx));
    zeroc_trainer_destroy(tr);
    zeroc__ctx_error_set(ctx, msg);
    zeroc__tls_error_set(msg);
    return r;
  }
  *out = tr;
  return ZEROC_OK;
}

void zeroc_trainer_destroy(zeroc_trainer_t *tr) {
  if (!tr) return;
  if (tr->arch) tr->arch->destroy(tr->net);
  free(tr);
}

void zeroc_trainer_info(const zeroc_trainer_t *tr, zeroc_train_info_t *out) {
  *out = tr->info;
  /* asked each time: the kernels decide per shape at the first step that runs it */
  if (out->dlrm)
    snprintf(out->attention, sizeof out->attention, "none (DLRM has no attention)");
  else
    zeroc_k_attention_backend(out->device,
                              out->device == ZEROC_DEVICE_CUDA ? out->dtype : ZEROC_FP32,
                              out->attention, sizeof out->attention);
}

int zeroc_trainer_steps_done(const zeroc_trainer_t *tr) { return tr->next; }

zeroc_model_t *zeroc_trainer_model(const zeroc_trainer_t *tr) { return tr->model; }

zeroc_result_t zeroc_trainer_save(zeroc_trainer_t *tr, const char *dir) {
  if (!tr || !dir) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_save: NULL argument");
  return zeroc__ctx_ret(tr->ctx, zeroc__train_save(tr, dir, (uint64_t)tr->next));
}
