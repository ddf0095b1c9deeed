/*
 * pp/schedule.h - pipeline-parallel schedules as plain per-rank action lists
 * (GPipe, 1F1B, interleaved 1F1B), a structural checker, a printer and a
 * discrete-event simulator. Pure C, no MPI: the planner and the runtime share it.
 *
 * Terms. p pipeline ranks, m microbatches per step, v model chunks per rank.
 * The model is cut into S = p*v stages; chunk c of rank r is model stage
 * s = c*p + r, so activations flow rank 0 -> 1 -> ... -> p-1 and, with v > 1,
 * wrap from rank p-1 chunk c to rank 0 chunk c+1. Every (microbatch, stage) has
 * exactly one FORWARD and one BACKWARD.
 *
 * Communication. An activation crosses each stage boundary once per
 * microbatch (SEND_ACT on the producer, RECV_ACT on the consumer) and its
 * gradient crosses back once (SEND_GRAD / RECV_GRAD). Each comm action names the
 * peer rank, the microbatch and the chunks on both sides. With p = 1 every
 * boundary is between two chunks of the same rank: the handoff is a local buffer
 * and no comm action is emitted.
 *
 * Placement (what the generators emit). A rank's compute list is cut into
 * rounds: one compute for gpipe and 1f1b; for interleaved one forward in
 * warm-up, a forward+backward pair in the steady phase, one backward in
 * cool-down. Between two rounds sits one post-together group: the sends of what
 * the round produced, then the receives of what the next round consumes; the
 * receives of round 0 come first. In 1F1B steady state this is Megatron's
 * send_forward_recv_backward / send_backward_recv_forward; for interleaved it is
 * Megatron's four-way send_forward_backward_recv_forward_backward. A receive may
 * come well before the compute that uses it, so a runtime keys received tensors
 * by (mb, chunk).
 *
 * Post-together semantics (ZEROC_PP_WITH_NEXT). A maximal run of comm actions
 * in which every action but the last carries ZEROC_PP_WITH_NEXT is a group: the
 * runtime posts all of them at once (isend/irecv, or inside one
 * ncclGroupStart/End), then waits for all of them; the order inside a group does
 * not matter. A comm action without the flag is a group of one. Compute actions
 * never carry it. A send without its partner receive posted together would
 * deadlock on blocking rendezvous streams when both neighbours send first; the
 * group is what lets a runtime with blocking FIFO streams avoid that.
 */
#ifndef ZEROC_PP_SCHEDULE_H
#define ZEROC_PP_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zeroc/result.h"

typedef enum zeroc_pp_kind {
  ZEROC_PP_GPIPE = 0,   /* all forwards, then all backwards (v = 1) */
  ZEROC_PP_1F1B,        /* PipeDream-Flush / Megatron non-interleaved (v = 1) */
  ZEROC_PP_INTERLEAVED, /* Megatron virtual pipeline: v chunks per rank, m % p == 0 */
  ZEROC_PP_KIND_COUNT
} zeroc_pp_kind_t;

typedef enum zeroc_pp_op {
  ZEROC_PP_FORWARD = 0,
  ZEROC_PP_BACKWARD,
  ZEROC_PP_RECV_ACT,  /* input activation of (mb, chunk) from the previous stage */
  ZEROC_PP_SEND_ACT,  /* output activation of (mb, chunk) to the next stage */
  ZEROC_PP_RECV_GRAD, /* gradient of (mb, chunk)'s output from the next stage */
  ZEROC_PP_SEND_GRAD, /* gradient of (mb, chunk)'s input to the previous stage */
  ZEROC_PP_OP_COUNT
} zeroc_pp_op_t;

/* Action flag: posted together with the next action of the same rank (see above). */
#define ZEROC_PP_WITH_NEXT 1u

typedef struct zeroc_pp_action {
  uint8_t op;         /* zeroc_pp_op_t */
  uint8_t flags;      /* ZEROC_PP_WITH_NEXT */
  int32_t mb;         /* microbatch, 0..m-1 */
  int32_t chunk;      /* this rank's chunk the action belongs to, 0..v-1 */
  int32_t peer;       /* comm: the other pipeline rank; -1 for compute */
  int32_t peer_chunk; /* comm: the other rank's chunk (its stage is ours +-1); -1 for compute */
} zeroc_pp_action_t;

/* A schedule: the action list of each rank, in execution order. Plain data:
 * tests and tools may build or edit one by hand and run the checker on it. */
typedef struct zeroc_pp_schedule {
  zeroc_pp_kind_t kind;
  int p, m, v;
  size_t *offset;             /* (p+1): rank r's actions are actions[offset[r] .. offset[r+1]) */
  zeroc_pp_action_t *actions; /* (offset[p]) */
} zeroc_pp_schedule_t;

static inline int zeroc__pp_is_comm(int op) {
  return op >= ZEROC_PP_RECV_ACT && op < ZEROC_PP_OP_COUNT;
}
static inline int zeroc__pp_is_send(int op) {
  return op == ZEROC_PP_SEND_ACT || op == ZEROC_PP_SEND_GRAD;
}
/* Model stage of `chunk` on `rank`. */
static inline int zeroc__pp_stage(const zeroc_pp_schedule_t *s, int rank, int chunk) {
  return chunk * s->p + rank;
}

/* "gpipe", "1f1b", "interleaved" (the --pp-schedule values) <-> kind. The parse
 * error names the accepted values. */
zeroc_result_t zeroc__pp_kind_parse(const char *name, zeroc_pp_kind_t *kind);
const char *zeroc__pp_kind_name(zeroc_pp_kind_t kind);

/* Checks (kind, p, m, v) without building anything. ZEROC_ERR_INVALID_ARG when
 * p, m or v < 1 (or above the limits p <= 4096, v <= 64, m <= 1<<20,
 * p*v*m <= 1<<24), v != 1 for gpipe or 1f1b, or m % p != 0 for interleaved. */
zeroc_result_t zeroc__pp_validate(zeroc_pp_kind_t kind, int p, int m, int v);

/* Warm-up forwards of rank r before its first backward (the steady phase's first
 * forward not counted): gpipe m*v; 1f1b min(p-r-1, m); interleaved
 * min(2(p-r-1) + (v-1)p, m*v) (Megatron's formula). Arguments must validate. */
int zeroc__pp_warmup(zeroc_pp_kind_t kind, int p, int m, int v, int r);

/* Builds the schedule of `kind` for p ranks, m microbatches, v chunks per rank.
 * Errors: those of zeroc__pp_validate, ZEROC_ERR_NOMEM. Free with _destroy. */
zeroc_result_t zeroc__pp_schedule_create(zeroc_pp_kind_t kind, int p, int m, int v,
                                         zeroc_pp_schedule_t **out);
void zeroc__pp_schedule_destroy(zeroc_pp_schedule_t *s);

/* The most micro-batches of one chunk alive at once on rank r (from its first
 * action to the end of its backward): the activation slots the runtime gives
 * each chunk. *contiguous is set when, per chunk, micro-batches start and
 * finish in increasing order, so the alive ones are consecutive and slot
 * mb % W never holds two of them (else *width is m). Errors: ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__pp_alive_width(const zeroc_pp_schedule_t *s, int r, int *width,
                                     int *contiguous);

/* Rank r's actions and their count. */
static inline const zeroc_pp_action_t *zeroc__pp_rank_actions(const zeroc_pp_schedule_t *s, int r,
                                                              size_t *n) {
  *n = s->offset[r + 1] - s->offset[r];
  return s->actions + s->offset[r];
}

/* Structural check of any schedule (generated or hand-made): every field in
 * range; exactly one FORWARD and one BACKWARD per (mb, stage), each on the rank
 * and chunk that own the stage; with p > 1, exactly one SEND/RECV pair per
 * (direction, mb, boundary), with peers and chunks that agree on both sides; a
 * rank's RECV_ACT before its FORWARD, SEND_ACT after it, RECV_GRAD before its
 * BACKWARD, SEND_GRAD after it, and FORWARD before BACKWARD of the same
 * (mb, chunk); WITH_NEXT only between two comm actions. Returns
 * ZEROC_ERR_INVALID_ARG naming the first offending action. Does not look for
 * deadlocks: that is the simulator's job. */
zeroc_result_t zeroc__pp_schedule_check(const zeroc_pp_schedule_t *s);

/* A message tag for comm action `a` of rank `rank`, equal on sender and
 * receiver and unique within one step: ((mb * (S-1) + boundary) * 2 + dir),
 * boundary b between stages b and b+1, dir 0 activations, 1 gradients. In
 * [0, 2*m*(S-1)); -1 for a compute action. */
int64_t zeroc__pp_action_tag(const zeroc_pp_schedule_t *s, int rank, const zeroc_pp_action_t *a);

/* 1 when, for every rank and each direction, the rank's sends to its
 * neighbour (activations to r+1, gradients to r-1, mod p) come in the order of
 * that neighbour's receives of the same kind: then one FIFO stream per message
 * kind can carry a step without deadlock however far compute runs ahead (the
 * runtime relies on it, pp/pipeline.c). Every generated schedule has it. */
int zeroc__pp_orders_match(const zeroc_pp_schedule_t *s);

/* ---- printing ------------------------------------------------------------------ */

/* Printer flag: show comm actions (otherwise only FORWARD/BACKWARD). */
#define ZEROC_PP_PRINT_COMM 1u

/* The compact name of one action: F<mb>.<chunk>, B<mb>.<chunk>, and for comm
 * Ra (recv act), Sa (send act), Rg (recv grad), Sg (send grad) with the peer:
 * "Ra3.0<1" receives mb 3's activation for chunk 0 from rank 1; "Sg3.1>0" sends
 * mb 3's input gradient of chunk 1 to rank 0. Returns the snprintf length. */
int zeroc__pp_action_format(char *buf, size_t n, const zeroc_pp_action_t *a);

/* One line per rank, "r<rank>: " then the actions separated by single spaces;
 * with ZEROC_PP_PRINT_COMM a post-together group is bracketed: "[Sa0.0>1 Rg0.0<1]".
 * Errors: ZEROC_ERR_IO when writing fails. */
zeroc_result_t zeroc__pp_schedule_print(FILE *f, const zeroc_pp_schedule_t *s, unsigned flags);

/* ---- simulation ---------------------------------------------------------------- */

typedef struct zeroc_pp_sim_config {
  double tf;      /* time of one FORWARD of one chunk (> 0) */
  double tb;      /* time of one BACKWARD of one chunk (> 0) */
  double tc;      /* time a message takes, from when both sides may move it (>= 0) */
  int rendezvous; /* 1: a send completes only when its receive is posted (blocking
                     FIFO streams, NCCL); 0: sends are buffered and complete at once */
} zeroc_pp_sim_config_t;
#define ZEROC_PP_SIM_CONFIG_INIT                                                                   \
  { 1.0, 2.0, 0.0, 1 }

/*
 * Simulation model. Each rank runs its list in order and blocks on each step: a
 * compute action takes tf or tb; a post-together group is posted at the rank's
 * current time and completes when all its members have. With rendezvous a
 * matched send/recv pair completes at max(post times) + tc; buffered, a send
 * completes when posted and a receive at max(its post, send's post + tc).
 */
typedef struct zeroc_pp_sim {
  int p;
  double makespan;      /* when the last rank finishes */
  double *busy;         /* (p) compute time per rank */
  double *idle;         /* (p) makespan - busy */
  double *bubble_slots; /* (p) idle / tf: idle time counted in forward slots */
  int *gaps;            /* (p) separate idle intervals (leading, between, trailing) */
  int *peak_live;       /* (p) most (mb, chunk) activation sets alive at once: from the
                           start of FORWARD to the end of BACKWARD of that (mb, chunk) */
  double *start;        /* (actions) compute start, comm post time; -1 if never reached */
  double *end;          /* (actions) compute end, comm completion; -1 if never reached */
  int deadlocked;       /* 1 when some rank could not finish */
  int violations;       /* dependencies broken in time (see zeroc__pp_simulate) */
  char detail[768];     /* deadlock: the stuck groups; else the first violation; else "" */
} zeroc_pp_sim_t;

/*
 * Runs schedule `s` (checked first with zeroc__pp_schedule_check) under `cfg`
 * and returns the result in *out (free with zeroc__pp_sim_destroy); *out is
 * filled whenever the schedule passed the check, even on a deadlock. Checks
 * every dependency in time: FORWARD (mb, s) starts after FORWARD (mb, s-1)
 * ends, BACKWARD (mb, s) after FORWARD (mb, s) and after BACKWARD (mb, s+1),
 * plus tc when the two are on different ranks.
 * Errors: ZEROC_ERR_INVALID_ARG for a bad cfg or a schedule failing the check,
 * or when it deadlocks (the message names every stuck group and what it waits
 * for) or violates a dependency; ZEROC_ERR_NOMEM.
 */
zeroc_result_t zeroc__pp_simulate(const zeroc_pp_schedule_t *s, const zeroc_pp_sim_config_t *cfg,
                                  zeroc_pp_sim_t **out);
void zeroc__pp_sim_destroy(zeroc_pp_sim_t *sim);

/* A Gantt chart of a finished simulation: one line per rank, one column of
 * `width` characters per `cell` time units, holding the FORWARD/BACKWARD label
 * running at the start of that cell (or "." when idle). Meant for costs that are
 * multiples of `cell`. Errors: ZEROC_ERR_INVALID_ARG (cell <= 0, width < 1, a
 * deadlocked sim), ZEROC_ERR_IO. */
zeroc_result_t zeroc__pp_sim_print_timeline(FILE *f, const zeroc_pp_schedule_t *s,
                                            const zeroc_pp_sim_t *sim, double cell, int width);

/* Theory for equal stages and zero message time. The idle time of every rank
 * over one step is (p-1)(tf+tb) with tf, tb the per-chunk times, i.e.
 * (p-1)(TF+TB)/v with TF = v*tf the time of the rank's whole forward; the
 * makespan is (m*v + p - 1)(tf+tb), so the idle fraction of it is
 * (p-1)/(m*v + p - 1) and the bubble relative to the ideal m*v*(tf+tb) is
 * (p-1)/(m*v). The generated schedules meet this exactly, m < p included, with
 * rendezvous or buffered sends (asserted over the test grid for tf, tb in {1, 2});
 * with tc > 0 each stage boundary on the critical path adds message time
 * (docs/pp.md has figures). */
double zeroc__pp_bubble_time(int p, double tf, double tb);
double zeroc__pp_bubble_fraction(int p, int m, int v);

/* ---- shared by the checker and the simulator ----------------------------------- */

/* Where each action of a checked schedule sits, by global action index. */
typedef struct zeroc_pp_index {
  int S;         /* stages, p*v */
  size_t n;      /* actions */
  int64_t *fpos; /* (m*S) FORWARD of (mb, stage) at [mb*S + stage] */
  int64_t *bpos; /* (m*S) BACKWARD */
  int64_t
      *comm[4];   /* (m*(S-1)) RECV_ACT, SEND_ACT, RECV_GRAD, SEND_GRAD at [mb*(S-1) + boundary] */
  int64_t *match; /* (n) the partner of each comm action, -1 for compute */
  int *rank;      /* (n) the rank of each action */
} zeroc_pp_index_t;

/* Checks `s` as zeroc__pp_schedule_check does and, when it passes, fills *ix
 * (free with zeroc__pp_index_free, also safe after a failure). */
zeroc_result_t zeroc__pp_index_build(const zeroc_pp_schedule_t *s, zeroc_pp_index_t *ix);
void zeroc__pp_index_free(zeroc_pp_index_t *ix);

#endif
