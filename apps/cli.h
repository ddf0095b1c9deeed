/*
 * apps/cli.h - the subcommands of the zeroc command. Each returns the process
 * exit status: 0 success, 1 failure, 2 bad usage (nothing written).
 */
#ifndef ZEROC_APPS_CLI_H
#define ZEROC_APPS_CLI_H

#include "zeroc/train.h"

int zeroc_cmd_info(int argc, char **argv);
int zeroc_cmd_plan(int argc, char **argv);
int zeroc_cmd_train(int argc, char **argv);
int zeroc_cmd_bench(int argc, char **argv);
int zeroc_cmd_sample(int argc, char **argv);
int zeroc_cmd_data(int argc, char **argv);

/* `zeroc train` with a hook: `on_step` (may be NULL) is called on every rank
 * with each step's figures, after the step's metrics line and progress. bench
 * runs each layout so and keeps the figures. Returns the exit status. */
typedef void (*zeroc_train_step_fn)(void *user, const zeroc_train_metrics_t *m);
int zeroc_train_run(int argc, char **argv, zeroc_train_step_fn on_step, void *user);

/* Parses argv as `zeroc train` flags and nothing more (no MPI, no files):
 * 0, or 2 after train's one-line error. bench checks its --train flags so. */
int zeroc_train_check_flags(int argc, char **argv);

#endif
