/*
 * core/fault.h - fault injection for the reliability tests: TEST-ONLY, off
 * unless the ZEROC_FAULT environment variable is set (read once, by
 * zeroc_ctx_create, and announced with a warning on every rank it arms).
 *
 * ZEROC_FAULT holds specs separated by ';', each
 *     ACTION@POINT[:rank=R][:step=K|K-L][:hit=N]
 *   ACTION  kill (SIGKILL itself), stop (SIGSTOP itself), hang (sleep forever,
 *           a stuck rank), exit (_exit(3) without finalising), sleep=SECONDS,
 *           and at the point `grad` only: nan, inf, set=VALUE (one gradient
 *           element takes that value).
 *   POINT   forward, backward, step, grad (a unit's full gradient, before its
 *           reduction), ckpt.stage, ckpt.shard (the shard file half written),
 *           ckpt.written, ckpt.manifest, ckpt.publish, ckpt.latest (the last
 *           three on world rank 0 only), ckpt.load, finalize (entering
 *           zeroc_ctx_finalize; its step is 0), data.commit (`zeroc data`
 *           putting its files in place: step = the files already placed, rank 0;
 *           read from the environment by zeroc_text_prepare itself).
 *   rank    world rank that acts (default: every rank).
 *   step    optimizer step (1-based, the one being computed; a skipped step
 *           does not advance it) or checkpoint step; default any.
 *   hit     act only on the N-th matching call on this rank (default: every).
 * Example: ZEROC_FAULT='kill@ckpt.shard:rank=2:step=8;nan@grad:rank=1:step=3:hit=1'
 */
#ifndef ZEROC_CORE_FAULT_H
#define ZEROC_CORE_FAULT_H

#include <stdint.h>

#include "zeroc/result.h"

typedef struct zeroc__fault zeroc__fault_t;

/* Parses a ZEROC_FAULT text. NULL or "" gives *out = NULL (nothing armed).
 * Returns ZEROC_ERR_INVALID_ARG naming the spec and what is accepted,
 * ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__fault_parse(const char *text, zeroc__fault_t **out);
/* A spec naming a rank >= `world` would never fire: ZEROC_ERR_INVALID_ARG.
 * NULL (nothing armed) is fine. */
zeroc_result_t zeroc__fault_check_ranks(const zeroc__fault_t *f, int world);
void zeroc__fault_free(zeroc__fault_t *f);

/* Number of specs parsed (for tests). */
int zeroc__fault_count(const zeroc__fault_t *f);

/*
 * The point `point` is reached by world rank `rank` at `step`. A matching
 * process action is carried out here (kill, exit and hang never return; stop
 * returns once continued; sleep returns after the delay). A matching value
 * action returns 1 with *value set (value may be NULL at points that take no
 * value: such specs are refused by the parser). Otherwise returns 0.
 */
int zeroc__fault_hit(zeroc__fault_t *f, int rank, const char *point, uint64_t step, double *value);

/* zeroc__fault_hit with faults `f` (may be NULL: nothing armed, free) and world rank `rank`. */
#define ZEROC_FAULT_IN(f, rank, point, step, value)                                                \
  ((f) ? zeroc__fault_hit((f), (rank), (point), (step), (value)) : 0)

/* (ZEROC_FAULT_AT, the same with a context's faults and rank, is in runtime/runtime.h.) */

#endif
