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

/* A send and a receive posted together in one batch: a ring exchange. They are the
 * group's first point-to-point calls, as a pipeline's first exchange is: the p2p
 * communicator was made with the group, before any batch. It needs 2 ranks (comm.c refuses a
 * send to oneself): with NCCL that is 2 GPUs; on one GPU the staged runs (np 2, 4)
 * exchange through MPI instead. */
static void test_grouped_ring(void) {
  zeroc_group_t *g = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD);
  int n = g->size, r = g->rank;
  if (n < 2) return;
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

/* Every communicator a group can use exists once the context does (none is made in a
 * step): each channel's on every group (ZEROC_NCCL_SELF=1 gives a group of one its
 * own), the directed p2p lanes on a pipeline group of 2 or more ranks only. */
static void test_made_at_start_up(void) {
  if (strcmp(zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD)->ops->name, "nccl")) return; /* staged */
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++) {
    zeroc_group_t *g = zeroc__ctx_group(ctx, (zeroc_group_kind_t)k);
    int missing = 0, lanes = 0;
    for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) missing += g->nccl[c] == NULL;
    for (int l = 0; l < ZEROC_P2P_LANES; l++) lanes += g->nccl[ZEROC_MAX_CHANNELS + l] != NULL;
    ZT_ASSERT_MSG(missing == 0, "group %s: %d channel communicators missing", g->name, missing);
    int want = k == ZEROC_GROUP_PP && g->size > 1 ? 2 * (g->size % 2 ? 3 : 2) : 0;
    ZT_ASSERT_MSG(lanes == want, "group %s (%d ranks): %d lanes, expected %d", g->name, g->size,
                  lanes, want);
  }
}

/* The pipeline's four directed streams on a pipeline group of every rank (a second
 * context, pp = ranks): activations to rank+1 and gradients to rank-1 in one batch,
 * each stream on its own lane communicator. 2 ranks or more (2 GPUs). */
static void test_directed_lanes(void) {
  int n = zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD)->size;
  if (n < 2) return;
  zeroc_ctx_t *c2 = NULL;
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CUDA;
  cc.comm_timeout_s = 120;
  cc.pp = n;
  ZT_OK(zeroc_ctx_create(&c2, &cc));
  zeroc_group_t *g = zeroc__ctx_group(c2, ZEROC_GROUP_PP);
  CU_ASSERT_EQUAL(g->size, n);
  int r = g->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
  enum { RA, RG, SA, SG };
  static const int dir[4] = {1, -1, 1, -1};
  zeroc_stream_t *st[4];
  for (int i = 0; i < 4; i++)
    ZT_OK(zeroc__stream_create_p2p(zeroc__ctx_device(c2), 1, dir[i], &st[i]));
  int32_t h[4][512];
  void *d[4];
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 512; j++) h[i][j] = i == SA ? r * 1000 + j : i == SG ? -(r * 1000 + j) : 7;
    d[i] = dev_alloc(sizeof h[i]);
    to_dev(d[i], h[i], sizeof h[i]);
  }
  ZT_OK(zeroc__comm_group_start(g));
  ZT_OK(zeroc__recv(g, st[RA], d[RA], 512, ZEROC_INT32, prev, 1));
  ZT_OK(zeroc__send(g, st[SA], d[SA], 512, ZEROC_INT32, next, 1));
  ZT_OK(zeroc__recv(g, st[RG], d[RG], 512, ZEROC_INT32, next, 2));
  ZT_OK(zeroc__send(g, st[SG], d[SG], 512, ZEROC_INT32, prev, 2));
  ZT_OK(zeroc__comm_group_end(g));
  /* on nccl a stream of direction +1 receives from rank-1 only (mpi matches by tag) */
  if (n > 2 && !strcmp(g->ops->name, "nccl"))
    CU_ASSERT_EQUAL(zeroc__recv(g, st[RA], d[RA], 1, ZEROC_INT32, next, 1), ZEROC_ERR_INTERNAL);
  for (int i = 0; i < 4; i++) ZT_OK(zeroc_stream_sync(st[i]));
  to_host(h[RA], d[RA], sizeof h[RA]);
  to_host(h[RG], d[RG], sizeof h[RG]);
  int bad = 0;
  for (int j = 0; j < 512; j++)
    bad += h[RA][j] != prev * 1000 + j || h[RG][j] != -(next * 1000 + j);
  ZT_ASSERT_MSG(bad == 0, "directed exchange: %d wrong", bad);
  for (int i = 0; i < 4; i++) {
    zeroc_mem_free(ctx, d[i]);
    zeroc_stream_destroy(st[i]);
  }
  ZT_OK(zeroc_ctx_finalize(c2));
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
      {"every communicator made at start-up", test_made_at_start_up},
      {"send and receive grouped (ring)", test_grouped_ring},
      {"the pipeline's directed streams, one communicator each", test_directed_lanes},
      {"all-to-all and all-to-allv on device buffers", test_alltoall},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "comm_nccl", tests, 1, 0, setup, teardown);
}
