/*
 * model/dlrm_ckpt.c - what DLRM checkpoints hold beyond the MLPs' flat shards
 * (which the trainer writes through zeroc_ckpt in DIR/step_<k>): the
 * manifest's app object (the run's shape and data stream, what a resume must
 * match) and the tables through zeroc_embed_save in DIR/tables_step_<k>,
 * written first: DIR/latest moves only after both exist, so a crash leaves at
 * worst an unreferenced tables directory. Both re-cut on load, so a run
 * resumes at another world size or embedding sharding.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/files.h"
#include "model/dlrm_run.h"
#include "runtime/runtime.h"

/* What a resumed run must share with its checkpoint: the model's shape and the data stream. */
const char *const zeroc__dlrm_resume_fields[] = {
    "model.tables",      "model.rows", "model.dim", "model.dense",
    "model.bottom",      "model.top",  "model.hot", "data.source",
    "data.global_batch", "data.seed",  NULL};

static void list(char *buf, size_t n, const int *v, int k) {
  buf[0] = 0;
  for (int i = 0; i < k; i++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%d", i ? "-" : "", v[i]);
}

void zeroc__dlrm_app_json(void *self, uint64_t step, char *buf, size_t n) {
  const zeroc__dlrm_run_t *d = self;
  const zeroc_train_config_t *c = &d->info->config;
  const zeroc_dlrm_config_t *m = &d->info->dlrm_model;
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
           step, strpbrk(c->data, "\"\\") ? "(unprintable)" : c->data, d->info->global_batch,
           (long long)c->seed);
}

zeroc_result_t zeroc__dlrm_save_tables(void *self, const char *dir, uint64_t step) {
  zeroc__dlrm_run_t *d = self;
  char tdir[4200];
  snprintf(tdir, sizeof tdir, "%s/tables_step_%08" PRIu64, dir, step);
  int root = zeroc_ctx_mesh(d->ctx)->rank == 0;
  zeroc_result_t r = root ? zeroc__mkdir_p(tdir, 0755) : ZEROC_OK;
  ZEROC_CHECK(zeroc_ctx_agree(d->ctx, r));
  return zeroc__tables_save(d->tables, tdir);
}

zeroc_result_t zeroc__dlrm_load_tables(void *self, const char *dir, uint64_t step) {
  zeroc__dlrm_run_t *d = self;
  char tdir[4200];
  snprintf(tdir, sizeof tdir, "%s/tables_step_%08" PRIu64, dir, step);
  return zeroc__tables_load(d->tables, tdir);
}
