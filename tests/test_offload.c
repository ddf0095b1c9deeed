/*
 * tests/test_offload.c - the offload I/O layer on a real directory (TMPDIR or
 * /tmp): pinned pool (classes, reuse, accountant, NUMA), swapper round trips of
 * odd sizes through io_uring over several block sizes and queue depths, many
 * tickets from several threads, short reads, bad directories and arguments,
 * clean-up at close, and the per-unit offload state against a reference.
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "offload/offload.h"
#include "runtime/runtime.h"
#include "testutil.h"

#define KiB      ((size_t)1024)
#define MiB      ((size_t)1 << 20)
#define SENTINEL 0xA5

static zeroc_ctx_t *ctx;
static zeroc__pinned_pool_t *pool;
static char *tmp;      /* this run's directory */
static int tmp_direct; /* the file system of `tmp` is expected to take O_DIRECT */

static void fill_random(void *p, size_t n, uint64_t seed) {
  uint8_t *b = p;
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 11;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = zt_rand_u64(&s);
    memcpy(b + i, &r, 8);
  }
  uint64_t r = zt_rand_u64(&s);
  for (; i < n; i++) b[i] = (uint8_t)(r >> (8 * (i & 7)));
}

/* 1 when every byte of p[0..n) is `v`. */
static int all_bytes(const void *p, size_t n, uint8_t v) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return 0;
  return 1;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static zeroc__swap_t *open_swap(const char *job, size_t block, int qd, int direct) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = tmp;
  c.job = job;
  c.block_bytes = block;
  c.queue_depth = qd;
  c.direct = direct;
  zeroc__swap_t *sw = NULL;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  return sw;
}

/* ---- pinned pool ----------------------------------------------------------- */

static void test_pool_classes(void) {
  size_t sizes[] = {1,
                    4095,
                    4096,
                    4097,
                    32767,
                    32768,
                    32769,
                    65536,
                    65537,
                    MiB,
                    MiB + 3,
                    17 * MiB,
                    17 * MiB + 1,
                    300 * MiB + 12345,
                    (size_t)5 << 30};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i], cs = zeroc__pinned_class_size(n);
    size_t pn = (n + 4095) / 4096 * 4096;
    ZT_ASSERT_MSG(cs >= n && cs % 4096 == 0, "class of %zu is %zu", n, cs);
    if (n <= 32768)
      ZT_ASSERT_MSG(cs == pn, "class of %zu is %zu, want %zu", n, cs, pn);
    else
      ZT_ASSERT_MSG((double)cs <= (double)pn * 1.125, "class of %zu is %zu: > 12.5%% waste", n, cs);
  }
  /* Classes are monotone and a class size is its own class. */
  uint64_t s = 5;
  size_t prev = 0, prev_cs = 0;
  while (prev < ((size_t)1 << 44)) {
    size_t n = prev + 1 + (size_t)(zt_rand_u64(&s) % (prev / 64 + 5000));
    size_t cs = zeroc__pinned_class_size(n);
    ZT_ASSERT_MSG(cs >= prev_cs && zeroc__pinned_class_size(cs) == cs, "n %zu -> %zu (prev %zu)", n,
                  cs, prev_cs);
    prev = n, prev_cs = cs;
  }
  CU_ASSERT_EQUAL(zeroc__pinned_class_size(0), 0);
}

static void test_pool_reuse(void) {
  zeroc_mem_stats_t m0, m1;
  zeroc__pinned_stats_t s0, s1;
  zeroc_ctx_memory(ctx, &m0);
  zeroc__pinned_stats(pool, &s0);
  size_t sizes[] = {1, 4097, 100000, MiB + 3, 3 * MiB};
  enum { N = sizeof sizes / sizeof sizes[0] };
  void *b[N];
  size_t total = 0;
  for (int i = 0; i < N; i++) {
    ZT_OK(zeroc__pinned_get(pool, sizes[i], ZEROC_TAG_BUFFERS, &b[i]));
    size_t cap = zeroc__pinned_capacity(pool, b[i]);
    ZT_ASSERT_MSG(((uintptr_t)b[i] & 4095) == 0, "buffer %p not page aligned", b[i]);
    CU_ASSERT_EQUAL(cap, zeroc__pinned_class_size(sizes[i]));
    memset(b[i], i + 1, cap); /* the whole capacity is usable */
    total += cap;
  }
  zeroc_ctx_memory(ctx, &m1);
  CU_ASSERT_EQUAL(m1.current[ZEROC_MEM_PINNED][ZEROC_TAG_BUFFERS] -
                      m0.current[ZEROC_MEM_PINNED][ZEROC_TAG_BUFFERS],
                  total);
  for (int i = 0; i < N; i++) ZT_OK(zeroc__pinned_put(pool, b[i]));
  zeroc__pinned_stats(pool, &s1);
  uint64_t allocs = s1.allocs;
  CU_ASSERT_EQUAL(s1.allocs - s0.allocs, N);
  CU_ASSERT_EQUAL(s1.bytes_cached - s0.bytes_cached, total);

  /* A steady loop: same sizes every step, nothing new from the system. */
  for (int step = 0; step < 50; step++) {
    for (int i = 0; i < N; i++) ZT_OK(zeroc__pinned_get(pool, sizes[i], ZEROC_TAG_BUFFERS, &b[i]));
    for (int i = N - 1; i >= 0; i--) ZT_OK(zeroc__pinned_put(pool, b[i]));
  }
  zeroc__pinned_stats(pool, &s1);
  ZT_ASSERT_MSG(s1.allocs == allocs, "steady loop allocated %llu buffers",
                (unsigned long long)(s1.allocs - allocs));
  CU_ASSERT_EQUAL(s1.hits - s0.hits, 50 * N);

  /* A request of another size in the same class reuses the buffer. */
  ZT_OK(zeroc__pinned_get(pool, MiB + 1000, ZEROC_TAG_OPTIMIZER, &b[0]));
  zeroc__pinned_stats(pool, &s1);
  CU_ASSERT_EQUAL(s1.allocs, allocs);
  /* ... and is counted under its new tag. */
  zeroc_ctx_memory(ctx, &m1);
  CU_ASSERT_EQUAL(m1.current[ZEROC_MEM_PINNED][ZEROC_TAG_OPTIMIZER] -
                      m0.current[ZEROC_MEM_PINNED][ZEROC_TAG_OPTIMIZER],
                  zeroc__pinned_class_size(MiB + 3));
  ZT_OK(zeroc__pinned_put(pool, b[0]));

  /* Bad puts and gets are refused with a message. */
  char local[16];
  CU_ASSERT_EQUAL(zeroc__pinned_put(pool, local), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "not a buffer from this pool"), "%s",
                zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc__pinned_put(pool, b[0]), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "already put back"), "%s", zeroc_last_error(NULL));
  void *x;
  CU_ASSERT_EQUAL(zeroc__pinned_get(pool, 0, ZEROC_TAG_BUFFERS, &x), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__pinned_get(pool, 10, ZEROC_TAG_COUNT, &x), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc__pinned_put(pool, NULL));

  /* Trim gives the cached buffers back; the accountant returns to where it was. */
  zeroc__pinned_trim(pool);
  zeroc__pinned_stats(pool, &s1);
  CU_ASSERT_EQUAL(s1.bytes_cached, 0);
  CU_ASSERT_EQUAL(s1.bytes_out, 0);
  zeroc_ctx_memory(ctx, &m1);
  CU_ASSERT_EQUAL(m1.current_total[ZEROC_MEM_PINNED], m0.current_total[ZEROC_MEM_PINNED]);
}

static void test_pool_threads_worker(void *arg, int *bad) {
  uint64_t s = (uintptr_t)arg;
  for (int k = 0; k < 400; k++) {
    size_t n = 1 + (size_t)(zt_rand_u64(&s) % (256 * KiB));
    void *b = NULL;
    if (zeroc__pinned_get(pool, n, ZEROC_TAG_WORKSPACE, &b) != ZEROC_OK) {
      (*bad)++;
      continue;
    }
    memset(b, (int)(s & 0xff), n);
    if (!all_bytes(b, n, (uint8_t)(s & 0xff))) (*bad)++;
    if (zeroc__pinned_put(pool, b) != ZEROC_OK) (*bad)++;
  }
}

typedef struct {
  uint64_t seed;
  int bad;
} pool_thread_t;

static void *pool_thread(void *arg) {
  pool_thread_t *t = arg;
  test_pool_threads_worker((void *)(uintptr_t)t->seed, &t->bad);
  return NULL;
}

static void test_pool_threads(void) {
  pool_thread_t t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    t[i] = (pool_thread_t){(uint64_t)i + 1, 0};
    pthread_create(&th[i], NULL, pool_thread, &t[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ZT_ASSERT_MSG(t[i].bad == 0, "thread %d saw %d bad buffers", i, t[i].bad);
  }
  zeroc__pinned_stats_t s;
  zeroc__pinned_stats(pool, &s);
  CU_ASSERT_EQUAL(s.bytes_out, 0);
  zeroc__pinned_trim(pool);
}

static void test_pool_numa(void) {
  zeroc__pinned_stats_t s;
  zeroc__pinned_stats(pool, &s);
  CU_ASSERT_EQUAL(s.numa, zeroc__ctx_pool_env(ctx)->numa);
  printf("\n    rank's NUMA node: %d\n", s.numa);
  if (s.numa < 0) return; /* no NUMA information: plain aligned memory, nothing to check */
  void *b;
  size_t n = 8 * MiB;
  ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &b));
  memset(b, 1, n); /* pages exist only once touched */
  hwloc_nodeset_t where = hwloc_bitmap_alloc();
  int r = hwloc_get_area_memlocation(zeroc__ctx_pool_env(ctx)->topo, b, n, where,
                                     HWLOC_MEMBIND_BYNODESET);
  if (r == 0) {
    char str[128];
    hwloc_bitmap_snprintf(str, sizeof str, where);
    printf("    pages of an 8 MiB buffer are on NUMA nodes %s\n", str);
    ZT_ASSERT_MSG(hwloc_bitmap_isset(where, (unsigned)s.numa) && hwloc_bitmap_weight(where) == 1,
                  "pages on nodes %s, want only node %d", str, s.numa);
  } else {
    printf("    hwloc_get_area_memlocation not supported here (%s): location unchecked\n",
           strerror(errno));
  }
  hwloc_bitmap_free(where);
  ZT_OK(zeroc__pinned_put(pool, b));
  zeroc__pinned_trim(pool);
}

/* ---- swapper: round trips -------------------------------------------------- */

/* Writes `n` random bytes to a fresh slot and reads them back into a buffer
 * prefilled with a sentinel: equal bytes, nothing written past n. */
static void roundtrip(zeroc__swap_t *sw, size_t n, uint64_t seed, uint64_t capacity) {
  void *src = NULL, *dst = NULL;
  ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &src));
  ZT_OK(zeroc__pinned_get(pool, n + 4096, ZEROC_TAG_BUFFERS, &dst));
  if (!src || !dst) return;
  size_t dcap = zeroc__pinned_capacity(pool, dst);
  fill_random(src, n, seed);
  memset(dst, SENTINEL, dcap);
  int slot = -1;
  zeroc__ticket_t t = 0;
  ZT_OK(zeroc__swap_slot_create(sw, NULL, capacity, &slot));
  ZT_OK(zeroc__swap_write(sw, slot, src, n, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  CU_ASSERT_EQUAL(zeroc__swap_slot_size(sw, slot), n);
  struct stat st;
  ZT_ASSERT_MSG(stat(zeroc__swap_slot_path(sw, slot), &st) == 0 &&
                    (uint64_t)st.st_size == ((n + 4095) / 4096 * 4096 > capacity
                                                 ? (n + 4095) / 4096 * 4096
                                                 : (capacity + 4095) / 4096 * 4096),
                "file of %zu bytes (capacity %llu) is %lld bytes", n, (unsigned long long)capacity,
                (long long)st.st_size);
  ZT_OK(zeroc__swap_read(sw, slot, dst, n, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  ZT_ASSERT_MSG(memcmp(src, dst, n) == 0, "%zu bytes read back differ", n);
  ZT_ASSERT_MSG(all_bytes((uint8_t *)dst + n, dcap - n, SENTINEL),
                "read of %zu bytes wrote past its end", n);
  /* A prefix reads back too. */
  if (n > 5000) {
    memset(dst, SENTINEL, dcap);
    ZT_OK(zeroc__swap_read(sw, slot, dst, 5000, &t));
    ZT_OK(zeroc__swap_wait(sw, t));
    ZT_ASSERT_MSG(memcmp(src, dst, 5000) == 0 &&
                      all_bytes((uint8_t *)dst + 5000, dcap - 5000, SENTINEL),
                  "prefix of 5000 of %zu bytes", n);
  }
  ZT_OK(zeroc__swap_slot_destroy(sw, slot));
  ZT_OK(zeroc__pinned_put(pool, src));
  ZT_OK(zeroc__pinned_put(pool, dst));
}

static void test_swap_sizes(void) {
  static const struct {
    size_t block;
    int qd;
  } cfgs[] = {{4 * KiB, 1}, {64 * KiB, 4}, {MiB, 16}, {4 * MiB, 32}};
  static const size_t sizes[] = {1, 4095, 4096, 4097, MiB + 3, 17 * MiB};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
    zeroc__swap_t *sw = open_swap("sizes", cfgs[c].block, cfgs[c].qd, -1);
    if (!sw) return;
    zeroc__swap_info_t info;
    zeroc__swap_info(sw, &info);
    CU_ASSERT_EQUAL(info.block_bytes, cfgs[c].block);
    CU_ASSERT_EQUAL(info.queue_depth, cfgs[c].qd);
    if (tmp_direct) ZT_ASSERT_MSG(info.direct == 1, "O_DIRECT expected on %s", tmp);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
      roundtrip(sw, sizes[i], 100 * c + i, (i & 1) ? sizes[i] : 0);
    zeroc__swap_info(sw, &info);
    /* 17 MiB in blocks: the body's requests plus each tail page, at least. */
    uint64_t want = (17 * MiB + cfgs[c].block - 1) / cfgs[c].block * 2;
    ZT_ASSERT_MSG(info.requests >= want, "%llu requests, want >= %llu",
                  (unsigned long long)info.requests, (unsigned long long)want);
    ZT_ASSERT_MSG(info.max_inflight <= cfgs[c].qd && (cfgs[c].qd == 1 || info.max_inflight > 1),
                  "block %zu qd %d: at most %d requests in flight", cfgs[c].block, cfgs[c].qd,
                  info.max_inflight);
    printf("\n    block %4zu KiB, qd %2d: %llu requests, up to %d in flight, %s",
           cfgs[c].block / KiB, cfgs[c].qd, (unsigned long long)info.requests, info.max_inflight,
           info.direct ? "O_DIRECT" : "buffered");
    zeroc__swap_destroy(sw);
  }
}

static void test_swap_buffered(void) {
  zeroc__swap_t *sw = open_swap("buffered", 256 * KiB, 4, 0);
  if (!sw) return;
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  CU_ASSERT_EQUAL(info.direct, 0);
  roundtrip(sw, MiB + 3, 77, 0);
  roundtrip(sw, 4097, 78, 0);
  zeroc__swap_destroy(sw);
  /* The knob does the same from the environment. */
  setenv("ZEROC_OFFLOAD_DIRECT", "0", 1);
  sw = open_swap("buffered", 256 * KiB, 4, -1);
  unsetenv("ZEROC_OFFLOAD_DIRECT");
  if (!sw) return;
  zeroc__swap_info(sw, &info);
  CU_ASSERT_EQUAL(info.direct, 0);
  roundtrip(sw, 5 * MiB + 1, 79, 0);
  zeroc__swap_destroy(sw);
}

/* ---- swapper: many tickets ------------------------------------------------- */

#define NSLOT 24

static void test_swap_many_tickets(void) {
  zeroc__swap_t *sw = open_swap("many", 64 * KiB, 8, -1);
  if (!sw) return;
  uint64_t s = 42;
  size_t n[NSLOT];
  void *a[NSLOT], *b[NSLOT], *d[NSLOT];
  int slot[NSLOT];
  zeroc__ticket_t t[2 * NSLOT];
  for (int k = 0; k < NSLOT; k++) {
    n[k] = k % 5 == 0 ? 1 + zt_rand_u64(&s) % 9000 : 1 + zt_rand_u64(&s) % (3 * MiB);
    ZT_OK(zeroc__pinned_get(pool, n[k], ZEROC_TAG_BUFFERS, &a[k]));
    ZT_OK(zeroc__pinned_get(pool, n[k], ZEROC_TAG_BUFFERS, &b[k]));
    ZT_OK(zeroc__pinned_get(pool, n[k], ZEROC_TAG_BUFFERS, &d[k]));
    fill_random(a[k], n[k], 1000 + k);
    fill_random(b[k], n[k], 2000 + k);
    ZT_OK(zeroc__swap_slot_create(sw, NULL, k % 2 ? n[k] : 0, &slot[k]));
  }
  /* Every slot's write in flight at once, waited for in a scrambled order. */
  for (int k = 0; k < NSLOT; k++) ZT_OK(zeroc__swap_write(sw, slot[k], a[k], n[k], &t[k]));
  for (int k = 0; k < NSLOT; k++) ZT_OK(zeroc__swap_wait(sw, t[(k * 7) % NSLOT]));
  /* Reads of the even slots interleaved with new writes of the odd ones. */
  int nt = 0;
  for (int k = 0; k < NSLOT; k += 2) {
    memset(d[k], SENTINEL, n[k]);
    ZT_OK(zeroc__swap_read(sw, slot[k], d[k], n[k], &t[nt++]));
    ZT_OK(zeroc__swap_write(sw, slot[k + 1], b[k + 1], n[k + 1], &t[nt++]));
  }
  for (int k = nt - 1; k >= 0; k--) ZT_OK(zeroc__swap_wait(sw, t[k]));
  for (int k = 0; k < NSLOT; k += 2)
    ZT_ASSERT_MSG(memcmp(a[k], d[k], n[k]) == 0, "slot %d (%zu bytes) read back wrong", k, n[k]);
  /* Same slot: write, read, write, read submitted back to back must run in
   * submission order, so each read sees the write before it. */
  nt = 0;
  for (int k = 0; k < NSLOT; k++) {
    ZT_OK(zeroc__swap_write(sw, slot[k], b[k], n[k], &t[nt++]));
    memset(d[k], SENTINEL, n[k]);
    ZT_OK(zeroc__swap_read(sw, slot[k], d[k], n[k], &t[nt++]));
  }
  for (int k = 0; k < nt; k += 2) {
    ZT_OK(zeroc__swap_wait(sw, t[k + 1])); /* the read first: it must not overtake */
    ZT_OK(zeroc__swap_wait(sw, t[k]));
  }
  for (int k = 0; k < NSLOT; k++)
    ZT_ASSERT_MSG(memcmp(b[k], d[k], n[k]) == 0, "slot %d: read did not see the write before it",
                  k);
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  ZT_ASSERT_MSG(info.max_inflight == 8, "up to %d requests in flight, want the queue depth 8",
                info.max_inflight);
  for (int k = 0; k < NSLOT; k++) {
    zeroc__pinned_put(pool, a[k]);
    zeroc__pinned_put(pool, b[k]);
    zeroc__pinned_put(pool, d[k]);
  }
  zeroc__swap_destroy(sw);
}

typedef struct {
  zeroc__swap_t *sw;
  int id, bad, errors;
} swap_thread_t;

/* One thread's loop: its own slots, several tickets outstanding, checked. */
static void *swap_thread(void *arg) {
  swap_thread_t *th = arg;
  enum { K = 4 };
  int slot[K];
  void *src[K], *dst[K];
  size_t n[K];
  zeroc__ticket_t t[2 * K];
  uint64_t s = 1234 + (uint64_t)th->id;
  for (int k = 0; k < K; k++) {
    n[k] = 1 + zt_rand_u64(&s) % (2 * MiB);
    char name[32];
    snprintf(name, sizeof name, "t%d.s%d", th->id, k);
    if (zeroc__pinned_get(pool, n[k], ZEROC_TAG_BUFFERS, &src[k]) ||
        zeroc__pinned_get(pool, n[k], ZEROC_TAG_BUFFERS, &dst[k]) ||
        zeroc__swap_slot_create(th->sw, name, 0, &slot[k])) {
      th->errors++;
      return NULL;
    }
  }
  for (int it = 0; it < 12; it++) {
    for (int k = 0; k < K; k++) {
      fill_random(src[k], n[k], (uint64_t)(th->id * 1000 + it * 10 + k));
      memset(dst[k], SENTINEL, n[k]);
      th->errors += zeroc__swap_write(th->sw, slot[k], src[k], n[k], &t[2 * k]) != ZEROC_OK;
      th->errors += zeroc__swap_read(th->sw, slot[k], dst[k], n[k], &t[2 * k + 1]) != ZEROC_OK;
    }
    for (int k = 2 * K - 1; k >= 0; k--) {
      int done = 0;
      /* Half by polling, half by waiting. */
      if (k & 1) {
        while (!done) {
          th->errors += zeroc__swap_poll(th->sw, t[k], &done) != ZEROC_OK;
          if (!done) usleep(50); /* leave the 2 cores to the I/O thread */
        }
      } else {
        th->errors += zeroc__swap_wait(th->sw, t[k]) != ZEROC_OK;
      }
    }
    for (int k = 0; k < K; k++) th->bad += memcmp(src[k], dst[k], n[k]) != 0;
  }
  for (int k = 0; k < K; k++) {
    th->errors += zeroc__swap_slot_destroy(th->sw, slot[k]) != ZEROC_OK;
    zeroc__pinned_put(pool, src[k]);
    zeroc__pinned_put(pool, dst[k]);
  }
  return NULL;
}

static void test_swap_threads(void) {
  zeroc__swap_t *sw = open_swap("threads", 128 * KiB, 16, -1);
  if (!sw) return;
  swap_thread_t th[4];
  pthread_t id[4];
  for (int i = 0; i < 4; i++) {
    th[i] = (swap_thread_t){sw, i, 0, 0};
    pthread_create(&id[i], NULL, swap_thread, &th[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(id[i], NULL);
    ZT_ASSERT_MSG(th[i].errors == 0 && th[i].bad == 0,
                  "thread %d: %d failed calls, %d wrong read-backs", i, th[i].errors, th[i].bad);
  }
  zeroc__swap_destroy(sw);
}

static void test_swap_poll_and_tickets(void) {
  zeroc__swap_t *sw = open_swap("poll", MiB, 4, -1);
  if (!sw) return;
  void *b;
  ZT_OK(zeroc__pinned_get(pool, 8 * MiB, ZEROC_TAG_BUFFERS, &b));
  fill_random(b, 8 * MiB, 9);
  int slot;
  zeroc__ticket_t t;
  ZT_OK(zeroc__swap_slot_create(sw, "poll.me", 0, &slot));
  ZT_OK(zeroc__swap_write(sw, slot, b, 8 * MiB, &t));
  int done = 0;
  long polls = 0;
  while (!done) {
    ZT_OK(zeroc__swap_poll(sw, t, &done));
    polls++;
    if (!done) usleep(50);
  }
  CU_ASSERT(polls >= 1);
  /* A consumed ticket is gone. */
  CU_ASSERT_EQUAL(zeroc__swap_wait(sw, t), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "not outstanding"), "%s", zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc__swap_poll(sw, t, &done), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__swap_wait(sw, 0), ZEROC_ERR_INVALID_ARG);
  /* A slot with transfers in flight cannot go. */
  ZT_OK(zeroc__swap_write(sw, slot, b, 8 * MiB, &t));
  zeroc_result_t r = zeroc__swap_slot_destroy(sw, slot);
  ZT_OK(zeroc__swap_wait(sw, t));
  if (r != ZEROC_OK) /* it may have finished already; if not it was refused */
    ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG && strstr(zeroc_last_error(NULL), "in flight"), "%s",
                  zeroc_last_error(NULL));
  ZT_OK(zeroc__pinned_put(pool, b));
  zeroc__swap_destroy(sw);
}

static void test_swap_ticket_limit(void) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = tmp;
  c.job = "limit";
  c.max_tickets = 3;
  zeroc__swap_t *sw = NULL;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  if (!sw) return;
  void *b;
  ZT_OK(zeroc__pinned_get(pool, 64 * KiB, ZEROC_TAG_BUFFERS, &b));
  fill_random(b, 64 * KiB, 3);
  int slot;
  ZT_OK(zeroc__swap_slot_create(sw, NULL, 0, &slot));
  zeroc__ticket_t t[4];
  for (int k = 0; k < 3; k++) ZT_OK(zeroc__swap_write(sw, slot, b, 64 * KiB, &t[k]));
  CU_ASSERT_EQUAL(zeroc__swap_write(sw, slot, b, 64 * KiB, &t[3]), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "all 3 tickets are outstanding"), "%s",
                zeroc_last_error(NULL));
  for (int k = 0; k < 3; k++) ZT_OK(zeroc__swap_wait(sw, t[k]));
  ZT_OK(zeroc__swap_write(sw, slot, b, 64 * KiB, &t[3]));
  ZT_OK(zeroc__swap_wait(sw, t[3]));
  ZT_OK(zeroc__pinned_put(pool, b));
  zeroc__swap_destroy(sw);
}

/* ---- swapper: failures ----------------------------------------------------- */

static void test_swap_short_read(void) {
  for (int check = 1; check >= 0; check--) {
    zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
    c.rank = zeroc_ctx_mesh(ctx)->rank;
    c.dir = tmp;
    c.job = "short";
    c.block_bytes = 256 * KiB;
    c.check_size = check;
    zeroc__swap_t *sw = NULL;
    ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
    if (!sw) return;
    size_t n = MiB + 3;
    void *src, *dst;
    ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &src));
    ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &dst));
    fill_random(src, n, 5);
    int slot;
    zeroc__ticket_t t;
    ZT_OK(zeroc__swap_slot_create(sw, "victim", n, &slot));
    ZT_OK(zeroc__swap_write(sw, slot, src, n, &t));
    ZT_OK(zeroc__swap_wait(sw, t));
    /* Another process truncates the file behind the swapper's back. */
    const char *path = zeroc__swap_slot_path(sw, slot);
    int fd = open(path, O_RDWR);
    CU_ASSERT(fd >= 0 && ftruncate(fd, 512 * KiB) == 0);
    close(fd);
    memset(dst, SENTINEL, n);
    ZT_OK(zeroc__swap_read(sw, slot, dst, n, &t));
    zeroc_result_t r = zeroc__swap_wait(sw, t);
    const char *msg = zeroc_last_error(NULL);
    printf("\n    (check_size %d) %s", check, msg);
    CU_ASSERT_EQUAL(r, ZEROC_ERR_IO);
    ZT_ASSERT_MSG(strstr(msg, "short read") && strstr(msg, path) && strstr(msg, "offset") &&
                      strstr(msg, "end of file"),
                  "message should name the short read, path, offset and size: %s", msg);
    if (check) {
      ZT_ASSERT_MSG(strstr(msg, "1052672") && strstr(msg, "524288"), "sizes missing: %s", msg);
      ZT_ASSERT_MSG(all_bytes(dst, n, SENTINEL),
                    "the caller's buffer was touched by a failed read");
    } else {
      ZT_ASSERT_MSG(strstr(msg, "at offset 524288"), "offset of the end of file missing: %s", msg);
    }
    /* Writing the slot again heals it. */
    ZT_OK(zeroc__swap_write(sw, slot, src, n, &t));
    ZT_OK(zeroc__swap_wait(sw, t));
    ZT_OK(zeroc__swap_read(sw, slot, dst, n, &t));
    ZT_OK(zeroc__swap_wait(sw, t));
    CU_ASSERT(memcmp(src, dst, n) == 0);
    ZT_OK(zeroc__pinned_put(pool, src));
    ZT_OK(zeroc__pinned_put(pool, dst));
    zeroc__swap_destroy(sw);
  }
}

static void test_swap_bad_dirs(void) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  zeroc__swap_t *sw = NULL;
  c.job = "j";
  c.dir = "/nonexistent-zeroc-dir/nvme";
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  const char *msg = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(strstr(msg, c.dir) && strstr(msg, "No such file or directory"), "%s", msg);
  CU_ASSERT_PTR_NULL(sw);
  /* A file where the directory should be. */
  char file[4200];
  snprintf(file, sizeof file, "%s/plainfile", tmp);
  FILE *f = fopen(file, "w");
  CU_ASSERT_PTR_NOT_NULL(f);
  if (f) fclose(f);
  c.dir = file;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "is not a directory"), "%s", zeroc_last_error(NULL));
  /* A job name that is a file: the job directory cannot be made. */
  c.dir = tmp;
  c.job = "plainfile";
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "rank directory") &&
                    strstr(zeroc_last_error(NULL), "Not a directory"),
                "%s", zeroc_last_error(NULL));
  unlink(file);
}

static void test_swap_bad_args(void) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  zeroc__swap_t *sw = NULL;
  c.dir = tmp;
  c.job = "../escape";
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "accepted"), "%s", zeroc_last_error(NULL));
  c.job = "args";
  c.block_bytes = 1000;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "block size 1000") &&
                    strstr(zeroc_last_error(NULL), "multiple of 4096"),
                "%s", zeroc_last_error(NULL));
  c.block_bytes = 0;
  c.queue_depth = 5000;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "queue depth 5000; accepted: 1..1024"), "%s",
                zeroc_last_error(NULL));
  setenv("ZEROC_OFFLOAD_QD", "0", 1);
  c.queue_depth = 0;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_INVALID_ARG);
  unsetenv("ZEROC_OFFLOAD_QD");
  CU_ASSERT_PTR_NULL(sw);
  /* The rank directory made by the refused attempts is gone again. */
  char rd[4200];
  snprintf(rd, sizeof rd, "%s/args", tmp);
  CU_ASSERT(!exists(rd));

  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  if (!sw) return;
  /* The defaults are the documented ones. */
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  CU_ASSERT_EQUAL(info.block_bytes, ZEROC_SWAP_DEFAULT_BLOCK);
  CU_ASSERT_EQUAL(info.queue_depth, ZEROC_SWAP_DEFAULT_QD);
  CU_ASSERT_EQUAL(info.max_tickets, ZEROC_SWAP_DEFAULT_TICKETS);
  void *b;
  ZT_OK(zeroc__pinned_get(pool, 3 * 4096, ZEROC_TAG_BUFFERS, &b));
  int slot, other;
  zeroc__ticket_t t;
  ZT_OK(zeroc__swap_slot_create(sw, "a", 0, &slot));
  CU_ASSERT_EQUAL(zeroc__swap_slot_create(sw, "a", 0, &other), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "already used"), "%s", zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc__swap_slot_create(sw, "a/b", 0, &other), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__swap_write(sw, slot, (char *)b + 8, 100, &t), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "not 4096-byte aligned"), "%s",
                zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc__swap_write(sw, slot, b, 0, &t), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__swap_write(sw, 99, b, 10, &t), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "no slot 99"), "%s", zeroc_last_error(NULL));
  /* Reading more than the slot holds (nothing yet, then 100 bytes). */
  CU_ASSERT_EQUAL(zeroc__swap_read(sw, slot, b, 1, &t), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc__swap_write(sw, slot, b, 100, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  CU_ASSERT_EQUAL(zeroc__swap_read(sw, slot, b, 101, &t), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "which holds 100 bytes"), "%s",
                zeroc_last_error(NULL));
  ZT_OK(zeroc__pinned_put(pool, b));
  zeroc__swap_destroy(sw);
}

static void test_swap_cleanup(void) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = tmp;
  c.job = "cleanup";
  c.rank = 3;
  zeroc__swap_t *a = NULL, *b = NULL, *again = NULL;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &a));
  /* The same rank twice is refused: the lock keeps two jobs off one directory. */
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &again), ZEROC_ERR_IO);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "another swapper uses this directory"), "%s",
                zeroc_last_error(NULL));
  c.rank = 4;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &b));
  if (!a || !b) return;
  void *buf;
  ZT_OK(zeroc__pinned_get(pool, 20000, ZEROC_TAG_BUFFERS, &buf));
  fill_random(buf, 20000, 1);
  char paths[3][4200];
  for (int k = 0; k < 3; k++) {
    int slot;
    zeroc__ticket_t t;
    ZT_OK(zeroc__swap_slot_create(a, NULL, 0, &slot));
    ZT_OK(zeroc__swap_write(a, slot, buf, 20000, &t));
    ZT_OK(zeroc__swap_wait(a, t));
    snprintf(paths[k], sizeof paths[k], "%s", zeroc__swap_slot_path(a, slot));
    CU_ASSERT(exists(paths[k]));
  }
  char rank3[4200], rank4[4200], job[4200];
  snprintf(job, sizeof job, "%s/cleanup", tmp);
  snprintf(rank3, sizeof rank3, "%s/rank3", job);
  snprintf(rank4, sizeof rank4, "%s/rank4", job);
  CU_ASSERT(exists(rank3) && exists(rank4));
  /* A write still in flight at close is finished, then everything goes. */
  int slot;
  zeroc__ticket_t t;
  ZT_OK(zeroc__swap_slot_create(a, "late", 0, &slot));
  ZT_OK(zeroc__swap_write(a, slot, buf, 20000, &t));
  zeroc__swap_destroy(a);
  for (int k = 0; k < 3; k++) ZT_ASSERT_MSG(!exists(paths[k]), "%s left behind", paths[k]);
  CU_ASSERT(!exists(rank3));
  CU_ASSERT(exists(job)); /* rank 4 still uses it */
  /* A foreign file keeps the rank directory, but our files still go. */
  char foreign[4300];
  snprintf(foreign, sizeof foreign, "%s/keep.me", rank4);
  FILE *f = fopen(foreign, "w");
  if (f) fclose(f);
  zeroc__swap_destroy(b);
  CU_ASSERT(exists(foreign));
  unlink(foreign);
  rmdir(rank4);
  rmdir(job);
  /* With nothing foreign, the job directory goes with the last rank. */
  c.rank = 0;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &a));
  zeroc__swap_destroy(a);
  CU_ASSERT(!exists(job));
  ZT_OK(zeroc__pinned_put(pool, buf));
}

/* ---- offload state --------------------------------------------------------- */

/* A stand-in for AdamW on unit i at `step`: fp32 arithmetic done identically
 * on the offloaded state and the in-memory reference, so they must agree bit
 * for bit. */
static void update(float *master, float *m, float *v, size_t n, int step, int i) {
  for (size_t j = 0; j < n; j++) {
    uint64_t s = ((uint64_t)step << 40) ^ ((uint64_t)i << 32) ^ j;
    float g = (float)((int64_t)(zt_rand_u64(&s) % 2001) - 1000) * 1e-3f;
    m[j] = 0.9f * m[j] + 0.1f * g;
    v[j] = 0.999f * v[j] + 0.001f * g * g;
    master[j] -= 0.01f * m[j] / (sqrtf(v[j]) + 1e-8f);
  }
}

static void run_state(zeroc__swap_t *sw) {
  zeroc__pinned_trim(pool); /* so the accountant sees this state's buffers arrive */
  enum { NU = 8, STEPS = 3 };
  size_t numel[NU];
  float *ref[NU][3];
  for (int i = 0; i < NU; i++) {
    /* Odd sizes (not whole pages); the units are alike, as a model's blocks
     * are, so three staging sets are well under the whole state. */
    numel[i] = 30001 + (size_t)i * 1117 + (i == 3 ? 9000 : 0);
    for (int b = 0; b < 3; b++) ref[i][b] = calloc(numel[i], sizeof(float));
    zt_fill_normal(ref[i][0], numel[i], 50 + i, 0.02f);
  }
  zeroc_mem_stats_t m0, m1;
  zeroc_ctx_memory(ctx, &m0);
  zeroc__offload_t *o = NULL;
  ZT_OK(zeroc__offload_create(pool, sw, NU, numel, 0, &o));
  if (!o) return;
  /* Step 0 fills each master (the engine casts its params in). */
  zeroc__offload_view_t v;
  ZT_OK(zeroc__offload_prefetch(o, 0));
  for (int i = 0; i < NU; i++) {
    if (i + 1 < NU) ZT_OK(zeroc__offload_prefetch(o, i + 1));
    ZT_OK(zeroc__offload_wait(o, i, &v));
    CU_ASSERT_EQUAL(v.numel, numel[i]);
    ZT_ASSERT_MSG(all_bytes(v.m, numel[i] * 4, 0) && all_bytes(v.v, numel[i] * 4, 0),
                  "unit %d: fresh moments are not zero", i);
    memcpy(v.master, ref[i][0], numel[i] * sizeof(float));
    ZT_OK(zeroc__offload_writeback(o, i));
  }
  for (int step = 1; step <= STEPS; step++) {
    ZT_OK(zeroc__offload_prefetch(o, 0));
    for (int i = 0; i < NU; i++) {
      if (i + 1 < NU) ZT_OK(zeroc__offload_prefetch(o, i + 1));
      ZT_OK(zeroc__offload_wait(o, i, &v));
      update(v.master, v.m, v.v, numel[i], step, i);
      update(ref[i][0], ref[i][1], ref[i][2], numel[i], step, i);
      ZT_OK(zeroc__offload_writeback(o, i));
    }
  }
  ZT_OK(zeroc__offload_flush(o));
  zeroc_ctx_memory(ctx, &m1);
  size_t total = 0, largest = 0;
  for (int i = 0; i < NU; i++) {
    total += 3 * numel[i] * 4;
    if (numel[i] > largest) largest = numel[i];
  }
  uint64_t pinned = m1.current_total[ZEROC_MEM_PINNED] - m0.current_total[ZEROC_MEM_PINNED];
  if (sw) /* three staging sets of the largest unit, not every unit */
    ZT_ASSERT_MSG(pinned <= 3 * 3 * zeroc__pinned_class_size(largest * 4) && pinned < total,
                  "%llu pinned bytes for %zu bytes of state", (unsigned long long)pinned, total);
  else
    ZT_ASSERT_MSG(pinned >= total, "%llu pinned bytes for %zu bytes of state",
                  (unsigned long long)pinned, total);
  /* Read everything back, in a different order, and compare bit for bit. */
  for (int i = NU - 1; i >= 0; i--) {
    ZT_OK(zeroc__offload_wait(o, i, &v));
    ZT_ASSERT_MSG(memcmp(v.master, ref[i][0], numel[i] * 4) == 0 &&
                      memcmp(v.m, ref[i][1], numel[i] * 4) == 0 &&
                      memcmp(v.v, ref[i][2], numel[i] * 4) == 0,
                  "unit %d differs from the reference (max |d master| %g)", i,
                  zt_max_abs_diff(v.master, ref[i][0], numel[i]));
    ZT_OK(zeroc__offload_writeback(o, i));
  }
  if (sw) {
    /* Misuse is refused with a message. */
    CU_ASSERT_EQUAL(zeroc__offload_writeback(o, 0), ZEROC_ERR_INVALID_ARG);
    ZT_OK(zeroc__offload_flush(o));
    CU_ASSERT_EQUAL(zeroc__offload_writeback(o, 0), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "not resident"), "%s", zeroc_last_error(NULL));
    for (int i = 0; i < 3; i++) ZT_OK(zeroc__offload_wait(o, i, &v));
    CU_ASSERT_EQUAL(zeroc__offload_prefetch(o, 5), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "all 3 staging sets"), "%s",
                  zeroc_last_error(NULL));
  }
  CU_ASSERT_EQUAL(zeroc__offload_prefetch(o, NU), ZEROC_ERR_INVALID_ARG);
  zeroc__offload_destroy(o);
  for (int i = 0; i < NU; i++)
    for (int b = 0; b < 3; b++) free(ref[i][b]);
}

static void test_state_pinned(void) { run_state(NULL); }

static void test_state_swap(void) {
  zeroc__swap_t *sw = open_swap("state", 64 * KiB, 8, -1);
  if (!sw) return;
  run_state(sw);
  /* The state's slots are gone with it. */
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  char p[4200];
  snprintf(p, sizeof p, "%s/u0.master", info.rank_dir);
  CU_ASSERT(!exists(p));
  zeroc__swap_destroy(sw);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"pool: size classes", test_pool_classes},
      {"pool: reuse, accountant, bad puts", test_pool_reuse},
      {"pool: concurrent get/put", test_pool_threads},
      {"pool: NUMA-local pages", test_pool_numa},
      {"swap: odd sizes over block sizes and queue depths", test_swap_sizes},
      {"swap: buffered I/O (config and env)", test_swap_buffered},
      {"swap: many tickets, reads and writes interleaved", test_swap_many_tickets},
      {"swap: four threads on one swapper", test_swap_threads},
      {"swap: poll, consumed tickets, busy slots", test_swap_poll_and_tickets},
      {"swap: ticket limit", test_swap_ticket_limit},
      {"swap: short read after truncation", test_swap_short_read},
      {"swap: missing directory, file instead of directory", test_swap_bad_dirs},
      {"swap: bad arguments", test_swap_bad_args},
      {"swap: files and directories removed at close", test_swap_cleanup},
      {"state: pinned memory", test_state_pinned},
      {"state: on the swapper, pipelined", test_state_swap},
      ZT_END,
  };
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  tmp = zt_tempdir("zeroc-offload");
  if (!tmp) {
    fprintf(stderr, "cannot make a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  /* The swapper should take O_DIRECT on the usual disk file systems. */
  struct statfs sf;
  if (statfs(tmp, &sf) == 0)
    tmp_direct = sf.f_type == 0xEF53 /* ext2/3/4 */ || sf.f_type == 0x58465342 /* xfs */ ||
                 sf.f_type == 0x9123683E /* btrfs */;
  printf("offload tests in %s (file system magic %#lx, O_DIRECT %s)\n", tmp,
         (unsigned long)sf.f_type, tmp_direct ? "expected" : "not asserted");
  if (zeroc__pinned_pool_create(zeroc__ctx_pool_env(ctx), &pool) != ZEROC_OK) {
    fprintf(stderr, "pool: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  int rc = zt_run("offload", tests);
  zeroc__pinned_pool_destroy(pool);
  zt_rmtree(tmp);
  free(tmp);
  zeroc_ctx_finalize(ctx);
  return rc;
}
