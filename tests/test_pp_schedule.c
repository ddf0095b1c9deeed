/*
 * tests/test_pp_schedule.c - pipeline schedules: structure over a (p, m, v) grid,
 * dependencies and deadlock-freedom in the simulator, live activations and the
 * bubble against theory, the printer, the checker's and validator's errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pp/schedule.h"
#include "testutil.h"

static const int grid_p[] = {1, 2, 3, 4, 8};

/* Megatron's warm-up counts, restated here from the issue rather than taken
 * from the library. */
static int expected_warmup(zeroc_pp_kind_t kind, int p, int m, int v, int r) {
  int w;
  switch (kind) {
  case ZEROC_PP_1F1B:
    w = p - r - 1;
    return w < m ? w : m;
  case ZEROC_PP_INTERLEAVED:
    w = (p - r - 1) * 2 + (v - 1) * p;
    return w < m * v ? w : m * v;
  default:
    return m;
  }
}

/* Everything the grid asserts about one schedule, on its own, without the
 * library's checker: counts, pairing of messages, warm-up, order. */
static void check_structure(const zeroc_pp_schedule_t *s) {
  const int p = s->p, m = s->m, v = s->v, S = p * v;
  int *nf = calloc((size_t)m * S, sizeof(int)), *nb = calloc((size_t)m * S, sizeof(int));
  int64_t ntag = 2 * (int64_t)m * (S > 1 ? S - 1 : 1);
  /* per tag: sends seen, receives seen, the sender's rank, the receiver's rank */
  int *sends = calloc((size_t)ntag, sizeof(int)), *recvs = calloc((size_t)ntag, sizeof(int));
  int *from = calloc((size_t)ntag, sizeof(int)), *to = calloc((size_t)ntag, sizeof(int));
  int *peer_from = calloc((size_t)ntag, sizeof(int)), *peer_to = calloc((size_t)ntag, sizeof(int));
  for (int r = 0; r < p; r++) {
    size_t n;
    const zeroc_pp_action_t *a = zeroc__pp_rank_actions(s, r, &n);
    int forwards_before_backward = 0, seen_backward = 0;
    for (size_t i = 0; i < n; i++) {
      int st = a[i].chunk * p + r;
      if (a[i].op == ZEROC_PP_FORWARD || a[i].op == ZEROC_PP_BACKWARD) {
        ZT_ASSERT_MSG(a[i].flags == 0, "rank %d #%zu: compute with flags %d", r, i, a[i].flags);
        (a[i].op == ZEROC_PP_FORWARD ? nf : nb)[a[i].mb * S + st]++;
        if (a[i].op == ZEROC_PP_BACKWARD)
          seen_backward = 1;
        else if (!seen_backward)
          forwards_before_backward++;
        continue;
      }
      ZT_ASSERT_MSG(p > 1, "p=1 schedule has a comm action");
      int64_t tag = zeroc__pp_action_tag(s, r, &a[i]);
      ZT_ASSERT_MSG(tag >= 0 && tag < ntag, "tag %lld out of [0, %lld)", (long long)tag,
                    (long long)ntag);
      if (tag < 0 || tag >= ntag) continue;
      if (zeroc__pp_is_send(a[i].op)) {
        sends[tag]++;
        from[tag] = r;
        peer_from[tag] = a[i].peer;
      } else {
        recvs[tag]++;
        to[tag] = r;
        peer_to[tag] = a[i].peer;
      }
      /* a group only joins comm actions */
      if (a[i].flags & ZEROC_PP_WITH_NEXT)
        ZT_ASSERT_MSG(i + 1 < n && zeroc__pp_is_comm(a[i + 1].op), "rank %d #%zu: bad group", r, i);
    }
    /* warm-up forwards, plus the steady phase's first forward when there is one */
    int w = expected_warmup(s->kind, p, m, v, r);
    int want = w < m * v ? w + 1 : w;
    ZT_ASSERT_MSG(forwards_before_backward == want,
                  "%s p=%d m=%d v=%d rank %d: %d forwards before the first backward, want %d",
                  zeroc__pp_kind_name(s->kind), p, m, v, r, forwards_before_backward, want);
    CU_ASSERT_EQUAL(zeroc__pp_warmup(s->kind, p, m, v, r), w);
  }
  for (int i = 0; i < m * S; i++)
    ZT_ASSERT_MSG(nf[i] == 1 && nb[i] == 1, "%s p=%d m=%d v=%d: mb %d stage %d has %d F, %d B",
                  zeroc__pp_kind_name(s->kind), p, m, v, i / S, i % S, nf[i], nb[i]);
  if (p > 1) {
    for (int64_t t = 0; t < ntag; t++) {
      ZT_ASSERT_MSG(sends[t] == 1 && recvs[t] == 1, "tag %lld: %d sends, %d receives", (long long)t,
                    sends[t], recvs[t]);
      ZT_ASSERT_MSG(peer_from[t] == to[t] && peer_to[t] == from[t],
                    "tag %lld: sender %d names %d, receiver %d names %d", (long long)t, from[t],
                    peer_from[t], to[t], peer_to[t]);
      ZT_ASSERT_MSG(from[t] != to[t], "tag %lld: rank %d sends to itself", (long long)t, from[t]);
    }
  }
  free(nf), free(nb), free(sends), free(recvs), free(from), free(to), free(peer_from),
      free(peer_to);
}

/* Dependencies from the simulated times, recomputed here: F(mb,s) after
 * F(mb,s-1), B(mb,s) after F(mb,s) and after B(mb,s+1). */
static void check_times(const zeroc_pp_schedule_t *s, const zeroc_pp_sim_t *sim, double tc) {
  const int p = s->p, m = s->m, S = p * s->v;
  double *fs = malloc(sizeof(double) * m * S), *fe = malloc(sizeof(double) * m * S);
  double *bs = malloc(sizeof(double) * m * S), *be = malloc(sizeof(double) * m * S);
  for (int r = 0; r < p; r++)
    for (size_t i = s->offset[r]; i < s->offset[r + 1]; i++) {
      const zeroc_pp_action_t *a = &s->actions[i];
      int k = a->mb * S + a->chunk * p + r;
      if (a->op == ZEROC_PP_FORWARD) fs[k] = sim->start[i], fe[k] = sim->end[i];
      if (a->op == ZEROC_PP_BACKWARD) bs[k] = sim->start[i], be[k] = sim->end[i];
    }
  double hop = p > 1 ? tc : 0; /* neighbouring stages are on different ranks when p > 1 */
  int bad = 0;
  for (int mb = 0; mb < m; mb++)
    for (int st = 0; st < S; st++) {
      int k = mb * S + st;
      if (st > 0 && fs[k] < fe[k - 1] + hop) bad++;
      if (bs[k] < fe[k]) bad++;
      if (st + 1 < S && bs[k] < be[k + 1] + hop) bad++;
    }
  ZT_ASSERT_MSG(bad == 0, "%s p=%d m=%d v=%d: %d dependencies broken in time",
                zeroc__pp_kind_name(s->kind), p, m, s->v, bad);
  free(fs), free(fe), free(bs), free(be);
}

/* The bound on (mb, chunk) activation sets alive at once on rank r. */
static int expected_peak(zeroc_pp_kind_t kind, int p, int m, int v, int r) {
  int w = expected_warmup(kind, p, m, v, r);
  if (kind == ZEROC_PP_GPIPE) return m;
  return w < m * v ? w + 1 : m * v;
}

/* One grid point: structure, then the simulator with costs (tf, tb) per chunk. */
static void run_point(zeroc_pp_kind_t kind, int p, int m, int v) {
  zeroc_pp_schedule_t *s = NULL;
  ZT_OK(zeroc__pp_schedule_create(kind, p, m, v, &s));
  if (!s) return;
  CU_ASSERT_EQUAL(s->p, p);
  ZT_OK(zeroc__pp_schedule_check(s));
  check_structure(s);
  /* what the runtime's one-stream-per-message-kind relies on */
  ZT_ASSERT_MSG(zeroc__pp_orders_match(s), "%s p=%d m=%d v=%d: send and receive orders differ",
                zeroc__pp_kind_name(kind), p, m, v);
  static const double costs[][2] = {{1, 1}, {1, 2}};
  for (int c = 0; c < 2; c++) {
    for (int rendezvous = 1; rendezvous >= 0; rendezvous--) {
      zeroc_pp_sim_config_t cfg = {costs[c][0], costs[c][1], 0.0, rendezvous};
      zeroc_pp_sim_t *sim = NULL;
      ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
      if (!sim) continue;
      CU_ASSERT_EQUAL(sim->deadlocked, 0);
      CU_ASSERT_EQUAL(sim->violations, 0);
      check_times(s, sim, 0.0);
      /* Theory, exact here: costs are small integers, so every time is exact in
       * double. Idle per rank (p-1)(tf+tb); makespan (m v + p - 1)(tf+tb). */
      double tf = cfg.tf, tb = cfg.tb, unit = tf + tb;
      double idle = (p - 1) * unit, makespan = (m * v + p - 1) * unit;
      ZT_ASSERT_MSG(sim->makespan == makespan,
                    "%s p=%d m=%d v=%d tf=%g tb=%g %s: makespan %g, "
                    "theory %g",
                    zeroc__pp_kind_name(kind), p, m, v, tf, tb,
                    rendezvous ? "rendezvous" : "buffered", sim->makespan, makespan);
      for (int r = 0; r < p; r++) {
        ZT_ASSERT_MSG(sim->idle[r] == idle,
                      "%s p=%d m=%d v=%d tf=%g tb=%g rank %d: idle %g, "
                      "theory %g",
                      zeroc__pp_kind_name(kind), p, m, v, tf, tb, r, sim->idle[r], idle);
        CU_ASSERT_EQUAL(sim->busy[r], m * v * unit);
        CU_ASSERT_EQUAL(sim->bubble_slots[r], idle / tf);
        /* bubble fraction of the makespan and relative to the ideal m v (tf+tb) */
        CU_ASSERT_DOUBLE_EQUAL(sim->idle[r] / sim->makespan, (double)(p - 1) / (m * v + p - 1),
                               1e-12);
        CU_ASSERT_DOUBLE_EQUAL(sim->idle[r] / sim->busy[r], (double)(p - 1) / (m * v), 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(zeroc__pp_bubble_fraction(p, m, v), sim->idle[r] / sim->makespan,
                               1e-12);
        int peak = expected_peak(kind, p, m, v, r);
        ZT_ASSERT_MSG(sim->peak_live[r] == peak, "%s p=%d m=%d v=%d rank %d: peak %d, want %d",
                      zeroc__pp_kind_name(kind), p, m, v, r, sim->peak_live[r], peak);
        if (kind == ZEROC_PP_1F1B) CU_ASSERT(sim->peak_live[r] <= p);
        if (p == 1) CU_ASSERT_EQUAL(sim->gaps[r], 0);
      }
      CU_ASSERT_EQUAL(zeroc__pp_bubble_time(p, tf, tb), idle);
      zeroc__pp_sim_destroy(sim);
    }
  }
  /* Message time: never a deadlock or a broken dependency (the simulator
   * checks each cross-rank dependency with +tc), and the makespan is at least
   * the critical path of one microbatch, 2 S tf-and-tb plus 2 (S-1) messages. */
  zeroc_pp_sim_config_t cfg = {1.0, 2.0, 0.25, 1};
  zeroc_pp_sim_t *sim = NULL;
  ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
  if (sim) {
    int S = p * v;
    double lower = S * (cfg.tf + cfg.tb) + (p > 1 ? 2 * (S - 1) * cfg.tc : 0);
    CU_ASSERT(sim->makespan >= lower);
    CU_ASSERT(sim->makespan >= m * v * (cfg.tf + cfg.tb) + (p - 1) * (cfg.tf + cfg.tb));
    if (p == 1) CU_ASSERT_EQUAL(sim->makespan, m * v * (cfg.tf + cfg.tb));
    check_times(s, sim, cfg.tc);
    zeroc__pp_sim_destroy(sim);
  }
  zeroc__pp_schedule_destroy(s);
}

static void test_grid_1f1b(void) {
  for (int ip = 0; ip < 5; ip++)
    for (int m = 1; m <= 16; m++) run_point(ZEROC_PP_1F1B, grid_p[ip], m, 1);
}

static void test_grid_interleaved(void) {
  for (int ip = 0; ip < 5; ip++)
    for (int v = 1; v <= 3; v++)
      for (int m = grid_p[ip]; m <= 16; m += grid_p[ip])
        run_point(ZEROC_PP_INTERLEAVED, grid_p[ip], m, v);
}

static void test_grid_gpipe(void) {
  for (int ip = 0; ip < 5; ip++)
    for (int m = 1; m <= 16; m++) run_point(ZEROC_PP_GPIPE, grid_p[ip], m, 1);
}

/* The interleaved bubble in the paper's terms: with TF, TB the time of a rank's
 * whole forward and backward (chunks take TF/v, TB/v), idle = (p-1)(TF+TB)/v. */
static void test_interleaved_cuts_bubble_by_v(void) {
  const double TF = 6, TB = 12; /* divisible by v = 1, 2, 3: exact chunk costs */
  const int p = 4, m = 8;
  for (int v = 1; v <= 3; v++) {
    zeroc_pp_schedule_t *s = NULL;
    ZT_OK(zeroc__pp_schedule_create(v == 1 ? ZEROC_PP_1F1B : ZEROC_PP_INTERLEAVED, p, m, v, &s));
    zeroc_pp_sim_config_t cfg = {TF / v, TB / v, 0.0, 1};
    zeroc_pp_sim_t *sim = NULL;
    ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
    if (sim) {
      for (int r = 0; r < p; r++) {
        ZT_ASSERT_MSG(sim->idle[r] == (p - 1) * (TF + TB) / v, "v=%d rank %d: idle %g, want %g", v,
                      r, sim->idle[r], (p - 1) * (TF + TB) / v);
        CU_ASSERT_EQUAL(sim->busy[r], m * (TF + TB));
      }
      /* relative to the ideal: (p-1)/(v m) */
      CU_ASSERT_DOUBLE_EQUAL(sim->idle[0] / (m * (TF + TB)), (p - 1) / (double)(v * m), 1e-12);
    }
    zeroc__pp_sim_destroy(sim);
    zeroc__pp_schedule_destroy(s);
  }
}

/* A bigger case than the grid, to catch what only shows with many groups. */
static void test_large(void) {
  run_point(ZEROC_PP_INTERLEAVED, 8, 64, 4);
  run_point(ZEROC_PP_1F1B, 16, 48, 1);
}

/* ---- the printer -------------------------------------------------------------------- */

static char *print_to_string(const zeroc_pp_schedule_t *s, unsigned flags) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  ZT_OK(zeroc__pp_schedule_print(f, s, flags));
  fclose(f);
  return buf;
}

static void expect_print(zeroc_pp_kind_t kind, int p, int m, int v, unsigned flags,
                         const char *want) {
  zeroc_pp_schedule_t *s = NULL;
  ZT_OK(zeroc__pp_schedule_create(kind, p, m, v, &s));
  if (!s) return;
  char *got = print_to_string(s, flags);
  ZT_ASSERT_MSG(got && strcmp(got, want) == 0, "%s p=%d m=%d v=%d printed\n%s\nwant\n%s",
                zeroc__pp_kind_name(kind), p, m, v, got ? got : "(null)", want);
  free(got);
  zeroc__pp_schedule_destroy(s);
}

static void test_print(void) {
  /* 1F1B, p=2, m=4: rank 0 warms up with one forward; rank 1 alternates */
  expect_print(ZEROC_PP_1F1B, 2, 4, 1, 0,
               "r0: F0.0 F1.0 B0.0 F2.0 B1.0 F3.0 B2.0 B3.0\n"
               "r1: F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0\n");
  /* with comm: Megatron's send_forward_recv_backward / send_backward_recv_forward */
  expect_print(ZEROC_PP_1F1B, 2, 4, 1, ZEROC_PP_PRINT_COMM,
               "r0: F0.0 Sa0.0>1 F1.0 [Sa1.0>1 Rg0.0<1] B0.0 F2.0 [Sa2.0>1 Rg1.0<1] B1.0 F3.0 "
               "[Sa3.0>1 Rg2.0<1] B2.0 Rg3.0<1 B3.0\n"
               "r1: Ra0.0<0 F0.0 B0.0 [Sg0.0>0 Ra1.0<0] F1.0 B1.0 [Sg1.0>0 Ra2.0<0] F2.0 B2.0 "
               "[Sg2.0>0 Ra3.0<0] F3.0 B3.0 Sg3.0>0\n");
  /* interleaved p=2, m=4, v=2: groups of p microbatches per chunk; rank 0 warms
   * up with 2(p-1) + (v-1)p = 4 forwards, rank 1 with 2 */
  expect_print(ZEROC_PP_INTERLEAVED, 2, 4, 2, 0,
               "r0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 "
               "B3.0\n"
               "r1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 "
               "B3.0\n");
  expect_print(ZEROC_PP_GPIPE, 2, 2, 1, ZEROC_PP_PRINT_COMM,
               "r0: F0.0 Sa0.0>1 F1.0 [Sa1.0>1 Rg1.0<1] B1.0 Rg0.0<1 B0.0\n"
               "r1: Ra0.0<0 F0.0 Ra1.0<0 F1.0 B1.0 Sg1.0>0 B0.0 Sg0.0>0\n");

  char buf[64];
  zeroc_pp_action_t a = {.op = ZEROC_PP_SEND_GRAD, .mb = 3, .chunk = 1, .peer = 0, .peer_chunk = 1};
  zeroc__pp_action_format(buf, sizeof buf, &a);
  CU_ASSERT_STRING_EQUAL(buf, "Sg3.1>0");
  CU_ASSERT_EQUAL(zeroc__pp_schedule_print(NULL, NULL, 0), ZEROC_ERR_INVALID_ARG);
}

/* The Gantt chart of 1F1B p=2, m=4 with tf=1, tb=2, worked out by hand: rank 0
 * waits two slots for B0's gradient, rank 1 idles until F0 arrives and at the end. */
static void test_timeline(void) {
  zeroc_pp_schedule_t *s = NULL;
  ZT_OK(zeroc__pp_schedule_create(ZEROC_PP_1F1B, 2, 4, 1, &s));
  zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
  zeroc_pp_sim_t *sim = NULL;
  ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
  if (!s || !sim) return;
  CU_ASSERT_EQUAL(sim->makespan, 15);
  CU_ASSERT_EQUAL(sim->gaps[0], 2);
  CU_ASSERT_EQUAL(sim->gaps[1], 2);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ZT_OK(zeroc__pp_sim_print_timeline(f, s, sim, 1.0, 4));
  fclose(f);
  const char *want =
      "r0: F0.0 F1.0 .    .    B0.0 B0.0 F2.0 B1.0 B1.0 F3.0 B2.0 B2.0 .    B3.0 B3.0\n"
      "r1: .    F0.0 B0.0 B0.0 F1.0 B1.0 B1.0 F2.0 B2.0 B2.0 F3.0 B3.0 B3.0 .    .\n";
  ZT_ASSERT_MSG(buf && strcmp(buf, want) == 0, "timeline\n%s\nwant\n%s", buf, want);
  free(buf);
  CU_ASSERT_EQUAL(zeroc__pp_sim_print_timeline(stdout, s, sim, 0.0, 4), ZEROC_ERR_INVALID_ARG);
  zeroc__pp_sim_destroy(sim);
  zeroc__pp_schedule_destroy(s);
}

/* ---- deadlocks and hand-made schedules ---------------------------------------------- */

static zeroc_pp_schedule_t *make(zeroc_pp_kind_t kind, int p, int m, int v) {
  zeroc_pp_schedule_t *s = NULL;
  ZT_OK(zeroc__pp_schedule_create(kind, p, m, v, &s));
  return s;
}

static int find(const zeroc_pp_schedule_t *s, int r, int op, int mb, int chunk) {
  for (size_t i = s->offset[r]; i < s->offset[r + 1]; i++)
    if (s->actions[i].op == op && s->actions[i].mb == mb && s->actions[i].chunk == chunk)
      return (int)i;
  return -1;
}

static void test_groups_prevent_deadlock(void) {
  for (int k = 0; k < 2; k++) {
    zeroc_pp_kind_t kind = k ? ZEROC_PP_INTERLEAVED : ZEROC_PP_1F1B;
    zeroc_pp_schedule_t *s = make(kind, 4, 8, k ? 2 : 1);
    if (!s) return;
    zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
    zeroc_pp_sim_t *grouped = NULL, *sim = NULL;
    ZT_OK(zeroc__pp_simulate(s, &cfg, &grouped));

    /* Order inside a group does not matter: reversed groups give the same times. */
    for (size_t i = 0; i < s->offset[s->p]; i++) {
      size_t e = i;
      while (s->actions[e].flags & ZEROC_PP_WITH_NEXT) e++;
      for (size_t a = i, b = e; a < b; a++, b--) {
        zeroc_pp_action_t t = s->actions[a];
        s->actions[a] = s->actions[b];
        s->actions[b] = t;
      }
      for (size_t g = i; g < e; g++) s->actions[g].flags = ZEROC_PP_WITH_NEXT;
      s->actions[e].flags = 0;
      i = e;
    }
    ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
    if (sim && grouped) {
      CU_ASSERT_EQUAL(sim->makespan, grouped->makespan);
      /* only comm actions moved, so every compute keeps its index */
      int same = 1;
      for (size_t i = 0; i < s->offset[s->p]; i++)
        if (!zeroc__pp_is_comm(s->actions[i].op))
          same &= sim->start[i] == grouped->start[i] && sim->end[i] == grouped->end[i];
      ZT_ASSERT_MSG(same, "%s: reversing the groups changed compute times",
                    zeroc__pp_kind_name(kind));
    }
    zeroc__pp_sim_destroy(sim);
    sim = NULL;

    /* Without groups, two neighbours that both send first deadlock on rendezvous... */
    zeroc__pp_schedule_destroy(s);
    s = make(kind, 4, 8, k ? 2 : 1);
    if (!s) break;
    for (size_t i = 0; i < s->offset[s->p]; i++) s->actions[i].flags = 0;
    ZT_OK(zeroc__pp_schedule_check(s));
    CU_ASSERT_EQUAL(zeroc__pp_simulate(s, &cfg, &sim), ZEROC_ERR_INVALID_ARG);
    const char *msg = zeroc_last_error(NULL);
    ZT_ASSERT_MSG(strstr(msg, "deadlocks with rendezvous sends") && strstr(msg, "waits for r"),
                  "message: %s", msg);
    CU_ASSERT_PTR_NOT_NULL(sim);
    if (sim) {
      CU_ASSERT_EQUAL(sim->deadlocked, 1);
      CU_ASSERT_PTR_NOT_NULL(strstr(sim->detail, "r0 #"));
      CU_ASSERT_PTR_NOT_NULL(strstr(sim->detail, "r1 #"));
    }
    zeroc__pp_sim_destroy(sim);
    sim = NULL;
    /* ...and run with buffered sends, as fast as the grouped schedule. */
    cfg.rendezvous = 0;
    ZT_OK(zeroc__pp_simulate(s, &cfg, &sim));
    if (sim && grouped) CU_ASSERT_EQUAL(sim->makespan, grouped->makespan);
    zeroc__pp_sim_destroy(sim);
    zeroc__pp_sim_destroy(grouped);
    zeroc__pp_schedule_destroy(s);
  }
}

/* A valid hand-made schedule whose gradients arrive in another order than they
 * are sent: the checker and the simulator accept it, the order test does not. */
static void test_orders_mismatch(void) {
  enum {
    F = ZEROC_PP_FORWARD,
    B = ZEROC_PP_BACKWARD,
    RA = ZEROC_PP_RECV_ACT,
    SA = ZEROC_PP_SEND_ACT,
    RG = ZEROC_PP_RECV_GRAD,
    SG = ZEROC_PP_SEND_GRAD,
    W = ZEROC_PP_WITH_NEXT
  };
  zeroc_pp_action_t a[] = {
      /* rank 0 */
      {F, 0, 0, 0, -1, -1},
      {SA, 0, 0, 0, 1, 0},
      {F, 0, 1, 0, -1, -1},
      {SA, 0, 1, 0, 1, 0},
      {RG, W, 1, 0, 1, 0},
      {RG, 0, 0, 0, 1, 0},
      {B, 0, 1, 0, -1, -1},
      {B, 0, 0, 0, -1, -1},
      /* rank 1 */
      {RA, 0, 0, 0, 0, 0},
      {F, 0, 0, 0, -1, -1},
      {RA, 0, 1, 0, 0, 0},
      {F, 0, 1, 0, -1, -1},
      {B, 0, 1, 0, -1, -1},
      {B, 0, 0, 0, -1, -1},
      {SG, W, 0, 0, 0, 0},
      {SG, 0, 1, 0, 0, 0},
  };
  size_t off[] = {0, 8, 16};
  zeroc_pp_schedule_t s = {ZEROC_PP_GPIPE, 2, 2, 1, off, a};
  ZT_OK(zeroc__pp_schedule_check(&s));
  zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
  zeroc_pp_sim_t *sim = NULL;
  ZT_OK(zeroc__pp_simulate(&s, &cfg, &sim));
  zeroc__pp_sim_destroy(sim);
  CU_ASSERT_EQUAL(zeroc__pp_orders_match(&s), 0);
  /* in the sent order it matches */
  zeroc_pp_action_t t = a[4];
  a[4] = a[5], a[5] = t;
  a[4].flags = W, a[5].flags = 0;
  ZT_OK(zeroc__pp_schedule_check(&s));
  CU_ASSERT_EQUAL(zeroc__pp_orders_match(&s), 1);
}

/* Rank 0 waits for B0's gradient before sending F0's activation: a cycle that
 * even buffered sends cannot break. */
static void test_deadlock_buffered(void) {
  zeroc_pp_schedule_t *s = make(ZEROC_PP_1F1B, 2, 1, 1);
  if (!s) return;
  /* r0: F0.0 [Sa0.0>1 Rg0.0<1] B0.0 -> F0.0 Rg0.0<1 Sa0.0>1 B0.0 */
  int sa = find(s, 0, ZEROC_PP_SEND_ACT, 0, 0), rg = find(s, 0, ZEROC_PP_RECV_GRAD, 0, 0);
  CU_ASSERT(sa >= 0 && rg == sa + 1);
  if (sa < 0 || rg != sa + 1) goto out;
  zeroc_pp_action_t t = s->actions[sa];
  s->actions[sa] = s->actions[rg];
  s->actions[rg] = t;
  s->actions[sa].flags = s->actions[rg].flags = 0;
  ZT_OK(zeroc__pp_schedule_check(s));
  for (int rendezvous = 0; rendezvous <= 1; rendezvous++) {
    zeroc_pp_sim_config_t cfg = {1, 1, 0, rendezvous};
    zeroc_pp_sim_t *sim = NULL;
    CU_ASSERT_EQUAL(zeroc__pp_simulate(s, &cfg, &sim), ZEROC_ERR_INVALID_ARG);
    if (sim) CU_ASSERT_EQUAL(sim->deadlocked, 1);
    if (sim) CU_ASSERT_PTR_NOT_NULL(strstr(sim->detail, "r0 #1 {Rg0.0<1} waits for r1 #3 Sg0.0>0"));
    zeroc__pp_sim_destroy(sim);
  }
out:
  zeroc__pp_schedule_destroy(s);
}

/* With p = 1 and two chunks, running chunk 1 before chunk 0 passes the
 * structural check (no messages carry the order) but not the simulator's. */
static void test_dependency_violation(void) {
  zeroc_pp_schedule_t *s = make(ZEROC_PP_INTERLEAVED, 1, 1, 2);
  if (!s) return;
  int f0 = find(s, 0, ZEROC_PP_FORWARD, 0, 0), f1 = find(s, 0, ZEROC_PP_FORWARD, 0, 1);
  CU_ASSERT(f0 == 0 && f1 == 1);
  s->actions[f0].chunk = 1;
  s->actions[f1].chunk = 0;
  ZT_OK(zeroc__pp_schedule_check(s));
  zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
  zeroc_pp_sim_t *sim = NULL;
  CU_ASSERT_EQUAL(zeroc__pp_simulate(s, &cfg, &sim), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(zeroc_last_error(NULL), "FORWARD after the previous stage's FORWARD"));
  if (sim) CU_ASSERT_EQUAL(sim->violations, 1);
  zeroc__pp_sim_destroy(sim);
  zeroc__pp_schedule_destroy(s);
}

/* Each broken schedule fails the check with a message naming the problem. */
static void expect_check_error(zeroc_pp_schedule_t *s, const char *needle) {
  CU_ASSERT_EQUAL(zeroc__pp_schedule_check(s), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), needle), "check error '%s' lacks '%s'",
                zeroc_last_error(NULL), needle);
  zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
  zeroc_pp_sim_t *sim = NULL;
  CU_ASSERT_EQUAL(zeroc__pp_simulate(s, &cfg, &sim), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(sim);
  zeroc__pp_schedule_destroy(s);
}

static void test_check_rejects(void) {
  zeroc_pp_schedule_t *s;
  int i;
  /* a duplicated forward (and so a missing one) */
  s = make(ZEROC_PP_1F1B, 2, 4, 1);
  i = find(s, 0, ZEROC_PP_FORWARD, 1, 0);
  s->actions[i].mb = 0;
  expect_check_error(s, "(FORWARD mb 0 chunk 0) appears twice");
  /* a receive posted after the forward it feeds */
  s = make(ZEROC_PP_1F1B, 2, 4, 1);
  i = find(s, 1, ZEROC_PP_RECV_ACT, 0, 0);
  CU_ASSERT_EQUAL(s->actions[i + 1].op, ZEROC_PP_FORWARD);
  {
    zeroc_pp_action_t t = s->actions[i];
    s->actions[i] = s->actions[i + 1];
    s->actions[i + 1] = t;
  }
  expect_check_error(s, "rank 1 posts RECV_ACT of mb 0 (#1) after the compute it feeds (#0)");
  /* the wrong peer */
  s = make(ZEROC_PP_INTERLEAVED, 4, 4, 2);
  i = find(s, 0, ZEROC_PP_RECV_ACT, 0, 1);
  s->actions[i].peer = 1;
  expect_check_error(s, "names peer rank 1 chunk 0; stage 3 is rank 3 chunk 0");
  /* a message from the first stage backwards */
  s = make(ZEROC_PP_1F1B, 2, 2, 1);
  i = find(s, 0, ZEROC_PP_SEND_ACT, 0, 0);
  s->actions[i].op = ZEROC_PP_SEND_GRAD;
  expect_check_error(s, "has no previous stage on another rank");
  /* a dropped receive: the rank count shrinks by one action */
  s = make(ZEROC_PP_1F1B, 2, 2, 1);
  i = find(s, 1, ZEROC_PP_RECV_ACT, 1, 0);
  memmove(&s->actions[i], &s->actions[i + 1], (s->offset[2] - i - 1) * sizeof *s->actions);
  s->actions[i - 1].flags = 0; /* it closed a group */
  s->offset[2]--;
  expect_check_error(s, "the RECV_ACT of mb 1 across stages 0|1 is missing");
  /* WITH_NEXT on a compute action */
  s = make(ZEROC_PP_1F1B, 2, 2, 1);
  s->actions[find(s, 0, ZEROC_PP_FORWARD, 0, 0)].flags = ZEROC_PP_WITH_NEXT;
  expect_check_error(s, "is marked WITH_NEXT; only a comm action");
  /* out-of-range fields */
  s = make(ZEROC_PP_1F1B, 2, 2, 1);
  s->actions[0].mb = 2;
  expect_check_error(s, "is out of range; accepted: mb 0..1, chunk 0..0");
  s = make(ZEROC_PP_1F1B, 2, 2, 1);
  s->actions[0].op = 9;
  expect_check_error(s, "has op 9; accepted: 0..5");
  /* backward before forward on one rank: p=1 runs F0.0 B0.0 F1.0 B1.0 */
  s = make(ZEROC_PP_1F1B, 1, 2, 1);
  s->actions[0].op = ZEROC_PP_BACKWARD;
  s->actions[1].op = ZEROC_PP_FORWARD;
  expect_check_error(s, "runs BACKWARD of mb 0 chunk 0 (#0) before its FORWARD (#1)");
}

/* ---- validation ----------------------------------------------------------------------- */

static void expect_create_error(zeroc_pp_kind_t kind, int p, int m, int v, const char *needle) {
  zeroc_pp_schedule_t *s = (zeroc_pp_schedule_t *)&s; /* must be reset to NULL */
  CU_ASSERT_EQUAL(zeroc__pp_schedule_create(kind, p, m, v, &s), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(s);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), needle), "error '%s' lacks '%s'",
                zeroc_last_error(NULL), needle);
}

static void test_errors(void) {
  expect_create_error(ZEROC_PP_1F1B, 0, 4, 1, "pipeline size p=0; accepted: 1..4096");
  expect_create_error(ZEROC_PP_1F1B, -3, 4, 1, "p=-3");
  expect_create_error(ZEROC_PP_1F1B, 2, 0, 1, "microbatches m=0; accepted: 1..");
  expect_create_error(ZEROC_PP_INTERLEAVED, 2, 4, 0, "chunks per rank v=0; accepted: 1..64");
  expect_create_error(ZEROC_PP_1F1B, 2, 4, 2,
                      "1f1b schedule: chunks per rank v=2; it takes v=1 only");
  expect_create_error(ZEROC_PP_GPIPE, 2, 4, 3, "gpipe schedule: chunks per rank v=3");
  expect_create_error(ZEROC_PP_INTERLEAVED, 4, 6, 2,
                      "microbatches m=6 is not a multiple of the pipeline size p=4; accepted: "
                      "m = k*p (e.g. 4 or 8)");
  expect_create_error(ZEROC_PP_INTERLEAVED, 4, 3, 2,
                      "m=3 is not a multiple of the pipeline size p=4; "
                      "accepted: m = k*p (e.g. 4)");
  expect_create_error(ZEROC_PP_INTERLEAVED, 4096, 4096, 64, "exceeds the limit");
  expect_create_error((zeroc_pp_kind_t)7, 2, 4, 1, "kind 7 is unknown");
  CU_ASSERT_EQUAL(zeroc__pp_schedule_create(ZEROC_PP_1F1B, 2, 4, 1, NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__pp_validate(ZEROC_PP_INTERLEAVED, 3, 9, 3), ZEROC_OK);

  zeroc_pp_kind_t k = ZEROC_PP_GPIPE;
  ZT_OK(zeroc__pp_kind_parse("interleaved", &k));
  CU_ASSERT_EQUAL(k, ZEROC_PP_INTERLEAVED);
  for (int i = 0; i < ZEROC_PP_KIND_COUNT; i++) {
    ZT_OK(zeroc__pp_kind_parse(zeroc__pp_kind_name((zeroc_pp_kind_t)i), &k));
    CU_ASSERT_EQUAL(k, i);
  }
  CU_ASSERT_EQUAL(zeroc__pp_kind_parse("1F1B-x", &k), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL),
                                "pipeline schedule '1F1B-x' is unknown; accepted: 1f1b, "
                                "interleaved, gpipe"));

  /* simulator settings */
  zeroc_pp_schedule_t *s = make(ZEROC_PP_1F1B, 2, 2, 1);
  const zeroc_pp_sim_config_t bad[] = {{0, 1, 0, 1}, {1, -1, 0, 1}, {1, 1, -0.5, 1}, {1, 1, 0, 2}};
  for (int i = 0; i < 4; i++) {
    zeroc_pp_sim_t *sim = NULL;
    CU_ASSERT_EQUAL(zeroc__pp_simulate(s, &bad[i], &sim), ZEROC_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(sim);
    CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "accepted: finite tf > 0, tb > 0"));
  }
  zeroc__pp_schedule_destroy(s);
  zeroc__pp_schedule_destroy(NULL);
  zeroc__pp_sim_destroy(NULL);
}

/* `test_pp_schedule --print KIND P M V [TF TB TC RENDEZVOUS]`: prints the
 * schedule, the simulated timeline and its figures instead of testing (the
 * examples in docs/pp.md come from here). */
static int print_mode(int argc, char **argv) {
  zeroc_pp_kind_t kind;
  if (argc < 4 || zeroc__pp_kind_parse(argv[0], &kind) != ZEROC_OK) {
    fprintf(stderr,
            "usage: test_pp_schedule --print 1f1b|interleaved|gpipe P M V [TF TB TC "
            "RENDEZVOUS]\n%s\n",
            argc >= 1 ? zeroc_last_error(NULL) : "");
    return 2;
  }
  zeroc_pp_sim_config_t cfg = ZEROC_PP_SIM_CONFIG_INIT;
  if (argc > 4) cfg.tf = atof(argv[4]);
  if (argc > 5) cfg.tb = atof(argv[5]);
  if (argc > 6) cfg.tc = atof(argv[6]);
  if (argc > 7) cfg.rendezvous = atoi(argv[7]);
  zeroc_pp_schedule_t *s = NULL;
  zeroc_pp_sim_t *sim = NULL;
  zeroc_result_t r =
      zeroc__pp_schedule_create(kind, atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), &s);
  if (r == ZEROC_OK) {
    printf("%s p=%d m=%d v=%d\n", zeroc__pp_kind_name(kind), s->p, s->m, s->v);
    zeroc__pp_schedule_print(stdout, s, 0);
    printf("with communication:\n");
    zeroc__pp_schedule_print(stdout, s, ZEROC_PP_PRINT_COMM);
    r = zeroc__pp_simulate(s, &cfg, &sim);
  }
  if (r == ZEROC_OK) {
    printf("timeline (tf=%g tb=%g tc=%g, %s sends, one column per %g):\n", cfg.tf, cfg.tb, cfg.tc,
           cfg.rendezvous ? "rendezvous" : "buffered", fmin(cfg.tf, cfg.tb));
    zeroc__pp_sim_print_timeline(stdout, s, sim, fmin(cfg.tf, cfg.tb), 5);
    printf("makespan %g; theory (tc=0) %g\n", sim->makespan,
           (s->m * s->v + s->p - 1) * (cfg.tf + cfg.tb));
    for (int q = 0; q < s->p; q++)
      printf("r%d: busy %g idle %g (%.4f of makespan) bubble slots %g gaps %d peak live %d\n", q,
             sim->busy[q], sim->idle[q], sim->idle[q] / sim->makespan, sim->bubble_slots[q],
             sim->gaps[q], sim->peak_live[q]);
  } else {
    fprintf(stderr, "%s\n", zeroc_last_error(NULL));
  }
  zeroc__pp_sim_destroy(sim);
  zeroc__pp_schedule_destroy(s);
  return r == ZEROC_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print") == 0) return print_mode(argc - 2, argv + 2);
  static const zt_test_t tests[] = {
      {"1f1b grid: structure, deps, no deadlock, peak <= p, bubble = theory", test_grid_1f1b},
      {"interleaved grid: structure, deps, no deadlock, peak, bubble = theory",
       test_grid_interleaved},
      {"gpipe grid: structure, deps, bubble = theory", test_grid_gpipe},
      {"interleaved bubble is (p-1)(TF+TB)/v", test_interleaved_cuts_bubble_by_v},
      {"large schedules", test_large},
      {"printer, p=2 m=4", test_print},
      {"timeline, p=2 m=4", test_timeline},
      {"post-together groups prevent rendezvous deadlock", test_groups_prevent_deadlock},
      {"a cycle deadlocks even with buffered sends", test_deadlock_buffered},
      {"simulator catches a broken dependency", test_dependency_violation},
      {"checker rejects broken schedules", test_check_rejects},
      {"validation errors", test_errors},
      {"send and receive orders per message kind", test_orders_mismatch},
      ZT_END,
  };
  return zt_run("pp_schedule", tests);
}
