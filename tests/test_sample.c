/*
 * tests/test_sample.c - GPT-2 files as Hugging Face writes them (both name
 * layouts, a tied/absent/untied lm_head, F32/BF16/F16 values, a position table
 * longer than the context, mask buffers) import to the same loss as the
 * reference file, and export keeps the longer table; the sampler: its
 * KV-cache logits equal the training forward's at every position, greedy is
 * deterministic, top-k 1 is greedy, the cache changes no token, a trainer's
 * sampler (ZeRO-3 on every rank) equals the one loaded from its export.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/gpt_internal.h"
#include "testutil.h"
#include "zeroc/sample.h"

static const zeroc_gpt_config_t CFG = {
    .layers = 2, .hidden = 32, .heads = 4, .vocab = 61, .seq = 16, .batch = 1}; /* L C NH V T B */
enum { EXTRA = 5 };                                          /* wpe rows beyond T */

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_gpt_t *gpt;
  zeroc_model_t *m;
} run_t;

static int run_open(run_t *r, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->ctx = zt_ctx(1, 1, 1);
  if (!r->ctx) return -1;
  ZT_OK(zeroc_gpt_create(r->ctx, &CFG, CFG.batch, 0, ZEROC_FP32, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = ZEROC_SHARD_CONFIG_INIT;
  s.stage = 3;
  s.seed = seed;
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  return r->m ? 0 : -1;
}

static void run_close(run_t *r) {
  zeroc_model_destroy(r->m);
  zeroc_gpt_destroy(r->gpt);
  if (r->ctx) ZT_OK(zeroc_ctx_finalize(r->ctx));
}

static void tokens(int32_t *in, int32_t *tg, int n, uint64_t seed) {
  for (int i = 0; i < n; i++) in[i] = (int32_t)(zt_rand_u64(&seed) % CFG.vocab);
  for (int i = 0; tg && i < n; i++) tg[i] = (int32_t)((in[i] * 7 + 3) % CFG.vocab);
}

static double loss_of(run_t *r) {
  int32_t in[16], tg[16];
  tokens(in, tg, CFG.seq, 11);
  zeroc_gpt_batch_t b = {1, CFG.seq, in, tg, 0, 0};
  float l = -1;
  ZT_OK(zeroc_model_eval(r->m, &b, &l));
  return l;
}

/* A directory every rank sees: rank 0 makes it. */
static char *shared_dir(void) {
  char buf[512] = {0};
  if (zt_rank() == 0) {
    char *d = zt_tempdir("zeroc_sample");
    snprintf(buf, sizeof buf, "%s", d ? d : "");
    free(d);
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf[0] ? strdup(buf) : NULL;
}

/* ---- files in the forms transformers writes ----------------------------------------- */

/* Rounded to 8 significant bits (bf16) and to zero below fp16's normal range, so
 * F32, BF16 and F16 hold the same value exactly. */
static float representable(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
  memcpy(&v, &b, 4);
  return fabsf(v) < 6.103515625e-05f ? 0.0f : v;
}

static uint16_t to_f16(float v) { /* exact for representable() values */
  uint32_t b;
  memcpy(&b, &v, 4);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
  if (!(b & 0x7fffffffu)) return sign;
  return (uint16_t)(sign | ((((b >> 23) & 0xff) - 112) << 10) | ((b >> 13) & 0x3ff));
}

typedef struct {
  const char *prefix;   /* "" or "transformer." */
  zeroc__st_dtype_t dt; /* F32, BF16, F16 */
  int head;             /* lm_head.weight: 0 none, 1 = wte, 2 one value off */
  int extra;            /* wpe rows beyond the source's */
  int mask;             /* an h.0.attn.bias buffer */
} form_t;

/* Writes `dst`: the tensors of `src` (made representable) in form f. */
static void write_form(const char *src, const char *dst, const form_t *f) {
  zeroc__st_t *st = NULL;
  zeroc__st_writer_t *w = NULL;
  ZT_OK(zeroc__st_open(src, &st));
  ZT_OK(zeroc__st_writer_create(dst, &w));
  if (!st || !w) return;
  size_t n = zeroc__st_count(st);
  const zeroc__st_tensor_t *wte = zeroc__st_find(st, "wte.weight");
  char name[160];
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i <= n + 1; i++) {
      const zeroc__st_tensor_t *t = i < n ? zeroc__st_tensor(st, i) : wte;
      if (i == n && !f->head) continue;
      if (i == n + 1 && !f->mask) continue;
      uint64_t shape[4] = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0, 0, 0};
      int nd = t->ndim, wpe = i < n && !strcmp(t->name, "wpe.weight");
      if (wpe) shape[0] += (uint64_t)f->extra;
      if (i == n + 1) nd = 4, shape[0] = shape[1] = 1, shape[2] = shape[3] = (uint64_t)CFG.seq;
      snprintf(name, sizeof name, "%s%s", i == n ? "" : f->prefix,
               i == n       ? "lm_head.weight"
               : i == n + 1 ? "h.0.attn.bias"
                            : t->name);
      if (!pass) {
        ZT_OK(zeroc__st_writer_add(w, name, i == n + 1 ? ZEROC_ST_F32 : f->dt, nd, shape));
        continue;
      }
      uint64_t cnt = 1;
      for (int d = 0; d < nd; d++) cnt *= shape[d];
      float *v = malloc(cnt * 4);
      if (i == n + 1) {
        zt_fill_uniform(v, cnt, 5, -1, 1);
      } else {
        ZT_OK(zeroc__st_read_f32(t, v, t->numel));
        zt_fill_normal(v + t->numel, cnt - t->numel, 9, 0.02f); /* the longer wpe's rows */
        for (uint64_t j = 0; j < cnt; j++) v[j] = representable(v[j]);
        if (i == n && f->head == 2) v[cnt / 2] += 0.5f;
      }
      if (i == n + 1 || f->dt != ZEROC_ST_F16) {
        ZT_OK(zeroc__st_writer_write_f32(w, v, cnt));
      } else {
        uint16_t *h = malloc(cnt * 2);
        for (uint64_t j = 0; j < cnt; j++) h[j] = to_f16(v[j]);
        ZT_OK(zeroc__st_writer_write(w, h, cnt * 2));
        free(h);
      }
      free(v);
    }
  }
  ZT_OK(zeroc__st_writer_finish(w));
  zeroc__st_writer_destroy(w);
  zeroc__st_close(st);
}

/* wpe.weight of a file as fp32 and its row count. */
static float *read_wpe(const char *path, uint64_t *rows) {
  zeroc__st_t *st = NULL;
  ZT_OK(zeroc__st_open(path, &st));
  const zeroc__st_tensor_t *t = st ? zeroc__st_find(st, "wpe.weight") : NULL;
  if (!t) t = st ? zeroc__st_find(st, "transformer.wpe.weight") : NULL;
  CU_ASSERT_PTR_NOT_NULL(t);
  float *v = t ? malloc(t->numel * 4) : NULL;
  if (t) ZT_OK(zeroc__st_read_f32(t, v, t->numel));
  *rows = t ? t->shape[0] : 0;
  zeroc__st_close(st);
  return v;
}

static void test_import_forms(void) {
  run_t r;
  char *dir = shared_dir(), raw[600], ref[600], path[600], out[600];
  if (!dir || run_open(&r, 3)) return;
  snprintf(raw, sizeof raw, "%s/raw.safetensors", dir);
  snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
  snprintf(out, sizeof out, "%s/out.safetensors", dir);
  ZT_OK(zeroc_gpt_export(r.m, r.gpt, raw));
  const form_t plain = {"", ZEROC_ST_F32, 0, 0, 0};
  if (zt_rank() == 0) write_form(raw, ref, &plain);
  MPI_Barrier(MPI_COMM_WORLD);
  ZT_OK(zeroc_gpt_import(r.m, r.gpt, ref));
  double l0 = loss_of(&r);
  const form_t forms[] = {
      {"transformer.", ZEROC_ST_F32, 1, 0, 1}, /* save_pretrained's names, tied head, masks */
      {"", ZEROC_ST_BF16, 1, 0, 0},
      {"transformer.", ZEROC_ST_F16, 0, 0, 0},
      {"", ZEROC_ST_F16, 1, 0, 1},
      {"transformer.", ZEROC_ST_BF16, 0, EXTRA, 0},
      {"", ZEROC_ST_F32, 0, EXTRA, 0}, /* last: the long table export must keep */
  };
  int nf = (int)(sizeof forms / sizeof forms[0]);
  for (int i = 0; i < nf; i++) {
    snprintf(path, sizeof path, "%s/form%d.safetensors", dir, i);
    if (zt_rank() == 0) write_form(ref, path, &forms[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    ZT_OK(zeroc_gpt_import(r.m, r.gpt, path));
    double l = loss_of(&r);
    ZT_ASSERT_MSG(l == l0, "form %d ('%s', %s, head %d, extra %d): loss %.9g, reference %.9g", i,
                  forms[i].prefix, zeroc__st_dtype_name(forms[i].dt), forms[i].head, forms[i].extra,
                  l, l0);
  }
  /* the long table goes back whole: T + EXTRA rows, the file's values */
  ZT_OK(zeroc_gpt_export(r.m, r.gpt, out));
  if (zt_rank() == 0) {
    uint64_t ra = 0, rb = 0;
    float *a = read_wpe(path, &ra), *b = read_wpe(out, &rb);
    ZT_ASSERT_MSG(ra == (uint64_t)CFG.seq + EXTRA && rb == ra, "wpe rows: file %llu, export %llu",
                  (unsigned long long)ra, (unsigned long long)rb);
    if (a && b && ra == rb) CU_ASSERT(!memcmp(a, b, ra * CFG.hidden * 4));
    free(a);
    free(b);
  }
  /* an untied head is refused by name, and nothing changes */
  const form_t untied = {"transformer.", ZEROC_ST_F32, 2, 0, 0};
  snprintf(path, sizeof path, "%s/untied.safetensors", dir);
  if (zt_rank() == 0) write_form(ref, path, &untied);
  MPI_Barrier(MPI_COMM_WORLD);
  CU_ASSERT_EQUAL(zeroc_gpt_import(r.m, r.gpt, path), ZEROC_ERR_INVALID_ARG);
  const char *msg = zeroc_last_error(r.ctx);
  ZT_ASSERT_MSG(strstr(msg, "lm_head.weight") && strstr(msg, "untied"), "message: %s", msg);
  CU_ASSERT(loss_of(&r) == l0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
  free(dir);
  run_close(&r);
}

/* ---- the sampler ------------------------------------------------------------------------ */

static void test_logits_equal_training(void) {
  run_t r;
  char *dir = shared_dir(), path[600];
  if (!dir || run_open(&r, 5)) return;
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  ZT_OK(zeroc_gpt_export(r.m, r.gpt, path));
  int32_t in[16];
  tokens(in, NULL, CFG.seq, 21);
  zeroc_gpt_batch_t b = {1, CFG.seq, in, NULL, 0, 0}; /* no targets: the head keeps the logits */
  float l;
  ZT_OK(zeroc_model_eval(r.m, &b, &l));
  const float *ref = zeroc__gpt_logits(r.gpt, 0);
  int Vp = zeroc_gpt_padded_vocab(r.gpt), V = CFG.vocab;
  zeroc_sampler_t *s = NULL;
  ZT_OK(zeroc_sampler_load(path, &CFG, &s));
  float *got = malloc(sizeof(float) * CFG.seq * V);
  if (s && ref) {
    ZT_OK(zeroc_sampler_logits(s, in, CFG.seq, got));
    double worst = 0;
    for (int t = 0; t < CFG.seq; t++) {
      double e = zt_rel_err(got + t * V, ref + (size_t)t * Vp, (size_t)V);
      if (e > worst) worst = e;
    }
    ZT_ASSERT_MSG(worst < 2e-6, "KV-cache logits vs the training forward: rel err %.3g", worst);
  }
  free(got);
  zeroc_sampler_destroy(s);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
  free(dir);
  run_close(&r);
}

/* zeroc_sampler_generate_each's callback: counts calls, checks the count
 * grows by one, stops at stop_at (0: never). */
typedef struct {
  int calls, prefix_ok, stop_at;
} each_t;
static int each_token(void *user, const int32_t *out, int count) {
  each_t *e = user;
  e->calls++;
  e->prefix_ok = (e->calls == 1 ? 1 : e->prefix_ok) && count == e->calls && out[count - 1] >= 0;
  return e->stop_at && count >= e->stop_at;
}

static void test_generate(void) {
  run_t r;
  char *dir = shared_dir(), path[600];
  if (!dir || run_open(&r, 7)) return;
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  ZT_OK(zeroc_gpt_export(r.m, r.gpt, path));
  zeroc_sampler_t *s = NULL;
  ZT_OK(zeroc_sampler_load(path, &CFG, &s));
  enum { N = 40 }; /* beyond the 16-token window: it slides */
  int32_t p[20], a[N], b[N], c[N];
  tokens(p, NULL, 20, 31); /* longer than the window too: its last 16 tokens */
  if (s) {
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.0, 0, 1, a));
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.0, 0, 2, b));
    CU_ASSERT(!memcmp(a, b, sizeof a)); /* greedy: no draw, any seed */
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 1.0, 1, 3, c));
    CU_ASSERT(!memcmp(a, c, sizeof a)); /* top-k 1 is greedy */
    zeroc_sampler_set_cache(s, 0);
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.0, 0, 1, c));
    CU_ASSERT(!memcmp(a, c, sizeof a)); /* the cache changes no token */
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.8, 10, 5, a));
    zeroc_sampler_set_cache(s, 1);
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.8, 10, 5, b));
    CU_ASSERT(!memcmp(a, b, sizeof a)); /* sampled: the same seed, with or without cache */
    ZT_OK(zeroc_sampler_generate(s, p, 20, N, 0.8, 10, 6, c));
    CU_ASSERT(memcmp(a, c, sizeof a) != 0); /* another seed, another text */
    /* token by token: the callback sees each prefix, and stopping keeps it */
    each_t e = {0, 0, 13};
    int got = -1;
    memset(c, 0xff, sizeof c);
    ZT_OK(zeroc_sampler_generate_each(s, p, 20, N, 0.8, 10, 5, c, each_token, &e, &got));
    CU_ASSERT_EQUAL(got, 13);
    CU_ASSERT_EQUAL(e.calls, 13);
    CU_ASSERT(e.prefix_ok);
    CU_ASSERT(!memcmp(a, c, 13 * sizeof c[0])); /* the seed's first 13 tokens */
    CU_ASSERT_EQUAL(c[13], -1);                 /* nothing past the stop */
    ZT_OK(zeroc_sampler_generate_each(s, p, 20, N, 0.8, 10, 5, c, NULL, NULL, &got));
    CU_ASSERT(got == N && !memcmp(a, c, sizeof a));
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= a[i] >= 0 && a[i] < CFG.vocab;
    CU_ASSERT(ok);
    /* refused with a message */
    CU_ASSERT_EQUAL(zeroc_sampler_generate(s, p, 20, 4, -1.0, 0, 1, a), ZEROC_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(zeroc_sampler_generate(s, p, 20, 4, 1.0, -2, 1, a), ZEROC_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(zeroc_sampler_generate(s, p, 0, 4, 1.0, 0, 1, a), ZEROC_ERR_INVALID_ARG);
    p[3] = CFG.vocab;
    CU_ASSERT_EQUAL(zeroc_sampler_generate(s, p, 20, 4, 1.0, 0, 1, a), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "vocab") != NULL, "message: %s",
                  zeroc_last_error(NULL));
  }
  zeroc_sampler_destroy(s);
  /* a file of another shape names the tensor */
  zeroc_gpt_config_t other = CFG;
  other.hidden = 64, other.heads = 4;
  CU_ASSERT_EQUAL(zeroc_sampler_load(path, &other, &s), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "wte.weight") != NULL, "message: %s",
                zeroc_last_error(NULL));
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
  free(dir);
  run_close(&r);
}

/* A trainer's sampler (ZeRO-3 over every rank) is the one of its export. */
static void test_trainer_sampler(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  char *dir = shared_dir(), path[600];
  if (!ctx || !dir) return;
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "tiny";
  c.layers = 1;
  c.seq = 16;
  c.batch = 2;
  c.steps = 2;
  c.lr = 3e-3;
  zeroc_trainer_t *tr = NULL;
  ZT_OK(zeroc_trainer_create(ctx, &c, &tr));
  if (!tr) return;
  zeroc_train_metrics_t m;
  ZT_OK(zeroc_trainer_step(tr, &m));
  zeroc_sampler_t *a = NULL, *b = NULL;
  ZT_OK(zeroc_sampler_from_trainer(tr, &a));
  CU_ASSERT((zt_rank() == 0) == (a != NULL));
  ZT_OK(zeroc_trainer_export(tr, path));
  int32_t p[3] = {1, 2, 3}, x[24], y[24];
  zeroc_sample_config_t sc = ZEROC_SAMPLE_CONFIG_INIT;
  sc.tokens = 24, sc.top_k = 20, sc.seed = 9;
  ZT_OK(zeroc_trainer_sample(tr, p, 3, &sc, x));
  int32_t q[8];
  int nq = 0;
  ZT_OK(zeroc_trainer_sample_prompt(tr, 5, 8, q, &nq));
  CU_ASSERT(nq == 1 && q[0] == 5);
  ZT_OK(zeroc_trainer_sample_prompt(tr, -1, 8, q, &nq));
  CU_ASSERT_EQUAL(nq, 8);
  if (zt_rank() == 0) {
    zeroc_train_info_t info;
    zeroc_trainer_info(tr, &info);
    ZT_OK(zeroc_sampler_load(path, &info.model, &b));
    int V = info.model.vocab;
    float *la = malloc(sizeof(float) * 16 * V), *lb = malloc(sizeof(float) * 16 * V);
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (i * 37) % V;
    if (a && b) {
      ZT_OK(zeroc_sampler_logits(a, ids, 16, la));
      ZT_OK(zeroc_sampler_logits(b, ids, 16, lb));
      CU_ASSERT(!memcmp(la, lb, sizeof(float) * 16 * V));
      ZT_OK(zeroc_sampler_generate(b, p, 3, 24, 1.0, 20, 9, y));
      CU_ASSERT(!memcmp(x, y, sizeof x));
    }
    free(la);
    free(lb);
  }
  zeroc_sampler_destroy(a);
  zeroc_sampler_destroy(b);
  zeroc_trainer_destroy(tr);
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(dir);
  free(dir);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

/* transformers' own numbers on a GPT2LMHeadModel it saved (tests/fixtures/hf_gpt2, written
 * offline by make_hf_gpt2.py: fp16, `transformer.` names, no lm_head, n_positions 32) read at
 * a 16-token context: the logits of the prompt, and the greedy continuation across the
 * window. */
static void test_transformers_fixture(void) {
  const zeroc_gpt_config_t hf = {
      .layers = 2, .hidden = 32, .heads = 4, .vocab = 256, .seq = 16, .batch = 1};
  const char *dir = ZT_FIXTURES "/hf_gpt2";
  char path[512];
  int32_t want[64], got[64];
  int n = 0;
  snprintf(path, sizeof path, "%s/expected.txt", dir);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL(f);
  while (f && n < 64 && fscanf(f, "%d", &want[n]) == 1) n++;
  if (f) fclose(f);
  enum { P = 14 }; /* "The cat sat on" */
  CU_ASSERT_EQUAL(n, P + 20);
  zeroc_sampler_t *s = NULL;
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ZT_OK(zeroc_sampler_load(path, &hf, &s));
  if (!s || n != P + 20) return;
  float *ref = malloc(sizeof(float) * P * 256), *lg = malloc(sizeof(float) * P * 256);
  snprintf(path, sizeof path, "%s/logits.txt", dir);
  f = fopen(path, "r");
  int k = 0;
  while (f && k < P * 256 && fscanf(f, "%f", &ref[k]) == 1) k++;
  if (f) fclose(f);
  CU_ASSERT_EQUAL(k, P * 256);
  ZT_OK(zeroc_sampler_logits(s, want, P, lg));
  double e = zt_rel_err(lg, ref, (size_t)P * 256);
  ZT_ASSERT_MSG(e < 1e-5, "logits against transformers: rel err %.3g", e);
  ZT_OK(zeroc_sampler_generate(s, want, P, 20, 0.0, 0, 1, got));
  CU_ASSERT(!memcmp(got, want + P, sizeof(int32_t) * 20));
  free(ref);
  free(lg);
  zeroc_sampler_destroy(s);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {{"import_forms", test_import_forms},
                                    {"logits_equal_training", test_logits_equal_training},
                                    {"generate", test_generate},
                                    {"trainer_sampler", test_trainer_sampler},
                                    {"transformers_fixture", test_transformers_fixture},
                                    ZT_END};
  return zt_run_mpi(argc, argv, "sample", tests, 1, 0);
}
