/*
 * device/pool_cuda.c - caching allocator for cuda device memory.
 *
 * Sizes are rounded (512 B granules below 1 MiB, 2 MiB granules above) and
 * freed blocks wait on a free list per rounded size. Training allocates the
 * same sizes every step, so after the first step every request is a hit and
 * the step loop makes no cudaMalloc/cudaFree (which synchronise the device).
 * Memory goes back to CUDA only at close or when a cudaMalloc fails.
 *
 * Stream-aware: a free returns at once, while kernels queued before it on any
 * stream may still use the block. The free records an event on every live
 * stream of the device (the free call names none, and any of them may hold
 * work on the block), and the block is handed out again only once all of those
 * events have completed (polled, never waited for), so no stream's earlier
 * work can touch a block that someone else now owns. Until then an
 * allocation of that size takes another cached block or a new cudaMalloc;
 * only when cudaMalloc fails does the pool wait for pending frees.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "device/device.h"

#define MAX_STREAMS 64 /* live streams of one device that the pool tracks */

typedef struct block {
  void *p;
  size_t size;
  int nev;            /* events still pending of ev (0: free for any stream) */
  cudaEvent_t *ev;    /* one per stream live at the free */
  struct block *next;
} block_t;

typedef struct {
  pthread_mutex_t mu;
  block_t *free_list; /* all cached blocks, any size (few distinct sizes in practice) */
  size_t cached_bytes;
  uint64_t mallocs;
  cudaStream_t streams[MAX_STREAMS]; /* the device's live streams */
  int nstreams;
} pool_t;

static size_t round_size(size_t n) {
  const size_t small = 512, big = (size_t)2 << 20;
  if (n < ((size_t)1 << 20)) return (n + small - 1) / small * small;
  return (n + big - 1) / big * big;
}

zeroc_result_t zeroc__cuda_pool_open(zeroc_device_t *dev) {
  pool_t *p = calloc(1, sizeof *p);
  if (!p) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cuda pool");
  pthread_mutex_init(&p->mu, NULL);
  dev->impl = p;
  return ZEROC_OK;
}

static void drop_events(block_t *b) {
  for (int i = 0; i < b->nev; i++) cudaEventDestroy(b->ev[i]);
  free(b->ev);
  b->ev = NULL;
  b->nev = 0;
}

/* 1 when every stream has passed b's free; drops the events that completed. */
static int block_ready(block_t *b) {
  while (b->nev > 0) {
    cudaError_t e = cudaEventQuery(b->ev[b->nev - 1]);
    if (e == cudaErrorNotReady) return 0;
    /* an error is sticky and will surface at the next synchronisation; the
     * block is not worth keeping back for it */
    if (e != cudaSuccess) cudaGetLastError();
    cudaEventDestroy(b->ev[--b->nev]);
  }
  drop_events(b);
  return 1;
}

/* cudaFree synchronises the device, so every pending free is passed after it */
static void release_cache_locked(pool_t *p) {
  while (p->free_list) {
    block_t *b = p->free_list;
    p->free_list = b->next;
    cudaFree(b->p);
    drop_events(b);
    free(b);
  }
  p->cached_bytes = 0;
}

zeroc_result_t zeroc__cuda_pool_stream_add(zeroc_device_t *dev, void *stream) {
  pool_t *p = dev->impl;
  pthread_mutex_lock(&p->mu);
  int ok = p->nstreams < MAX_STREAMS;
  if (ok) p->streams[p->nstreams++] = (cudaStream_t)stream;
  pthread_mutex_unlock(&p->mu);
  return ok ? ZEROC_OK
            : ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                         "a %dth live stream on cuda device %d: accepted at most %d (the memory "
                         "pool tracks each one)",
                         MAX_STREAMS + 1, dev->ordinal, MAX_STREAMS);
}

void zeroc__cuda_pool_stream_remove(zeroc_device_t *dev, void *stream) {
  pool_t *p = dev->impl;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->nstreams; i++)
    if (p->streams[i] == (cudaStream_t)stream) {
      p->streams[i] = p->streams[--p->nstreams];
      break;
    }
  pthread_mutex_unlock(&p->mu);
}

void zeroc__cuda_pool_close(zeroc_device_t *dev) {
  pool_t *p = dev->impl;
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  release_cache_locked(p);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_destroy(&p->mu);
  free(p);
  dev->impl = NULL;
}

zeroc_result_t zeroc__cuda_pool_alloc(zeroc_device_t *dev, size_t bytes, void **out) {
  pool_t *p = dev->impl;
  size_t n = round_size(bytes);
  pthread_mutex_lock(&p->mu);
  for (block_t **pp = &p->free_list; *pp; pp = &(*pp)->next) {
    if ((*pp)->size == n && block_ready(*pp)) {
      block_t *b = *pp;
      *pp = b->next;
      p->cached_bytes -= n;
      *out = b->p;
      free(b);
      pthread_mutex_unlock(&p->mu);
      return ZEROC_OK;
    }
  }
  cudaError_t e = cudaMalloc(out, n);
  if (e == cudaErrorMemoryAllocation && p->cached_bytes) {
    /* cudaFree waits for the device, pending frees included */
    cudaGetLastError();
    ZINFO(MEM, "cudaMalloc(%zu) failed; releasing %zu cached bytes and retrying", n,
          p->cached_bytes);
    release_cache_locked(p);
    e = cudaMalloc(out, n);
  }
  p->mallocs++;
  pthread_mutex_unlock(&p->mu);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cudaMalloc(%zu) failed: %s (%zu of %zu bytes free)", n,
                      cudaGetErrorString(e), free_b, total_b);
  }
  return ZEROC_OK;
}

void zeroc__cuda_pool_free(zeroc_device_t *dev, void *ptr, size_t bytes) {
  pool_t *p = dev->impl;
  block_t *b = calloc(1, sizeof *b);
  if (!b) { /* cannot cache: give it straight back (cudaFree waits for the device) */
    cudaFree(ptr);
    return;
  }
  b->p = ptr;
  b->size = round_size(bytes);
  pthread_mutex_lock(&p->mu);
  b->ev = p->nstreams ? malloc(sizeof *b->ev * (size_t)p->nstreams) : NULL;
  for (int i = 0; b->ev && i < p->nstreams; i++) {
    cudaEvent_t e = NULL;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(e, p->streams[i]) != cudaSuccess) {
      /* no event, no proof: wait for the device instead, once */
      cudaGetLastError();
      if (e) cudaEventDestroy(e);
      drop_events(b);
      cudaDeviceSynchronize();
      break;
    }
    b->ev[b->nev++] = e;
  }
  if (p->nstreams && !b->ev) cudaDeviceSynchronize(); /* malloc failed: the same */
  b->next = p->free_list;
  p->free_list = b;
  p->cached_bytes += b->size;
  pthread_mutex_unlock(&p->mu);
}

uint64_t zeroc__cuda_pool_mallocs(zeroc_device_t *dev) {
  pool_t *p = dev->impl;
  pthread_mutex_lock(&p->mu);
  uint64_t n = p->mallocs;
  pthread_mutex_unlock(&p->mu);
  return n;
}
