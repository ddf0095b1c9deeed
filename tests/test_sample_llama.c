/*
 * tests/test_sample_llama.c - the sampler on the Llama family (model/sample_llama.c):
 * its logits, fed through the KV cache and without it, equal the training
 * forward's for the same weights on the same tokens (llama-tiny: grouped-query
 * attention, llama3 rope scaling, untied head; qwen-tiny: q/k/v biases, tied
 * head), ZeRO-3 over every rank; the cache keeps NKV kv heads and changes no
 * token when the window slides; a trainer's sampler equals its checkpoint's; files that
 * transformers saved give transformers' logits and greedy tokens.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt_internal.h"
#include "model/sample.h"
#include "testutil.h"
#include "zeroc/sample.h"

enum { T = 16 };

/* preset with a 16-token context and a vocabulary of padded rows; llama-tiny's llama3
 * scaling with an original context of 64 positions, so some of its 8 frequencies are
 * divided, some blended and some kept */
static zeroc_gpt_config_t shape(const char *preset) {
  zeroc_gpt_config_t c;
  ZT_OK(zeroc_gpt_preset(preset, &c));
  c.seq = T, c.vocab = 97, c.batch = 1;
  if (c.rope_factor > 0) c.rope_original = 64;
  return c;
}

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_gpt_t *gpt;
  zeroc_model_t *m;
} run_t;

/* The model over every rank (ZeRO-3), every weight drawn uniform in [-0.5, 0.5] (the
 * biases and norms too, which their init leaves 0 and 1). */
static int run_open(run_t *r, const zeroc_gpt_config_t *cfg, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->ctx = zt_ctx(1, 1, 1);
  if (!r->ctx) return -1;
  ZT_OK(zeroc_gpt_create(r->ctx, cfg, 1, 0, ZEROC_FP32, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = ZEROC_SHARD_CONFIG_INIT;
  s.stage = 3;
  s.seed = seed;
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  if (!r->m) return -1;
  for (int u = 0; u < zeroc_model_num_units(r->m); u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r->m, u, &ui));
    float *v = malloc(ui.shard_numel * sizeof(float) + 4);
    zt_fill_uniform(v, ui.shard_numel, seed * 1000 + (uint64_t)u * 10 + (uint64_t)zt_rank(), -0.5f,
                    0.5f);
    ZT_OK(zeroc_model_set_shard(r->m, u, ZEROC_STATE_MASTER, v));
    free(v);
  }
  ZT_OK(zeroc_model_sync_params(r->m));
  return 0;
}

static void run_close(run_t *r) {
  zeroc_model_destroy(r->m);
  zeroc_gpt_destroy(r->gpt);
  if (r->ctx) ZT_OK(zeroc_ctx_finalize(r->ctx));
}

static void tokens(int32_t *in, int n, int V, uint64_t seed) {
  for (int i = 0; i < n; i++) in[i] = (int32_t)(zt_rand_u64(&seed) % (uint64_t)V);
}

/* The worst relative error of got (T,V) against the training's ref (T,Vp) over the rows. */
static double worst_err(const float *got, const float *ref, int V, int Vp) {
  double worst = 0;
  for (int t = 0; t < T; t++) {
    double e = zt_rel_err(got + (size_t)t * V, ref + (size_t)t * Vp, (size_t)V);
    if (e > worst) worst = e;
  }
  return worst;
}

static void logits_equal_training(const char *preset, uint64_t seed) {
  const zeroc_gpt_config_t cfg = shape(preset);
  run_t r;
  if (run_open(&r, &cfg, seed)) return;
  int32_t in[T];
  tokens(in, T, cfg.vocab, seed + 7);
  zeroc_gpt_batch_t b = {1, T, in, NULL, 0, 0}; /* no targets: the head keeps the logits */
  float l;
  ZT_OK(zeroc_model_eval(r.m, &b, &l));
  const float *ref = zeroc__gpt_logits(r.gpt, 0);
  int Vp = zeroc_gpt_padded_vocab(r.gpt), V = cfg.vocab;
  zeroc_sampler_t *s = NULL;
  ZT_OK(zeroc__gpt_sampler(r.m, r.gpt, &s));
  CU_ASSERT((zt_rank() == 0) == (s != NULL));
  if (s && ref) {
    float *cached = malloc(sizeof(float) * T * V), *whole = malloc(sizeof(float) * T * V);
    ZT_OK(zeroc_sampler_logits(s, in, T, cached));
    zeroc_sampler_set_cache(s, 0);
    ZT_OK(zeroc_sampler_logits(s, in, T, whole));
    double ec = worst_err(cached, ref, V, Vp), ew = worst_err(whole, ref, V, Vp);
    if (getenv("ZT_VERBOSE"))
      printf("\n  %s: rel err %.3g cached, %.3g whole window\n", preset, ec, ew);
    ZT_ASSERT_MSG(ec < 1e-5 && ew < 1e-5,
                  "%s: logits vs the training forward: rel err %.3g through the KV cache, %.3g "
                  "without it",
                  preset, ec, ew);
    /* the reference is not trivially near: the positions' logits differ */
    CU_ASSERT(zt_rel_err(ref, ref + (size_t)(T - 1) * Vp, (size_t)V) > 1e-2);
    free(cached);
    free(whole);
  }
  zeroc_sampler_destroy(s);
  run_close(&r);
}

static void test_llama_logits(void) { logits_equal_training("llama-tiny", 3); }
static void test_qwen_logits(void) { logits_equal_training("qwen-tiny", 4); }

/* Generation beyond the window: greedy and seeded draws are the same tokens with the
 * cache and without it (the slid window's positions restart at 0 either way). */
static void test_generate(void) {
  const char *presets[2] = {"llama-tiny", "qwen-tiny"};
  for (int k = 0; k < 2; k++) {
    const zeroc_gpt_config_t cfg = shape(presets[k]);
    run_t r;
    if (run_open(&r, &cfg, 9 + (uint64_t)k)) return;
    zeroc_sampler_t *s = NULL;
    ZT_OK(zeroc__gpt_sampler(r.m, r.gpt, &s));
    enum { N = 40 };
    int32_t p[20], a[N], b[N], c[N];
    tokens(p, 20, cfg.vocab, 31);
    if (s) {
      CU_ASSERT(zeroc_sampler_config(s)->kv_heads == cfg.kv_heads);
      ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.0, 0, 1, a));
      ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.9, 20, 5, b));
      zeroc_sampler_set_cache(s, 0);
      ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.0, 0, 1, c));
      ZT_ASSERT_MSG(!memcmp(a, c, sizeof a), "%s: the cache changed a greedy token", presets[k]);
      ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.9, 20, 5, c));
      ZT_ASSERT_MSG(!memcmp(b, c, sizeof b), "%s: the cache changed a drawn token", presets[k]);
      int distinct = 0; /* not one token repeated: the model's positions matter */
      for (int i = 1; i < N; i++) distinct += a[i] != a[0];
      CU_ASSERT(distinct > 0);
    }
    zeroc_sampler_destroy(s);
    run_close(&r);
  }
}

/* A directory every rank sees: rank 0 makes it. */
static char *shared_dir(void) {
  char buf[512] = {0};
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc_sample_llama");
    snprintf(buf, sizeof buf, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf[0] ? strdup(buf) : NULL;
}

/* A llama-tiny trainer (ZeRO-3 over every rank): its sampler, its checkpoint's and the
 * sample it generates agree bit for bit. */
static void test_trainer_checkpoint(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  char *dir = shared_dir();
  if (!ctx || !dir) return;
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "llama-tiny";
  c.seq = 16, c.batch = 2, c.steps = 2, c.lr = 3e-3, c.zero = 3;
  zeroc_trainer_t *tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (!tr) return;
  zeroc_train_metrics_t m;
  ZT_OK(zeroc_trainer_step(tr, &m));
  ZT_OK(zeroc_trainer_save(tr, dir));
  zeroc_train_info_t info;
  zeroc_trainer_info(tr, &info);
  zeroc_sampler_t *a = NULL, *b = NULL;
  ZT_OK(zeroc_sampler_from_trainer(tr, &a));
  ZT_OK(zeroc_sampler_from_checkpoint(ctx, dir, &info.model, 0, &b));
  CU_ASSERT((zt_rank() == 0) == (a != NULL) && (zt_rank() == 0) == (b != NULL));
  int32_t p[3] = {1, 2, 3}, x[24], y[24];
  zeroc_sample_config_t sc = ZEROC_SAMPLE_CONFIG_INIT;
  sc.tokens = 24, sc.top_k = 20, sc.seed = 9;
  ZT_OK(zeroc_trainer_sample(tr, p, 3, &sc, x));
  if (a && b) {
    int V = info.model.vocab;
    float *la = malloc(sizeof(float) * 16 * V), *lb = malloc(sizeof(float) * 16 * V);
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (i * 37) % V;
    ZT_OK(zeroc_sampler_logits(a, ids, 16, la));
    ZT_OK(zeroc_sampler_logits(b, ids, 16, lb));
    CU_ASSERT(!memcmp(la, lb, sizeof(float) * 16 * V));
    ZT_OK(zeroc_sampler_generate(b, p, 3, 24, 1.0, 20, 9, y));
    CU_ASSERT(!memcmp(x, y, sizeof x));
    free(la);
    free(lb);
  }
  /* a checkpoint of another shape is refused: its tensors' sizes differ first */
  zeroc_sampler_t *o = NULL;
  zeroc_gpt_config_t other = info.model;
  other.kv_heads = 1;
  CU_ASSERT_EQUAL(zeroc_sampler_from_checkpoint(ctx, dir, &other, 0, &o), ZEROC_ERR_INVALID_ARG);
  if (zt_rank() == 0)
    ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "kv_heads") ||
                      strstr(zeroc_last_error(ctx), "a different model shape"),
                  "message: %s", zeroc_last_error(ctx));
  CU_ASSERT_PTR_NULL(o);
  zeroc_sampler_destroy(a);
  zeroc_sampler_destroy(b);
  zeroc_trainer_destroy(tr);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
  free(dir);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

/* transformers' own numbers on the models it saved (tests/fixtures/hf_llama_tiny: GQA,
 * llama3 rope scaling, untied head; hf_qwen_tiny: q/k/v biases, tied head; written
 * offline by make_hf_llama_sample.py in fp16 with `model.` names): the logits of a 14-token
 * prompt (computed in fp64; fp32 rounding is 1e-6 of them) and the greedy continuation of
 * 56 tokens past the 64-token window. */
static void transformers_fixture(const char *preset, const char *dir) {
  enum { P = 14, G = 56 };
  zeroc_gpt_config_t cfg;
  ZT_OK(zeroc_gpt_preset(preset, &cfg));
  char path[600];
  int32_t want[P + G], got[G];
  int n = 0;
  snprintf(path, sizeof path, "%s/%s/expected.txt", ZT_FIXTURES, dir);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL(f);
  while (f && n < P + G && fscanf(f, "%d", &want[n]) == 1) n++;
  if (f) fclose(f);
  CU_ASSERT_EQUAL(n, P + G);
  zeroc_sampler_t *s = NULL;
  snprintf(path, sizeof path, "%s/%s/model.safetensors", ZT_FIXTURES, dir);
  ZT_OK(zeroc_sampler_load(path, &cfg, &s));
  if (!s || n != P + G) return;
  const int V = cfg.vocab;
  float *ref = malloc(sizeof(float) * P * V), *lg = malloc(sizeof(float) * P * V);
  snprintf(path, sizeof path, "%s/%s/logits.txt", ZT_FIXTURES, dir);
  f = fopen(path, "r");
  int k = 0;
  while (f && k < P * V && fscanf(f, "%f", &ref[k]) == 1) k++;
  if (f) fclose(f);
  CU_ASSERT_EQUAL(k, P * V);
  ZT_OK(zeroc_sampler_logits(s, want, P, lg));
  double e = zt_rel_err(lg, ref, (size_t)P * V);
  if (getenv("ZT_VERBOSE")) {
    printf("\n  %s: rel err %.3g against transformers; by position:", dir, e);
    for (int t = 0; t < P; t++)
      printf(" %.2g", zt_rel_err(lg + (size_t)t * V, ref + (size_t)t * V, (size_t)V));
    printf("\n");
  }
  ZT_ASSERT_MSG(e < 1e-5, "%s: logits against transformers: rel err %.3g", dir, e);
  ZT_OK(zeroc_sampler_generate(s, want, P, G, 0.0, 0, 1, got));
  ZT_ASSERT_MSG(!memcmp(got, want + P, sizeof got), "%s: greedy tokens differ from transformers'",
                dir);
  free(ref);
  free(lg);
  zeroc_sampler_destroy(s);
  /* another shape names the tensor */
  cfg.kv_heads = 1;
  snprintf(path, sizeof path, "%s/%s/model.safetensors", ZT_FIXTURES, dir);
  CU_ASSERT_EQUAL(zeroc_sampler_load(path, &cfg, &s), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "k_proj.weight") != NULL, "message: %s",
                zeroc_last_error(NULL));
}

static void test_transformers_llama(void) { transformers_fixture("llama-tiny", "hf_llama_tiny"); }
static void test_transformers_qwen(void) { transformers_fixture("qwen-tiny", "hf_qwen_tiny"); }

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {{"llama_logits", test_llama_logits},
                                    {"qwen_logits", test_qwen_logits},
                                    {"generate", test_generate},
                                    {"trainer_checkpoint", test_trainer_checkpoint},
                                    {"transformers_llama", test_transformers_llama},
                                    {"transformers_qwen", test_transformers_qwen},
                                    ZT_END};
  return zt_run_mpi(argc, argv, "sample_llama", tests, 1, 0);
}
