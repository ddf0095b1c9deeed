/*
 * tests/test_kernels_attn.c - the cpu attention kernel through the public
 * dispatch (zeroc_k_attention_*): the forward against a plain double-precision
 * reference written here, the backward against central differences of it (with
 * the gradient buffer pre-filled, so accumulation is checked too), T = 1, shapes
 * across the kernel's tiles, odd head sizes, and dropout. Shape errors and thread
 * determinism of attention are in test_kernels_cpu.c; the helpers in kernels_test.h.
 */
#include "kernels_test.h"

/* ---- double-precision reference ----------------------------------------------------- */

/* Materialises each row of scores (the plain way the kernel avoids); with a
 * dropout mask (d non-NULL) drawn from the hash at (row (b, h, t), key j). */
typedef struct {
  double *qkv;
  const zeroc_dropout_t *d; /* NULL: none */
  int B, T, C, NH;
} attd_args_t;

static void ref_attention_drop(const attd_args_t *a, double *out, double *lse) {
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
          double x = 0;
          for (int i = 0; i < HS; i++) x += q[i] * kk[i];
          s[j] = x / sqrt((double)HS);
          mx = fmax(mx, s[j]);
        }
        for (int j = 0; j <= t; j++) z += exp(s[j] - mx);
        const uint64_t rk =
            d ? zeroc_i_dropout_row_key(d->key, zeroc_i_dropout_row_att(d, b, h, t)) : 0;
        double *o = out + ((size_t)b * T + t) * C + h * HS;
        for (int i = 0; i < HS; i++) o[i] = 0;
        for (int j = 0; j <= t; j++) {
          double m = 1.0; /* dropout's multiplier: 1/(1-p) kept, 0 dropped */
          if (d && zeroc_i_dropout_bits(rk, (uint32_t)j) < zeroc_i_dropout_threshold(d->p)) m = 0.0;
          if (d && m > 0) m = 1.0 / (1.0 - d->p);
          const double *vv = a->qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * HS;
          for (int i = 0; i < HS; i++) o[i] += m * exp(s[j] - mx) / z * vv[i];
        }
        if (lse) lse[((size_t)b * NH + h) * T + t] = mx + log(z);
      }
  free(s);
}

/* the same without dropout */
static void ref_attention(double *out, double *lse, const double *qkv, int B, int T, int C,
                          int NH) {
  const attd_args_t a = {(double *)qkv, NULL, B, T, C, NH};
  ref_attention_drop(&a, out, lse);
}

/* ---- attention ---------------------------------------------------------------------- */

typedef struct {
  double *qkv;
  int B, T, C, NH;
} att_args_t;

static void att_eval(const void *a, double *out) {
  const att_args_t *t = a;
  ref_attention(out, NULL, t->qkv, t->B, t->T, t->C, t->NH);
}

static void check_attention(int B, int T, int C, int NH) {
  const size_t N3 = (size_t)B * T * 3 * C, NC = (size_t)B * T * C, NL = (size_t)B * NH * T;
  char what[96];
  /* spread 2: scores up to ~|q||k|/sqrt(HS), so softmax rows are far from uniform */
  float *qkv = frand(N3, 41, -2, 2);
  float *out = fnan(NC), *lse = fnan(NL);
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, NULL));
  att_args_t a = {to_d(qkv, N3), B, T, C, NH};
  double *ref = dalloc(NC), *rlse = dalloc(NL);
  ref_attention(ref, rlse, a.qkv, B, T, C, NH);
  snprintf(what, sizeof what, "attention fwd B%d T%d C%d NH%d", B, T, C, NH);
  expect_close(what, out, ref, NC, TOL_FWD);
  expect_close("attention lse", lse, rlse, NL, TOL_FWD);

  float *R = frand(NC, 42, -1, 1);
  float *dqkv0 = frand(N3, 43, -1, 1), *dqkv = fcopy(dqkv0, N3);
  ZT_OK(zeroc_k_attention_backward(K, NULL, dqkv, R, qkv, out, lse, B, T, C, NH, NULL));
  double *Rd = to_d(R, NC), *g = dalloc(N3);
  fd_grad(att_eval, &a, a.qkv, N3, Rd, NC, g);
  snprintf(what, sizeof what, "attention dqkv B%d T%d C%d NH%d", B, T, C, NH);
  expect_grad(what, dqkv, dqkv0, g, N3, TOL_BWD);
}

static void test_attention(void) {
  check_attention(2, 7, 24, 3);
  check_attention(2, 13, 48, 4);
  release();
}

/* One position: the only probability is 1, so out = v, lse = q.k/sqrt(HS),
 * dv = dout, and q and k get no gradient. */
static void test_attention_t1(void) {
  const int B = 2, T = 1, C = 24, NH = 4, HS = C / NH;
  float *qkv = frand((size_t)B * 3 * C, 44, -1, 1), *out = fnan((size_t)B * C);
  float *lse = fnan((size_t)B * NH);
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, NULL));
  double *v = dalloc((size_t)B * C), *rl = dalloc((size_t)B * NH);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      double d = 0;
      for (int i = 0; i < HS; i++) {
        d += (double)qkv[b * 3 * C + h * HS + i] * qkv[b * 3 * C + C + h * HS + i];
        v[b * C + h * HS + i] = qkv[b * 3 * C + 2 * C + h * HS + i];
      }
      rl[b * NH + h] = d / sqrt((double)HS);
    }
  expect_close("attention T=1 out == v", out, v, (size_t)B * C, 1e-7);
  expect_close("attention T=1 lse", lse, rl, (size_t)B * NH, TOL_FWD);

  float *R = frand((size_t)B * C, 45, -1, 1);
  float *d0 = frand((size_t)B * 3 * C, 46, -1, 1), *d = fcopy(d0, (size_t)B * 3 * C);
  ZT_OK(zeroc_k_attention_backward(K, NULL, d, R, qkv, out, lse, B, T, C, NH, NULL));
  double max_qk = 0, max_v = 0;
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      max_qk = fmax(max_qk, fabs((double)d[b * 3 * C + c] - d0[b * 3 * C + c]));
      max_qk = fmax(max_qk, fabs((double)d[b * 3 * C + C + c] - d0[b * 3 * C + C + c]));
      max_v = fmax(
          max_v, fabs((double)d[b * 3 * C + 2 * C + c] - d0[b * 3 * C + 2 * C + c] - R[b * C + c]));
    }
  ZT_ASSERT_MSG(max_qk <= 1e-6, "attention T=1: dq/dk moved by %.3g (want 0)", max_qk);
  ZT_ASSERT_MSG(max_v <= 1e-6, "attention T=1: dv - dout off by %.3g", max_v);
  check_attention(3, 1, 48, 4); /* and through the general finite-difference path */
  release();
}

/* Shapes that cross the kernel's tiles (64 queries x 64 keys: one tile, one past
 * a tile, two partial) and head sizes below, at and past its 16-wide columns,
 * odd among them, each with and without dropout on the probabilities, against
 * ref_attention_drop; the gradient is checked by central
 * differences on a spread sample of qkv (every input of a T = 130 head would
 * take minutes), still over q, k and v, every head and every tile. */

static void check_attention_tiles(int B, int T, int C, int NH, float p) {
  const size_t N3 = (size_t)B * T * 3 * C, NC = (size_t)B * T * C, NL = (size_t)B * NH * T;
  const zeroc_dropout_t d = {p, zeroc_i_dropout_key(7, 3, 1, ZEROC_DROP_ATTN), 2, 0, T, T + 5, NH,
                             0};
  const zeroc_dropout_t *dp = p > 0 ? &d : NULL;
  char what[96];
  float *qkv = frand(N3, 47, -2, 2), *out = fnan(NC), *lse = fnan(NL);
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, dp));
  attd_args_t a = {to_d(qkv, N3), dp, B, T, C, NH};
  double *ref = dalloc(NC), *rlse = dalloc(NL), *o = dalloc(NC);
  ref_attention_drop(&a, ref, rlse);
  snprintf(what, sizeof what, "attention fwd B%d T%d C%d NH%d p%g", B, T, C, NH, p);
  expect_close(what, out, ref, NC, TOL_FWD);
  snprintf(what, sizeof what, "attention lse B%d T%d C%d NH%d p%g", B, T, C, NH, p);
  expect_close(what, lse, rlse, NL, TOL_FWD);

  float *R = frand(NC, 48, -1, 1);
  float *dqkv0 = frand(N3, 49, -1, 1), *dqkv = fcopy(dqkv0, N3);
  ZT_OK(zeroc_k_attention_backward(K, NULL, dqkv, R, qkv, out, lse, B, T, C, NH, dp));
  enum { NS = 160 };
  const size_t ns = N3 < NS ? N3 : NS;
  float got[NS], pre[NS];
  double g[NS];
  for (size_t k = 0; k < ns; k++) {
    const size_t i = (size_t)(((double)k + 0.37) * (double)N3 / (double)ns);
    const double x0 = a.qkv[i];
    a.qkv[i] = x0 + FD_H;
    ref_attention_drop(&a, o, NULL);
    double lp = 0, lm = 0;
    for (size_t e = 0; e < NC; e++) lp += o[e] * R[e];
    a.qkv[i] = x0 - FD_H;
    ref_attention_drop(&a, o, NULL);
    for (size_t e = 0; e < NC; e++) lm += o[e] * R[e];
    a.qkv[i] = x0;
    g[k] = (lp - lm) / (2 * FD_H), got[k] = dqkv[i], pre[k] = dqkv0[i];
  }
  snprintf(what, sizeof what, "attention dqkv B%d T%d C%d NH%d p%g", B, T, C, NH, p);
  expect_grad(what, got, pre, g, ns, TOL_BWD);
}

static void test_attention_tiles(void) {
  const struct {
    int B, T, C, NH;
  } sh[] = {{2, 1, 80, 1},   {2, 31, 24, 3},  {1, 64, 48, 2}, {1, 65, 128, 2},
            {1, 130, 80, 1}, {1, 130, 48, 2}, {2, 65, 21, 3}, {1, 70, 8, 1}};
  for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
    check_attention_tiles(sh[i].B, sh[i].T, sh[i].C, sh[i].NH, 0.0f);
    check_attention_tiles(sh[i].B, sh[i].T, sh[i].C, sh[i].NH, 0.2f);
  }
  release();
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"attention fwd/bwd vs reference and finite differences", test_attention},
      {"attention with T = 1", test_attention_t1},
      {"attention across tile edges, odd head sizes, dropout", test_attention_tiles},
      ZT_END,
  };
  return kt_main(argc, argv, "kernels_attn", tests);
}
