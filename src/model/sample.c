/*
 * model/sample.c - the sampler: inference with a KV cache on the whole model in
 * host memory (fp32), through the same cpu kernels as training (layernorm,
 * matmul, gelu; the Llama family's in sample_llama.c) so that each position's
 * logits equal the training forward's to fp32 rounding. New tokens are fed in
 * rows at positions pos..pos+n-1; each block appends their keys and values to
 * its cache and attends over the cache with the same online softmax as the
 * training kernel. Then the drawing of the next token.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rope.h"
#include "model/sample.h"
#include "model/sample_impl.h"
#include "model/sample_ops.h"

enum { BLOCK_PARAMS = 12 };
/* parameter order inside a block, as in model/gpt.c */
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

static const char *const BLOCK_NAMES[BLOCK_PARAMS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

const char *zeroc__sampler_block_name(int p) {
  return p >= 0 && p < BLOCK_PARAMS ? BLOCK_NAMES[p] : NULL;
}

/* The (rows, cols) of each block parameter (cols 0 for a vector) and their count: GPT-2's
 * twelve; Llama's (model/gpt_impl.h) norm1 (C), q|k|v (QKV,C), its bias (QKV) with
 * qkv_bias, o (C,C), norm2 (C), gate|up (2F,C), down (C,F). */
static int block_shapes(const zeroc_sampler_t *s, uint64_t *r, uint64_t *c) {
  const uint64_t C = (uint64_t)s->cfg.hidden;
  if (!s->llama) {
    static const int R[BLOCK_PARAMS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
    static const int K[BLOCK_PARAMS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
    for (int p = 0; p < BLOCK_PARAMS; p++) r[p] = (uint64_t)R[p] * C, c[p] = (uint64_t)K[p] * C;
    return BLOCK_PARAMS;
  }
  const uint64_t QKV = (uint64_t)s->QKV, F = (uint64_t)s->cfg.ffn;
  int n = 0;
  r[n] = C, c[n++] = 0;
  r[n] = QKV, c[n++] = C;
  if (s->cfg.qkv_bias) r[n] = QKV, c[n++] = 0;
  r[n] = C, c[n++] = C;
  r[n] = C, c[n++] = 0;
  r[n] = 2 * F, c[n++] = C;
  r[n] = C, c[n++] = F;
  return n;
}

int zeroc__sampler_unit_params(const zeroc_sampler_t *s, int gu) {
  int L = s->cfg.layers;
  if (gu < 0 || gu > L + 1) return 0;
  if (gu > 0 && gu <= L) return s->nbp;
  return s->llama ? (gu ? 1 + s->cfg.untied : 1) : 2;
}

float *zeroc__sampler_param(zeroc_sampler_t *s, int gu, int p, uint64_t *rows, uint64_t *cols) {
  const uint64_t C = (uint64_t)s->cfg.hidden;
  int L = s->cfg.layers;
  if (p < 0 || p >= zeroc__sampler_unit_params(s, gu)) return NULL;
  if (gu == 0) {
    *rows = (uint64_t)(p ? s->cfg.seq : s->cfg.vocab), *cols = C;
    return p ? s->wpe : s->wte;
  }
  if (gu == L + 1) {
    if (s->llama && p == 1) { /* the untied LM head */
      *rows = (uint64_t)s->cfg.vocab, *cols = C;
      return s->lm_head;
    }
    *rows = C, *cols = 0;
    return p ? s->lnfb : s->lnfw;
  }
  *rows = s->brows[p], *cols = s->bcols[p];
  return s->blk[p] + (uint64_t)(gu - 1) * s->bsize[p];
}

/* The widths of s->cfg's activations. */
static void widths(zeroc_sampler_t *s) {
  const zeroc_gpt_config_t *c = &s->cfg;
  s->llama = c->family == ZEROC_GPT_FAMILY_LLAMA;
  s->HS = c->hidden / c->heads;
  s->KV = s->llama ? c->kv_heads * s->HS : c->hidden;
  s->QKV = c->hidden + 2 * s->KV;
  s->up = s->llama ? 2 * c->ffn : 4 * c->hidden;
  s->down = s->llama ? c->ffn : 4 * c->hidden;
}

/* The KV cache and the scratch for up to T rows; 0, or -1 out of memory. */
static int alloc_scratch(zeroc_sampler_t *s) {
  const size_t C = (size_t)s->cfg.hidden, T = (size_t)s->cfg.seq, V = (size_t)s->cfg.vocab;
  const size_t L = (size_t)s->cfg.layers;
  s->kv = malloc(L * T * 2 * (size_t)s->KV * sizeof(float));
  s->x = malloc(T * C * 4), s->ln = malloc(T * C * 4), s->qkv = malloc(T * (size_t)s->QKV * 4);
  s->atty = malloc(T * C * 4), s->res = malloc(T * C * 4);
  s->fch = malloc(T * (size_t)s->up * 4), s->fchg = malloc(T * (size_t)s->down * 4);
  s->mean = malloc(T * 4), s->rstd = malloc(T * 4), s->logits = malloc(V * 4);
  s->prob = malloc(V * sizeof(double)), s->idx = malloc(V * sizeof(int));
  if (s->llama) {
    s->inv_freq = malloc((size_t)s->HS / 2 * sizeof(float));
    s->posv = malloc(T * sizeof(int32_t));
    if (!s->inv_freq || !s->posv) return -1;
    /* the angles training turns by (kernels/rope.h: one fp32 table from the config) */
    const zeroc_rope_t rope = {s->cfg.rope_theta, s->cfg.rope_factor, s->cfg.rope_low,
                               s->cfg.rope_high, s->cfg.rope_original};
    zeroc_i_rope_inv_freq(&rope, s->HS, s->inv_freq);
  }
  return !s->kv || !s->x || !s->ln || !s->qkv || !s->atty || !s->res || !s->fch || !s->fchg ||
                 !s->mean || !s->rstd || !s->logits || !s->prob || !s->idx
             ? -1
             : 0;
}

zeroc_result_t zeroc__sampler_create(const zeroc_gpt_config_t *cfg, zeroc_sampler_t **out) {
  *out = NULL;
  CHK(zeroc_gpt_config_check(cfg));
  zeroc_sampler_t *s = calloc(1, sizeof *s);
  if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler struct");
  s->cfg = *cfg;
  s->cache = 1;
  s->draw_vocab = cfg->vocab;
  widths(s);
  const uint64_t C = (uint64_t)cfg->hidden, T = (uint64_t)cfg->seq, V = (uint64_t)cfg->vocab;
  const uint64_t L = (uint64_t)cfg->layers;
  /* wte, then GPT-2's wpe and ln_f (2C), or Llama's norm and its own LM head */
  uint64_t total = s->llama ? V * C + C + (cfg->untied ? V * C : 0) : V * C + T * C + 2 * C;
  s->nbp = block_shapes(s, s->brows, s->bcols);
  for (int p = 0; p < s->nbp; p++) {
    s->bsize[p] = s->brows[p] * (s->bcols[p] ? s->bcols[p] : 1);
    total += L * s->bsize[p];
  }
  s->w = calloc(total, sizeof(float));
  if (!s->w || alloc_scratch(s)) {
    zeroc_sampler_destroy(s);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sampler of %llu weights and a %llu-token cache",
                      (unsigned long long)total, (unsigned long long)T);
  }
  float *at = s->w;
  s->wte = at, at += V * C;
  if (!s->llama) s->wpe = at, at += T * C;
  s->lnfw = at, at += C;
  if (!s->llama) s->lnfb = at, at += C;
  s->lm_head = s->wte;
  if (s->llama && cfg->untied) s->lm_head = at, at += V * C;
  for (int p = 0; p < s->nbp; p++) s->blk[p] = at, at += L * s->bsize[p];
  *out = s;
  return ZEROC_OK;
}

void zeroc_sampler_destroy(zeroc_sampler_t *s) {
  if (!s) return;
  free(s->w);
  free(s->kv);
  free(s->x), free(s->ln), free(s->qkv), free(s->atty), free(s->res);
  free(s->fch), free(s->fchg), free(s->mean), free(s->rstd), free(s->logits);
  free(s->prob), free(s->idx), free(s->inv_freq), free(s->posv);
  free(s);
}

const zeroc_gpt_config_t *zeroc_sampler_config(const zeroc_sampler_t *s) { return &s->cfg; }

void zeroc_sampler_set_cache(zeroc_sampler_t *s, int on) { s->cache = on != 0; }

void zeroc_sampler_set_vocab(zeroc_sampler_t *s, int n) {
  s->draw_vocab = n > 0 && n < s->cfg.vocab ? n : s->cfg.vocab;
}

/* ---- the forward ------------------------------------------------------------------- */

// GPT-2: ids (n) at positions pos..pos+n-1 -> the cache extended by n rows; the logits (V)
// of the last row in s->logits
static void gpt2_forward(zeroc_sampler_t *s, const int32_t *ids, int n) {
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
    zeroc__sampler_linear(s->qkv, s->ln, p[QKVW], p[QKVB], n, C, 3 * C);
    for (int i = 0; i < n; i++) /* k | v of the new rows into the cache */
      memcpy(kv + (size_t)(pos + i) * 2 * C, s->qkv + (size_t)i * 3 * C + C, 2 * C * sizeof(float));
    zeroc__sampler_attend(s->atty, s->qkv, (size_t)3 * C, kv, n, pos, NH, NH, C / NH);
    zeroc__sampler_linear(s->res, s->atty, p[ATTPROJW], p[ATTPROJB], n, C, C);
    zeroc__cpu_add(s->res, x, (size_t)n * C);
    zeroc__cpu_layernorm_forward(s->ln, s->mean, s->rstd, s->res, p[LN2W], p[LN2B], n, C);
    zeroc__sampler_linear(s->fch, s->ln, p[FCW], p[FCB], n, C, 4 * C);
    zeroc__cpu_gelu_forward(s->fchg, s->fch, (size_t)n * 4 * C);
    zeroc__sampler_linear(x, s->fchg, p[FCPROJW], p[FCPROJB], n, 4 * C, C);
    zeroc__cpu_add(x, s->res, (size_t)n * C);
  }
  s->pos = pos + n;
  /* the head: the last row only, the one the next token is drawn from */
  const float *in = x + (size_t)(n - 1) * C;
  zeroc__cpu_layernorm_forward(s->ln, s->mean, s->rstd, in, s->lnfw, s->lnfb, 1, C);
  zeroc__sampler_linear(s->logits, s->ln, s->wte, NULL, 1, C, V);
}

static void forward(zeroc_sampler_t *s, const int32_t *ids, int n) {
  if (s->llama)
    zeroc__sampler_llama_forward(s, ids, n);
  else
    gpt2_forward(s, ids, n);
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
    if (s->cache) {
      forward(s, ids + i, 1);
    } else { /* the rows 0..i at once, as generation without the cache feeds its window */
      s->pos = 0;
      forward(s, ids, i + 1);
    }
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
