/*
 * tests/test_comm_nccl.c - the nccl backend on real GPUs: every collective on
 * device buffers, values checked element by element, on one GPU (NCCL run
 * on a one-rank communicator, ZEROC_NCCL_SELF=1) or on as many as
 * `mpirun -np N` is given. Exits 77 where there is no GPU.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "device/device.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;
static zeroc_stream_t *s;

static float val(int r, size_t j) { return (float)((r + 1) * 100 + (int)(j % 89)) * 0.5f; }

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, bytes, &p));
  return p;
}

static void to_dev(void *d, const void *h, size_t n) {
  ZT_OK(zeroc_memcpy_async(s, d, h, n));
  ZT_OK(zeroc_stream_sync(s));
}
static void to_host(void *h, const void *d, size_t n) {
  ZT_OK(zeroc_memcpy_async(s, h, d, n));
  ZT_OK(zeroc_stream_sync(s));
}

static void test_allgather_reduce_scatter(void) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  int n = g->size, r = g->rank;
  size_t counts[] = {1, 1000, 12347};
  for (size_t i = 0; i < 3; i++) {
    size_t c = counts[i];
    float *h = malloc(4 * c * (size_t)n), *hs = malloc(4 * c * (size_t)n);
    for (size_t j = 0; j < c; j++) h[j] = val(r, j);
    float *dsend = dev_alloc(4 * c), *dfull = dev_alloc(4 * c * (size_t)n), *dshard = dev_alloc(4 * c);
    to_dev(dsend, h, 4 * c);
    ZT_OK(zeroc__allgather(g, s, dsend, dfull, c, ZEROC_FP32));
    to_host(h, dfull, 4 * c * (size_t)n);
    int bad = 0;
    for (int q = 0; q < n; q++)
      for (size_t j = 0; j < c; j++) bad += h[(size_t)q * c + j] != val(q, j);
    ZT_ASSERT_MSG(bad == 0, "allgather %zu: %d wrong", c, bad);
    for (size_t j = 0; j < c * (size_t)n; j++) hs[j] = val(r, j);
    to_dev(dfull, hs, 4 * c * (size_t)n);
    ZT_OK(zeroc__reduce_scatter(g, s, dfull, dshard, c, ZEROC_FP32, ZEROC_SUM));
    to_host(h, dshard, 4 * c);
    bad = 0;
    for (size_t j = 0; j < c; j++) {
      double want = 0;
      for (int q = 0; q < n; q++) want += val(q, (size_t)r * c + j);
      bad += fabs(h[j] - want) > 1e-6 * want;
    }
    ZT_ASSERT_MSG(bad == 0, "reduce_scatter %zu: %d wrong", c, bad);
    zeroc_mem_free(ctx, dsend);
    zeroc_mem_free(ctx, dfull);
    zeroc_mem_free(ctx, dshard);
    free(h);
    free(hs);
  }
}

static void test_allreduce_bf16_and_broadcast(void) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  int n = g->size, r = g->rank;
  size_t c = 4099;
  uint16_t *h = malloc(2 * c);
  for (size_t j = 0; j < c; j++) h[j] = zeroc_f32_to_bf16((float)(r + 1) + (float)(j % 7));
  uint16_t *d = dev_alloc(2 * c);
  to_dev(d, h, 2 * c);
  ZT_OK(zeroc__allreduce(g, s, d, d, c, ZEROC_BF16, ZEROC_SUM));
  to_host(h, d, 2 * c);
  int bad = 0;
  for (size_t j = 0; j < c; j++) {
    double want = n * (n + 1) / 2.0 + n * (double)(j % 7);
    bad += fabs(zeroc_bf16_to_f32(h[j]) - want) > 1e-2 * want;
  }
  ZT_ASSERT_MSG(bad == 0, "bf16 allreduce: %d wrong", bad);
  double b[64];
  for (int j = 0; j < 64; j++) b[j] = r == 0 ? j * 1.5 : -1;
  double *db = dev_alloc(sizeof b);
  to_dev(db, b, sizeof b);
  ZT_OK(zeroc__broadcast(g, s, db, 64, ZEROC_FP64, 0));
  to_host(b, db, sizeof b);
  bad = 0;
  for (int j = 0; j < 64; j++) bad += b[j] != j * 1.5;
  CU_ASSERT_EQUAL(bad, 0);
  zeroc_mem_free(ctx, d);
  zeroc_mem_free(ctx, db);
  free(h);
}

/* A send and a receive posted together in one NCCL group: a ring exchange. They are
 * the group's first point-to-point calls, as a pipeline's first exchange is: the p2p
 * communicator must be made before ncclGroupStart, not inside the group, where NCCL
 * defers its creation past the calls that use it. It needs 2 ranks (comm.c refuses a
 * send to oneself): with NCCL that is 2 GPUs; on one GPU the staged runs (np 2, 4)
 * exchange through MPI instead. */
static void test_grouped_ring(void) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  int n = g->size, r = g->rank;
  if (n < 2) return;
  CU_ASSERT_PTR_NULL(g->nccl[ZEROC_P2P_CHANNEL]); /* no p2p call before this test */
  int32_t h[256];
  for (int j = 0; j < 256; j++) h[j] = r * 1000 + j;
  int32_t *out = dev_alloc(sizeof h), *in = dev_alloc(sizeof h);
  to_dev(out, h, sizeof h);
  ZT_OK(zeroc__comm_group_start(g));
  ZT_OK(zeroc__send(g, s, out, 256, ZEROC_INT32, (r + 1) % n, 7));
  ZT_OK(zeroc__recv(g, s, in, 256, ZEROC_INT32, (r + n - 1) % n, 7));
  ZT_OK(zeroc__comm_group_end(g));
  to_host(h, in, sizeof h);
  int bad = 0, from = (r + n - 1) % n;
  for (int j = 0; j < 256; j++) bad += h[j] != from * 1000 + j;
  CU_ASSERT_EQUAL(bad, 0);
  zeroc_mem_free(ctx, out);
  zeroc_mem_free(ctx, in);
}

/* All-to-all (equal counts) and all-to-allv (rank r sends r + p + 1 elements to rank p,
 * packed in reverse peer order) on device buffers. */
static void test_alltoall(void) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  int n = g->size, r = g->rank;
  size_t c = 1001;
  float *h = malloc(4 * c * (size_t)n);
  for (int p = 0; p < n; p++)
    for (size_t j = 0; j < c; j++) h[(size_t)p * c + j] = val(r, (size_t)p * 7919 + j);
  float *ds = dev_alloc(4 * c * (size_t)n), *dr = dev_alloc(4 * c * (size_t)n);
  to_dev(ds, h, 4 * c * (size_t)n);
  ZT_OK(zeroc__alltoall(g, s, ds, dr, c, ZEROC_FP32));
  to_host(h, dr, 4 * c * (size_t)n);
  int bad = 0;
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < c; j++) bad += h[(size_t)q * c + j] != val(q, (size_t)r * 7919 + j);
  ZT_ASSERT_MSG(bad == 0, "alltoall: %d wrong", bad);
  size_t sc[64], sd[64], rc[64], rd[64], so = 0, ro = 0;
  for (int p = n - 1; p >= 0; p--) sc[p] = (size_t)(r + p + 1), sd[p] = so, so += sc[p];
  for (int p = 0; p < n; p++) rc[p] = (size_t)(p + r + 1), rd[p] = ro, ro += rc[p];
  for (int p = 0; p < n; p++)
    for (size_t j = 0; j < sc[p]; j++) h[sd[p] + j] = (float)(r * 10000 + p * 100) + (float)j;
  to_dev(ds, h, 4 * so);
  ZT_OK(zeroc__alltoallv(g, s, ds, sc, sd, dr, rc, rd, ZEROC_FP32));
  to_host(h, dr, 4 * ro);
  bad = 0;
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < rc[q]; j++) bad += h[rd[q] + j] != (float)(q * 10000 + r * 100) + (float)j;
  ZT_ASSERT_MSG(bad == 0, "alltoallv: %d wrong", bad);
  zeroc_mem_free(ctx, ds);
  zeroc_mem_free(ctx, dr);
  free(h);
}

static int setup(void) {
  setenv("ZEROC_NCCL_SELF", "1", 1); /* run NCCL even on a one-rank group */
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CUDA;
  cc.comm_timeout_s = 120;
  if (zeroc_ctx_create(&ctx, &cc)) return 1;
  return zeroc_stream_create(ctx, 0, &s) != ZEROC_OK;
}

static int teardown(void) {
  zeroc_stream_destroy(s);
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}

int main(int argc, char **argv) {
  if (zeroc__cuda_device_count() == 0) {
    printf("test_comm_nccl: no GPU: skipped\n");
    return 77;
  }
  static const zt_test_t tests[] = {
      {"all-gather and reduce-scatter on device buffers", test_allgather_reduce_scatter},
      {"bf16 all-reduce and broadcast", test_allreduce_bf16_and_broadcast},
      {"send and receive grouped (ring)", test_grouped_ring},
      {"all-to-all and all-to-allv on device buffers", test_alltoall},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "comm_nccl", tests, 1, 0, setup, teardown);
}
