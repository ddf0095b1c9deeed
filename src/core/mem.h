/*
 * core/mem.h - the memory accountant: current and peak bytes per (kind, tag),
 * and the pointer table behind zeroc_mem_free. Thread-safe.
 */
#ifndef ZEROC_CORE_MEM_H
#define ZEROC_CORE_MEM_H

#include <pthread.h>
#include <stddef.h>

#include "zeroc/mem.h"
#include "zeroc/result.h"

typedef struct zeroc__mem_rec {
  void *ptr;
  uint64_t bytes;
  uint8_t kind, tag;
} zeroc__mem_rec_t;

typedef struct zeroc__mem {
  pthread_mutex_t mu;
  zeroc_mem_stats_t st;
  zeroc__mem_rec_t *tab; /* open addressing, ptr == NULL is empty, (void*)1 a tombstone */
  size_t cap, used;
} zeroc__mem_t;

zeroc_result_t zeroc__mem_init(zeroc__mem_t *m);
void zeroc__mem_fini(zeroc__mem_t *m);
/* Counts `bytes` in (kind, tag); negative `delta` releases. */
void zeroc__mem_count(zeroc__mem_t *m, zeroc_memkind_t kind, zeroc_memtag_t tag, int64_t delta);
/* Records an allocation so that untrack finds its size, kind and tag; counts it. */
zeroc_result_t zeroc__mem_track(zeroc__mem_t *m, void *ptr, zeroc_memkind_t kind,
                                zeroc_memtag_t tag, uint64_t bytes);
/* Forgets `ptr`, uncounts it and returns its record; 0 if it was not tracked. */
int zeroc__mem_untrack(zeroc__mem_t *m, void *ptr, zeroc__mem_rec_t *out);
void zeroc__mem_stats(zeroc__mem_t *m, zeroc_mem_stats_t *out);
void zeroc__mem_reset_peak(zeroc__mem_t *m);

/*
 * Frees the struct behind a destroyed public handle (a model, a context) a
 * while later: the last few stay allocated, their magic field already
 * cleared, so that a second destroy or a use after destroy reads a cleared
 * magic and fails with a clean error rather than reading freed memory (which
 * a sanitizer would report and a reused block could hide). Thread-safe.
 */
void zeroc__handle_retire(void *p);

#endif
