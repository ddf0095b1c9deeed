/*
 * tests/test_errors.c - the error contract of include/zeroc/result.h: a public
 * call that fails records its own message in the context, so
 * zeroc_last_error(ctx) names that failure and not an older one; a call that
 * succeeds leaves the message as it was.
 */
#include <string.h>

#include "testutil.h"

static zeroc_ctx_t *ctx;

static zeroc_result_t nop(zeroc_layer_io_t *io) {
  io->out = (void *)io->in;
  io->din = (void *)io->dout;
  return ZEROC_OK;
}

static zeroc_param_desc_t P1[] = {
    {.name = "w", .ndim = 2, .shape = {5, 3}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.1f}};

/* The context's message names `expect`. */
#define EXPECT_LAST(expect)                                                                        \
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), (expect)), "expected '%s' in: %s", (expect),         \
                zeroc_last_error(ctx))

/* A failure that leaves a message of its own in the context. */
static void fail_first(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = 4;
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("ZeRO stage 4");
}

static zeroc_model_t *small_model(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, 1, &sc, &m));
  return m;
}

static void test_mem_alloc(void) {
  void *p = NULL;
  fail_first();
  CU_ASSERT_EQUAL(zeroc_mem_alloc(ctx, ZEROC_MEM_KIND_COUNT, ZEROC_TAG_WORKSPACE, 64, &p),
                  ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("zeroc_mem_alloc: kind");
  CU_ASSERT_PTR_NULL(p);
}

static void test_model_calls(void) {
  zeroc_model_t *m = small_model();
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  zeroc_unit_info_t ui;
  float buf[64] = {0};
  fail_first();
  CU_ASSERT_EQUAL(zeroc_model_unit_info(m, 5, &ui), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("unit 5 not in [0, 1)");
  CU_ASSERT_EQUAL(zeroc_model_get_shard(m, 7, ZEROC_STATE_MASTER, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("unit 7 not in [0, 1)");
  CU_ASSERT_EQUAL(zeroc_model_set_shard(m, 0, ZEROC_STATE_GRAD, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("the gradient shard is read only");
  CU_ASSERT_EQUAL(zeroc_model_gather_unit(m, 9, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("unit 9 not in [0, 1)");
  zeroc_model_destroy(m);
}

static void test_gpt_create(void) {
  zeroc_gpt_config_t cfg = {
      .layers = 0, .hidden = 8, .heads = 2, .vocab = 16, .seq = 4, .batch = 1};
  zeroc_gpt_t *g = NULL;
  fail_first();
  CU_ASSERT_EQUAL(zeroc_gpt_create_ex(ctx, &cfg, NULL, &g), ZEROC_ERR_INVALID_ARG);
  EXPECT_LAST("model shape layers 0");
  CU_ASSERT_PTR_NULL(g);
}

/* Success does not clear the message: it stays that of the last failure. */
static void test_success_keeps_message(void) {
  zeroc_model_t *m = small_model();
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  zeroc_unit_info_t ui;
  fail_first();
  ZT_OK(zeroc_model_unit_info(m, 0, &ui));
  EXPECT_LAST("ZeRO stage 4");
  zeroc_model_destroy(m);
}

static int setup(void) { return (ctx = zt_ctx(1, 1, 1)) == NULL; }
static int teardown(void) { return zeroc_ctx_finalize(ctx) != ZEROC_OK; }

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"zeroc_mem_alloc records its failure", test_mem_alloc},
      {"the model's state calls record their failures", test_model_calls},
      {"zeroc_gpt_create_ex records its failure", test_gpt_create},
      {"a success leaves the last failure's message", test_success_keeps_message},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "errors", tests, 1, 1, setup, teardown);
}
