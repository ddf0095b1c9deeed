/*
 * core/clock.h - the monotonic clock: timeouts, polling deadlines and
 * per-step timings read it (never the wall clock, which can jump).
 */
#ifndef ZEROC_CORE_CLOCK_H
#define ZEROC_CORE_CLOCK_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Seconds since an arbitrary fixed point. */
static inline double zeroc__now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds since the same point. */
static inline double zeroc__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Nanoseconds since the same point, as an integer (fits an atomic). */
static inline uint64_t zeroc__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A poll loop's back-off, one call per unsuccessful look: the first `spins` calls
 * return at once, the next `yields` yield the core, the rest sleep from 1 us up to
 * 1 ms. Returns 1 when it slept (the loop's moment for slower checks). */
typedef struct zeroc__backoff {
  unsigned n;
  long ns;
} zeroc__backoff_t;
#define ZEROC__BACKOFF_INIT                                                                        \
  { 0, 1000 }

static inline int zeroc__backoff(zeroc__backoff_t *b, unsigned spins, unsigned yields) {
  unsigned n = b->n++;
  if (n < spins) return 0;
  if (n < spins + yields) {
    sched_yield();
    return 0;
  }
  struct timespec ts = {0, b->ns};
  nanosleep(&ts, NULL);
  if (b->ns < 1000000) b->ns += b->ns / 4 + 1000;
  return 1;
}

#endif
