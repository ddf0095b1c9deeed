/*
 * comm/comm_staged.c - MPI collectives on memory MPI cannot read (cuda),
 * staged through pinned host memory. Selected with ZEROC_COMM=mpi on cuda (or
 * ZEROC_COMM=staged on either device) for tests: several ranks sharing one GPU,
 * which NCCL refuses ("duplicate GPU"). Each collective runs in stream order:
 *
 *   stream: copy in -> pinned | notify worker | wait done >= k | copy pinned -> out | check k
 *   worker: once notified of k: zeroc__mpi_run (comm_mpi.c: the same collective,
 *           bf16 rounding, timeout and watchdog as the cpu path); done = k
 *
 * One worker thread per stream, as the cpu device has, so a collective waiting
 * for its peers never holds up another stream. The collective cannot run in a
 * CUDA host function: those may be run one at a time, and may not wait on
 * anything outside their stream. The stream waits for `done` on the device
 * (cuStreamWaitValue32), so no host thread blocks. A failed collective still
 * releases the stream (later ones on it are skipped), and the check after it
 * makes its error the stream's sticky error, which the next wait returns. On
 * the cpu device the same code runs with plain copies, so CI without a GPU
 * exercises it. A device-side wait holds its hardware queue: with more streams
 * than CUDA_DEVICE_MAX_CONNECTIONS (default 8) another stream's work may queue
 * behind it, so tests/gpu_layouts.sh raises that to 32. The pinned staging is
 * outside the memory accountant, like NCCL's own buffers (a test mode).
 * bf16 reductions are comm_mpi.c's: each pairwise add in fp32, rounded to bf16,
 * the rounding NCCL's bf16 sum applies at each step (the order of the adds is
 * MPI's, so beyond two ranks the last bit may differ from NCCL's), and one
 * source of truth with the cpu path rather than a second reduction to keep
 * equal to it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi.h"
#include "core/error.h"
#include "core/log.h"

#define RING 256            /* collectives issued ahead of the worker before the issuer waits */
#define MIN_STAGE (1u << 20) /* staging grows to at least this, then doubles */
#define MAX_RETIRED 64

typedef struct staged {
  zeroc_stream_t *s;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake;  /* worker: an operation was notified, or stop */
  pthread_cond_t space; /* issuer: a ring slot was freed */
  zeroc__mpi_op_t ring[RING];
  uint32_t pushed, notified, popped; /* operation counts; k = 1, 2, ... */
  int stop;
  uint32_t *done; /* pinned: operations finished, read by the device's wait */
  /* pinned staging: the send part, then the receive part. Replaced by a larger
   * one when a collective needs more; the old one may still be in flight, so it
   * is kept until the stream goes. */
  char *buf;
  size_t cap;
  void *retired[MAX_RETIRED];
  size_t retired_bytes[MAX_RETIRED];
  int nretired;
  zeroc_result_t err; /* the first failure, at operation err_op */
  uint32_t err_op;
  char errmsg[ZEROC_ERRMSG_MAX];
} staged_t;

static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the worker ---------------------------------------------------------------------- */

static void *worker_main(void *arg) {
  staged_t *st = arg;
  pthread_setname_np(pthread_self(), "zeroc-staged");
  pthread_mutex_lock(&st->mu);
  for (;;) {
    /* the next operation is runnable once its inputs are staged (notified) */
    while (!st->stop && (int32_t)(st->notified - st->popped) <= 0)
      pthread_cond_wait(&st->wake, &st->mu);
    if ((int32_t)(st->notified - st->popped) <= 0) break; /* stopping, nothing staged */
    zeroc__mpi_op_t o = st->ring[st->popped % RING];
    uint32_t k = st->popped + 1;
    int failed = st->err != ZEROC_OK;
    pthread_mutex_unlock(&st->mu);
    zeroc_result_t r = failed ? ZEROC_OK : zeroc__mpi_run(&o);
    free(o.v);
    pthread_mutex_lock(&st->mu);
    if (r != ZEROC_OK && st->err == ZEROC_OK) {
      st->err = r;
      st->err_op = k;
      snprintf(st->errmsg, sizeof st->errmsg, "%s", zeroc__tls_error());
    }
    st->popped = k;
    __atomic_store_n(st->done, k, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&st->space);
  }
  /* stopping: operations never staged (their stream failed first) are dropped,
   * and every wait the stream may still hold is released */
  for (uint32_t k = st->popped; k != st->pushed; k++) free(st->ring[k % RING].v);
  __atomic_store_n(st->done, st->pushed, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

static void on_notify(void *arg) {
  staged_t *st = arg;
  pthread_mutex_lock(&st->mu);
  st->notified++;
  pthread_cond_signal(&st->wake);
  pthread_mutex_unlock(&st->mu);
}

/* ---- per-stream state ------------------------------------------------------------------ */

static void pinned_free(zeroc_device_t *dev, void *p, size_t bytes) {
  if (p) dev->ops->free(dev, ZEROC_MEM_PINNED, p, bytes);
}

/* The stream's destructor hook: lets the stream finish, stops the worker, frees. */
static void staged_free(zeroc_stream_t *s) {
  staged_t *st = s->comm;
  if (!st) return;
  zeroc_device_t *dev = s->dev;
  zeroc_stream_sync(s); /* its error, if any, was reported by an earlier wait */
  pthread_mutex_lock(&st->mu);
  st->stop = 1;
  pthread_cond_broadcast(&st->wake);
  pthread_mutex_unlock(&st->mu);
  pthread_join(st->thread, NULL);
  pinned_free(dev, st->buf, st->cap);
  for (int i = 0; i < st->nretired; i++) pinned_free(dev, st->retired[i], st->retired_bytes[i]);
  pinned_free(dev, st->done, 64);
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->wake);
  pthread_cond_destroy(&st->space);
  free(st);
  s->comm = NULL;
  s->comm_free = NULL;
}

static zeroc_result_t staged_new(zeroc_stream_t *s, staged_t **out) {
  staged_t *st = calloc(1, sizeof *st);
  if (!st) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "staged comm state");
  st->s = s;
  void *done = NULL;
  zeroc_result_t r = s->dev->ops->alloc(s->dev, ZEROC_MEM_PINNED, 64, &done);
  if (r != ZEROC_OK) {
    free(st);
    return r;
  }
  st->done = done;
  *st->done = 0;
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->wake, NULL);
  pthread_cond_init(&st->space, NULL);
  int e = pthread_create(&st->thread, NULL, worker_main, st);
  if (e) {
    pinned_free(s->dev, done, 64);
    free(st);
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pthread_create for the staged comm worker: %s",
                      strerror(e));
  }
  *out = st;
  return ZEROC_OK;
}

static zeroc_result_t state_of(zeroc_stream_t *s, staged_t **out) {
  zeroc_result_t r = ZEROC_OK;
  pthread_mutex_lock(&create_mu);
  if (!s->comm) {
    staged_t *st = NULL;
    r = staged_new(s, &st);
    if (r == ZEROC_OK) {
      s->comm = st;
      s->comm_free = staged_free;
    }
  }
  *out = s->comm;
  pthread_mutex_unlock(&create_mu);
  return r;
}

/* Staging of at least `bytes`. Only the issuing thread changes it. */
static zeroc_result_t reserve(staged_t *st, size_t bytes) {
  if (bytes <= st->cap) return ZEROC_OK;
  if (st->nretired == MAX_RETIRED)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "staged comm: staging replaced %d times", MAX_RETIRED);
  size_t cap = st->cap ? 2 * st->cap : MIN_STAGE;
  if (cap < bytes) cap = bytes;
  zeroc_device_t *dev = st->s->dev;
  void *p = NULL;
  zeroc_result_t r = dev->ops->alloc(dev, ZEROC_MEM_PINNED, cap, &p);
  if (r != ZEROC_OK)
    return ZEROC_FAIL(r, "staged comm: %zu bytes of pinned staging: %s", cap, zeroc__tls_error());
  if (st->buf) {
    st->retired[st->nretired] = st->buf;
    st->retired_bytes[st->nretired++] = st->cap;
  }
  st->buf = p;
  st->cap = cap;
  ZINFO(COMM, "staged comm: %zu bytes of pinned staging for stream channel %d", cap,
        st->s->channel);
  return ZEROC_OK;
}

/* ---- one collective ---------------------------------------------------------------------- */

typedef struct {
  staged_t *st;
  zeroc_stream_t *s;
  char *hs, *hr; /* the send and receive parts of the staging */
  zeroc__mpi_op_t o;
} stage_t;

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

/* Reserves staging for `in` bytes sent and `out` received, and copies `send`
 * (in bytes; NULL: nothing) into the send part in stream order. */
static zeroc_result_t begin(stage_t *x, zeroc_group_t *g, zeroc_stream_t *s, int coll,
                            zeroc_dtype_t dt, const void *send, size_t in, size_t out) {
  memset(x, 0, sizeof *x);
  x->s = s;
  ZEROC_CHECK(state_of(s, &x->st));
  ZEROC_CHECK(reserve(x->st, up64(in) + out));
  x->hs = x->st->buf;
  x->hr = x->st->buf + up64(in);
  if (send && in) ZEROC_CHECK(zeroc_memcpy_async(s, x->hs, send, in));
  int p2p = coll == ZEROC_COLL_SEND || coll == ZEROC_COLL_RECV;
  /* channel 0's collectives run on the worker while host helpers
   * (zeroc__allreduce_host) use mpi[0] on the caller: their own duplicate */
  MPI_Comm comm = p2p               ? g->mpi[ZEROC_P2P_CHANNEL]
                  : s->channel == 0 ? g->mpi_staged
                                    : g->mpi[s->channel];
  x->o = (zeroc__mpi_op_t){.g = g,
                           .comm = comm,
                           .send = x->hs,
                           .recv = x->hr,
                           .seq = g->seq[s->channel],
                           .coll = coll,
                           .dt = (int)dt,
                           .wd = s->channel};
  return ZEROC_OK;
}

/* Hands the collective to the worker and makes the stream wait for it. */
static zeroc_result_t run(stage_t *x) {
  staged_t *st = x->st;
  pthread_mutex_lock(&st->mu);
  while (st->pushed - st->popped >= RING) pthread_cond_wait(&st->space, &st->mu);
  st->ring[st->pushed % RING] = x->o;
  uint32_t k = ++st->pushed;
  pthread_mutex_unlock(&st->mu);
  x->o.v = NULL; /* the worker owns it now */
  zeroc_result_t r = zeroc__stream_notify(x->s, on_notify, st);
  if (r != ZEROC_OK) {
    /* the worker must not wait for a notification that will not come: the
     * collective is marked failed and released at once */
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    pthread_mutex_lock(&st->mu);
    if (st->err == ZEROC_OK) {
      st->err = r;
      st->err_op = k;
      snprintf(st->errmsg, sizeof st->errmsg, "%s", msg);
    }
    st->notified++;
    pthread_cond_signal(&st->wake);
    pthread_mutex_unlock(&st->mu);
    zeroc__tls_error_set(msg);
    return r;
  }
  x->o.seq = k; /* from here on: the operation's number, for end() */
  return zeroc__stream_wait_value(x->s, st->done, k);
}

typedef struct {
  staged_t *st;
  uint32_t k;
} check_t;

static zeroc_result_t run_check(void *p) {
  check_t *c = p;
  staged_t *st = c->st;
  zeroc_result_t r = ZEROC_OK;
  pthread_mutex_lock(&st->mu);
  if (st->err != ZEROC_OK && (int32_t)(c->k - st->err_op) >= 0) {
    r = st->err;
    zeroc__tls_error_set(st->errmsg);
  }
  pthread_mutex_unlock(&st->mu);
  return r;
}

/* After the copies out: the collective's failure becomes the stream's error. */
static zeroc_result_t end(stage_t *x) {
  check_t c = {x->st, (uint32_t)x->o.seq};
  return zeroc__stream_enqueue(x->s, run_check, &c, sizeof c);
}

static zeroc_result_t copy_out(stage_t *x, void *recv, size_t off, size_t bytes) {
  if (!bytes) return ZEROC_OK;
  return zeroc_memcpy_async(x->s, (char *)recv + off, x->hr + off, bytes);
}

/* A one-rank group: the result is the input (a device copy). */
static zeroc_result_t alone(zeroc_stream_t *s, const void *send, void *recv, size_t bytes) {
  if (send == recv || !bytes) return ZEROC_OK;
  return zeroc_memcpy_async(s, recv, send, bytes);
}

/* ---- the table's entries -------------------------------------------------------------- */

static zeroc_result_t st_allgather(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                   void *recv, size_t count, zeroc_dtype_t dt) {
  size_t b = count * zeroc_dtype_size(dt), all = b * (size_t)g->size;
  if (g->size == 1) return alone(s, send, (char *)recv, b);
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, ZEROC_COLL_ALLGATHER, dt, send, b, all));
  x.o.count = count;
  ZEROC_CHECK(run(&x));
  ZEROC_CHECK(copy_out(&x, recv, 0, all));
  return end(&x);
}

static zeroc_result_t st_reduce(zeroc_group_t *g, zeroc_stream_t *s, int coll, const void *send,
                                void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op) {
  size_t b = count * zeroc_dtype_size(dt);
  size_t in = coll == ZEROC_COLL_REDUCE_SCATTER ? b * (size_t)g->size : b;
  if (g->size == 1) return alone(s, send, recv, b);
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, coll, dt, send, in, b));
  x.o.count = count;
  x.o.op = (int)op;
  ZEROC_CHECK(run(&x));
  ZEROC_CHECK(copy_out(&x, recv, 0, b));
  return end(&x);
}

static zeroc_result_t st_reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                        void *recv, size_t count, zeroc_dtype_t dt,
                                        zeroc_redop_t op) {
  return st_reduce(g, s, ZEROC_COLL_REDUCE_SCATTER, send, recv, count, dt, op);
}

static zeroc_result_t st_allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                   void *recv, size_t count, zeroc_dtype_t dt, zeroc_redop_t op) {
  return st_reduce(g, s, ZEROC_COLL_ALLREDUCE, send, recv, count, dt, op);
}

static zeroc_result_t st_broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                                   zeroc_dtype_t dt, int root) {
  size_t b = count * zeroc_dtype_size(dt);
  if (g->size == 1) return ZEROC_OK;
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, ZEROC_COLL_BROADCAST, dt, NULL, 0, b));
  /* MPI broadcasts the receive part in place: the root stages its data there */
  if (g->rank == root && b) ZEROC_CHECK(zeroc_memcpy_async(s, x.hr, buf, b));
  x.o.count = count;
  x.o.peer = root;
  ZEROC_CHECK(run(&x));
  if (g->rank != root) ZEROC_CHECK(copy_out(&x, buf, 0, b));
  return end(&x);
}

static zeroc_result_t st_send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count,
                              zeroc_dtype_t dt, int peer, int tag) {
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, ZEROC_COLL_SEND, dt, buf, count * zeroc_dtype_size(dt), 0));
  x.o.count = count;
  x.o.peer = peer;
  x.o.tag = tag;
  ZEROC_CHECK(run(&x));
  return end(&x);
}

static zeroc_result_t st_recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count,
                              zeroc_dtype_t dt, int peer, int tag) {
  size_t b = count * zeroc_dtype_size(dt);
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, ZEROC_COLL_RECV, dt, NULL, 0, b));
  x.o.count = count;
  x.o.peer = peer;
  x.o.tag = tag;
  ZEROC_CHECK(run(&x));
  ZEROC_CHECK(copy_out(&x, buf, 0, b));
  return end(&x);
}

static zeroc_result_t st_alltoall(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                  void *recv, size_t count, zeroc_dtype_t dt) {
  size_t esz = zeroc_dtype_size(dt), all = count * esz * (size_t)g->size;
  if (g->size == 1) return alone(s, send, recv, all);
  stage_t x;
  ZEROC_CHECK(begin(&x, g, s, ZEROC_COLL_ALLTOALL, dt, send, all, all));
  x.o.count = count;
  ZEROC_CHECK(run(&x));
  ZEROC_CHECK(copy_out(&x, recv, 0, all));
  return end(&x);
}

/* The staging holds the send and receive extents with the caller's
 * displacements; only the blocks received are copied out, so the parts of
 * `recv` between them keep their bytes. */
static zeroc_result_t st_alltoallv(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                   const size_t *sc, const size_t *sd, void *recv,
                                   const size_t *rc, const size_t *rd, zeroc_dtype_t dt) {
  size_t esz = zeroc_dtype_size(dt), sext = 0, rext = 0;
  int me = g->rank;
  if (g->size == 1)
    return alone(s, (const char *)send + sd[me] * esz, (char *)recv + rd[me] * esz, sc[me] * esz);
  for (int p = 0; p < g->size; p++) {
    if (sc[p] && sd[p] + sc[p] > sext) sext = sd[p] + sc[p];
    if (rc[p] && rd[p] + rc[p] > rext) rext = rd[p] + rc[p];
  }
  int *v;
  size_t total;
  ZEROC_CHECK(zeroc__mpi_counts(g, sc, sd, rc, rd, &v, &total));
  stage_t x;
  zeroc_result_t r = begin(&x, g, s, ZEROC_COLL_ALLTOALL, dt, send, sext * esz, rext * esz);
  if (r != ZEROC_OK) {
    free(v);
    return r;
  }
  x.o.count = total;
  x.o.v = v;
  ZEROC_CHECK(run(&x));
  for (int p = 0; p < g->size; p++) ZEROC_CHECK(copy_out(&x, recv, rd[p] * esz, rc[p] * esz));
  return end(&x);
}

/* The bf16 operations, and channel 0's own communicator (see begin). */
static zeroc_result_t st_group_init(zeroc_group_t *g) {
  ZEROC_CHECK(zeroc__mpi_group_init(g));
  int e = MPI_Comm_dup(g->mpi[0], &g->mpi_staged);
  if (e != MPI_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_dup for group %s's staged channel 0: error %d",
                      g->name, e);
  return ZEROC_OK;
}

const zeroc_comm_ops_t zeroc__staged_comm_ops = {
    .name = "mpi-staged",
    .group_init = st_group_init,
    .group_fini = NULL, /* zeroc__group_destroy frees mpi_staged */
    .allgather = st_allgather,
    .reduce_scatter = st_reduce_scatter,
    .allreduce = st_allreduce,
    .broadcast = st_broadcast,
    .send = st_send,
    .recv = st_recv,
    .alltoall = st_alltoall,
    .alltoallv = st_alltoallv,
};
