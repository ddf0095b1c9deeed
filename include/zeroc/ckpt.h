/*
 * zeroc/ckpt.h - sharded checkpoints of a model's training state.
 *
 * A checkpoint is a directory DIR/step_<k>/ holding one file per shard owner
 * (master, Adam m and v of every unit, fp32) and rank 0's manifest.json
 * (format version, step, mesh, per-unit layout, per-file CRC-32C and size, and
 * the caller's own JSON, e.g. the model and training configuration and the
 * data position). It is written under a temporary name, fsynced and renamed,
 * and DIR/latest is replaced last, so a crash at any point leaves the previous
 * checkpoint loadable. Loading onto a different number of shards re-cuts the
 * flat shards; loading onto a different tensor-parallel size re-splits every
 * parameter (the manifest records how each local tensor maps to the unsplit
 * one: zeroc_param_desc_t's tp_* fields).
 */
#ifndef ZEROC_CKPT_H
#define ZEROC_CKPT_H

#include <stdint.h>

#include "zeroc/export.h"
#include "zeroc/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Saves the model's state after `step` optimizer steps into DIR/step_<step>
 * and points DIR/latest at it. `app_json` (NULL or "": none) is one JSON object
 * stored in the manifest under "app". Collective over the model's world.
 * Returns ZEROC_ERR_INVALID_ARG (a NULL or destroyed model, an empty dir,
 * app_json that is not one JSON object: nothing written), ZEROC_ERR_IO (naming
 * the path; the previous checkpoint untouched), ZEROC_ERR_REMOTE when another
 * rank failed to write its part.
 */
ZEROC_API zeroc_result_t zeroc_ckpt_save(zeroc_model_t *m, const char *dir, uint64_t step,
                                         const char *app_json);

/*
 * Loads a checkpoint into the model: `path` is DIR (its latest) or a
 * DIR/step_<k> directory. Checks the format, the per-unit layout against the
 * model and every file's size and CRC-32C before anything is changed.
 * *step receives the step; *app_json (may be NULL) a malloc'd copy of the
 * stored "app" object, or NULL. Collective over the model's world.
 * The pipeline-parallel size must be the saved one; the tensor-parallel size
 * may differ (each rank then reads the shards of every old tp rank it needs).
 * Returns ZEROC_ERR_IO (missing files), ZEROC_ERR_CORRUPT (bad manifest,
 * checksum or size, naming the file), ZEROC_ERR_INVALID_ARG (a layout that
 * does not match the model, another pp size, or, when re-splitting, non-zero
 * values where this model only has padding).
 */
ZEROC_API zeroc_result_t zeroc_ckpt_load(zeroc_model_t *m, const char *path, uint64_t *step,
                                         char **app_json);

/*
 * Before a run continues from the checkpoint it loaded from `path` at `step`:
 * refuses a run whose length `run_steps` ends before that step (it would train
 * nothing, and a save would publish a checkpoint whose optimizer is ahead of
 * its step), then compares each of `fields` (NULL-terminated dotted paths such
 * as "model.heads"; NULL checks the step only) between the checkpoint's app
 * object `saved_app` (from zeroc_ckpt_load) and this run's `current_app`: each
 * must be present in the saved object and equal in both. A missing or empty
 * saved object is an error, never a skipped check. Local: every rank reaches
 * the same verdict from the same manifest. `ctx` (may be NULL) receives the
 * message. Returns ZEROC_ERR_INVALID_ARG naming the field (or --steps) and
 * both values, ZEROC_ERR_CORRUPT for a missing or malformed app object.
 */
ZEROC_API zeroc_result_t zeroc_ckpt_check_resume(zeroc_ctx_t *ctx, const char *path, uint64_t step,
                                                 uint64_t run_steps, const char *saved_app,
                                                 const char *current_app,
                                                 const char *const *fields);

#ifdef __cplusplus
}
#endif
#endif
