/*
 * apps/dlrm_cli.h - `zeroc plan` and `zeroc bench` for the DLRM models
 * (apps/plan_dlrm.c, apps/bench_dlrm.c); `zeroc train` has its own
 * (apps/train_dlrm.c). zeroc.c sends a command here when --model names a
 * DLRM preset (ztrain_is_dlrm).
 */
#ifndef ZEROC_APPS_DLRM_CLI_H
#define ZEROC_APPS_DLRM_CLI_H

#include "zeroc/dlrm.h"
#include "zeroc/train.h"

/* The DLRM presets and the table shardings as the flags name them (one list each, in the
 * order of zeroc_embed_sharding_t for the shardings). */
extern const char *const zdlrm_models[];    /* dlrm-tiny, dlrm, dlrm-mlperf */
extern const char *const zdlrm_shardings[]; /* auto, table, column, row, data */

/* The model's shape as train, plan and bench read it: one flag table, one set of limits. */
typedef struct zdlrm_shape {
  int model, tables, dim, dense, batch; /* 0: the preset's (model: an index in zdlrm_models) */
  const char *rows, *bottom, *top;      /* NULL: the preset's */
} zdlrm_shape_t;

/* The zarg_t rows of the shape flags (apps/args.h), for a zdlrm_shape_t *sh. */
#define ZDLRM_SHAPE_ARGS(sh)                                                                       \
  {"--model", ARG_CHOICE, &(sh)->model, 0, 0, 0, zdlrm_models, NULL},                             \
      {"--tables", ARG_INT, &(sh)->tables, 1, ZEROC_DLRM_MAX_TABLES, 0, NULL, NULL},               \
      {"--rows", ARG_STRING, &(sh)->rows, 0, 0, 0, NULL, NULL},                                    \
      {"--dim", ARG_INT, &(sh)->dim, 1, 4096, 0, NULL, NULL},                                      \
      {"--dense", ARG_INT, &(sh)->dense, 1, 65536, 0, NULL, NULL},                                 \
      {"--bottom", ARG_STRING, &(sh)->bottom, 0, 0, 0, NULL, NULL},                                \
      {"--top", ARG_STRING, &(sh)->top, 0, 0, 0, NULL, NULL},                                      \
      {"--batch", ARG_INT, &(sh)->batch, ZARG_LIM_BATCH, 0, NULL, NULL}

/* Copies the shape into a training configuration (model name, tables, rows, widths, batch). */
void zdlrm_shape_apply(const zdlrm_shape_t *sh, zeroc_train_config_t *c);

void zplan_dlrm_usage(void);
int zplan_dlrm_run(int argc, char **argv);
int zbench_dlrm_run(int argc, char **argv);

#endif
