/*
 * io/files.c - crash-safe writes (temporary name, fsync, rename, fsync the
 * directory), staged directories, mkdir -p and rm -rf.
 *
 * Why the dance: rename(2) is atomic, but without the fsyncs a crash can
 * persist the rename before the data (an empty file under the final name) or
 * lose the rename itself; fsyncing the file before and the directory after
 * the rename closes both holes on the usual Linux file systems.
 */
#include "io/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define RMTREE_MAX_DEPTH 128

/* ---- small helpers ------------------------------------------------------------ */

/* The directory holding `path` ("." for a bare name, "/" for a top-level one). */
static void parent_of(const char *path, char *out, size_t size) {
  snprintf(out, size, "%s", path);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/') out[--n] = 0;
  char *slash = strrchr(out, '/');
  if (!slash)
    snprintf(out, size, ".");
  else if (slash == out)
    out[1] = 0;
  else
    *slash = 0;
}

/* Writes all bytes at `offset` (pwrite), or at the file position when offset
 * is UINT64_MAX (write). `name` is for messages. */
static zeroc_result_t write_all(int fd, const void *buf, size_t n, uint64_t offset,
                                const char *name) {
  const char *p = buf;
  size_t done = 0;
  while (done < n) {
    ssize_t w = offset == UINT64_MAX ? write(fd, p + done, n - done)
                                     : pwrite(fd, p + done, n - done, (off_t)(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return ZEROC_FAIL(ZEROC_ERR_IO, "write('%s', %zu bytes, %zu written so far): %s%s", name, n,
                        done, strerror(errno),
                        errno == ENOSPC ? " (free space on that file system, or choose another "
                                          "directory)"
                                        : "");
    if (w == 0)
      return ZEROC_FAIL(ZEROC_ERR_IO, "write('%s', %zu bytes): wrote 0 bytes after %zu", name, n,
                        done);
    done += (size_t)w;
  }
  return ZEROC_OK;
}

/* ---- files created beside others' ----------------------------------------------- */

/* 64 bits nobody else can guess (getrandom; the clock and a counter only if
 * it fails, which it does not on Linux >= 3.17). */
static uint64_t unguessable(void) {
  static _Atomic uint64_t counter;
  uint64_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
         ++counter;
}

int zeroc__open_exclusive(const char *prefix, char *name, size_t n, mode_t mode) {
  for (int attempt = 0; attempt < 16; attempt++) {
    if ((size_t)snprintf(name, n, "%s.%016llx", prefix, (unsigned long long)unguessable()) >= n) {
      errno = ENAMETOOLONG;
      return -1;
    }
    /* never an existing file, never through a link someone left at the name */
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

/* ---- atomic files ------------------------------------------------------------- */

zeroc_result_t zeroc__afile_open(zeroc__afile_t *f, const char *path) {
  zeroc_result_t res = ZEROC_OK;
  f->fd = -1;
  f->path = strdup(path);
  size_t tn = strlen(path) + 64;
  char prefix[PATH_MAX + 32];
  f->tmp = malloc(tn);
  if (!f->path || !f->tmp) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "afile_open('%s'): out of host memory", path);
    goto fail;
  }
  /* <path>.tmp.<pid>.<random>: the pid says whose it was, the rest cannot be
   * guessed, and it is created exclusively (a link planted there is refused) */
  snprintf(prefix, sizeof prefix, "%s.tmp.%ld", path, (long)getpid());
  f->fd = zeroc__open_exclusive(prefix, f->tmp, tn, 0666);
  if (f->fd < 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "open('%s') for writing: %s", f->tmp, strerror(errno));
    goto fail;
  }
  return ZEROC_OK;
fail:
  free(f->path);
  free(f->tmp);
  f->path = f->tmp = NULL;
  return res;
}

zeroc_result_t zeroc__afile_write(zeroc__afile_t *f, const void *buf, size_t n) {
  if (f->fd < 0) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "afile_write: the file is not open");
  return write_all(f->fd, buf, n, UINT64_MAX, f->tmp);
}

zeroc_result_t zeroc__afile_pwrite(zeroc__afile_t *f, const void *buf, size_t n, uint64_t offset) {
  if (f->fd < 0) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "afile_pwrite: the file is not open");
  return write_all(f->fd, buf, n, offset, f->tmp);
}

zeroc_result_t zeroc__afile_close(zeroc__afile_t *f) {
  zeroc_result_t res = ZEROC_OK;
  if (f->fd < 0) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "afile_close: the file is not open");
  if (fsync(f->fd) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "fsync('%s'): %s", f->tmp, strerror(errno));
    goto fail;
  }
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "close('%s'): %s", f->tmp, strerror(errno));
    goto fail;
  }
  return ZEROC_OK;
fail:
  zeroc__afile_abort(f);
  return res;
}

zeroc_result_t zeroc__afile_commit(zeroc__afile_t *f) {
  zeroc_result_t res = ZEROC_OK;
  char dir[PATH_MAX];
  if (!f->tmp) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "afile_commit: the file is not open");
  if (f->fd >= 0) ZEROC_CHECK(zeroc__afile_close(f));
  if (rename(f->tmp, f->path) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "rename('%s' -> '%s'): %s", f->tmp, f->path, strerror(errno));
    goto fail;
  }
  parent_of(f->path, dir, sizeof dir);
  ZEROC_TRY(zeroc__fsync_dir(dir));
  free(f->path);
  free(f->tmp);
  f->path = f->tmp = NULL;
  return ZEROC_OK;
fail:
  zeroc__afile_abort(f);
  return res;
}

void zeroc__afile_abort(zeroc__afile_t *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->tmp) unlink(f->tmp);
  free(f->path);
  free(f->tmp);
  f->path = f->tmp = NULL;
}

zeroc_result_t zeroc__file_write_atomic(const char *path, const void *buf, size_t n) {
  zeroc_result_t res;
  zeroc__afile_t f = ZEROC_AFILE_INIT;
  ZEROC_TRY(zeroc__afile_open(&f, path));
  ZEROC_TRY(zeroc__afile_write(&f, buf, n));
  ZEROC_TRY(zeroc__afile_commit(&f));
  return ZEROC_OK;
fail:
  zeroc__afile_abort(&f);
  return res;
}

zeroc_result_t zeroc__file_write_sync(const char *path, const void *buf, size_t n) {
  zeroc_result_t res = ZEROC_OK;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return ZEROC_FAIL(ZEROC_ERR_IO, "open('%s') for writing: %s", path, strerror(errno));
  ZEROC_TRY(write_all(fd, buf, n, UINT64_MAX, path));
  if (fsync(fd) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "fsync('%s'): %s", path, strerror(errno));
    goto fail;
  }
  if (close(fd) != 0) {
    fd = -1;
    res = ZEROC_FAIL(ZEROC_ERR_IO, "close('%s'): %s", path, strerror(errno));
    goto fail;
  }
  return ZEROC_OK;
fail:
  if (fd >= 0) close(fd);
  return res;
}

const char *zeroc__file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  return "special file";
}

zeroc_result_t zeroc__open_regular(const char *path, const char *what, int *fd, struct stat *st) {
  memset(st, 0, sizeof *st);
  *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0) return ZEROC_FAIL(ZEROC_ERR_IO, "%s '%s': %s", what, path, strerror(errno));
  zeroc_result_t res = ZEROC_OK;
  if (fstat(*fd, st) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "%s '%s': fstat: %s", what, path, strerror(errno));
  } else if (!S_ISREG(st->st_mode)) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s '%s' is a %s, not a regular file", what, path,
                     zeroc__file_kind(st->st_mode));
  } else {
    /* reads of a regular file never block; cleared anyway so the descriptor
     * behaves like a plain open's for whoever uses it */
    int fl = fcntl(*fd, F_GETFL);
    if (fl < 0 || fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
      res = ZEROC_FAIL(ZEROC_ERR_IO, "%s '%s': fcntl: %s", what, path, strerror(errno));
  }
  if (res != ZEROC_OK) {
    close(*fd);
    *fd = -1;
  }
  return res;
}

zeroc_result_t zeroc__file_read(const char *path, size_t max_bytes, char **buf, size_t *n) {
  zeroc_result_t res = ZEROC_OK;
  char *data = NULL;
  struct stat st;
  int fd;
  *buf = NULL;
  *n = 0;
  ZEROC_CHECK(zeroc__open_regular(path, "file", &fd, &st));
  if ((uint64_t)st.st_size > max_bytes) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "'%s' is %lld bytes; at most %zu accepted here", path,
                     (long long)st.st_size, max_bytes);
    goto fail;
  }
  size_t size = (size_t)st.st_size;
  data = malloc(size + 1);
  if (!data) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "malloc(%zu) to read '%s' failed", size + 1, path);
    goto fail;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = pread(fd, data + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "pread('%s', offset %zu): %s", path, got, strerror(errno));
      goto fail;
    }
    if (r == 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "'%s' shrank while being read (%zu of %zu bytes)", path, got,
                       size);
      goto fail;
    }
    got += (size_t)r;
  }
  data[size] = 0;
  close(fd);
  *buf = data;
  *n = size;
  return ZEROC_OK;
fail:
  free(data);
  close(fd);
  return res;
}

/* ---- directories -------------------------------------------------------------- */

zeroc_result_t zeroc__fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ZEROC_FAIL(ZEROC_ERR_IO, "open directory '%s': %s", dir, strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  /* A few file systems (some network and FUSE ones) cannot fsync a directory;
   * their renames are as durable as they get, so that is not an error. */
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    return ZEROC_FAIL(ZEROC_ERR_IO, "fsync(directory '%s'): %s", dir, strerror(err));
  return ZEROC_OK;
}

zeroc_result_t zeroc__mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  if (!path || !*path) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "mkdir_p: empty path");
  if (strlen(path) >= sizeof buf)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "mkdir_p: path of %zu bytes is longer than %d",
                      strlen(path), PATH_MAX - 1);
  snprintf(buf, sizeof buf, "%s", path);
  /* create each prefix ending before a '/', then the whole path */
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != 0) continue;
    char saved = *p;
    *p = 0;
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
      return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir('%s'): %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0)
      return ZEROC_FAIL(ZEROC_ERR_IO, "stat('%s'): %s", buf, strerror(errno));
    if (!S_ISDIR(st.st_mode))
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "creating directory '%s': '%s' is not a directory: it is a %s", path, buf,
                        S_ISREG(st.st_mode) ? "file" : zeroc__file_kind(st.st_mode));
    *p = saved;
    if (!saved) break;
    while (p[1] == '/') p++; /* collapse "a//b" */
    if (!p[1]) break;        /* trailing slash */
  }
  return ZEROC_OK;
}

/* The next entry of `dir` (shown as `shown`) other than "." and "..", its
 * path written to `child` (PATH_MAX bytes); *e is NULL after the last one.
 * `who` starts the message of a failed readdir. */
static zeroc_result_t next_entry(DIR *dir, const char *who, const char *shown, char *child,
                                 struct dirent **e) {
  do {
    errno = 0;
    *e = readdir(dir);
    if (!*e) {
      if (errno)
        return ZEROC_FAIL(ZEROC_ERR_IO, "%sreaddir('%s'): %s", who, shown, strerror(errno));
      return ZEROC_OK;
    }
  } while (!strcmp((*e)->d_name, ".") || !strcmp((*e)->d_name, ".."));
  snprintf(child, PATH_MAX, "%s/%s", shown, (*e)->d_name);
  return ZEROC_OK;
}

/* Removes `name` in the directory `at_fd` (shown as `shown` in messages), recursing into
 * directories through file descriptors so a symbolic link is never followed. */
static zeroc_result_t rm_at(int at_fd, const char *name, const char *shown, int depth) {
  zeroc_result_t res = ZEROC_OK;
  struct stat st;
  DIR *dir = NULL;
  if (fstatat(at_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ZEROC_OK;
    return ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: stat('%s'): %s", shown, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(at_fd, name, 0) != 0 && errno != ENOENT)
      return ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: unlink('%s'): %s", shown, strerror(errno));
    return ZEROC_OK;
  }
  if (depth > RMTREE_MAX_DEPTH)
    return ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: '%s' is nested deeper than %d directories", shown,
                      RMTREE_MAX_DEPTH);
  int fd = openat(at_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: open('%s'): %s", shown, strerror(errno));
  dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: fdopendir('%s'): %s", shown, strerror(errno));
  }
  char *child = malloc(PATH_MAX);
  if (!child) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "rmtree: out of host memory");
    goto fail;
  }
  for (;;) {
    struct dirent *e;
    ZEROC_TRY(next_entry(dir, "rmtree: ", shown, child, &e));
    if (!e) break;
    ZEROC_TRY(rm_at(dirfd(dir), e->d_name, child, depth + 1));
  }
  closedir(dir);
  dir = NULL;
  if (unlinkat(at_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "rmtree: rmdir('%s'): %s", shown, strerror(errno));
    goto fail;
  }
fail:
  free(child);
  if (dir) closedir(dir);
  return res;
}

zeroc_result_t zeroc__rmtree(const char *path) {
  if (!path || !*path) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "rmtree: empty path");
  return rm_at(AT_FDCWD, path, path, 0);
}

zeroc_result_t zeroc__dir_stage(const char *final, char *tmp, size_t tmp_size) {
  char parent[PATH_MAX];
  if (!final || !*final) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "dir_stage: empty path");
  size_t n = strlen(final);
  while (n > 1 && final[n - 1] == '/') n--;
  if ((size_t)snprintf(tmp, tmp_size, "%.*s.tmp", (int)n, final) >= tmp_size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "dir_stage('%s'): name buffer of %zu bytes too small",
                      final, tmp_size);
  ZEROC_CHECK(zeroc__rmtree(tmp)); /* a crashed earlier attempt */
  parent_of(tmp, parent, sizeof parent);
  ZEROC_CHECK(zeroc__mkdir_p(parent, 0755));
  if (mkdir(tmp, 0755) != 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir('%s'): %s", tmp, strerror(errno));
  return ZEROC_OK;
}

/* fsyncs every regular file under the directory `fd` (shown as `shown`),
 * recursing into subdirectories, then the directory itself. */
static zeroc_result_t sync_tree(int fd, const char *shown, int depth) {
  zeroc_result_t res = ZEROC_OK;
  char *child = NULL;
  int dfd = dup(fd);
  if (dfd < 0) return ZEROC_FAIL(ZEROC_ERR_IO, "dup(directory '%s'): %s", shown, strerror(errno));
  DIR *dir = fdopendir(dfd);
  if (!dir) {
    close(dfd);
    return ZEROC_FAIL(ZEROC_ERR_IO, "fdopendir('%s'): %s", shown, strerror(errno));
  }
  if (depth > RMTREE_MAX_DEPTH) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "'%s' is nested deeper than %d directories", shown,
                     RMTREE_MAX_DEPTH);
    goto fail;
  }
  child = malloc(PATH_MAX);
  if (!child) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "sync_tree: out of host memory");
    goto fail;
  }
  for (;;) {
    struct dirent *e;
    ZEROC_TRY(next_entry(dir, "", shown, child, &e));
    if (!e) break;
    struct stat st;
    if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "stat('%s'): %s", child, strerror(errno));
      goto fail;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
    int cfd = openat(fd, e->d_name,
                     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    if (cfd < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "open('%s'): %s", child, strerror(errno));
      goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
      res = sync_tree(cfd, child, depth + 1);
    } else if (fsync(cfd) != 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "fsync('%s'): %s", child, strerror(errno));
    }
    close(cfd);
    if (res != ZEROC_OK) goto fail;
  }
  if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "fsync(directory '%s'): %s", shown, strerror(errno));
    goto fail;
  }
fail:
  free(child);
  closedir(dir);
  return res;
}

zeroc_result_t zeroc__dir_publish(const char *tmp, const char *final) {
  zeroc_result_t res = ZEROC_OK;
  char parent[PATH_MAX], old[PATH_MAX];
  int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "dir_publish: open staged directory '%s': %s", tmp,
                      strerror(errno));
  res = sync_tree(fd, tmp, 0);
  close(fd);
  if (res != ZEROC_OK) return res;

  struct stat st;
  int exists = lstat(final, &st) == 0;
  if (!exists && rename(tmp, final) == 0) goto published;
  if (!exists && errno != ENOTEMPTY && errno != EEXIST)
    return ZEROC_FAIL(ZEROC_ERR_IO, "rename('%s' -> '%s'): %s", tmp, final, strerror(errno));
  /* `final` exists: swap the two names in one step, so `final` is always a
   * complete directory, then delete the old contents now under `tmp`. */
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
    ZEROC_CHECK(zeroc__rmtree(tmp));
    goto published;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    return ZEROC_FAIL(ZEROC_ERR_IO, "renameat2('%s' <-> '%s', RENAME_EXCHANGE): %s", tmp, final,
                      strerror(errno));
  /* No atomic swap on this file system: move the old one aside first. */
  snprintf(old, sizeof old, "%s.old.%ld", final, (long)getpid());
  ZEROC_CHECK(zeroc__rmtree(old));
  if (rename(final, old) != 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "rename('%s' -> '%s'): %s", final, old, strerror(errno));
  if (rename(tmp, final) != 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "rename('%s' -> '%s'): %s (the previous version is in '%s')",
                      tmp, final, strerror(errno), old);
  ZEROC_CHECK(zeroc__rmtree(old));
published:
  parent_of(final, parent, sizeof parent);
  ZEROC_CHECK(zeroc__fsync_dir(parent));
  ZTRACE(IO, "published directory '%s'", final);
  return ZEROC_OK;
}

/* ---- start-up checks of outputs -------------------------------------------------------- */

/* Creates and removes "<dir>/.zeroc-probe.<pid>.<random>" (exclusively: the
 * directory may be shared, /tmp): the one sure test that files can be made
 * there (access(2) is wrong for root, read-only mounts, quotas). */
static zeroc_result_t probe_dir(const char *dir, const char *what, const char *shown) {
  char prefix[PATH_MAX], probe[PATH_MAX + 32];
  if ((size_t)snprintf(prefix, sizeof prefix, "%s/.zeroc-probe.%ld", dir, (long)getpid()) >=
      sizeof prefix - 32)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s '%s': the path is longer than %d bytes", what,
                      shown, PATH_MAX - 64);
  int fd = zeroc__open_exclusive(prefix, probe, sizeof probe, 0600);
  if (fd < 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "cannot create files in '%s': %s", dir, strerror(errno));
  int bad = write(fd, "z", 1) != 1;
  int e = errno;
  close(fd);
  unlink(probe);
  if (bad) return ZEROC_FAIL(ZEROC_ERR_IO, "cannot write to '%s': %s", dir, strerror(e));
  return ZEROC_OK;
}

/* A failed check is the user's argument: ZEROC_ERR_INVALID_ARG, with the
 * cause's text after the flag's name. */
static zeroc_result_t as_arg_error(zeroc_result_t r, const char *what, const char *shown) {
  if (r == ZEROC_OK || r == ZEROC_ERR_INVALID_ARG) return r;
  char msg[ZEROC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s '%s': %s", what, shown, msg);
}

zeroc_result_t zeroc__dir_check_writable(const char *dir, const char *what) {
  zeroc_result_t r = zeroc__mkdir_p(dir, 0755);
  if (r == ZEROC_OK) r = probe_dir(dir, what, dir);
  return as_arg_error(r, what, dir);
}

static zeroc_result_t file_check(const char *path, const char *what);

zeroc_result_t zeroc__file_check_writable(const char *path, const char *what) {
  return as_arg_error(file_check(path, what), what, path);
}

static zeroc_result_t file_check(const char *path, const char *what) {
  struct stat st;
  char parent[PATH_MAX];
  if (!*path || path[strlen(path) - 1] == '/')
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s '%s': accepted a file name, not a directory", what,
                      path);
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s '%s' is a directory; accepted a file name", what,
                      path);
  if (strlen(path) >= sizeof parent)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: a path of %zu bytes; at most %d accepted", what,
                      strlen(path), PATH_MAX - 1);
  snprintf(parent, sizeof parent, "%s", path);
  char *slash = strrchr(parent, '/');
  if (!slash)
    snprintf(parent, sizeof parent, ".");
  else if (slash == parent)
    parent[1] = 0; /* "/name" */
  else
    *slash = 0;
  if (stat(parent, &st) != 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "directory '%s': %s", parent, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return ZEROC_FAIL(ZEROC_ERR_IO, "'%s' is a %s, not a directory", parent,
                      S_ISREG(st.st_mode) ? "file" : zeroc__file_kind(st.st_mode));
  return probe_dir(parent, what, path);
}
