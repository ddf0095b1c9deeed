/*
 * offload/swap_files.c - the swapper's files: the <dir>/<job>/rank<r>/
 * directories, opening with O_DIRECT (or the buffered fallback), reserving
 * slot space, and sweeping what swappers that crashed left behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "offload/swap_internal.h"

/* Job and slot names become path components: keep them plain. */
int zeroc__swap_name_ok(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n < 1 || n > 64 || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

/* ---- create / destroy ---------------------------------------------------- */

/* A swap directory that exists must be this user's own directory, not a link
 * or another user's (who could read the swapped state or plant links in it);
 * one of ours left open to others (an older zeroc's 0755) is closed to 0700.
 * Anything else that is not a directory is left to the mkdir that follows. */
static zeroc_result_t check_own_dir(const char *path, const char *what) {
  struct stat st;
  if (lstat(path, &st) != 0) return ZEROC_OK;
  if (S_ISLNK(st.st_mode))
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "%s directory %s is a symbolic link: refused (swap files go only into "
                      "directories zeroc made; remove it or choose another --nvme-dir)",
                      what, path);
  if (!S_ISDIR(st.st_mode)) return ZEROC_OK;
  if (st.st_uid != geteuid())
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "%s directory %s belongs to uid %u, not this user (%u): refused (remove it "
                      "or choose another --nvme-dir)",
                      what, path, (unsigned)st.st_uid, (unsigned)geteuid());
  /* ours: a failed chmod (a read-only file system) is only said; what fails next says more */
  if ((st.st_mode & 077) && chmod(path, 0700) != 0)
    ZWARN(OFFLOAD, "%s directory %s is open to other users (mode %o) and chmod 0700 failed: %s",
          what, path, (unsigned)(st.st_mode & 0777), strerror(errno));
  return ZEROC_OK;
}

zeroc_result_t zeroc__swap_make_dirs(zeroc__swap_t *sw, const char *dir, const char *job,
                                     int rank) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "offload directory '%s': %s (errno %d); it must be an existing "
                      "directory on the NVMe file system",
                      dir, strerror(errno), errno);
  if (!S_ISDIR(st.st_mode))
    return ZEROC_FAIL(ZEROC_ERR_IO, "offload directory '%s' is not a directory", dir);
  snprintf(sw->dir_job, sizeof sw->dir_job, "%s/%s", dir, job);
  snprintf(sw->rank_dir, sizeof sw->rank_dir, "%s/rank%d", sw->dir_job, rank);
  /* Another rank may remove an empty job directory as it closes while this one
   * opens: a few attempts get past that. The directories are the user's alone
   * (0700): the NVMe directory may be shared with other users. */
  for (int attempt = 0;; attempt++) {
    if (mkdir(sw->dir_job, 0700) != 0 && errno != EEXIST)
      return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir of job directory %s: %s (errno %d)", sw->dir_job,
                        strerror(errno), errno);
    ZEROC_CHECK(check_own_dir(sw->dir_job, "job"));
    if (mkdir(sw->rank_dir, 0700) == 0 || errno == EEXIST) break;
    if (errno != ENOENT || attempt == 4)
      return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir of rank directory %s: %s (errno %d)", sw->rank_dir,
                        strerror(errno), errno);
  }
  return check_own_dir(sw->rank_dir, "rank");
}

/* ---- what crashed swappers left ----------------------------------------- */

/* A rank directory whose .lock nobody holds belonged to a swapper that died
 * without closing (kill -9, a crash): a live swapper holds its flock for its
 * whole life and the kernel drops it with the process, on any host that
 * shares the file system. Its regular files go, .lock last while still held
 * (a swapper that opened that .lock meanwhile sees it unlinked and retries),
 * then the directory. Returns 1 when it was removed. */
static int sweep_rank_dir(const char *rk) {
  char lock[4400], p[4700];
  snprintf(lock, sizeof lock, "%s/.lock", rk);
  int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  struct stat st;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0 || st.st_nlink == 0 ||
      !S_ISREG(st.st_mode)) {
    close(fd);
    return 0;
  }
  int n = 0;
  DIR *d = opendir(rk);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".lock"))
      continue;
    snprintf(p, sizeof p, "%s/%s", rk, e->d_name);
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && unlink(p) == 0) n++;
  }
  if (d) closedir(d);
  unlink(lock);
  close(fd);
  int gone = rmdir(rk) == 0;
  ZWARN(OFFLOAD,
        "removed %d swap file(s) in %s, left by a swapper that did not close (crash or kill)", n,
        rk);
  return gone;
}

/* Sweeps every <dir>/<job>/rank<N>/ of dead swappers (see sweep_rank_dir). */
void zeroc__swap_sweep_stale(const char *dir) {
  char job[4200], rk[4300];
  DIR *d = opendir(dir);
  struct dirent *je, *re;
  while (d && (je = readdir(d))) {
    if (je->d_name[0] == '.') continue;
    snprintf(job, sizeof job, "%s/%s", dir, je->d_name);
    DIR *jd = opendir(job);
    int swept = 0;
    while (jd && (re = readdir(jd))) {
      const char *num = re->d_name + 4;
      if (strncmp(re->d_name, "rank", 4) || !*num || strspn(num, "0123456789") != strlen(num))
        continue;
      snprintf(rk, sizeof rk, "%s/%s", job, re->d_name);
      swept |= sweep_rank_dir(rk);
    }
    if (jd) closedir(jd);
    if (swept) rmdir(job); /* fails while live ranks' directories remain: fine */
  }
  if (d) closedir(d);
}

/* Opens `path` for the swapper: O_DIRECT unless the swapper fell back. A file
 * system that refuses O_DIRECT (EINVAL) turns the swapper to buffered I/O with
 * one warning. */
int zeroc__swap_open_file(zeroc__swap_t *sw, const char *path, int flags) {
  flags |= O_NOFOLLOW; /* in a directory of our own, but never through a link */
  int fd = open(path, flags | O_RDWR | O_CLOEXEC | (sw->direct ? O_DIRECT : 0), 0600);
  if (fd < 0 && errno == EINVAL && sw->direct) {
    sw->direct = 0;
    if (!sw->warned_direct) {
      sw->warned_direct = 1;
      ZWARN(OFFLOAD,
            "%s: the file system refuses O_DIRECT (open: %s); the swapper falls back to "
            "buffered I/O through the page cache",
            sw->rank_dir, strerror(EINVAL));
    }
    fd = open(path, flags | O_RDWR | O_CLOEXEC, 0600);
  }
  return fd;
}

/* Reserves [from, to) of a slot's file (both 4 KiB multiples). Called without
 * the mutex: fallocate of a large slot may take a while. *unsupported is set
 * for a file system without fallocate (e.g. ramfs): the caller then stops
 * reserving, and writes find out about a full disk themselves. */
zeroc_result_t zeroc__swap_reserve(int fd, const char *path, uint64_t from, uint64_t to,
                                   int *unsupported) {
  *unsupported = 0;
  if (to <= from) return ZEROC_OK;
  if (fallocate(fd, 0, (off_t)from, (off_t)(to - from)) == 0) return ZEROC_OK;
  if (errno == EOPNOTSUPP) {
    ZINFO(OFFLOAD, "%s: fallocate not supported; slot space is not reserved ahead", path);
    *unsupported = 1;
    return ZEROC_OK;
  }
  return ZEROC_FAIL(ZEROC_ERR_IO, "fallocate of %s at offset %llu, %llu bytes: %s (errno %d)%s",
                    path, (unsigned long long)from, (unsigned long long)(to - from),
                    strerror(errno), errno,
                    errno == ENOSPC ? "; free space on the NVMe directory or offload less" : "");
}

void zeroc__swap_slot_close(zeroc__swap_t *sw, slot_t *s) {
  if (s->fd >= 0) close(s->fd);
  if (s->path && unlink(s->path) != 0 && errno != ENOENT)
    ZWARN(OFFLOAD, "unlink of %s: %s", s->path, strerror(errno));
  free(s->path);
  memset(s, 0, sizeof *s);
  s->fd = -1;
  (void)sw;
}
