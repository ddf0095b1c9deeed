/*
 * comm/comm_nccl_cuda.c - the nccl collective backend (cuda device).
 *
 * One NCCL communicator per (group, channel), so collectives issued on
 * different streams overlap. A communicator is created on first use from the
 * host thread that issues the collective (every rank issues in the same
 * program order, so creation is consistent), bootstrapped by broadcasting the
 * unique id over the group's MPI communicator. Never inside ncclGroupStart/End:
 * NCCL would defer the creation to ncclGroupEnd, after the group's sends and
 * receives were posted on a communicator not yet made, so nccl_group_start
 * makes the group's p2p communicator before it opens the batch, and a creation
 * inside a batch fails loudly. Size-1 groups copy instead.
 * Errors, including asynchronous ones (ncclCommGetAsyncError), become
 * ZEROC_ERR_NCCL with the call and the group named.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

static ncclDataType_t nccl_type(zeroc_dtype_t dt) {
  switch (dt) {
  case ZEROC_FP32: return ncclFloat32;
  case ZEROC_BF16: return ncclBfloat16;
  case ZEROC_INT32: return ncclInt32;
  case ZEROC_FP64: return ncclFloat64;
  case ZEROC_UINT8: return ncclUint8;
  case ZEROC_INT64: return ncclInt64;
  default: return ncclFloat32;
  }
}

static ncclRedOp_t nccl_op(zeroc_redop_t op) {
  switch (op) {
  case ZEROC_AVG: return ncclAvg;
  case ZEROC_MAX: return ncclMax;
  case ZEROC_MIN: return ncclMin;
  default: return ncclSum;
  }
}

/* Always an error: for calls where anything but ncclSuccess is a failure. */
static zeroc_result_t nccl_fail(ncclResult_t r, const char *call, zeroc_group_t *g) {
  return ZEROC_FAIL(ZEROC_ERR_NCCL, "%s on group %s (%d ranks) failed: %s (%s)", call, g->name,
                    g->size, ncclGetErrorString(r), ncclGetLastError(NULL));
}

/* A collective's result: one still in progress (non-blocking communicators) is issued. */
static zeroc_result_t nccl_ret(ncclResult_t r, const char *call, zeroc_group_t *g) {
  if (r == ncclSuccess || r == ncclInProgress) return ZEROC_OK;
  return nccl_fail(r, call, g);
}

/* The NCCL communicator of group g for the stream's channel, created on first
 * use. *out is NULL on failure. Creation must have completed (ncclSuccess), so
 * ncclInProgress is a failure here: nccl_ret would return OK with no communicator. */
/* ncclGroupStart calls this thread has open (NCCL's groups are per thread, too) */
static _Thread_local int nccl_depth;

static zeroc_result_t get_comm_ch(zeroc_group_t *g, int c, ncclComm_t *out) {
  *out = NULL;
  if (g->nccl[c]) {
    *out = g->nccl[c];
    return ZEROC_OK;
  }
  if (nccl_depth > 0)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "the NCCL communicator of group %s channel %d would be created inside "
                      "ncclGroupStart/End (%d open), where NCCL defers it past the calls that "
                      "use it: create it before the group (nccl_group_start does for the p2p "
                      "channel)",
                      g->name, c, nccl_depth);
  ncclUniqueId id;
  memset(&id, 0, sizeof id); /* filled by rank 0, then broadcast */
  if (g->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return nccl_fail(r, "ncclGetUniqueId", g);
  }
  int e = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, g->mpi[0]);
  if (e != MPI_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Bcast of the NCCL id for group %s: %d", g->name, e);
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, g->size, id, g->rank);
  if (r != ncclSuccess) return nccl_fail(r, "ncclCommInitRank", g);
  ZINFO(COMM, "nccl communicator for group %s channel %d: rank %d of %d", g->name, c, g->rank,
        g->size);
  g->nccl[c] = comm;
  *out = comm;
  return ZEROC_OK;
}

static zeroc_result_t get_comm(zeroc_group_t *g, zeroc_stream_t *s, ncclComm_t *out) {
  return get_comm_ch(g, s->channel, out);
}

static void nccl_group_fini(zeroc_group_t *g) {
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) {
    if (!g->nccl[c]) continue;
    ncclCommFinalize(g->nccl[c]);
    ncclCommDestroy(g->nccl[c]);
    g->nccl[c] = NULL;
  }
}

/* A size-1 group copies instead of calling NCCL, unless ZEROC_NCCL_SELF=1
 * (tests use it to run NCCL itself on one GPU). */
static int nccl_self(void) {
  static int v = -1;
  /* range-checked by zeroc_ctx_create (zeroc__env_check_all): 0 or 1 here */
  int64_t x = 0;
  if (v < 0 && zeroc__env_i64("ZEROC_NCCL_SELF", 0, &x) == ZEROC_OK) v = (int)x;
  return v;
}

static zeroc_result_t copy_if_alone(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                    void *recv, size_t bytes, int *done) {
  *done = g->size == 1 && !nccl_self();
  if (*done && send != recv && bytes) {
    cudaError_t e = cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDefault, (cudaStream_t)s->native);
    if (e != cudaSuccess)
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaMemcpyAsync (size-1 group %s): %s", g->name,
                        cudaGetErrorString(e));
  }
  return ZEROC_OK;
}

static zeroc_result_t nccl_allgather(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     void *recv, size_t count, zeroc_dtype_t dt) {
  int done;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ncclComm_t c;
  ZEROC_CHECK(get_comm(g, s, &c));
  return nccl_ret(ncclAllGather(send, recv, count, nccl_type(dt), c, (cudaStream_t)s->native),
                  "ncclAllGather", g);
}

static zeroc_result_t nccl_reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                          void *recv, size_t count, zeroc_dtype_t dt,
                                          zeroc_redop_t op) {
  int done;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ncclComm_t c;
  ZEROC_CHECK(get_comm(g, s, &c));
  return nccl_ret(ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op), c,
                                    (cudaStream_t)s->native),
                  "ncclReduceScatter", g);
}

static zeroc_result_t nccl_allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op) {
  int done;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ncclComm_t c;
  ZEROC_CHECK(get_comm(g, s, &c));
  return nccl_ret(
      ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), c, (cudaStream_t)s->native),
      "ncclAllReduce", g);
}

static zeroc_result_t nccl_broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                     zeroc_dtype_t dt, int root) {
  if (g->size == 1 && !nccl_self()) return ZEROC_OK;
  ncclComm_t c;
  ZEROC_CHECK(get_comm(g, s, &c));
  return nccl_ret(
      ncclBroadcast(buf, buf, count, nccl_type(dt), root, c, (cudaStream_t)s->native),
      "ncclBroadcast", g);
}

static zeroc_result_t nccl_send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                                zeroc_dtype_t dt, int peer, int tag) {
  (void)tag; /* NCCL matches point-to-point by issue order on the p2p communicator */
  ncclComm_t c;
  ZEROC_CHECK(get_comm_ch(g, ZEROC_P2P_CHANNEL, &c));
  return nccl_ret(ncclSend(buf, count, nccl_type(dt), peer, c, (cudaStream_t)s->native), "ncclSend",
                  g);
}

static zeroc_result_t nccl_recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                zeroc_dtype_t dt, int peer, int tag) {
  (void)tag;
  ncclComm_t c;
  ZEROC_CHECK(get_comm_ch(g, ZEROC_P2P_CHANNEL, &c));
  return nccl_ret(ncclRecv(buf, count, nccl_type(dt), peer, c, (cudaStream_t)s->native), "ncclRecv",
                  g);
}

/* All-to-all as grouped point-to-point on the stream's channel communicator
 * (NCCL has no all-to-all call): one send and one receive per peer inside a
 * group, so NCCL schedules them together and nothing deadlocks; this rank's
 * own block is a device copy. Offsets are in elements. */
static zeroc_result_t nccl_a2a(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                               const size_t *sc, const size_t *sd, void *recv, const size_t *rc,
                               const size_t *rd, zeroc_dtype_t dt) {
  size_t esz = zeroc_dtype_size(dt);
  cudaStream_t cs = (cudaStream_t)s->native;
  int me = g->rank;
  if (sc[me]) {
    cudaError_t e = cudaMemcpyAsync((char *)recv + rd[me] * esz, (const char *)send + sd[me] * esz,
                                    sc[me] * esz, cudaMemcpyDefault, cs);
    if (e != cudaSuccess)
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaMemcpyAsync (alltoall self block on %s): %s", g->name,
                        cudaGetErrorString(e));
  }
  if (g->size == 1) return ZEROC_OK;
  ncclComm_t c;
  ZEROC_CHECK(get_comm(g, s, &c));
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return nccl_fail(r, "ncclGroupStart (alltoall)", g);
  for (int p = 0; p < g->size; p++) {
    if (p == me) continue;
    if (sc[p]) {
      r = ncclSend((const char *)send + sd[p] * esz, sc[p], nccl_type(dt), p, c, cs);
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    if (rc[p]) {
      r = ncclRecv((char *)recv + rd[p] * esz, rc[p], nccl_type(dt), p, c, cs);
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
  }
  ncclResult_t r2 = ncclGroupEnd();
  if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(r, "ncclSend/ncclRecv (alltoall)", g);
  return nccl_ret(r2, "ncclGroupEnd (alltoall)", g);
}

static zeroc_result_t nccl_alltoall(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                    void *recv, size_t count, zeroc_dtype_t dt) {
  size_t *t = malloc(sizeof(size_t) * 2 * (size_t)g->size);
  if (!t) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "alltoall on %s: offset table", g->name);
  for (int p = 0; p < g->size; p++) {
    t[p] = count;
    t[g->size + p] = (size_t)p * count;
  }
  zeroc_result_t r = nccl_a2a(g, s, send, t, t + g->size, recv, t, t + g->size, dt);
  free(t);
  return r;
}

static zeroc_result_t nccl_alltoallv(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     const size_t *send_counts, const size_t *send_displs,
                                     void *recv, const size_t *recv_counts,
                                     const size_t *recv_displs, zeroc_dtype_t dt) {
  return nccl_a2a(g, s, send, send_counts, send_displs, recv, recv_counts, recv_displs, dt);
}

/* Non-zero, with a message, when any communicator of `g` has an async error. */
int zeroc__nccl_async_error(zeroc_group_t *g, char *why, size_t n) {
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) {
    if (!g->nccl[c]) continue;
    ncclResult_t ar = ncclSuccess;
    if (ncclCommGetAsyncError(g->nccl[c], &ar) != ncclSuccess || ar != ncclSuccess) {
      snprintf(why, n, "NCCL async error on group %s channel %d: %s", g->name, c,
               ncclGetErrorString(ar));
      return 1;
    }
  }
  return 0;
}

/* Aborts every communicator of `g` (after a timeout), so kernels stuck in them exit. */
void zeroc__nccl_abort(zeroc_group_t *g) {
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) {
    if (!g->nccl[c]) continue;
    ncclCommAbort(g->nccl[c]);
    g->nccl[c] = NULL;
  }
}

/* The batches hold sends and receives (pipeline, context-parallel ring), which use
 * g's p2p channel: its communicator is made now, before ncclGroupStart. */
static zeroc_result_t nccl_group_start(zeroc_group_t *g) {
  if (g->size > 1 || nccl_self()) {
    ncclComm_t c;
    ZEROC_CHECK(get_comm_ch(g, ZEROC_P2P_CHANNEL, &c));
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return ZEROC_FAIL(ZEROC_ERR_NCCL, "ncclGroupStart on group %s: %s", g->name,
                      ncclGetErrorString(r));
  nccl_depth++;
  return ZEROC_OK;
}

static zeroc_result_t nccl_group_end(zeroc_group_t *g) {
  nccl_depth--;
  ncclResult_t r = ncclGroupEnd();
  return nccl_ret(r, "ncclGroupEnd", g);
}

const zeroc_comm_ops_t zeroc__nccl_comm_ops = {
    .name = "nccl",
    .group_init = NULL,
    .group_fini = nccl_group_fini,
    .allgather = nccl_allgather,
    .reduce_scatter = nccl_reduce_scatter,
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .alltoall = nccl_alltoall,
    .alltoallv = nccl_alltoallv,
    .group_start = nccl_group_start,
    .group_end = nccl_group_end,
};
