/*
 * tests/test_offload_swap.c - the io_uring swapper on a real directory (TMPDIR or
 * /tmp): round trips of odd sizes over several block sizes and queue depths,
 * buffered I/O, many tickets from several threads, the ticket limit, short reads,
 * bad directories and arguments, and clean-up at close.
 */
#include "offload_fixture.h"

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

/* The swap directories are private (0700), and a planted link or another
 * user's directory at the job's name is refused. */
static void test_swap_private_dirs(void) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = tmp;
  c.job = "private";
  zeroc__swap_t *sw = NULL;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  char job[4200], rank[4300], target[4200];
  snprintf(job, sizeof job, "%s/private", tmp);
  snprintf(rank, sizeof rank, "%s/rank%d", job, c.rank);
  struct stat st;
  CU_ASSERT(stat(job, &st) == 0 && (st.st_mode & 0777) == 0700);
  ZT_ASSERT_MSG(stat(rank, &st) == 0 && (st.st_mode & 0777) == 0700, "rank directory mode %o",
                (unsigned)(st.st_mode & 0777));
  zeroc__swap_destroy(sw);
  sw = NULL;
  /* a link where the job directory goes: refused, nothing made through it */
  snprintf(target, sizeof target, "%s/elsewhere-%d", tmp, c.rank);
  snprintf(job, sizeof job, "%s/linked-%d", tmp, c.rank);
  CU_ASSERT_EQUAL_FATAL(mkdir(target, 0777), 0);
  CU_ASSERT_EQUAL_FATAL(symlink(target, job), 0);
  char name[64];
  snprintf(name, sizeof name, "linked-%d", c.rank);
  c.job = name;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "is a symbolic link"), "%s", zeroc_last_error(NULL));
  snprintf(rank, sizeof rank, "%s/rank%d", target, c.rank);
  CU_ASSERT(stat(rank, &st) != 0);
  unlink(job);
  rmdir(target);
  /* an existing one of ours left 0755 (an older zeroc) is closed */
  snprintf(job, sizeof job, "%s/old-%d", tmp, c.rank);
  CU_ASSERT_EQUAL_FATAL(mkdir(job, 0755), 0);
  CU_ASSERT_EQUAL(chmod(job, 0755), 0);
  snprintf(name, sizeof name, "old-%d", c.rank);
  c.job = name;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  ZT_ASSERT_MSG(stat(job, &st) == 0 && (st.st_mode & 0777) == 0700, "old job directory mode %o",
                (unsigned)(st.st_mode & 0777));
  zeroc__swap_destroy(sw);
  rmdir(job);
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

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"swap: odd sizes over block sizes and queue depths", test_swap_sizes},
      {"swap: buffered I/O (config and env)", test_swap_buffered},
      {"swap: many tickets, reads and writes interleaved", test_swap_many_tickets},
      {"swap: four threads on one swapper", test_swap_threads},
      {"swap: poll, consumed tickets, busy slots", test_swap_poll_and_tickets},
      {"swap: ticket limit", test_swap_ticket_limit},
      {"swap: private directories, links refused", test_swap_private_dirs},
      {"swap: short read after truncation", test_swap_short_read},
      {"swap: missing directory, file instead of directory", test_swap_bad_dirs},
      {"swap: bad arguments", test_swap_bad_args},
      {"swap: files and directories removed at close", test_swap_cleanup},
      ZT_END,
  };
  return offload_main(argc, argv, "offload_swap", tests);
}
