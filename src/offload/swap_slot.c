/*
 * offload/swap_slot.c - the swapper's caller side: slots (one file each),
 * submitting reads and writes as tickets, and waiting for or polling them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "offload/swap_internal.h"

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

/* ---- slots ---------------------------------------------------------------- */

static slot_t *slot_get(zeroc__swap_t *sw, int slot) {
  if (slot < 0 || slot >= sw->nslots || !sw->slots[slot].used) return NULL;
  return &sw->slots[slot];
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
  if (!zeroc__swap_name_ok(name)) {
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
  fd = zeroc__swap_open_file(sw, path, O_CREAT | O_TRUNC);
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
  if (prealloc) res = zeroc__swap_reserve(sfd, spath, 0, zeroc__swap_pad(capacity), &unsupported);
  pthread_mutex_lock(&sw->mu);
  if (unsupported) sw->prealloc = 0;
  sw->slots[k].pending = 0;
  if (res != ZEROC_OK) {
    zeroc__swap_slot_close(sw, &sw->slots[k]); /* removes the file: nothing is left behind */
    goto fail;
  }
  sw->slots[k].reserved = zeroc__swap_pad(capacity);
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
    zeroc__swap_slot_close(sw, s);
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
  if (write && sw->prealloc && zeroc__swap_pad(bytes) > s->reserved) {
    /* Grow outside the lock; the reservation only ever extends the file, so
     * transfers running on this slot are unaffected. */
    int fd = s->fd, unsupported = 0;
    uint64_t from = s->reserved;
    const char *path = s->path; /* stable: the slot stays alive while pending */
    s->pending++;
    pthread_mutex_unlock(&sw->mu);
    zeroc_result_t r = zeroc__swap_reserve(fd, path, from, zeroc__swap_pad(bytes), &unsupported);
    pthread_mutex_lock(&sw->mu);
    if (unsupported) sw->prealloc = 0;
    s = &sw->slots[slot]; /* the table may have moved */
    s->pending--;
    if (r != ZEROC_OK) {
      res = r;
      goto fail;
    }
    if (zeroc__swap_pad(bytes) > s->reserved) s->reserved = zeroc__swap_pad(bytes);
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
  zeroc__swap_wake(sw);
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
