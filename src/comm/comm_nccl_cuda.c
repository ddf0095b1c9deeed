/*
 * comm/comm_nccl_cuda.c - the nccl collective backend (cuda device).
 *
 * Communicators. One NCCL communicator per (group, channel), so collectives
 * issued on different streams overlap, plus, for a pipeline group, one per
 * directed p2p lane (below). Every one is made when its group is made
 * (group_connect, called by zeroc__group_create), never inside a step, where
 * making one would allocate device memory and bootstrap with peers while other
 * communicators' kernels are in flight. The order is fixed on every rank: the
 * mesh groups in zeroc_group_kind_t order (runtime/groups.c), then any later
 * split (the pipeline's tied group, the engine's self group) at the model or
 * pipeline creation that makes it, which every rank calls alike before its
 * first step. Only the world group bootstraps with a unique id (broadcast over
 * MPI); every other communicator is ncclCommSplit from the world's channel-0
 * communicator (for a group's channel 0, with the MPI split's colour and key)
 * or from its group's channel 0 (the other channels and the lanes). Splits do
 * not share resources (splitShare 0): a shared child would serialise with its
 * parent, which is what separate channels avoid. A rank alone in its group
 * (size 1, copy_if_alone) takes no communicator unless ZEROC_NCCL_SELF=1.
 *
 * Polling. Communicators are non-blocking (blocking = 0): creation, the
 * unique id's MPI_Ibcast, finalize and any call that answers ncclInProgress
 * are polled (ncclCommGetAsyncError, MPI_Test) under the group's comm timeout
 * (--comm-timeout, ZEROC_COMM_TIMEOUT) with the watchdog's peer checks every
 * 0.5 s, as comm_mpi.c polls its collectives: a peer dying while communicators
 * are made fails this rank with one line naming the group, the rank and the
 * timeout, and the communicators are aborted (ncclCommAbort). A call returns
 * only once its communicators are out of ncclInProgress, so the kernel is on
 * the stream before the caller records an event behind it.
 *
 * Point to point. A stream made without a direction sends and receives on the
 * group's p2p channel communicator (ZEROC_P2P_CHANNEL). A directed stream
 * (zeroc__stream_create_p2p, the pipeline's four) uses a lane
 * (comm/p2p_lanes.h): direction +1 or -1, and the colour of the ring edge its message crosses (edge i joins
 * ranks i and i+1 mod n; adjacent edges differ: i % 2, and 2 for the last edge
 * of an odd ring). A rank's send and receive in one direction cross different
 * edges, so each of its four streams has a communicator of its own, and the
 * peer's matching stream uses the same one. The lane communicators span the
 * whole group (NCCL connects only the peer a lane is used with). The
 * interleaved schedule's wrap-around (rank p-1 to rank 0) is the ring's last
 * edge. Sends and receives between zeroc__comm_group_start/end are held and
 * posted at the end, one ncclGroupStart/End per communicator: NCCL makes every
 * stream of a group wait for all of them, so a batch that mixed the
 * pipeline's streams would join them; each communicator of a batch is used by
 * one stream. All the batch's groups are posted before any is polled, so a
 * peer's connection set-up never waits on this rank's next group.
 *
 * Errors, including asynchronous ones (ncclCommGetAsyncError), become
 * ZEROC_ERR_NCCL with the call and the group named.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/p2p_lanes.h"
#include "comm/watchdog.h"
#include "core/clock.h"
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

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "zeroc needs NCCL 2.18 or newer (non-blocking communicators and ncclCommSplit)"
#endif

/* where a group's communicators sit in g->nccl: channels, then lanes */
#define LANE0  ZEROC_MAX_CHANNELS
#define NCOMMS (ZEROC_MAX_CHANNELS + ZEROC_P2P_LANES)
/* sends and receives one batch may hold */
#define BATCH_MAX 64

static int nccl_self(void);
void zeroc__nccl_abort(zeroc_group_t *g);
int zeroc__nccl_async_error(zeroc_group_t *g, char *why, size_t n);

/* Always an error: for calls where anything but ncclSuccess is a failure. */
static zeroc_result_t nccl_fail(ncclResult_t r, const char *call, zeroc_group_t *g) {
  return ZEROC_FAIL(ZEROC_ERR_NCCL, "%s on group %s (%d ranks) failed: %s (%s)", call, g->name,
                    g->size, ncclGetErrorString(r), ncclGetLastError(NULL));
}

/* ---- polling under the comm timeout ------------------------------------------------------- */

static void phase(zeroc_group_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void phase(zeroc_group_t *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  zeroc__watchdog_vphase(g->env.wd, fmt, ap);
  va_end(ap);
}

/* One look at what is awaited: 1 done, 0 not yet; a failure returns non-OK. */
typedef zeroc_result_t (*poll_fn)(zeroc_group_t *g, void *arg, int *done);

/* Polls f until done, spinning, then yielding, then sleeping up to 1 ms (as
 * comm_mpi.c's wait_req), with the watchdog's peer checks every 0.5 s and the
 * group's comm timeout. *gave_up: the timeout passed or a peer was lost. */
static zeroc_result_t poll_until(zeroc_group_t *g, poll_fn f, void *arg, const char *what,
                                 int *gave_up) {
  double timeout = g->env.timeout, t0 = zeroc__now_s(), next_check = t0 + 0.5;
  zeroc__backoff_t b = ZEROC__BACKOFF_INIT;
  *gave_up = 0;
  for (;;) {
    int done = 0;
    ZEROC_CHECK(f(g, arg, &done));
    if (done) return ZEROC_OK;
    if (!zeroc__backoff(&b, 200, 200)) continue;
    double t = zeroc__now_s();
    if (t < next_check) continue;
    next_check = t + 0.5;
    char why[512];
    if (zeroc__watchdog_peer_lost(g->env.wd, g, why, sizeof why)) {
      *gave_up = 1;
      return ZEROC_FAIL(ZEROC_ERR_REMOTE, "%s on group %s (rank %d of %d, world rank %d): %s", what,
                        g->name, g->rank, g->size, g->env.world_rank, why);
    }
    if (t - t0 > timeout) {
      *gave_up = 1;
      zeroc__watchdog_describe(g->env.wd, g, why, sizeof why);
      return ZEROC_FAIL(ZEROC_ERR_TIMEOUT,
                        "%s on group %s (rank %d of %d, world rank %d) did not complete within "
                        "the comm timeout of %.0f s (--comm-timeout): %s",
                        what, g->name, g->rank, g->size, g->env.world_rank, timeout, why);
    }
  }
}

/* the communicators g->nccl[idx[i]] awaited, and the call named in messages */
typedef struct {
  const int *idx;
  int n;
  const char *what;
} comms_t;

static zeroc_result_t comms_ready(zeroc_group_t *g, void *arg, int *done) {
  const comms_t *w = arg;
  *done = 1;
  for (int i = 0; i < w->n; i++) {
    ncclComm_t c = g->nccl[w->idx[i]];
    if (!c) continue;
    ncclResult_t st = ncclSuccess, r = ncclCommGetAsyncError(c, &st);
    if (r != ncclSuccess) return nccl_fail(r, "ncclCommGetAsyncError", g);
    if (st == ncclInProgress)
      *done = 0;
    else if (st != ncclSuccess)
      return ZEROC_FAIL(ZEROC_ERR_NCCL, "%s on group %s (%d ranks), communicator %d: %s (%s)",
                        w->what, g->name, g->size, w->idx[i], ncclGetErrorString(st),
                        ncclGetLastError(c));
  }
  return ZEROC_OK;
}

/* Waits until none of the communicators g->nccl[idx[0..n)] is ncclInProgress.
 * On a failure they are aborted (and their slots cleared): kernels stuck in
 * them exit, and nothing uses them again. */
static zeroc_result_t nccl_wait(zeroc_group_t *g, const int *idx, int n, const char *what) {
  comms_t w = {idx, n, what};
  int gave_up;
  zeroc_result_t r = poll_until(g, comms_ready, &w, what, &gave_up);
  if (r == ZEROC_OK) return ZEROC_OK;
  for (int i = 0; i < n; i++)
    if (g->nccl[idx[i]]) {
      ncclCommAbort(g->nccl[idx[i]]);
      g->nccl[idx[i]] = NULL;
    }
  return r;
}

/* A call's result: ncclInProgress (non-blocking communicators) is waited out,
 * so the operation is on its stream when this returns. */
static zeroc_result_t nccl_ret(ncclResult_t r, const char *call, zeroc_group_t *g, int idx) {
  if (r == ncclSuccess) return ZEROC_OK;
  if (r == ncclInProgress) return nccl_wait(g, &idx, 1, call);
  return nccl_fail(r, call, g);
}

/* ---- making the communicators, at the group's creation --------------------------------------- */

static zeroc_result_t mpi_done(zeroc_group_t *g, void *arg, int *done) {
  int e = MPI_Test(arg, done, MPI_STATUS_IGNORE);
  if (e != MPI_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Test of the NCCL id's broadcast on group %s: error %d",
                      g->name, e);
  return ZEROC_OK;
}

static ncclConfig_t comm_config(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;   /* polled under the comm timeout */
  cfg.splitShare = 0; /* a child sharing its parent's resources would serialise with it */
  return cfg;
}

/* The root communicator of g (channel 0): rank 0's unique id, broadcast with a
 * polled MPI_Ibcast, then ncclCommInitRankConfig, polled. */
static zeroc_result_t comm_bootstrap(zeroc_group_t *g) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id); /* filled by rank 0, then broadcast */
  if (g->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return nccl_fail(r, "ncclGetUniqueId", g);
  }
  MPI_Request req;
  int e = MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, g->mpi[0], &req);
  if (e != MPI_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Ibcast of the NCCL id for group %s: error %d", g->name,
                      e);
  int gave_up;
  /* on a failure the request stays: a collective request cannot be cancelled,
   * and the context fails with this error */
  ZEROC_CHECK(poll_until(g, mpi_done, &req, "the broadcast of the NCCL unique id", &gave_up));
  ncclConfig_t cfg = comm_config();
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&c, g->size, id, g->rank, &cfg);
  g->nccl[0] = c;
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c) ncclCommAbort(c);
    g->nccl[0] = NULL;
    return nccl_fail(r, "ncclCommInitRankConfig", g);
  }
  int idx = 0;
  return nccl_wait(g, &idx, 1, "making the NCCL communicator (ncclCommInitRankConfig)");
}

/* g->nccl[slot] = a split of `from` (a communicator of `fg`) with colour and key;
 * NCCL_SPLIT_NOCOLOR: this rank takes part and joins nothing (slot < 0).
 * NCCL writes the child's handle through the pointer it is given when the split's
 * asynchronous job ends (NULL until then: src/init.cc, ncclCommInitRankFunc), so
 * that pointer must outlive the call: a static, since communicators are made on one
 * thread, one split at a time (each is waited out before the next). A stack
 * variable here left every split NULL and NCCL writing into a dead frame (seen on
 * an H200, 2026-11-28). */
static ncclComm_t split_dst;

static zeroc_result_t comm_split(zeroc_group_t *fg, int from, zeroc_group_t *g, int slot, int color,
                                 int key) {
  ncclConfig_t cfg = comm_config();
  split_dst = NULL;
  ncclResult_t r = ncclCommSplit(fg->nccl[from], color, key, &split_dst, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (split_dst) ncclCommAbort(split_dst);
    split_dst = NULL;
    return nccl_fail(r, "ncclCommSplit", g);
  }
  /* the split is an operation on the parent: it leaves ncclInProgress when the
   * child's job has ended and written the handle */
  zeroc_result_t res = nccl_wait(fg, &from, 1, "splitting an NCCL communicator (ncclCommSplit)");
  ncclComm_t c = __atomic_load_n(&split_dst, __ATOMIC_ACQUIRE);
  split_dst = NULL;
  if (res != ZEROC_OK) {
    if (c) ncclCommAbort(c);
    return res;
  }
  if (slot < 0) return ZEROC_OK;
  if (!c)
    return ZEROC_FAIL(ZEROC_ERR_NCCL,
                      "ncclCommSplit on group %s (%d ranks) ended without a communicator for "
                      "slot %d (colour %d)",
                      g->name, g->size, slot, color);
  g->nccl[slot] = c;
  return nccl_wait(g, &slot, 1, "making an NCCL communicator (ncclCommSplit)");
}

/* Every communicator g can use: channel 0 (bootstrapped, or split from the
 * parent's), the other channels and, on a pipeline group, the p2p lanes. */
static zeroc_result_t nccl_connect(zeroc_group_t *g, zeroc_group_t *parent, int color, int key) {
  int want = g->size > 1 || nccl_self();
  phase(g, "making NCCL communicators of group %s", g->name);
  zeroc_result_t r = ZEROC_OK;
  if (!parent) {
    if (want) r = comm_bootstrap(g);
  } else if (parent->nccl[0]) {
    r = comm_split(parent, 0, g, want ? 0 : -1, want ? color : NCCL_SPLIT_NOCOLOR, key);
  } else if (want) { /* a parent alone has only groups of one (and ZEROC_NCCL_SELF is off) */
    r = ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                   "group %s (%d ranks) split from %s, which has no NCCL "
                   "communicator",
                   g->name, g->size, parent->name);
  }
  if (r != ZEROC_OK || !g->nccl[0]) return r;
  /* NCCL orders a split's ranks by key, then parent rank, as MPI_Comm_split
   * does: the ranks agree, or every peer named in a call would be wrong */
  int nr = -1, nn = -1;
  if (ncclCommUserRank(g->nccl[0], &nr) != ncclSuccess ||
      ncclCommCount(g->nccl[0], &nn) != ncclSuccess || nr != g->rank || nn != g->size) {
    zeroc__nccl_abort(g);
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "group %s: the NCCL communicator has rank %d of %d, the MPI one %d of %d",
                      g->name, nr, nn, g->rank, g->size);
  }
  /* the other channels and the lanes: splits of channel 0, over g only */
  for (int c = 1; c < ZEROC_MAX_CHANNELS && r == ZEROC_OK; c++)
    r = comm_split(g, 0, g, c, 0, g->rank);
  /* lanes for the pipeline's directed streams: + direction, then - */
  int lanes = g->kind == ZEROC_GROUP_PP && g->size > 1 ? zeroc__p2p_colours(g->size) : 0;
  for (int d = 0; d < 2; d++)
    for (int e = 0; e < lanes && r == ZEROC_OK; e++)
      r = comm_split(g, 0, g, LANE0 + 3 * d + e, 0, g->rank);
  /* a failure fails the context: abort what was made, rather than have the
   * group's destroy wait out a finalize with peers that may be gone */
  if (r != ZEROC_OK) zeroc__nccl_abort(g);
  phase(g, "made the NCCL communicators of group %s", g->name);
  if (r == ZEROC_OK)
    ZINFO(COMM,
          "nccl communicators for group %s made at start-up: rank %d of %d, %d channels, "
          "%d p2p lanes",
          g->name, g->rank, g->size, ZEROC_MAX_CHANNELS, 2 * lanes);
  return r;
}

/* A rank outside every group of a split still takes part in NCCL's split. */
static zeroc_result_t nccl_split_out(zeroc_group_t *parent, int key) {
  if (!parent->nccl[0]) return ZEROC_OK;
  return comm_split(parent, 0, parent, -1, NCCL_SPLIT_NOCOLOR, key);
}

/* Finalizes every communicator (all posted, then polled, so that no peer's
 * finalize waits on this rank's next one), then destroys them. */
static void nccl_group_fini(zeroc_group_t *g) {
  int idx[NCOMMS], n = 0;
  char why[256];
  /* the context frees the watchdog's board before its groups: poll with the
   * timeout alone */
  g->env.wd = NULL;
  /* a communicator in error (a peer lost) would only wait out the timeout */
  if (zeroc__nccl_async_error(g, why, sizeof why)) {
    ZINFO(COMM, "%s: aborting group %s's communicators instead of finalizing them", why, g->name);
    zeroc__nccl_abort(g);
    return;
  }
  for (int c = 0; c < NCOMMS; c++) {
    if (!g->nccl[c]) continue;
    ncclResult_t r = ncclCommFinalize(g->nccl[c]);
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclCommAbort(g->nccl[c]);
      g->nccl[c] = NULL;
      continue;
    }
    idx[n++] = c;
  }
  if (nccl_wait(g, idx, n, "ncclCommFinalize") != ZEROC_OK)
    ZWARN(COMM, "%s", zeroc__tls_error()); /* aborted instead; nothing more to do */
  for (int c = 0; c < NCOMMS; c++) {
    if (!g->nccl[c]) continue;
    ncclCommDestroy(g->nccl[c]);
    g->nccl[c] = NULL;
  }
}

/* ---- the communicator of a call ------------------------------------------------------------ */

/* the batch this thread holds (zeroc__comm_group_start/end): NCCL's groups are
 * per thread, and so is this */
typedef struct {
  int send;
  void *buf;
  size_t count;
  ncclDataType_t t;
  int peer, idx;
  cudaStream_t cs;
} p2p_op_t;
static _Thread_local struct {
  int depth;
  zeroc_group_t *g;
  int n;
  p2p_op_t op[BATCH_MAX];
} batch;

/* The communicator slot of a collective on stream s: its channel's. Every one
 * was made with the group; a missing one is a bug, not something to make now. */
static zeroc_result_t coll_comm(zeroc_group_t *g, zeroc_stream_t *s, const char *call, int *idx) {
  if (batch.depth > 0)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "%s on group %s inside a send/receive batch (zeroc__comm_group_start): a "
                      "batch holds only sends and receives",
                      call, g->name);
  *idx = s->channel;
  if (*idx < 0 || *idx >= ZEROC_MAX_CHANNELS || !g->nccl[*idx])
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "%s on group %s (%d ranks) channel %d: communicator not created at "
                      "start-up (or aborted after an earlier failure)",
                      call, g->name, g->size, *idx);
  return ZEROC_OK;
}

/* The communicator slot of a send (or receive) to (from) `peer` on stream s: a
 * directed stream's lane, or the p2p channel. */
static zeroc_result_t p2p_comm(zeroc_group_t *g, zeroc_stream_t *s, int send, int peer, int *idx) {
  int d = s->p2p_dir, want = peer;
  *idx = ZEROC_P2P_CHANNEL;
  if (d) {
    int lane = g->size > 1 ? zeroc__p2p_lane(g->size, g->rank, d, send, peer, &want) : -1;
    if (lane < 0 || g->kind != ZEROC_GROUP_PP)
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                        "%s on group %s: a stream of direction %+d %s rank %d only (on a "
                        "pipeline group), not %d",
                        send ? "send" : "recv", g->name, d, send ? "sends to" : "receives from",
                        want, peer);
    *idx = LANE0 + lane;
  }
  if (!g->nccl[*idx])
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "%s on group %s (%d ranks), communicator %d: not created at start-up (or "
                      "aborted after an earlier failure)",
                      send ? "send" : "recv", g->name, g->size, *idx);
  return ZEROC_OK;
}

/* A size-1 group copies instead of calling NCCL, unless ZEROC_NCCL_SELF=1
 * (tests use it to run NCCL itself on one GPU). */
static int nccl_self(void) {
  static int v = -1;
  /* range-checked by zeroc_ctx_create (zeroc__env_check_all): 0 or 1 here */
  int64_t x = 0;
  if (v < 0 && zeroc__env_i64("ZEROC_NCCL_SELF", 0, &x) == ZEROC_OK) v = (int)x;
  return v > 0;
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
  int done, i;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ZEROC_CHECK(coll_comm(g, s, "ncclAllGather", &i));
  return nccl_ret(
      ncclAllGather(send, recv, count, nccl_type(dt), g->nccl[i], (cudaStream_t)s->native),
      "ncclAllGather", g, i);
}

static zeroc_result_t nccl_reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                          void *recv, size_t count, zeroc_dtype_t dt,
                                          zeroc_redop_t op) {
  int done, i;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ZEROC_CHECK(coll_comm(g, s, "ncclReduceScatter", &i));
  return nccl_ret(ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op), g->nccl[i],
                                    (cudaStream_t)s->native),
                  "ncclReduceScatter", g, i);
}

static zeroc_result_t nccl_allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op) {
  int done, i;
  ZEROC_CHECK(copy_if_alone(g, s, send, recv, count * zeroc_dtype_size(dt), &done));
  if (done) return ZEROC_OK;
  ZEROC_CHECK(coll_comm(g, s, "ncclAllReduce", &i));
  return nccl_ret(ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), g->nccl[i],
                                (cudaStream_t)s->native),
                  "ncclAllReduce", g, i);
}

static zeroc_result_t nccl_broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                     zeroc_dtype_t dt, int root) {
  if (g->size == 1 && !nccl_self()) return ZEROC_OK;
  int i;
  ZEROC_CHECK(coll_comm(g, s, "ncclBroadcast", &i));
  return nccl_ret(
      ncclBroadcast(buf, buf, count, nccl_type(dt), root, g->nccl[i], (cudaStream_t)s->native),
      "ncclBroadcast", g, i);
}

/* A send or receive: held when a batch is open (posted by nccl_group_end),
 * else posted now. NCCL matches point-to-point by issue order per communicator,
 * so the tag is unused. */
static zeroc_result_t nccl_p2p(zeroc_group_t *g, zeroc_stream_t *s, int send, void *buf,
                               size_t count, zeroc_dtype_t dt, int peer) {
  int i;
  ZEROC_CHECK(p2p_comm(g, s, send, peer, &i));
  p2p_op_t o = {send, buf, count, nccl_type(dt), peer, i, (cudaStream_t)s->native};
  if (batch.depth > 0) {
    if (batch.g != g || batch.n == BATCH_MAX)
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                        "%s on group %s in a batch opened on group %s holding %d of at most %d: "
                        "a batch is on one group",
                        send ? "send" : "recv", g->name, batch.g->name, batch.n, BATCH_MAX);
    batch.op[batch.n++] = o;
    return ZEROC_OK;
  }
  ncclComm_t c = g->nccl[i];
  ncclResult_t r =
      send ? ncclSend(buf, count, o.t, peer, c, o.cs) : ncclRecv(buf, count, o.t, peer, c, o.cs);
  return nccl_ret(r, send ? "ncclSend" : "ncclRecv", g, i);
}

static zeroc_result_t nccl_send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                                zeroc_dtype_t dt, int peer, int tag) {
  (void)tag;
  return nccl_p2p(g, s, 1, (void *)buf, count, dt, peer);
}

static zeroc_result_t nccl_recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                zeroc_dtype_t dt, int peer, int tag) {
  (void)tag;
  return nccl_p2p(g, s, 0, buf, count, dt, peer);
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
  int me = g->rank, i;
  if (sc[me]) {
    cudaError_t e = cudaMemcpyAsync((char *)recv + rd[me] * esz, (const char *)send + sd[me] * esz,
                                    sc[me] * esz, cudaMemcpyDefault, cs);
    if (e != cudaSuccess)
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaMemcpyAsync (alltoall self block on %s): %s", g->name,
                        cudaGetErrorString(e));
  }
  if (g->size == 1) return ZEROC_OK;
  ZEROC_CHECK(coll_comm(g, s, "alltoall", &i));
  ncclComm_t c = g->nccl[i];
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
  return nccl_ret(r2, "ncclGroupEnd (alltoall)", g, i);
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

/* Non-zero, with a message, when any communicator of `g` has an async error
 * (ncclInProgress is none: a non-blocking communicator still connecting). */
int zeroc__nccl_async_error(zeroc_group_t *g, char *why, size_t n) {
  for (int c = 0; c < NCOMMS; c++) {
    if (!g->nccl[c]) continue;
    ncclResult_t ar = ncclSuccess;
    if (ncclCommGetAsyncError(g->nccl[c], &ar) != ncclSuccess ||
        (ar != ncclSuccess && ar != ncclInProgress)) {
      snprintf(why, n, "NCCL async error on group %s communicator %d: %s", g->name, c,
               ncclGetErrorString(ar));
      return 1;
    }
  }
  return 0;
}

/* Aborts every communicator of `g` (after a timeout), so kernels stuck in them exit. */
void zeroc__nccl_abort(zeroc_group_t *g) {
  for (int c = 0; c < NCOMMS; c++) {
    if (!g->nccl[c]) continue;
    ncclCommAbort(g->nccl[c]);
    g->nccl[c] = NULL;
  }
}

/* Opens a batch on g: its sends and receives are held until nccl_group_end. */
static zeroc_result_t nccl_group_start(zeroc_group_t *g) {
  if (batch.depth > 0 && batch.g != g)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "a batch on group %s opened inside one on group %s",
                      g->name, batch.g->name);
  if (batch.depth++ == 0) {
    batch.g = g;
    batch.n = 0;
  }
  return ZEROC_OK;
}

/* Posts the held batch: one NCCL group per communicator, in the order of each
 * communicator's first call, all posted before any is waited for. */
static zeroc_result_t nccl_group_end(zeroc_group_t *g) {
  if (batch.depth <= 0 || batch.g != g)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "zeroc__comm_group_end on group %s with no batch open",
                      g->name);
  if (--batch.depth > 0) return ZEROC_OK;
  int idx[NCOMMS], nc = 0, posted[BATCH_MAX] = {0};
  zeroc_result_t res = ZEROC_OK;
  for (int i = 0; i < batch.n && res == ZEROC_OK; i++) {
    if (posted[i]) continue;
    int c = batch.op[i].idx;
    ncclResult_t r = ncclGroupStart(), r1 = ncclSuccess;
    if (r != ncclSuccess) {
      res = nccl_fail(r, "ncclGroupStart", g);
      break;
    }
    for (int j = i; j < batch.n; j++) {
      const p2p_op_t *o = &batch.op[j];
      if (o->idx != c || posted[j]) continue;
      posted[j] = 1;
      r = o->send ? ncclSend(o->buf, o->count, o->t, o->peer, g->nccl[c], o->cs)
                  : ncclRecv(o->buf, o->count, o->t, o->peer, g->nccl[c], o->cs);
      if (r != ncclSuccess && r != ncclInProgress && r1 == ncclSuccess) r1 = r;
    }
    r = ncclGroupEnd();
    if (r1 != ncclSuccess)
      res = nccl_fail(r1, "ncclSend/ncclRecv (batch)", g);
    else if (r != ncclSuccess && r != ncclInProgress)
      res = nccl_fail(r, "ncclGroupEnd", g);
    idx[nc++] = c;
  }
  batch.n = 0;
  batch.g = NULL;
  if (res != ZEROC_OK) return res;
  return nccl_wait(g, idx, nc, "ncclGroupEnd (sends and receives)");
}

const zeroc_comm_ops_t zeroc__nccl_comm_ops = {
    .name = "nccl",
    .group_init = NULL,
    .group_connect = nccl_connect,
    .split_out = nccl_split_out,
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
