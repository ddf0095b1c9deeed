/*
 * core/clock.h - the monotonic clock: timeouts, polling deadlines and
 * per-step timings read it (never the wall clock, which can jump).
 */
#ifndef ZEROC_CORE_CLOCK_H
#define ZEROC_CORE_CLOCK_H

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

#endif
