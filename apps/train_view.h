/*
 * apps/train_view.h - one training loop for every model (apps/train.c): what it
 * needs of a model's command line (the job) and how that model's run is shown
 * (the view: header, progress line, --metrics line, summary). The GPT's view is
 * in apps/train.c, the DLRM's in apps/train_dlrm.c.
 */
#ifndef ZEROC_APPS_TRAIN_VIEW_H
#define ZEROC_APPS_TRAIN_VIEW_H

#include <stdio.h>

#include "zeroc/zeroc.h"

struct ztrain_sample;
struct ztrain_view;

/* A training run as the flags describe it, for whichever model. */
typedef struct ztrain_job {
  zeroc_ctx_config_t cc;
  zeroc_train_config_t tc;
  const char *metrics, *save, *export_path, *resume; /* as given, or NULL */
  int quiet, print_topology;
  const struct ztrain_view *view;
  const void *opts;          /* the view's own parsed flags */
  struct ztrain_sample *smp; /* --sample-every (a model with a sampler), or NULL */
  int argc;                  /* train's flags as given: the resume command of a stop */
  char **argv;
  int stop_on_signal; /* SIGTERM, SIGINT, SIGUSR1 stop at a step boundary (apps/train_stop.h) */
} ztrain_job_t;

typedef struct ztrain_view {
  /* rank 0, before the first step (not with --quiet) */
  void (*header)(const ztrain_job_t *j, const zeroc_train_info_t *in, const zeroc_mesh_info_t *mesh,
                 double startup_s);
  /* rank 0, at the loop's cadence (not with --quiet); `tty`: rewritten in place */
  void (*progress)(const zeroc_train_metrics_t *m, const zeroc_train_info_t *in, int tty);
  /* rank 0, one --metrics line per step (the fields docs/cli.md lists) */
  void (*metrics)(FILE *f, const zeroc_train_metrics_t *m, const zeroc_train_info_t *in);
  /* rank 0, after the run (not with --quiet); `ms`: the step times of this run */
  void (*summary)(const ztrain_job_t *j, const zeroc_train_info_t *in, zeroc_ctx_t *ctx,
                  const double *ms, double t_total, double first_loss,
                  const zeroc_train_metrics_t *last);
} ztrain_view_t;

/* The DLRM's command line (apps/train_dlrm.c) into *job. Returns 0, or 2 after
 * the one-line error. */
int ztrain_dlrm_job(int argc, char **argv, ztrain_job_t *job);

#endif
