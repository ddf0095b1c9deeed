/*
 * offload/swap.c - the NVMe swapper: slot files under <dir>/<job>/rank<r>/,
 * O_DIRECT transfers of any size split into blocks, kept `queue_depth` deep by
 * one I/O thread that owns the io_uring ring.
 *
 * Layout of a transfer of `bytes` from/to a 4 KiB-aligned buffer:
 *   [0, body)            body = bytes rounded down to 4 KiB, straight from/to
 *                        the caller's buffer, in blocks of block_bytes
 *   [body, body + 4096)  the tail page, through the ticket's bounce page, so
 *                        the caller's buffer needs only `bytes` bytes
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "offload/offload.h"

#define PAGE        ZEROC_OFFLOAD_ALIGN
#define MAX_BLOCK   ((size_t)64 << 20)
#define MAX_QD      1024
#define MAX_TICKETS 4096
#define WAKE_TAG    UINT64_MAX

enum { T_FREE = 0, T_QUEUED, T_RUNNING, T_DONE };

typedef struct slot {
  int used;
  int fd;
  char *path;
  uint64_t reserved; /* bytes of file space reserved with fallocate (4 KiB multiple) */
  uint64_t size;     /* logical size once every submitted write has run */
  int valid;         /* 0 after a failed write: the file holds no trustworthy copy */
  int running;       /* ticket running on this slot, -1 when none */
  int pending;       /* tickets submitted and not yet done */
} slot_t;

typedef struct ticket {
  uint32_t gen;
  int state;
  int write;
  int slot;
  uint8_t *buf;
  uint64_t bytes, body;
  uint64_t next; /* next body offset to issue */
  int tail_todo; /* the tail page still has to be issued */
  int inflight;  /* requests in flight */
  int stop;      /* an error: issue nothing more */
  zeroc_result_t res;
  char *msg;
  uint8_t *bounce; /* one 4 KiB page */
} ticket_t;

typedef struct req {
  int ticket; /* -1: free */
  uint64_t off;
  uint8_t *buf;
  uint32_t len;
} req_t;

struct zeroc__swap {
  zeroc_ctx_t *ctx;
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  pthread_t thread;
  int thread_started;
  struct io_uring ring;
  int ring_ok;
  int efd;           /* eventfd that wakes the I/O thread */
  uint64_t wake_buf; /* the eventfd read lands here */
  int sleeping;      /* the I/O thread waits in io_uring_enter */
  int stop;
  char *broken; /* set when the ring failed: every later ticket fails with it */

  size_t block;
  int qd, max_tickets;
  int direct, prealloc, check_size;
  int warned_direct;
  char dir_job[4096]; /* <dir>/<job> */
  char rank_dir[4096];
  char lock_path[4200];
  int lock_fd;

  slot_t *slots;
  int nslots, capslots;
  ticket_t *tickets;
  int *free_tickets, nfree_tickets;
  int *queue, nqueue; /* queued and running tickets in submission order */
  uint8_t *bounce_area;
  req_t *reqs;
  int *free_reqs, nfree_reqs;
  int *retry, nretry; /* requests to issue again (partial transfer, EAGAIN) */
  int inflight, max_inflight;
  uint64_t requests;
};

/* ---- helpers ------------------------------------------------------------- */

static uint64_t pad(uint64_t n) { return (n + PAGE - 1) / PAGE * PAGE; }

/* Job and slot names become path components: keep them plain. */
static int name_ok(const char *s) {
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

static zeroc__ticket_t ticket_handle(const zeroc__swap_t *sw, int i) {
  return ((uint64_t)sw->tickets[i].gen << 16) | (uint64_t)i;
}

/* The ticket index of a handle, or -1 for a stale or unknown one. */
static int ticket_index(const zeroc__swap_t *sw, zeroc__ticket_t h) {
  uint64_t i = h & 0xffff;
  if (i >= (uint64_t)sw->max_tickets) return -1;
  const ticket_t *t = &sw->tickets[i];
  if (t->state == T_FREE || t->gen != (uint32_t)(h >> 16)) return -1;
  return (int)i;
}

/* Records the calling thread's error text as the ticket's result. */
static void ticket_fail(ticket_t *t, zeroc_result_t r) {
  t->stop = 1;
  if (t->res != ZEROC_OK) return; /* the first error is the one that explains */
  t->res = r;
  free(t->msg);
  t->msg = strdup(zeroc__tls_error());
}

/* ---- the I/O thread (mutex held unless said otherwise) ------------------- */

static void ticket_finish(zeroc__swap_t *sw, int ti) {
  ticket_t *t = &sw->tickets[ti];
  slot_t *s = &sw->slots[t->slot];
  if (t->res == ZEROC_OK && !t->write && t->bytes > t->body)
    memcpy(t->buf + t->body, t->bounce, t->bytes - t->body);
  if (t->write) s->valid = t->res == ZEROC_OK;
  t->state = T_DONE;
  s->running = -1;
  s->pending--;
  pthread_cond_broadcast(&sw->done_cv);
}

/* Checks run when a ticket starts (the slot is free): a read needs a slot
 * whose last write succeeded and a file that still holds it. Failing here
 * leaves the caller's buffer untouched. */
static zeroc_result_t ticket_precheck(zeroc__swap_t *sw, ticket_t *t) {
  slot_t *s = &sw->slots[t->slot];
  if (sw->broken) return ZEROC_FAIL(ZEROC_ERR_IO, "%s", sw->broken);
  if (t->write) return ZEROC_OK;
  if (!s->valid)
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "read of %s at offset 0, %llu bytes: the slot holds no valid data because "
                      "its last write failed; write it again first",
                      s->path, (unsigned long long)t->bytes);
  if (sw->check_size) {
    struct stat st;
    if (fstat(s->fd, &st) != 0)
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "fstat of %s before reading %llu bytes at offset 0: %s (errno %d)", s->path,
                        (unsigned long long)t->bytes, strerror(errno), errno);
    if ((uint64_t)st.st_size < pad(t->bytes))
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "short read of %s: %llu bytes at offset 0 are needed but the file is %lld "
                        "bytes (truncated behind zeroc's back?): end of file at offset %lld",
                        s->path, (unsigned long long)pad(t->bytes), (long long)st.st_size,
                        (long long)st.st_size);
  }
  return ZEROC_OK;
}

static void prep(zeroc__swap_t *sw, struct io_uring_sqe *sqe, int ri) {
  req_t *r = &sw->reqs[ri];
  ticket_t *t = &sw->tickets[r->ticket];
  int fd = sw->slots[t->slot].fd;
  if (t->write)
    io_uring_prep_write(sqe, fd, r->buf, r->len, r->off);
  else
    io_uring_prep_read(sqe, fd, r->buf, r->len, r->off);
  io_uring_sqe_set_data64(sqe, (uint64_t)ri);
  sw->requests++;
}

/* Starts the tickets whose slot is free and fills the submission queue up to
 * the queue depth, earlier tickets first. Returns the number of tickets that
 * finished in this pass: each frees its slot for the next ticket queued on it. */
static int schedule_pass(zeroc__swap_t *sw) {
  int finished = 0;
  for (int q = 0; q < sw->nqueue; q++) {
    ticket_t *t = &sw->tickets[sw->queue[q]];
    if (t->state != T_QUEUED || sw->slots[t->slot].running >= 0) continue;
    sw->slots[t->slot].running = sw->queue[q];
    t->state = T_RUNNING;
    zeroc_result_t r = ticket_precheck(sw, t);
    if (r != ZEROC_OK) ticket_fail(t, r);
  }
  /* The ring has a slot for every request plus the wake-up read, so it is
   * never full; `sq_full` only guards that reasoning. */
  int sq_full = 0;
  while (sw->nretry > 0 && !sq_full) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&sw->ring);
    if (!sqe)
      sq_full = 1;
    else
      prep(sw, sqe, sw->retry[--sw->nretry]);
  }
  for (int q = 0; q < sw->nqueue; q++) {
    int ti = sw->queue[q];
    ticket_t *t = &sw->tickets[ti];
    if (t->state != T_RUNNING) continue;
    while (!sq_full && !t->stop && (t->next < t->body || t->tail_todo) && sw->nfree_reqs > 0) {
      struct io_uring_sqe *sqe = io_uring_get_sqe(&sw->ring);
      if (!sqe) {
        sq_full = 1;
        break;
      }
      int ri = sw->free_reqs[--sw->nfree_reqs];
      req_t *r = &sw->reqs[ri];
      r->ticket = ti;
      if (t->next < t->body) {
        uint64_t n = t->body - t->next < sw->block ? t->body - t->next : sw->block;
        r->off = t->next;
        r->buf = t->buf + t->next;
        r->len = (uint32_t)n;
        t->next += n;
      } else {
        r->off = t->body;
        r->buf = t->bounce;
        r->len = PAGE;
        t->tail_todo = 0;
      }
      t->inflight++;
      sw->inflight++;
      if (sw->inflight > sw->max_inflight) sw->max_inflight = sw->inflight;
      prep(sw, sqe, ri);
    }
    if (t->inflight == 0 && (t->stop || (t->next >= t->body && !t->tail_todo))) {
      ticket_finish(sw, ti);
      finished++;
    }
  }
  /* Done tickets leave the queue (they wait in the table for their consumer). */
  int k = 0;
  for (int q = 0; q < sw->nqueue; q++)
    if (sw->tickets[sw->queue[q]].state != T_DONE) sw->queue[k++] = sw->queue[q];
  sw->nqueue = k;
  return finished;
}

static void schedule(zeroc__swap_t *sw) {
  while (schedule_pass(sw) > 0) {
  }
}

static void req_release(zeroc__swap_t *sw, int ri) {
  ticket_t *t = &sw->tickets[sw->reqs[ri].ticket];
  sw->reqs[ri].ticket = -1;
  sw->free_reqs[sw->nfree_reqs++] = ri;
  t->inflight--;
  sw->inflight--;
}

static void complete(zeroc__swap_t *sw, int ri, int res) {
  req_t *r = &sw->reqs[ri];
  ticket_t *t = &sw->tickets[r->ticket];
  slot_t *s = &sw->slots[t->slot];
  const char *what = t->write ? "write" : "read";
  if (res == -EAGAIN || res == -EINTR) {
    sw->retry[sw->nretry++] = ri;
    return;
  }
  if (res < 0) {
    ticket_fail(t, ZEROC_FAIL(ZEROC_ERR_IO, "%s of %s at offset %llu, %u bytes: %s (errno %d)%s",
                              what, s->path, (unsigned long long)r->off, r->len, strerror(-res),
                              -res, res == -ENOSPC ? "; free space on the NVMe directory" : ""));
  } else if (res == 0) {
    struct stat st;
    long long fsize = fstat(s->fd, &st) == 0 ? (long long)st.st_size : -1;
    if (t->write)
      ticket_fail(t, ZEROC_FAIL(ZEROC_ERR_IO,
                                "short write of %s at offset %llu, %u bytes: the "
                                "kernel wrote 0 bytes (file is %lld bytes)",
                                s->path, (unsigned long long)r->off, r->len, fsize));
    else
      ticket_fail(t, ZEROC_FAIL(ZEROC_ERR_IO,
                                "short read of %s at offset %llu, %u bytes: end of file (file is "
                                "%lld bytes; truncated behind zeroc's back?)",
                                s->path, (unsigned long long)r->off, r->len, fsize));
  } else if ((uint32_t)res < r->len) {
    /* A partial transfer: go on with the rest. The next attempt either
     * completes it or returns the errno that explains why not (ENOSPC, EOF). */
    r->off += (uint32_t)res;
    r->buf += res;
    r->len -= (uint32_t)res;
    if (!t->stop) {
      sw->retry[sw->nretry++] = ri;
      return;
    }
  }
  req_release(sw, ri);
}

/* Fails every ticket not done yet with `msg` after the ring itself failed. */
static void fail_all(zeroc__swap_t *sw, const char *msg) {
  for (int q = 0; q < sw->nqueue; q++) {
    ticket_t *t = &sw->tickets[sw->queue[q]];
    if (t->state == T_DONE) continue;
    ticket_fail(t, ZEROC_FAIL(ZEROC_ERR_IO, "%s", msg));
    t->inflight = 0;
    if (t->state == T_QUEUED) sw->slots[t->slot].running = sw->queue[q];
    ticket_finish(sw, sw->queue[q]);
  }
  sw->nqueue = 0;
}

static int arm_wake(zeroc__swap_t *sw) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&sw->ring);
  if (!sqe) return -EBUSY;
  io_uring_prep_read(sqe, sw->efd, &sw->wake_buf, sizeof sw->wake_buf, 0);
  io_uring_sqe_set_data64(sqe, WAKE_TAG);
  return 0;
}

static void *io_main(void *arg) {
  zeroc__swap_t *sw = arg;
  pthread_setname_np(pthread_self(), "zeroc-io");
  pthread_mutex_lock(&sw->mu);
  int armed = arm_wake(sw) == 0;
  for (;;) {
    schedule(sw);
    if (sw->stop && sw->nqueue == 0 && sw->inflight == 0) break;
    sw->sleeping = 1;
    pthread_mutex_unlock(&sw->mu);
    int ret = io_uring_submit_and_wait(&sw->ring, 1);
    pthread_mutex_lock(&sw->mu);
    sw->sleeping = 0;
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && !sw->broken) {
      char msg[512];
      snprintf(msg, sizeof msg,
               "io_uring_submit_and_wait on the swapper's ring (%s) failed: %s "
               "(errno %d); the swapper is unusable",
               sw->rank_dir, strerror(-ret), -ret);
      ZWARN(OFFLOAD, "%s", msg);
      sw->broken = strdup(msg);
      fail_all(sw, msg);
      break;
    }
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&sw->ring, head, cqe) {
      n++;
      uint64_t ud = io_uring_cqe_get_data64(cqe);
      if (ud == WAKE_TAG)
        armed = 0;
      else
        complete(sw, (int)ud, cqe->res);
    }
    io_uring_cq_advance(&sw->ring, n);
    if (!armed) armed = arm_wake(sw) == 0;
  }
  pthread_mutex_unlock(&sw->mu);
  return NULL;
}

/* Wakes the I/O thread if it waits in the kernel (mutex held). */
static void wake(zeroc__swap_t *sw) {
  if (!sw->sleeping) return;
  uint64_t one = 1;
  ssize_t w = write(sw->efd, &one, sizeof one);
  (void)w; /* an eventfd write only fails when its counter would overflow: it is awake anyway */
}

/* ---- create / destroy ---------------------------------------------------- */

static zeroc_result_t make_dirs(zeroc__swap_t *sw, const char *dir, const char *job, int rank) {
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
   * opens: a few attempts get past that. */
  for (int attempt = 0;; attempt++) {
    if (mkdir(sw->dir_job, 0755) != 0 && errno != EEXIST)
      return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir of job directory %s: %s (errno %d)", sw->dir_job,
                        strerror(errno), errno);
    if (mkdir(sw->rank_dir, 0755) == 0 || errno == EEXIST) break;
    if (errno != ENOENT || attempt == 4)
      return ZEROC_FAIL(ZEROC_ERR_IO, "mkdir of rank directory %s: %s (errno %d)", sw->rank_dir,
                        strerror(errno), errno);
  }
  return ZEROC_OK;
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
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".lock")) continue;
    snprintf(p, sizeof p, "%s/%s", rk, e->d_name);
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && unlink(p) == 0) n++;
  }
  if (d) closedir(d);
  unlink(lock);
  close(fd);
  int gone = rmdir(rk) == 0;
  ZWARN(OFFLOAD, "removed %d swap file(s) in %s, left by a swapper that did not close (crash or kill)",
        n, rk);
  return gone;
}

/* Sweeps every <dir>/<job>/rank<N>/ of dead swappers (see sweep_rank_dir). */
static void sweep_stale(const char *dir) {
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
      if (strncmp(re->d_name, "rank", 4) || !*num || strspn(num, "0123456789") != strlen(num)) continue;
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
static int open_file(zeroc__swap_t *sw, const char *path, int flags) {
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

static zeroc_result_t read_config(zeroc__swap_t *sw, zeroc_ctx_t *ctx,
                                  const zeroc__swap_config_t *c, int *rank) {
  if (!c->dir || !*c->dir)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: dir is required (the NVMe directory)");
  if (!name_ok(c->job))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: job '%s'; accepted: 1..64 of "
                      "[A-Za-z0-9._-], not starting with '.'",
                      c->job ? c->job : "(null)");
  *rank = c->rank >= 0 ? c->rank : ctx ? zeroc_ctx_mesh(ctx)->rank : -1;
  if (*rank < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: rank %d without a context; "
                      "accepted: a rank >= 0, or -1 with a context",
                      c->rank);
  /* the knob is in KiB and range-checked before the multiplication, which
   * could otherwise wrap */
  int64_t block = (int64_t)c->block_bytes;
  if (!block) {
    ZEROC_CHECK(zeroc__env_i64("ZEROC_OFFLOAD_BLOCK_KIB", ZEROC_SWAP_DEFAULT_BLOCK / 1024, &block));
    block *= 1024;
  }
  if (block < PAGE || block > (int64_t)MAX_BLOCK || block % PAGE)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper block size %lld bytes; accepted: a multiple "
                      "of 4096 from 4 KiB to 64 MiB (block_bytes or ZEROC_OFFLOAD_BLOCK_KIB)",
                      (long long)block);
  int64_t qd = c->queue_depth;
  if (!qd) ZEROC_CHECK(zeroc__env_i64("ZEROC_OFFLOAD_QD", ZEROC_SWAP_DEFAULT_QD, &qd));
  if (qd < 1 || qd > MAX_QD)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper queue depth %lld; accepted: 1..%d "
                      "(queue_depth or ZEROC_OFFLOAD_QD)",
                      (long long)qd, MAX_QD);
  int tickets = c->max_tickets ? c->max_tickets : ZEROC_SWAP_DEFAULT_TICKETS;
  if (tickets < 1 || tickets > MAX_TICKETS)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "swapper max_tickets %d; accepted: 1..%d", tickets,
                      MAX_TICKETS);
  int64_t direct = c->direct, prealloc = c->prealloc;
  if (direct < 0) ZEROC_CHECK(zeroc__env_i64("ZEROC_OFFLOAD_DIRECT", 1, &direct));
  if (prealloc < 0) ZEROC_CHECK(zeroc__env_i64("ZEROC_OFFLOAD_PREALLOC", 1, &prealloc));
  if ((direct != 0 && direct != 1) || (prealloc != 0 && prealloc != 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper direct %lld, prealloc %lld; accepted: 0 or 1 "
                      "(or -1 for ZEROC_OFFLOAD_DIRECT / ZEROC_OFFLOAD_PREALLOC)",
                      (long long)direct, (long long)prealloc);
  sw->block = (size_t)block;
  sw->qd = (int)qd;
  sw->max_tickets = tickets;
  sw->direct = (int)direct;
  sw->prealloc = (int)prealloc;
  sw->check_size = c->check_size != 0;
  return ZEROC_OK;
}

zeroc_result_t zeroc__swap_create(zeroc_ctx_t *ctx, const zeroc__swap_config_t *cfg,
                                  zeroc__swap_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__swap_t *sw = NULL;
  int rank = -1;
  if (!cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__swap_create(cfg %p, out %p): both are required", (const void *)cfg,
                      (void *)out);
  *out = NULL;
  sw = calloc(1, sizeof *sw);
  if (!sw) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "swapper struct of %zu bytes", sizeof *sw);
  sw->ctx = ctx;
  sw->efd = -1;
  sw->lock_fd = -1;
  pthread_mutex_init(&sw->mu, NULL);
  pthread_cond_init(&sw->done_cv, NULL);
  ZEROC_TRY(read_config(sw, ctx, cfg, &rank));
  for (int attempt = 0;; attempt++) {
    ZEROC_TRY(make_dirs(sw, cfg->dir, cfg->job, rank));

    /* The lock keeps a second swapper (another job with the same name, or a
     * restarted rank whose predecessor still runs) off these files. Opening it
     * also probes O_DIRECT, so the fallback warning comes once, here. */
    snprintf(sw->lock_path, sizeof sw->lock_path, "%s/.lock", sw->rank_dir);
    sw->lock_fd = open_file(sw, sw->lock_path, O_CREAT);
    if (sw->lock_fd < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "open of lock file %s: %s (errno %d)", sw->lock_path,
                       strerror(errno), errno);
      goto fail;
    }
    if (flock(sw->lock_fd, LOCK_EX | LOCK_NB) != 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO,
                       "flock of %s: %s (errno %d): another swapper uses this "
                       "directory (same dir, job '%s' and rank %d)",
                       sw->lock_path, strerror(errno), errno, cfg->job, rank);
      close(sw->lock_fd);
      sw->lock_fd = -1;
      goto fail;
    }
    /* another swapper's sweep took this lock for a dead one's between our
     * open and flock, and unlinked it: start over on a fresh one */
    struct stat lst;
    if (fstat(sw->lock_fd, &lst) == 0 && lst.st_nlink > 0) break;
    close(sw->lock_fd);
    sw->lock_fd = -1;
    if (attempt == 4) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "lock file %s was removed under this swapper 5 times",
                       sw->lock_path);
      goto fail;
    }
  }
  sweep_stale(cfg->dir); /* our own lock is held: only dead swappers' files go */

  size_t nt = (size_t)sw->max_tickets;
  sw->tickets = calloc(nt, sizeof *sw->tickets);
  sw->free_tickets = malloc(nt * sizeof(int));
  sw->queue = malloc(nt * sizeof(int));
  sw->reqs = calloc((size_t)sw->qd, sizeof *sw->reqs);
  sw->free_reqs = malloc((size_t)sw->qd * sizeof(int));
  sw->retry = malloc((size_t)sw->qd * sizeof(int));
  sw->bounce_area = aligned_alloc(PAGE, nt * PAGE);
  if (!sw->tickets || !sw->free_tickets || !sw->queue || !sw->reqs || !sw->free_reqs ||
      !sw->retry || !sw->bounce_area) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "swapper tables for %zu tickets and queue depth %d", nt,
                     sw->qd);
    goto fail;
  }
  if (ctx)
    ZEROC_TRY(
        zeroc__mem_track(zeroc__ctx_mem(ctx), sw->bounce_area, ZEROC_MEM_HOST, ZEROC_TAG_BUFFERS, nt * PAGE));
  for (int i = 0; i < sw->max_tickets; i++) {
    sw->tickets[i].gen = 1;
    sw->tickets[i].bounce = sw->bounce_area + (size_t)i * PAGE;
    sw->free_tickets[sw->nfree_tickets++] = sw->max_tickets - 1 - i;
  }
  for (int i = 0; i < sw->qd; i++) {
    sw->reqs[i].ticket = -1;
    sw->free_reqs[sw->nfree_reqs++] = sw->qd - 1 - i;
  }

  sw->efd = eventfd(0, EFD_CLOEXEC);
  if (sw->efd < 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "eventfd for the swapper's I/O thread: %s (errno %d)",
                     strerror(errno), errno);
    goto fail;
  }
  /* One entry more than the queue depth: the I/O thread's wake-up read. */
  int ret = io_uring_queue_init((unsigned)sw->qd + 1, &sw->ring, 0);
  if (ret < 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO,
                     "io_uring_queue_init(%d entries): %s (errno %d); io_uring may be "
                     "disabled (sysctl kernel.io_uring_disabled, or a container's seccomp profile)",
                     sw->qd + 1, strerror(-ret), -ret);
    goto fail;
  }
  sw->ring_ok = 1;
  if (pthread_create(&sw->thread, NULL, io_main, sw) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "pthread_create of the swapper's I/O thread failed");
    goto fail;
  }
  sw->thread_started = 1;
  ZINFO(OFFLOAD, "swapper in %s: block %zu KiB, queue depth %d, %d tickets, %s I/O, prealloc %s",
        sw->rank_dir, sw->block / 1024, sw->qd, sw->max_tickets,
        sw->direct ? "O_DIRECT" : "buffered", sw->prealloc ? "on" : "off");
  *out = sw;
  return ZEROC_OK;
fail:
  zeroc__swap_destroy(sw);
  return res;
}

static void slot_close(zeroc__swap_t *sw, slot_t *s) {
  if (s->fd >= 0) close(s->fd);
  if (s->path && unlink(s->path) != 0 && errno != ENOENT)
    ZWARN(OFFLOAD, "unlink of %s: %s", s->path, strerror(errno));
  free(s->path);
  memset(s, 0, sizeof *s);
  s->fd = -1;
  (void)sw;
}

void zeroc__swap_destroy(zeroc__swap_t *sw) {
  if (!sw) return;
  if (sw->thread_started) {
    pthread_mutex_lock(&sw->mu);
    sw->stop = 1;
    uint64_t one = 1;
    ssize_t w = write(sw->efd, &one, sizeof one); /* wake it whether it sleeps yet or not */
    (void)w;
    pthread_mutex_unlock(&sw->mu);
    pthread_join(sw->thread, NULL);
  }
  if (sw->ring_ok) io_uring_queue_exit(&sw->ring);
  if (sw->efd >= 0) close(sw->efd);
  for (int i = 0; i < sw->nslots; i++)
    if (sw->slots[i].used) slot_close(sw, &sw->slots[i]);
  free(sw->slots);
  if (sw->tickets)
    for (int i = 0; i < sw->max_tickets; i++) free(sw->tickets[i].msg);
  if (sw->bounce_area && sw->ctx) zeroc__mem_untrack(zeroc__ctx_mem(sw->ctx), sw->bounce_area, NULL);
  free(sw->bounce_area);
  free(sw->tickets);
  free(sw->free_tickets);
  free(sw->queue);
  free(sw->reqs);
  free(sw->free_reqs);
  free(sw->retry);
  free(sw->broken);
  if (sw->lock_fd >= 0) {
    /* Unlinked while still held, so no other swapper can lock the old file. */
    unlink(sw->lock_path);
    close(sw->lock_fd);
    /* Empty directories go; a directory something else still uses stays. */
    if (rmdir(sw->rank_dir) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
      ZWARN(OFFLOAD, "rmdir of %s: %s", sw->rank_dir, strerror(errno));
    rmdir(sw->dir_job); /* other ranks' directories may keep it: that is fine */
  }
  pthread_cond_destroy(&sw->done_cv);
  pthread_mutex_destroy(&sw->mu);
  free(sw);
}

/* ---- slots ---------------------------------------------------------------- */

static slot_t *slot_get(zeroc__swap_t *sw, int slot) {
  if (slot < 0 || slot >= sw->nslots || !sw->slots[slot].used) return NULL;
  return &sw->slots[slot];
}

/* Reserves [from, to) of a slot's file (both 4 KiB multiples). Called without
 * the mutex: fallocate of a large slot may take a while. *unsupported is set
 * for a file system without fallocate (e.g. ramfs): the caller then stops
 * reserving, and writes find out about a full disk themselves. */
static zeroc_result_t reserve(int fd, const char *path, uint64_t from, uint64_t to,
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

zeroc_result_t zeroc__swap_slot_create(zeroc__swap_t *sw, const char *name, uint64_t capacity,
                                       int *slot) {
  zeroc_result_t res = ZEROC_OK;
  char gen_name[32];
  char *path = NULL;
  int fd = -1;
  if (!sw || !slot)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__swap_slot_create(sw %p, slot %p): both are required", (void *)sw,
                      (void *)slot);
  *slot = -1;
  pthread_mutex_lock(&sw->mu);
  int k = 0;
  while (k < sw->nslots && sw->slots[k].used) k++;
  if (!name) {
    snprintf(gen_name, sizeof gen_name, "slot%d", k);
    name = gen_name;
  }
  if (!name_ok(name)) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "slot name '%s'; accepted: 1..64 of [A-Za-z0-9._-], "
                     "not starting with '.'",
                     name);
    goto fail;
  }
  size_t plen = strlen(sw->rank_dir) + strlen(name) + 2;
  path = malloc(plen);
  if (!path) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "slot path of %zu bytes", plen);
    goto fail;
  }
  snprintf(path, plen, "%s/%s", sw->rank_dir, name);
  for (int i = 0; i < sw->nslots; i++)
    if (sw->slots[i].used && strcmp(sw->slots[i].path, path) == 0) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "slot name '%s' is already used by slot %d", name, i);
      goto fail;
    }
  if (k == sw->capslots) {
    int ncap = sw->capslots ? sw->capslots * 2 : 16;
    slot_t *ns = realloc(sw->slots, (size_t)ncap * sizeof *ns);
    if (!ns) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "slot table of %d entries", ncap);
      goto fail;
    }
    sw->slots = ns;
    sw->capslots = ncap;
  }
  /* A stale file of a crashed run is truncated: the lock says none is live. */
  fd = open_file(sw, path, O_CREAT | O_TRUNC);
  if (fd < 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "open of slot file %s: %s (errno %d)", path, strerror(errno),
                     errno);
    goto fail;
  }
  /* The name is claimed (and the slot kept alive by `pending`) before the
   * lock is dropped for fallocate, which may take a while on a large slot. */
  if (k == sw->nslots) sw->nslots++;
  sw->slots[k] = (slot_t){1, fd, path, 0, 0, 1, -1, 1};
  int sfd = fd, prealloc = sw->prealloc, unsupported = 0;
  const char *spath = path;
  path = NULL, fd = -1; /* owned by the slot now */
  pthread_mutex_unlock(&sw->mu);
  if (prealloc) res = reserve(sfd, spath, 0, pad(capacity), &unsupported);
  pthread_mutex_lock(&sw->mu);
  if (unsupported) sw->prealloc = 0;
  sw->slots[k].pending = 0;
  if (res != ZEROC_OK) {
    slot_close(sw, &sw->slots[k]); /* removes the file: nothing is left behind */
    goto fail;
  }
  sw->slots[k].reserved = pad(capacity);
  *slot = k;
  pthread_mutex_unlock(&sw->mu);
  return ZEROC_OK;
fail:
  free(path);
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&sw->mu);
  return res;
}

zeroc_result_t zeroc__swap_slot_destroy(zeroc__swap_t *sw, int slot) {
  if (!sw) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__swap_slot_destroy: sw is NULL");
  pthread_mutex_lock(&sw->mu);
  slot_t *s = slot_get(sw, slot);
  zeroc_result_t res = ZEROC_OK;
  if (!s)
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__swap_slot_destroy: no slot %d", slot);
  else if (s->pending)
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "zeroc__swap_slot_destroy: slot %d (%s) has %d "
                     "transfers in flight; wait for them first",
                     slot, s->path, s->pending);
  else
    slot_close(sw, s);
  pthread_mutex_unlock(&sw->mu);
  return res;
}

const char *zeroc__swap_slot_path(zeroc__swap_t *sw, int slot) {
  pthread_mutex_lock(&sw->mu);
  slot_t *s = slot_get(sw, slot);
  const char *p = s ? s->path : NULL;
  pthread_mutex_unlock(&sw->mu);
  return p;
}

uint64_t zeroc__swap_slot_size(zeroc__swap_t *sw, int slot) {
  pthread_mutex_lock(&sw->mu);
  slot_t *s = slot_get(sw, slot);
  uint64_t n = s ? s->size : 0;
  pthread_mutex_unlock(&sw->mu);
  return n;
}

void zeroc__swap_info(zeroc__swap_t *sw, zeroc__swap_info_t *out) {
  pthread_mutex_lock(&sw->mu);
  out->block_bytes = sw->block;
  out->queue_depth = sw->qd;
  out->max_tickets = sw->max_tickets;
  out->direct = sw->direct;
  out->prealloc = sw->prealloc;
  out->requests = sw->requests;
  out->max_inflight = sw->max_inflight;
  snprintf(out->rank_dir, sizeof out->rank_dir, "%s", sw->rank_dir);
  pthread_mutex_unlock(&sw->mu);
}

/* ---- transfers ------------------------------------------------------------ */

/* Every ticket is outstanding: the caller must wait for some first. */
static zeroc_result_t no_ticket(const zeroc__swap_t *sw, const char *what) {
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "%s: all %d tickets are outstanding; wait for some (or raise max_tickets)",
                    what, sw->max_tickets);
}

static zeroc_result_t submit(zeroc__swap_t *sw, int write, int slot, void *buf, uint64_t bytes,
                             zeroc__ticket_t *ticket) {
  zeroc_result_t res = ZEROC_OK;
  const char *what = write ? "zeroc__swap_write" : "zeroc__swap_read";
  if (!sw || !ticket)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s(sw %p, ticket %p): both are required", what,
                      (void *)sw, (void *)ticket);
  *ticket = 0;
  if (!buf || ((uintptr_t)buf % PAGE) != 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: buffer %p is not 4096-byte aligned (O_DIRECT "
                      "needs it; take buffers from the pinned pool)",
                      what, buf);
  if (bytes == 0 || bytes > ((uint64_t)1 << 48))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: %llu bytes; accepted: 1 .. 2^48", what,
                      (unsigned long long)bytes);
  pthread_mutex_lock(&sw->mu);
  slot_t *s = slot_get(sw, slot);
  if (!s) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "%s: no slot %d (create it with zeroc__swap_slot_create)", what, slot);
    goto fail;
  }
  if (sw->broken) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "%s", sw->broken);
    goto fail;
  }
  if (!write && bytes > s->size) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s of %llu bytes from %s, which holds %llu bytes",
                     what, (unsigned long long)bytes, s->path, (unsigned long long)s->size);
    goto fail;
  }
  if (sw->nfree_tickets == 0) {
    res = no_ticket(sw, what);
    goto fail;
  }
  if (write && sw->prealloc && pad(bytes) > s->reserved) {
    /* Grow outside the lock; the reservation only ever extends the file, so
     * transfers running on this slot are unaffected. */
    int fd = s->fd, unsupported = 0;
    uint64_t from = s->reserved;
    const char *path = s->path; /* stable: the slot stays alive while pending */
    s->pending++;
    pthread_mutex_unlock(&sw->mu);
    zeroc_result_t r = reserve(fd, path, from, pad(bytes), &unsupported);
    pthread_mutex_lock(&sw->mu);
    if (unsupported) sw->prealloc = 0;
    s = &sw->slots[slot]; /* the table may have moved */
    s->pending--;
    if (r != ZEROC_OK) {
      res = r;
      goto fail;
    }
    if (pad(bytes) > s->reserved) s->reserved = pad(bytes);
    if (sw->nfree_tickets == 0) {
      res = no_ticket(sw, what);
      goto fail;
    }
  }
  int ti = sw->free_tickets[--sw->nfree_tickets];
  ticket_t *t = &sw->tickets[ti];
  t->state = T_QUEUED;
  t->write = write;
  t->slot = slot;
  t->buf = buf;
  t->bytes = bytes;
  t->body = bytes / PAGE * PAGE;
  t->next = 0;
  t->tail_todo = bytes > t->body;
  t->inflight = 0;
  t->stop = 0;
  t->res = ZEROC_OK;
  free(t->msg);
  t->msg = NULL;
  if (write && t->tail_todo) {
    /* The padding is zeros, so a file never holds stale bytes of other data. */
    memcpy(t->bounce, t->buf + t->body, bytes - t->body);
    memset(t->bounce + (bytes - t->body), 0, PAGE - (bytes - t->body));
  }
  if (write) s->size = bytes;
  s->pending++;
  sw->queue[sw->nqueue++] = ti;
  *ticket = ticket_handle(sw, ti);
  wake(sw);
  pthread_mutex_unlock(&sw->mu);
  return ZEROC_OK;
fail:
  pthread_mutex_unlock(&sw->mu);
  return res;
}

zeroc_result_t zeroc__swap_write(zeroc__swap_t *sw, int slot, const void *buf, uint64_t bytes,
                                 zeroc__ticket_t *ticket) {
  /* The buffer is only read from: the cast lets one submit path serve both. */
  return submit(sw, 1, slot, (void *)buf, bytes, ticket);
}

zeroc_result_t zeroc__swap_read(zeroc__swap_t *sw, int slot, void *buf, uint64_t bytes,
                                zeroc__ticket_t *ticket) {
  return submit(sw, 0, slot, buf, bytes, ticket);
}

/* Consumes a done ticket (mutex held): its result, with its message as the
 * calling thread's error. */
static zeroc_result_t consume(zeroc__swap_t *sw, int ti) {
  ticket_t *t = &sw->tickets[ti];
  zeroc_result_t r = t->res;
  if (r != ZEROC_OK) zeroc__tls_error_set(t->msg);
  t->state = T_FREE;
  t->gen = t->gen + 1 ? t->gen + 1 : 1; /* never 0, so no handle is ever 0 */
  sw->free_tickets[sw->nfree_tickets++] = ti;
  return r;
}

zeroc_result_t zeroc__swap_wait(zeroc__swap_t *sw, zeroc__ticket_t ticket) {
  if (!sw) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__swap_wait: sw is NULL");
  pthread_mutex_lock(&sw->mu);
  int ti = ticket_index(sw, ticket);
  if (ti < 0) {
    pthread_mutex_unlock(&sw->mu);
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__swap_wait: ticket %#llx is not outstanding "
                      "(already waited for, or never submitted)",
                      (unsigned long long)ticket);
  }
  while (sw->tickets[ti].state != T_DONE) pthread_cond_wait(&sw->done_cv, &sw->mu);
  zeroc_result_t r = consume(sw, ti);
  pthread_mutex_unlock(&sw->mu);
  return r;
}

zeroc_result_t zeroc__swap_poll(zeroc__swap_t *sw, zeroc__ticket_t ticket, int *done) {
  if (!sw || !done)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__swap_poll(sw %p, done %p): both are required",
                      (void *)sw, (void *)done);
  *done = 0;
  pthread_mutex_lock(&sw->mu);
  int ti = ticket_index(sw, ticket);
  zeroc_result_t r = ZEROC_OK;
  if (ti < 0)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                   "zeroc__swap_poll: ticket %#llx is not outstanding "
                   "(already consumed, or never submitted)",
                   (unsigned long long)ticket);
  else if (sw->tickets[ti].state == T_DONE) {
    *done = 1;
    r = consume(sw, ti);
  }
  pthread_mutex_unlock(&sw->mu);
  return r;
}
