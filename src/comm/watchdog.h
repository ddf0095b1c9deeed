/*
 * comm/watchdog.h - what every rank on a node is doing, for diagnosing hangs.
 *
 * Ranks on one node share a small status board (an MPI shared-memory window):
 * per rank its pid and phase, per stream channel the collective it is in and
 * since when. A rank polling a collective asks, twice a second, whether a
 * node-local peer of that group has exited or been stopped, and fails at once
 * naming it; at the timeout it describes where each peer is. Peers on other
 * nodes are watched by the node leaders' heartbeat (comm/heartbeat.h), which
 * posts a lost node here.
 *
 * The board knows nothing of the context: it is given this rank's place
 * (zeroc__place_t) at creation. A NULL board (shared memory unavailable) is
 * valid everywhere and does nothing.
 */
#ifndef ZEROC_COMM_WATCHDOG_H
#define ZEROC_COMM_WATCHDOG_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "zeroc/result.h"

struct zeroc_group;
typedef struct zeroc__watchdog zeroc__watchdog_t;

/* Where this rank sits in the job and on its node; filled by the context,
 * whose tables outlive the board and the heartbeat that read them. */
typedef struct zeroc__place {
  MPI_Comm world_comm; /* the context's world */
  MPI_Comm node_comm;  /* the ranks of this node */
  int world_rank, world_size;
  int local_rank, local_size;
  const int *local_of_world; /* node-local index of each world rank on this node, -1 elsewhere */
  const char *host;
} zeroc__place_t;

/* Collective over place->node_comm. *out may be NULL on success: without a
 * shared window, diagnostics degrade to the plain timeout. */
zeroc_result_t zeroc__watchdog_create(const zeroc__place_t *place, zeroc__watchdog_t **out);
/* Marks this rank as inside zeroc_ctx_finalize's final collective: peers
 * there too do not count it as lost, peers still in an ordinary collective
 * do (after a short grace). */
void zeroc__watchdog_finalizing(zeroc__watchdog_t *wd);
/* Back from finalizing to running: zeroc_ctx_finalize refused (a model is
 * still alive) after its final collective, on every rank alike. */
void zeroc__watchdog_running(zeroc__watchdog_t *wd);
/* Marks this rank as finished, once the final collective has completed, or
 * as failed with `cause` (its last error) as the text peers quote. */
void zeroc__watchdog_fini(zeroc__watchdog_t *wd, int failed, const char *cause);
/* Frees the board. With `collective` (the collective shutdown: every
 * node-local rank calls it) the shared window too; otherwise only this rank's
 * handles, and MPI_Finalize frees the small window. */
void zeroc__watchdog_free(zeroc__watchdog_t *wd, int collective);
/* Records what this rank is doing now ("forward unit 3"), for others' messages.
 * (Upper layers use the context's zeroc__watchdog_phase, runtime/runtime.h.) */
void zeroc__watchdog_vphase(zeroc__watchdog_t *wd, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void zeroc__watchdog_enter(zeroc__watchdog_t *wd, struct zeroc_group *g, int channel,
                           const char *op, uint64_t seq);
void zeroc__watchdog_leave(zeroc__watchdog_t *wd, int channel);
/* Posts that another node is lost (comm/heartbeat.c): from then on every
 * node-local rank's peer_lost reports `text`. The first post wins. */
void zeroc__watchdog_post(zeroc__watchdog_t *wd, const char *text);
/* Non-zero, with a message in `why`, when a node-local member of `g` has
 * exited or is stopped, or another node was posted as lost. */
int zeroc__watchdog_peer_lost(zeroc__watchdog_t *wd, struct zeroc_group *g, char *why, size_t n);
/* Describes where the members of `g` are (for a timeout message). */
void zeroc__watchdog_describe(zeroc__watchdog_t *wd, struct zeroc_group *g, char *why, size_t n);

#endif
