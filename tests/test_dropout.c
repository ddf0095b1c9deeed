/*
 * tests/test_dropout.c - dropout's cpu kernels through the dispatch (zeroc_k_*):
 * the elementwise kernel against a plain C reference of the rule in
 * kernels/dropout.h, bit for bit; the kept fraction and the mean on a large
 * tensor; masks that depend only on global coordinates (a tensor cut by rows or
 * by heads draws what the whole one draws); attention with dropout against a
 * double reference with the same mask, and its backward against central
 * differences of that reference with the mask fixed; p = 0 is the plain kernel
 * bit for bit.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"

#define TOL    1e-5
#define FD_H   1e-5
#define P_DROP 0.25f

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *K;

static float *frand(size_t n, uint64_t seed, float lo, float hi) {
  float *x = malloc(n * sizeof *x);
  zt_fill_uniform(x, n, seed, lo, hi);
  return x;
}

static zeroc_dropout_t desc(float p, uint64_t seq0, int64_t row0, int T, int Tmax, int width,
                            int first, int layer, int site) {
  zeroc_dropout_t d = {p,    zeroc_i_dropout_key(7, 3, layer, site), seq0, row0, T, Tmax, width,
                       first};
  return d;
}

/* The rule, written out: element (row, col) is kept when the 32 bits drawn for
 * column col of the row's key are at least p 2^32. A row is a token (sequence
 * slot, position) or an attention query row (slot, global head, query). */
static int ref_keep(const zeroc_dropout_t *d, uint64_t row, uint32_t col) {
  uint32_t bits = zeroc_i_dropout_bits(zeroc_i_dropout_hash(d->key, row), col);
  return (double)bits >= floor((double)d->p * 4294967296.0);
}

/* ---- elementwise -------------------------------------------------------------------- */

static void test_elementwise_reference(void) {
  const int B = 3, T = 5, Tmax = 8, C = 24, N = B * T;
  zeroc_dropout_t d = desc(P_DROP, 11, 0, T, Tmax, C, 0, 2, ZEROC_DROP_MLP_RESID);
  float *x = frand((size_t)N * C, 1, -1, 1), *y = malloc(sizeof(float) * N * C);
  ZT_OK(zeroc_k_dropout(K, NULL, y, x, &d, N, C));
  const float sc = 1.0f / (1.0f - P_DROP);
  size_t bad = 0, kept = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        size_t i = ((size_t)b * T + t) * C + c;
        int k = ref_keep(&d, (11 + (uint64_t)b) * Tmax + (uint64_t)t, (uint32_t)c);
        float want = k ? x[i] * sc : 0.0f;
        kept += k;
        bad += memcmp(&want, &y[i], sizeof want) != 0;
      }
  ZT_ASSERT_MSG(bad == 0, "dropout: %zu of %d elements differ from the rule", bad, N * C);
  ZT_ASSERT_MSG(kept > 0 && kept < (size_t)N * C, "dropout kept %zu of %d", kept, N * C);
  /* in place gives the same bits; the backward is the same call on a gradient */
  ZT_OK(zeroc_k_dropout(K, NULL, x, x, &d, N, C));
  ZT_ASSERT_MSG(!memcmp(x, y, sizeof(float) * N * C), "dropout in place differs");
  free(x);
  free(y);
}

/* The kept fraction is 1 - p within 5 standard deviations, and the mean is kept. */
static void test_kept_fraction(void) {
  const int T = 256, C = 1024, N = 4 * T; /* 2^20 elements */
  const size_t n = (size_t)N * C;
  float *one = malloc(n * sizeof *one), *y = malloc(n * sizeof *y);
  for (size_t i = 0; i < n; i++) one[i] = 1.0f;
  for (int k = 0; k < 3; k++) {
    const float p = k == 0 ? 0.1f : k == 1 ? 0.5f : 0.9f;
    zeroc_dropout_t d = desc(p, 0, 0, T, T, C, 0, 1, ZEROC_DROP_EMBED);
    ZT_OK(zeroc_k_dropout(K, NULL, y, one, &d, N, C));
    size_t kept = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
      kept += y[i] != 0;
      sum += y[i];
    }
    double frac = (double)kept / (double)n, sd = sqrt(p * (1 - p) / (double)n);
    ZT_ASSERT_MSG(fabs(frac - (1 - p)) < 5 * sd, "p %g: kept fraction %.5f, want %.5f +- %.5f", p,
                  frac, 1 - p, 5 * sd);
    ZT_ASSERT_MSG(fabs(sum / (double)n - 1) < 5 * sd / (1 - p), "p %g: mean %.5f, want 1", p,
                  sum / (double)n);
    /* neighbours are independent: both dropped with probability p^2, along a row (the
     * next channel) and down a column (the next token) */
    size_t both_c = 0, both_r = 0, pairs = (size_t)(N - 1) * (C - 1);
    for (int r = 0; r + 1 < N; r++)
      for (int c = 0; c + 1 < C; c++) {
        const float *a = y + (size_t)r * C + c;
        both_c += a[0] == 0 && a[1] == 0;
        both_r += a[0] == 0 && a[C] == 0;
      }
    double q = (double)p * p, sq = sqrt(q * (1 - q) / (double)pairs);
    ZT_ASSERT_MSG(fabs((double)both_c / pairs - q) < 5 * sq &&
                      fabs((double)both_r / pairs - q) < 5 * sq,
                  "p %g: neighbours both dropped %.5f (channels), %.5f (tokens), want %.5f", p,
                  (double)both_c / pairs, (double)both_r / pairs, q);
  }
  free(one);
  free(y);
}

/* Rows cut as sequence parallelism cuts them (row0) draw what the whole draws;
 * another step, layer or site draws another mask. */
static void test_rows_split(void) {
  const int B = 2, T = 6, C = 16, N = B * T, half = N / 2;
  zeroc_dropout_t d = desc(P_DROP, 4, 0, T, T, C, 0, 0, ZEROC_DROP_ATTN_RESID);
  float *x = frand((size_t)N * C, 2, -1, 1), *whole = malloc(sizeof(float) * N * C);
  float *cut = malloc(sizeof(float) * N * C);
  ZT_OK(zeroc_k_dropout(K, NULL, whole, x, &d, N, C));
  ZT_OK(zeroc_k_dropout(K, NULL, cut, x, &d, half, C));
  d.row0 = half;
  ZT_OK(zeroc_k_dropout(K, NULL, cut + (size_t)half * C, x + (size_t)half * C, &d, half, C));
  ZT_ASSERT_MSG(!memcmp(whole, cut, sizeof(float) * N * C), "rows split: masks differ");
  zeroc_dropout_t o = desc(P_DROP, 4, 0, T, T, C, 0, 1, ZEROC_DROP_ATTN_RESID);
  ZT_OK(zeroc_k_dropout(K, NULL, cut, x, &o, N, C));
  ZT_ASSERT_MSG(memcmp(whole, cut, sizeof(float) * N * C), "another layer draws the same mask");
  free(x);
  free(whole);
  free(cut);
}

/* ---- attention ---------------------------------------------------------------------- */

typedef struct {
  double *qkv;
  const zeroc_dropout_t *d;
  int B, T, C, NH;
} att_t;

/* out (B,T,C) = sum_j m_ij softmax_ij v_j; m from the rule (1/(1-p) or 0). */
static void ref_attention(const att_t *a, double *out, double *lse) {
  const int B = a->B, T = a->T, C = a->C, NH = a->NH, HS = C / NH;
  const zeroc_dropout_t *d = a->d;
  double *s = malloc((size_t)T * sizeof *s);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const double *q = a->qkv + ((size_t)b * T + t) * 3 * C + h * HS;
        double mx = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {
          const double *kk = a->qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
          double dd = 0;
          for (int i = 0; i < HS; i++) dd += q[i] * kk[i];
          s[j] = dd / sqrt((double)HS);
          mx = fmax(mx, s[j]);
        }
        for (int j = 0; j <= t; j++) z += exp(s[j] - mx);
        double *o = out + ((size_t)b * T + t) * C + h * HS;
        for (int i = 0; i < HS; i++) o[i] = 0;
        for (int j = 0; j <= t; j++) {
          uint64_t bh = (d->seq0 + (uint64_t)b) * (uint64_t)d->width + (uint64_t)(d->first + h);
          double m = ref_keep(d, bh * (uint64_t)d->Tmax + (uint64_t)t, (uint32_t)j)
                         ? 1.0 / (1.0 - d->p)
                         : 0.0;
          const double *vv = a->qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * HS;
          for (int i = 0; i < HS; i++) o[i] += m * exp(s[j] - mx) / z * vv[i];
        }
        if (lse) lse[((size_t)b * NH + h) * T + t] = mx + log(z);
      }
  free(s);
}

static double rel_err(const float *got, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num) / (den > 0 ? sqrt(den) : 1e-300);
}

static void check_attention(int B, int T, int C, int NH) {
  const size_t N3 = (size_t)B * T * 3 * C, NC = (size_t)B * T * C, NL = (size_t)B * NH * T;
  zeroc_dropout_t d = desc(P_DROP, 5, 0, T, T + 3, NH, 0, 1, ZEROC_DROP_ATTN);
  float *qkv = frand(N3, 41, -2, 2), *out = malloc(NC * 4), *lse = malloc(NL * 4);
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, &d));
  att_t a = {malloc(N3 * 8), &d, B, T, C, NH};
  for (size_t i = 0; i < N3; i++) a.qkv[i] = qkv[i];
  double *ref = malloc(NC * 8), *rl = malloc(NL * 8), *o = malloc(NC * 8);
  ref_attention(&a, ref, rl);
  double e = rel_err(out, ref, NC);
  ZT_ASSERT_MSG(e < TOL, "attention dropout fwd B%d T%d C%d NH%d: error %.3g", B, T, C, NH, e);
  e = rel_err(lse, rl, NL);
  ZT_ASSERT_MSG(e < TOL, "attention dropout lse (undropped): error %.3g", e);
  /* backward: dqkv += d(sum out * R)/dqkv with the mask fixed */
  float *R = frand(NC, 42, -1, 1), *dq0 = frand(N3, 43, -1, 1), *dq = malloc(N3 * 4);
  memcpy(dq, dq0, N3 * 4);
  ZT_OK(zeroc_k_attention_backward(K, NULL, dq, R, qkv, out, lse, B, T, C, NH, &d));
  double num = 0, den = 0;
  for (size_t i = 0; i < N3; i++) {
    const double x0 = a.qkv[i];
    double lp = 0, lm = 0;
    a.qkv[i] = x0 + FD_H;
    ref_attention(&a, o, NULL);
    for (size_t k = 0; k < NC; k++) lp += o[k] * R[k];
    a.qkv[i] = x0 - FD_H;
    ref_attention(&a, o, NULL);
    for (size_t k = 0; k < NC; k++) lm += o[k] * R[k];
    a.qkv[i] = x0;
    const double g = (lp - lm) / (2 * FD_H), got = (double)dq[i] - dq0[i];
    num += (got - g) * (got - g);
    den += g * g;
  }
  e = sqrt(num / den);
  ZT_ASSERT_MSG(den > 0 && e < TOL, "attention dropout bwd B%d T%d C%d NH%d: error %.3g", B, T, C,
                NH, e);
  free(qkv), free(out), free(lse), free(a.qkv), free(ref), free(rl), free(o);
  free(R), free(dq0), free(dq);
}

static void test_attention(void) {
  check_attention(2, 7, 24, 3);
  check_attention(1, 13, 32, 4);
}

/* Heads cut as tensor parallelism cuts them (first) draw what the whole draws,
 * and p = 0 is the kernel without dropout, bit for bit. */
static void test_attention_heads_split(void) {
  const int B = 2, T = 9, C = 32, NH = 4, HS = C / NH, Cl = C / 2;
  const size_t N3 = (size_t)B * T * 3 * C, NC = (size_t)B * T * C;
  zeroc_dropout_t d = desc(P_DROP, 0, 0, T, T, NH, 0, 3, ZEROC_DROP_ATTN);
  float *qkv = frand(N3, 51, -2, 2), *out = malloc(NC * 4), *lse = malloc((size_t)B * NH * T * 4);
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, &d));
  /* the second half of the heads, as tp rank 1 of 2 holds them: q | k | v of heads 2, 3 */
  float *q2 = malloc((size_t)B * T * 3 * Cl * 4), *o2 = malloc((size_t)B * T * Cl * 4);
  float *l2 = malloc((size_t)B * (NH / 2) * T * 4);
  for (int r = 0; r < B * T; r++)
    for (int part = 0; part < 3; part++)
      memcpy(q2 + (size_t)r * 3 * Cl + part * Cl, qkv + (size_t)r * 3 * C + part * C + Cl, Cl * 4);
  d.first = NH / 2;
  ZT_OK(zeroc_k_attention_forward(K, NULL, o2, l2, q2, B, T, Cl, NH / 2, &d));
  size_t bad = 0;
  for (int r = 0; r < B * T; r++)
    bad += memcmp(o2 + (size_t)r * Cl, out + (size_t)r * C + Cl, Cl * 4);
  ZT_ASSERT_MSG(bad == 0, "attention dropout: heads %d.. on their own differ from the whole", 2);
  (void)HS;
  /* p = 0 */
  float *plain = malloc(NC * 4), *dplain = calloc(N3, 4), *dzero = calloc(N3, 4);
  float *R = frand(NC, 52, -1, 1);
  d.p = 0;
  d.first = 0;
  ZT_OK(zeroc_k_attention_forward(K, NULL, plain, lse, qkv, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, &d));
  ZT_ASSERT_MSG(!memcmp(plain, out, NC * 4), "attention with p = 0 differs from no dropout");
  ZT_OK(zeroc_k_attention_backward(K, NULL, dplain, R, qkv, plain, lse, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_backward(K, NULL, dzero, R, qkv, plain, lse, B, T, C, NH, &d));
  ZT_ASSERT_MSG(!memcmp(dplain, dzero, N3 * 4), "attention backward with p = 0 differs");
  free(qkv), free(out), free(lse), free(q2), free(o2), free(l2), free(plain), free(dplain);
  free(dzero), free(R);
}

static void test_bad_descriptors(void) {
  float x[8] = {0}, y[8];
  zeroc_dropout_t d = desc(1.0f, 0, 0, 2, 2, 4, 0, 0, 0);
  ZT_ASSERT_MSG(zeroc_k_dropout(K, NULL, y, x, &d, 2, 4) == ZEROC_ERR_INVALID_ARG, "%s",
                "a bad descriptor was accepted");
  d.p = -0.1f;
  ZT_ASSERT_MSG(zeroc_k_dropout(K, NULL, y, x, &d, 2, 4) == ZEROC_ERR_INVALID_ARG, "%s",
                "a bad descriptor was accepted");
  d.p = 0.1f;
  d.Tmax = 1; /* T 2 > Tmax */
  ZT_ASSERT_MSG(zeroc_k_dropout(K, NULL, y, x, &d, 2, 4) == ZEROC_ERR_INVALID_ARG, "%s",
                "a bad descriptor was accepted");
  ZT_ASSERT_MSG(zeroc_k_dropout(K, NULL, y, x, NULL, 2, 4) == ZEROC_ERR_INVALID_ARG, "%s",
                "a bad descriptor was accepted");
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"elementwise dropout equals the rule", test_elementwise_reference},
      {"kept fraction 1 - p, mean kept", test_kept_fraction},
      {"rows cut like sequence parallelism draw the same mask", test_rows_split},
      {"attention dropout vs reference and finite differences", test_attention},
      {"attention heads cut like tensor parallelism; p = 0 is no dropout",
       test_attention_heads_split},
      {"bad descriptors are refused", test_bad_descriptors},
      ZT_END,
  };
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &K) !=
      ZEROC_OK) {
    fprintf(stderr, "zeroc_kernels_create: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  int rc = zt_run("dropout", tests);
  zeroc_kernels_destroy(K);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return rc;
}
