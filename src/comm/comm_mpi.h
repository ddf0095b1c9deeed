/*
 * comm/comm_mpi.h - the mpi backend's collective, runnable on any thread on
 * host memory: comm_mpi.c runs it on a cpu stream's worker, comm_staged.c on
 * its own worker between the stream's copies to and from pinned host memory.
 * One implementation, so both paths reduce (bf16 included) the same way.
 */
#ifndef ZEROC_COMM_COMM_MPI_H
#define ZEROC_COMM_COMM_MPI_H

#include "comm/comm.h"

typedef struct zeroc__mpi_op {
  zeroc_group_t *g;
  MPI_Comm comm; /* the communicator it runs on (the stream's channel's) */
  const void *send;
  void *recv;
  size_t count;
  uint64_t seq;
  int coll, dt, op, peer, tag;
  int wd; /* the issuing stream's channel: its own watchdog entry (p2p shares a channel) */
  int *v; /* alltoallv: send counts, send displs, recv counts, recv displs (4 x size, heap) */
} zeroc__mpi_op_t;

/* Creates the bf16 reduction operations (once per process); the backends' group_init. */
zeroc_result_t zeroc__mpi_group_init(zeroc_group_t *g);

/* Starts the collective and polls it to completion on the calling thread, with
 * the group's timeout and the watchdog's diagnostics (ZEROC_ERR_TIMEOUT,
 * ZEROC_ERR_REMOTE); AVG is scaled on completion. Does not free o->v. */
zeroc_result_t zeroc__mpi_run(const zeroc__mpi_op_t *o);

/* alltoallv's size_t counts and displacements (g->size each) as the int table
 * of zeroc__mpi_op_t.v (heap, *v; free it) and the total sent in *total;
 * ZEROC_ERR_UNSUPPORTED when one exceeds MPI's int. */
zeroc_result_t zeroc__mpi_counts(const zeroc_group_t *g, const size_t *send_counts,
                                 const size_t *send_displs, const size_t *recv_counts,
                                 const size_t *recv_displs, int **v, size_t *total);

#endif
