/*
 * tests/test_cp.c - context-parallel attention on real ranks (the world is the cp
 * group): for random qkv of the whole sequence, each rank takes its zigzag rows,
 * runs cp attention forward and backward (ring with and without overlap, Ulysses;
 * with and without dropout), and must equal the single-rank attention's rows at
 * its positions (out and dqkv, rel err <= 1e-5 fp32). The comm byte counters of
 * one forward + backward equal cp/cp.h's formulas, the buffers the accountant sees
 * equal zeroc__cp_buffer_bytes, cp of one rank is the plain kernel bit for bit, and
 * bad shapes are refused with a message.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/mem.h"
#include "cp/cp.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *K;

static zeroc_group_t *world(void) { return zeroc__ctx_group(ctx, ZEROC_GROUP_WORLD); }

/* rows (B,T,W) -> this rank's zigzag rows (B,Tl,W) */
static void take_rows(float *dst, const float *src, int B, int T, int W, int N, int r) {
  const int Tl = T / N;
  for (int b = 0; b < B; b++)
    for (int i = 0; i < Tl; i++)
      memcpy(dst + ((size_t)b * Tl + i) * W,
             src + ((size_t)b * T + (size_t)zeroc__cp_position(N, r, T, i)) * W,
             sizeof(float) * (size_t)W);
}

static uint64_t buffers_now(void) {
  zeroc_mem_stats_t st;
  zeroc__mem_stats(zeroc__ctx_mem(ctx), &st);
  return st.current[ZEROC_MEM_DEVICE][ZEROC_TAG_BUFFERS];
}

static void run_case(zeroc__cp_mode_t mode, int overlap, int with_drop, int B, int T, int NH,
                     int HS) {
  zeroc_group_t *g = world();
  const int N = g->size, r = g->rank, C = NH * HS, Tl = T / N;
  const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C;
  const size_t l3 = (size_t)B * Tl * 3 * C, l1 = (size_t)B * Tl * C;
  zeroc_dropout_t dp = {0.15f, zeroc_i_dropout_key(11, 4, 1, ZEROC_DROP_ATTN), 3, 0, T, T, NH + 2,
                        1};
  const zeroc_dropout_t *drop = with_drop ? &dp : NULL;
  /* the single rank's attention of the whole sequence (every rank computes it) */
  float *qkv = malloc(sizeof(float) * n3), *dout = malloc(sizeof(float) * n1);
  zt_fill_uniform(qkv, n3, 1234 + (uint64_t)T, -1.5f, 1.5f);
  zt_fill_uniform(dout, n1, 99 + (uint64_t)T, -1, 1);
  float *out = malloc(sizeof(float) * n1), *lse = malloc(sizeof(float) * (size_t)B * NH * T);
  float *dqkv = calloc(n3, sizeof(float));
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, drop));
  ZT_OK(zeroc_k_attention_backward(K, NULL, dqkv, dout, qkv, out, lse, B, T, C, NH, drop));
  float *want_o = malloc(sizeof(float) * l1), *want_d = malloc(sizeof(float) * l3);
  take_rows(want_o, out, B, T, C, N, r);
  take_rows(want_d, dqkv, B, T, 3 * C, N, r);
  /* this rank's rows through cp */
  float *lq = malloc(sizeof(float) * l3), *ldo = malloc(sizeof(float) * l1);
  take_rows(lq, qkv, B, T, 3 * C, N, r);
  take_rows(ldo, dout, B, T, C, N, r);
  float *lo = malloc(sizeof(float) * l1), *ll = malloc(sizeof(float) * (size_t)B * NH * Tl);
  float *ld = malloc(sizeof(float) * l3), *ld0 = malloc(sizeof(float) * l3);
  zt_fill_uniform(ld0, l3, 5, -1, 1); /* backward accumulates: start from non-zeros */
  memcpy(ld, ld0, sizeof(float) * l3);
  zeroc__cp_t *cp = NULL;
  const uint64_t before = buffers_now();
  ZT_OK(zeroc__cp_create(K, zeroc__ctx_devmem(ctx), g, mode, overlap, &cp));
  CU_ASSERT_PTR_NOT_NULL_FATAL(cp);
  zeroc_stream_t *s = zeroc_ctx_compute_stream(ctx);
  zeroc__group_counters_reset(g);
  ZT_OK(zeroc__cp_attention_forward(cp, s, lo, ll, lq, B, T, C, NH, drop));
  ZT_OK(zeroc_stream_sync(s));
  zeroc_comm_counters_t kf;
  zeroc__group_counters(g, &kf);
  ZT_OK(zeroc__cp_attention_backward(cp, s, ld, ldo, lq, lo, ll, B, T, C, NH, drop));
  ZT_OK(zeroc_stream_sync(s));
  for (size_t i = 0; i < l3; i++) ld[i] -= ld0[i];
  const char *mn = mode == ZEROC_CP_RING ? "ring" : "ulysses";
  double eo = zt_rel_err(lo, want_o, l1), ed = zt_rel_err(ld, want_d, l3);
  ZT_ASSERT_MSG(eo <= 1e-5 && ed <= 1e-5,
                "cp %d %s overlap %d drop %d B %d T %d NH %d HS %d: out err %g, dqkv err %g", N, mn,
                overlap, with_drop, B, T, NH, HS, eo, ed);
  /* communication: the formulas of cp/cp.h */
  zeroc_comm_counters_t k;
  zeroc__group_counters(g, &k);
  const uint64_t e = sizeof(float), u = (uint64_t)B * (uint64_t)Tl * (uint64_t)C * e;
  if (mode == ZEROC_CP_RING) {
    ZT_ASSERT_MSG(k.bytes[ZEROC_COLL_SEND] == (uint64_t)(3 * N - 2) * 2 * u,
                  "ring send bytes %llu, formula (3N-2) B Tl 2Cl e = %llu",
                  (unsigned long long)k.bytes[ZEROC_COLL_SEND],
                  (unsigned long long)((uint64_t)(3 * N - 2) * 2 * u));
    CU_ASSERT_EQUAL(k.bytes[ZEROC_COLL_ALLTOALL], 0);
  } else {
    const uint64_t want = 12 * u / (uint64_t)N * (uint64_t)(N - 1);
    ZT_ASSERT_MSG(k.bus_bytes[ZEROC_COLL_ALLTOALL] == want,
                  "ulysses all-to-all bytes to others %llu, formula 12 B Tl Cl e (N-1)/N = %llu",
                  (unsigned long long)k.bus_bytes[ZEROC_COLL_ALLTOALL], (unsigned long long)want);
    CU_ASSERT_EQUAL(k.bytes[ZEROC_COLL_SEND], 0);
  }
  /* and the planner's function, forward and backward apart */
  uint64_t pf, pb;
  zeroc__cp_comm_bytes(mode, N, B, T, C, e, &pf, &pb);
  const int cc = mode == ZEROC_CP_RING ? ZEROC_COLL_SEND : ZEROC_COLL_ALLTOALL;
  const uint64_t f = mode == ZEROC_CP_RING ? kf.bytes[cc] : kf.bus_bytes[cc];
  const uint64_t fb = mode == ZEROC_CP_RING ? k.bytes[cc] : k.bus_bytes[cc];
  ZT_ASSERT_MSG(f == pf && fb - f == pb,
                "%s comm bytes fwd %llu bwd %llu, zeroc__cp_comm_bytes %llu %llu", mn,
                (unsigned long long)f, (unsigned long long)(fb - f), (unsigned long long)pf,
                (unsigned long long)pb);
  /* memory: what the accountant saw is the size function */
  const uint64_t got_b = buffers_now() - before;
  const size_t want_b = zeroc__cp_buffer_bytes(mode, N, B, T, C, NH, e);
  ZT_ASSERT_MSG(got_b == want_b, "cp buffers %llu bytes, zeroc__cp_buffer_bytes %zu",
                (unsigned long long)got_b, want_b);
  zeroc__cp_destroy(cp);
  CU_ASSERT_EQUAL(buffers_now(), before);
  free(qkv), free(dout), free(out), free(lse), free(dqkv), free(want_o), free(want_d);
  free(lq), free(ldo), free(lo), free(ll), free(ld), free(ld0);
}

static void test_ring(void) {
  const int N = world()->size;
  for (int ov = 1; ov >= 0; ov--)
    for (int d = 0; d < 2; d++) {
      run_case(ZEROC_CP_RING, ov, d, 2, 2 * N * 3, 3, 8);
      run_case(ZEROC_CP_RING, ov, d, 1, 2 * N * 5, 2, 5);
    }
  /* transfers far above MPI's eager limit: a send completes only once its receive is
   * posted, so a ring that queued receives behind sends would deadlock */
  run_case(ZEROC_CP_RING, 1, 0, 2, 2 * N * 32, 4, 16);
  run_case(ZEROC_CP_RING, 0, 1, 2, 2 * N * 32, 4, 16);
}

static void test_ulysses(void) {
  const int N = world()->size;
  for (int d = 0; d < 2; d++) {
    run_case(ZEROC_CP_ULYSSES, 1, d, 2, 2 * N * 3, N, 8);
    run_case(ZEROC_CP_ULYSSES, 1, d, 1, 2 * N * 4, 2 * N, 5);
  }
  run_case(ZEROC_CP_ULYSSES, 1, 0, 2, 2 * N * 32, 2 * N, 16);
}

/* One cp rank (no group): the plain kernels, bit for bit, and no buffers. */
static void test_one_rank_is_plain(void) {
  const int B = 2, T = 10, NH = 2, HS = 4, C = NH * HS;
  const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
  float *qkv = malloc(sizeof(float) * n3), *dout = malloc(sizeof(float) * n1);
  zt_fill_uniform(qkv, n3, 3, -1, 1);
  zt_fill_uniform(dout, n1, 4, -1, 1);
  float *o1 = malloc(sizeof(float) * n1), *o2 = malloc(sizeof(float) * n1);
  float *l1 = malloc(sizeof(float) * nl), *l2 = malloc(sizeof(float) * nl);
  float *d1 = calloc(n3, sizeof(float)), *d2 = calloc(n3, sizeof(float));
  for (int mode = 0; mode < 2; mode++) {
    zeroc__cp_t *cp = NULL;
    ZT_OK(zeroc__cp_create(K, zeroc__ctx_devmem(ctx), NULL, (zeroc__cp_mode_t)mode, 1, &cp));
    CU_ASSERT_PTR_NOT_NULL_FATAL(cp);
    zeroc_stream_t *s = zeroc_ctx_compute_stream(ctx);
    ZT_OK(zeroc_k_attention_forward(K, s, o1, l1, qkv, B, T, C, NH, NULL));
    ZT_OK(zeroc_k_attention_backward(K, s, d1, dout, qkv, o1, l1, B, T, C, NH, NULL));
    ZT_OK(zeroc__cp_attention_forward(cp, s, o2, l2, qkv, B, T, C, NH, NULL));
    ZT_OK(zeroc__cp_attention_backward(cp, s, d2, dout, qkv, o2, l2, B, T, C, NH, NULL));
    CU_ASSERT(memcmp(o1, o2, sizeof(float) * n1) == 0);
    CU_ASSERT(memcmp(l1, l2, sizeof(float) * nl) == 0);
    CU_ASSERT(memcmp(d1, d2, sizeof(float) * n3) == 0);
    CU_ASSERT_PTR_NULL(cp->buf);
    zeroc__cp_destroy(cp);
  }
  CU_ASSERT_EQUAL(zeroc__cp_buffer_bytes(ZEROC_CP_RING, 1, B, T, C, NH, 4), 0);
  free(qkv), free(dout), free(o1), free(o2), free(l1), free(l2), free(d1), free(d2);
}

static void test_refusals(void) {
  zeroc_group_t *g = world();
  const int N = g->size;
  CU_ASSERT_EQUAL(zeroc__cp_check_seq(N, 2 * N * 3), ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__cp_check_seq(N, 2 * N * 3 + 1), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(strstr(zeroc_last_error(NULL), "T=") != NULL);
  CU_ASSERT_EQUAL(zeroc__cp_check_heads(ZEROC_CP_ULYSSES, 12, 2, 4), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(strstr(zeroc_last_error(NULL), "12 heads over tp 2") != NULL);
  CU_ASSERT_EQUAL(zeroc__cp_check_heads(ZEROC_CP_ULYSSES, 16, 2, 4), ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__cp_check_heads(ZEROC_CP_RING, 12, 2, 4), ZEROC_OK);
  zeroc__cp_t *cp = NULL;
  ZT_OK(zeroc__cp_create(K, zeroc__ctx_devmem(ctx), g, ZEROC_CP_ULYSSES, 1, &cp));
  float x[4096];
  /* every rank refuses before communicating, so nothing hangs */
  CU_ASSERT_EQUAL(zeroc__cp_attention_forward(cp, zeroc_ctx_compute_stream(ctx), x, x, x, 1,
                                              2 * N + 1, 8, 2, NULL),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc__cp_attention_forward(cp, zeroc_ctx_compute_stream(ctx), x, x, x, 1, 2 * N,
                                              3 * (N + 1), N + 1, NULL),
                  ZEROC_ERR_INVALID_ARG);
  zeroc__cp_destroy(cp);
  CU_ASSERT_EQUAL(zeroc__cp_position(2, 1, 8, 0), 2);
  CU_ASSERT_EQUAL(zeroc__cp_position(2, 1, 8, 2), 4);
  CU_ASSERT_EQUAL(zeroc__cp_position(2, 0, 8, 3), 7);
}

static int setup(void) {
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  return zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32,
                              &K) != ZEROC_OK;
}

static int teardown(void) {
  zeroc_kernels_destroy(K);
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"ring attention equals the single rank's rows (overlap on/off, dropout)", test_ring},
      {"ulysses attention equals the single rank's rows (dropout)", test_ulysses},
      {"one cp rank is the plain kernel, bit for bit", test_one_rank_is_plain},
      {"bad sequence and head counts are refused", test_refusals},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "cp", tests, 2, 0, setup, teardown);
}
