/*
 * cp/cp_types.h - the context-parallel object (cp/cp.h has its calls): what the
 * entry points (cp.c) and the two algorithms (ring.c, ulysses.c) share.
 */
#ifndef ZEROC_CP_CP_TYPES_H
#define ZEROC_CP_CP_TYPES_H

#include <stddef.h>

#include "comm/comm.h"
#include "kernels/kernels.h"

typedef enum zeroc__cp_mode { ZEROC_CP_RING = 0, ZEROC_CP_ULYSSES = 1 } zeroc__cp_mode_t;

typedef struct zeroc__cp {
  zeroc_kernels_t *k;
  const zeroc__devmem_t *mem; /* where the cp buffers come from (tag buffers) */
  zeroc_group_t *g;           /* the cp group (NULL: no cp, size 1) */
  int rank, size;             /* r and N */
  zeroc__cp_mode_t mode;
  int overlap; /* ring: transfers overlap compute (1, default) or are waited for first (0) */
  zeroc_stream_t *send, *recv; /* ring: the p2p streams of the transfers (size > 1) */
  zeroc_event_t *ev[6];        /* ring: ordering between compute and the transfers */
  void *buf;                   /* the cp buffers, one allocation (zeroc__cp_buffer_bytes) */
  size_t buf_bytes;
  int B, T, Cl, NHl; /* the shape buf was sized for */
  /* Seconds the calling thread spent blocked on cp communication (ring: waiting
   * for a hop to arrive; ulysses: the all-to-alls), summed since creation: the
   * exposed communication on the cpu device, whose compute stream runs on the
   * caller. On cuda the waits are on the stream and this stays near 0. */
  double wait_s;
} zeroc__cp_t;

#endif
