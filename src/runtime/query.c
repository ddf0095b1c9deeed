/*
 * runtime/query.c - what a live context answers: the world-wide agreement,
 * maxima and the public all-reduce of host scalars, the public queries (mesh, device, memory,
 * topology) and the internal accessors of runtime/runtime.h through which the layers above reach
 * its parts without reading its fields.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/context.h"

zeroc_result_t zeroc_ctx_agree(zeroc_ctx_t *ctx, zeroc_result_t r) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_agree"));
  zeroc_group_t *w = ctx->groups[ZEROC_GROUP_WORLD];
  char saved[ZEROC_ERRMSG_MAX];
  snprintf(saved, sizeof saved, "%s", zeroc__tls_error());
  int32_t first = r != ZEROC_OK ? ctx->mesh.rank : ctx->mesh.world;
  zeroc_result_t e = zeroc__allreduce_host(w, &first, 1, ZEROC_INT32, ZEROC_MIN);
  if (e != ZEROC_OK) return zeroc__ctx_ret(ctx, e);
  zeroc__tls_error_set(saved);
  if (first == ctx->mesh.world) return ZEROC_OK;
  /* The message travels as a sum of bytes that are zero everywhere but on
   * the failing rank: an all-reduce polled with the timeout, where a blocking
   * broadcast would hang if that rank died right after the vote. */
  uint8_t msg[ZEROC_ERRMSG_MAX] = {0};
  if (ctx->mesh.rank == first) snprintf((char *)msg, sizeof msg, "%s", saved);
  e = zeroc__allreduce_host(w, msg, sizeof msg, ZEROC_UINT8, ZEROC_SUM);
  if (e != ZEROC_OK) return zeroc__ctx_ret(ctx, e);
  msg[sizeof msg - 1] = 0;
  zeroc__tls_error_set(saved);
  if (r != ZEROC_OK) return zeroc__ctx_ret(ctx, r);
  return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_REMOTE, "rank %d failed: %s", first, (char *)msg));
}

zeroc_result_t zeroc_ctx_max_i64(zeroc_ctx_t *ctx, int64_t *v) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_max_i64"));
  if (!v)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ctx_max_i64: v is NULL"));
  return zeroc__ctx_ret(ctx, zeroc__allreduce_host(ctx->groups[ZEROC_GROUP_WORLD], v, 1, ZEROC_INT64,
                                                   ZEROC_MAX));
}

zeroc_result_t zeroc_ctx_allreduce(zeroc_ctx_t *ctx, zeroc_group_kind_t group, double *v, int n,
                                   zeroc_redop_t op) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_allreduce"));
  zeroc_result_t r = ZEROC_OK;
  if ((int)group < 0 || group >= ZEROC_GROUP_COUNT)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                   "zeroc_ctx_allreduce: group %d is not a ZEROC_GROUP_* (0..%d)", (int)group,
                   ZEROC_GROUP_COUNT - 1);
  else if (!v)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ctx_allreduce: v is NULL");
  else if (n < 1 || n > ZEROC_ALLREDUCE_MAX)
    r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ctx_allreduce: n %d; accepted 1..%d", n,
                   ZEROC_ALLREDUCE_MAX);
  else if ((int)op < 0 || op >= ZEROC_REDOP_COUNT)
    r = ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "zeroc_ctx_allreduce: op %d; accepted ZEROC_SUM, ZEROC_AVG, ZEROC_MAX, ZEROC_MIN", (int)op);
  /* host doubles over MPI on the group's own communicator, whatever the device:
   * nothing waits for the device stream, and NCCL contexts need no device buffer */
  if (r == ZEROC_OK) r = zeroc__allreduce_host(ctx->groups[group], v, (size_t)n, ZEROC_FP64, op);
  return zeroc__ctx_ret(ctx, r);
}

/* The queries: a dead handle answers the "unknown" value and says why in
 * zeroc_last_error(NULL). */
#define DEAD(ctx, fn) (zeroc__ctx_check((ctx), (fn)) != ZEROC_OK)

const zeroc_mesh_info_t *zeroc_ctx_mesh(const zeroc_ctx_t *ctx) {
  return DEAD(ctx, "zeroc_ctx_mesh") ? NULL : &ctx->mesh;
}

zeroc_device_kind_t zeroc_ctx_device(const zeroc_ctx_t *ctx) {
  return DEAD(ctx, "zeroc_ctx_device") ? ZEROC_DEVICE_AUTO : ctx->dev.kind;
}

void zeroc_ctx_local(const zeroc_ctx_t *ctx, int *local_rank, int *local_size) {
  int dead = DEAD(ctx, "zeroc_ctx_local");
  if (local_rank) *local_rank = dead ? -1 : ctx->local_rank;
  if (local_size) *local_size = dead ? 0 : ctx->local_size;
}

double zeroc_ctx_comm_timeout(const zeroc_ctx_t *ctx) {
  return DEAD(ctx, "zeroc_ctx_comm_timeout") ? 0 : ctx->comm_timeout;
}

double zeroc_ctx_peak_tflops(const zeroc_ctx_t *ctx) {
  return DEAD(ctx, "zeroc_ctx_peak_tflops") ? 0 : ctx->dev.peak_tflops_bf16;
}

void zeroc_ctx_memory(const zeroc_ctx_t *ctx, zeroc_mem_stats_t *out) {
  if (!out) {
    ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ctx_memory: out is NULL");
    return;
  }
  if (DEAD(ctx, "zeroc_ctx_memory")) {
    memset(out, 0, sizeof *out);
    return;
  }
  zeroc__mem_stats((zeroc__mem_t *)&ctx->mem, out);
}

void zeroc_ctx_memory_reset_peak(zeroc_ctx_t *ctx) {
  if (!DEAD(ctx, "zeroc_ctx_memory_reset_peak")) zeroc__mem_reset_peak(&ctx->mem);
}

zeroc_result_t zeroc_ctx_print_topology(zeroc_ctx_t *ctx, FILE *out) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_print_topology"));
  if (!out)
    return zeroc__ctx_ret(
        ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_ctx_print_topology: out is NULL"));
  char line[512];
  snprintf(line, sizeof line,
           "rank %3d  %s  local %d/%d  cores %-8s NUMA %d  threads %d  device %s%s%s",
           ctx->mesh.rank, ctx->host, ctx->local_rank, ctx->local_size, ctx->binding.cores,
           ctx->binding.numa, ctx->binding.threads, ctx->dev.name,
           ctx->binding.shared ? "  (core shared)" : "",
           ctx->binding.launcher ? "  (the launcher's binding)" : "");
  char *all = NULL;
  if (ctx->mesh.rank == 0) {
    all = malloc(sizeof line * (size_t)ctx->mesh.world);
    if (!all) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "topology lines"));
  }
  int e = MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0,
                     ctx->groups[ZEROC_GROUP_WORLD]->mpi[0]);
  if (e != MPI_SUCCESS) {
    free(all);
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Gather of topology lines: %d", e));
  }
  if (all) {
    for (int r = 0; r < ctx->mesh.world; r++) fprintf(out, "%s\n", all + (size_t)r * sizeof line);
    fflush(out);
  }
  free(all);
  return ZEROC_OK;
}

/* ---- handles ------------------------------------------------------------------ */

int zeroc__ctx_alive(const zeroc_ctx_t *ctx) {
  return ctx && ctx->magic == ZEROC__CTX_MAGIC && !ctx->doomed;
}

zeroc_result_t zeroc__ctx_check(const zeroc_ctx_t *ctx, const char *fn) {
  if (!ctx) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: the context is NULL", fn);
  if (!zeroc__ctx_alive(ctx))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s: not a live context (already finalized or destroyed, or not made by "
                      "zeroc_ctx_create)",
                      fn);
  return ZEROC_OK;
}

/* ---- the context's last failure ------------------------------------------------ */

zeroc_result_t zeroc__ctx_ret(zeroc_ctx_t *ctx, zeroc_result_t r) {
  if (r != ZEROC_OK && ctx && ctx->magic == ZEROC__CTX_MAGIC)
    snprintf(ctx->last_error, sizeof ctx->last_error, "%s", zeroc__tls_error());
  return r;
}

const char *zeroc_last_error(const zeroc_ctx_t *ctx) {
  if (ctx && ctx->magic == ZEROC__CTX_MAGIC && ctx->last_error[0]) return ctx->last_error;
  return zeroc__tls_error();
}

/* ---- accessors for the layers above (runtime/runtime.h) ---------------------- */

zeroc_group_t *zeroc__ctx_group(zeroc_ctx_t *ctx, zeroc_group_kind_t kind) {
  return ctx->groups[kind];
}

zeroc_device_t *zeroc__ctx_device(zeroc_ctx_t *ctx) { return &ctx->dev; }
zeroc_device_kind_t zeroc__ctx_device_asked(const zeroc_ctx_t *ctx) { return ctx->cfg.device; }

zeroc__mem_t *zeroc__ctx_mem(zeroc_ctx_t *ctx) { return &ctx->mem; }
const zeroc__devmem_t *zeroc__ctx_devmem(zeroc_ctx_t *ctx) { return &ctx->devmem; }

const zeroc__pool_env_t *zeroc__ctx_pool_env(zeroc_ctx_t *ctx) { return &ctx->pool_env; }

struct zeroc__fault *zeroc__ctx_fault(zeroc_ctx_t *ctx) { return ctx->fault; }

void zeroc__ctx_error_set(zeroc_ctx_t *ctx, const char *msg) {
  snprintf(ctx->last_error, sizeof ctx->last_error, "%s", msg ? msg : "");
}

int zeroc__ctx_fault_at(zeroc_ctx_t *ctx, const char *point, uint64_t step, double *value) {
  return ctx->fault ? zeroc__fault_hit(ctx->fault, ctx->mesh.rank, point, step, value) : 0;
}

void zeroc__watchdog_phase(zeroc_ctx_t *ctx, const char *fmt, ...) {
  if (!ctx || !ctx->wd) return;
  va_list ap;
  va_start(ap, fmt);
  zeroc__watchdog_vphase(ctx->wd, fmt, ap);
  va_end(ap);
}
