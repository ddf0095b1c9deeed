/*
 * apps/train_stop.h - `zeroc train` stopped by the cluster: SIGTERM (Slurm's
 * preemption, scancel, the time limit), SIGINT or SIGUSR1 (`--signal=B:USR1@N`,
 * forwarded by mpirun) to any rank. The handler only sets a flag; at every step
 * boundary the ranks agree on it (one 8-byte all-reduce), save a checkpoint
 * there, print one line and exit ZTRAIN_EXIT_STOPPED. A second signal ends the
 * process at once: the save in flight is staged apart (persist/ckpt_save.c), so
 * the previous checkpoint stays the latest.
 */
#ifndef ZEROC_APPS_TRAIN_STOP_H
#define ZEROC_APPS_TRAIN_STOP_H

#include "zeroc/zeroc.h"

/* The exit status of a run stopped by a signal at a step boundary (sysexits'
 * EX_TEMPFAIL: try again later, with --resume). docs/cli.md. */
#define ZTRAIN_EXIT_STOPPED 75

/* Installs the handlers of SIGTERM, SIGINT and SIGUSR1 (with SA_RESTART). */
void ztrain_stop_arm(void);
/* Puts the previous handlers back. */
void ztrain_stop_disarm(void);

/* Collective over ctx's world: 0 when no rank has been signalled, else the
 * signal (the largest number among the ranks that got one) and *rank the
 * largest such rank. A failed all-reduce is returned through *r. */
int ztrain_stop_agree(zeroc_ctx_t *ctx, int *rank, zeroc_result_t *r);

/* Rank 0's one line on stderr: the signal, the step, what was saved and the
 * command that resumes. `saved`: a checkpoint of `step` was written in `save`;
 * else `save` NULL means there is no --save. `argv`: train's flags, for the
 * resume command; `world`: the ranks. */
void ztrain_stop_report(int sig, int rank, int step, int steps, const char *save, int saved,
                        const char *resume, int argc, char **argv, int world);

#endif
