/*
 * model/sample.c - the sampler: GPT-2 inference with a KV cache on the whole
 * model in host memory (fp32), through the same cpu kernels as training
 * (layernorm, matmul, gelu) so that each position's logits equal the training
 * forward's to fp32 rounding. New tokens are fed in rows at positions
 * pos..pos+n-1; each block appends their keys and values to its cache and
 * attends over the cache with the same online softmax as the training kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/cpu_kernels.h"
#include "model/sample.h"

enum { BLOCK_PARAMS = 12 };
/* parameter order inside a block, as in model/gpt.c */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

static const char *const BLOCK_NAMES[BLOCK_PARAMS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

struct zeroc_sampler {
  zeroc_gpt_config_t cfg;
  int cache;      /* 1: keep the KV cache between tokens */
  int draw_vocab; /* ids drawn from: the first draw_vocab (a tokenizer's vocabulary) */
  /* weights: one allocation; wte (V,C), wpe (T,C), per block its twelve, ln_f */
  float *w, *wte, *wpe, *lnfw, *lnfb;
  float *blk[BLOCK_PARAMS]; /* block 0's; block l's at + l * bsize[p] */
  uint64_t bsize[BLOCK_PARAMS];
  /* the cache: per block (T, 2C) rows of k | v; pos of them are filled */
  float *kv;
  int pos;
  /* scratch for up to T rows */
  float *x, *ln, *qkv, *atty, *res, *fch, *fchg, *mean, *rstd, *logits;
  double *prob;
  int *idx;
};

const char *zeroc__sampler_block_name(int p) {
  return p >= 0 && p < BLOCK_PARAMS ? BLOCK_NAMES[p] : NULL;
}

/* The (rows, cols) of block parameter p for channels C. */
static void block_shape(int p, uint64_t C, uint64_t *r, uint64_t *c) {
  static const int R[BLOCK_PARAMS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
  static const int K[BLOCK_PARAMS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
  *r = (uint64_t)R[p] * C;
  *c = (uint64_t)K[p] * C;
}

float *zeroc__sampler_param(zeroc_sampler_t *s, int gu, int p, uint64_t *rows, uint64_t *cols) {
  const uint64_t C = (uint64_t)s->cfg.hidden;
  int L = s->cfg.layers;
  if (gu == 0 && (p == 0 || p == 1)) {
    *rows = (uint64_t)(p ? s->cfg.seq : s->cfg.vocab), *cols = C;
    return p ? s->wpe : s->wte;
  }
  if (gu == L + 1 && (p == 0 || p == 1)) {
    *rows = C, *cols = 0;
    return p ? s->lnfb : s->lnfw;
  }
  if (gu < 1 || gu > L || p < 0 || p >= BLOCK_PARAMS) return NULL;
  block_shape(p, C, rows, cols);
  return s->blk[p] + (uint64_t)(gu - 1) * s->bsize[p];
}

zeroc_result_t zeroc__sampler_create(const zeroc_gpt_config_t *cfg, zeroc_sampler_t **out) {
  *out = NULL;
  CHK(zeroc_gpt_config_check(cfg));
  zeroc_sampler_t *s = calloc(1, sizeof *s);
  if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler struct");
  s->cfg = *cfg;
  s->cache = 1;
  s->draw_vocab = cfg->vocab;
  const uint64_t C = (uint64_t)cfg->hidden, T = (uint64_t)cfg->seq, V = (uint64_t)cfg->vocab;
  const uint64_t L = (uint64_t)cfg->layers;
  uint64_t total = V * C + T * C + 2 * C;
  for (int p = 0; p < BLOCK_PARAMS; p++) {
    uint64_t r, c;
    block_shape(p, C, &r, &c);
    s->bsize[p] = r * (c ? c : 1);
    total += L * s->bsize[p];
  }
  s->w = calloc(total, sizeof(float));
  s->kv = malloc(L * T * 2 * C * sizeof(float));
  size_t rows = (size_t)T;
  s->x = malloc(rows * C * 4), s->ln = malloc(rows * C * 4), s->qkv = malloc(rows * 3 * C * 4);
  s->atty = malloc(rows * C * 4), s->res = malloc(rows * C * 4);
  s->fch = malloc(rows * 4 * C * 4), s->fchg = malloc(rows * 4 * C * 4);
  s->mean = malloc(rows * 4), s->rstd = malloc(rows * 4), s->logits = malloc(V * 4);
  s->prob = malloc(V * sizeof(double)), s->idx = malloc(V * sizeof(int));
  if (!s->w || !s->kv || !s->x || !s->ln || !s->qkv || !s->atty || !s->res || !s->fch || !s->fchg ||
      !s->mean || !s->rstd || !s->logits || !s->prob || !s->idx) {
    zeroc_sampler_destroy(s);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler of %llu weights and a %llu-token cache",
                      (unsigned long long)total, (unsigned long long)T);
  }
  float *at = s->w;
  s->wte = at, at += V * C;
  s->wpe = at, at += T * C;
  s->lnfw = at, at += C;
  s->lnfb = at, at += C;
  for (int p = 0; p < BLOCK_PARAMS; p++) s->blk[p] = at, at += L * s->bsize[p];
  *out = s;
  return ZEROC_OK;
}

void zeroc_sampler_destroy(zeroc_sampler_t *s) {
  if (!s) return;
  free(s->w);
  free(s->kv);
  free(s->x), free(s->ln), free(s->qkv), free(s->atty), free(s->res);
  free(s->fch), free(s->fchg), free(s->mean), free(s->rstd), free(s->logits);
  free(s->prob), free(s->idx);
  free(s);
}

const zeroc_gpt_config_t *zeroc_sampler_config(const zeroc_sampler_t *s) { return &s->cfg; }

void zeroc_sampler_set_cache(zeroc_sampler_t *s, int on) { s->cache = on != 0; }

void zeroc_sampler_set_vocab(zeroc_sampler_t *s, int n) {
  s->draw_vocab = n > 0 && n < s->cfg.vocab ? n : s->cfg.vocab;
}

/* ---- the forward ------------------------------------------------------------------- */

static inline float dot(const float *a, const float *b, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// q rows of qkv (n,3C) at positions pos..pos+n-1, keys and values kv (pos+n, 2C) -> out (n,C);
// the training kernel's online softmax in the same order, so the same q, k, v give the same out
static void attend(float *out, const float *qkv, const float *kv, int n, int pos, int C, int NH) {
  const int HS = C / NH;
  const float scale = 1.0f / sqrtf((float)HS);
  for (int i = 0; i < n; i++) {
    int t = pos + i;
    for (int h = 0; h < NH; h++) {
      const float *q = qkv + (size_t)i * 3 * C + (size_t)h * HS;
      float *restrict o = out + (size_t)i * C + (size_t)h * HS;
      for (int d = 0; d < HS; d++) o[d] = 0;
      float m = -INFINITY, l = 0;
      for (int j = 0; j <= t; j++) {
        const float *kj = kv + (size_t)j * 2 * C + (size_t)h * HS, *restrict vj = kj + C;
        const float sc = dot(q, kj, HS) * scale;
        if (sc > m) {
          const float a = expf(m - sc);
          l *= a;
#pragma omp simd
          for (int d = 0; d < HS; d++) o[d] *= a;
          m = sc;
        }
        const float p = expf(sc - m);
        l += p;
#pragma omp simd
        for (int d = 0; d < HS; d++) o[d] += p * vj[d];
      }
      const float il = 1.0f / l;
#pragma omp simd
      for (int d = 0; d < HS; d++) o[d] *= il;
    }
  }
}

/* out (n,OC) = inp (n,C) @ weight (OC,C)^T + bias: one row (a token at a time) through
 * sgemv, which streams the weight once instead of packing it first */
static void linear(float *out, const float *inp, const float *weight, const float *bias, int n,
                   int C, int OC) {
  if (n == 1)
    zeroc__cpu_matvec_forward(out, inp, weight, bias, C, OC);
  else
    zeroc__cpu_matmul_forward(out, inp, weight, bias, n, C, OC);
}

// ids (n) at positions pos..pos+n-1 -> the cache extended by n rows; the logits (V) of the
// last row in s->logits
static void forward(zeroc_sampler_t *s, const int32_t *ids, int n) {
  const int C = s->cfg.hidden, NH = s->cfg.heads, V = s->cfg.vocab, T = s->cfg.seq, pos = s->pos;
  float *x = s->x;
  for (int i = 0; i < n; i++) {
    const float *te = s->wte + (size_t)ids[i] * C, *pe = s->wpe + (size_t)(pos + i) * C;
    for (int c = 0; c < C; c++) x[(size_t)i * C + c] = te[c] + pe[c];
  }
  for (int l = 0; l < s->cfg.layers; l++) {
    const float *p[BLOCK_PARAMS];
    for (int k = 0; k < BLOCK_PARAMS; k++) p[k] = s->blk[k] + (size_t)l * s->bsize[k];
    float *kv = s->kv + (size_t)l * T * 2 * C;
    zeroc__cpu_layernorm_forward(s->ln, s->mean, s->rstd, x, p[LN1W], p[LN1B], n, C);
    linear(s->qkv, s->ln, p[QKVW], p[QKVB], n, C, 3 * C);
    for (int i = 0; i < n; i++) /* k | v of the new rows into the cache */
      memcpy(kv + (size_t)(pos + i) * 2 * C, s->qkv + (size_t)i * 3 * C + C, 2 * C * sizeof(float));
    attend(s->atty, s->qkv, kv, n, pos, C, NH);
    linear(s->res, s->atty, p[ATTPROJW], p[ATTPROJB], n, C, C);
    zeroc__cpu_add(s->res, x, (size_t)n * C);
    zeroc__cpu_layernorm_forward(s->ln, s->mean, s->rstd, s->res, p[LN2W], p[LN2B], n, C);
    linear(s->fch, s->ln, p[FCW], p[FCB], n, C, 4 * C);
    zeroc__cpu_gelu_forward(s->fchg, s->fch, (size_t)n * 4 * C);
    linear(x, s->fchg, p[FCPROJW], p[FCPROJB], n, 4 * C, C);
    zeroc__cpu_add(x, s->res, (size_t)n * C);
  }
  s->pos = pos + n;
  /* the head: the last row only, the one the next token is drawn from */
  const float *in = x + (size_t)(n - 1) * C;
  zeroc__cpu_layernorm_forward(s->ln, s->mean, s->rstd, in, s->lnfw, s->lnfb, 1, C);
  linear(s->logits, s->ln, s->wte, NULL, 1, C, V);
}

static zeroc_result_t check_ids(const zeroc_sampler_t *s, const int32_t *ids, int n) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= s->cfg.vocab)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "token %d at position %d: accepted 0..%d (vocab)",
                        ids[i], i, s->cfg.vocab - 1);
  return ZEROC_OK;
}

zeroc_result_t zeroc_sampler_logits(zeroc_sampler_t *s, const int32_t *ids, int n, float *logits) {
  if (!s || !ids || !logits || n < 1 || n > s->cfg.seq)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "sampler logits of %d tokens: accepted 1..%d", n,
                      s ? s->cfg.seq : 0);
  CHK(check_ids(s, ids, n));
  const size_t V = (size_t)s->cfg.vocab;
  s->pos = 0;
  for (int i = 0; i < n; i++) {
    forward(s, ids + i, 1);
    memcpy(logits + i * V, s->logits, V * sizeof(float));
  }
  return ZEROC_OK;
}

/* ---- choosing the next token ---------------------------------------------------- */

/* id a comes before id b: a higher logit, or the same and a lower id (as greedy picks) */
static inline int better(const float *lg, int a, int b) {
  return lg[a] > lg[b] || (lg[a] == lg[b] && a < b);
}

/* Restores the heap below i: h[0..k) is a heap whose root is the worst id. */
static void sift_down(int *h, int k, int i, const float *lg) {
  for (;;) {
    int c = 2 * i + 1;
    if (c >= k) return;
    if (c + 1 < k && better(lg, h[c], h[c + 1])) c++; /* the worse child */
    if (!better(lg, h[i], h[c])) return;
    int t = h[i];
    h[i] = h[c], h[c] = t;
    i = c;
  }
}

/* idx[0..k) <- the k best ids of lg (V), best first: a heap of the k best so
 * far whose root is the worst of them, then sorted out of it. */
static void best_k(int *idx, int k, const float *lg, int V) {
  for (int v = 0; v < k; v++) idx[v] = v;
  for (int i = k / 2 - 1; i >= 0; i--) sift_down(idx, k, i, lg);
  for (int v = k; v < V; v++)
    if (better(lg, v, idx[0])) idx[0] = v, sift_down(idx, k, 0, lg);
  for (int i = k - 1; i > 0; i--) {
    int t = idx[0];
    idx[0] = idx[i], idx[i] = t;
    sift_down(idx, i, 0, lg);
  }
}

static int32_t choose(zeroc_sampler_t *s, const float *logits, double temperature, int top_k,
                      zeroc__rng_t *rng) {
  const int V = s->draw_vocab;
  int best = 0;
  for (int v = 1; v < V; v++)
    if (logits[v] > logits[best]) best = v;
  if (temperature == 0) return best;
  int k = top_k > 0 && top_k < V ? top_k : V;
  if (k < V)
    best_k(s->idx, k, logits, V);
  else
    for (int v = 0; v < V; v++) s->idx[v] = v;
  double sum = 0, m = logits[best];
  for (int i = 0; i < k; i++)
    sum += s->prob[i] = exp(((double)logits[s->idx[i]] - m) / temperature);
  double u = zeroc__rng_double(rng) * sum, acc = 0;
  for (int i = 0; i < k; i++) {
    acc += s->prob[i];
    if (u < acc) return s->idx[i];
  }
  return s->idx[k - 1]; /* u within rounding of sum */
}

zeroc_result_t zeroc_sampler_generate(zeroc_sampler_t *s, const int32_t *prompt, int n, int tokens,
                                      double temperature, int top_k, uint64_t seed, int32_t *out) {
  return zeroc_sampler_generate_each(s, prompt, n, tokens, temperature, top_k, seed, out, NULL,
                                     NULL, NULL);
}

zeroc_result_t zeroc_sampler_generate_each(zeroc_sampler_t *s, const int32_t *prompt, int n,
                                           int tokens, double temperature, int top_k, uint64_t seed,
                                           int32_t *out, zeroc_sample_token_fn on_token, void *user,
                                           int *generated) {
  if (generated) *generated = 0;
  if (!s || !prompt || n < 1 || tokens < 0 || (tokens > 0 && !out))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "sampler: prompt of %d tokens, %d to generate: accepted a prompt of at least "
                      "1 token and 0 or more tokens",
                      n, tokens);
  if (!(temperature >= 0) || !isfinite(temperature))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "temperature %g: accepted 0 (greedy) or a finite "
                      "value > 0",
                      temperature);
  if (top_k < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "top_k %d: accepted 0 (all) or more", top_k);
  CHK(check_ids(s, prompt, n));
  if (!tokens) return ZEROC_OK;
  const int T = s->cfg.seq;
  /* the window: the last T tokens of the prompt and what was generated */
  int32_t *hist = malloc(sizeof(int32_t) * ((size_t)T + (size_t)tokens));
  if (!hist) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler history of %d tokens", T + tokens);
  int len = n < T ? n : T;
  memcpy(hist, prompt + (n - len), sizeof(int32_t) * (size_t)len);
  zeroc__rng_t rng;
  zeroc__rng_seed(&rng, seed);
  s->pos = 0;
  forward(s, hist, len);
  for (int k = 0; k < tokens; k++) {
    int32_t t = choose(s, s->logits, temperature, top_k, &rng);
    out[k] = t;
    if (generated) *generated = k + 1;
    if ((on_token && on_token(user, out, k + 1)) || k == tokens - 1) break;
    hist[len++] = t;
    int w = len < T ? len : T; /* the window the next prediction sees */
    if (s->cache && s->pos < T) {
      forward(s, &t, 1);
    } else { /* no cache, or a full one: the last w tokens again from position 0 */
      s->pos = 0;
      forward(s, hist + len - w, w);
    }
  }
  free(hist);
  return ZEROC_OK;
}
