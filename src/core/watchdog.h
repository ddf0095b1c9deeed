/*
 * core/watchdog.h - what every rank on a node is doing, for diagnosing hangs.
 *
 * Ranks on one node share a small status board (an MPI shared-memory window):
 * per rank its pid and phase, per stream channel the collective it is in and
 * since when. A rank polling a collective asks, twice a second, whether a
 * node-local peer of that group has exited or been stopped, and fails at once
 * naming it; at the timeout it describes where each peer is. Peers on other
 * nodes are only covered by the timeout.
 */
#ifndef ZEROC_CORE_WATCHDOG_H
#define ZEROC_CORE_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"

struct zeroc_group;

zeroc_result_t zeroc__watchdog_init(zeroc_ctx_t *ctx);
/* Marks this rank as finished (peers waiting on it are told so). */
void zeroc__watchdog_fini(zeroc_ctx_t *ctx, int failed);
/* Frees the board: collective over the node (call from the collective
 * shutdown); a context destroyed without it leaks the small window until
 * MPI_Finalize. */
void zeroc__watchdog_free(zeroc_ctx_t *ctx);
/* Records what this rank is doing now ("forward unit 3"), for others' messages. */
void zeroc__watchdog_phase(zeroc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void zeroc__watchdog_enter(zeroc_ctx_t *ctx, struct zeroc_group *g, int channel, const char *op,
                          uint64_t seq);
void zeroc__watchdog_leave(zeroc_ctx_t *ctx, int channel);
/* Non-zero, with a message in `why`, when a node-local member of `g` has
 * exited or is stopped. */
int zeroc__watchdog_peer_lost(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n);
/* Describes where the members of `g` are (for a timeout message). */
void zeroc__watchdog_describe(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n);

#endif
