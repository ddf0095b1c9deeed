/*
 * tests/test_device.c - the cpu device backend: memory through the accountant,
 * FIFO streams, events across streams, sticky errors, the inline compute stream.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "device/device.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;

static void test_memory(void) {
  zeroc_mem_stats_t before, after;
  zeroc_ctx_memory(ctx, &before);
  void *d = NULL, *p = NULL, *h = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS, 1000, &d));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_PINNED, ZEROC_TAG_OPTIMIZER, 5000, &p));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_HOST, ZEROC_TAG_WORKSPACE, 77, &h));
  CU_ASSERT(((uintptr_t)d & 255) == 0);
  CU_ASSERT(((uintptr_t)p & 4095) == 0);
  CU_ASSERT(((uintptr_t)h & 63) == 0);
  memset(d, 1, 1000);
  memset(p, 2, 5000);
  zeroc_ctx_memory(ctx, &after);
  CU_ASSERT_EQUAL(after.current[ZEROC_MEM_DEVICE][ZEROC_TAG_PARAMS] - before.current[ZEROC_MEM_DEVICE][ZEROC_TAG_PARAMS], 1000);
  CU_ASSERT_EQUAL(after.current[ZEROC_MEM_PINNED][ZEROC_TAG_OPTIMIZER] - before.current[ZEROC_MEM_PINNED][ZEROC_TAG_OPTIMIZER], 5000);
  CU_ASSERT_EQUAL(after.current[ZEROC_MEM_HOST][ZEROC_TAG_WORKSPACE] - before.current[ZEROC_MEM_HOST][ZEROC_TAG_WORKSPACE], 77);
  zeroc_mem_free(ctx, d);
  zeroc_mem_free(ctx, p);
  zeroc_mem_free(ctx, h);
  zeroc_mem_free(ctx, NULL);
  zeroc_ctx_memory(ctx, &after);
  for (int k = 0; k < ZEROC_MEM_KIND_COUNT; k++)
    CU_ASSERT_EQUAL(after.current_total[k], before.current_total[k]);
  CU_ASSERT(after.peak_total[ZEROC_MEM_PINNED] >= 5000);
  void *x = NULL;
  CU_ASSERT_EQUAL(zeroc_mem_alloc(ctx, ZEROC_MEM_KIND_COUNT, ZEROC_TAG_PARAMS, 8, &x), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_mem_alloc(ctx, ZEROC_MEM_HOST, ZEROC_TAG_PARAMS, (size_t)1 << 62, &x), ZEROC_ERR_NOMEM);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "bytes of host memory for params"));
}

/* The VmFlags of the mapping holding p in /proc/self/smaps ("" if none). */
static void vm_flags(const void *p, char *flags, size_t n) {
  flags[0] = 0;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[512];
  int inside = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    } else if (inside && !strncmp(line, "VmFlags:", 8)) {
      snprintf(flags, n, "%s", line + 8);
      break;
    }
  }
  fclose(f);
}

/* Buffers of 2 MiB or more start on a 2 MiB boundary and carry the huge-page
 * advice (VmFlags "hg", where the kernel has transparent huge pages). */
static void test_huge_pages(void) {
  void *big = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, (size_t)3 << 20, &big));
  CU_ASSERT(((uintptr_t)big & ((2u << 20) - 1)) == 0);
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) {
    char flags[256];
    vm_flags(big, flags, sizeof flags);
    ZT_ASSERT_MSG(strstr(flags, " hg") != NULL, "VmFlags of a 3 MiB buffer:%s", flags);
  }
  zeroc_mem_free(ctx, big);
}

typedef struct {
  int *log;
  atomic_int *n;
  int value;
} append_t;

static void append(void *arg) {
  append_t *a = arg;
  a->log[atomic_fetch_add(a->n, 1)] = a->value;
}

static void test_fifo(void) {
  zeroc_stream_t *s;
  ZT_OK(zeroc_stream_create(ctx, 0, &s));
  enum { N = 2000 }; /* more than the ring holds: the producer must wait */
  static int log[N];
  static append_t args[N];
  atomic_int n = 0;
  for (int i = 0; i < N; i++) {
    args[i] = (append_t){log, &n, i};
    ZT_OK(zeroc_stream_launch_host(s, append, &args[i]));
  }
  ZT_OK(zeroc_stream_sync(s));
  CU_ASSERT_EQUAL(atomic_load(&n), N);
  int ordered = 1;
  for (int i = 0; i < N; i++) ordered &= log[i] == i;
  CU_ASSERT(ordered);
  zeroc_stream_destroy(s);
  zeroc_stream_destroy(NULL);
}

/* A gate that blocks a stream until the test opens it. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
  atomic_int flag;
} gate_t;

static void gate_wait(void *arg) {
  gate_t *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  atomic_store(&g->flag, 1);
}

static void gate_open(gate_t *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

typedef struct {
  gate_t *g;
  atomic_int seen;
} reader_t;

static void read_flag(void *arg) {
  reader_t *r = arg;
  atomic_store(&r->seen, atomic_load(&r->g->flag) ? 1 : -1);
}

static void test_events_across_streams(void) {
  zeroc_stream_t *a, *b;
  zeroc_event_t *e;
  ZT_OK(zeroc_stream_create(ctx, 0, &a));
  ZT_OK(zeroc_stream_create(ctx, 1, &b));
  ZT_OK(zeroc_event_create(ctx, &e));
  gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  reader_t r = {&g, 0};
  ZT_OK(zeroc_stream_launch_host(a, gate_wait, &g));
  ZT_OK(zeroc_event_record(e, a));
  ZT_OK(zeroc_stream_wait_event(b, e));
  ZT_OK(zeroc_stream_launch_host(b, read_flag, &r));
  usleep(50000);
  int done = -1;
  ZT_OK(zeroc_event_query(e, &done));
  CU_ASSERT_EQUAL(done, 0);            /* a is held at the gate */
  CU_ASSERT_EQUAL(atomic_load(&r.seen), 0); /* so b has not run its read */
  gate_open(&g);
  ZT_OK(zeroc_event_sync(e));
  ZT_OK(zeroc_event_query(e, &done));
  CU_ASSERT_EQUAL(done, 1);
  ZT_OK(zeroc_stream_sync(b));
  CU_ASSERT_EQUAL(atomic_load(&r.seen), 1); /* b ran after a's work */
  /* an event recorded on the inline compute stream is complete at once */
  ZT_OK(zeroc_event_record(e, zeroc_ctx_compute_stream(ctx)));
  ZT_OK(zeroc_event_query(e, &done));
  CU_ASSERT_EQUAL(done, 1);
  /* an event never recorded counts as complete */
  zeroc_event_t *fresh;
  ZT_OK(zeroc_event_create(ctx, &fresh));
  ZT_OK(zeroc_event_sync(fresh));
  zeroc_event_destroy(fresh);
  zeroc_event_destroy(e);
  zeroc_stream_destroy(a);
  zeroc_stream_destroy(b);
}

static zeroc_result_t failing_op(void *p) {
  (void)p;
  return ZEROC_FAIL(ZEROC_ERR_IO, "planted failure %d", 42);
}

static void test_sticky_error(void) {
  zeroc_stream_t *a, *b;
  zeroc_event_t *e;
  ZT_OK(zeroc_stream_create(ctx, 0, &a));
  ZT_OK(zeroc_stream_create(ctx, 0, &b));
  ZT_OK(zeroc_event_create(ctx, &e));
  gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0};
  int dummy = 0;
  ZT_OK(zeroc__stream_enqueue(a, failing_op, &dummy, sizeof dummy));
  ZT_OK(zeroc_stream_launch_host(a, gate_wait, &g)); /* skipped: a has failed */
  ZT_OK(zeroc_event_record(e, a));
  ZT_OK(zeroc_stream_wait_event(b, e));
  zeroc__tls_error_clear();
  CU_ASSERT_EQUAL(zeroc_stream_sync(a), ZEROC_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "planted failure 42"));
  CU_ASSERT_EQUAL(atomic_load(&g.flag), 0);
  CU_ASSERT_EQUAL(zeroc_event_sync(e), ZEROC_ERR_IO);
  CU_ASSERT_EQUAL(zeroc_stream_sync(b), ZEROC_ERR_IO); /* b waited on a's failed work */
  zeroc_event_destroy(e);
  zeroc_stream_destroy(a);
  zeroc_stream_destroy(b);
}

static void test_copies_in_order(void) {
  zeroc_stream_t *s;
  ZT_OK(zeroc_stream_create(ctx, 0, &s));
  enum { N = 1 << 16 };
  float *a, *b, *c;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, N * 4, (void **)&a));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, N * 4, (void **)&b));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_HOST, ZEROC_TAG_BUFFERS, N * 4, (void **)&c));
  zt_fill_uniform(a, N, 1, -1, 1);
  ZT_OK(zeroc_memset_async(s, b, 0, N * 4));
  ZT_OK(zeroc_memcpy_async(s, b, a, N * 4));
  ZT_OK(zeroc_memcpy_async(s, c, b, N * 4));
  ZT_OK(zeroc_memset_async(s, b, 0xff, N * 4));
  ZT_OK(zeroc_stream_sync(s));
  CU_ASSERT_EQUAL(memcmp(a, c, N * 4), 0);
  CU_ASSERT_EQUAL(((unsigned char *)b)[N * 4 - 1], 0xff);
  zeroc_mem_free(ctx, a);
  zeroc_mem_free(ctx, b);
  zeroc_mem_free(ctx, c);
  zeroc_stream_destroy(s);
}

static void test_inline_stream(void) {
  zeroc_stream_t *cs = zeroc_ctx_compute_stream(ctx);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cs);
  int log[1];
  atomic_int n = 0;
  append_t a = {log, &n, 7};
  ZT_OK(zeroc_stream_launch_host(cs, append, &a));
  CU_ASSERT_EQUAL(atomic_load(&n), 1); /* ran before returning */
  ZT_OK(zeroc_stream_sync(cs));
  CU_ASSERT_PTR_NULL(zeroc_stream_native(cs));
}

static void count_up(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

/* The staged comm's two primitives: a notification runs in stream order, and
 * work after a value wait runs only once another thread has written the value
 * (here a thread standing in for the staged comm's worker). */
static void test_notify_and_wait_value(void) {
  zeroc_stream_t *s;
  ZT_OK(zeroc_stream_create(ctx, 0, &s));
  uint32_t *flag;
  int *src, *dst;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_PINNED, ZEROC_TAG_BUFFERS, 64, (void **)&flag));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, sizeof(int), (void **)&src));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, sizeof(int), (void **)&dst));
  *flag = 0;
  *src = 5;
  *dst = 0;
  atomic_int notified = 0;
  ZT_OK(zeroc__stream_notify(s, count_up, &notified));
  ZT_OK(zeroc__stream_wait_value(s, flag, 2));
  ZT_OK(zeroc_memcpy_async(s, dst, src, sizeof(int)));
  for (int i = 0; i < 200 && atomic_load(&notified) == 0; i++) usleep(1000);
  CU_ASSERT_EQUAL(atomic_load(&notified), 1);
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE); /* not yet: the wait is for >= 2 */
  usleep(20000);
  CU_ASSERT_EQUAL(*dst, 0);
  __atomic_store_n(flag, 2, __ATOMIC_RELEASE);
  ZT_OK(zeroc_stream_sync(s));
  CU_ASSERT_EQUAL(*dst, 5);
  /* a cyclic >=: 0x80000001 - 2 is below 2^31, so 0x80000001 counts as past 2 */
  __atomic_store_n(flag, 0x80000001u, __ATOMIC_RELEASE);
  ZT_OK(zeroc__stream_wait_value(s, flag, 2));
  ZT_OK(zeroc_stream_sync(s));
  zeroc_mem_free(ctx, flag);
  zeroc_mem_free(ctx, src);
  zeroc_mem_free(ctx, dst);
  zeroc_stream_destroy(s);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"memory through the accountant", test_memory},
      {"buffers of 2 MiB or more on huge pages", test_huge_pages},
      {"a stream runs its work in FIFO order", test_fifo},
      {"events order work across streams", test_events_across_streams},
      {"a failed op makes the stream's error sticky", test_sticky_error},
      {"async copies and sets run in order", test_copies_in_order},
      {"the compute stream is inline", test_inline_stream},
      {"notify and wait for a value in stream order", test_notify_and_wait_value},
      ZT_END,
  };
  /* One rank: the context needs MPI, started here as a singleton. */
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  int rc = zt_run("device", tests);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return rc;
}
