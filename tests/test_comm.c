/*
 * tests/test_comm.c - the mpi collectives on real ranks: every collective,
 * element by element, uneven and zero-size counts, in place, bf16; every mesh
 * group for several layouts; two streams at once on separate channels; overlap
 * (a collective on a comm stream completes while the main thread computes);
 * the byte counters.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/p2p_lanes.h"
#include "core/clock.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx; /* flat: dp = world */
static zeroc_stream_t *s1, *s2;

/* The value rank r contributes at element j. */
static float val(int r, size_t j) { return (float)((r + 1) * 1000 + (int)(j % 997)) * 0.25f; }

static zeroc_group_t *world(void) { return zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD); }

static void run_allgather(zeroc_stream_t *s, size_t count, int in_place) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  float *recv = malloc(sizeof(float) * (count * (size_t)n + 1));
  float *send = in_place ? recv + (size_t)r * count : malloc(sizeof(float) * (count + 1));
  for (size_t j = 0; j < count; j++) send[j] = val(r, j);
  ZT_OK(zeroc__allgather(g, s, send, recv, count, ZEROC_FP32));
  ZT_OK(zeroc_stream_sync(s));
  int bad = 0;
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < count; j++) bad += recv[(size_t)q * count + j] != val(q, j);
  ZT_ASSERT_MSG(bad == 0, "allgather count %zu in_place %d: %d wrong elements", count, in_place, bad);
  if (!in_place) free(send);
  free(recv);
}

static void test_allgather(void) {
  size_t counts[] = {1, 7, 1000, 12345, 0};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    run_allgather(s1, counts[i], 0);
    run_allgather(s1, counts[i], 1);
    run_allgather(zeroc_ctx_compute_stream(ctx), counts[i], 0);
  }
}

static void test_reduce_scatter(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  size_t counts[] = {1, 5, 4099, 0};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    size_t c = counts[i];
    float *send = malloc(sizeof(float) * (c * (size_t)n + 1)), *recv = malloc(sizeof(float) * (c + 1));
    for (size_t j = 0; j < c * (size_t)n; j++) send[j] = val(r, j);
    for (int op = ZEROC_SUM; op <= ZEROC_AVG; op++) {
      ZT_OK(zeroc__reduce_scatter(g, s1, send, recv, c, ZEROC_FP32, (zeroc_redop_t)op));
      ZT_OK(zeroc_stream_sync(s1));
      int bad = 0;
      for (size_t j = 0; j < c; j++) {
        double want = 0;
        for (int q = 0; q < n; q++) want += val(q, (size_t)r * c + j);
        if (op == ZEROC_AVG) want /= n;
        bad += fabs(recv[j] - want) > 1e-6 * fabs(want);
      }
      ZT_ASSERT_MSG(bad == 0, "reduce_scatter count %zu op %d: %d wrong", c, op, bad);
    }
    free(send);
    free(recv);
  }
}

/* The ring reduce-scatter (comm_mpi.c) in each of its placements: out of place, in
 * place in the rank's own block (recv = send + rank*count, as ZeRO-1's gradients), and
 * MPI_IN_PLACE's (send == recv, the result in the first block); sum, max and min; on a
 * comm stream, another channel and the inline compute stream. The values are small
 * multiples of 1/4, so every sum is exact in any order: compared bit for bit. The
 * largest count's blocks (2.3 MiB) outgrow the ring's first 2 MiB huge-page scratch. */
static void test_reduce_scatter_in_place(void) {
  zeroc_group_t *g = world();
  const int n = g->size, r = g->rank;
  const size_t counts[] = {1, 6, 3001, 600001};
  zeroc_stream_t *ss[] = {s1, s2, zeroc_ctx_compute_stream(ctx)};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
    for (int mode = 0; mode < 3; mode++)
      for (int op = ZEROC_SUM; op <= ZEROC_MIN; op++) {
        if (op == ZEROC_AVG) continue; /* a sum scaled after: test_reduce_scatter */
        const size_t c = counts[i], all = c * (size_t)n;
        zeroc_stream_t *s = ss[(i + (size_t)mode) % 3];
        float *buf = malloc(sizeof(float) * all), *sep = malloc(sizeof(float) * c);
        for (size_t j = 0; j < all; j++) buf[j] = val(r, j) * (op == ZEROC_MIN && r % 2 ? -1 : 1);
        float *recv = mode == 0 ? sep : mode == 1 ? buf + (size_t)r * c : buf;
        ZT_OK(zeroc__reduce_scatter(g, s, buf, recv, c, ZEROC_FP32, (zeroc_redop_t)op));
        ZT_OK(zeroc_stream_sync(s));
        int bad = 0;
        for (size_t j = 0; j < c; j++) {
          const size_t e = (size_t)r * c + j;
          float want = op == ZEROC_SUM ? 0 : val(0, e);
          for (int q = 0; q < n; q++) {
            const float v = val(q, e) * (op == ZEROC_MIN && q % 2 ? -1 : 1);
            want = op == ZEROC_SUM ? want + v : op == ZEROC_MAX ? (v > want ? v : want)
                                                                : (v < want ? v : want);
          }
          bad += recv[j] != want;
        }
        ZT_ASSERT_MSG(bad == 0, "reduce_scatter count %zu placement %d op %d: %d wrong of %zu",
                      c, mode, op, bad, c);
        free(buf);
        free(sep);
      }
}

static void test_allreduce(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  size_t c = 3001;
  float *buf = malloc(sizeof(float) * c), *out = malloc(sizeof(float) * c);
  for (int op = 0; op < ZEROC_REDOP_COUNT; op++) {
    for (int in_place = 0; in_place < 2; in_place++) {
      for (size_t j = 0; j < c; j++) buf[j] = val(r, j) * (j % 2 ? 1 : -1);
      float *dst = in_place ? buf : out;
      ZT_OK(zeroc__allreduce(g, s2, buf, dst, c, ZEROC_FP32, (zeroc_redop_t)op));
      ZT_OK(zeroc_stream_sync(s2));
      int bad = 0;
      for (size_t j = 0; j < c; j++) {
        double sum = 0, mx = -1e30, mn = 1e30;
        for (int q = 0; q < n; q++) {
          double v = val(q, j) * (j % 2 ? 1 : -1);
          sum += v;
          mx = v > mx ? v : mx;
          mn = v < mn ? v : mn;
        }
        double want = op == ZEROC_SUM ? sum : op == ZEROC_AVG ? sum / n : op == ZEROC_MAX ? mx : mn;
        bad += fabs(dst[j] - want) > 1e-6 * fabs(want);
      }
      ZT_ASSERT_MSG(bad == 0, "allreduce op %d in_place %d: %d wrong", op, in_place, bad);
    }
  }
  /* int64 sums and a zero-size call */
  int64_t big[3] = {(int64_t)1 << 40, r, -r};
  ZT_OK(zeroc__allreduce(g, s2, big, big, 3, ZEROC_INT64, ZEROC_SUM));
  ZT_OK(zeroc__allreduce(g, s2, buf, buf, 0, ZEROC_FP32, ZEROC_SUM));
  ZT_OK(zeroc_stream_sync(s2));
  CU_ASSERT_EQUAL(big[0], ((int64_t)1 << 40) * n);
  CU_ASSERT_EQUAL(big[1], (int64_t)n * (n - 1) / 2);
  free(buf);
  free(out);
}

static void test_bf16_reductions(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  size_t c = 513;
  uint16_t *send = malloc(2 * c * (size_t)n), *recv = malloc(2 * c), *all = malloc(2 * c * (size_t)n);
  for (size_t j = 0; j < c * (size_t)n; j++) send[j] = zeroc_f32_to_bf16((float)(r + 1) * 0.5f + (float)(j % 5));
  ZT_OK(zeroc__reduce_scatter(g, s1, send, recv, c, ZEROC_BF16, ZEROC_SUM));
  ZT_OK(zeroc__allgather(g, s1, recv, all, c, ZEROC_BF16));
  ZT_OK(zeroc_stream_sync(s1));
  int bad = 0;
  for (size_t j = 0; j < c * (size_t)n; j++) {
    double want = 0;
    for (int q = 0; q < n; q++) want += (q + 1) * 0.5 + (double)(j % 5);
    bad += fabs(zeroc_bf16_to_f32(all[j]) - want) > 1e-2 * fabs(want);
  }
  ZT_ASSERT_MSG(bad == 0, "bf16 reduce_scatter+allgather: %d wrong", bad);
  uint16_t m = zeroc_f32_to_bf16((float)r);
  ZT_OK(zeroc__allreduce(g, s1, &m, &m, 1, ZEROC_BF16, ZEROC_MAX));
  ZT_OK(zeroc_stream_sync(s1));
  CU_ASSERT_EQUAL(zeroc_bf16_to_f32(m), (float)(n - 1));
  free(send);
  free(recv);
  free(all);
}

static void test_broadcast_and_p2p(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  double buf[100];
  for (int root = 0; root < n; root++) {
    for (int j = 0; j < 100; j++) buf[j] = r == root ? root * 100.0 + j : -1;
    ZT_OK(zeroc__broadcast(g, s1, buf, 100, ZEROC_FP64, root));
    ZT_OK(zeroc_stream_sync(s1));
    int bad = 0;
    for (int j = 0; j < 100; j++) bad += buf[j] != root * 100.0 + j;
    CU_ASSERT_EQUAL(bad, 0);
  }
  CU_ASSERT_EQUAL(zeroc__broadcast(g, s1, buf, 1, ZEROC_FP64, n), ZEROC_ERR_INVALID_ARG);
  /* a ring: send to the right on one stream, receive from the left on another */
  int32_t out[64], in[64];
  for (int j = 0; j < 64; j++) out[j] = r * 64 + j;
  ZT_OK(zeroc__recv(g, s2, in, 64, ZEROC_INT32, (r + n - 1) % n, 5));
  ZT_OK(zeroc__send(g, s1, out, 64, ZEROC_INT32, (r + 1) % n, 5));
  ZT_OK(zeroc_stream_sync(s1));
  ZT_OK(zeroc_stream_sync(s2));
  int bad = 0;
  for (int j = 0; j < 64; j++) bad += in[j] != ((r + n - 1) % n) * 64 + j;
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(zeroc__send(g, s1, out, 1, ZEROC_INT32, r, 0), ZEROC_ERR_INVALID_ARG);
}

/* Collectives on two streams at once, interleaved, use separate communicators
 * and all complete correctly. */
static void test_two_streams(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  enum { K = 20, C = 2048 };
  float *ag = malloc(sizeof(float) * C * (size_t)n * K), *rs = malloc(sizeof(float) * C * K);
  float *src = malloc(sizeof(float) * C * (size_t)n);
  for (size_t j = 0; j < (size_t)C * n; j++) src[j] = val(r, j);
  for (int k = 0; k < K; k++) {
    ZT_OK(zeroc__allgather(g, s1, src, ag + (size_t)k * C * n, C, ZEROC_FP32));
    ZT_OK(zeroc__reduce_scatter(g, s2, src, rs + (size_t)k * C, C, ZEROC_FP32, ZEROC_SUM));
  }
  ZT_OK(zeroc_stream_sync(s1));
  ZT_OK(zeroc_stream_sync(s2));
  int bad = 0;
  for (int k = 0; k < K; k++) {
    for (int q = 0; q < n; q++)
      for (size_t j = 0; j < C; j++) bad += ag[(size_t)k * C * n + (size_t)q * C + j] != val(q, j);
    for (size_t j = 0; j < C; j++) {
      double want = 0;
      for (int q = 0; q < n; q++) want += val(q, (size_t)r * C + j);
      bad += fabs(rs[(size_t)k * C + j] - want) > 1e-6 * want;
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  free(ag);
  free(rs);
  free(src);
}

/* While the main thread computes (and never calls into MPI or the stream), a
 * collective enqueued on a comm stream completes: the worker thread drives it. */
static void test_overlap(void) {
  zeroc_group_t *g = world();
  size_t c = 1 << 16;
  float *send = malloc(sizeof(float) * c), *recv = malloc(sizeof(float) * c);
  for (size_t j = 0; j < c; j++) send[j] = 1.0f;
  zeroc_event_t *e;
  ZT_OK(zeroc_event_create(ctx, &e));
  ZT_OK(zeroc__allreduce(g, s1, send, recv, c, ZEROC_FP32, ZEROC_SUM));
  ZT_OK(zeroc_event_record(e, s1));
  double t0 = zeroc__now_s();
  volatile double acc = 0;
  int done = 0;
  long iters = 0;
  while (!done && zeroc__now_s() - t0 < 60) {
    for (int k = 0; k < 100000; k++) acc += k * 1e-9; /* compute */
    iters++;
    ZT_OK(zeroc_event_query(e, &done));
  }
  ZT_ASSERT_MSG(done, "collective did not complete during 60 s of main-thread compute");
  CU_ASSERT(iters >= 1);
  ZT_OK(zeroc_event_sync(e));
  CU_ASSERT_EQUAL(recv[c - 1], (float)g->size);
  zeroc_event_destroy(e);
  free(send);
  free(recv);
}

static void test_counters(void) {
  zeroc_group_t *g = world();
  int n = g->size;
  zeroc__group_counters_reset(g);
  size_t c = 1000;
  float *a = calloc(c * (size_t)n, sizeof(float)), *b = calloc(c * (size_t)n, sizeof(float));
  ZT_OK(zeroc__allgather(g, s1, a, b, c, ZEROC_FP32));
  ZT_OK(zeroc__reduce_scatter(g, s1, b, a, c, ZEROC_FP32, ZEROC_SUM));
  ZT_OK(zeroc__allreduce(g, s1, a, a, c, ZEROC_BF16, ZEROC_SUM));
  ZT_OK(zeroc_stream_sync(s1));
  zeroc_comm_counters_t k;
  zeroc__group_counters(g, &k);
  uint64_t total = (uint64_t)c * 4 * (uint64_t)n;
  CU_ASSERT_EQUAL(k.calls[ZEROC_COLL_ALLGATHER], 1);
  CU_ASSERT_EQUAL(k.bytes[ZEROC_COLL_ALLGATHER], total);
  CU_ASSERT_EQUAL(k.bus_bytes[ZEROC_COLL_ALLGATHER], total / (uint64_t)n * (uint64_t)(n - 1));
  CU_ASSERT_EQUAL(k.bus_bytes[ZEROC_COLL_REDUCE_SCATTER], total / (uint64_t)n * (uint64_t)(n - 1));
  CU_ASSERT_EQUAL(k.bytes[ZEROC_COLL_ALLREDUCE], c * 2);
  CU_ASSERT_EQUAL(k.bus_bytes[ZEROC_COLL_ALLREDUCE], 2 * c * 2 / (uint64_t)n * (uint64_t)(n - 1));
  free(a);
  free(b);
}

/* All-to-all: block p of rank r's send buffer arrives as block r of rank p's
 * receive buffer, element by element, on a comm stream and inline; zero count;
 * in place refused; byte counters: payload = whole send buffer, bus = the
 * blocks that leave the rank. */
static void test_alltoall(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  size_t counts[] = {1, 7, 1000, 0};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    size_t c = counts[i];
    float *send = malloc(sizeof(float) * (c * (size_t)n + 1));
    float *recv = malloc(sizeof(float) * (c * (size_t)n + 1));
    for (int p = 0; p < n; p++)
      for (size_t j = 0; j < c; j++) send[(size_t)p * c + j] = val(r, (size_t)p * 10007 + j);
    zeroc_stream_t *ss[2] = {s1, zeroc_ctx_compute_stream(ctx)};
    for (int k = 0; k < 2; k++) {
      memset(recv, 0, sizeof(float) * (c * (size_t)n + 1));
      zeroc__group_counters_reset(g);
      ZT_OK(zeroc__alltoall(g, ss[k], send, recv, c, ZEROC_FP32));
      ZT_OK(zeroc_stream_sync(ss[k]));
      int bad = 0;
      for (int q = 0; q < n; q++)
        for (size_t j = 0; j < c; j++) bad += recv[(size_t)q * c + j] != val(q, (size_t)r * 10007 + j);
      ZT_ASSERT_MSG(bad == 0, "alltoall count %zu stream %d: %d wrong elements", c, k, bad);
      zeroc_comm_counters_t kc;
      zeroc__group_counters(g, &kc);
      CU_ASSERT_EQUAL(kc.calls[ZEROC_COLL_ALLTOALL], 1);
      CU_ASSERT_EQUAL(kc.bytes[ZEROC_COLL_ALLTOALL], (uint64_t)c * 4 * (uint64_t)n);
      CU_ASSERT_EQUAL(kc.bus_bytes[ZEROC_COLL_ALLTOALL], (uint64_t)c * 4 * (uint64_t)(n - 1));
    }
    free(send);
    free(recv);
  }
  float x[8] = {0};
  CU_ASSERT_EQUAL(zeroc__alltoall(g, s1, x, x, 1, ZEROC_FP32), ZEROC_ERR_INVALID_ARG);
}

/* All-to-all with uneven counts: rank r sends (r + 2p) % 5 elements to rank p
 * (zero for some pairs), packed in reverse peer order with a gap, so the
 * displacements matter; int64 data names sender, receiver and index. */
static void test_alltoallv(void) {
  zeroc_group_t *g = world();
  int n = g->size, r = g->rank;
  size_t sc[64], sd[64], rc[64], rd[64], off = 0;
  for (int p = n - 1; p >= 0; p--) {
    sc[p] = (size_t)((r + 2 * p) % 5);
    sd[p] = off;
    off += sc[p] + 1; /* one-element gap */
  }
  size_t roff = 3;
  for (int p = 0; p < n; p++) {
    rc[p] = (size_t)((p + 2 * r) % 5);
    rd[p] = roff;
    roff += rc[p];
  }
  int64_t *send = malloc(sizeof(int64_t) * (off + 1)), *recv = malloc(sizeof(int64_t) * (roff + 1));
  for (int p = 0; p < n; p++)
    for (size_t j = 0; j < sc[p]; j++) send[sd[p] + j] = (int64_t)r * 1000000 + p * 1000 + (int64_t)j;
  for (size_t j = 0; j < roff + 1; j++) recv[j] = -1;
  zeroc__group_counters_reset(g);
  uint64_t total = 0, others = 0;
  for (int p = 0; p < n; p++) {
    total += sc[p] * 8;
    others += p == r ? 0 : sc[p] * 8;
  }
  size_t sc2[64];
  memcpy(sc2, sc, sizeof sc);
  ZT_OK(zeroc__alltoallv(g, s2, send, sc2, sd, recv, rc, rd, ZEROC_INT64));
  memset(sc2, 0xff, sizeof sc2); /* copied on the call: reusing the array at once is fine */
  ZT_OK(zeroc_stream_sync(s2));
  int bad = recv[0] != -1 || recv[1] != -1 || recv[2] != -1 || recv[roff] != -1;
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < rc[q]; j++) bad += recv[rd[q] + j] != (int64_t)q * 1000000 + r * 1000 + (int64_t)j;
  ZT_ASSERT_MSG(bad == 0, "alltoallv: %d wrong elements", bad);
  zeroc_comm_counters_t kc;
  zeroc__group_counters(g, &kc);
  CU_ASSERT_EQUAL(kc.calls[ZEROC_COLL_ALLTOALL], 1);
  CU_ASSERT_EQUAL(kc.bytes[ZEROC_COLL_ALLTOALL], total);
  CU_ASSERT_EQUAL(kc.bus_bytes[ZEROC_COLL_ALLTOALL], others);
  free(send);
  free(recv);
}

/* Each group of a layout contains exactly the ranks whose coordinates agree
 * except along that group's axis (the cp ranks join dp and dp_shard). */
static void check_groups_cp(int tp, int cp, int pp, int hsdp) {
  int W = zt_world();
  if (W % (tp * cp * pp) || (W / (tp * cp * pp)) % hsdp) return;
  zeroc_ctx_t *c = zt_ctx_cp(tp, cp, pp, hsdp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  const zeroc_mesh_info_t *m = zeroc_ctx_mesh(c);
  zeroc_mesh_info_t all[64];
  for (int r = 0; r < W; r++) ZT_OK(zeroc_mesh_layout_cp(W, tp, cp, pp, hsdp, r, &all[r]));
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++) {
    zeroc_group_t *g = zeroc__ctx_group(c, (zeroc_group_kind_t)k);
    int64_t sum = m->rank, want = 0;
    int members = 0;
    for (int r = 0; r < W; r++) {
      const zeroc_mesh_info_t *o = &all[r];
      int same_tp = o->tp_rank == m->tp_rank, same_pp = o->pp_rank == m->pp_rank;
      int same_sh = o->dp_shard_rank == m->dp_shard_rank, same_rep = o->dp_replicate_rank == m->dp_replicate_rank;
      int same_cp = o->cp_rank == m->cp_rank;
      int in = k == ZEROC_GROUP_WORLD ? 1
               : k == ZEROC_GROUP_TP ? same_pp && same_sh && same_rep && same_cp
               : k == ZEROC_GROUP_PP ? same_tp && same_sh && same_rep && same_cp
               : k == ZEROC_GROUP_DP ? same_tp && same_pp
               : k == ZEROC_GROUP_DP_SHARD ? same_tp && same_pp && same_rep
               : k == ZEROC_GROUP_CP ? same_tp && same_pp && same_rep && same_sh
                                     : same_tp && same_pp && same_sh && same_cp;
      if (in) {
        want += r;
        members++;
      }
    }
    int expect_size = k == ZEROC_GROUP_WORLD ? W : k == ZEROC_GROUP_TP ? tp : k == ZEROC_GROUP_PP ? pp
                      : k == ZEROC_GROUP_DP ? m->dp * cp : k == ZEROC_GROUP_DP_SHARD ? m->dp_shard * cp
                      : k == ZEROC_GROUP_CP ? cp : m->dp_replicate;
    CU_ASSERT_EQUAL(g->size, expect_size);
    CU_ASSERT_EQUAL(members, expect_size);
    ZT_OK(zeroc__allreduce_host(g, &sum, 1, ZEROC_INT64, ZEROC_SUM));
    ZT_ASSERT_MSG(sum == want, "layout tp%d cp%d pp%d hsdp%d group %s: sum of members %lld, want %lld",
                  tp, cp, pp, hsdp, g->name, (long long)sum, (long long)want);
    /* cp fastest inside dp and dp_shard */
    int rank_in_group = k == ZEROC_GROUP_TP ? m->tp_rank : k == ZEROC_GROUP_PP ? m->pp_rank
                        : k == ZEROC_GROUP_DP ? m->dp_rank * cp + m->cp_rank
                        : k == ZEROC_GROUP_DP_SHARD ? m->dp_shard_rank * cp + m->cp_rank
                        : k == ZEROC_GROUP_DP_REPLICATE ? m->dp_replicate_rank
                        : k == ZEROC_GROUP_CP ? m->cp_rank : m->rank;
    CU_ASSERT_EQUAL(g->rank, rank_in_group);
  }
  ZT_OK(zeroc_ctx_finalize(c));
}

static void check_groups(int tp, int pp, int hsdp) { check_groups_cp(tp, 1, pp, hsdp); }

static void test_groups_per_layout(void) {
  check_groups(1, 1, 1);
  check_groups(2, 1, 1);
  check_groups(1, 2, 1);
  check_groups(1, 1, 2);
  check_groups(2, 2, 1);
  check_groups(4, 1, 1);
  check_groups_cp(1, 2, 1, 1);
  check_groups_cp(1, 4, 1, 1);
  check_groups_cp(2, 2, 1, 1);
  check_groups_cp(1, 2, 2, 1);
  check_groups_cp(1, 2, 1, 2);
}

/* The nccl backend's directed lanes (comm/p2p_lanes.h), on every ring of 2 to 9 ranks
 * and every rank: a rank's four directed streams (send and receive, each way) use four
 * different lanes, so no two of its streams share a communicator, and every send uses
 * the lane of the receive that matches it on the peer (the interleaved schedule's
 * wrap-around, rank n-1 to rank 0, included). */
static void test_p2p_lanes(void) {
  for (int n = 2; n <= 9; n++) {
    CU_ASSERT_EQUAL(zeroc__p2p_colours(n), n % 2 ? 3 : 2);
    for (int r = 0; r < n; r++) {
      int used = 0, want;
      for (int d = -1; d <= 1; d += 2)
        for (int send = 0; send <= 1; send++) {
          int peer = send == (d > 0) ? (r + 1) % n : (r + n - 1) % n;
          int lane = zeroc__p2p_lane(n, r, d, send, peer, &want);
          ZT_ASSERT_MSG(lane >= 0 && lane < ZEROC_P2P_LANES && want == peer,
                        "n %d rank %d dir %d send %d: lane %d", n, r, d, send, lane);
          ZT_ASSERT_MSG(!(used >> lane & 1), "n %d rank %d: lane %d used twice", n, r, lane);
          used |= 1 << lane;
          CU_ASSERT(lane % 3 < zeroc__p2p_colours(n));
          if (send) { /* the peer's receive of the same direction meets it there */
            int w2, back = zeroc__p2p_lane(n, peer, d, 0, r, &w2);
            ZT_ASSERT_MSG(back == lane,
                          "n %d: rank %d's send (dir %d) on lane %d, rank %d's "
                          "receive on %d",
                          n, r, d, lane, peer, back);
          }
          if (n > 2) { /* the other neighbour is refused */
            int other = peer == (r + 1) % n ? (r + n - 1) % n : (r + 1) % n;
            CU_ASSERT_EQUAL(zeroc__p2p_lane(n, r, d, send, other, &want), -1);
          }
        }
    }
  }
}

static int setup(void) {
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc_stream_create(ctx, 0, &s1) || zeroc_stream_create(ctx, 0, &s2)) return 1;
  return 0;
}

static int teardown(void) {
  zeroc_stream_destroy(s1);
  zeroc_stream_destroy(s2);
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"all-gather (uneven, zero, in place, inline)", test_allgather},
      {"reduce-scatter sum and avg", test_reduce_scatter},
      {"reduce-scatter in place (own block, first block), sum/max/min, exact",
       test_reduce_scatter_in_place},
      {"all-reduce every op, in place, int64", test_allreduce},
      {"bf16 reductions", test_bf16_reductions},
      {"broadcast from every root, send/recv ring", test_broadcast_and_p2p},
      {"two streams at once on separate channels", test_two_streams},
      {"overlap: comm completes while the main thread computes", test_overlap},
      {"byte counters", test_counters},
      {"all-to-all (every count, comm and inline streams, counters)", test_alltoall},
      {"all-to-all with counts and displacements per peer", test_alltoallv},
      {"mesh groups for several layouts", test_groups_per_layout},
      {"nccl's directed p2p lanes: one per stream, matching across ranks", test_p2p_lanes},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "comm", tests, 2, 0, setup, teardown);
}
