/*
 * device/pool_cuda.c - caching allocator for cuda device memory.
 *
 * Sizes are rounded (512 B granules below 1 MiB, 2 MiB granules above) and
 * freed blocks wait on a free list per rounded size. Training allocates the
 * same sizes every step, so after the first step every request is a hit and
 * the step loop makes no cudaMalloc/cudaFree (which synchronise the device).
 * Memory goes back to CUDA only at close or when a cudaMalloc fails.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "device/device.h"

typedef struct block {
  void *p;
  size_t size;
  struct block *next;
} block_t;

typedef struct {
  pthread_mutex_t mu;
  block_t *free_list; /* all cached blocks, any size (few distinct sizes in practice) */
  size_t cached_bytes;
  uint64_t mallocs;
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

static void release_cache_locked(pool_t *p) {
  while (p->free_list) {
    block_t *b = p->free_list;
    p->free_list = b->next;
    cudaFree(b->p);
    free(b);
  }
  p->cached_bytes = 0;
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
    if ((*pp)->size == n) {
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
  block_t *b = malloc(sizeof *b);
  if (!b) { /* cannot cache: give it straight back */
    cudaFree(ptr);
    return;
  }
  b->p = ptr;
  b->size = round_size(bytes);
  pthread_mutex_lock(&p->mu);
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
