/*
 * runtime/runtime.h - what the layers above the context (shard, tp, pp,
 * model, persist, train, apps) may ask of it. They never read the context's
 * fields: they ask here for a group, the device, the accountant, the fault
 * injection handle, or to note a phase on the watchdog's board.
 */
#ifndef ZEROC_RUNTIME_RUNTIME_H
#define ZEROC_RUNTIME_RUNTIME_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/mem.h"
#include "device/device.h"
#include "offload/offload.h"
#include "zeroc/ctx.h"
#include "zeroc/mesh.h"

/* Records the calling thread's error text as the context's last error when
 * `r` is a failure (and `ctx` not NULL), and returns `r`: every public
 * function that takes a context, or an object holding one, ends with
 * `return zeroc__ctx_ret(ctx, r)`, so that zeroc_last_error(ctx) names its
 * failure (include/zeroc/result.h states the contract). A success leaves the
 * recorded text as it is. */
zeroc_result_t zeroc__ctx_ret(zeroc_ctx_t *ctx, zeroc_result_t r);

/* A CUDA-aware MPI opens a context on the current device inside MPI_Init: device
 * 0 for every rank of the node unless one is chosen first. This chooses it, as
 * zeroc_ctx_create will (cfg's gpu, else the launcher's node-local rank from its
 * environment, modulo the GPUs), and makes it current; zeroc_ctx_create calls it
 * before it starts MPI, and a program that starts MPI itself (zeroc bench) calls
 * it first. Nothing for the cpu device, once MPI is up, or without a launcher's
 * local rank; a failure leaves the choice to zeroc_ctx_create, after MPI_Init. */
void zeroc__ctx_select_gpu_before_mpi(const zeroc_ctx_config_t *cfg);
/* Replaces the context's last-error text (a message that must outlive a
 * clean-up which may fail in its own way). */
void zeroc__ctx_error_set(zeroc_ctx_t *ctx, const char *msg);

/* 1 when `ctx` is a live context (not NULL, not finalized or destroyed). */
int zeroc__ctx_alive(const zeroc_ctx_t *ctx);
/* ZEROC_OK for a live context, else ZEROC_ERR_INVALID_ARG with a message
 * naming `fn` (NULL, or a context already finalized or destroyed). */
zeroc_result_t zeroc__ctx_check(const zeroc_ctx_t *ctx, const char *fn);
/* A model built on `ctx` comes (+1) or goes (-1). zeroc_ctx_finalize refuses
 * while any is alive; a context zeroc_ctx_destroy left to its models is freed
 * when the last goes. Local. */
void zeroc__ctx_models(zeroc_ctx_t *ctx, int delta);

/* The context's group of a kind (never NULL for a live ctx). */
zeroc_group_t *zeroc__ctx_group(zeroc_ctx_t *ctx, zeroc_group_kind_t kind);
/* The device of a context. */
zeroc_device_t *zeroc__ctx_device(zeroc_ctx_t *ctx);
/* The device kind the context's config asked for (ZEROC_DEVICE_AUTO when unset),
 * beside zeroc_ctx_device's, the one in use. */
zeroc_device_kind_t zeroc__ctx_device_asked(const zeroc_ctx_t *ctx);
/* The memory accountant of a context. */
zeroc__mem_t *zeroc__ctx_mem(zeroc_ctx_t *ctx);
/* What device allocations need: the device, the accountant and the cap. */
const zeroc__devmem_t *zeroc__ctx_devmem(zeroc_ctx_t *ctx);
/* What a pinned pool needs (zeroc__pinned_pool_create); lives as long as ctx. */
const zeroc__pool_env_t *zeroc__ctx_pool_env(zeroc_ctx_t *ctx);
/* The test-only ZEROC_FAULT specs (core/fault.h); NULL when nothing is armed. */
struct zeroc__fault *zeroc__ctx_fault(zeroc_ctx_t *ctx);
/* zeroc__fault_hit with the context's faults and world rank; 0 at once when
 * nothing is armed. */
int zeroc__ctx_fault_at(zeroc_ctx_t *ctx, const char *point, uint64_t step, double *value);
#define ZEROC_FAULT_AT(ctx, point, step, value) zeroc__ctx_fault_at((ctx), (point), (step), (value))

/* Records on the context's watchdog board what this rank is doing now
 * ("forward unit 3"), for other ranks' hang messages. NULL ctx: nothing. */
void zeroc__watchdog_phase(zeroc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
