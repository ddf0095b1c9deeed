/*
 * core/fault.c - the test-only fault injector behind ZEROC_FAULT (grammar in
 * core/fault.h): parsing the specs once, and acting when a named point is
 * reached. Nothing here runs unless the variable is set.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"

#define MAX_SPECS 16

enum { A_KILL, A_STOP, A_HANG, A_EXIT, A_SLEEP, A_VALUE };

static const char *const points[] = {"forward",      "backward",    "step",         "grad",
                                     "ckpt.stage",   "ckpt.shard",  "ckpt.written", "ckpt.manifest",
                                     "ckpt.publish", "ckpt.latest", "ckpt.load",    "finalize",
                                     "data.commit",  NULL};
#define POINT_GRAD 3
#define POINTS_TEXT                                                                                \
  "forward, backward, step, grad, ckpt.stage, ckpt.shard, ckpt.written, ckpt.manifest, "           \
  "ckpt.publish, ckpt.latest, ckpt.load, finalize, data.commit"
#define ACTIONS_TEXT "kill, stop, hang, exit, sleep=SECONDS, and at grad: nan, inf, set=VALUE"

typedef struct {
  int action;
  double arg; /* sleep seconds or the injected value */
  int point;
  int rank; /* -1: every rank */
  uint64_t step_lo, step_hi;
  uint64_t hit; /* 0: every matching call */
  _Atomic uint64_t seen;
  char text[96];
} spec_t;

struct zeroc__fault {
  int n;
  spec_t s[MAX_SPECS];
};

static int parse_u64(const char *s, size_t n, uint64_t *v) {
  char buf[32];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  if (buf[0] < '0' || buf[0] > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(buf, &end, 10);
  if (errno || *end) return -1;
  *v = x;
  return 0;
}

static int parse_double(const char *s, size_t n, double *v) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  double x = strtod(buf, &end);
  if (errno || *end) return -1;
  *v = x;
  return 0;
}

/* One spec "ACTION@POINT[:key=value...]" of length n. */
static zeroc_result_t parse_spec(const char *s, size_t n, spec_t *sp) {
  memset(sp, 0, sizeof *sp);
  snprintf(sp->text, sizeof sp->text, "%.*s", (int)n, s);
  sp->rank = -1;
  sp->step_hi = UINT64_MAX;
  const char *at = memchr(s, '@', n);
  if (!at)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_FAULT spec '%s': expected ACTION@POINT[:rank=R][:step=K|K-L][:hit=N]",
                      sp->text);
  size_t an = (size_t)(at - s);
  const char *p = at + 1, *end = s + n;
  size_t pn = strcspn(p, ":");
  if (pn > (size_t)(end - p)) pn = (size_t)(end - p);
  /* the action */
  if (an == 4 && !strncmp(s, "kill", 4))
    sp->action = A_KILL;
  else if (an == 4 && !strncmp(s, "stop", 4))
    sp->action = A_STOP;
  else if (an == 4 && !strncmp(s, "hang", 4))
    sp->action = A_HANG;
  else if (an == 4 && !strncmp(s, "exit", 4))
    sp->action = A_EXIT;
  else if (an == 3 && !strncmp(s, "nan", 3))
    sp->action = A_VALUE, sp->arg = NAN;
  else if (an == 3 && !strncmp(s, "inf", 3))
    sp->action = A_VALUE, sp->arg = INFINITY;
  else if (an > 6 && !strncmp(s, "sleep=", 6) && !parse_double(s + 6, an - 6, &sp->arg) &&
           sp->arg >= 0 && sp->arg <= 86400)
    sp->action = A_SLEEP;
  else if (an > 4 && !strncmp(s, "set=", 4) && !parse_double(s + 4, an - 4, &sp->arg))
    sp->action = A_VALUE;
  else
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_FAULT spec '%s': action '%.*s'; accepted " ACTIONS_TEXT, sp->text,
                      (int)an, s);
  /* the point */
  sp->point = -1;
  for (int k = 0; points[k]; k++)
    if (strlen(points[k]) == pn && !strncmp(points[k], p, pn)) sp->point = k;
  if (sp->point < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_FAULT spec '%s': point '%.*s'; accepted " POINTS_TEXT, sp->text,
                      (int)pn, p);
  if (sp->action == A_VALUE && sp->point != POINT_GRAD)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_FAULT spec '%s': nan, inf and set= act only at the point grad",
                      sp->text);
  /* the filters, each at most once: a second rank= would silently replace the first */
  int seen_rank = 0, seen_step = 0, seen_hit = 0;
  for (const char *k = p + pn; k < end;) {
    k++; /* the ':' */
    size_t kn = strcspn(k, ":");
    if (kn > (size_t)(end - k)) kn = (size_t)(end - k);
    const char *eq = memchr(k, '=', kn);
    const char *v = eq ? eq + 1 : NULL;
    size_t vn = eq ? kn - (size_t)(v - k) : 0;
    uint64_t x = 0, y = 0;
    int ok = 0;
    if (eq && eq - k == 4 && !strncmp(k, "rank", 4)) {
      ok = !parse_u64(v, vn, &x) && x < (1u << 30) && !seen_rank++;
      sp->rank = (int)x;
    } else if (eq && eq - k == 4 && !strncmp(k, "step", 4)) {
      const char *dash = memchr(v, '-', vn);
      if (dash) {
        ok = !parse_u64(v, (size_t)(dash - v), &x) &&
             !parse_u64(dash + 1, vn - (size_t)(dash - v) - 1, &y) && x <= y;
      } else {
        ok = !parse_u64(v, vn, &x);
        y = x;
      }
      ok = ok && !seen_step++;
      sp->step_lo = x, sp->step_hi = y;
    } else if (eq && eq - k == 3 && !strncmp(k, "hit", 3)) {
      ok = !parse_u64(v, vn, &x) && x >= 1 && !seen_hit++;
      sp->hit = x;
    }
    if (!ok)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "ZEROC_FAULT spec '%s': filter '%.*s'; accepted rank=R, step=K or step=K-L "
                        "(K <= L), hit=N (N >= 1), each at most once",
                        sp->text, (int)kn, k);
    k += kn;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__fault_parse(const char *text, zeroc__fault_t **out) {
  *out = NULL;
  if (!text || !*text) return ZEROC_OK;
  zeroc__fault_t *f = calloc(1, sizeof *f);
  if (!f) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "fault specs");
  for (const char *s = text; *s;) {
    size_t n = strcspn(s, ";");
    if (n) {
      if (f->n == MAX_SPECS) {
        free(f);
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "ZEROC_FAULT: more than %d specs", MAX_SPECS);
      }
      zeroc_result_t r = parse_spec(s, n, &f->s[f->n]);
      if (r) {
        free(f);
        return r;
      }
      f->n++;
    }
    s += n;
    if (*s == ';') s++;
  }
  if (f->n == 0) {
    free(f);
    return ZEROC_OK;
  }
  for (int i = 0; i < f->n; i++)
    ZWARN(INIT, "ZEROC_FAULT armed (test-only fault injection): %s", f->s[i].text);
  *out = f;
  return ZEROC_OK;
}

zeroc_result_t zeroc__fault_check_ranks(const zeroc__fault_t *f, int world) {
  for (int i = 0; f && i < f->n; i++)
    if (f->s[i].rank >= world)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "ZEROC_FAULT spec '%s': rank=%d, but the job has ranks 0..%d", f->s[i].text,
                        f->s[i].rank, world - 1);
  return ZEROC_OK;
}

void zeroc__fault_free(zeroc__fault_t *f) { free(f); }

int zeroc__fault_count(const zeroc__fault_t *f) { return f ? f->n : 0; }

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int zeroc__fault_hit(zeroc__fault_t *f, int rank, const char *point, uint64_t step, double *value) {
  if (!f) return 0;
  for (int i = 0; i < f->n; i++) {
    spec_t *sp = &f->s[i];
    if (strcmp(points[sp->point], point)) continue;
    if (sp->rank >= 0 && sp->rank != rank) continue;
    if (step < sp->step_lo || step > sp->step_hi) continue;
    uint64_t seen = atomic_fetch_add(&sp->seen, 1) + 1;
    if (sp->hit && seen != sp->hit) continue;
    /* one write, flushed before acting: the line must survive a SIGKILL */
    ZWARN(INIT, "ZEROC_FAULT '%s' fires on rank %d at %s, step %llu (call %llu)", sp->text, rank,
          point, (unsigned long long)step, (unsigned long long)seen);
    switch (sp->action) {
    case A_KILL:
      kill(getpid(), SIGKILL);
      break;
    case A_STOP:
      raise(SIGSTOP);
      break;
    case A_EXIT:
      _exit(3);
    case A_HANG:
      for (;;) sleep_s(1.0); /* a stuck rank: alive, never arriving */
    case A_SLEEP:
      sleep_s(sp->arg);
      break;
    case A_VALUE:
      if (value) {
        *value = sp->arg;
        return 1;
      }
      break;
    }
  }
  return 0;
}
