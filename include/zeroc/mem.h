/*
 * zeroc/mem.h - memory kinds, tags and the accountant's figures.
 *
 * Every byte zeroc allocates is tagged with what it is for and where it lives,
 * so the tool can print the measured peak beside the planner's prediction.
 * On the CPU backend, "device" memory is the host memory that plays the device.
 */
#ifndef ZEROC_MEM_H
#define ZEROC_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_memkind {
  ZEROC_MEM_DEVICE = 0, /* compute device memory (cudaMalloc; host memory on cpu) */
  ZEROC_MEM_PINNED = 1, /* page-locked host memory (cudaMallocHost; aligned host on cpu) */
  ZEROC_MEM_HOST = 2,   /* ordinary host memory (offloaded state, staging) */
  ZEROC_MEM_KIND_COUNT
} zeroc_memkind_t;

typedef enum zeroc_memtag {
  ZEROC_TAG_PARAMS = 0,     /* compute shards, gathered params, master weights */
  ZEROC_TAG_GRADS = 1,      /* full grads, grad shards */
  ZEROC_TAG_OPTIMIZER = 2,  /* Adam m and v (and master when counted as optimizer state) */
  ZEROC_TAG_ACTIVATIONS = 3,/* activations saved for backward */
  ZEROC_TAG_BUFFERS = 4,    /* communication and staging buffers */
  ZEROC_TAG_WORKSPACE = 5,  /* scratch for kernels */
  ZEROC_TAG_COUNT
} zeroc_memtag_t;

typedef struct zeroc_mem_stats {
  uint64_t current[ZEROC_MEM_KIND_COUNT][ZEROC_TAG_COUNT];
  uint64_t peak[ZEROC_MEM_KIND_COUNT][ZEROC_TAG_COUNT];
  uint64_t current_total[ZEROC_MEM_KIND_COUNT]; /* sum over tags, now */
  uint64_t peak_total[ZEROC_MEM_KIND_COUNT];    /* peak of that sum (not the sum of peaks) */
  uint64_t allocations;                         /* number of live allocations */
} zeroc_mem_stats_t;

/* "device", "pinned", "host". Never NULL. */
ZEROC_API const char *zeroc_memkind_name(zeroc_memkind_t k);
/* "params", "grads", "optimizer", "activations", "buffers", "workspace". Never NULL. */
ZEROC_API const char *zeroc_memtag_name(zeroc_memtag_t t);

#ifdef __cplusplus
}
#endif
#endif
