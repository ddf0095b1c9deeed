/*
 * tests/test_model_api.c - the public model and context API as a user program
 * meets it (issue 36): descriptors copied by zeroc_shard (the caller frees its
 * arrays, then saves and loads); every inspection call given NULL, a dead
 * handle or an index out of range answers with a one-line error, never a
 * crash; init kinds refused; messages that name the value, not our sources; a
 * failing callback's message with its unit and rank; the models-per-context
 * limit named; zeroc_ctx_finalize refusing while a model lives; double destroy
 * caught; app_json that is not a JSON object refused. Real ranks, real files.
 */
#include <mpi.h>
#include <stdlib.h>
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

static zeroc_layer_t one_unit(const char *name, zeroc_param_desc_t *p, int np) {
  return (zeroc_layer_t){
      .name = name, .nparams = np, .params = p, .shares = -1, .forward = nop, .backward = nop};
}

static zeroc_model_t *build(const zeroc_layer_t *L, int n, int stage) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = stage;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, n, &sc, &m));
  return m;
}

/* The last error names `want`, is one line, and names none of our source files. */
#define EXPECT_MSG(src, want)                                                                      \
  do {                                                                                             \
    const char *e_ = (src);                                                                        \
    ZT_ASSERT_MSG(e_ &&strstr(e_, (want)), "expected '%s' in: %s", (want), e_ ? e_ : "(null)");    \
    ZT_ASSERT_MSG(e_ && !strchr(e_, '\n'), "not one line: %s", e_);                                \
    ZT_ASSERT_MSG(e_ && !strstr(e_, ".c:"), "names a source file: %s", e_);                        \
  } while (0)

/* ---- Defect 1: descriptors copied ---------------------------------------------------- */

static char *heap_str(const char *s) {
  char *p = malloc(strlen(s) + 1);
  strcpy(p, s);
  return p;
}

/* Two units whose names and parameter descriptors live in heap arrays that
 * the caller scribbles over and frees right after zeroc_shard. */
static zeroc_model_t *build_from_heap(uint64_t seed) {
  zeroc_param_desc_t *pa = calloc(2, sizeof *pa), *pb = calloc(1, sizeof *pb);
  pa[0] = (zeroc_param_desc_t){.name = heap_str("embed.w"),
                               .ndim = 2,
                               .shape = {7, 3},
                               .init = ZEROC_INIT_NORMAL,
                               .init_scale = 0.5f};
  pa[1] = (zeroc_param_desc_t){.name = heap_str("embed.b"),
                               .ndim = 1,
                               .shape = {3},
                               .init = ZEROC_INIT_UNIFORM,
                               .init_scale = 0.2f};
  pb[0] = (zeroc_param_desc_t){.name = heap_str("head.w"),
                               .ndim = 2,
                               .shape = {3, 5},
                               .init = ZEROC_INIT_NORMAL,
                               .init_scale = 0.3f};
  zeroc_layer_t *L = calloc(2, sizeof *L);
  L[0] = one_unit(heap_str("embed"), pa, 2);
  L[1] = one_unit(heap_str("head"), pb, 1);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.seed = seed;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, 2, &sc, &m));
  /* the caller is done with its arrays: garbage, then freed */
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < L[i].nparams; j++) {
      char *nm = (char *)L[i].params[j].name;
      memset(nm, '#', strlen(nm));
      free(nm);
    }
    char *ln = (char *)L[i].name;
    memset(ln, '#', strlen(ln));
    free(ln);
  }
  memset(pa, 0xa5, 2 * sizeof *pa);
  memset(pb, 0xa5, sizeof *pb);
  memset(L, 0xa5, 2 * sizeof *L);
  free(pa);
  free(pb);
  free(L);
  return m;
}

static void test_descriptors_copied(void) {
  char dir[256] = "";
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-model-api");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  CU_ASSERT_FATAL(dir[0] != 0);
  zeroc_model_t *a = build_from_heap(7), *b = build_from_heap(8);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  /* the model answers with its own copies */
  const zeroc_param_desc_t *pd = zeroc_model_param_desc(a, 0, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
  CU_ASSERT_STRING_EQUAL(pd->name, "embed.b");
  CU_ASSERT_EQUAL(pd->shape[0], 3);
  zeroc_unit_info_t ui;
  ZT_OK(zeroc_model_unit_info(a, 1, &ui));
  CU_ASSERT_STRING_EQUAL(ui.name, "head");
  /* save a, load into b (another seed), compare every unit */
  ZT_OK(zeroc_ckpt_save(a, dir, 3, "{\"note\": \"issue 36\"}"));
  uint64_t step = 0;
  char *app = NULL;
  ZT_OK(zeroc_ckpt_load(b, dir, &step, &app));
  CU_ASSERT_EQUAL(step, 3);
  CU_ASSERT_PTR_NOT_NULL(app && strstr(app, "issue 36"));
  free(app);
  for (int u = 0; u < 2; u++) {
    ZT_OK(zeroc_model_unit_info(a, u, &ui));
    float *x = calloc(ui.flat_numel, 4), *y = calloc(ui.flat_numel, 4);
    ZT_OK(zeroc_model_gather_unit(a, u, x));
    ZT_OK(zeroc_model_gather_unit(b, u, y));
    CU_ASSERT_EQUAL(memcmp(x, y, ui.flat_numel * 4), 0);
    free(x);
    free(y);
  }
  zeroc_model_destroy(a);
  zeroc_model_destroy(b);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
}

/* ---- Defect 2: NULL, dead and out-of-range arguments ----------------------------------- */

static void test_model_calls_checked(void) {
  zeroc_layer_t L[] = {one_unit("a", P1, 1)};
  zeroc_model_t *m = build(L, 1, 3);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  float buf[64] = {0}, loss = 0;
  int x = 0, sr = 0, ss = 0, rep = 0;
  zeroc_unit_info_t ui;
  const char *inv = "the model is NULL";
  zeroc_model_destroy(NULL); /* does nothing */
  CU_ASSERT_EQUAL(zeroc_model_forward(NULL, &x), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_forward: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_eval(NULL, &x, &loss), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_eval: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_backward(NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_backward: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_step(NULL, 0.1f, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_step: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_num_units(NULL), -1);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_num_units: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_unit_info(NULL, 0, &ui), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), inv);
  CU_ASSERT_EQUAL(zeroc_model_unit_info(m, 0, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_unit_info: out is NULL");
  CU_ASSERT_EQUAL(zeroc_model_unit_info(m, -1, &ui), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "unit -1 not in [0, 1)");
  /* offsets: UINT64_MAX for what does not exist */
  CU_ASSERT_EQUAL(zeroc_model_param_offset(NULL, 0, 0), UINT64_MAX);
  CU_ASSERT_EQUAL(zeroc_model_param_offset(m, 99, 0), UINT64_MAX);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_param_offset: unit 99 not in [0, 1)");
  CU_ASSERT_EQUAL(zeroc_model_param_offset(m, 0, 1), UINT64_MAX);
  EXPECT_MSG(zeroc_last_error(ctx), "parameter 1 of unit 0 ('a') not in [0, 1)");
  CU_ASSERT_EQUAL(zeroc_model_param_offset(m, 0, -1), UINT64_MAX);
  CU_ASSERT_EQUAL(zeroc_model_param_offset(m, 0, 0), 0);
  CU_ASSERT_PTR_NULL(zeroc_model_param_desc(NULL, 0, 0));
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_param_desc: the model is NULL");
  CU_ASSERT_PTR_NULL(zeroc_model_param_desc(m, 0, 99));
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_param_desc: parameter 99 of unit 0");
  CU_ASSERT_PTR_NULL(zeroc_model_param_desc(m, -3, 0));
  CU_ASSERT_PTR_NOT_NULL(zeroc_model_param_desc(m, 0, 0));
  zeroc_model_shard_layout(NULL, &sr, &ss, &rep);
  CU_ASSERT(sr == -1 && ss == 0 && rep == -1);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_shard_layout: the model is NULL");
  zeroc_model_shard_layout(m, NULL, NULL, NULL); /* every output optional */
  /* state */
  CU_ASSERT_EQUAL(zeroc_model_get_shard(NULL, 0, ZEROC_STATE_MASTER, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_get_shard: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_get_shard(m, 0, ZEROC_STATE_MASTER, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_get_shard: buf is NULL");
  CU_ASSERT_EQUAL(zeroc_model_get_shard(m, 0, (zeroc_state_kind_t)42, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "state kind 42");
  CU_ASSERT_EQUAL(zeroc_model_get_shard(m, 5, ZEROC_STATE_MASTER, buf), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_model_set_shard(NULL, 0, ZEROC_STATE_MASTER, buf), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_model_set_shard(m, 0, ZEROC_STATE_MASTER, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_set_shard: buf is NULL");
  CU_ASSERT_EQUAL(zeroc_model_set_shard(m, -1, ZEROC_STATE_MOMENT1, buf), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_model_sync_params(NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_sync_params: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_model_gather_unit(m, 0, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_model_gather_unit: buf is NULL");
  CU_ASSERT_EQUAL(zeroc_model_gather_unit(NULL, 0, buf), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_model_gather_unit(m, 99, buf), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "unit 99 not in [0, 1)");
  CU_ASSERT_EQUAL(zeroc_model_steps(NULL), 0);
  zeroc_model_set_steps(NULL, 5);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_set_steps: the model is NULL");
  CU_ASSERT_PTR_NULL(zeroc_model_ctx(NULL));
  CU_ASSERT_EQUAL(zeroc_model_state_bytes(NULL), 0);
  /* checkpoints */
  CU_ASSERT_EQUAL(zeroc_ckpt_save(NULL, "/tmp/x", 1, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ckpt_save: the model is NULL");
  CU_ASSERT_EQUAL(zeroc_ckpt_save(m, NULL, 1, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "checkpoint directory is empty");
  uint64_t step = 0;
  char *app = (char *)"x";
  CU_ASSERT_EQUAL(zeroc_ckpt_load(NULL, "/tmp/x", &step, &app), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(app);
  CU_ASSERT_EQUAL(zeroc_ckpt_load(m, NULL, &step, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_ckpt_load: the checkpoint path is empty");
  /* the model still works */
  ZT_OK(zeroc_model_forward(m, &x));
  ZT_OK(zeroc_model_backward(m));
  ZT_OK(zeroc_model_step(m, 0.01f, NULL));
  zeroc_model_destroy(m);
}

static void test_ctx_calls_checked(void) {
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  int64_t v = 0;
  int lr = 0, ls = 0;
  double a = 1, b = 1;
  zeroc_mem_stats_t st;
  void *p = &v;
  zeroc_stream_t *s = NULL;
  zeroc_event_t *e = NULL;
  CU_ASSERT_EQUAL(zeroc_ctx_create(NULL, &cfg), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_create: the output pointer is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_finalize(NULL), ZEROC_OK); /* documented: nothing to do */
  zeroc_ctx_destroy(NULL);
  CU_ASSERT_EQUAL(zeroc_ctx_agree(NULL, ZEROC_OK), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_agree: the context is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_max_i64(NULL, &v), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_ctx_max_i64(ctx, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_ctx_max_i64: v is NULL");
  CU_ASSERT_PTR_NULL(zeroc_ctx_mesh(NULL));
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_mesh: the context is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_device(NULL), ZEROC_DEVICE_AUTO);
  CU_ASSERT_EQUAL(zeroc_ctx_peak_tflops(NULL), 0);
  zeroc_ctx_local(NULL, &lr, &ls);
  CU_ASSERT(lr == -1 && ls == 0);
  CU_ASSERT_EQUAL(zeroc_ctx_comm_timeout(NULL), 0);
  memset(&st, 0x5a, sizeof st);
  zeroc_ctx_memory(NULL, &st);
  CU_ASSERT_EQUAL(st.current_total[ZEROC_MEM_DEVICE], 0);
  zeroc_ctx_memory(ctx, NULL);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_memory: out is NULL");
  zeroc_ctx_memory_reset_peak(NULL);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_memory_reset_peak: the context is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_print_topology(NULL, stdout), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_ctx_print_topology(ctx, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_ctx_print_topology: out is NULL");
  CU_ASSERT_EQUAL(zeroc_ctx_probe_collectives(NULL, 64, 1, &a, &b), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_ctx_probe_collectives(ctx, 64, 1, NULL, &b), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc_mem_alloc(NULL, ZEROC_MEM_HOST, ZEROC_TAG_WORKSPACE, 8, &p),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_mem_alloc(ctx, ZEROC_MEM_HOST, ZEROC_TAG_WORKSPACE, 8, NULL),
                  ZEROC_ERR_INVALID_ARG);
  zeroc_mem_free(NULL, p); /* nothing to free through no context */
  CU_ASSERT_PTR_NULL(zeroc_ctx_compute_stream(NULL));
  CU_ASSERT_EQUAL(zeroc_stream_create(NULL, 0, &s), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_stream_create(ctx, 0, NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_create(NULL, &e), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_event_create: the context is NULL");
  CU_ASSERT_EQUAL(zeroc_event_create(ctx, NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(zeroc_last_error(NULL));
  /* the stream and event calls of zeroc/device.h */
  zeroc_stream_t *cs = zeroc_ctx_compute_stream(ctx);
  int done = 0;
  char bytes[8];
  ZT_OK(zeroc_event_create(ctx, &e));
  CU_ASSERT_EQUAL(zeroc_stream_sync(NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_stream_sync: a NULL argument (needs s)");
  CU_ASSERT_EQUAL(zeroc_memcpy_async(NULL, bytes, bytes, 4), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_memcpy_async(cs, NULL, bytes, 4), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_memset_async(NULL, bytes, 0, 4), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_memset_async(cs, NULL, 0, 4), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_record(NULL, cs), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_record(e, NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_stream_wait_event(NULL, e), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_sync(NULL), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_query(NULL, &done), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_event_query(e, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_event_query: a NULL argument (needs e && done)");
  zeroc_event_destroy(NULL);
  zeroc_stream_destroy(NULL);
  ZT_OK(zeroc_event_record(e, cs));
  ZT_OK(zeroc_event_sync(e));
  zeroc_event_destroy(e);
}

/* ---- Defect 4: init kinds ---------------------------------------------------------- */

static void test_init_kinds_refused(void) {
  zeroc_param_desc_t custom[] = {{.name = "c", .ndim = 1, .shape = {4}, .init = ZEROC_INIT_CUSTOM}};
  zeroc_param_desc_t odd[] = {
      {.name = "k", .ndim = 1, .shape = {4}, .init = (zeroc_init_kind_t)42}};
  zeroc_layer_t L1[] = {one_unit("u", custom, 1)}, L2[] = {one_unit("u", odd, 1)};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L1, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(m);
  EXPECT_MSG(zeroc_last_error(ctx), "parameter 0 ('c'): ZEROC_INIT_CUSTOM needs an init_fn");
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L2, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(m);
  EXPECT_MSG(zeroc_last_error(ctx), "parameter 0 ('k'): init kind 42; accepted");
}

/* ---- Defect 5: messages -------------------------------------------------------------- */

static void test_messages(void) {
  zeroc_layer_t L[] = {one_unit("a", P1, 1)};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, NULL, 4, &sc, &m), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_shard: the layer list is NULL (n 4)");
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 0, &sc, &m), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_shard: 0 units; need at least one");
  /* a NULL output is recorded in the context, not left to an older message */
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 1, &sc, NULL), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "zeroc_shard: the output pointer is NULL");
  CU_ASSERT_EQUAL(zeroc_shard(NULL, L, 1, &sc, &m), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_shard: the context is NULL");
  /* a NULL config is every field unset, as for zeroc_shard */
  zeroc_ctx_t *c = NULL;
  zeroc_result_t r = zeroc_ctx_create(&c, NULL);
  ZT_ASSERT_MSG(r == ZEROC_OK || r == ZEROC_ERR_INVALID_ARG, "%s: %s", zeroc_result_name(r),
                zeroc_last_error(NULL));
  if (r == ZEROC_OK) {
    CU_ASSERT_EQUAL(zeroc_ctx_mesh(c)->tp, 1);
    CU_ASSERT_EQUAL(zeroc_ctx_mesh(c)->dp, zt_world());
    ZT_OK(zeroc_ctx_finalize(c));
  } else { /* only a GPU shared by several ranks (ZEROC_DEVICE_AUTO picks cuda) */
    EXPECT_MSG(zeroc_last_error(NULL), "share cuda device");
  }
  CU_ASSERT_PTR_NULL(strstr(zeroc_last_error(NULL), "tp=0"));
}

/* ---- Defect 6: a failing callback ------------------------------------------------------ */

static zeroc_result_t fail_with_message(zeroc_layer_io_t *io) {
  (void)io;
  return zeroc_error_set(ZEROC_ERR_IO, "cannot read batch file '%s'", "b.bin");
}

static zeroc_result_t fail_silently(zeroc_layer_io_t *io) {
  (void)io;
  return ZEROC_ERR_NUMERIC;
}

static void test_callback_errors(void) {
  zeroc_layer_t L[] = {one_unit("reader", P1, 1)};
  char rank[32];
  snprintf(rank, sizeof rank, "on rank %d", zt_rank());
  L[0].forward = fail_with_message;
  zeroc_model_t *m = build(L, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  int x = 0;
  CU_ASSERT_EQUAL(zeroc_model_forward(m, &x), ZEROC_ERR_IO);
  EXPECT_MSG(zeroc_last_error(ctx), "cannot read batch file 'b.bin'");
  EXPECT_MSG(zeroc_last_error(ctx), "forward callback of unit 0 ('reader')");
  EXPECT_MSG(zeroc_last_error(ctx), rank);
  zeroc_model_destroy(m);
  /* a callback that says nothing: the engine says which, never an empty or older text */
  L[0].forward = nop;
  L[0].backward = fail_silently;
  m = build(L, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  ZT_OK(zeroc_model_forward(m, &x));
  CU_ASSERT_EQUAL(zeroc_model_backward(m), ZEROC_ERR_NUMERIC);
  EXPECT_MSG(zeroc_last_error(ctx), "the backward callback of unit 0 ('reader')");
  EXPECT_MSG(zeroc_last_error(ctx), "returned ZEROC_ERR_NUMERIC without a message");
  EXPECT_MSG(zeroc_last_error(ctx), rank);
  zeroc_model_destroy(m);
}

/* ---- Defect 7: models per context ------------------------------------------------------- */

static void test_model_limit_named(void) {
  zeroc_layer_t L[] = {one_unit("a", P1, 1)};
  zeroc_model_t *ms[ZEROC_MAX_MODELS] = {0};
  for (int i = 0; i < ZEROC_MAX_MODELS; i++) ms[i] = build(L, 1, 3);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  zeroc_model_t *extra = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, 1, &sc, &extra), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(extra);
  char want[64];
  snprintf(want, sizeof want, "at most %d models can be alive at once", ZEROC_MAX_MODELS);
  EXPECT_MSG(zeroc_last_error(ctx), want);
  for (int i = 0; i < ZEROC_MAX_MODELS; i++) zeroc_model_destroy(ms[i]);
  extra = build(L, 1, 3); /* room again */
  CU_ASSERT_PTR_NOT_NULL(extra);
  zeroc_model_destroy(extra);
}

/* ---- Defect 8: finalize with live models, dead handles ---------------------------------- */

static void test_finalize_and_dead_handles(void) {
  zeroc_ctx_t *saved = ctx;
  ctx = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  zeroc_layer_t L[] = {one_unit("a", P1, 1)};
  zeroc_model_t *m = build(L, 1, 3), *m2 = build(L, 1, 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(zeroc_ctx_finalize(ctx), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "2 model(s) built on this context are still alive");
  /* refused on every rank alike, and the context still works */
  int64_t v = zt_rank();
  ZT_OK(zeroc_ctx_max_i64(ctx, &v));
  CU_ASSERT_EQUAL(v, zt_world() - 1);
  zeroc_model_destroy(m2);
  int x = 0;
  ZT_OK(zeroc_model_forward(m, &x));
  ZT_OK(zeroc_model_backward(m));
  ZT_OK(zeroc_model_step(m, 0.01f, NULL));
  zeroc_model_destroy(m);
  /* dead handles: clean errors, no second free */
  zeroc_model_destroy(m);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_destroy: not a live model");
  CU_ASSERT_EQUAL(zeroc_model_num_units(m), -1);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_model_num_units: not a live model");
  CU_ASSERT_EQUAL(zeroc_model_forward(m, &x), ZEROC_ERR_INVALID_ARG);
  ZT_OK(zeroc_ctx_finalize(ctx));
  CU_ASSERT_EQUAL(zeroc_ctx_finalize(ctx), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_finalize: not a live context");
  CU_ASSERT_PTR_NULL(zeroc_ctx_mesh(ctx));
  zeroc_ctx_destroy(ctx); /* said, not freed twice */
  EXPECT_MSG(zeroc_last_error(NULL), "zeroc_ctx_destroy: not a live context");
  /* the local destroy with a model alive: the model still frees through it */
  ctx = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  m = build(L, 1, 3);
  zeroc_ctx_destroy(ctx);
  CU_ASSERT_PTR_NULL(zeroc_ctx_mesh(ctx)); /* no longer usable */
  zeroc_model_destroy(m);                  /* frees the context with it */
  ctx = saved;
}

/* ---- Defect 10: app_json ------------------------------------------------------------------ */

static void test_app_json_checked(void) {
  char dir[256] = "";
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-app-json");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  CU_ASSERT_FATAL(dir[0] != 0);
  zeroc_layer_t L[] = {one_unit("a", P1, 1)};
  zeroc_model_t *m = build(L, 1, 3);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(zeroc_ckpt_save(m, dir, 1, "{\"lr\": 0.1,"), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "app_json must be one JSON object");
  CU_ASSERT_EQUAL(zeroc_ckpt_save(m, dir, 1, "not json"), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_ckpt_save(m, dir, 1, "[1, 2]"), ZEROC_ERR_INVALID_ARG);
  EXPECT_MSG(zeroc_last_error(ctx), "app_json is a JSON array");
  /* nothing was written: no checkpoint to load */
  uint64_t step = 0;
  CU_ASSERT_NOT_EQUAL(zeroc_ckpt_load(m, dir, &step, NULL), ZEROC_OK);
  ZT_OK(zeroc_ckpt_save(m, dir, 2, "{\"lr\": 0.1}"));
  ZT_OK(zeroc_ckpt_save(m, dir, 3, NULL));
  ZT_OK(zeroc_ckpt_load(m, dir, &step, NULL));
  CU_ASSERT_EQUAL(step, 3);
  zeroc_model_destroy(m);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
}

static int setup(void) { return (ctx = zt_ctx(1, 1, 1)) == NULL; }
static int teardown(void) { return zeroc_ctx_finalize(ctx) != ZEROC_OK; }

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"descriptors are copied: free the arrays, save, load, compare", test_descriptors_copied},
      {"model calls with NULL, dead and out-of-range arguments", test_model_calls_checked},
      {"context calls with NULL arguments", test_ctx_calls_checked},
      {"custom init without init_fn and unknown init kinds are refused", test_init_kinds_refused},
      {"messages name the value, not our sources", test_messages},
      {"a failing callback's message names its unit and rank", test_callback_errors},
      {"the models-per-context limit is named", test_model_limit_named},
      {"finalize refuses live models; dead handles are caught", test_finalize_and_dead_handles},
      {"app_json that is not a JSON object is refused", test_app_json_checked},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "model_api", tests, 1, 0, setup, teardown);
}
