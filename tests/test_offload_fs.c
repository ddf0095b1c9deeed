/*
 * tests/test_offload_fs.c - the swapper on special file systems, mounted in a
 * private mount namespace (so nothing outlives the test): a 2 MiB tmpfs for
 * "no space left", ramfs for a file system that refuses O_DIRECT, and
 * read-only mounts. Needs root (CAP_SYS_ADMIN); exits 77 (skipped) without.
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offload/offload.h"
#include "runtime/runtime.h"
#include "testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1 << 20)

static zeroc_ctx_t *ctx;
static zeroc__pinned_pool_t *pool;
static char *tmp;

static void fill_random(void *p, size_t n, uint64_t seed) {
  uint8_t *b = p;
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 3;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(zt_rand_u64(&s) >> 56);
}

/* Mounts a fresh `type` file system with `opts` at <tmp>/<name>; returns its
 * path (static) or NULL after printing why. */
static const char *mount_fs(const char *name, const char *type, unsigned long flags,
                            const char *opts) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  mkdir(path, 0755);
  if (mount(type, path, type, flags, opts) != 0) {
    fprintf(stderr, "mount -t %s -o %s %s: %s\n", type, opts ? opts : "", path, strerror(errno));
    return NULL;
  }
  return path;
}

static void unmount_fs(const char *path) {
  if (umount2(path, MNT_DETACH) != 0) fprintf(stderr, "umount %s: %s\n", path, strerror(errno));
  rmdir(path);
}

static zeroc__swap_t *open_swap(const char *dir, int prealloc) {
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = dir;
  c.job = "fs";
  c.block_bytes = 256 * KiB;
  c.queue_depth = 8;
  c.prealloc = prealloc;
  zeroc__swap_t *sw = NULL;
  ZT_OK(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw));
  return sw;
}

/* ---- no space -------------------------------------------------------------- */

/* With space reserved ahead, a full disk fails the call that asks for the
 * space, synchronously, and the slot keeps its last good contents. */
static void test_enospc_reserved(void) {
  const char *dir = mount_fs("small", "tmpfs", 0, "size=2m");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  zeroc__swap_t *sw = open_swap(dir, 1);
  if (!sw) goto out;
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  printf("\n    tmpfs on this kernel: %s", info.direct ? "takes O_DIRECT" : "refuses O_DIRECT");
  int slot = -1;
  CU_ASSERT_EQUAL(zeroc__swap_slot_create(sw, "huge", 4 * MiB, &slot), ZEROC_ERR_IO);
  const char *msg = zeroc_last_error(NULL);
  printf("\n    %s", msg);
  ZT_ASSERT_MSG(strstr(msg, "No space left on device") && strstr(msg, "/fs/rank0/huge") &&
                    strstr(msg, "offset 0") && strstr(msg, "4194304 bytes"),
                "message should name the path, offset, size and errno text: %s", msg);
  char huge[4300];
  snprintf(huge, sizeof huge, "%s/huge", info.rank_dir);
  CU_ASSERT(access(huge, F_OK) != 0); /* nothing left behind */

  /* A slot that fits, then a write that would grow it past the disk. */
  void *a, *b, *r;
  ZT_OK(zeroc__pinned_get(pool, 3 * MiB, ZEROC_TAG_BUFFERS, &a));
  ZT_OK(zeroc__pinned_get(pool, 3 * MiB, ZEROC_TAG_BUFFERS, &b));
  ZT_OK(zeroc__pinned_get(pool, 3 * MiB, ZEROC_TAG_BUFFERS, &r));
  fill_random(a, MiB, 1);
  fill_random(b, 3 * MiB, 2);
  void *b_copy = malloc(3 * MiB);
  memcpy(b_copy, b, 3 * MiB);
  zeroc__ticket_t t;
  ZT_OK(zeroc__swap_slot_create(sw, "fits", MiB, &slot));
  ZT_OK(zeroc__swap_write(sw, slot, a, MiB, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  CU_ASSERT_EQUAL(zeroc__swap_write(sw, slot, b, 3 * MiB, &t), ZEROC_ERR_IO);
  msg = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(strstr(msg, "No space left on device") && strstr(msg, "/fs/rank0/fits") &&
                    strstr(msg, "offset 1048576") && strstr(msg, "2097152 bytes"),
                "%s", msg);
  CU_ASSERT(memcmp(b, b_copy, 3 * MiB) == 0);
  CU_ASSERT_EQUAL(zeroc__swap_slot_size(sw, slot), MiB);
  ZT_OK(zeroc__swap_read(sw, slot, r, MiB, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  ZT_ASSERT_MSG(memcmp(r, a, MiB) == 0, "the slot lost its contents to a refused write");
  free(b_copy);
  zeroc__pinned_put(pool, a);
  zeroc__pinned_put(pool, b);
  zeroc__pinned_put(pool, r);
  zeroc__swap_destroy(sw);
out:
  unmount_fs(dir);
}

/* Without reservation the write itself meets the full disk: its ticket fails
 * with the errno, the caller's data is untouched, the slot is marked as
 * holding nothing valid, and a later write that fits heals it. */
static void test_enospc_write(void) {
  const char *dir = mount_fs("small2", "tmpfs", 0, "size=2m");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  zeroc__swap_t *sw = open_swap(dir, 0);
  if (!sw) goto out;
  zeroc__swap_info_t info;
  zeroc__swap_info(sw, &info);
  CU_ASSERT_EQUAL(info.prealloc, 0);
  size_t n = 3 * MiB + 5;
  void *b, *r;
  ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &b));
  ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &r));
  fill_random(b, n, 3);
  void *copy = malloc(n);
  memcpy(copy, b, n);
  int slot;
  zeroc__ticket_t t;
  ZT_OK(zeroc__swap_slot_create(sw, "grows", 0, &slot));
  ZT_OK(zeroc__swap_write(sw, slot, b, n, &t));
  CU_ASSERT_EQUAL(zeroc__swap_wait(sw, t), ZEROC_ERR_IO);
  const char *msg = zeroc_last_error(NULL);
  printf("\n    %s", msg);
  ZT_ASSERT_MSG(strstr(msg, "write of") && strstr(msg, "/fs/rank0/grows") &&
                    strstr(msg, "at offset") && strstr(msg, "bytes") &&
                    strstr(msg, "No space left on device"),
                "%s", msg);
  CU_ASSERT(memcmp(b, copy, n) == 0);
  /* The half-written slot is never read as if it were good. */
  ZT_OK(zeroc__swap_read(sw, slot, r, n, &t));
  CU_ASSERT_EQUAL(zeroc__swap_wait(sw, t), ZEROC_ERR_IO);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "no valid data"), "%s", zeroc_last_error(NULL));
  /* Space the failed write took is reused by a write that fits. */
  ZT_OK(zeroc__swap_write(sw, slot, b, 512 * KiB + 1, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  memset(r, 0, n);
  ZT_OK(zeroc__swap_read(sw, slot, r, 512 * KiB + 1, &t));
  ZT_OK(zeroc__swap_wait(sw, t));
  CU_ASSERT(memcmp(r, b, 512 * KiB + 1) == 0);
  free(copy);
  zeroc__pinned_put(pool, b);
  zeroc__pinned_put(pool, r);
  zeroc__swap_destroy(sw);
out:
  unmount_fs(dir);
}

/* ---- no O_DIRECT ----------------------------------------------------------- */

static void test_fallback_ramfs(void) {
  const char *dir = mount_fs("ram", "ramfs", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  char dirc[4200];
  snprintf(dirc, sizeof dirc, "%s", dir);
  /* Capture stderr to count the warnings. */
  char logpath[4300];
  snprintf(logpath, sizeof logpath, "%s/stderr.txt", tmp);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  int logfd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  dup2(logfd, STDERR_FILENO);
  close(logfd);
  zeroc__swap_t *sw = open_swap(dirc, -1);
  size_t n = 2 * MiB + 77;
  void *a = NULL, *r = NULL;
  int ok = sw != NULL;
  if (sw) {
    ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &a));
    ZT_OK(zeroc__pinned_get(pool, n, ZEROC_TAG_BUFFERS, &r));
    for (int k = 0; k < 5; k++) { /* every slot's open would hit EINVAL again */
      int slot;
      zeroc__ticket_t t;
      fill_random(a, n, 10 + k);
      memset(r, 0, n);
      ZT_OK(zeroc__swap_slot_create(sw, NULL, n, &slot));
      ZT_OK(zeroc__swap_write(sw, slot, a, n, &t));
      ZT_OK(zeroc__swap_wait(sw, t));
      ZT_OK(zeroc__swap_read(sw, slot, r, n, &t));
      ZT_OK(zeroc__swap_wait(sw, t));
      ok &= memcmp(a, r, n) == 0;
    }
  }
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  CU_ASSERT(ok);
  if (sw) {
    zeroc__swap_info_t info;
    zeroc__swap_info(sw, &info);
    CU_ASSERT_EQUAL(info.direct, 0);
    zeroc__swap_destroy(sw);
  }
  FILE *f = fopen(logpath, "r");
  int warnings = 0;
  char line[2048];
  while (f && fgets(line, sizeof line, f)) {
    if (strstr(line, "O_DIRECT")) {
      warnings++;
      printf("\n    warning: %s", line);
    }
  }
  if (f) fclose(f);
  ZT_ASSERT_MSG(warnings == 1, "%d O_DIRECT warnings, want exactly 1", warnings);
  zeroc__pinned_put(pool, a);
  zeroc__pinned_put(pool, r);
  unmount_fs(dirc);
}

/* ---- read-only ------------------------------------------------------------- */

static void test_readonly(void) {
  /* A read-only file system: the job directory cannot be made. */
  const char *dir = mount_fs("ro", "tmpfs", MS_RDONLY, "size=1m");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  char dirc[4200];
  snprintf(dirc, sizeof dirc, "%s", dir);
  zeroc__swap_config_t c = ZEROC__SWAP_CONFIG_INIT;
  c.rank = zeroc_ctx_mesh(ctx)->rank;
  c.dir = dirc;
  c.job = "fs";
  zeroc__swap_t *sw = NULL;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  const char *msg = zeroc_last_error(NULL);
  printf("\n    %s", msg);
  ZT_ASSERT_MSG(strstr(msg, "Read-only file system") && strstr(msg, dirc), "%s", msg);
  CU_ASSERT_PTR_NULL(sw);
  unmount_fs(dirc);

  /* Directories made by an earlier run, then the disk turned read-only:
   * creating the lock file fails instead. */
  dir = mount_fs("ro2", "tmpfs", 0, "size=1m");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  snprintf(dirc, sizeof dirc, "%s", dir);
  char p[4300];
  snprintf(p, sizeof p, "%s/fs", dirc);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/fs/rank0", dirc);
  mkdir(p, 0755);
  CU_ASSERT_EQUAL(mount(NULL, dirc, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
  c.dir = dirc;
  CU_ASSERT_EQUAL(zeroc__swap_create(zeroc__ctx_mem(ctx), &c, &sw), ZEROC_ERR_IO);
  msg = zeroc_last_error(NULL);
  printf("\n    %s", msg);
  ZT_ASSERT_MSG(strstr(msg, "Read-only file system") && strstr(msg, "rank0/.lock"), "%s", msg);
  unmount_fs(dirc);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"no space: reserved slot space", test_enospc_reserved},
      {"no space: during the write", test_enospc_write},
      {"ramfs refuses O_DIRECT: buffered, one warning", test_fallback_ramfs},
      {"read-only file systems", test_readonly},
      ZT_END,
  };
  /* A private mount namespace, entered before any thread exists (MPI starts
   * some): the mounts below vanish with the process, even if it crashes. */
  if (unshare(CLONE_NEWNS) != 0) {
    printf("test_offload_fs: unshare(CLONE_NEWNS): %s; needs root: skipped\n", strerror(errno));
    return ZT_SKIP_CODE;
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    printf("test_offload_fs: making / private: %s: skipped\n", strerror(errno));
    return ZT_SKIP_CODE;
  }
  tmp = zt_tempdir("zeroc-offload-fs");
  if (!tmp) return 1;
  /* A trial mount: some containers grant the namespace but not mounting. */
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/probe", tmp);
  mkdir(probe, 0755);
  if (mount("tmpfs", probe, "tmpfs", 0, "size=64k") != 0) {
    printf("test_offload_fs: mount tmpfs: %s: skipped\n", strerror(errno));
    zt_rmtree(tmp);
    return ZT_SKIP_CODE;
  }
  umount2(probe, MNT_DETACH);
  rmdir(probe);
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc__pinned_pool_create(zeroc__ctx_pool_env(ctx), &pool) != ZEROC_OK) return 1;
  int rc = zt_run("offload_fs", tests);
  zeroc__pinned_pool_destroy(pool);
  zt_rmtree(tmp);
  free(tmp);
  zeroc_ctx_finalize(ctx);
  return rc;
}
