/*
 * offload/swap_ring.c - the swapper's I/O thread: it owns the io_uring ring,
 * starts queued tickets whose slot is free, keeps up to queue_depth block
 * requests in flight, and finishes tickets as their requests complete.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "offload/swap_internal.h"

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
    if ((uint64_t)st.st_size < zeroc__swap_pad(t->bytes))
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "short read of %s: %llu bytes at offset 0 are needed but the file is %lld "
                        "bytes (truncated behind zeroc's back?): end of file at offset %lld",
                        s->path, (unsigned long long)zeroc__swap_pad(t->bytes),
                        (long long)st.st_size, (long long)st.st_size);
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

void *zeroc__swap_io_main(void *arg) {
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
void zeroc__swap_wake(zeroc__swap_t *sw) {
  if (!sw->sleeping) return;
  uint64_t one = 1;
  ssize_t w = write(sw->efd, &one, sizeof one);
  (void)w; /* an eventfd write only fails when its counter would overflow: it is awake anyway */
}
