/*
 * device/device_cpu.c - the cpu device backend.
 *
 * Memory is aligned host memory. The compute stream is inline: its work runs on
 * the calling thread when enqueued. Every other stream is a worker thread
 * draining a FIFO ring of operations with inline payloads (no allocation per
 * operation). An event is a (stream, sequence number) pair: it completes when
 * the stream's completed counter reaches the number of operations enqueued
 * before the record. A failed operation makes its stream's error sticky: later
 * operations are skipped (but still counted as completed, so nobody waits
 * forever) and every wait on the stream returns the error.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "device/device.h"

#define RING 256 /* operations in flight per stream before the producer waits */

typedef struct {
  zeroc__op_fn fn;
  size_t n;
  _Alignas(16) unsigned char payload[ZEROC_OP_PAYLOAD_MAX];
} cpu_op_t;

typedef struct cpu_stream {
  struct zeroc_stream base;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work;     /* signalled when an op is enqueued or stop is set */
  pthread_cond_t progress; /* broadcast when an op completes */
  cpu_op_t *ring;
  uint64_t enqueued, completed; /* monotonically increasing op counts */
  int stop;
  zeroc_result_t err;
  char errmsg[ZEROC_ERRMSG_MAX];
  char name[16]; /* the worker's thread name, fixed before it starts */
} cpu_stream_t;

typedef struct cpu_event {
  struct zeroc_event base;
  cpu_stream_t *s; /* NULL: complete */
  uint64_t seq;
} cpu_event_t;

/* ---- memory ----------------------------------------------------------------- */

static zeroc_result_t cpu_open(zeroc_device_t *dev, int ordinal) {
  dev->kind = ZEROC_DEVICE_CPU;
  dev->ordinal = ordinal;
  snprintf(dev->name, sizeof dev->name, "cpu");
  dev->peak_tflops_bf16 = 0;
  int64_t huge = 1;
  ZEROC_CHECK(zeroc__env_i64("ZEROC_HUGE_PAGES", 1, &huge));
  dev->huge_pages = (int)huge;
  return ZEROC_OK;
}

static void cpu_close(zeroc_device_t *dev) { (void)dev; }

/* Unless ZEROC_HUGE_PAGES=0, buffers of 2 MiB or more start on a 2 MiB boundary
 * and are marked for transparent huge pages (MADV_HUGEPAGE: Debian's default THP
 * mode is "madvise", so nothing is huge unless asked). A step streams its
 * activations, gradients and optimizer state through elementwise passes and
 * OpenBLAS's packing; with 4 KiB pages each page costs a TLB miss (a 32 MiB
 * add ran 0.78-0.89x as long on huge pages, one sgemm of the GPT 0.96-0.99x).
 * The price: up to 2 MiB more resident memory per such buffer (its last huge
 * page is whole); the accountant still counts the bytes asked for. */
#define HUGE_PAGE ((size_t)2 << 20)

static zeroc_result_t cpu_alloc(zeroc_device_t *dev, zeroc_memkind_t kind, size_t bytes,
                                void **p) {
  size_t align = kind == ZEROC_MEM_HOST ? 64 : kind == ZEROC_MEM_PINNED ? 4096 : 256;
  if (dev->huge_pages && bytes >= HUGE_PAGE) align = HUGE_PAGE;
  size_t n = (bytes + align - 1) / align * align;
  *p = aligned_alloc(align, n);
  if (!*p) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "aligned_alloc(%zu, %zu) failed", align, n);
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) (void)madvise(*p, n, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
  return ZEROC_OK;
}

static void cpu_free(zeroc_device_t *dev, zeroc_memkind_t kind, void *p, size_t bytes) {
  (void)dev, (void)kind, (void)bytes;
  free(p);
}

/* ---- streams ---------------------------------------------------------------- */

static void *worker_main(void *arg) {
  cpu_stream_t *s = arg;
  /* not s->base.channel: the caller assigns it while this thread starts */
  pthread_setname_np(pthread_self(), s->name);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->completed == s->enqueued && !s->stop) pthread_cond_wait(&s->work, &s->mu);
    if (s->completed == s->enqueued && s->stop) break;
    cpu_op_t *op = &s->ring[s->completed % RING];
    zeroc_result_t failed = s->err;
    pthread_mutex_unlock(&s->mu);
    zeroc_result_t r = failed ? failed : op->fn(op->payload);
    pthread_mutex_lock(&s->mu);
    if (r != ZEROC_OK && s->err == ZEROC_OK) {
      s->err = r;
      snprintf(s->errmsg, sizeof s->errmsg, "%s", zeroc__tls_error());
    }
    s->completed++;
    pthread_cond_broadcast(&s->progress);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static zeroc_result_t cpu_stream_create(zeroc_device_t *dev, int priority, int inline_,
                                        zeroc_stream_t **out) {
  (void)priority;
  cpu_stream_t *s = calloc(1, sizeof *s);
  if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "stream struct");
  s->base.dev = dev;
  s->base.inline_ = inline_;
  s->base.channel = dev->next_channel; /* final value set by the caller */
  snprintf(s->name, sizeof s->name, "zeroc-s%d", dev->next_channel);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->progress, NULL);
  if (!inline_) {
    s->ring = aligned_alloc(64, sizeof(cpu_op_t) * RING);
    if (!s->ring) {
      free(s);
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "stream ring of %d ops", RING);
    }
    int e = pthread_create(&s->thread, NULL, worker_main, s);
    if (e) {
      free(s->ring);
      free(s);
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pthread_create for a stream worker: %s", strerror(e));
    }
  }
  *out = &s->base;
  return ZEROC_OK;
}

static zeroc_result_t cpu_stream_sync(zeroc_stream_t *bs) {
  cpu_stream_t *s = (cpu_stream_t *)bs;
  if (bs->inline_) return ZEROC_OK;
  pthread_mutex_lock(&s->mu);
  while (s->completed < s->enqueued) pthread_cond_wait(&s->progress, &s->mu);
  zeroc_result_t r = s->err;
  if (r) zeroc__tls_error_set(s->errmsg);
  pthread_mutex_unlock(&s->mu);
  return r;
}

static void cpu_stream_destroy(zeroc_stream_t *bs) {
  cpu_stream_t *s = (cpu_stream_t *)bs;
  if (!bs->inline_) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    free(s->ring);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->progress);
  free(s);
}

static zeroc_result_t cpu_enqueue(zeroc_stream_t *bs, zeroc__op_fn fn, const void *payload,
                                  size_t n) {
  cpu_stream_t *s = (cpu_stream_t *)bs;
  if (bs->inline_) {
    unsigned char copy[ZEROC_OP_PAYLOAD_MAX] __attribute__((aligned(16)));
    memcpy(copy, payload, n);
    return fn(copy);
  }
  pthread_mutex_lock(&s->mu);
  while (s->enqueued - s->completed >= RING) pthread_cond_wait(&s->progress, &s->mu);
  cpu_op_t *op = &s->ring[s->enqueued % RING];
  op->fn = fn;
  op->n = n;
  memcpy(op->payload, payload, n);
  s->enqueued++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  return ZEROC_OK;
}

typedef struct {
  void *dst;
  const void *src;
  size_t n;
  int v;
} copy_op_t;

static zeroc_result_t run_memcpy(void *p) {
  copy_op_t *c = p;
  memmove(c->dst, c->src, c->n);
  return ZEROC_OK;
}

static zeroc_result_t run_memset(void *p) {
  copy_op_t *c = p;
  memset(c->dst, c->v, c->n);
  return ZEROC_OK;
}

static zeroc_result_t cpu_memcpy_async(zeroc_stream_t *s, void *dst, const void *src, size_t n) {
  copy_op_t c = {dst, src, n, 0};
  return cpu_enqueue(s, run_memcpy, &c, sizeof c);
}

static zeroc_result_t cpu_memset_async(zeroc_stream_t *s, void *dst, int v, size_t n) {
  copy_op_t c = {dst, NULL, n, v};
  return cpu_enqueue(s, run_memset, &c, sizeof c);
}

/* ---- host signals (the staged comm backend) ----------------------------------- */

typedef struct {
  void (*fn)(void *);
  void *arg;
  const uint32_t *flag;
  uint32_t v;
} signal_op_t;

static zeroc_result_t run_notify(void *p) {
  signal_op_t *o = p;
  o->fn(o->arg);
  return ZEROC_OK;
}

static zeroc_result_t cpu_notify(zeroc_stream_t *s, void (*fn)(void *), void *arg) {
  signal_op_t o = {fn, arg, NULL, 0};
  return cpu_enqueue(s, run_notify, &o, sizeof o);
}

/* Polls the flag, backing off from yielding to sleeping 1 ms, like the mpi
 * backend's wait: the writer is another thread of this process. */
static zeroc_result_t run_wait_value(void *p) {
  signal_op_t *o = p;
  zeroc__backoff_t b = ZEROC__BACKOFF_INIT;
  while ((int32_t)(__atomic_load_n(o->flag, __ATOMIC_ACQUIRE) - o->v) < 0)
    zeroc__backoff(&b, 0, 100);
  return ZEROC_OK;
}

static zeroc_result_t cpu_wait_value(zeroc_stream_t *s, const uint32_t *flag, uint32_t v) {
  signal_op_t o = {NULL, NULL, flag, v};
  return cpu_enqueue(s, run_wait_value, &o, sizeof o);
}

/* ---- events ----------------------------------------------------------------- */

static zeroc_result_t cpu_event_create(zeroc_device_t *dev, zeroc_event_t **out) {
  cpu_event_t *e = calloc(1, sizeof *e);
  if (!e) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "event struct");
  e->base.dev = dev;
  *out = &e->base;
  return ZEROC_OK;
}

static void cpu_event_destroy(zeroc_event_t *e) { free(e); }

static zeroc_result_t cpu_event_record(zeroc_event_t *be, zeroc_stream_t *bs) {
  cpu_event_t *e = (cpu_event_t *)be;
  cpu_stream_t *s = (cpu_stream_t *)bs;
  if (bs->inline_) { /* inline work has already run */
    e->s = NULL;
    e->seq = 0;
    return ZEROC_OK;
  }
  pthread_mutex_lock(&s->mu);
  e->s = s;
  e->seq = s->enqueued;
  pthread_mutex_unlock(&s->mu);
  return ZEROC_OK;
}

/* Blocks until `s` has completed `seq` operations; returns its sticky error. */
static zeroc_result_t wait_seq(cpu_stream_t *s, uint64_t seq) {
  pthread_mutex_lock(&s->mu);
  while (s->completed < seq) pthread_cond_wait(&s->progress, &s->mu);
  zeroc_result_t r = s->err;
  if (r) zeroc__tls_error_set(s->errmsg);
  pthread_mutex_unlock(&s->mu);
  return r;
}

typedef struct {
  cpu_stream_t *src;
  uint64_t seq;
} wait_op_t;

static zeroc_result_t run_wait(void *p) {
  wait_op_t *w = p;
  return wait_seq(w->src, w->seq);
}

static zeroc_result_t cpu_stream_wait_event(zeroc_stream_t *bs, zeroc_event_t *be) {
  cpu_event_t *e = (cpu_event_t *)be;
  if (!e->s || &e->s->base == bs) return ZEROC_OK; /* complete, or same-stream order */
  if (bs->inline_) return wait_seq(e->s, e->seq);
  wait_op_t w = {e->s, e->seq};
  return cpu_enqueue(bs, run_wait, &w, sizeof w);
}

static zeroc_result_t cpu_event_sync(zeroc_event_t *be) {
  cpu_event_t *e = (cpu_event_t *)be;
  if (!e->s) return ZEROC_OK;
  return wait_seq(e->s, e->seq);
}

static zeroc_result_t cpu_event_query(zeroc_event_t *be, int *done) {
  cpu_event_t *e = (cpu_event_t *)be;
  if (!e->s) {
    *done = 1;
    return ZEROC_OK;
  }
  pthread_mutex_lock(&e->s->mu);
  *done = e->s->completed >= e->seq;
  pthread_mutex_unlock(&e->s->mu);
  return ZEROC_OK;
}

const zeroc_device_ops_t zeroc__cpu_device_ops = {
    .name = "cpu",
    .host_memory = 1,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .enqueue = cpu_enqueue,
    .memcpy_async = cpu_memcpy_async,
    .memset_async = cpu_memset_async,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .notify = cpu_notify,
    .wait_value = cpu_wait_value,
};
