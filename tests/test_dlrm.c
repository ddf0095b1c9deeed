/*
 * tests/test_dlrm.c - the DLRM's pieces on one rank: the cpu kernels (ReLU, the
 * interaction, binary cross-entropy) against double references and finite
 * differences; the whole dense model's gradients (pooled input and a bottom
 * weight) by finite differences through zeroc_shard; AUC and log-loss on
 * hand-computed cases; the synthetic source's determinism; the Criteo reader
 * on a committed fixture and on malformed lines.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/clicks.h"
#include "kernels/dlrm_kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"
#include "zeroc/dlrm.h"
#include "zeroc/train.h"

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *K;

/* ---- kernels ------------------------------------------------------------------------- */

static void test_relu(void) {
  float x[6] = {-2, -0.5f, 0, 0.25f, 3, -1e-8f}, y[6], dx[6] = {1, 1, 1, 1, 1, 1};
  float dy[6] = {1, 2, 3, 4, 5, 6};
  CU_ASSERT_EQUAL(zeroc_k_relu_forward(K, NULL, y, x, 6), ZEROC_OK);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y[i], x[i] > 0 ? x[i] : 0.0f);
  CU_ASSERT_EQUAL(zeroc_k_relu_backward(K, NULL, dx, y, dy, 6), ZEROC_OK);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(dx[i], 1 + (x[i] > 0 ? dy[i] : 0));
}

/* L = sum(w * interact(z, emb)) in double */
static double interact_loss(const float *z, const float *e, const float *w, int B, int T, int D) {
  int F = T + 1, W = D + F * (F - 1) / 2;
  double L = 0;
  for (int b = 0; b < B; b++) {
    for (int d = 0; d < D; d++) L += (double)w[b * W + d] * z[b * D + d];
    int p = D;
    for (int i = 0; i < F; i++)
      for (int j = i + 1; j < F; j++, p++) {
        const float *vi = i ? e + ((size_t)b * T + i - 1) * D : z + b * D;
        const float *vj = e + ((size_t)b * T + j - 1) * D;
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)vi[d] * vj[d];
        L += w[b * W + p] * s;
      }
  }
  return L;
}

static void test_interaction(void) {
  enum { B = 3, T = 4, D = 5, F = T + 1, W = D + F * (F - 1) / 2 };
  float z[B * D], e[B * T * D], w[B * W], out[B * W], dz[B * D], de[B * T * D];
  zt_fill_normal(z, B * D, 1, 1.0f);
  zt_fill_normal(e, B * T * D, 2, 1.0f);
  zt_fill_normal(w, B * W, 3, 1.0f);
  CU_ASSERT_EQUAL(zeroc_k_interact_forward(K, NULL, out, z, e, B, T, D), ZEROC_OK);
  double L = 0;
  for (int i = 0; i < B * W; i++) L += (double)w[i] * out[i];
  CU_ASSERT(fabs(L - interact_loss(z, e, w, B, T, D)) < 1e-4 * (1 + fabs(L)));
  /* the pair order: out[D] is <z, emb0>, out[D + T] is <emb0, emb1> */
  double s0 = 0, s1 = 0;
  for (int d = 0; d < D; d++) s0 += z[d] * e[d], s1 += e[d] * e[D + d];
  CU_ASSERT(fabs(out[D] - s0) < 1e-5 && fabs(out[D + T] - s1) < 1e-5);
  memset(dz, 0, sizeof dz);
  memset(de, 0, sizeof de);
  CU_ASSERT_EQUAL(zeroc_k_interact_backward(K, NULL, dz, de, w, z, e, B, T, D), ZEROC_OK);
  double h = 1e-2, worst = 0;
  for (int i = 0; i < B * D; i++) {
    float keep = z[i];
    z[i] = keep + (float)h;
    double lp = interact_loss(z, e, w, B, T, D);
    z[i] = keep - (float)h;
    double lm = interact_loss(z, e, w, B, T, D);
    z[i] = keep;
    worst = fmax(worst, fabs((lp - lm) / (2 * h) - dz[i]));
  }
  for (int i = 0; i < B * T * D; i++) {
    float keep = e[i];
    e[i] = keep + (float)h;
    double lp = interact_loss(z, e, w, B, T, D);
    e[i] = keep - (float)h;
    double lm = interact_loss(z, e, w, B, T, D);
    e[i] = keep;
    worst = fmax(worst, fabs((lp - lm) / (2 * h) - de[i]));
  }
  CU_ASSERT(worst < 1e-3);
  if (worst >= 1e-3) printf("interaction gradient error %g\n", worst);
}

static void test_bce(void) {
  enum { B = 8 };
  float x[B] = {-100, -5, -0.5f, 0, 0.3f, 2, 40, 100}, y[B] = {0, 1, 0, 1, 1, 0, 1, 0};
  float loss[B], dl[B];
  CU_ASSERT_EQUAL(zeroc_k_bce_forward_backward(K, NULL, loss, dl, x, y, B, 0.5f), ZEROC_OK);
  for (int b = 0; b < B; b++) {
    double p = 1 / (1 + exp(-(double)x[b]));
    /* the stable form in double: -y log p - (1-y) log(1-p) */
    double want = (x[b] > 0 ? x[b] : 0) - x[b] * y[b] + log1p(exp(-fabs((double)x[b])));
    CU_ASSERT(isfinite(loss[b]) && fabs(loss[b] - want) <= 1e-5 * (1 + want));
    CU_ASSERT(fabs(dl[b] - 0.5 * (p - y[b])) < 1e-6);
    if (fabs(x[b]) < 10) { /* finite differences where the loss is not flat */
      double h = 1e-3,
             lp = (x[b] + h > 0 ? x[b] + h : 0) - (x[b] + h) * y[b] + log1p(exp(-fabs(x[b] + h)));
      double lm = (x[b] - h > 0 ? x[b] - h : 0) - (x[b] - h) * y[b] + log1p(exp(-fabs(x[b] - h)));
      CU_ASSERT(fabs(0.5 * (lp - lm) / (2 * h) - dl[b]) < 1e-4);
    }
  }
  CU_ASSERT(loss[0] < 1e-30f && fabs(loss[7] - 100) < 1e-4); /* no overflow at |x| = 100 */
  CU_ASSERT_EQUAL(zeroc_k_bce_forward_backward(K, NULL, loss, NULL, x, y, B, 1), ZEROC_OK);
}

/* ---- the whole dense model by finite differences ------------------------------------------ */

static zeroc_dlrm_config_t small_cfg(void) {
  zeroc_dlrm_config_t c;
  CU_ASSERT_EQUAL(zeroc_dlrm_preset("dlrm-tiny", &c), ZEROC_OK);
  c.tables = 3, c.dim = 4, c.dense = 3, c.batch = 5;
  c.nbottom = 2, c.bottom[0] = 6, c.bottom[1] = 4;
  c.ntop = 3, c.top[0] = 7, c.top[1] = 5, c.top[2] = 1;
  return c;
}

static void test_model_gradients(void) {
  zeroc_dlrm_config_t c = small_cfg();
  enum { B = 5 };
  zeroc_dlrm_t *d = NULL;
  zeroc_model_t *m = NULL;
  CU_ASSERT_FATAL(zeroc_dlrm_create(ctx, &c, B, &d) == ZEROC_OK);
  int n;
  const zeroc_layer_t *layers = zeroc_dlrm_layers(d, &n);
  CU_ASSERT_EQUAL(n, 5);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = 0;
  CU_ASSERT_FATAL(zeroc_shard(ctx, layers, n, &sc, &m) == ZEROC_OK);
  float dense[B * 3], labels[B] = {1, 0, 0, 1, 1}, pooled[B * 3 * 4], dpooled[B * 3 * 4];
  zt_fill_normal(dense, B * 3, 7, 1.0f);
  zt_fill_normal(pooled, B * 12, 8, 1.0f);
  zeroc_dlrm_batch_t b = {B, dense, labels, pooled, dpooled};
  CU_ASSERT_EQUAL(zeroc_model_forward(m, &b), ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc_model_backward(m), ZEROC_OK);
  double h = 1e-2, worst = 0;
  for (int i = 0; i < B * 12; i++) {
    float keep = pooled[i], lp, lm;
    pooled[i] = keep + (float)h;
    zeroc_model_eval(m, &b, &lp);
    pooled[i] = keep - (float)h;
    zeroc_model_eval(m, &b, &lm);
    pooled[i] = keep;
    worst = fmax(worst, fabs((lp - lm) / (2 * h) - dpooled[i]));
  }
  CU_ASSERT(worst < 2e-3);
  if (worst >= 2e-3) printf("d loss / d pooled error %g\n", worst);
  /* the first bottom weight: its gradient crosses the whole model */
  zeroc_unit_info_t ui;
  zeroc_model_unit_info(m, 0, &ui);
  float *master = malloc(sizeof(float) * ui.shard_numel),
        *grad = malloc(sizeof(float) * ui.shard_numel);
  zeroc_model_get_shard(m, 0, ZEROC_STATE_GRAD, grad);
  zeroc_model_get_shard(m, 0, ZEROC_STATE_MASTER, master);
  worst = 0;
  for (int i = 0; i < 18; i++) { /* weight (6, 3) */
    float keep = master[i], lp, lm;
    master[i] = keep + (float)h;
    zeroc_model_set_shard(m, 0, ZEROC_STATE_MASTER, master);
    zeroc_model_sync_params(m);
    zeroc_model_eval(m, &b, &lp);
    master[i] = keep - (float)h;
    zeroc_model_set_shard(m, 0, ZEROC_STATE_MASTER, master);
    zeroc_model_sync_params(m);
    zeroc_model_eval(m, &b, &lm);
    master[i] = keep;
    worst = fmax(worst, fabs((lp - lm) / (2 * h) - grad[i]));
    if (getenv("ZT_DEBUG")) printf("w%d fd %g grad %g\n", i, (lp - lm) / (2 * h), grad[i]);
  }
  zeroc_model_set_shard(m, 0, ZEROC_STATE_MASTER, master);
  CU_ASSERT(worst < 2e-3);
  if (worst >= 2e-3) printf("d loss / d bottom.0.weight error %g\n", worst);
  free(master), free(grad);
  zeroc_model_destroy(m);
  zeroc_dlrm_destroy(d);
}

static void test_config_checks(void) {
  zeroc_dlrm_config_t c = small_cfg();
  CU_ASSERT_EQUAL(zeroc_dlrm_config_check(&c), ZEROC_OK);
  c.bottom[1] = 5; /* not dim */
  CU_ASSERT_EQUAL(zeroc_dlrm_config_check(&c), ZEROC_ERR_INVALID_ARG);
  c = small_cfg(), c.top[2] = 2;
  CU_ASSERT_EQUAL(zeroc_dlrm_config_check(&c), ZEROC_ERR_INVALID_ARG);
  c = small_cfg(), c.rows[1] = 0;
  CU_ASSERT_EQUAL(zeroc_dlrm_config_check(&c), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_dlrm_preset("dlrm-huge", &c), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_dlrm_preset("dlrm-mlperf", &c), ZEROC_OK);
  CU_ASSERT(c.tables == 26 && c.dim == 128 && c.rows[0] == 39884406 && c.top[4] == 1);
  CU_ASSERT_EQUAL(zeroc_dlrm_interaction_width(&c), 128 + 27 * 26 / 2);
  CU_ASSERT_EQUAL(zeroc_dlrm_config_check(&c), ZEROC_OK);
}

/* ---- metrics ----------------------------------------------------------------------------- */

static void test_auc_logloss(void) {
  /* positives 0.35, 0.8; negatives 0.1, 0.4: of the 4 pairs, 3 ordered right */
  float p[4] = {0.1f, 0.4f, 0.35f, 0.8f}, y[4] = {0, 0, 1, 1};
  CU_ASSERT(fabs(zeroc__auc(p, y, 4) - 0.75) < 1e-12);
  /* a tie between a positive and a negative counts half: (1 + 0.5) / 2 */
  float pt[3] = {0.5f, 0.5f, 0.9f}, yt[3] = {0, 1, 1};
  CU_ASSERT(fabs(zeroc__auc(pt, yt, 3) - 0.75) < 1e-12);
  CU_ASSERT(isnan(zeroc__auc(p, (float[4]){1, 1, 1, 1}, 4)));
  double ll = -(log(0.9) + log(0.6) + log(0.35) + log(0.8)) / 4;
  CU_ASSERT(fabs(zeroc__logloss(p, y, 4) - ll) < 1e-6);
  float half[2] = {0.5f, 0.5f};
  CU_ASSERT(fabs(zeroc__mean_entropy(half, 2) - log(2.0)) < 1e-12);
}

/* ---- data ---------------------------------------------------------------------------------- */

static zeroc__click_batch_t batch_alloc(int B, int T, int F, int hot) {
  zeroc__click_batch_t b = {malloc(sizeof(float) * B * F), malloc(sizeof(float) * B),
                            malloc(sizeof(float) * B), malloc(sizeof(int32_t) * B * T),
                            malloc(sizeof(int64_t) * B * T * hot)};
  return b;
}

static void batch_free(zeroc__click_batch_t *b) {
  free(b->dense), free(b->labels), free(b->probs), free(b->lengths), free(b->ids);
}

static void test_synthetic(void) {
  int64_t rows[3] = {10, 1000, 7};
  zeroc__click_shape_t sh = {3, 4, 2, rows};
  zeroc__clicks_t *c;
  CU_ASSERT_FATAL(zeroc__clicks_synth(&sh, 5, &c) == ZEROC_OK);
  zeroc__click_batch_t a = batch_alloc(8, 3, 4, 2), b = batch_alloc(4, 3, 4, 2);
  CU_ASSERT_EQUAL(zeroc__clicks_read(c, 100, 8, &a), ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__clicks_read(c, 104, 4, &b), ZEROC_OK); /* a second rank's half */
  CU_ASSERT(!memcmp(a.dense + 16, b.dense, sizeof(float) * 16));
  CU_ASSERT(!memcmp(a.labels + 4, b.labels, sizeof(float) * 4));
  for (int t = 0; t < 3; t++)
    for (int j = 0; j < 4; j++)
      for (int h = 0; h < 2; h++) {
        int64_t ia = a.ids[((size_t)t * 8 + 4 + j) * 2 + h],
                ib = b.ids[((size_t)t * 4 + j) * 2 + h];
        CU_ASSERT(ia == ib && ia >= 0 && ia < rows[t]);
      }
  for (int j = 0; j < 8; j++) CU_ASSERT(a.probs[j] > 0 && a.probs[j] < 1 && a.lengths[j] == 2);
  batch_free(&a), batch_free(&b);
  zeroc__clicks_destroy(c);
}

static const int64_t *criteo_rows(void) {
  static int64_t rows[26];
  for (int t = 0; t < 26; t++) rows[t] = 1 + 37 * t;
  return rows;
}

static void test_criteo_fixture(void) {
  zeroc__click_shape_t sh = {26, 13, 1, criteo_rows()};
  zeroc__clicks_t *c;
  CU_ASSERT_FATAL(zeroc__clicks_criteo(ZEROC_FIXTURES "/criteo_small.tsv", &sh, &c) == ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__clicks_count(c), 40);
  zeroc__click_batch_t b = batch_alloc(41, 26, 13, 1);
  CU_ASSERT_EQUAL(zeroc__clicks_read(c, 0, 41, &b), ZEROC_OK); /* wraps: sample 40 is 0 */
  CU_ASSERT_EQUAL(b.labels[0], b.labels[40]);
  /* line 1: label 0, I1 empty, I2 245, I3 12345 */
  CU_ASSERT(b.labels[0] == 0 && b.dense[0] == 0 && fabsf(b.dense[1] - logf(246)) < 1e-5f &&
            fabsf(b.dense[2] - logf(12346)) < 1e-4f);
  for (int t = 0; t < 26; t++)
    for (int j = 0; j < 41; j++) {
      int64_t id = b.ids[(size_t)t * 41 + j];
      CU_ASSERT(id >= 0 && id < criteo_rows()[t] && b.lengths[(size_t)t * 41 + j] == 1);
    }
  batch_free(&b);
  zeroc__clicks_destroy(c);
  sh.tables = 8; /* another model's shape is refused, naming the fix */
  CU_ASSERT_EQUAL(zeroc__clicks_criteo(ZEROC_FIXTURES "/criteo_small.tsv", &sh, &c),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(strstr(zeroc__tls_error(), "26") != NULL);
}

/* Writes `line` after one good line of the fixture into a temporary file and
 * expects the reader to refuse it at line 2 with `what` in the message. */
static void expect_bad(const char *line, const char *what) {
  char path[] = "/tmp/zeroc_criteo_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13");
  for (int t = 0; t < 26; t++) fprintf(f, "\t%08x", t);
  fprintf(f, "\n%s\n", line);
  fclose(f);
  zeroc__click_shape_t sh = {26, 13, 1, criteo_rows()};
  zeroc__clicks_t *c = NULL;
  CU_ASSERT_EQUAL(zeroc__clicks_criteo(path, &sh, &c), ZEROC_ERR_INVALID_ARG);
  char want[128];
  snprintf(want, sizeof want, "%s:2:", path);
  const char *e = zeroc__tls_error();
  CU_ASSERT(strstr(e, want) != NULL && strstr(e, what) != NULL);
  if (!strstr(e, want) || !strstr(e, what))
    printf("message '%s' lacks '%s' / '%s'\n", e, want, what);
  remove(path);
}

static void test_criteo_malformed(void) {
  char line[1024], cats[400] = "";
  for (int t = 0; t < 26; t++) sprintf(cats + strlen(cats), "\t%x", t + 10);
  snprintf(line, sizeof line, "2\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s", cats);
  expect_bad(line, "label '2': accepted 0 or 1");
  snprintf(line, sizeof line, "1\t1\tx2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s", cats);
  expect_bad(line, "integer feature 2 'x2'");
  snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t99999999999999999%s",
           cats);
  expect_bad(line, "integer feature 13");
  snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s\textra", cats);
  expect_bad(line, "more than 40 fields");
  snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\tzz%s", cats + 2);
  expect_bad(line, "categorical feature 1 'zz'");
  snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\t123456789%s",
           cats + 2);
  expect_bad(line, "categorical feature 1 '123456789'");
  expect_bad("1\t2\t3", "3 fields; accepted 40");
  expect_bad("", "1 fields; accepted 40");
  zeroc__click_shape_t sh = {26, 13, 1, criteo_rows()};
  zeroc__clicks_t *c = NULL;
  CU_ASSERT_EQUAL(zeroc__clicks_criteo("/nonexistent/criteo.tsv", &sh, &c), ZEROC_ERR_IO);
  CU_ASSERT(strstr(zeroc__tls_error(), "/nonexistent/criteo.tsv") != NULL);
}

/* ---- the trainer's DLRM path through the public API ------------------------------------------ */

static void test_trainer(void) {
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "dlrm-tiny";
  c.rows = "30,40,50,60";
  c.bottom = "12,8";
  c.steps = 3;
  c.lr = 0.01;
  c.val_tokens = 64;
  c.val_every = 3;
  zeroc_trainer_t *tr = NULL;
  CU_ASSERT_FATAL(zeroc_trainer_create(ctx, &c, &tr) == ZEROC_OK);
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  CU_ASSERT(in.dlrm && in.dlrm_model.rows[3] == 60 && in.dlrm_model.bottom[0] == 12);
  CU_ASSERT(in.auc_ceiling > 0.5 && in.auc_ceiling < 1 && in.logloss_floor > 0);
  CU_ASSERT(in.val_batches == 2 && in.global_batch == 32); /* 64 samples: 2 global batches */
  zeroc_train_metrics_t m;
  int evaluated = 0;
  do {
    CU_ASSERT_FATAL(zeroc_trainer_step(tr, &m) == ZEROC_OK);
    CU_ASSERT(isfinite(m.loss) && m.loss > 0);
    evaluated += m.evaluated;
  } while (!m.done);
  CU_ASSERT(evaluated == 1 && isfinite(m.auc) && isfinite(m.logloss) && m.tokens == 32);
  double loss;
  CU_ASSERT_EQUAL(zeroc_trainer_evaluate(tr, &loss), ZEROC_OK);
  CU_ASSERT(fabs(loss - m.val_loss) < 1e-9); /* nothing changed since */
  CU_ASSERT_EQUAL(zeroc_trainer_export(tr, "/tmp/x.safetensors"), ZEROC_ERR_UNSUPPORTED);
  zeroc_trainer_destroy(tr);
  /* refused configs, one message each */
  const char *bad_bottom[] = {"12,x", "", "0,8", NULL};
  for (int i = 0; bad_bottom[i]; i++) {
    zeroc_train_config_t b = c;
    b.bottom = bad_bottom[i];
    CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &b, &tr), ZEROC_ERR_INVALID_ARG);
  }
  zeroc_train_config_t b = c;
  b.grad_accum = 2;
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &b, &tr), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(strstr(zeroc_last_error(ctx), "grad_accum 2") != NULL);
  b = c, b.embedding_sharding = 7;
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &b, &tr), ZEROC_ERR_INVALID_ARG);
  b = c, b.dim = 16; /* the bottom MLP given ends in 8 */
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &b, &tr), ZEROC_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"relu forward and backward", test_relu},
      {"interaction vs reference and finite differences", test_interaction},
      {"binary cross-entropy: stable, gradient", test_bce},
      {"dense model gradients by finite differences", test_model_gradients},
      {"config checks and the MLPerf preset", test_config_checks},
      {"AUC and log-loss on hand-computed cases", test_auc_logloss},
      {"synthetic clicks: deterministic, split by rank", test_synthetic},
      {"Criteo TSV fixture", test_criteo_fixture},
      {"Criteo TSV malformed lines", test_criteo_malformed},
      {"trainer API: steps, evaluation, refused configs", test_trainer},
      ZT_END,
  };
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &K))
    return 1;
  int rc = zt_run("dlrm", tests);
  zeroc_kernels_destroy(K);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return rc;
}
