/*
 * train/dlrm_ckpt.c - DLRM checkpoints: the MLPs' flat shards through
 * zeroc_ckpt (DIR/step_<k>, with the run's shape and data stream in the
 * manifest's app object) and the tables through zeroc_embed_save in
 * DIR/tables_step_<k>, written first: DIR/latest moves only after both exist,
 * so a crash leaves at worst an unreferenced tables directory. Both re-cut on
 * load, so a run resumes at another world size or embedding sharding.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "train/dlrm_run.h"
#include "train/trainer.h"
#include "zeroc/ckpt.h"

/* What a resumed run must share with its checkpoint: the model's shape and the data stream. */
static const char *const RESUME_FIELDS[] = {
    "model.tables",      "model.rows", "model.dim", "model.dense",
    "model.bottom",      "model.top",  "model.hot", "data.source",
    "data.global_batch", "data.seed",  NULL};

static void list(char *buf, size_t n, const int *v, int k) {
  buf[0] = 0;
  for (int i = 0; i < k; i++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%d", i ? "-" : "", v[i]);
}

static void app_json(const zeroc_trainer_t *tr, uint64_t step, char *buf, size_t n) {
  const zeroc_train_config_t *c = &tr->info.config;
  const zeroc_dlrm_config_t *m = &tr->info.dlrm_model;
  char rows[ZEROC_DLRM_MAX_TABLES * 16] = "", bot[128], top[128];
  for (int t = 0; t < m->tables; t++)
    snprintf(rows + strlen(rows), sizeof rows - strlen(rows), "%s%lld", t ? "," : "",
             (long long)m->rows[t]);
  list(bot, sizeof bot, m->bottom, m->nbottom);
  list(top, sizeof top, m->top, m->ntop);
  /* the source as given: a file path must be the same string to resume */
  snprintf(buf, n,
           "{\"model\": {\"name\": \"%s\", \"tables\": %d, \"rows\": \"%s\", \"dim\": %d, "
           "\"dense\": %d, \"bottom\": \"%s\", \"top\": \"%s\", \"hot\": %d}, "
           "\"train\": {\"lr\": %.9g, \"steps\": %d, \"zero\": %d}, "
           "\"data\": {\"step\": %" PRIu64 ", \"source\": \"%s\", \"global_batch\": %d, "
           "\"seed\": %lld}}",
           c->model, m->tables, rows, m->dim, m->dense, bot, top, m->hot, c->lr, c->steps, c->zero,
           step, strpbrk(c->data, "\"\\") ? "(unprintable)" : c->data, tr->info.global_batch,
           (long long)c->seed);
}

zeroc_result_t zeroc__dlrm_save(zeroc_trainer_t *tr, const char *dir, uint64_t step) {
  char tdir[4200], app[4096];
  snprintf(tdir, sizeof tdir, "%s/tables_step_%08" PRIu64, dir, step);
  int root = zeroc_ctx_mesh(tr->ctx)->rank == 0;
  zeroc_result_t r = root ? zeroc__mkdir_p(tdir, 0755) : ZEROC_OK;
  ZEROC_CHECK(zeroc_ctx_agree(tr->ctx, r));
  ZEROC_CHECK(zeroc__tables_save(tr->dlrm->tables, tdir));
  app_json(tr, step, app, sizeof app);
  return zeroc_ckpt_save(tr->model, dir, step, app);
}

zeroc_result_t zeroc__dlrm_resume(zeroc_trainer_t *tr) {
  const zeroc_train_config_t *c = &tr->info.config;
  uint64_t k = 0;
  char *saved = NULL, cur[4096], tdir[4200];
  zeroc_result_t r = zeroc_ckpt_load(tr->model, c->resume, &k, &saved);
  if (!r) {
    app_json(tr, k, cur, sizeof cur);
    r = zeroc_ckpt_check_resume(tr->ctx, c->resume, k, (uint64_t)c->steps, saved, cur,
                                RESUME_FIELDS);
  }
  free(saved);
  ZEROC_CHECK(r);
  /* the tables beside the step directory: `resume` is DIR (its latest) or DIR/step_<k> */
  const char *slash = strrchr(c->resume, '/'), *base = slash ? slash + 1 : c->resume;
  int in_step = !strncmp(base, "step_", 5);
  int dlen = in_step ? (slash ? (int)(slash - c->resume) : 1) : (int)strlen(c->resume);
  snprintf(tdir, sizeof tdir, "%.*s/tables_step_%08" PRIu64, dlen,
           in_step && !slash ? "." : c->resume, k);
  ZEROC_CHECK(zeroc__tables_load(tr->dlrm->tables, tdir));
  tr->next = tr->info.start_step = (int)k; /* <= steps, checked above */
  return ZEROC_OK;
}
