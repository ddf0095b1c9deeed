/*
 * apps/cli.h - the subcommands of the zeroc command. Each returns the process
 * exit status: 0 success, 1 failure, 2 bad usage (nothing written).
 */
#ifndef ZEROC_APPS_CLI_H
#define ZEROC_APPS_CLI_H

int zeroc_cmd_info(int argc, char **argv);
int zeroc_cmd_plan(int argc, char **argv);
int zeroc_cmd_train(int argc, char **argv);
int zeroc_cmd_bench(int argc, char **argv);

/* Parses argv as `zeroc train` flags and nothing more (no MPI, no files):
 * 0, or 2 after train's one-line error. bench checks its --train flags so. */
int zeroc_train_check_flags(int argc, char **argv);

#endif
