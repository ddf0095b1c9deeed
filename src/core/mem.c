/*
 * core/mem.c - the memory accountant. Every zeroc allocation is counted here
 * under a kind (device, pinned, host) and a tag (params, grads, ...), with the
 * peak of each and the peak of the per-kind total.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"

#define TOMB ((void *)1)

zeroc_result_t zeroc__mem_init(zeroc__mem_t *m) {
  memset(m, 0, sizeof *m);
  if (pthread_mutex_init(&m->mu, NULL)) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pthread_mutex_init failed");
  m->cap = 1024;
  m->tab = calloc(m->cap, sizeof *m->tab);
  if (!m->tab) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "accountant table of %zu entries", m->cap);
  return ZEROC_OK;
}

void zeroc__mem_fini(zeroc__mem_t *m) {
  free(m->tab);
  m->tab = NULL;
  pthread_mutex_destroy(&m->mu);
}

static void count_locked(zeroc__mem_t *m, zeroc_memkind_t kind, zeroc_memtag_t tag, int64_t d) {
  zeroc_mem_stats_t *s = &m->st;
  s->current[kind][tag] += (uint64_t)d;
  s->current_total[kind] += (uint64_t)d;
  if (s->current[kind][tag] > s->peak[kind][tag]) s->peak[kind][tag] = s->current[kind][tag];
  if (s->current_total[kind] > s->peak_total[kind]) s->peak_total[kind] = s->current_total[kind];
}

void zeroc__mem_count(zeroc__mem_t *m, zeroc_memkind_t kind, zeroc_memtag_t tag, int64_t delta) {
  pthread_mutex_lock(&m->mu);
  count_locked(m, kind, tag, delta);
  pthread_mutex_unlock(&m->mu);
}

static size_t slot_of(const void *p, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)p;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return (size_t)(h & (cap - 1));
}

static int grow_locked(zeroc__mem_t *m) {
  size_t ncap = m->cap * 2;
  zeroc__mem_rec_t *nt = calloc(ncap, sizeof *nt);
  if (!nt) return -1;
  for (size_t i = 0; i < m->cap; i++) {
    void *p = m->tab[i].ptr;
    if (!p || p == TOMB) continue;
    size_t j = slot_of(p, ncap);
    while (nt[j].ptr) j = (j + 1) & (ncap - 1);
    nt[j] = m->tab[i];
  }
  free(m->tab);
  m->tab = nt;
  m->cap = ncap;
  m->used = m->st.allocations;
  return 0;
}

zeroc_result_t zeroc__mem_track(zeroc__mem_t *m, void *ptr, zeroc_memkind_t kind,
                                zeroc_memtag_t tag, uint64_t bytes) {
  pthread_mutex_lock(&m->mu);
  if ((m->used + 1) * 2 > m->cap && grow_locked(m)) {
    pthread_mutex_unlock(&m->mu);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "accountant table growth to %zu entries", m->cap * 2);
  }
  size_t j = slot_of(ptr, m->cap);
  while (m->tab[j].ptr && m->tab[j].ptr != TOMB) j = (j + 1) & (m->cap - 1);
  if (!m->tab[j].ptr) m->used++;
  m->tab[j] = (zeroc__mem_rec_t){ptr, bytes, (uint8_t)kind, (uint8_t)tag};
  m->st.allocations++;
  count_locked(m, kind, tag, (int64_t)bytes);
  pthread_mutex_unlock(&m->mu);
  return ZEROC_OK;
}

int zeroc__mem_untrack(zeroc__mem_t *m, void *ptr, zeroc__mem_rec_t *out) {
  int found = 0;
  pthread_mutex_lock(&m->mu);
  size_t j = slot_of(ptr, m->cap);
  for (size_t n = 0; n < m->cap && m->tab[j].ptr; n++, j = (j + 1) & (m->cap - 1)) {
    if (m->tab[j].ptr == ptr) {
      if (out) *out = m->tab[j];
      count_locked(m, m->tab[j].kind, m->tab[j].tag, -(int64_t)m->tab[j].bytes);
      m->tab[j].ptr = TOMB;
      m->st.allocations--;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return found;
}

void zeroc__mem_stats(zeroc__mem_t *m, zeroc_mem_stats_t *out) {
  pthread_mutex_lock(&m->mu);
  *out = m->st;
  pthread_mutex_unlock(&m->mu);
}

void zeroc__mem_reset_peak(zeroc__mem_t *m) {
  pthread_mutex_lock(&m->mu);
  memcpy(m->st.peak, m->st.current, sizeof m->st.peak);
  memcpy(m->st.peak_total, m->st.current_total, sizeof m->st.peak_total);
  pthread_mutex_unlock(&m->mu);
}

/* ---- retired handles ----------------------------------------------------------- */

#define RETIRED_MAX 64

static struct {
  pthread_mutex_t mu;
  void *p[RETIRED_MAX];
  int next;
} retired = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

void zeroc__handle_retire(void *p) {
  if (!p) return;
  pthread_mutex_lock(&retired.mu);
  void *old = retired.p[retired.next];
  retired.p[retired.next] = p;
  retired.next = (retired.next + 1) % RETIRED_MAX;
  pthread_mutex_unlock(&retired.mu);
  free(old); /* the oldest: long enough ago */
}
