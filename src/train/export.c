/*
 * train/export.c - zeroc_trainer_export: the consolidated weights as one
 * safetensors file (a path ending in ".safetensors"), or as a transformers
 * save_pretrained directory (any other path): config.json from the model
 * (zeroc/arch.h's hf_config_write) beside the weights the model writes into
 * the directory (model.safetensors, or shards and their index above a size),
 * staged in "<DIR>.tmp" and published whole (an existing DIR is replaced at
 * once, never left half-written).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "runtime/runtime.h"
#include "train/export_path.h"
#include "train/trainer.h"

/* Rank 0: config.json into the staged directory, then the directory published. */
static zeroc_result_t finish_dir(zeroc_trainer_t *tr, const char *tmp, const char *path) {
  char *json = NULL, file[4200];
  zeroc_result_t r = tr->arch->hf_config_write(tr->net, &json);
  snprintf(file, sizeof file, "%s/config.json", tmp);
  if (!r) r = zeroc__file_write_atomic(file, json, strlen(json));
  free(json);
  if (!r) r = zeroc__dir_publish(tmp, path);
  return r;
}

static zeroc_result_t export_dir(zeroc_trainer_t *tr, const char *path) {
  zeroc_ctx_t *ctx = tr->ctx;
  int root = zeroc_ctx_mesh(ctx)->rank == 0;
  char tmp[4096];
  if (strlen(path) + 32 > sizeof tmp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "--export: a path of %zu bytes; at most %zu accepted",
                      strlen(path), sizeof tmp - 32);
  if (!tr->arch->hf_config_write)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "zeroc_trainer_export '%s': %s has no transformers class; give a path "
                      "ending in .safetensors",
                      path, tr->arch->name);
  /* checked again: the directory may have gained files since start-up */
  zeroc_result_t r = root ? zeroc__export_check(tr->arch, path) : ZEROC_OK;
  if (!r && root) r = zeroc__dir_stage(path, tmp, sizeof tmp);
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  size_t n = strlen(path); /* zeroc__dir_stage's name, on every rank: "<DIR>.tmp" */
  while (n > 1 && path[n - 1] == '/') n--;
  snprintf(tmp, sizeof tmp, "%.*s.tmp", (int)n, path);
  ZEROC_CHECK(tr->arch->export_weights(tr->net, tmp));
  r = root ? finish_dir(tr, tmp, path) : ZEROC_OK;
  if (r && root) zeroc__rmtree(tmp);
  return zeroc_ctx_agree(ctx, r);
}

zeroc_result_t zeroc_trainer_export(zeroc_trainer_t *tr, const char *path) {
  if (!tr || !path) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_export: NULL argument");
  if (!tr->arch->export_weights)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "zeroc_trainer_export: not for %s yet",
                      tr->arch->name == NULL ? "this model" : tr->arch->name);
  if (!zeroc__export_is_dir(path))
    return zeroc__ctx_ret(tr->ctx, tr->arch->export_weights(tr->net, path));
  return zeroc__ctx_ret(tr->ctx, export_dir(tr, path));
}
