/*
 * offload/pool.c - the pinned-buffer pool: page-aligned host buffers bound to
 * the rank's NUMA node, cached per size class so the step loop allocates
 * nothing, every byte counted as ZEROC_MEM_PINNED.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/log.h"
#include "offload/offload.h"

/* Size classes: 4 KiB steps up to 32 KiB, then 8 classes per power of two,
 * so a buffer is at most 12.5% larger than asked and a class index is small. */
#define SMALL_MAX 32768u
#define NCLASS    400
#define HUGE_MIN  ((size_t)2 << 20)

enum { FROM_ALIGNED = 0, FROM_HWLOC = 1 };

typedef struct rec {
  void *ptr;
  size_t cap;
  uint16_t cls;
  uint8_t tag;
  uint8_t out;  /* handed out (1) or cached (0) */
  uint8_t how;  /* FROM_ALIGNED or FROM_HWLOC */
  uint8_t cuda; /* registered with cudaHostRegister */
} rec_t;

struct zeroc__pinned_pool {
  zeroc__mem_t *mem;
  hwloc_topology_t topo;
  pthread_mutex_t mu;
  hwloc_nodeset_t nodeset; /* the rank's NUMA node, NULL when unknown */
  int numa;
  int cuda;    /* page-lock for the GPU */
  rec_t *recs; /* sorted by ptr, for put's lookup */
  size_t nrec, caprec;
  /* Cached buffers of each class, linked through their first 8 bytes (a
   * cached buffer holds nothing else), so get and put are O(1) + a search. */
  void *head[NCLASS];
  zeroc__pinned_stats_t st;
};

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t zeroc__pinned_class_size(size_t bytes) {
  if (bytes == 0) return 0;
  size_t n = round_up(bytes, ZEROC_OFFLOAD_ALIGN);
  if (n <= SMALL_MAX) return n;
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  return round_up(n, (size_t)1 << (p - 3));
}

static int class_index(size_t cs) {
  if (cs <= SMALL_MAX) return (int)(cs / ZEROC_OFFLOAD_ALIGN) - 1;
  int p = 63 - __builtin_clzll((unsigned long long)(cs - 1));
  size_t step = (size_t)1 << (p - 3);
  int j = (int)((cs - ((size_t)1 << p)) / step); /* 1..8 */
  return 8 + (p - 15) * 8 + (j - 1);
}

zeroc_result_t zeroc__pinned_pool_create(const zeroc__pool_env_t *env, zeroc__pinned_pool_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__pinned_pool_t *p = NULL;
  if (!env || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__pinned_pool_create(env %p, out %p): both are required",
                      (const void *)env, (void *)out);
  *out = NULL;
  p = calloc(1, sizeof *p);
  if (!p) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pinned pool struct of %zu bytes", sizeof *p);
  p->mem = env->mem;
  p->topo = env->topo;
  p->numa = -1;
  if (pthread_mutex_init(&p->mu, NULL)) {
    free(p);
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pthread_mutex_init for the pinned pool failed");
  }
  if (env->topo && env->numa >= 0) {
    p->nodeset = hwloc_bitmap_alloc();
    if (!p->nodeset) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "hwloc_bitmap_alloc for the pool's nodeset");
      goto fail;
    }
    hwloc_bitmap_only(p->nodeset, (unsigned)env->numa);
    p->numa = env->numa;
  }
  p->st.numa = p->numa;
#ifdef ZEROC_HAVE_CUDA
  p->cuda = env->device == ZEROC_DEVICE_CUDA;
#endif
  ZINFO(OFFLOAD, "pinned pool: NUMA node %d%s", p->numa,
        p->cuda ? ", page-locked for the GPU" : "");
  *out = p;
  return ZEROC_OK;
fail:
  pthread_mutex_destroy(&p->mu);
  free(p);
  return res;
}

/* Index of the record of `ptr`, or of where it would go (sorted insert). */
static size_t rec_search(const zeroc__pinned_pool_t *p, const void *ptr, int *found) {
  size_t lo = 0, hi = p->nrec;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)p->recs[mid].ptr < (uintptr_t)ptr)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < p->nrec && p->recs[lo].ptr == ptr;
  return lo;
}

static void sys_free(zeroc__pinned_pool_t *p, rec_t *r) {
#ifdef ZEROC_HAVE_CUDA
  if (r->cuda) zeroc__offload_cuda_unregister(r->ptr);
#endif
  zeroc__mem_untrack(p->mem, r->ptr, NULL);
  if (r->how == FROM_HWLOC)
    hwloc_free(p->topo, r->ptr, r->cap);
  else
    free(r->ptr);
  p->st.frees++;
}

/* Allocates a new buffer of class size `cs` and records it (mutex held). */
static zeroc_result_t sys_alloc(zeroc__pinned_pool_t *p, size_t cs, int cls, zeroc_memtag_t tag,
                                void **buf) {
  zeroc_result_t res = ZEROC_OK;
  rec_t r = {NULL, cs, (uint16_t)cls, (uint8_t)tag, 1, FROM_ALIGNED, 0};
  int tracked = 0;
  if (p->nrec == p->caprec) {
    size_t ncap = p->caprec ? p->caprec * 2 : 64;
    rec_t *nr = realloc(p->recs, ncap * sizeof *nr);
    if (!nr) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pinned pool table of %zu entries", ncap);
    p->recs = nr;
    p->caprec = ncap;
  }
  if (p->nodeset) {
    /* Without HWLOC_MEMBIND_STRICT hwloc falls back to a plain allocation
     * where binding is not supported, which is what we want. */
    r.ptr =
        hwloc_alloc_membind(p->topo, cs, p->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    r.how = FROM_HWLOC;
  } else {
    r.ptr = aligned_alloc(ZEROC_OFFLOAD_ALIGN, cs);
  }
  if (!r.ptr)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "%s of %zu bytes of pinned memory for %s (NUMA node %d): %s",
                      r.how == FROM_HWLOC ? "hwloc_alloc_membind" : "aligned_alloc", cs,
                      zeroc_memtag_name(tag), p->numa, strerror(errno));
  /* Transparent huge pages keep a large buffer physically contiguous in 2 MiB
   * runs, so an O_DIRECT request carries a few scatter-gather segments instead
   * of one per 4 KiB page: on the virtio disk measured (254 segments at most
   * per request) scattered 4 KiB pages cost 2-3x in bandwidth (RESULTS.md,
   * issue 6). A hint: where THP is off it changes nothing. */
  if (cs >= HUGE_MIN) madvise(r.ptr, cs, MADV_HUGEPAGE);
  ZEROC_TRY(zeroc__mem_track(p->mem, r.ptr, ZEROC_MEM_PINNED, tag, cs));
  tracked = 1;
#ifdef ZEROC_HAVE_CUDA
  if (p->cuda) {
    ZEROC_TRY(zeroc__offload_cuda_register(r.ptr, cs));
    r.cuda = 1;
  }
#endif
  int found;
  size_t at = rec_search(p, r.ptr, &found);
  memmove(p->recs + at + 1, p->recs + at, (p->nrec - at) * sizeof *p->recs);
  p->recs[at] = r;
  p->nrec++;
  p->st.allocs++;
  *buf = r.ptr;
  return ZEROC_OK;
fail:
  if (tracked) zeroc__mem_untrack(p->mem, r.ptr, NULL);
  if (r.how == FROM_HWLOC)
    hwloc_free(p->topo, r.ptr, cs);
  else
    free(r.ptr);
  return res;
}

zeroc_result_t zeroc__pinned_get(zeroc__pinned_pool_t *p, size_t bytes, zeroc_memtag_t tag,
                                 void **buf) {
  zeroc_result_t res = ZEROC_OK;
  if (!p || !buf)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__pinned_get(pool %p, buf %p): both are required", (void *)p,
                      (void *)buf);
  *buf = NULL;
  if (bytes == 0 || bytes > ((size_t)1 << 56))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pinned_get: %zu bytes; accepted: 1 .. 2^56",
                      bytes);
  if ((unsigned)tag >= ZEROC_TAG_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pinned_get: tag %d; accepted: 0 .. %d",
                      (int)tag, ZEROC_TAG_COUNT - 1);
  size_t cs = zeroc__pinned_class_size(bytes);
  int cls = class_index(cs);
  pthread_mutex_lock(&p->mu);
  p->st.gets++;
  void *b = p->head[cls];
  if (b) {
    int found;
    rec_t *r = &p->recs[rec_search(p, b, &found)];
    p->head[cls] = *(void **)b;
    r->out = 1;
    if (r->tag != tag) {
      /* Re-counted under the new owner's tag, so the accountant's split by
       * purpose stays right when a staging buffer changes hands. */
      zeroc__mem_untrack(p->mem, b, NULL);
      res = zeroc__mem_track(p->mem, b, ZEROC_MEM_PINNED, tag, r->cap);
      if (res != ZEROC_OK) {
        r->out = 0;
        *(void **)b = p->head[cls];
        p->head[cls] = b;
        goto fail;
      }
      r->tag = (uint8_t)tag;
    }
    p->st.hits++;
    p->st.bytes_cached -= cs;
  } else {
    ZEROC_TRY(sys_alloc(p, cs, cls, tag, &b));
  }
  p->st.bytes_out += cs;
  *buf = b;
  pthread_mutex_unlock(&p->mu);
  return ZEROC_OK;
fail:
  pthread_mutex_unlock(&p->mu);
  return res;
}

zeroc_result_t zeroc__pinned_put(zeroc__pinned_pool_t *p, void *buf) {
  if (!buf) return ZEROC_OK;
  if (!p) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pinned_put(pool NULL, %p)", buf);
  pthread_mutex_lock(&p->mu);
  int found;
  size_t at = rec_search(p, buf, &found);
  if (!found || !p->recs[at].out) {
    pthread_mutex_unlock(&p->mu);
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pinned_put(%p): %s", buf,
                      found ? "this buffer was already put back"
                            : "not a buffer from this pool (pass the pointer get returned)");
  }
  rec_t *r = &p->recs[at];
  r->out = 0;
  *(void **)buf = p->head[r->cls];
  p->head[r->cls] = buf;
  p->st.bytes_out -= r->cap;
  p->st.bytes_cached += r->cap;
  pthread_mutex_unlock(&p->mu);
  return ZEROC_OK;
}

size_t zeroc__pinned_capacity(zeroc__pinned_pool_t *p, const void *buf) {
  if (!p || !buf) return 0;
  pthread_mutex_lock(&p->mu);
  int found;
  size_t at = rec_search(p, buf, &found);
  size_t cap = found && p->recs[at].out ? p->recs[at].cap : 0;
  pthread_mutex_unlock(&p->mu);
  return cap;
}

void zeroc__pinned_trim(zeroc__pinned_pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  size_t keep = 0;
  for (size_t i = 0; i < p->nrec; i++) {
    if (p->recs[i].out)
      p->recs[keep++] = p->recs[i];
    else
      sys_free(p, &p->recs[i]);
  }
  p->nrec = keep;
  memset(p->head, 0, sizeof p->head);
  p->st.bytes_cached = 0;
  pthread_mutex_unlock(&p->mu);
}

void zeroc__pinned_stats(zeroc__pinned_pool_t *p, zeroc__pinned_stats_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->st;
  pthread_mutex_unlock(&p->mu);
}

void zeroc__pinned_pool_destroy(zeroc__pinned_pool_t *p) {
  if (!p) return;
  size_t leaked = 0, leaked_bytes = 0;
  for (size_t i = 0; i < p->nrec; i++) {
    if (p->recs[i].out) leaked++, leaked_bytes += p->recs[i].cap;
    sys_free(p, &p->recs[i]);
  }
  if (leaked)
    ZWARN(OFFLOAD,
          "pinned pool destroyed with %zu buffers (%zu bytes) still handed out; freed anyway",
          leaked, leaked_bytes);
  free(p->recs);
  if (p->nodeset) hwloc_bitmap_free(p->nodeset);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
