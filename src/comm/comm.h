/*
 * comm/comm.h - collectives on a group, enqueued on a stream.
 *
 * A group (tp, pp, dp, dp_shard, dp_replicate, world, or a custom split) owns
 * one duplicated communicator per stream channel, because collectives on one
 * communicator serialise: a stream uses only its own channel, so a gather on
 * the gather stream and a reduce-scatter on the reduce stream overlap.
 * Backends: mpi (cpu device; the stream's worker thread runs a non-blocking
 * collective and polls it with a timeout), nccl (cuda device) and mpi-staged
 * (the mpi collective on pinned host copies of device memory, for several ranks
 * on one GPU; comm_staged.c).
 * Point-to-point send/recv use the group's p2p channel (matched by tag), so a
 * send on one stream meets a recv on any stream of the peer; on nccl a stream
 * made with a direction (zeroc__stream_create_p2p) uses instead a communicator
 * of its own for its ring neighbour (the pipeline's four streams; comm_nccl_cuda.c).
 * Every backend communicator a group can use is made when the group is made
 * (group_connect), never inside a step.
 * Byte counters per collective: payload bytes, and "bus" bytes, the bytes a
 * rank sends in a ring algorithm ((n-1)/n of the data for all-gather and
 * reduce-scatter, 2(n-1)/n for all-reduce), which is what the ZeRO paper counts.
 * All-to-all: payload = this rank's whole send buffer, bus = the part of it
 * that goes to other ranks (its own block stays local).
 */
#ifndef ZEROC_COMM_COMM_H
#define ZEROC_COMM_COMM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "zeroc/mesh.h"
#include "zeroc/types.h"

/* nccl: the directed point-to-point communicators of a pipeline group, 2
 * directions x 3 ring-edge colours (comm_nccl_cuda.c) */
#define ZEROC_P2P_LANES 6

typedef enum zeroc_coll {
  ZEROC_COLL_ALLGATHER = 0,
  ZEROC_COLL_REDUCE_SCATTER,
  ZEROC_COLL_ALLREDUCE,
  ZEROC_COLL_BROADCAST,
  ZEROC_COLL_SEND,
  ZEROC_COLL_RECV,
  ZEROC_COLL_ALLTOALL,  /* equal and per-peer counts (alltoallv) both count here */
  ZEROC_COLL_COUNT
} zeroc_coll_t;

typedef struct zeroc_comm_counters {
  uint64_t calls[ZEROC_COLL_COUNT];
  uint64_t bytes[ZEROC_COLL_COUNT];     /* payload: the whole buffer of the collective */
  uint64_t bus_bytes[ZEROC_COLL_COUNT]; /* sent by this rank in a ring algorithm */
} zeroc_comm_counters_t;

typedef struct zeroc_group zeroc_group_t;
struct zeroc_comm_ops;
struct zeroc__watchdog;

/* What a group needs of its surroundings, handed over by the context (and
 * copied into every group split from it). */
typedef struct zeroc__comm_env {
  const struct zeroc_comm_ops *ops; /* the backend matching the device */
  int world_rank;                   /* this rank in the context's world */
  double timeout;                   /* seconds a collective may wait */
  struct zeroc__watchdog *wd;       /* the node's status board; NULL: none */
  int huge_pages; /* host scratch on transparent huge pages (the cpu device's ZEROC_HUGE_PAGES) */
} zeroc__comm_env_t;

struct zeroc_group {
  zeroc__comm_env_t env;
  const struct zeroc_comm_ops *ops; /* env.ops, or NULL while half built */
  int kind; /* zeroc_group_kind_t, or -1 for a custom split */
  char name[32];
  int size, rank;
  int *world_ranks; /* world rank of each member, by group rank */
  MPI_Comm mpi[ZEROC_MAX_CHANNELS];
  /* staged backend: a duplicate of mpi[0] for the collectives of channel 0's
   * stream, which run on a worker thread while host helpers use mpi[0] */
  MPI_Comm mpi_staged;
  /* ncclComm_t per channel, then per directed p2p lane (comm_nccl_cuda.c): all
   * made with the group (group_connect); NULL where the group needs none */
  void *nccl[ZEROC_MAX_CHANNELS + ZEROC_P2P_LANES];
  /* mpi: the ring reduce-scatter's blocks in flight, per channel (comm_mpi.c) */
  void *rs_buf[ZEROC_MAX_CHANNELS];
  size_t rs_cap[ZEROC_MAX_CHANNELS];
  uint64_t seq[ZEROC_MAX_CHANNELS]; /* collectives issued per channel, for messages */
  _Atomic uint64_t ctr_calls[ZEROC_COLL_COUNT];
  _Atomic uint64_t ctr_bytes[ZEROC_COLL_COUNT];
  _Atomic uint64_t ctr_bus[ZEROC_COLL_COUNT];
};

typedef struct zeroc_comm_ops {
  const char *name;
  zeroc_result_t (*group_init)(zeroc_group_t *g);
  /* Makes every backend communicator `g` can use, once its group exists; may be
   * NULL. Collective over `parent`'s members (NULL: over g's), each of which
   * calls either this with its colour and key, or split_out. */
  zeroc_result_t (*group_connect)(zeroc_group_t *g, zeroc_group_t *parent, int color, int key);
  /* This rank's part in a split of `parent` that it does not join; may be NULL. */
  zeroc_result_t (*split_out)(zeroc_group_t *parent, int key);
  void (*group_fini)(zeroc_group_t *g);
  zeroc_result_t (*allgather)(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                              size_t count, zeroc_dtype_t dt);
  zeroc_result_t (*reduce_scatter)(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                   void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op);
  zeroc_result_t (*allreduce)(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                              size_t count, zeroc_dtype_t dt, zeroc_redop_t op);
  zeroc_result_t (*broadcast)(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                              zeroc_dtype_t dt, int root);
  zeroc_result_t (*send)(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                         zeroc_dtype_t dt, int peer, int tag);
  zeroc_result_t (*recv)(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                         zeroc_dtype_t dt, int peer, int tag);
  /* count per peer; send and recv hold size*count elements, peer-major */
  zeroc_result_t (*alltoall)(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                             size_t count, zeroc_dtype_t dt);
  /* counts and displacements per peer, in elements; the arrays are copied (or
   * consumed) before the call returns */
  zeroc_result_t (*alltoallv)(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                              const size_t *send_counts, const size_t *send_displs, void *recv,
                              const size_t *recv_counts, const size_t *recv_displs,
                              zeroc_dtype_t dt);
  /* batch the following sends and receives on g; may be NULL. nccl posts them at
   * group_end, one ncclGroupStart/End per communicator (so per stream). */
  zeroc_result_t (*group_start)(zeroc_group_t *g);
  zeroc_result_t (*group_end)(zeroc_group_t *g);
} zeroc_comm_ops_t;

extern const zeroc_comm_ops_t zeroc__mpi_comm_ops;
extern const zeroc_comm_ops_t zeroc__staged_comm_ops;
#ifdef ZEROC_HAVE_CUDA
extern const zeroc_comm_ops_t zeroc__nccl_comm_ops;
#endif

/*
 * Creates a group from an MPI communicator of its members (taken over: freed by
 * zeroc__group_destroy), duplicating it once per channel, and makes the
 * backend's communicators (group_connect). `comm` came from splitting `parent`
 * (NULL: a root group) with `color` and `key`; collective over `parent` (every
 * member calls this, or zeroc__group_split with a negative colour), else over `comm`.
 */
zeroc_result_t zeroc__group_create(const zeroc__comm_env_t *env, MPI_Comm comm, int kind,
                                   const char *name, zeroc_group_t *parent, int color, int key,
                                   zeroc_group_t **out);
/* Splits `parent` like MPI_Comm_split (color < 0: not a member, *out = NULL). */
zeroc_result_t zeroc__group_split(zeroc_group_t *parent, int color, int key, const char *name,
                                  zeroc_group_t **out);
void zeroc__group_destroy(zeroc_group_t *g);

/*
 * The collectives. `count` is per rank for all-gather (send count) and
 * reduce-scatter (receive count), the whole buffer otherwise. send == recv (or,
 * for all-gather, send == recv + rank*count; for reduce-scatter, recv == send +
 * rank*count, the rank's own block) is in place. Each is enqueued on
 * `s` and runs in that stream's order; the return value reports enqueue
 * failures (and, on an inline stream, the collective's own result).
 */
zeroc_result_t zeroc__allgather(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                                size_t count, zeroc_dtype_t dt);
zeroc_result_t zeroc__reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op);
zeroc_result_t zeroc__allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                                size_t count, zeroc_dtype_t dt, zeroc_redop_t op);
zeroc_result_t zeroc__broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                zeroc_dtype_t dt, int root);
zeroc_result_t zeroc__send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                           zeroc_dtype_t dt, int peer, int tag);
zeroc_result_t zeroc__recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                           zeroc_dtype_t dt, int peer, int tag);

/*
 * All-to-all: block p of `send` (count elements at p*count) goes to rank p,
 * which stores it at block r (this rank) of its `recv`. Both buffers hold
 * size*count elements; not in place (send != recv).
 */
zeroc_result_t zeroc__alltoall(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                               size_t count, zeroc_dtype_t dt);
/*
 * All-to-all with a count and a displacement per peer, in elements:
 * send_counts[p] elements at send + send_displs[p] go to rank p, and
 * recv_counts[p] elements from rank p land at recv + recv_displs[p]
 * (recv_counts[p] must equal rank p's send_counts[r]). Each array has g->size
 * entries and is copied before the call returns (the caller may reuse it at
 * once); the buffers must stay valid until the stream passes the collective.
 * Not in place.
 */
zeroc_result_t zeroc__alltoallv(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                const size_t *send_counts, const size_t *send_displs, void *recv,
                                const size_t *recv_counts, const size_t *recv_displs,
                                zeroc_dtype_t dt);

/* Brackets calls that must be issued together (a send and a receive of a
 * pipeline exchange, several collectives at once): ncclGroupStart/End on
 * nccl; nothing on mpi, whose operations never block their issuer. */
zeroc_result_t zeroc__comm_group_start(zeroc_group_t *g);
zeroc_result_t zeroc__comm_group_end(zeroc_group_t *g);

/* Sums of the counters of every group of the context (tp, pp, dp_shard, ...). */
void zeroc__group_counters(const zeroc_group_t *g, zeroc_comm_counters_t *out);
void zeroc__group_counters_reset(zeroc_group_t *g);

/* Blocking, inline helpers on channel 0 for small host values (init, agreement). */
zeroc_result_t zeroc__allreduce_host(zeroc_group_t *g, void *buf, size_t count, zeroc_dtype_t dt,
                                     zeroc_redop_t op);
zeroc_result_t zeroc__broadcast_host(zeroc_group_t *g, void *buf, size_t count, zeroc_dtype_t dt,
                                     int root);

#endif
