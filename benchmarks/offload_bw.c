/*
 * benchmarks/offload_bw.c - sequential write and read bandwidth of the NVMe
 * swapper: one slot of --size-mib written from and read back into pinned
 * buffers in one ticket each, with the given block size and queue depth.
 * benchmarks/offload_bw.sh runs it beside fio and makes the table.
 *
 *   offload_bw --dir DIR [--size-mib 1024] [--block-kib 1024] [--qd 16] [--reps 1] [--scatter 0|1]
 *
 * --scatter 1 faults the buffers' pages in reverse order without huge pages,
 * so virtually adjacent pages are not physically adjacent: each 4 KiB page is
 * its own scatter-gather segment, as with fio's malloc'd buffers. That is the
 * like-for-like comparison with fio; --scatter 0 (the default) measures the
 * pool's buffers as the engine gets them (huge pages where THP allows).
 *
 * Prints one line per repetition: "zeroc write_mib_s R read_mib_s R".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "offload/offload.h"
#include "runtime/runtime.h"
#include "zeroc/zeroc.h"

static int usage(const char *why) {
  fprintf(stderr,
          "offload_bw: %s\nusage: offload_bw --dir DIR [--size-mib N (>= 1)] "
          "[--block-kib N (multiple of 4)] [--qd N (1..1024)] [--reps N (>= 1)] [--scatter 0|1]\n",
          why);
  return 2;
}

static int fail(const char *what, zeroc_result_t r) {
  fprintf(stderr, "offload_bw: %s: %s: %s\n", what, zeroc_result_name(r), zeroc_last_error(NULL));
  return 1;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  long size_mib = 1024, block_kib = 1024, qd = 16, reps = 1, scatter = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) return usage("every flag takes a value");
    char *end;
    if (!strcmp(a, "--dir")) {
      dir = argv[++i];
      continue;
    }
    long v = strtol(argv[++i], &end, 10);
    if (!strcmp(a, "--scatter")) {
      if (*end || (v != 0 && v != 1)) return usage("--scatter takes 0 or 1");
      scatter = v;
      continue;
    }
    if (*end || v < 1) return usage("values must be positive integers");
    if (!strcmp(a, "--size-mib"))
      size_mib = v;
    else if (!strcmp(a, "--block-kib"))
      block_kib = v;
    else if (!strcmp(a, "--qd"))
      qd = v;
    else if (!strcmp(a, "--reps"))
      reps = v;
    else
      return usage("unknown flag");
  }
  if (!dir) return usage("--dir is required");

  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx = NULL;
  zeroc_result_t r = zeroc_ctx_create(&ctx, &cfg);
  if (r != ZEROC_OK) return fail("zeroc_ctx_create", r);
  zeroc__pinned_pool_t *pool = NULL;
  if ((r = zeroc__pinned_pool_create(zeroc__ctx_pool_env(ctx), &pool)) != ZEROC_OK)
    return fail("pool", r);
  zeroc__swap_config_t sc = ZEROC__SWAP_CONFIG_INIT;
  sc.rank = zeroc_ctx_mesh(ctx)->rank;
  char job[64];
  snprintf(job, sizeof job, "offload_bw.%d", (int)getpid());
  sc.dir = dir;
  sc.job = job;
  sc.block_bytes = (size_t)block_kib * 1024;
  sc.queue_depth = (int)qd;
  zeroc__swap_t *sw = NULL;
  if ((r = zeroc__swap_create(zeroc__ctx_mem(ctx), &sc, &sw)) != ZEROC_OK)
    return fail("zeroc__swap_create", r);
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  if (!info.direct) fprintf(stderr, "offload_bw: note: %s is not using O_DIRECT\n", dir);

  size_t n = (size_t)size_mib << 20;
  unsigned char *src = NULL, *dst = NULL;
  if ((r = zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, (void **)&src)) != ZEROC_OK ||
      (r = zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, (void **)&dst)) != ZEROC_OK)
    return fail("pinned buffers", r);
  if (scatter) {
    madvise(src, n, MADV_NOHUGEPAGE);
    madvise(dst, n, MADV_NOHUGEPAGE);
    for (size_t i = n; i >= 4096; i -= 4096) src[i - 4096] = dst[i - 4096] = 1;
  }
  /* Random contents (a virtual disk may compress or deduplicate zeros), and
   * every page touched before timing. */
  uint64_t s = 88172645463325252ULL;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    memcpy(src + i, &s, 8);
  }
  memset(dst, 0, n);

  for (long rep = 0; rep < reps; rep++) {
    int slot;
    zeroc__ticket_t t;
    /* A fresh, reserved file each time, as fio lays out a fresh one. */
    if ((r = zeroc__swap_slot_create(sw, "bw", n, &slot)) != ZEROC_OK) return fail("slot", r);
    double t0 = zeroc__now_s();
    if ((r = zeroc__swap_write(sw, slot, src, n, &t)) != ZEROC_OK ||
        (r = zeroc__swap_wait(sw, t)) != ZEROC_OK)
      return fail("write", r);
    double t1 = zeroc__now_s();
    if ((r = zeroc__swap_read(sw, slot, dst, n, &t)) != ZEROC_OK ||
        (r = zeroc__swap_wait(sw, t)) != ZEROC_OK)
      return fail("read", r);
    double t2 = zeroc__now_s();
    if (memcmp(src, dst, n) != 0) {
      fprintf(stderr, "offload_bw: data read back differs from what was written\n");
      return 1;
    }
    memset(dst, 0, n);
    if ((r = zeroc__swap_slot_destroy(sw, slot)) != ZEROC_OK) return fail("slot destroy", r);
    printf("zeroc write_mib_s %.1f read_mib_s %.1f\n", (double)size_mib / (t1 - t0),
           (double)size_mib / (t2 - t1));
    fflush(stdout);
  }
  zeroc__pinned_put(pool, src);
  zeroc__pinned_put(pool, dst);
  zeroc__swap_destroy(sw);
  zeroc__pinned_pool_destroy(pool);
  zeroc_ctx_finalize(ctx);
  return 0;
}
