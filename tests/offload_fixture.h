/*
 * tests/offload_fixture.h - what the offload I/O tests share (test_offload.c: the
 * pinned pool and the per-unit offload state; test_offload_swap.c: the io_uring
 * swapper): a context, a pinned pool and this run's directory (TMPDIR or /tmp),
 * made and removed by offload_main(), and helpers for random bytes, sentinels and
 * swappers on that directory.
 */
#ifndef ZEROC_TESTS_OFFLOAD_FIXTURE_H
#define ZEROC_TESTS_OFFLOAD_FIXTURE_H

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

static inline void fill_random(void *p, size_t n, uint64_t seed) {
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
static inline int all_bytes(const void *p, size_t n, uint8_t v) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return 0;
  return 1;
}

static inline int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static inline zeroc__swap_t *open_swap(const char *job, size_t block, int qd, int direct) {
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

/* Sets up the context, the directory and the pool, runs `tests` as suite `name`,
 * tears down; the program's exit code. */
static inline int offload_main(int argc, char **argv, const char *name, const zt_test_t *tests) {
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
  int rc = zt_run(name, tests);
  zeroc__pinned_pool_destroy(pool);
  zt_rmtree(tmp);
  free(tmp);
  zeroc_ctx_finalize(ctx);
  return rc;
}

#endif
