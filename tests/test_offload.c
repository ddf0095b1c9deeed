/*
 * tests/test_offload.c - the offload layer's memory on a real directory (TMPDIR or
 * /tmp): the pinned pool (size classes, reuse, accountant, threads, NUMA) and the
 * per-unit offload state, in pinned memory and on the swapper, against a
 * reference. The swapper itself: test_offload_swap.c.
 */
#include "offload_fixture.h"

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
      {"state: pinned memory", test_state_pinned},
      {"state: on the swapper, pipelined", test_state_swap},
      ZT_END,
  };
  return offload_main(argc, argv, "offload", tests);
}
