/*
 * tests/test_core.c - results, mesh layouts, the memory accountant, the
 * topology plan on hwloc synthetic topologies, bf16 conversion, SHA-256 and
 * HMAC-SHA256 against the published test vectors.
 */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "core/sha256.h"
#include "core/topo.h"
#include "testutil.h"

static void test_results(void) {
  for (int r = 0; r < ZEROC_RESULT_COUNT; r++) {
    CU_ASSERT_PTR_NOT_NULL(zeroc_result_string((zeroc_result_t)r));
    CU_ASSERT(strncmp(zeroc_result_name((zeroc_result_t)r), "ZEROC_", 6) == 0);
  }
  CU_ASSERT_STRING_EQUAL(zeroc_result_name(ZEROC_ERR_TIMEOUT), "ZEROC_ERR_TIMEOUT");
  CU_ASSERT_STRING_EQUAL(zeroc_result_name((zeroc_result_t)999), "ZEROC_ERR_UNKNOWN");
  zeroc_result_t r = ZEROC_FAIL(ZEROC_ERR_IO, "open('%s'): %s", "x.bin", "No such file");
  CU_ASSERT_EQUAL(r, ZEROC_ERR_IO);
  /* the source file and line go to the TRACE log only, never into the user's message */
  CU_ASSERT_PTR_NULL(strstr(zeroc_last_error(NULL), "test_core.c"));
  CU_ASSERT_STRING_EQUAL(zeroc_last_error(NULL), "open('x.bin'): No such file");
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "open('x.bin'): No such file"));
}

/* Every rank of every layout has unique coordinates that map back to it. */
static void check_layout(int world, int tp, int pp, int hsdp) {
  int seen[256] = {0};
  for (int r = 0; r < world; r++) {
    zeroc_mesh_info_t m;
    ZT_OK(zeroc_mesh_layout(world, tp, pp, hsdp, r, &m));
    CU_ASSERT_EQUAL(m.dp, world / (tp * pp));
    CU_ASSERT_EQUAL(m.dp_shard * m.dp_replicate, m.dp);
    CU_ASSERT_EQUAL(m.dp_rank, m.dp_replicate_rank * m.dp_shard + m.dp_shard_rank);
    CU_ASSERT_EQUAL(zeroc_mesh_rank_of(&m, m.pp_rank, m.dp_replicate_rank, m.dp_shard_rank, m.tp_rank), r);
    int code = ((m.pp_rank * hsdp + m.dp_replicate_rank) * m.dp_shard + m.dp_shard_rank) * tp + m.tp_rank;
    CU_ASSERT(code >= 0 && code < world);
    if (code >= 0 && code < world) seen[code]++;
  }
  for (int i = 0; i < world; i++) CU_ASSERT_EQUAL(seen[i], 1);
}

static void test_mesh_layouts(void) {
  check_layout(1, 1, 1, 1);
  check_layout(4, 1, 1, 1);
  check_layout(4, 2, 1, 1);
  check_layout(4, 1, 1, 2);
  check_layout(8, 2, 2, 1);
  check_layout(16, 2, 2, 2);
  check_layout(24, 2, 3, 2);
  /* tp fastest: ranks 0,1 share a tp group; pp slowest */
  zeroc_mesh_info_t m;
  ZT_OK(zeroc_mesh_layout(8, 2, 2, 1, 5, &m));
  CU_ASSERT_EQUAL(m.tp_rank, 1);
  CU_ASSERT_EQUAL(m.dp_shard_rank, 0);
  CU_ASSERT_EQUAL(m.pp_rank, 1);
  ZT_OK(zeroc_mesh_layout(8, 1, 1, 2, 5, &m));
  CU_ASSERT_EQUAL(m.dp_shard, 4);
  CU_ASSERT_EQUAL(m.dp_replicate_rank, 1);
  CU_ASSERT_EQUAL(m.dp_shard_rank, 1);
}

static void test_mesh_errors(void) {
  zeroc_mesh_info_t m;
  CU_ASSERT_EQUAL(zeroc_mesh_layout(6, 4, 1, 1, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "does not divide the world size 6"));
  CU_ASSERT_EQUAL(zeroc_mesh_layout(8, 2, 1, 3, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "hsdp 3 does not divide"));
  CU_ASSERT_EQUAL(zeroc_mesh_layout(4, 0, 1, 1, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_mesh_layout(4, 1, 1, 1, 4, &m), ZEROC_ERR_INVALID_ARG);
}

/* With context parallelism: [pp][hsdp][dp/hsdp][cp][tp], every rank's
 * coordinates unique and mapping back, cp next to tp; dp excludes cp. */
static void check_layout_cp(int world, int tp, int cp, int pp, int hsdp) {
  int seen[256] = {0};
  for (int r = 0; r < world; r++) {
    zeroc_mesh_info_t m;
    ZT_OK(zeroc_mesh_layout_cp(world, tp, cp, pp, hsdp, r, &m));
    CU_ASSERT_EQUAL(m.cp, cp);
    CU_ASSERT_EQUAL(m.dp, world / (tp * cp * pp));
    CU_ASSERT_EQUAL(m.dp_shard * m.dp_replicate, m.dp);
    CU_ASSERT_EQUAL(m.tp_rank, r % tp);
    CU_ASSERT_EQUAL(m.cp_rank, r / tp % cp);
    CU_ASSERT_EQUAL(m.pp_rank, r / (tp * cp * m.dp));
    CU_ASSERT_EQUAL(zeroc_mesh_rank_of_cp(&m, m.pp_rank, m.dp_replicate_rank, m.dp_shard_rank,
                                          m.cp_rank, m.tp_rank),
                    r);
    int code = (((m.pp_rank * hsdp + m.dp_replicate_rank) * m.dp_shard + m.dp_shard_rank) * cp +
                m.cp_rank) * tp + m.tp_rank;
    CU_ASSERT(code >= 0 && code < world);
    if (code >= 0 && code < world) seen[code]++;
    /* cp 1 is the layout without cp */
    zeroc_mesh_info_t a, b;
    if (world % (tp * pp) == 0 && (world / (tp * pp)) % hsdp == 0) {
      ZT_OK(zeroc_mesh_layout(world, tp, pp, hsdp, r, &a));
      ZT_OK(zeroc_mesh_layout_cp(world, tp, 1, pp, hsdp, r, &b));
      CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
      CU_ASSERT_EQUAL(a.cp, 1);
      CU_ASSERT_EQUAL(a.cp_rank, 0);
    }
  }
  for (int i = 0; i < world; i++) CU_ASSERT_EQUAL(seen[i], 1);
}

static void test_mesh_layouts_cp(void) {
  check_layout_cp(2, 1, 2, 1, 1);
  check_layout_cp(4, 1, 4, 1, 1);
  check_layout_cp(4, 2, 2, 1, 1);
  check_layout_cp(8, 2, 2, 2, 1);
  check_layout_cp(16, 1, 2, 2, 2);
  check_layout_cp(48, 2, 2, 3, 2);
  /* world 16 = pp 2 x dp 2 x cp 2 x tp 2: rank 13 = pp 1, dp 1, cp 0, tp 1 */
  zeroc_mesh_info_t m;
  ZT_OK(zeroc_mesh_layout_cp(16, 2, 2, 2, 1, 13, &m));
  CU_ASSERT_EQUAL(m.tp_rank, 1);
  CU_ASSERT_EQUAL(m.cp_rank, 0);
  CU_ASSERT_EQUAL(m.dp_shard_rank, 1);
  CU_ASSERT_EQUAL(m.pp_rank, 1);
  CU_ASSERT_EQUAL(zeroc_mesh_layout_cp(8, 2, 3, 1, 1, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "tp x cp x pp = 2 x 3 x 1 = 6 does not divide the world size 8"));
  CU_ASSERT_EQUAL(zeroc_mesh_layout_cp(8, 1, 0, 1, 1, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_mesh_layout_cp(8, 1, 2, 1, 3, 0, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "hsdp 3 does not divide"));
  CU_ASSERT_STRING_EQUAL(zeroc_group_name(ZEROC_GROUP_CP), "cp");
  CU_ASSERT_STRING_EQUAL(zeroc_cp_mode_name(ZEROC_CP_MODE_DEFAULT), "ring");
  CU_ASSERT_STRING_EQUAL(zeroc_cp_mode_name(ZEROC_CP_MODE_ULYSSES), "ulysses");
}

static void test_accountant(void) {
  zeroc__mem_t m;
  ZT_OK(zeroc__mem_init(&m));
  char bufs[3000];
  /* many allocations to force table growth */
  for (int i = 0; i < 3000; i++)
    ZT_OK(zeroc__mem_track(&m, &bufs[i], (zeroc_memkind_t)(i % 3), (zeroc_memtag_t)(i % 6), 100));
  zeroc_mem_stats_t st;
  zeroc__mem_stats(&m, &st);
  CU_ASSERT_EQUAL(st.allocations, 3000);
  CU_ASSERT_EQUAL(st.current_total[0] + st.current_total[1] + st.current_total[2], 300000);
  CU_ASSERT_EQUAL(st.current[0][0], 100u * 500);
  for (int i = 0; i < 3000; i += 2) {
    zeroc__mem_rec_t rec;
    CU_ASSERT_EQUAL(zeroc__mem_untrack(&m, &bufs[i], &rec), 1);
    CU_ASSERT_EQUAL(rec.bytes, 100);
    CU_ASSERT_EQUAL(rec.kind, i % 3);
  }
  CU_ASSERT_EQUAL(zeroc__mem_untrack(&m, &bufs[0], NULL), 0); /* already gone */
  zeroc__mem_stats(&m, &st);
  CU_ASSERT_EQUAL(st.allocations, 1500);
  CU_ASSERT_EQUAL(st.current_total[0] + st.current_total[1] + st.current_total[2], 150000);
  CU_ASSERT_EQUAL(st.peak_total[0] + st.peak_total[1] + st.peak_total[2], 300000);
  zeroc__mem_reset_peak(&m);
  zeroc__mem_stats(&m, &st);
  CU_ASSERT_EQUAL(st.peak_total[0] + st.peak_total[1] + st.peak_total[2], 150000);
  /* the per-kind total's peak is the peak of the sum, not the sum of peaks */
  zeroc__mem_t m2;
  ZT_OK(zeroc__mem_init(&m2));
  zeroc__mem_count(&m2, ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS, 1000);
  zeroc__mem_count(&m2, ZEROC_MEM_DEVICE, ZEROC_TAG_PARAMS, -1000);
  zeroc__mem_count(&m2, ZEROC_MEM_DEVICE, ZEROC_TAG_GRADS, 700);
  zeroc__mem_stats(&m2, &st);
  CU_ASSERT_EQUAL(st.peak[0][ZEROC_TAG_PARAMS], 1000);
  CU_ASSERT_EQUAL(st.peak[0][ZEROC_TAG_GRADS], 700);
  CU_ASSERT_EQUAL(st.peak_total[0], 1000);
  CU_ASSERT_EQUAL(st.current_total[0], 700);
  zeroc__mem_fini(&m2);
  zeroc__mem_fini(&m);
}

static hwloc_topology_t synth(const char *desc) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  CU_ASSERT_EQUAL_FATAL(hwloc_topology_set_synthetic(t, desc), 0);
  CU_ASSERT_EQUAL_FATAL(hwloc_topology_load(t), 0);
  return t;
}

/* Ranks bound near their GPU's NUMA node, a launcher's binding told from the
 * machine's (and described, not replaced), the local rank read from the
 * launchers' variables (issue 40, hazard 5). */
static void test_topology_near(void) {
  hwloc_topology_t t = synth("node:2 core:4 pu:2");
  zeroc_binding_t b;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_obj_t n0 = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, 0);
  hwloc_obj_t n1 = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, 1);
  /* 4 ranks, GPUs 0, 1 near NUMA 1, GPUs 2, 3 near NUMA 0 (the reverse of rank order):
   * each pair splits its node's 4 cores */
  hwloc_const_bitmap_t near[4] = {n1->cpuset, n1->cpuset, n0->cpuset, n0->cpuset};
  int first[4] = {4, 6, 0, 2};
  for (int r = 0; r < 4; r++) {
    ZT_OK(zeroc__topo_plan_near(t, r, 4, near, &b, set));
    CU_ASSERT_EQUAL(b.first_core, first[r]);
    CU_ASSERT_EQUAL(b.ncores, 2);
    CU_ASSERT_EQUAL(b.threads, 2);
    CU_ASSERT_EQUAL(b.numa, r < 2 ? 1 : 0);
    CU_ASSERT_TRUE(hwloc_bitmap_isincluded(set, near[r]));
    CU_ASSERT_EQUAL(b.launcher, 0);
  }
  /* 3 ranks near NUMA 1 share its 4 cores 2, 1, 1; a rank with no known GPU set
   * takes the plain plan */
  hwloc_const_bitmap_t near3[4] = {n1->cpuset, n1->cpuset, n1->cpuset, NULL};
  int want[3][2] = {{4, 2}, {6, 1}, {7, 1}};
  for (int r = 0; r < 3; r++) {
    ZT_OK(zeroc__topo_plan_near(t, r, 4, near3, &b, NULL));
    CU_ASSERT_EQUAL(b.first_core, want[r][0]);
    CU_ASSERT_EQUAL(b.ncores, want[r][1]);
  }
  ZT_OK(zeroc__topo_plan_near(t, 3, 4, near3, &b, NULL));
  CU_ASSERT_EQUAL(b.first_core, 6);
  CU_ASSERT_STRING_EQUAL(b.cores, "6-7");

  /* a launcher's binding: narrower than the allowed PUs */
  hwloc_const_bitmap_t all = hwloc_topology_get_allowed_cpuset(t);
  CU_ASSERT_FALSE(zeroc__topo_launcher_bound(all, all));
  CU_ASSERT_TRUE(zeroc__topo_launcher_bound(n0->cpuset, all));
  hwloc_obj_t core5 = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, 5);
  CU_ASSERT_TRUE(zeroc__topo_launcher_bound(core5->cpuset, all));
  /* --bind-to core: one core, one thread */
  zeroc__topo_describe(t, core5->cpuset, 1, &b);
  CU_ASSERT_STRING_EQUAL(b.cores, "5");
  CU_ASSERT_EQUAL(b.numa, 1);
  CU_ASSERT_EQUAL(b.threads, 1);
  CU_ASSERT_EQUAL(b.launcher, 1);
  /* --bind-to numa with 2 ranks on the node: its 4 cores, 2 threads each */
  zeroc__topo_describe(t, n0->cpuset, 2, &b);
  CU_ASSERT_STRING_EQUAL(b.cores, "0-3");
  CU_ASSERT_EQUAL(b.threads, 2);
  CU_ASSERT_EQUAL(b.shared, 0);
  /* --bind-to hwthread: one PU of core 2 */
  hwloc_bitmap_only(set, 5);
  zeroc__topo_describe(t, set, 1, &b);
  CU_ASSERT_STRING_EQUAL(b.cores, "2");
  CU_ASSERT_EQUAL(b.threads, 1);
  /* two cores apart */
  hwloc_bitmap_copy(set, hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, 1)->cpuset);
  hwloc_bitmap_or(set, set, core5->cpuset);
  zeroc__topo_describe(t, set, 1, &b);
  CU_ASSERT_STRING_EQUAL(b.cores, "1,5");
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);

  /* the launcher's local rank before MPI: the first variable holding a number */
  const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "MV2_COMM_WORLD_LOCAL_RANK",  "SLURM_LOCALID",
                        "PALS_LOCAL_RANKID",          "LOCAL_RANK"};
  char *saved[6];
  for (int i = 0; i < 6; i++) {
    const char *v = getenv(vars[i]);
    saved[i] = v ? strdup(v) : NULL;
    unsetenv(vars[i]);
  }
  const char *var = "x";
  CU_ASSERT_EQUAL(zeroc__topo_launcher_local_rank(&var), -1);
  CU_ASSERT_PTR_NULL(var);
  setenv("SLURM_LOCALID", "3", 1);
  CU_ASSERT_EQUAL(zeroc__topo_launcher_local_rank(&var), 3);
  CU_ASSERT_STRING_EQUAL(var, "SLURM_LOCALID");
  setenv("MPI_LOCALRANKID", "oops", 1); /* not a number: the next variable */
  CU_ASSERT_EQUAL(zeroc__topo_launcher_local_rank(NULL), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  CU_ASSERT_EQUAL(zeroc__topo_launcher_local_rank(&var), 1);
  CU_ASSERT_STRING_EQUAL(var, "OMPI_COMM_WORLD_LOCAL_RANK");
  for (int i = 0; i < 6; i++) {
    if (saved[i])
      setenv(vars[i], saved[i], 1);
    else
      unsetenv(vars[i]);
    free(saved[i]);
  }
}

static void test_topology_synthetic(void) {
  hwloc_topology_t t = synth("node:2 core:4 pu:2");
  zeroc_binding_t b;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  /* 4 ranks on 8 cores: 2 cores (4 PUs) each, ranks 0-1 on NUMA 0, 2-3 on NUMA 1 */
  for (int r = 0; r < 4; r++) {
    ZT_OK(zeroc__topo_plan(t, r, 4, &b, set));
    CU_ASSERT_EQUAL(b.total_cores, 8);
    CU_ASSERT_EQUAL(b.ncores, 2);
    CU_ASSERT_EQUAL(b.first_core, 2 * r);
    CU_ASSERT_EQUAL(b.threads, 2);
    CU_ASSERT_EQUAL(b.shared, 0);
    CU_ASSERT_EQUAL(b.numa, r / 2);
    CU_ASSERT_EQUAL(hwloc_bitmap_weight(set), 4);
    CU_ASSERT_EQUAL(hwloc_bitmap_first(set), 4 * r);
  }
  /* 3 ranks on 8 cores: 3, 3, 2 */
  int want[3][2] = {{0, 3}, {3, 3}, {6, 2}};
  for (int r = 0; r < 3; r++) {
    ZT_OK(zeroc__topo_plan(t, r, 3, &b, NULL));
    CU_ASSERT_EQUAL(b.first_core, want[r][0]);
    CU_ASSERT_EQUAL(b.ncores, want[r][1]);
  }
  ZT_OK(zeroc__topo_plan(t, 2, 3, &b, NULL));
  CU_ASSERT_STRING_EQUAL(b.cores, "6-7");
  /* 16 ranks on 8 cores: two per core, one thread each */
  int per_core[8] = {0};
  for (int r = 0; r < 16; r++) {
    ZT_OK(zeroc__topo_plan(t, r, 16, &b, NULL));
    CU_ASSERT_EQUAL(b.shared, 1);
    CU_ASSERT_EQUAL(b.threads, 1);
    per_core[b.first_core]++;
  }
  for (int c = 0; c < 8; c++) CU_ASSERT_EQUAL(per_core[c], 2);
  CU_ASSERT_EQUAL(zeroc__topo_plan(t, 4, 4, &b, NULL), ZEROC_ERR_INVALID_ARG);
  hwloc_topology_destroy(t);

  /* two packages, 3 NUMA nodes each: ranks land on the NUMA node of their cores */
  t = synth("pack:2 node:3 core:2 pu:1");
  for (int r = 0; r < 6; r++) {
    ZT_OK(zeroc__topo_plan(t, r, 6, &b, NULL));
    CU_ASSERT_EQUAL(b.numa, r);
    CU_ASSERT_EQUAL(b.ncores, 2);
  }
  hwloc_topology_destroy(t);
  hwloc_bitmap_free(set);
}

static void test_bf16(void) {
  float xs[] = {0.0f, 1.0f, -2.5f, 3.14159f, 1e-30f, 65504.0f, 1.0f + 1.0f / 256};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    float y = zeroc_bf16_to_f32(zeroc_f32_to_bf16(xs[i]));
    CU_ASSERT(fabsf(y - xs[i]) <= fabsf(xs[i]) * (1.0f / 128));
  }
  /* round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 */
  CU_ASSERT_EQUAL(zeroc_bf16_to_f32(zeroc_f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  CU_ASSERT(isnan(zeroc_bf16_to_f32(zeroc_f32_to_bf16(NAN))));
  CU_ASSERT(isinf(zeroc_bf16_to_f32(zeroc_f32_to_bf16(INFINITY))));
  CU_ASSERT_EQUAL(zeroc_dtype_size(ZEROC_BF16), 2);
  CU_ASSERT_STRING_EQUAL(zeroc_dtype_name(ZEROC_FP32), "fp32");
}

static void hex(const uint8_t *d, char *out) {
  for (int i = 0; i < ZEROC_SHA256_BYTES; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

/* FIPS 180-4's examples (and the million-'a' message fed in uneven pieces), RFC 4231's cases. */
static void test_sha256(void) {
  static const struct {
    const char *msg, *want;
  } H[] = {
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  uint8_t d[ZEROC_SHA256_BYTES];
  char got[2 * ZEROC_SHA256_BYTES + 1];
  for (size_t i = 0; i < sizeof H / sizeof H[0]; i++) {
    zeroc__sha256(H[i].msg, strlen(H[i].msg), d);
    hex(d, got);
    ZT_ASSERT_MSG(!strcmp(got, H[i].want), "sha256('%s') = %s, want %s", H[i].msg, got, H[i].want);
  }
  static char a[1001];
  memset(a, 'a', sizeof a);
  zeroc__sha256_t s;
  zeroc__sha256_init(&s);
  for (int k = 0; k < 1000; k++) zeroc__sha256_update(&s, a, k % 2 ? 999 : 1001);
  zeroc__sha256_final(&s, d);
  hex(d, got);
  ZT_ASSERT_MSG(!strcmp(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
                "sha256(10^6 x 'a') = %s", got);
  /* RFC 4231 test cases 1, 2 and 6 (a key longer than the block) */
  uint8_t k1[20], k6[131];
  memset(k1, 0x0b, sizeof k1);
  memset(k6, 0xaa, sizeof k6);
  static const char *const m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  const struct {
    const void *key;
    size_t klen;
    const char *msg, *want;
  } M[] = {
      {k1, sizeof k1, "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", 4, "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {k6, sizeof k6, m6, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
  };
  for (size_t i = 0; i < sizeof M / sizeof M[0]; i++) {
    zeroc__hmac_sha256(M[i].key, M[i].klen, M[i].msg, strlen(M[i].msg), d);
    hex(d, got);
    ZT_ASSERT_MSG(!strcmp(got, M[i].want), "hmac case %zu = %s, want %s", i, got, M[i].want);
  }
  uint8_t x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 5};
  CU_ASSERT(zeroc__ct_equal(x, x, 4));
  CU_ASSERT(!zeroc__ct_equal(x, y, 4));
}

int main(void) {
  static const zt_test_t tests[] = {
      {"result codes and error text", test_results},
      {"mesh layouts map ranks one to one", test_mesh_layouts},
      {"mesh errors name the numbers", test_mesh_errors},
      {"mesh layouts with cp map ranks one to one", test_mesh_layouts_cp},
      {"memory accountant", test_accountant},
      {"topology plan on synthetic topologies", test_topology_synthetic},
      {"binding near a GPU, a launcher's binding, the launcher's local rank", test_topology_near},
      {"bf16 conversion", test_bf16},
      {"sha256 and hmac-sha256 test vectors", test_sha256},
      ZT_END,
  };
  return zt_run("core", tests);
}
