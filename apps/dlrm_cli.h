/*
 * apps/dlrm_cli.h - `zeroc plan` and `zeroc bench` for the DLRM models
 * (apps/plan_dlrm.c, apps/bench_dlrm.c); `zeroc train` has its own
 * (apps/train_dlrm.c). zeroc.c sends a command here when --model names a
 * DLRM preset (ztrain_is_dlrm).
 */
#ifndef ZEROC_APPS_DLRM_CLI_H
#define ZEROC_APPS_DLRM_CLI_H

extern const char *const zdlrm_models[]; /* dlrm-tiny, dlrm, dlrm-mlperf (train's order) */

void zplan_dlrm_usage(void);
int zplan_dlrm_run(int argc, char **argv);
int zbench_dlrm_run(int argc, char **argv);

#endif
