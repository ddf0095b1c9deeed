/*
 * runtime/probe.c - zeroc_ctx_probe_collectives: the world's all-gather and
 * reduce-scatter timed on the context's own device and communicators, the
 * numbers `zeroc info` prints (bus bandwidth as NCCL's tests define it).
 */
#include <time.h>

#include "comm/comm.h"
#include "core/error.h"
#include "runtime/context.h"
#include "zeroc/device.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

zeroc_result_t zeroc_ctx_probe_collectives(zeroc_ctx_t *ctx, size_t bytes, int rounds,
                                           double *allgather_s, double *reduce_scatter_s) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_probe_collectives"));
  if (!allgather_s || !reduce_scatter_s)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                          "zeroc_ctx_probe_collectives: allgather_s or "
                                          "reduce_scatter_s is NULL"));
  if (bytes < 4 || bytes > ((size_t)1 << 40) || rounds < 1 || rounds > 1000)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                                          "zeroc_ctx_probe_collectives: bytes %zu, rounds %d: "
                                          "accepted 4..2^40 bytes, 1..1000 rounds",
                                          bytes, rounds));
  zeroc_group_t *g = ctx->groups[ZEROC_GROUP_WORLD];
  size_t count = bytes / 4;
  float *shard = NULL, *full = NULL;
  zeroc_stream_t *s = NULL;
  zeroc_result_t r =
      zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, count * 4, (void **)&shard);
  if (!r)
    r = zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, count * 4 * (size_t)g->size,
                        (void **)&full);
  if (!r) r = zeroc_stream_create(ctx, 0, &s);
  if (!r) r = zeroc_memset_async(s, full, 0, count * 4 * (size_t)g->size);
  if (!r) r = zeroc_memset_async(s, shard, 0, count * 4);
  double t_ag = 1e30, t_rs = 1e30;
  for (int it = 0; it <= rounds && !r; it++) { /* round 0 warms up */
    double t0 = now_s();
    r = zeroc__allgather(g, s, shard, full, count, ZEROC_FP32);
    if (!r) r = zeroc_stream_sync(s);
    double t1 = now_s();
    if (!r) r = zeroc__reduce_scatter(g, s, full, shard, count, ZEROC_FP32, ZEROC_SUM);
    if (!r) r = zeroc_stream_sync(s);
    double t2 = now_s();
    if (it > 0) {
      t_ag = t1 - t0 < t_ag ? t1 - t0 : t_ag;
      t_rs = t2 - t1 < t_rs ? t2 - t1 : t_rs;
    }
  }
  zeroc_stream_destroy(s);
  zeroc_mem_free(ctx, shard);
  zeroc_mem_free(ctx, full);
  *allgather_s = r ? 0 : t_ag;
  *reduce_scatter_s = r ? 0 : t_rs;
  return zeroc__ctx_ret(ctx, r);
}
