/*
 * pp/schedule_sim.c - discrete-event simulation of a pipeline schedule: every
 * rank runs its action list with blocking communication (rendezvous or
 * buffered sends), unit compute costs; reports makespan, idle time, bubbles,
 * live activations, deadlocks and broken dependencies. Also the Gantt printer.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pp/schedule.h"

double zeroc__pp_bubble_time(int p, double tf, double tb) { return (p - 1) * (tf + tb); }

double zeroc__pp_bubble_fraction(int p, int m, int v) {
  return (double)(p - 1) / ((double)m * v + p - 1);
}

void zeroc__pp_sim_destroy(zeroc_pp_sim_t *sim) {
  if (!sim) return;
  free(sim->busy);
  free(sim->start);
  free(sim);
}

static zeroc_pp_sim_t *sim_alloc(int p, size_t n) {
  zeroc_pp_sim_t *sim = calloc(1, sizeof *sim);
  if (!sim) return NULL;
  /* one block for the per-rank doubles, one for the per-action times; the
   * int arrays live at the end of the per-rank block */
  size_t per_rank = (size_t)p * (3 * sizeof(double) + 2 * sizeof(int));
  sim->busy = calloc(1, per_rank);
  sim->start = malloc(2 * (n ? n : 1) * sizeof(double));
  if (!sim->busy || !sim->start) {
    zeroc__pp_sim_destroy(sim);
    return NULL;
  }
  sim->p = p;
  sim->idle = sim->busy + p;
  sim->bubble_slots = sim->idle + p;
  sim->gaps = (int *)(sim->bubble_slots + p);
  sim->peak_live = sim->gaps + p;
  sim->end = sim->start + n;
  for (size_t i = 0; i < n; i++) sim->start[i] = sim->end[i] = -1;
  return sim;
}

/* Appends to the detail text, keeping it terminated when it fills up. */
static void detail_add(zeroc_pp_sim_t *sim, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void detail_add(zeroc_pp_sim_t *sim, const char *fmt, ...) {
  size_t used = strlen(sim->detail);
  if (used + 1 >= sizeof sim->detail) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sim->detail + used, sizeof sim->detail - used, fmt, ap);
  va_end(ap);
}

/* The end (exclusive) of the post-together group that starts at i. */
static size_t group_end(const zeroc_pp_action_t *a, size_t i, size_t end) {
  while (i + 1 < end && (a[i].flags & ZEROC_PP_WITH_NEXT)) i++;
  return i + 1;
}

/* Names the stuck group of rank r at global index i and what it waits for. */
static void describe_stuck(zeroc_pp_sim_t *sim, const zeroc_pp_schedule_t *s,
                           const zeroc_pp_index_t *ix, const size_t *pos, int r) {
  size_t i = pos[r], e = group_end(s->actions, i, s->offset[r + 1]);
  char name[48];
  detail_add(sim, "%sr%d #%zu {", sim->detail[0] ? "; " : "", r, i - s->offset[r]);
  for (size_t k = i; k < e; k++) {
    zeroc__pp_action_format(name, sizeof name, &s->actions[k]);
    detail_add(sim, "%s%s", k > i ? " " : "", name);
  }
  detail_add(sim, "}");
  for (size_t k = i; k < e; k++) {
    int64_t j = ix->match[k];
    if (sim->start[j] >= 0) continue; /* partner posted */
    int q = ix->rank[j];
    zeroc__pp_action_format(name, sizeof name, &s->actions[j]);
    detail_add(sim, " waits for r%d #%zu %s (r%d is at #%zu)", q, (size_t)j - s->offset[q], name, q,
               pos[q] - s->offset[q]);
    break;
  }
}

/* Dependencies in time; counts violations and describes the first. */
static void check_dependencies(zeroc_pp_sim_t *sim, const zeroc_pp_schedule_t *s,
                               const zeroc_pp_index_t *ix, double tc, double eps) {
  const int p = s->p, S = ix->S;
  for (int mb = 0; mb < s->m; mb++) {
    for (int st = 0; st < S; st++) {
      size_t key = (size_t)mb * S + st;
      int64_t f = ix->fpos[key], b = ix->bpos[key];
      struct {
        int64_t before, after;
        const char *what;
      } dep[3] = {
          {st > 0 ? ix->fpos[key - 1] : -1, f, "FORWARD after the previous stage's FORWARD"},
          {f, b, "BACKWARD after its own FORWARD"},
          {st + 1 < S ? ix->bpos[key + 1] : -1, b, "BACKWARD after the next stage's BACKWARD"},
      };
      for (int k = 0; k < 3; k++) {
        if (dep[k].before < 0) continue;
        /* a message between ranks takes tc; p = 1 hands over in memory */
        double gap = (ix->rank[dep[k].before] != ix->rank[dep[k].after]) ? tc : 0.0;
        if (sim->start[dep[k].after] + eps >= sim->end[dep[k].before] + gap) continue;
        if (sim->violations++ == 0)
          detail_add(sim,
                     "mb %d stage %d (rank %d): %s broken: starts at %g, the other ends at %g "
                     "(+%g message)",
                     mb, st, st % p, dep[k].what, sim->start[dep[k].after], sim->end[dep[k].before],
                     gap);
      }
    }
  }
}

zeroc_result_t zeroc__pp_simulate(const zeroc_pp_schedule_t *s, const zeroc_pp_sim_config_t *cfg,
                                  zeroc_pp_sim_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_pp_index_t ix;
  zeroc_pp_sim_t *sim = NULL;
  size_t *pos = NULL;
  double *clock = NULL;
  memset(&ix, 0, sizeof ix);
  if (!out || !cfg)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_simulate: NULL %s", !out ? "out" : "cfg");
  *out = NULL;
  if (!(cfg->tf > 0) || !(cfg->tb > 0) || !isfinite(cfg->tf) || !isfinite(cfg->tb) ||
      !(cfg->tc >= 0) || !isfinite(cfg->tc) || (cfg->rendezvous != 0 && cfg->rendezvous != 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__pp_simulate: tf=%g tb=%g tc=%g rendezvous=%d; accepted: finite "
                      "tf > 0, tb > 0, tc >= 0, rendezvous 0 or 1",
                      cfg->tf, cfg->tb, cfg->tc, cfg->rendezvous);
  res = zeroc__pp_index_build(s, &ix);
  if (res != ZEROC_OK) goto exit;
  const int p = s->p;
  const zeroc_pp_action_t *act = s->actions;
  sim = sim_alloc(p, ix.n);
  pos = malloc((size_t)p * sizeof *pos);
  clock = calloc((size_t)p, sizeof *clock);
  if (!sim || !pos || !clock) {
    res =
        ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc__pp_simulate: state for %d ranks, %zu actions", p, ix.n);
    goto exit;
  }
  for (int r = 0; r < p; r++) pos[r] = s->offset[r];

  /* Sweep the ranks, each running until it blocks, until all finish or a sweep
   * moves nobody. Times are exact whatever the sweep order: a group completes
   * from post times only, and a post time is final once set. */
  int done = 0;
  while (!done) {
    int progress = 0;
    done = 1;
    for (int r = 0; r < p; r++) {
      const size_t end = s->offset[r + 1];
      while (pos[r] < end) {
        size_t i = pos[r];
        if (!zeroc__pp_is_comm(act[i].op)) {
          sim->start[i] = clock[r];
          clock[r] += act[i].op == ZEROC_PP_FORWARD ? cfg->tf : cfg->tb;
          sim->end[i] = clock[r];
          pos[r]++;
          progress = 1;
          continue;
        }
        size_t e = group_end(act, i, end);
        if (sim->start[i] < 0) {
          for (size_t k = i; k < e; k++) sim->start[k] = clock[r];
          progress = 1; /* a post may unblock a peer */
        }
        int complete = 1;
        for (size_t k = i; k < e && complete; k++) {
          int64_t j = ix.match[k];
          double c;
          if (!cfg->rendezvous && zeroc__pp_is_send(act[k].op)) {
            c = sim->start[k]; /* buffered: the sender moves on at once */
          } else if (sim->start[j] < 0) {
            complete = 0; /* the partner has not been posted yet */
            break;
          } else if (cfg->rendezvous) {
            c = fmax(sim->start[k], sim->start[j]) + cfg->tc;
          } else {
            c = fmax(sim->start[k], sim->start[j] + cfg->tc);
          }
          sim->end[k] = c;
        }
        if (!complete) {
          for (size_t k = i; k < e; k++) sim->end[k] = -1;
          break;
        }
        for (size_t k = i; k < e; k++) clock[r] = fmax(clock[r], sim->end[k]);
        pos[r] = e;
        progress = 1;
      }
      if (pos[r] < end) done = 0;
    }
    if (!done && !progress) break;
  }

  if (!done) {
    sim->deadlocked = 1;
    for (int r = 0; r < p; r++)
      if (pos[r] < s->offset[r + 1]) describe_stuck(sim, s, &ix, pos, r);
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "%s schedule (p=%d, m=%d, v=%d) deadlocks with %s sends: %s",
                     zeroc__pp_kind_name(s->kind), p, s->m, s->v,
                     cfg->rendezvous ? "rendezvous" : "buffered", sim->detail);
    *out = sim;
    sim = NULL;
    goto exit;
  }

  /* Metrics. */
  for (int r = 0; r < p; r++) sim->makespan = fmax(sim->makespan, clock[r]);
  const double eps = 1e-9 * (1.0 + sim->makespan);
  for (int r = 0; r < p; r++) {
    double prev_end = 0, busy = 0;
    int live = 0, peak = 0, gaps = 0;
    for (size_t i = s->offset[r]; i < s->offset[r + 1]; i++) {
      if (zeroc__pp_is_comm(act[i].op)) continue;
      if (sim->start[i] > prev_end + eps) gaps++;
      prev_end = sim->end[i];
      busy += sim->end[i] - sim->start[i];
      /* compute is sequential on a rank, so list order is time order */
      live += act[i].op == ZEROC_PP_FORWARD ? 1 : -1;
      if (live > peak) peak = live;
    }
    if (sim->makespan > prev_end + eps) gaps++;
    sim->busy[r] = busy;
    sim->idle[r] = sim->makespan - busy;
    sim->bubble_slots[r] = sim->idle[r] / cfg->tf;
    sim->gaps[r] = gaps;
    sim->peak_live[r] = peak;
  }
  check_dependencies(sim, s, &ix, cfg->tc, eps);
  if (sim->violations) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "%s schedule (p=%d, m=%d, v=%d) breaks %d dependencies; first: %s",
                     zeroc__pp_kind_name(s->kind), p, s->m, s->v, sim->violations, sim->detail);
  }
  *out = sim;
  sim = NULL;
exit:
  zeroc__pp_sim_destroy(sim);
  zeroc__pp_index_free(&ix);
  free(pos);
  free(clock);
  return res;
}

zeroc_result_t zeroc__pp_sim_print_timeline(FILE *f, const zeroc_pp_schedule_t *s,
                                            const zeroc_pp_sim_t *sim, double cell, int width) {
  if (!f || !s || !sim)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc__pp_sim_print_timeline: NULL %s",
                      !f   ? "file"
                      : !s ? "schedule"
                           : "sim");
  if (!(cell > 0) || width < 1 || sim->deadlocked || sim->p != s->p)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc__pp_sim_print_timeline: cell=%g width=%d deadlocked=%d sim p=%d "
                      "schedule p=%d; accepted: cell > 0, width >= 1, a finished simulation of "
                      "this schedule",
                      cell, width, sim->deadlocked, sim->p, s->p);
  long cells = (long)ceil(sim->makespan / cell - 1e-9);
  for (int r = 0; r < s->p; r++) {
    fprintf(f, "r%d:", r);
    size_t i = s->offset[r];
    for (long t = 0; t < cells; t++) {
      double mid = (t + 0.5) * cell;
      /* advance to the compute action that may cover this cell */
      while (i < s->offset[r + 1] && (zeroc__pp_is_comm(s->actions[i].op) || sim->end[i] <= mid))
        i++;
      char name[48] = ".";
      if (i < s->offset[r + 1] && sim->start[i] <= mid)
        zeroc__pp_action_format(name, sizeof name, &s->actions[i]);
      /* pad every column but the last, so lines carry no trailing blanks */
      fprintf(f, " %-*.*s", t + 1 < cells ? width : 0, width, name);
    }
    fputc('\n', f);
  }
  if (ferror(f)) return ZEROC_FAIL(ZEROC_ERR_IO, "zeroc__pp_sim_print_timeline: writing failed");
  return ZEROC_OK;
}
