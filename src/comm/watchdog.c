/*
 * comm/watchdog.c - the node-local status board behind hang diagnostics.
 *
 * One slot per node-local rank in an MPI shared-memory window. Writers are the
 * owning rank's threads (each stream channel writes only its own entry);
 * readers are peers formatting messages, so plain relaxed atomics suffice and a
 * torn phase string costs only a garbled message.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

/* FINALIZING: inside the final collective of zeroc_ctx_finalize; FINISHED:
 * past it (every rank has then entered finalize, so nobody waits on this one). */
enum { ST_UNUSED = 0, ST_RUNNING = 1, ST_FINISHED = 2, ST_FAILED = 3, ST_FINALIZING = 4 };

/* How long a peer may sit in finalize while this rank still waits in an
 * ordinary collective before it counts as lost: the peer's part of that
 * collective may be complete while this rank's MPI_Test has not seen it yet. */
#define FINALIZE_GRACE_NS 1500000000ull

typedef struct {
  _Atomic uint64_t since_ns; /* 0: not in a collective */
  _Atomic uint64_t seq;
  char op[24];
  char group[24];
} chan_t;

typedef struct {
  _Atomic int32_t pid;
  _Atomic int32_t world_rank;
  _Atomic int32_t state;
  _Atomic uint64_t phase_ns;
  char phase[80];
  char cause[240]; /* why this rank failed (ST_FAILED), for its peers' messages */
  /* Set by the node leader's heartbeat (comm/heartbeat.c) when another node
   * is lost: every rank of this node fails its collective with this text. */
  _Atomic int32_t alarm;
  char alarm_text[400];
  chan_t ch[ZEROC_MAX_CHANNELS];
} slot_t;

struct zeroc__watchdog {
  MPI_Win win;
  slot_t **slots; /* by node-local rank */
  slot_t *mine;
  int world_rank;
  const int *local_of_world; /* the context's table (zeroc__place_t) */
  char host[64];
};

zeroc_result_t zeroc__watchdog_create(const zeroc__place_t *pl, zeroc__watchdog_t **out) {
  *out = NULL;
  struct zeroc__watchdog *wd = calloc(1, sizeof *wd);
  if (!wd) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "watchdog");
  wd->slots = calloc((size_t)pl->local_size, sizeof *wd->slots);
  if (!wd->slots) {
    free(wd);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "watchdog slots");
  }
  void *base = NULL;
  int e = MPI_Win_allocate_shared((MPI_Aint)sizeof(slot_t), 1, MPI_INFO_NULL, pl->node_comm, &base,
                                  &wd->win);
  if (e != MPI_SUCCESS) {
    /* Diagnostics degrade to the plain timeout; training is unaffected. */
    ZWARN(INIT, "MPI_Win_allocate_shared failed (%d): hang diagnostics limited to timeouts", e);
    free(wd->slots);
    free(wd);
    return ZEROC_OK;
  }
  for (int l = 0; l < pl->local_size; l++) {
    MPI_Aint sz;
    int du;
    MPI_Win_shared_query(wd->win, l, &sz, &du, (void **)&wd->slots[l]);
  }
  wd->mine = wd->slots[pl->local_rank];
  memset(wd->mine, 0, sizeof *wd->mine);
  atomic_store(&wd->mine->pid, (int32_t)getpid());
  atomic_store(&wd->mine->world_rank, pl->world_rank);
  snprintf(wd->mine->phase, sizeof wd->mine->phase, "initialising");
  atomic_store(&wd->mine->phase_ns, zeroc__now_ns());
  atomic_store(&wd->mine->state, ST_RUNNING);
  MPI_Barrier(pl->node_comm); /* every slot is filled before anyone reads it */
  wd->world_rank = pl->world_rank;
  wd->local_of_world = pl->local_of_world;
  snprintf(wd->host, sizeof wd->host, "%s", pl->host);
  *out = wd;
  return ZEROC_OK;
}

void zeroc__watchdog_fini(zeroc__watchdog_t *wd, int failed, const char *cause) {
  if (!wd) return;
  /* The window stays mapped until MPI_Finalize: peers may still read it. */
  if (failed) snprintf(wd->mine->cause, sizeof wd->mine->cause, "%s", cause ? cause : "");
  atomic_store(&wd->mine->state, failed ? ST_FAILED : ST_FINISHED);
}

void zeroc__watchdog_finalizing(zeroc__watchdog_t *wd) {
  if (!wd) return;
  snprintf(wd->mine->phase, sizeof wd->mine->phase, "finalizing");
  atomic_store(&wd->mine->phase_ns, zeroc__now_ns());
  atomic_store(&wd->mine->state, ST_FINALIZING);
}

void zeroc__watchdog_running(zeroc__watchdog_t *wd) {
  if (!wd) return;
  snprintf(wd->mine->phase, sizeof wd->mine->phase, "running");
  atomic_store(&wd->mine->phase_ns, zeroc__now_ns());
  atomic_store(&wd->mine->state, ST_RUNNING);
}

void zeroc__watchdog_post(zeroc__watchdog_t *wd, const char *text) {
  if (!wd || atomic_load(&wd->slots[0]->alarm)) return; /* the first cause stays */
  snprintf(wd->slots[0]->alarm_text, sizeof wd->slots[0]->alarm_text, "%s", text);
  atomic_store_explicit(&wd->slots[0]->alarm, 1, memory_order_release);
}

void zeroc__watchdog_free(zeroc__watchdog_t *wd, int collective) {
  if (!wd) return;
  if (collective) MPI_Win_free(&wd->win);
  free(wd->slots);
  free(wd);
}

void zeroc__watchdog_vphase(zeroc__watchdog_t *wd, const char *fmt, va_list ap) {
  if (!wd) return;
  vsnprintf(wd->mine->phase, sizeof wd->mine->phase, fmt, ap);
  atomic_store_explicit(&wd->mine->phase_ns, zeroc__now_ns(), memory_order_relaxed);
}

void zeroc__watchdog_enter(zeroc__watchdog_t *wd, struct zeroc_group *g, int channel,
                           const char *op, uint64_t seq) {
  if (!wd || channel < 0 || channel >= ZEROC_MAX_CHANNELS) return;
  chan_t *c = &wd->mine->ch[channel];
  snprintf(c->op, sizeof c->op, "%s", op);
  snprintf(c->group, sizeof c->group, "%s", g->name);
  atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
  atomic_store_explicit(&c->since_ns, zeroc__now_ns(), memory_order_release);
}

void zeroc__watchdog_leave(zeroc__watchdog_t *wd, int channel) {
  if (!wd || channel < 0 || channel >= ZEROC_MAX_CHANNELS) return;
  atomic_store_explicit(&wd->mine->ch[channel].since_ns, 0, memory_order_release);
}

/* 'R', 'S', 'T', 'Z', ... from /proc/<pid>/stat; 0 when the process is gone. */
static char proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *rp = strrchr(buf, ')'); /* the command name may contain spaces */
  return rp && rp[1] == ' ' ? rp[2] : '?';
}

int zeroc__watchdog_peer_lost(zeroc__watchdog_t *wd, struct zeroc_group *g, char *why, size_t n) {
  if (!wd) return 0;
  /* A peer that died or stopped is the first cause; a peer that failed has
   * usually only noticed it, so it is named only when no first cause is seen. */
  /* Another node lost (posted on the leader's slot): whatever the group. */
  slot_t *lead = wd->slots[0];
  if (atomic_load_explicit(&lead->alarm, memory_order_acquire)) {
    char text[sizeof lead->alarm_text];
    memcpy(text, lead->alarm_text, sizeof text);
    text[sizeof text - 1] = 0;
    snprintf(why, n, "%s", text);
    return 1;
  }
  int failed = -1;
  int finalizing = atomic_load(&wd->mine->state) == ST_FINALIZING;
  for (int i = 0; i < g->size; i++) {
    int w = g->world_ranks[i];
    int l = wd->local_of_world[w];
    if (l < 0 || w == wd->world_rank) continue;
    slot_t *s = wd->slots[l];
    int pid = atomic_load(&s->pid);
    int st = atomic_load(&s->state);
    if (st == ST_FAILED) {
      if (failed < 0) failed = i;
      continue;
    }
    if (st == ST_FINISHED && finalizing) continue; /* it completed the final collective */
    char ps = proc_state(pid);
    if (ps == 0 || ps == 'Z' || ps == 'X' || (kill(pid, 0) != 0 && errno == ESRCH)) {
      snprintf(why, n, "rank %d (pid %d) has exited on host %s", w, pid, wd->host);
      return 1;
    }
    if (ps == 'T' || ps == 't') {
      snprintf(why, n, "rank %d (pid %d) is stopped (signal or debugger) on host %s while '%s'",
               w, pid, wd->host, s->phase);
      return 1;
    }
    /* A peer in (or past) finalize is no lost peer while this rank is there
     * too: it is waiting in the same final collective, or has completed it. */
    if ((st == ST_FINISHED || st == ST_FINALIZING) && !finalizing &&
        zeroc__now_ns() - atomic_load(&s->phase_ns) > FINALIZE_GRACE_NS) {
      snprintf(why, n, "rank %d (pid %d) has already finished and will not join", w, pid);
      return 1;
    }
  }
  if (failed >= 0) {
    int w = g->world_ranks[failed];
    slot_t *s = wd->slots[wd->local_of_world[w]];
    char cause[sizeof s->cause];
    memcpy(cause, s->cause, sizeof cause); /* a peer's text: copy, then terminate */
    cause[sizeof cause - 1] = 0;
    snprintf(why, n, "rank %d (pid %d) failed: %s", w, (int)atomic_load(&s->pid),
             cause[0] ? cause : "(its own message gives the cause)");
    return 1;
  }
  return 0;
}

void zeroc__watchdog_describe(zeroc__watchdog_t *wd, struct zeroc_group *g, char *why, size_t n) {
  size_t off = 0;
  int remote = 0, listed = 0;
  uint64_t t = zeroc__now_ns();
  why[0] = 0;
  for (int i = 0; i < g->size && off + 1 < n; i++) {
    int w = g->world_ranks[i];
    int l = wd ? wd->local_of_world[w] : -1;
    if (i == g->rank) continue; /* this rank */
    if (!wd || l < 0) {
      remote++;
      continue;
    }
    slot_t *s = wd->slots[l];
    int in = 0;
    for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) {
      uint64_t since = atomic_load(&s->ch[c].since_ns);
      if (since && !strcmp(s->ch[c].group, g->name)) {
        in = 1;
        break;
      }
    }
    if (in) continue; /* this peer is waiting too */
    if (listed++ >= 8) break;
    off += (size_t)snprintf(why + off, n - off, "%srank %d is not in a collective on %s ('%s' for %.1f s)",
                            off ? "; " : "", w, g->name, s->phase,
                            (double)(t - atomic_load(&s->phase_ns)) * 1e-9);
  }
  if (off + 1 < n && remote)
    off += (size_t)snprintf(why + off, n - off, "%s%d member(s) on other nodes not inspected",
                            off ? "; " : "", remote);
  if (!why[0]) snprintf(why, n, "every node-local member is waiting in a collective on %s (a "
                               "mismatched collective order, or a slow remote peer)", g->name);
}
