/*
 * comm/comm_mpi.c - the mpi collective backend (cpu device).
 *
 * Each collective is enqueued on its stream as an operation; the stream's
 * worker thread (or the caller, for the inline compute stream) starts the
 * non-blocking MPI collective on the stream's own communicator and polls it
 * with MPI_Test, backing off from spinning to sleeping so that oversubscribed
 * ranks leave the cores to compute. A collective that does not complete within
 * the context's timeout fails with ZEROC_ERR_TIMEOUT and a message naming the
 * operation, the group and the ranks that never arrived (when they share this
 * node; see comm/watchdog.c), instead of hanging. bf16 reductions use
 * user-defined MPI operations that add each pair in fp32 and round the sum to
 * bf16 (the rounding NCCL's bf16 sum applies at each step of its ring); AVG is
 * a SUM scaled on completion. The staged backend (comm_staged.c) runs the same
 * collective (zeroc__mpi_run) for the cuda device.
 */
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "comm/comm_mpi.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

static MPI_Op bf16_ops[ZEROC_REDOP_COUNT];
static int bf16_ops_ready;

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++) b[i] = zeroc_f32_to_bf16(zeroc_bf16_to_f32(a[i]) + zeroc_bf16_to_f32(b[i]));
}
static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    if (zeroc_bf16_to_f32(a[i]) > zeroc_bf16_to_f32(b[i])) b[i] = a[i];
}
static void bf16_min(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    if (zeroc_bf16_to_f32(a[i]) < zeroc_bf16_to_f32(b[i])) b[i] = a[i];
}

static MPI_Datatype mpi_type(zeroc_dtype_t dt) {
  switch (dt) {
  case ZEROC_FP32: return MPI_FLOAT;
  case ZEROC_BF16: return MPI_UINT16_T;
  case ZEROC_INT32: return MPI_INT32_T;
  case ZEROC_FP64: return MPI_DOUBLE;
  case ZEROC_UINT8: return MPI_UINT8_T;
  case ZEROC_INT64: return MPI_INT64_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(zeroc_dtype_t dt, zeroc_redop_t op) {
  if (dt == ZEROC_BF16) return bf16_ops[op == ZEROC_AVG ? ZEROC_SUM : op];
  switch (op) {
  case ZEROC_SUM:
  case ZEROC_AVG: return MPI_SUM;
  case ZEROC_MAX: return MPI_MAX;
  case ZEROC_MIN: return MPI_MIN;
  default: return MPI_OP_NULL;
  }
}

zeroc_result_t zeroc__mpi_group_init(zeroc_group_t *g) {
  (void)g;
  /* The bf16 operations are created once, by the first group (under
   * zeroc_ctx_create, so on one thread). */
  if (!bf16_ops_ready) {
    MPI_Op_create(bf16_sum, 1, &bf16_ops[ZEROC_SUM]);
    MPI_Op_create(bf16_max, 1, &bf16_ops[ZEROC_MAX]);
    MPI_Op_create(bf16_min, 1, &bf16_ops[ZEROC_MIN]);
    bf16_ops_ready = 1;
  }
  return ZEROC_OK;
}

/* ---- the operation run on the stream ----------------------------------------- */

typedef zeroc__mpi_op_t mpi_op_t;

static const char *coll_name[ZEROC_COLL_COUNT] = {"allgather", "reduce_scatter", "allreduce",
                                                  "broadcast", "send",          "recv",
                                                  "alltoall"};

/* Polls `req` until it completes or the timeout passes. Spins briefly, then
 * yields, then sleeps with growing intervals up to 1 ms. */
static zeroc_result_t wait_req(const mpi_op_t *o, MPI_Request *req) {
  zeroc_group_t *g = o->g;
  double timeout = g->env.timeout;
  double t0 = zeroc__now_s(), next_check = t0 + 0.5;
  zeroc__backoff_t b = ZEROC__BACKOFF_INIT;
  for (;;) {
    int done = 0;
    int e = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS)
      return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Test for %s #%llu on group %s: MPI error %d",
                        coll_name[o->coll], (unsigned long long)o->seq, g->name, e);
    if (done) return ZEROC_OK;
    if (!zeroc__backoff(&b, 200, 200)) continue;
    double t = zeroc__now_s();
    if (t < next_check) continue;
    next_check = t + 0.5;
    char why[512];
    /* A peer this node can see that died or stopped: fail now, not at the timeout. */
    if (zeroc__watchdog_peer_lost(g->env.wd, g, why, sizeof why))
      return ZEROC_FAIL(ZEROC_ERR_REMOTE, "%s #%llu on group %s (%d ranks, %zu elements of %s): %s",
                        coll_name[o->coll], (unsigned long long)o->seq, g->name, g->size,
                        o->count, zeroc_dtype_name(o->dt), why);
    if (t - t0 > timeout) {
      zeroc__watchdog_describe(g->env.wd, g, why, sizeof why);
      return ZEROC_FAIL(ZEROC_ERR_TIMEOUT,
                        "%s #%llu on group %s (%d ranks, %zu elements of %s) did not complete "
                        "within %.0f s: %s",
                        coll_name[o->coll], (unsigned long long)o->seq, g->name, g->size,
                        o->count, zeroc_dtype_name(o->dt), timeout, why);
    }
  }
}

static void scale_avg(void *buf, size_t n, zeroc_dtype_t dt, int size) {
  float inv = 1.0f / (float)size;
  if (dt == ZEROC_FP32) {
    float *f = buf;
    for (size_t i = 0; i < n; i++) f[i] *= inv;
  } else if (dt == ZEROC_BF16) {
    uint16_t *h = buf;
    for (size_t i = 0; i < n; i++) h[i] = zeroc_f32_to_bf16(zeroc_bf16_to_f32(h[i]) * inv);
  } else if (dt == ZEROC_FP64) {
    double *d = buf;
    for (size_t i = 0; i < n; i++) d[i] /= size;
  } else if (dt == ZEROC_INT32) {
    int32_t *x = buf;
    for (size_t i = 0; i < n; i++) x[i] /= size;
  } else if (dt == ZEROC_INT64) {
    int64_t *x = buf;
    for (size_t i = 0; i < n; i++) x[i] /= size;
  }
}

/* ---- reduce-scatter as a ring ----------------------------------------------
 * Open MPI's non-blocking reduce-scatter (libnbc) reduces the whole buffer onto
 * rank 0 and scatters the sums from there: rank 0 receives and adds every other
 * rank's whole buffer while the others only send theirs, and the step waits for
 * rank 0. On P ranks that is P-1 whole buffers received and added by one rank, and
 * every block sent twice. A ring gives every rank the same work:
 * P-1 steps, in each of which a rank sends one block to its right neighbour and
 * receives one from its left, adding its own contribution to it: (P-1)/P of the
 * buffer received and added per rank, and the sum of block b lands on rank b.
 * Block b is summed in the ring's order (x[b+1] + x[b+2] + ... + x[b]), which
 * depends on the group's size alone; on 2 ranks any order gives the same bits.
 * The blocks in flight are the group's scratch for the stream's channel (one
 * stream per channel runs its collectives in order, so no two use it at once). */
#define RS_TAG 0x7273 /* the collective communicators carry no other point-to-point */

/* The scratch is where process_vm_readv (Open MPI's single-copy path between ranks of
 * a node) writes every block but the last. On 4 KiB pages that kernel copy ran at about
 * a third of its speed into a 2 MiB-aligned huge-page buffer: a 2-rank ZeRO-1 step of
 * issue 20's GPT spent 0.91% of its samples copying into a malloc'd scratch and 0.30%
 * into this one (RESULTS.md). So, as the cpu device does for its buffers, the scratch
 * is rounded up to whole 2 MiB pages, 2 MiB aligned and marked for THP; its contents
 * never outlive one collective, so growing it need not keep them. */
#define RS_HUGE ((size_t)2 << 20)

static zeroc_result_t ring_scratch(const mpi_op_t *o, size_t bytes, char **out) {
  zeroc_group_t *g = o->g;
  const int c = o->wd;
  if (g->rs_cap[c] < bytes) {
    const int huge = g->env.huge_pages;
    size_t cap = huge ? (bytes + RS_HUGE - 1) / RS_HUGE * RS_HUGE : bytes;
    free(g->rs_buf[c]);
    g->rs_buf[c] = NULL;
    g->rs_cap[c] = 0;
    void *p = huge ? aligned_alloc(RS_HUGE, cap) : malloc(cap);
    if (!p)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "reduce_scatter #%llu on group %s: %zu bytes of scratch",
                        (unsigned long long)o->seq, g->name, cap);
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, cap, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    g->rs_buf[c] = p;
    g->rs_cap[c] = cap;
  }
  *out = g->rs_buf[c];
  return ZEROC_OK;
}

static zeroc_result_t mpi_fail(const mpi_op_t *o, const char *what, int e) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(e, msg, &len);
  return ZEROC_FAIL(ZEROC_ERR_MPI, "%s for %s #%llu on group %s (%zu elements): %s", what,
                    coll_name[o->coll], (unsigned long long)o->seq, o->g->name, o->count, msg);
}

/* send (P blocks of count) -> recv (count) = the op over the ranks of block `rank`.
 * recv may be the rank's own block of send (in place, as NCCL's reduce-scatter),
 * or send itself (MPI_IN_PLACE's convention: the sum goes to its first block). */
static zeroc_result_t ring_reduce_scatter(const mpi_op_t *o, MPI_Datatype t, MPI_Op op,
                                          size_t esz) {
  zeroc_group_t *g = o->g;
  const int P = g->size, r = g->rank, right = (r + 1) % P, left = (r + P - 1) % P;
  const int n = (int)o->count;
  const size_t bytes = o->count * esz;
  const char *in = o->send;
  char *out = o->recv, *own = (char *)in + (size_t)r * bytes;
  /* out takes the last block straight from the wire when it is not part of the input
   * (compared as addresses: out and in may be separate objects) */
  const uintptr_t o0 = (uintptr_t)out, i0 = (uintptr_t)in;
  const int direct = o0 + bytes <= i0 || o0 >= i0 + (size_t)P * bytes;
  char *a = NULL, *b = NULL; /* the partial sum going out, the one coming in */
  if (P > 2 || !direct) {
    char *scr;
    ZEROC_CHECK(ring_scratch(o, (P > 2 ? 2 : 1) * bytes, &scr));
    b = scr;
    a = P > 2 ? scr + bytes : NULL;
  }
  for (int st = 0; st < P - 1; st++) {
    const int blk = (r - st - 2 + 2 * P) % P, last = st == P - 2; /* blk == r when last */
    const void *sb = st == 0 ? in + (size_t)((r + P - 1) % P) * bytes : a;
    char *rb = last && direct ? out : b;
    MPI_Request req[2];
    int e = MPI_Irecv(rb, n, t, left, RS_TAG, o->comm, &req[0]);
    if (e != MPI_SUCCESS) return mpi_fail(o, "MPI_Irecv", e);
    e = MPI_Isend(sb, n, t, right, RS_TAG, o->comm, &req[1]);
    if (e != MPI_SUCCESS) return mpi_fail(o, "MPI_Isend", e);
    ZEROC_CHECK(wait_req(o, &req[0]));
    ZEROC_CHECK(wait_req(o, &req[1]));
    if (last) {
      if (direct) { /* out = x[r] op (the others' partial sum) */
        e = MPI_Reduce_local(own, out, n, t, op);
      } else if (out == own) { /* in place: the others' partial sum into x[r] */
        e = MPI_Reduce_local(b, own, n, t, op);
      } else { /* MPI_IN_PLACE's first block: every block but x[r] is spent by now */
        e = MPI_Reduce_local(own, b, n, t, op);
        if (e == MPI_SUCCESS) memmove(out, b, bytes);
      }
    } else {
      e = MPI_Reduce_local(in + (size_t)blk * bytes, b, n, t, op);
      char *x = a; /* what arrived, with this rank's part added, goes out next */
      a = b, b = x;
    }
    if (e != MPI_SUCCESS) return mpi_fail(o, "MPI_Reduce_local", e);
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__mpi_run(const mpi_op_t *o) {
  zeroc_group_t *g = o->g;
  MPI_Comm comm = o->comm;
  MPI_Datatype t = mpi_type((zeroc_dtype_t)o->dt);
  size_t esz = zeroc_dtype_size((zeroc_dtype_t)o->dt);
  MPI_Request req = MPI_REQUEST_NULL;
  int e = MPI_SUCCESS;
  if (o->count > INT_MAX && !o->v) /* alltoallv: count is the total; its parts were checked */
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s on group %s: %zu elements exceed MPI's int count",
                      coll_name[o->coll], g->name, o->count);
  int n = (int)o->count;
  zeroc__watchdog_enter(g->env.wd, g, o->wd, coll_name[o->coll], o->seq);
  switch (o->coll) {
  case ZEROC_COLL_ALLGATHER:
    if (g->size == 1) {
      if (o->recv != o->send) memmove(o->recv, o->send, o->count * esz);
      goto done;
    }
    if ((const char *)o->send == (char *)o->recv + (size_t)g->rank * o->count * esz)
      e = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o->recv, n, t, comm, &req);
    else
      e = MPI_Iallgather(o->send, n, t, o->recv, n, t, comm, &req);
    break;
  case ZEROC_COLL_REDUCE_SCATTER:
    if (g->size == 1) {
      if (o->recv != o->send) memmove(o->recv, o->send, o->count * esz);
      goto done;
    }
    if (o->wd >= 0 && o->wd < ZEROC_P2P_CHANNEL) { /* see ring_reduce_scatter */
      zeroc_result_t rr =
          ring_reduce_scatter(o, t, mpi_op((zeroc_dtype_t)o->dt, (zeroc_redop_t)o->op), esz);
      if (rr != ZEROC_OK) {
        zeroc__watchdog_leave(g->env.wd, o->wd);
        return rr;
      }
      goto done;
    }
    /* p2p streams share their channel: MPI's own, which needs no scratch */
    e = MPI_Ireduce_scatter_block(o->send == o->recv ? MPI_IN_PLACE : o->send, o->recv, n, t,
                                  mpi_op((zeroc_dtype_t)o->dt, (zeroc_redop_t)o->op), comm, &req);
    break;
  case ZEROC_COLL_ALLREDUCE:
    if (g->size == 1) {
      if (o->recv != o->send) memmove(o->recv, o->send, o->count * esz);
      goto done;
    }
    e = MPI_Iallreduce(o->send == o->recv ? MPI_IN_PLACE : o->send, o->recv, n, t,
                       mpi_op((zeroc_dtype_t)o->dt, (zeroc_redop_t)o->op), comm, &req);
    break;
  case ZEROC_COLL_BROADCAST:
    if (g->size == 1) goto done;
    e = MPI_Ibcast(o->recv, n, t, o->peer, comm, &req);
    break;
  case ZEROC_COLL_SEND: e = MPI_Isend(o->send, n, t, o->peer, o->tag, comm, &req); break;
  case ZEROC_COLL_RECV: e = MPI_Irecv(o->recv, n, t, o->peer, o->tag, comm, &req); break;
  case ZEROC_COLL_ALLTOALL:
    if (o->v) {
      const int *v = o->v, gs = g->size;
      e = MPI_Ialltoallv(o->send, v, v + gs, t, o->recv, v + 2 * gs, v + 3 * gs, t, comm, &req);
    } else {
      e = MPI_Ialltoall(o->send, n, t, o->recv, n, t, comm, &req);
    }
    break;
  default: return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "unknown collective %d", o->coll);
  }
  if (e != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(e, msg, &len);
    zeroc__watchdog_leave(g->env.wd, o->wd);
    return ZEROC_FAIL(ZEROC_ERR_MPI, "starting %s #%llu on group %s (%zu elements): %s",
                      coll_name[o->coll], (unsigned long long)o->seq, g->name, o->count, msg);
  }
  zeroc_result_t r = wait_req(o, &req);
  if (r != ZEROC_OK) {
    /* no longer waiting: peers describing a hang must not count this rank as present */
    zeroc__watchdog_leave(g->env.wd, o->wd);
    return r;
  }
done:
  if (o->op == ZEROC_AVG &&
      (o->coll == ZEROC_COLL_ALLREDUCE || o->coll == ZEROC_COLL_REDUCE_SCATTER) && g->size > 1)
    scale_avg(o->recv, o->count, (zeroc_dtype_t)o->dt, g->size);
  zeroc__watchdog_leave(g->env.wd, o->wd);
  return ZEROC_OK;
}

static zeroc_result_t run_op(void *payload) { return zeroc__mpi_run(payload); }

/* alltoallv: run, then free the copied count arrays. A stream whose earlier
 * operation failed skips this one and the (small) arrays leak: the stream's
 * error is sticky and the run is ending anyway. */
static zeroc_result_t run_op_v(void *payload) {
  mpi_op_t *o = payload;
  zeroc_result_t r = run_op(o);
  free(o->v);
  o->v = NULL;
  return r;
}

static zeroc_result_t submit_v(zeroc_group_t *g, zeroc_stream_t *s, int coll, const void *send,
                               void *recv, size_t count, zeroc_dtype_t dt, int op, int peer,
                               int tag, int *v) {
  if (s->dev->kind != ZEROC_DEVICE_CPU) {
    free(v);
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "the mpi comm backend needs the cpu device");
  }
  int channel = coll == ZEROC_COLL_SEND || coll == ZEROC_COLL_RECV ? ZEROC_P2P_CHANNEL : s->channel;
  mpi_op_t o = {g,  g->mpi[channel], send, recv, count,      g->seq[s->channel], coll,
                (int)dt, op, peer,            tag,  s->channel, v};
  zeroc_result_t r = zeroc__stream_enqueue(s, v ? run_op_v : run_op, &o, sizeof o);
  if (r != ZEROC_OK) free(v);
  return r;
}

static zeroc_result_t submit(zeroc_group_t *g, zeroc_stream_t *s, int coll, const void *send,
                             void *recv, size_t count, zeroc_dtype_t dt, int op, int peer, int tag) {
  return submit_v(g, s, coll, send, recv, count, dt, op, peer, tag, NULL);
}

static zeroc_result_t mpi_allgather(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                    void *recv, size_t count, zeroc_dtype_t dt) {
  return submit(g, s, ZEROC_COLL_ALLGATHER, send, recv, count, dt, 0, 0, 0);
}
static zeroc_result_t mpi_reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                         void *recv, size_t count, zeroc_dtype_t dt,
                                         zeroc_redop_t op) {
  return submit(g, s, ZEROC_COLL_REDUCE_SCATTER, send, recv, count, dt, op, 0, 0);
}
static zeroc_result_t mpi_allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                    void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op) {
  return submit(g, s, ZEROC_COLL_ALLREDUCE, send, recv, count, dt, op, 0, 0);
}
static zeroc_result_t mpi_broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                    zeroc_dtype_t dt, int root) {
  return submit(g, s, ZEROC_COLL_BROADCAST, buf, buf, count, dt, 0, root, 0);
}
static zeroc_result_t mpi_send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                               zeroc_dtype_t dt, int peer, int tag) {
  return submit(g, s, ZEROC_COLL_SEND, buf, NULL, count, dt, 0, peer, tag);
}
static zeroc_result_t mpi_recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                               zeroc_dtype_t dt, int peer, int tag) {
  return submit(g, s, ZEROC_COLL_RECV, NULL, buf, count, dt, 0, peer, tag);
}

static zeroc_result_t mpi_alltoall(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                   void *recv, size_t count, zeroc_dtype_t dt) {
  return submit(g, s, ZEROC_COLL_ALLTOALL, send, recv, count, dt, 0, 0, 0);
}

/* MPI takes int counts and displacements: they are checked and copied here, so
 * the caller's arrays are free as soon as this returns. */
zeroc_result_t zeroc__mpi_counts(const zeroc_group_t *g, const size_t *send_counts,
                                 const size_t *send_displs, const size_t *recv_counts,
                                 const size_t *recv_displs, int **out, size_t *total) {
  int gs = g->size;
  *out = NULL;
  *total = 0;
  int *v = malloc(sizeof(int) * 4 * (size_t)gs);
  if (!v) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "alltoallv on %s: count table", g->name);
  const size_t *src[4] = {send_counts, send_displs, recv_counts, recv_displs};
  for (int k = 0; k < 4; k++)
    for (int p = 0; p < gs; p++) {
      if (src[k][p] > INT_MAX) {
        free(v);
        return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                          "alltoallv on group %s: count or displacement %zu (peer %d) exceeds "
                          "MPI's int",
                          g->name, src[k][p], p);
      }
      v[k * gs + p] = (int)src[k][p];
      if (k == 0) *total += src[k][p];
    }
  *out = v;
  return ZEROC_OK;
}

static zeroc_result_t mpi_alltoallv(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                    const size_t *send_counts, const size_t *send_displs,
                                    void *recv, const size_t *recv_counts,
                                    const size_t *recv_displs, zeroc_dtype_t dt) {
  int *v;
  size_t total;
  ZEROC_CHECK(
      zeroc__mpi_counts(g, send_counts, send_displs, recv_counts, recv_displs, &v, &total));
  return submit_v(g, s, ZEROC_COLL_ALLTOALL, send, recv, total, dt, 0, 0, 0, v);
}

/* Blocking all-reduce of host values on channel 0, on the calling thread, with
 * the same timeout and diagnostics as every collective. */
zeroc_result_t zeroc__allreduce_host(zeroc_group_t *g, void *buf, size_t count, zeroc_dtype_t dt,
                                     zeroc_redop_t op) {
  mpi_op_t o = {g, g->mpi[0], buf, buf, count, ++g->seq[0], ZEROC_COLL_ALLREDUCE, (int)dt, op, 0, 0,
                0, NULL};
  return zeroc__mpi_run(&o);
}

/* Blocking broadcast of host values from group rank `root` on channel 0, as above. */
zeroc_result_t zeroc__broadcast_host(zeroc_group_t *g, void *buf, size_t count, zeroc_dtype_t dt,
                                     int root) {
  if (root < 0 || root >= g->size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "broadcast on group %s: root %d; accepted 0..%d",
                      g->name, root, g->size - 1);
  mpi_op_t o = {g,       g->mpi[0], buf,  buf, count, ++g->seq[0], ZEROC_COLL_BROADCAST,
                (int)dt, 0,         root, 0,   0,     NULL};
  return zeroc__mpi_run(&o);
}

const zeroc_comm_ops_t zeroc__mpi_comm_ops = {
    .name = "mpi",
    .group_init = zeroc__mpi_group_init,
    .group_fini = NULL,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .send = mpi_send,
    .recv = mpi_recv,
    .alltoall = mpi_alltoall,
    .alltoallv = mpi_alltoallv,
};
