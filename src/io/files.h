/*
 * io/files.h - crash-safe file and directory writes, and the small file-system
 * helpers the checkpoint and export code build on.
 *
 * A file is written to "<name>.tmp.<pid>.<random>" (created exclusively, never
 * through a link: the directory may be shared), fsynced, renamed over <name>
 * (which replaces a link there rather than following it), and
 * the directory fsynced, so a reader (or a restart after a crash) sees either
 * the whole old file or the whole new one. A directory is staged as
 * "<dir>.tmp", filled, fsynced, and renamed to <dir> the same way.
 *
 * Several ranks writing one checkpoint directory: one rank stages it, a
 * barrier, every rank writes (zeroc__file_write_sync) its own files into the
 * staged directory, a barrier, then the one rank publishes it.
 */
#ifndef ZEROC_IO_FILES_H
#define ZEROC_IO_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zeroc/result.h"

/* A file being written under a temporary name. Zero it (or use
 * ZEROC_AFILE_INIT) before zeroc__afile_open; abort is safe on any state. */
typedef struct zeroc__afile {
  int fd;     /* -1 when closed */
  char *path; /* the final name */
  char *tmp;  /* "<path>.tmp.<pid>.<random>" */
} zeroc__afile_t;

/* Creates a new file "<prefix>.<16 hex digits nobody can guess>" for writing
 * (O_CREAT | O_EXCL | O_NOFOLLOW: never an existing file or a planted link),
 * its name in name[0..n). Returns the descriptor, or -1 with errno. */
int zeroc__open_exclusive(const char *prefix, char *name, size_t n, mode_t mode);

#define ZEROC_AFILE_INIT                                                                           \
  { -1, NULL, NULL }

/* Creates "<path>.tmp.<pid>.<random>" for writing, exclusively.
 * Returns ZEROC_ERR_IO naming the file and errno, ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__afile_open(zeroc__afile_t *f, const char *path);
/* Appends all `n` bytes (short writes and EINTR retried). ENOSPC and other
 * errors are ZEROC_ERR_IO naming the file, the size and errno. */
zeroc_result_t zeroc__afile_write(zeroc__afile_t *f, const void *buf, size_t n);
/* Writes all `n` bytes at `offset` (e.g. to fill in a header last). */
zeroc_result_t zeroc__afile_pwrite(zeroc__afile_t *f, const void *buf, size_t n, uint64_t offset);
/* fsync, close, rename over the final name, fsync the directory. On success
 * `f` is reset (nothing left to abort); on failure the temporary is removed.
 * A file zeroc__afile_close already closed is only renamed (and the directory
 * fsynced). */
zeroc_result_t zeroc__afile_commit(zeroc__afile_t *f);
/* fsync and close the temporary file but keep it, with the final name, for a
 * later commit or abort: a set of files written one after another is renamed
 * into place together, once every one is complete. On failure the temporary
 * is removed. */
zeroc_result_t zeroc__afile_close(zeroc__afile_t *f);
/* Closes and removes the temporary file; the final name is untouched. */
void zeroc__afile_abort(zeroc__afile_t *f);

/* Writes `buf` to `path` atomically (afile open, write, commit). */
zeroc_result_t zeroc__file_write_atomic(const char *path, const void *buf, size_t n);
/* Creates or truncates `path`, writes `buf` and fsyncs it: for files inside a
 * staged directory, whose rename makes them visible. */
zeroc_result_t zeroc__file_write_sync(const char *path, const void *buf, size_t n);
/* Reads a whole file into a malloc'd buffer with a NUL after the data.
 * Files larger than `max_bytes` are refused (ZEROC_ERR_INVALID_ARG). */
zeroc_result_t zeroc__file_read(const char *path, size_t max_bytes, char **buf, size_t *n);

/* Opens `path` for reading, only if it is a regular file. The open itself is
 * non-blocking, so a FIFO (which would block until a writer appears, forever,
 * outside any timeout) or a device is refused at once: ZEROC_ERR_INVALID_ARG
 * "<what> '<path>' is a fifo, not a regular file". `what` names the file's
 * role ("data file", "checkpoint file"). *st receives fstat's answer (zeroed
 * when the open fails: ZEROC_ERR_IO naming the file and errno). */
struct stat;
zeroc_result_t zeroc__open_regular(const char *path, const char *what, int *fd, struct stat *st);
/* "fifo", "directory", "socket", "character device", ... for a st_mode. */
const char *zeroc__file_kind(mode_t mode);

/* Start-up checks of an output, so that a long run does not learn at its end
 * that its results cannot be written. `what` names the output in messages
 * ("--save"). zeroc__dir_check_writable creates `dir` (mkdir -p) and creates
 * and removes a probe file in it; zeroc__file_check_writable refuses a `path`
 * that is a directory and probes its (existing) parent directory the same
 * way. ZEROC_ERR_INVALID_ARG or ZEROC_ERR_IO naming the path and errno. */
zeroc_result_t zeroc__dir_check_writable(const char *dir, const char *what);
zeroc_result_t zeroc__file_check_writable(const char *path, const char *what);

/* fsync of a directory, so that entries created or renamed in it persist. */
zeroc_result_t zeroc__fsync_dir(const char *dir);
/* mkdir -p: creates `path` and its missing parents with `mode` (0755 typical).
 * An existing directory is fine; an existing non-directory is ZEROC_ERR_IO. */
zeroc_result_t zeroc__mkdir_p(const char *path, mode_t mode);
/* rm -rf without following symbolic links. A missing path is fine. */
zeroc_result_t zeroc__rmtree(const char *path);

/*
 * Stages a directory to be published as `final`: removes a stale
 * "<final>.tmp" left by a crash, creates the parents of `final` and an empty
 * "<final>.tmp", and writes its name into `tmp` (size `tmp_size`).
 */
zeroc_result_t zeroc__dir_stage(const char *final, char *tmp, size_t tmp_size);
/*
 * Publishes a staged directory: fsyncs every regular file in it and the
 * directory itself, renames it to `final` and fsyncs the parent. An existing
 * `final` is replaced: swapped atomically (renameat2 RENAME_EXCHANGE) and the
 * old contents removed; where the file system cannot swap, the old directory
 * is first moved aside to "<final>.old.<pid>".
 */
zeroc_result_t zeroc__dir_publish(const char *tmp, const char *final);

#endif
