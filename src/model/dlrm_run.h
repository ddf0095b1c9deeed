/*
 * model/dlrm_run.h - the DLRM's run as the trainer drives it through the model
 * interface (zeroc/arch.h): its state and the functions of its table, shared by
 * dlrm_arch.c (the config and the table), dlrm_run.c (build, step, evaluation)
 * and dlrm_ckpt.c (checkpoints).
 *
 * Per step (grad_accum 1): each rank reads its B samples of the global batch
 * (samples s*G + dp_rank*B ..), the tables pool their bags, the MLPs run as
 * sharded units with the pooled rows in the batch, the pooled rows' gradient
 * goes back to the tables (AdaGrad at this step's learning rate), and the
 * trainer's zeroc_model_step updates the MLPs.
 */
#ifndef ZEROC_MODEL_DLRM_RUN_H
#define ZEROC_MODEL_DLRM_RUN_H

#include "io/clicks.h"
#include "model/dlrm_tables.h"
#include "zeroc/arch.h"
#include "zeroc/dlrm.h"
#include "zeroc/train.h"

typedef struct zeroc__dlrm_run {
  zeroc_ctx_t *ctx;
  zeroc_train_info_t *info; /* the trainer's: config, shape (dlrm_model), figures */
  int dp_rank;
  zeroc_model_t *model; /* the MLPs' shards */
  zeroc_dlrm_t *dlrm;
  zeroc__clicks_t *data, *val;
  zeroc__tables_t *tables;
  zeroc__click_batch_t hb;                  /* host batch */
  float *dense, *labels, *pooled, *dpooled; /* device */
  uint64_t val_first;
  int nval;                                  /* held-out samples: val_batches x global batch */
  float *val_labels, *val_logits, *val_prob; /* (nval) host */
} zeroc__dlrm_run_t;

/* dlrm_arch.c: the shape of c's preset with its overrides into info->dlrm_model
 * (mesh unused, may be NULL), the model's defaults into c. */
zeroc_result_t zeroc__dlrm_resolve(zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                                   zeroc_train_info_t *info);

/* dlrm_run.c */
zeroc_result_t zeroc__dlrm_create(const zeroc_arch_run_t *run, void **self);
void zeroc__dlrm_destroy(void *self);
zeroc_result_t zeroc__dlrm_run_step(void *self, int step, float lr, zeroc_pipeline_stats_t *pst);
zeroc_result_t zeroc__dlrm_evaluate(void *self, double *loss, double *auc, double *logloss);

/* dlrm_ckpt.c */
extern const char *const zeroc__dlrm_resume_fields[];
void zeroc__dlrm_app_json(void *self, uint64_t step, char *buf, size_t n);
zeroc_result_t zeroc__dlrm_save_tables(void *self, const char *dir, uint64_t step);
zeroc_result_t zeroc__dlrm_load_tables(void *self, const char *dir, uint64_t step);

#endif
