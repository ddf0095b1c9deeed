/*
 * core/watchdog.h - what every rank on a node is doing, for diagnosing hangs.
 *
 * Ranks on one node share a small status board (an MPI shared-memory window):
 * per rank its pid and phase, per stream channel the collective it is in and
 * since when. A rank polling a collective asks, twice a second, whether a
 * node-local peer of that group has exited or been stopped, and fails at once
 * naming it; at the timeout it describes where each peer is. Peers on other
 * nodes are watched by the node leaders' heartbeat (core/heartbeat.h), which
 * posts a lost node here.
 */
#ifndef ZEROC_CORE_WATCHDOG_H
#define ZEROC_CORE_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"

struct zeroc_group;

zeroc_result_t zeroc__watchdog_init(zeroc_ctx_t *ctx);
/* Marks this rank as inside zeroc_ctx_finalize's final collective: peers
 * there too do not count it as lost, peers still in an ordinary collective
 * do (after a short grace). */
void zeroc__watchdog_finalizing(zeroc_ctx_t *ctx);
/* Marks this rank as finished, once the final collective has completed (or as
 * failed, with its last error as the cause peers quote). */
void zeroc__watchdog_fini(zeroc_ctx_t *ctx, int failed);
/* Frees the board. With `collective` (the collective shutdown: every
 * node-local rank calls it) the shared window too; otherwise only this rank's
 * handles, and MPI_Finalize frees the small window. */
void zeroc__watchdog_free(zeroc_ctx_t *ctx, int collective);
/* Records what this rank is doing now ("forward unit 3"), for others' messages. */
void zeroc__watchdog_phase(zeroc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void zeroc__watchdog_enter(zeroc_ctx_t *ctx, struct zeroc_group *g, int channel, const char *op,
                          uint64_t seq);
void zeroc__watchdog_leave(zeroc_ctx_t *ctx, int channel);
/* Posts that another node is lost (core/heartbeat.c): from then on every
 * node-local rank's peer_lost reports `text`. The first post wins. */
void zeroc__watchdog_post(zeroc_ctx_t *ctx, const char *text);
/* Non-zero, with a message in `why`, when a node-local member of `g` has
 * exited or is stopped, or another node was posted as lost. */
int zeroc__watchdog_peer_lost(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n);
/* Describes where the members of `g` are (for a timeout message). */
void zeroc__watchdog_describe(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n);

#endif
