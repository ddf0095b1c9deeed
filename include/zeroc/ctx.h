/*
 * zeroc/ctx.h - the context: MPI, the process mesh, the device, the topology.
 *
 * zeroc_ctx_create() initialises MPI if the caller has not (thread level
 * MULTIPLE), lays out the mesh and creates its groups, binds the rank to its
 * cores with hwloc and opens the device. zeroc_ctx_finalize() is the collective
 * shutdown, zeroc_ctx_destroy() the local cleanup, zeroc_ctx_abort() the way
 * out when a peer is lost.
 *
 * MPI: when zeroc initialised it, zeroc finalizes it, in the zeroc_ctx_finalize
 * of the last live context (nothing of zeroc uses it after that, and MPI cannot
 * start twice: a later zeroc_ctx_create fails with ZEROC_ERR_MPI). A create that
 * fails leaves MPI up, so a program may try again; one that ends without a
 * context then has MPI finalized at exit. MPI the program initialised is the
 * program's to finalize. Create and finalize contexts from one thread.
 *
 * Every function here checks its handle: NULL, or a context already finalized
 * or destroyed (its magic is cleared), gives ZEROC_ERR_INVALID_ARG, or the
 * "unknown" value a query names, with a one-line message in
 * zeroc_last_error(NULL), never a crash.
 */
#ifndef ZEROC_CTX_H
#define ZEROC_CTX_H

#include <stdint.h>
#include <stdio.h>

#include "zeroc/export.h"
#include "zeroc/mem.h"
#include "zeroc/mesh.h"
#include "zeroc/result.h"
#include "zeroc/types.h" /* zeroc_device_kind_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_ctx zeroc_ctx_t;

/* Marks an initialised config struct; an uninitialised one is rejected. */
#define ZEROC_CONFIG_MAGIC 0x7a65726fu /* "zero" */

/*
 * The context's settings. Initialise with ZEROC_CTX_CONFIG_INIT: every field
 * starts "unset" (0, or -1 where 0 is a value one may ask for; the value after
 * the colon is what zeroc_ctx_create then uses), so a default can change
 * without recompiling the caller. A field the caller sets keeps its meaning.
 */
typedef struct zeroc_ctx_config {
  size_t size;                /* sizeof(zeroc_ctx_config_t), set by the initializer */
  uint32_t magic;             /* ZEROC_CONFIG_MAGIC */
  zeroc_device_kind_t device; /* AUTO (unset): cuda when a GPU is visible, else cpu */
  int tp, pp, hsdp;           /* mesh sizes; 0 (unset): 1. dp = world / (tp x cp x pp) */
  double comm_timeout_s;      /* a collective waiting longer aborts; 0: ZEROC_COMM_TIMEOUT or 300 */
  int bind;                   /* bind rank to cores: 1 yes, 0 no; -1: ZEROC_BIND or yes */
  int threads;                /* compute threads per rank; 0: from the topology / ZEROC_THREADS */
  int gpu;                    /* GPU ordinal; -1: nearest to the rank's cores (local rank) */
  const void *mpi_comm;       /* an MPI_Comm* whose ranks form this context's world (e.g. to
                                 run zeroc on part of a job); NULL: MPI_COMM_WORLD */
  int cp;                     /* context-parallel size (the sequence split); 0 (unset): 1 */
} zeroc_ctx_config_t;

/* Every field "unset" (see above); the library resolves them at create. */
#define ZEROC_CTX_CONFIG_INIT                                                    \
  { sizeof(zeroc_ctx_config_t), ZEROC_CONFIG_MAGIC, ZEROC_DEVICE_AUTO, 0, 0, 0, 0.0, -1, 0, -1, NULL, 0 }

/*
 * Creates a context on MPI_COMM_WORLD (or cfg->mpi_comm).
 *   ctx: receives the handle; cfg: an initialised config (ZEROC_CTX_CONFIG_INIT;
 *   NULL: every field unset, the same).
 * Returns ZEROC_ERR_INVALID_ARG for a bad config or a mesh that does not divide
 * the world (the same error on every rank), ZEROC_ERR_MPI, ZEROC_ERR_NODEVICE when
 * cuda is asked for without a GPU, ZEROC_ERR_CUDA / _NCCL, ZEROC_ERR_NOMEM.
 * Collective over that communicator.
 */
ZEROC_API zeroc_result_t zeroc_ctx_create(zeroc_ctx_t **ctx, const zeroc_ctx_config_t *cfg);

/* Collective shutdown: waits for every rank, frees groups, and calls
 * MPI_Finalize when zeroc initialised MPI and this was the last live context
 * (see above). Then destroys `ctx`. finalize(NULL) does nothing.
 * Refuses, on every rank alike and leaving the context as it was, while a
 * model built on it (zeroc_shard, also inside a GPT, a DLRM or a pipeline) is
 * alive on any rank: ZEROC_ERR_INVALID_ARG naming how many; destroy them first.
 * ZEROC_ERR_INVALID_ARG for a context already finalized or destroyed. */
ZEROC_API zeroc_result_t zeroc_ctx_finalize(zeroc_ctx_t *ctx);

/* Local cleanup without talking to other ranks. destroy(NULL) does nothing;
 * a second destroy is said in zeroc_last_error(NULL), not freed twice. With
 * models still alive on it (an error path), the handle is dead at once but its
 * memory is freed with the last of those models' zeroc_model_destroy. */
ZEROC_API void zeroc_ctx_destroy(zeroc_ctx_t *ctx);

/* Aborts every rank of the job (MPI_Abort) after printing `why` on this rank.
 * For programs, after an error such as ZEROC_ERR_TIMEOUT; never returns. */
ZEROC_API void zeroc_ctx_abort(zeroc_ctx_t *ctx, int code, const char *why);

/*
 * Agreement: every rank passes its own result; every rank gets ZEROC_OK only
 * if all passed ZEROC_OK. Otherwise the lowest failing rank's message is
 * shared: that rank gets its own result back, the others ZEROC_ERR_REMOTE with
 * "rank R failed: <message>". Collective over the world (with the timeout), so
 * a failure on one rank never leaves the others waiting.
 */
ZEROC_API zeroc_result_t zeroc_ctx_agree(zeroc_ctx_t *ctx, zeroc_result_t r);

/* *v becomes the maximum of every rank's *v. Collective over the world. */
ZEROC_API zeroc_result_t zeroc_ctx_max_i64(zeroc_ctx_t *ctx, int64_t *v);

/* The most doubles one zeroc_ctx_allreduce takes. */
#define ZEROC_ALLREDUCE_MAX (1 << 24)

/*
 * Reduces `n` host doubles `v` over the ranks of one of the context's groups
 * (zeroc/mesh.h: ZEROC_GROUP_WORLD, _DP for the data-parallel ranks, _TP, ...):
 * on return every rank of the group holds the result in `v`. For a few scalars
 * (an evaluation's loss and token count, a metric); it runs on the host, through
 * MPI on the group's communicator, on every device kind (NCCL contexts too),
 * and waits for nothing queued on a device stream.
 *   ctx: a live context; group: a ZEROC_GROUP_* below ZEROC_GROUP_COUNT;
 *   v: n doubles of host memory; n: 1..ZEROC_ALLREDUCE_MAX;
 *   op: ZEROC_SUM, ZEROC_AVG (the sum divided by the group's size), ZEROC_MAX
 *   or ZEROC_MIN.
 * Collective over the group: each of its ranks calls it with the same group,
 * n and op (a rank that does not come makes the others fail with
 * ZEROC_ERR_TIMEOUT after the context's timeout).
 * Returns ZEROC_ERR_INVALID_ARG naming the argument (a NULL or dead ctx, a
 * group, n or op out of range, a NULL v; v is left unchanged), ZEROC_ERR_MPI,
 * ZEROC_ERR_TIMEOUT.
 */
ZEROC_API zeroc_result_t zeroc_ctx_allreduce(zeroc_ctx_t *ctx, zeroc_group_kind_t group, double *v,
                                             int n, zeroc_redop_t op);

/* The mesh of this context (never NULL for a live ctx). */
ZEROC_API const zeroc_mesh_info_t *zeroc_ctx_mesh(const zeroc_ctx_t *ctx);

/* The device actually in use (cpu or cuda). */
ZEROC_API zeroc_device_kind_t zeroc_ctx_device(const zeroc_ctx_t *ctx);

/* The dense bf16 peak of the device in TFLOP/s (0 when unknown, e.g. cpu). */
ZEROC_API double zeroc_ctx_peak_tflops(const zeroc_ctx_t *ctx);

/* Node-local rank and number of ranks on this node. */
ZEROC_API void zeroc_ctx_local(const zeroc_ctx_t *ctx, int *local_rank, int *local_size);

/* The communication timeout in seconds. */
ZEROC_API double zeroc_ctx_comm_timeout(const zeroc_ctx_t *ctx);

/* A copy of the memory accountant's figures. */
ZEROC_API void zeroc_ctx_memory(const zeroc_ctx_t *ctx, zeroc_mem_stats_t *out);

/* Resets the peak figures to the current ones (e.g. after initialisation). */
ZEROC_API void zeroc_ctx_memory_reset_peak(zeroc_ctx_t *ctx);

/* Writes one line per rank (gathered to rank 0) describing the binding:
 * host, local rank, cores, NUMA node, threads, GPU. Collective. */
ZEROC_API zeroc_result_t zeroc_ctx_print_topology(zeroc_ctx_t *ctx, FILE *out);

/* Times the world's all-gather and reduce-scatter of `bytes` (fp32) per rank on
 * the context's device and communicators: the best of `rounds` after one
 * warm-up round, in seconds, the same numbers on every rank to the clock's
 * precision. Collective. Returns ZEROC_ERR_INVALID_ARG (bytes outside 4..2^40,
 * rounds outside 1..1000), ZEROC_ERR_NOMEM and the collectives' errors. */
ZEROC_API zeroc_result_t zeroc_ctx_probe_collectives(zeroc_ctx_t *ctx, size_t bytes, int rounds,
                                           double *allgather_s, double *reduce_scatter_s);

/* The detailed message of the last failure: the context's when `ctx` is not
 * NULL and it has one, else the calling thread's. Never NULL ("" if none). */
ZEROC_API const char *zeroc_last_error(const zeroc_ctx_t *ctx);

#ifdef __cplusplus
}
#endif
#endif
