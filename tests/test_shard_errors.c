/*
 * tests/test_shard_errors.c - bad input to zeroc_shard() and the step calls:
 * each a clear error, the same on every rank, and nobody left waiting.
 */
#include <mpi.h>
#include <string.h>

#include "testutil.h"

static zeroc_result_t nop(zeroc_layer_io_t *io) {
  io->out = (void *)io->in;
  io->din = (void *)io->dout;
  return ZEROC_OK;
}

static zeroc_param_desc_t P1[] = {{.name = "w", .ndim = 2, .shape = {5, 3}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.1f}};
static zeroc_param_desc_t P0[] = {{.name = "empty", .ndim = 2, .shape = {5, 0}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.1f}};

static zeroc_ctx_t *ctx;

static zeroc_result_t try_shard(const zeroc_layer_t *L, int n, int stage, const char *expect) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = stage;
  zeroc_model_t *m = NULL;
  zeroc_result_t r = zeroc_shard(ctx, L, n, &sc, &m);
  CU_ASSERT_PTR_NULL(m);
  if (expect)
    ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), expect), "expected '%s' in: %s", expect,
                  zeroc_last_error(ctx));
  zeroc_model_destroy(m);
  return r;
}

static void test_bad_stage(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L, 1, 4, "ZeRO stage 4: accepted 0, 1, 2, 3"), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(try_shard(L, 1, -1, "ZeRO stage -1"), ZEROC_ERR_INVALID_ARG);
}

/* The optimizer is named in the config; only AdamW exists, and an unknown value
 * is one line naming the accepted one. */
static void test_bad_optimizer(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  CU_ASSERT_EQUAL(sc.optimizer, ZEROC_OPTIMIZER_UNSET);
  sc.optimizer = (zeroc_optimizer_t)7;
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(m);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "optimizer 7: accepted ZEROC_OPTIMIZER_ADAMW"), "%s",
                zeroc_last_error(ctx));
  CU_ASSERT_PTR_NULL(strchr(zeroc_last_error(ctx), '\n'));
  zeroc_model_destroy(m);
}

static void test_unit_without_params(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop},
      {.name = "b", .nparams = 0, .params = NULL, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L, 2, 3, "unit 1 ('b') declares no parameters"), ZEROC_ERR_INVALID_ARG);
}

static void test_zero_size_param(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop},
      {.name = "b", .nparams = 1, .params = P0, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L, 2, 3, "parameter 0 ('empty') has zero size"), ZEROC_ERR_INVALID_ARG);
}

static void test_bad_shares_and_callbacks(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = 1, .forward = nop, .backward = nop},
      {.name = "b", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L, 2, 3, "shares 1: must be -1 or the index of an earlier unit"),
                  ZEROC_ERR_INVALID_ARG);
  zeroc_layer_t L2[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = NULL, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L2, 1, 3, "no forward or backward callback"), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(try_shard(L2, 0, 3, NULL), ZEROC_ERR_INVALID_ARG);
}

/* Rank 1 passes a different shape: every rank gets the same error. */
static void test_mismatched_lists(void) {
  if (zt_world() < 2) return;
  zeroc_param_desc_t mine[] = {{.name = "w", .ndim = 2, .shape = {5, zt_rank() == 1 ? 4 : 3}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.1f}};
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = mine, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L, 1, 3, "differ between ranks"), ZEROC_ERR_INVALID_ARG);
  /* a different stage on one rank is caught the same way */
  zeroc_layer_t L1[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  CU_ASSERT_EQUAL(try_shard(L1, 1, zt_rank() == 1 ? 2 : 3, "differ between ranks"), ZEROC_ERR_INVALID_ARG);
}

static void test_bad_config_struct(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t sc;
  memset(&sc, 0x5a, sizeof sc);
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(ctx), "ZEROC_SHARD_CONFIG_INIT"));
}

/* Calls out of order are refused without touching the model. */
static void test_call_order(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.grad_accum = 2;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, 1, &sc, &m));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(zeroc_model_backward(m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_model_step(m, 0.1f, NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(ctx), "after 0 of 2 micro-steps"));
  int x = 0;
  ZT_OK(zeroc_model_forward(m, &x));
  CU_ASSERT_EQUAL(zeroc_model_forward(m, &x), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc_model_backward(m));
  CU_ASSERT_EQUAL(zeroc_model_step(m, 0.1f, NULL), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc_model_forward(m, &x));
  ZT_OK(zeroc_model_backward(m));
  CU_ASSERT_EQUAL(zeroc_model_forward(m, &x), ZEROC_ERR_INVALID_ARG); /* 2 of 2 done */
  CU_ASSERT_EQUAL(zeroc_model_step(m, NAN, NULL), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc_model_step(m, 0.1f, NULL));
  zeroc_model_destroy(m);
}

/* The initializer leaves every field unset; the library resolves each to its
 * default, so an unset config builds the same model as the explicit defaults,
 * and one rank's unset field agrees with another's explicit default. */
static void test_unset_defaults(void) {
  zeroc_layer_t L[] = {
      {.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  zeroc_shard_config_t unset = ZEROC_SHARD_CONFIG_INIT, given = ZEROC_SHARD_CONFIG_INIT;
  CU_ASSERT_EQUAL(unset.stage, ZEROC_UNSET);
  CU_ASSERT_EQUAL(unset.param_dtype, ZEROC_DTYPE_UNSET);
  given.stage = 3, given.param_dtype = given.reduce_dtype = ZEROC_FP32, given.prefetch = 2;
  given.recompute = 0, given.grad_accum = 1, given.beta1 = 0.9f, given.beta2 = 0.95f;
  given.eps = 1e-8f, given.weight_decay = 0, given.clip = 1, given.seed = 1, given.max_skipped = 5;
  given.optimizer = ZEROC_OPTIMIZER_ADAMW;
  zeroc_model_t *a = NULL, *b = NULL;
  ZT_OK(zeroc_shard(ctx, L, 1, &unset, &a));
  ZT_OK(zeroc_shard(ctx, L, 1, zt_rank() == 1 ? &unset : &given, &b));
  if (!a || !b) goto out;
  CU_ASSERT_EQUAL(zeroc_model_state_bytes(a), zeroc_model_state_bytes(b));
  zeroc_unit_info_t ia, ib;
  ZT_OK(zeroc_model_unit_info(a, 0, &ia));
  ZT_OK(zeroc_model_unit_info(b, 0, &ib));
  CU_ASSERT_EQUAL(ia.shard_numel, ib.shard_numel);
  float xa[64], xb[64];
  if (ia.shard_numel <= 64) { /* the same seed: the same initial values */
    ZT_OK(zeroc_model_get_shard(a, 0, ZEROC_STATE_MASTER, xa));
    ZT_OK(zeroc_model_get_shard(b, 0, ZEROC_STATE_MASTER, xb));
    CU_ASSERT_EQUAL(memcmp(xa, xb, ia.shard_numel * sizeof(float)), 0);
  }
out:
  zeroc_model_destroy(a);
  zeroc_model_destroy(b);
}

/* Models come and go in one context: each gives its streams' communicator
 * channels back, so there is no limit on how many are built one after another. */
static void test_many_models(void) {
  zeroc_layer_t L[] = {{.name = "a", .nparams = 1, .params = P1, .shares = -1, .forward = nop, .backward = nop}};
  for (int i = 0; i < 12; i++) {
    zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
    zeroc_model_t *m = NULL;
    ZT_OK(zeroc_shard(ctx, L, 1, &sc, &m));
    if (!m) return;
    zeroc_model_destroy(m);
  }
}

/* HSDP replicas that do not divide dp: caught when the context is made. */
static void test_hsdp_not_dividing(void) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.hsdp = zt_world() + 1;
  zeroc_ctx_t *c = NULL;
  CU_ASSERT_EQUAL(zeroc_ctx_create(&c, &cc), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "does not divide the data-parallel size"));
}

static int setup(void) { return (ctx = zt_ctx(1, 1, 1)) == NULL; }
static int teardown(void) { return zeroc_ctx_finalize(ctx) != ZEROC_OK; }

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"a bad stage", test_bad_stage},
      {"an unknown optimizer", test_bad_optimizer},
      {"a unit without parameters", test_unit_without_params},
      {"a zero-size parameter", test_zero_size_param},
      {"bad shares index, missing callbacks, no units", test_bad_shares_and_callbacks},
      {"layer lists that differ between ranks", test_mismatched_lists},
      {"an uninitialised config struct", test_bad_config_struct},
      {"calls out of order", test_call_order},
      {"twelve models one after another in one context", test_many_models},
      {"unset fields take the library's defaults", test_unset_defaults},
      {"HSDP replicas that do not divide dp", test_hsdp_not_dividing},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "shard_errors", tests, 1, 0, setup, teardown);
}
