/*
 * test_plan_dlrm.c - the DLRM planner (zeroc/plan_dlrm.h) against the memory
 * accountant: on 1, 2 and 4 ranks, for every --embedding-sharding, ZeRO 0..3,
 * HSDP and host tables, each rank's measured device peak by tag after two
 * training steps equals zeroc_plan_dlrm's prediction for that rank to the byte
 * (and the pinned host bytes the host tables take), and the planner's choices
 * and traffic are the embedding layer's own. Bad configs are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zeroc/zeroc.h"

static const char *const TAGS[] = {"params",      "grads",   "optimizer",
                                   "activations", "buffers", "workspace"};

/* One layout: train 2 steps and compare the peaks by tag with the plan. */
static void check_layout(int zero, int hsdp, int sharding, long host_threshold) {
  if (zt_world() % hsdp) return;
  char env[32];
  snprintf(env, sizeof env, "%ld", host_threshold);
  setenv("ZEROC_DLRM_HOST_TABLES", env, 1);
  zeroc_ctx_t *ctx = zt_ctx(1, 1, hsdp);
  CU_ASSERT_FATAL(ctx != NULL);
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "dlrm-tiny";
  c.rows = "30,400,50,6000";
  c.batch = 6;
  c.steps = 2;
  c.zero = zero;
  c.embedding_sharding = sharding;
  c.val_tokens = 16;
  c.val_every = 0;
  zeroc_trainer_t *tr = NULL;
  zeroc_result_t rc = zeroc_trainer_create(ctx, &c, &tr);
  if (rc) printf("trainer: %s\n", zeroc_last_error(ctx));
  CU_ASSERT_FATAL(rc == ZEROC_OK);
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  CU_ASSERT_EQUAL(in.plan_error[0], 0);
  zeroc_train_metrics_t m;
  do {
    CU_ASSERT_FATAL(zeroc_trainer_step(tr, &m) == ZEROC_OK);
  } while (!m.done);
  int bad = 0;
  for (int t = 0; t < ZEROC_TAG_COUNT; t++)
    if ((double)m.peak_by_tag[t] != in.predicted_by_tag[t]) {
      bad++;
      printf("rank %d zero %d hsdp %d sharding %d host %ld: %s measured %llu, planned %.0f\n",
             zt_rank(), zero, hsdp, sharding, host_threshold, TAGS[t],
             (unsigned long long)m.peak_by_tag[t], in.predicted_by_tag[t]);
    }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL((double)m.peak_device, in.predicted_device);
  /* the same numbers from the public planner, and the embedding layer's choices */
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  pc.model = in.dlrm_model;
  pc.model.batch = c.batch;
  pc.gpus = zt_world(), pc.zero = zero, pc.hsdp = hsdp, pc.sharding = sharding;
  pc.host_threshold = (uint64_t)host_threshold;
  pc.rank = zeroc_ctx_mesh(ctx)->dp_rank;
  zeroc_plan_dlrm_result_t r;
  CU_ASSERT_FATAL(zeroc_plan_dlrm(&pc, &r) == ZEROC_OK);
  CU_ASSERT_EQUAL(r.device.total, in.predicted_device);
  CU_ASSERT_EQUAL(r.host_bytes, in.predicted_host);
  CU_ASSERT(host_threshold == 0 || r.embed.param_host > 0); /* the large table is on the host */
  if ((double)m.peak_host != in.predicted_host)
    printf("rank %d host: measured %llu, planned %.0f\n", zt_rank(),
           (unsigned long long)m.peak_host, in.predicted_host);
  CU_ASSERT_EQUAL((double)m.peak_host, in.predicted_host);
  for (int t = 0; t < in.dlrm_model.tables; t++)
    CU_ASSERT_EQUAL(r.sharding[t], in.dlrm_sharding[t]);
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
  unsetenv("ZEROC_DLRM_HOST_TABLES");
}

static void test_shardings(void) {
  for (int s = 0; s <= 4; s++) check_layout(3, 1, s, 0);
}

static void test_zero_stages(void) {
  for (int z = 0; z <= 2; z++) check_layout(z, 1, 0, 0);
  check_layout(3, 2, 2, 0); /* HSDP: 2 replicas */
}

static void test_host_tables(void) {
  check_layout(3, 1, 2, 4096); /* column-wise: tables above 4 KiB on a rank in host memory */
  check_layout(2, 1, 3, 4096); /* row-wise */
}

static void test_plan_only(void) {
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  zeroc_plan_dlrm_result_t r, r0;
  CU_ASSERT_FATAL(zeroc_dlrm_preset("dlrm-mlperf", &pc.model) == ZEROC_OK);
  pc.gpus = 8, pc.sharding = ZEROC_EMBED_TABLE;
  CU_ASSERT_FATAL(zeroc_plan_dlrm(&pc, &r) == ZEROC_OK);
  CU_ASSERT(r.table_params == zeroc_dlrm_table_params(&pc.model));
  /* rank -1 reports the rank with the most device memory */
  for (int k = 0; k < 8; k++) {
    pc.rank = k;
    CU_ASSERT_FATAL(zeroc_plan_dlrm(&pc, &r0) == ZEROC_OK);
    CU_ASSERT(r0.device.total <= r.device.total);
  }
  pc.rank = -1, pc.sharding = ZEROC_EMBED_ROW;
  CU_ASSERT_FATAL(zeroc_plan_dlrm(&pc, &r0) == ZEROC_OK);
  CU_ASSERT(r0.device.total < r.device.total); /* row-wise balances the 26 tables evenly */
  CU_ASSERT(r0.embed.reduce_scatter_bytes > 0 && r.embed.reduce_scatter_bytes == 0);
  pc.hsdp = 3;
  CU_ASSERT_EQUAL(zeroc_plan_dlrm(&pc, &r0), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(strstr(zeroc_last_error(NULL), "hsdp 3") != NULL);
  pc.hsdp = 1, pc.zero = 4;
  CU_ASSERT_EQUAL(zeroc_plan_dlrm(&pc, &r0), ZEROC_ERR_INVALID_ARG);
  pc.zero = 3, pc.rank = 8;
  CU_ASSERT_EQUAL(zeroc_plan_dlrm(&pc, &r0), ZEROC_ERR_INVALID_ARG);
  zeroc_plan_dlrm_config_t raw;
  memset(&raw, 0, sizeof raw);
  CU_ASSERT_EQUAL(zeroc_plan_dlrm(&raw, &r0), ZEROC_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"planned bytes by tag = measured, every sharding (ZeRO-3)", test_shardings},
      {"planned bytes by tag = measured, ZeRO 0-2 and HSDP", test_zero_stages},
      {"planned bytes by tag = measured, host-memory tables", test_host_tables},
      {"the plan alone: the largest rank, bad configs", test_plan_only},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "plan_dlrm", tests, 1, 4);
}
