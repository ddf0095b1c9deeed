/*
 * tests/test_model_io_pp.c - export, import and the evaluation's global mean of
 * a user model cut into pipeline stages (zeroc_model_export / _import /
 * _eval_mean with pp > 1), issue 36. A four-unit chain (two units share the
 * name "block", on different stages) is exported at 1 rank; then on 2 ranks
 * (pp 2; pp 2 with two chunks per rank, interleaved) and on 4 (pp 2 x dp 2, the
 * same with chunks, pp 4) every layout writes the same file byte for byte,
 * imports it bit for bit into each stage's units, and its evaluation mean over
 * the stages and the data-parallel ranks is the 1-rank evaluation of the whole
 * batch. A stage without its pipeline cannot evaluate, and two stages' names
 * that clash are refused, naming both stages.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { NU = 4, IN = 6, GB = 8 };

/* ---- the model: out = in * w + b per unit, a squared-error head ---------------------- */

typedef struct {
  int rows;
  const float *x, *y; /* (rows, IN), (rows) */
} batch_t;

static const int *g_umap; /* local unit -> global unit (this rank's stage models) */
static float g_act[NU][GB * IN];

static int gu(int u) { return g_umap ? g_umap[u] : u; }

static zeroc_result_t chain_fwd(zeroc_layer_io_t *io) {
  const batch_t *b = io->batch;
  const float *in = gu(io->unit) == 0 ? b->x : io->in, *w = io->params[0], *bias = io->params[1];
  float *out = g_act[gu(io->unit)];
  for (int i = 0; i < b->rows; i++)
    for (int c = 0; c < IN; c++) out[i * IN + c] = in[i * IN + c] * w[c] + bias[c];
  io->out = out;
  return ZEROC_OK;
}

/* loss = mean over rows of (in . w - y)^2 */
static zeroc_result_t head_fwd(zeroc_layer_io_t *io) {
  const batch_t *b = io->batch;
  const float *in = io->in, *w = io->params[0];
  double s = 0;
  for (int i = 0; i < b->rows; i++) {
    double z = -b->y[i];
    for (int c = 0; c < IN; c++) z += (double)in[i * IN + c] * w[c];
    s += z * z;
  }
  *io->loss = (float)(s / b->rows);
  io->out = NULL;
  return ZEROC_OK;
}

static zeroc_result_t nop_bwd(zeroc_layer_io_t *io) {
  io->din = NULL;
  return ZEROC_OK;
}

static zeroc_param_desc_t g_p[NU][3];
static zeroc_layer_t g_all[NU];

static void model_layers(void) {
  static const char *names[NU] = {"inp", "block", "block", "head"};
  static const int np[NU] = {2, 3, 3, 1};
  for (int u = 0; u < NU; u++) {
    zeroc_param_desc_t *p = g_p[u];
    p[0] = (zeroc_param_desc_t){.name = "w", .ndim = 1, .shape = {IN}, .init_scale = 0.3f};
    p[1] = (zeroc_param_desc_t){.name = "b", .ndim = 1, .shape = {IN}, .init_scale = 0.1f};
    p[2] = (zeroc_param_desc_t){.name = "m", .ndim = 2, .shape = {3, 5}, .init_scale = 0.1f};
    for (int j = 0; j < 3; j++) p[j].init = ZEROC_INIT_NORMAL;
    g_all[u] = (zeroc_layer_t){.name = names[u],
                               .nparams = np[u],
                               .params = p,
                               .shares = -1,
                               .forward = u == NU - 1 ? head_fwd : chain_fwd,
                               .backward = nop_bwd};
  }
}

static float value(int u, int p, uint64_t g) {
  return zeroc_rng_normal(4321, (uint64_t)(u * 8 + p), g);
}

/* Sets (check 0) or compares (check 1) every parameter of the model's units with
 * value() at its global unit; returns the values that differ. */
static long values(zeroc_model_t *m, int check) {
  long bad = 0;
  for (int u = 0; u < zeroc_model_num_units(m); u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(m, u, &ui));
    float *flat = calloc(ui.flat_numel, sizeof(float));
    if (check) ZT_OK(zeroc_model_gather_unit(m, u, flat));
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      float *v = flat + zeroc_model_param_offset(m, u, p);
      for (uint64_t j = 0; j < zeroc_param_numel(pd); j++) {
        float want = value(gu(u), p, j);
        if (!check)
          v[j] = want;
        else if (memcmp(&v[j], &want, sizeof want))
          bad++;
      }
    }
    if (!check) ZT_OK(zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, flat + ui.shard_offset));
    free(flat);
  }
  if (!check) ZT_OK(zeroc_model_sync_params(m));
  return bad;
}

static float g_x[GB * IN], g_y[GB];
static char g_dir[256];
static double g_ref_loss;

static void path_of(char *out, size_t n, const char *file) {
  snprintf(out, n, "%s/%s", g_dir, file);
}

static int setup(void) {
  model_layers();
  zt_fill_uniform(g_x, GB * IN, 11, -1, 1);
  zt_fill_uniform(g_y, GB, 12, -1, 1);
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc-model-io-pp");
    snprintf(g_dir, sizeof g_dir, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  return g_dir[0] ? 0 : 1;
}

/* Rank 0 alone: the 1-rank export and the 1-rank evaluation of the whole batch. */
static void test_reference(void) {
  if (zt_rank() == 0) {
    zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
    cc.device = ZEROC_DEVICE_CPU;
    cc.threads = 1;
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    cc.mpi_comm = &self;
    zeroc_ctx_t *c = NULL;
    zeroc_model_t *m = NULL;
    ZT_OK(zeroc_ctx_create(&c, &cc));
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ZT_OK(zeroc_shard(c, g_all, NU, NULL, &m));
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    values(m, 0);
    char path[512];
    path_of(path, sizeof path, "ref.safetensors");
    batch_t b = {GB, g_x, g_y};
    ZT_OK(zeroc_model_export(m, path));
    ZT_OK(zeroc_model_eval_mean(m, &b, &g_ref_loss));
    CU_ASSERT(g_ref_loss > 0);
    zeroc_model_destroy(m);
    ZT_OK(zeroc_ctx_finalize(c));
    MPI_Comm_free(&self);
  }
  MPI_Bcast(&g_ref_loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

static int cleanup(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0 && g_dir[0]) zt_rmtree(g_dir);
  return 0;
}

/* ---- one pipeline layout ---------------------------------------------------------------- */

/* This rank's stage model of pipeline `pp` with `v` chunks of NU / (pp v) units
 * (chunk c of rank r is stage c pp + r), its pipeline created when `pipe`. */
typedef struct {
  zeroc_model_t *m;
  zeroc_pipeline_t *pl;
  int umap[NU], n;
} stage_t;

static void stage_build(zeroc_ctx_t *c, int v, uint64_t seed, int pipe, stage_t *s) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(c);
  int per = NU / (mesh->pp * v), first[NU], count[NU];
  zeroc_layer_t L[NU];
  s->n = 0;
  for (int ch = 0; ch < v; ch++) {
    first[ch] = s->n, count[ch] = per;
    for (int k = 0; k < per; k++) {
      s->umap[s->n] = (ch * mesh->pp + mesh->pp_rank) * per + k;
      L[s->n] = g_all[s->umap[s->n]];
      s->n++;
    }
  }
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = 1;
  sc.seed = seed;
  sc.grad_accum = v > 1 ? mesh->pp : 1; /* interleaved: a multiple of pp micro-batches */
  s->m = NULL, s->pl = NULL;
  ZT_OK(zeroc_shard(c, L, s->n, &sc, &s->m));
  if (!pipe || !s->m) return;
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  pc.schedule = v > 1 ? ZEROC_PIPELINE_INTERLEAVED : ZEROC_PIPELINE_1F1B;
  pc.microbatches = sc.grad_accum;
  pc.chunks = v;
  pc.act_numel = (size_t)(GB / mesh->dp) * IN;
  ZT_OK(zeroc_pipeline_create(s->m, first, count, &pc, &s->pl));
}

static void stage_free(stage_t *s) {
  zeroc_pipeline_destroy(s->pl);
  zeroc_model_destroy(s->m);
}

static void check_layout(int pp, int v) {
  char what[64], file[64], path[512], ref[512];
  snprintf(what, sizeof what, "pp %d x dp %d, %d chunk(s)", pp, zt_world() / pp, v);
  snprintf(file, sizeof file, "pp%d_dp%d_v%d.safetensors", pp, zt_world() / pp, v);
  path_of(path, sizeof path, file);
  path_of(ref, sizeof ref, "ref.safetensors");
  zeroc_ctx_t *c = zt_ctx(1, pp, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(c);
  stage_t s;
  /* export: one chunk per rank needs no pipeline to name the units; chunks do */
  stage_build(c, v, 1, v > 1, &s);
  g_umap = s.umap;
  values(s.m, 0);
  zeroc_result_t r = zeroc_model_export(s.m, path);
  ZT_ASSERT_MSG(r == ZEROC_OK, "%s: export: %s", what, zeroc_last_error(c));
  if (zt_rank() == 0) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", ref, path);
    ZT_ASSERT_MSG(system(cmd) == 0, "%s: the export differs from the 1-rank one", what);
  }
  stage_free(&s);
  /* import into fresh weights, then the evaluation's mean over stages and dp */
  stage_build(c, v, 99, 1, &s);
  CU_ASSERT(values(s.m, 1) > 0);
  r = zeroc_model_import(s.m, ref);
  ZT_ASSERT_MSG(r == ZEROC_OK, "%s: import: %s", what, zeroc_last_error(c));
  long bad = values(s.m, 1);
  ZT_ASSERT_MSG(bad == 0, "%s: %ld imported values differ from the file's", what, bad);
  int rows = GB / mesh->dp;
  batch_t b = {rows, g_x + mesh->dp_rank * rows * IN, g_y + mesh->dp_rank * rows};
  double l = -1;
  r = zeroc_model_eval_mean(s.m, &b, &l);
  ZT_ASSERT_MSG(r == ZEROC_OK, "%s: eval mean: %s", what, zeroc_last_error(c));
  ZT_ASSERT_MSG(fabs(l - g_ref_loss) <= 1e-6 * fabs(g_ref_loss),
                "%s: eval mean %.9g, the 1-rank evaluation %.9g", what, l, g_ref_loss);
  double lo = l, hi = l;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  ZT_ASSERT_MSG(lo == hi, "%s: eval mean %.9g .. %.9g across ranks", what, lo, hi);
  /* the pipeline's own evaluation of the same rows agrees */
  const void *bs[NU] = {&b, &b, &b, &b};
  double pl = -1;
  ZT_OK(zeroc_pipeline_eval(s.pl, bs, &pl));
  ZT_OK(zeroc_ctx_allreduce(c, ZEROC_GROUP_DP, &pl, 1, ZEROC_AVG));
  ZT_ASSERT_MSG(fabs(pl - l) <= 1e-6 * fabs(l), "%s: pipeline eval %.9g, eval mean %.9g", what, pl,
                l);
  stage_free(&s);
  g_umap = NULL;
  ZT_OK(zeroc_ctx_finalize(c));
}

static void test_pipeline_layouts(void) {
  int W = zt_world();
  if (W < 2) {
    zt_not_checked("pipeline export, import and eval mean (needs 2 or 4 ranks)");
    return;
  }
  check_layout(2, 1);
  check_layout(2, 2);
  if (W == 4) check_layout(4, 1);
}

/* A stage model without its pipeline cannot evaluate the whole model: one line. */
static void test_eval_mean_needs_pipeline(void) {
  if (zt_world() < 2) {
    zt_not_checked("eval mean without a pipeline (needs 2 ranks)");
    return;
  }
  zeroc_ctx_t *c = zt_ctx(1, 2, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  stage_t s;
  stage_build(c, 1, 1, 0, &s);
  g_umap = s.umap;
  batch_t b = {GB, g_x, g_y};
  double l = -1;
  CU_ASSERT_EQUAL(zeroc_model_eval_mean(s.m, &b, &l), ZEROC_ERR_INVALID_ARG);
  const char *msg = zeroc_last_error(c);
  ZT_ASSERT_MSG(strstr(msg, "create it first (zeroc_pipeline_create)"), "message: %s", msg);
  CU_ASSERT_EQUAL(l, -1);
  stage_free(&s);
  g_umap = NULL;
  ZT_OK(zeroc_ctx_finalize(c));
}

/* A clash between the names of two stages' parameters is refused on every rank,
 * naming both stages; nothing is written. */
static void test_name_clash_across_stages(void) {
  if (zt_world() < 2) {
    zt_not_checked("a name clash across stages (needs 2 ranks)");
    return;
  }
  zeroc_ctx_t *c = zt_ctx(1, 2, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int r0 = zeroc_ctx_mesh(c)->pp_rank == 0;
  zeroc_param_desc_t p = {.name = r0 ? "c" : "b.c", .ndim = 1, .shape = {4}};
  zeroc_layer_t L = {.name = r0 ? "a.b" : "a",
                     .nparams = 1,
                     .params = &p,
                     .shares = -1,
                     .forward = chain_fwd,
                     .backward = nop_bwd};
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(c, &L, 1, NULL, &m));
  char path[512];
  path_of(path, sizeof path, "clash.safetensors");
  CU_ASSERT_EQUAL(zeroc_model_export(m, path), ZEROC_ERR_INVALID_ARG);
  const char *msg = zeroc_last_error(c);
  ZT_ASSERT_MSG(strstr(msg, "parameter 0 of unit 0 of pipeline stage 0 and parameter 0 of unit 0 "
                            "of pipeline stage 1 are both named 'a.b.c'"),
                "message: %s", msg);
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NULL(f);
  if (f) fclose(f);
  zeroc_model_destroy(m);
  ZT_OK(zeroc_ctx_finalize(c));
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"1-rank reference: export and eval", test_reference},
      {"pipeline layouts: export, import, eval mean", test_pipeline_layouts},
      {"eval mean needs the pipeline", test_eval_mean_needs_pipeline},
      {"a name clash across stages", test_name_clash_across_stages},
      ZT_END};
  return zt_run_mpi_ex(argc, argv, "model_io_pp", tests, 1, 0, setup, cleanup);
}
