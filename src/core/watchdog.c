/*
 * core/watchdog.c - the node-local status board behind hang diagnostics.
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
#include "core/ctx.h"
#include "core/log.h"
#include "core/watchdog.h"

enum { ST_UNUSED = 0, ST_RUNNING = 1, ST_FINISHED = 2, ST_FAILED = 3 };

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
  chan_t ch[ZEROC_MAX_CHANNELS];
} slot_t;

struct zeroc__watchdog {
  MPI_Win win;
  slot_t **slots; /* by node-local rank */
  slot_t *mine;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

zeroc_result_t zeroc__watchdog_init(zeroc_ctx_t *ctx) {
  struct zeroc__watchdog *wd = calloc(1, sizeof *wd);
  if (!wd) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "watchdog");
  wd->slots = calloc((size_t)ctx->local_size, sizeof *wd->slots);
  if (!wd->slots) {
    free(wd);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "watchdog slots");
  }
  void *base = NULL;
  int e = MPI_Win_allocate_shared((MPI_Aint)sizeof(slot_t), 1, MPI_INFO_NULL, ctx->node_comm, &base,
                                  &wd->win);
  if (e != MPI_SUCCESS) {
    /* Diagnostics degrade to the plain timeout; training is unaffected. */
    ZWARN(INIT, "MPI_Win_allocate_shared failed (%d): hang diagnostics limited to timeouts", e);
    free(wd->slots);
    free(wd);
    return ZEROC_OK;
  }
  for (int l = 0; l < ctx->local_size; l++) {
    MPI_Aint sz;
    int du;
    MPI_Win_shared_query(wd->win, l, &sz, &du, (void **)&wd->slots[l]);
  }
  wd->mine = wd->slots[ctx->local_rank];
  memset(wd->mine, 0, sizeof *wd->mine);
  atomic_store(&wd->mine->pid, (int32_t)getpid());
  atomic_store(&wd->mine->world_rank, ctx->mesh.rank);
  snprintf(wd->mine->phase, sizeof wd->mine->phase, "initialising");
  atomic_store(&wd->mine->phase_ns, now_ns());
  atomic_store(&wd->mine->state, ST_RUNNING);
  MPI_Barrier(ctx->node_comm); /* every slot is filled before anyone reads it */
  ctx->wd = wd;
  return ZEROC_OK;
}

void zeroc__watchdog_fini(zeroc_ctx_t *ctx, int failed) {
  struct zeroc__watchdog *wd = ctx->wd;
  if (!wd) return;
  /* The window stays mapped until MPI_Finalize: peers may still read it. */
  atomic_store(&wd->mine->state, failed ? ST_FAILED : ST_FINISHED);
}

void zeroc__watchdog_free(zeroc_ctx_t *ctx) {
  struct zeroc__watchdog *wd = ctx->wd;
  if (!wd) return;
  MPI_Win_free(&wd->win);
  free(wd->slots);
  free(wd);
  ctx->wd = NULL;
}

void zeroc__watchdog_phase(zeroc_ctx_t *ctx, const char *fmt, ...) {
  struct zeroc__watchdog *wd = ctx ? ctx->wd : NULL;
  if (!wd) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(wd->mine->phase, sizeof wd->mine->phase, fmt, ap);
  va_end(ap);
  atomic_store_explicit(&wd->mine->phase_ns, now_ns(), memory_order_relaxed);
}

void zeroc__watchdog_enter(zeroc_ctx_t *ctx, struct zeroc_group *g, int channel, const char *op,
                          uint64_t seq) {
  struct zeroc__watchdog *wd = ctx->wd;
  if (!wd || channel < 0 || channel >= ZEROC_MAX_CHANNELS) return;
  chan_t *c = &wd->mine->ch[channel];
  snprintf(c->op, sizeof c->op, "%s", op);
  snprintf(c->group, sizeof c->group, "%s", g->name);
  atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
  atomic_store_explicit(&c->since_ns, now_ns(), memory_order_release);
}

void zeroc__watchdog_leave(zeroc_ctx_t *ctx, int channel) {
  struct zeroc__watchdog *wd = ctx->wd;
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

int zeroc__watchdog_peer_lost(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n) {
  struct zeroc__watchdog *wd = ctx->wd;
  if (!wd) return 0;
  for (int i = 0; i < g->size; i++) {
    int w = g->world_ranks[i];
    int l = ctx->local_of_world[w];
    if (l < 0 || w == ctx->mesh.rank) continue;
    slot_t *s = wd->slots[l];
    int pid = atomic_load(&s->pid);
    int st = atomic_load(&s->state);
    if (st == ST_FAILED) {
      snprintf(why, n, "rank %d (pid %d) failed (its own message gives the cause)", w, pid);
      return 1;
    }
    char ps = proc_state(pid);
    if (ps == 0 || ps == 'Z' || ps == 'X' || (kill(pid, 0) != 0 && errno == ESRCH)) {
      snprintf(why, n, "rank %d (pid %d) has exited", w, pid);
      return 1;
    }
    if (ps == 'T' || ps == 't') {
      snprintf(why, n, "rank %d (pid %d) is stopped (signal or debugger) while '%s'", w, pid,
               s->phase);
      return 1;
    }
    if (st == ST_FINISHED) {
      snprintf(why, n, "rank %d (pid %d) has already finished and will not join", w, pid);
      return 1;
    }
  }
  return 0;
}

void zeroc__watchdog_describe(zeroc_ctx_t *ctx, struct zeroc_group *g, char *why, size_t n) {
  struct zeroc__watchdog *wd = ctx->wd;
  size_t off = 0;
  int remote = 0, listed = 0;
  uint64_t t = now_ns();
  why[0] = 0;
  for (int i = 0; i < g->size && off + 1 < n; i++) {
    int w = g->world_ranks[i];
    int l = ctx->local_of_world[w];
    if (w == ctx->mesh.rank) continue;
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
