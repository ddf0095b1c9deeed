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
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "offload/swap_internal.h"

/* How long a fresh lock may be held by another rank's sweep: 50 x 10 ms. */
enum { LOCK_WAIT_TRIES = 50, LOCK_WAIT_NS = 10 * 1000 * 1000 };

/* ---- create / destroy ---------------------------------------------------- */

static zeroc_result_t read_config(zeroc__swap_t *sw, const zeroc__swap_config_t *c, int *rank) {
  if (!c->dir || !*c->dir)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: dir is required (the NVMe directory)");
  if (!zeroc__swap_name_ok(c->job))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: job '%s'; accepted: 1..64 of "
                      "[A-Za-z0-9._-], not starting with '.'",
                      c->job ? c->job : "(null)");
  *rank = c->rank;
  if (*rank < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "swapper config: rank %d; accepted: the world rank, >= 0", c->rank);
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

zeroc_result_t zeroc__swap_create(zeroc__mem_t *mem, const zeroc__swap_config_t *cfg,
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
  sw->mem = mem;
  sw->efd = -1;
  sw->lock_fd = -1;
  pthread_mutex_init(&sw->mu, NULL);
  pthread_cond_init(&sw->done_cv, NULL);
  ZEROC_TRY(read_config(sw, cfg, &rank));
  for (int attempt = 0;; attempt++) {
    ZEROC_TRY(zeroc__swap_make_dirs(sw, cfg->dir, cfg->job, rank));

    /* The lock keeps a second swapper (another job with the same name, or a
     * restarted rank whose predecessor still runs) off these files. Opening it
     * also probes O_DIRECT, so the fallback warning comes once, here. */
    snprintf(sw->lock_path, sizeof sw->lock_path, "%s/.lock", sw->rank_dir);
    sw->lock_fd = zeroc__swap_open_file(sw, sw->lock_path, O_CREAT);
    if (sw->lock_fd < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "open of lock file %s: %s (errno %d)", sw->lock_path,
                       strerror(errno), errno);
      goto fail;
    }
    /* Another rank's sweep (zeroc__swap_sweep_stale) may hold this fresh lock
     * for the moment it takes to check it, as if it were a dead swapper's: a
     * live swapper holds it for its whole life, so wait out a short hold. */
    int held = flock(sw->lock_fd, LOCK_EX | LOCK_NB) != 0;
    for (int w = 0; held && errno == EWOULDBLOCK && w < LOCK_WAIT_TRIES; w++) {
      struct timespec ts = {0, LOCK_WAIT_NS};
      nanosleep(&ts, NULL);
      held = flock(sw->lock_fd, LOCK_EX | LOCK_NB) != 0;
    }
    if (held) {
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
  zeroc__swap_sweep_stale(cfg->dir); /* our own lock is held: only dead swappers' files go */

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
  if (mem)
    ZEROC_TRY(zeroc__mem_track(mem, sw->bounce_area, ZEROC_MEM_HOST, ZEROC_TAG_BUFFERS, nt * PAGE));
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
  if (pthread_create(&sw->thread, NULL, zeroc__swap_io_main, sw) != 0) {
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
    if (sw->slots[i].used) zeroc__swap_slot_close(sw, &sw->slots[i]);
  free(sw->slots);
  if (sw->tickets)
    for (int i = 0; i < sw->max_tickets; i++) free(sw->tickets[i].msg);
  if (sw->bounce_area && sw->mem) zeroc__mem_untrack(sw->mem, sw->bounce_area, NULL);
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
