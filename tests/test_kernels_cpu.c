/*
 * tests/test_kernels_cpu.c - the cpu kernels through the public dispatch (zeroc_k_*):
 * each forward against a plain double-precision reference (in kernels_test.h), each
 * backward against central differences of that reference (with gradient buffers
 * pre-filled, so accumulation is checked too), special cases, shape errors, and
 * bitwise-identical results for different OpenMP thread counts (of the engine kernels
 * too). Attention's forward and backward are in test_kernels_attn.c, the engine kernels'
 * own checks (cast, add_to, accumulate, sumsq, AdamW, the vector exp) in
 * test_kernels_engine.c.
 */
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "kernels_test.h"

/* ---- encoder ------------------------------------------------------------------------ */

typedef struct {
  const int32_t *inp;
  double *wte, *wpe;
  int B, T, C;
} enc_args_t;

static void enc_eval(const void *a, double *out) {
  const enc_args_t *e = a;
  ref_encoder(out, e->inp, e->wte, e->wpe, e->B, e->T, e->C);
}

/* Forward and backward for B, T, C, V (wpe has T + 2 rows: only T are used). */
static void check_encoder(int B, int T, int C, int V, const int32_t *inp, const char *tag) {
  const size_t BTC = (size_t)B * T * C, Tw = (size_t)T + 2;
  char what[96];
  float *wte = frand((size_t)V * C, 11, -1, 1), *wpe = frand(Tw * C, 12, -1, 1);
  float *out = fnan(BTC);
  ZT_OK(zeroc_k_encoder_forward(K, NULL, out, inp, wte, wpe, B, T, C));
  enc_args_t a = {inp, to_d(wte, (size_t)V * C), to_d(wpe, Tw * C), B, T, C};
  double *ref = dalloc(BTC);
  enc_eval(&a, ref);
  snprintf(what, sizeof what, "encoder fwd %s", tag);
  expect_close(what, out, ref, BTC, TOL_FWD);

  float *R = frand(BTC, 13, -1, 1);
  float *dwte0 = frand((size_t)V * C, 14, -1, 1), *dwpe0 = frand(Tw * C, 15, -1, 1);
  float *dwte = fcopy(dwte0, (size_t)V * C), *dwpe = fcopy(dwpe0, Tw * C);
  ZT_OK(zeroc_k_encoder_backward(K, NULL, dwte, dwpe, R, inp, B, T, C));
  double *Rd = to_d(R, BTC), *g = dalloc((size_t)V * C);
  fd_grad(enc_eval, &a, a.wte, (size_t)V * C, Rd, BTC, g);
  snprintf(what, sizeof what, "encoder dwte %s", tag);
  expect_grad(what, dwte, dwte0, g, (size_t)V * C, TOL_BWD);
  fd_grad(enc_eval, &a, a.wpe, Tw * C, Rd, BTC, g);
  snprintf(what, sizeof what, "encoder dwpe %s", tag);
  expect_grad(what, dwpe, dwpe0, g, Tw * C, TOL_BWD);
  /* rows of tokens that never occur, and positions >= T, are not written at all */
  int untouched = 1;
  for (int v = 0; v < V; v++) {
    int used = 0;
    for (int i = 0; i < B * T; i++) used |= inp[i] == v;
    if (!used) untouched &= !memcmp(dwte + (size_t)v * C, dwte0 + (size_t)v * C, C * sizeof(float));
  }
  untouched &= !memcmp(dwpe + (size_t)T * C, dwpe0 + (size_t)T * C, 2 * C * sizeof(float));
  ZT_ASSERT_MSG(untouched, "encoder backward %s wrote rows it has no gradient for", tag);
}

static void test_encoder(void) {
  check_encoder(2, 7, 24, 37, tokens(14, 1, 37), "B2 T7 C24");
  check_encoder(2, 13, 48, 37, tokens(26, 2, 37), "B2 T13 C48");
  release();
}

/* Many positions share a token: their rows of dout must all add into one dwte row. */
static void test_encoder_repeated_tokens(void) {
  int32_t *inp = tokens(26, 3, 3); /* 26 positions, tokens 0..2, vocabulary 37 */
  inp[0] = inp[25] = 36;           /* the first and last position share a rare one */
  check_encoder(2, 13, 48, 37, inp, "repeated tokens");
  release();
}

/* ---- layernorm ---------------------------------------------------------------------- */

typedef struct {
  double *x, *w, *b;
  int N, C;
} ln_args_t;

static void ln_eval(const void *a, double *out) {
  const ln_args_t *l = a;
  ref_layernorm(out, NULL, NULL, l->x, l->w, l->b, l->N, l->C);
}

static void check_layernorm(int N, int C, float offset) {
  const size_t NC = (size_t)N * C;
  char what[96];
  float *x = frand(NC, 21, -1, 1), *w = frand(C, 22, 0.5f, 1.5f), *b = frand(C, 23, -1, 1);
  for (size_t i = 0; i < NC; i++) x[i] += offset;
  float *out = fnan(NC), *mean = fnan(N), *rstd = fnan(N);
  ZT_OK(zeroc_k_layernorm_forward(K, NULL, out, mean, rstd, x, w, b, N, C));
  ln_args_t a = {to_d(x, NC), to_d(w, C), to_d(b, C), N, C};
  double *ref = dalloc(NC), *rmean = dalloc(N), *rrstd = dalloc(N);
  ref_layernorm(ref, rmean, rrstd, a.x, a.w, a.b, N, C);
  snprintf(what, sizeof what, "layernorm fwd N%d C%d +%g", N, C, offset);
  expect_close(what, out, ref, NC, TOL_FWD);
  expect_close("layernorm mean", mean, rmean, N, TOL_FWD);
  expect_close("layernorm rstd", rstd, rrstd, N, TOL_FWD);

  float *R = frand(NC, 24, -1, 1);
  float *dx0 = frand(NC, 25, -1, 1), *dw0 = frand(C, 26, -1, 1), *db0 = frand(C, 27, -1, 1);
  float *dx = fcopy(dx0, NC), *dw = fcopy(dw0, C), *db = fcopy(db0, C);
  ZT_OK(zeroc_k_layernorm_backward(K, NULL, dx, dw, db, R, x, w, mean, rstd, N, C));
  double *Rd = to_d(R, NC), *g = dalloc(NC);
  fd_grad(ln_eval, &a, a.x, NC, Rd, NC, g);
  snprintf(what, sizeof what, "layernorm dinp N%d C%d +%g", N, C, offset);
  expect_grad(what, dx, dx0, g, NC, TOL_BWD);
  fd_grad(ln_eval, &a, a.w, C, Rd, NC, g);
  expect_grad("layernorm dweight", dw, dw0, g, C, TOL_BWD);
  fd_grad(ln_eval, &a, a.b, C, Rd, NC, g);
  expect_grad("layernorm dbias", db, db0, g, C, TOL_BWD);
}

static void test_layernorm(void) {
  check_layernorm(14, 24, 0);
  check_layernorm(26, 48, 0);
  check_layernorm(13, 37, 30); /* rows far from zero: the variance must not cancel */
  /* the vector loops' tails: C below and not a multiple of the width, one row,
   * C across the backward's 64-channel dweight blocks */
  check_layernorm(5, 3, 0);
  check_layernorm(1, 13, 0);
  check_layernorm(7, 70, 0);
  release();
}

/* The fused LayerNorm forms against the calls they replace, bit for bit (and so against
 * the references above): residual_layernorm_forward = add + layernorm_forward, apart and
 * in place on a; layernorm_backward_ex set = a copy of dres (dres apart, or dres == dinp)
 * or a memset (dres NULL) + layernorm_backward. Row 0 of dout is -0: its gradient has
 * -0s, which a zeroed dinp turns into +0 and so must the NULL form. */
static void check_layernorm_fused(int N, int C) {
  const size_t NC = (size_t)N * C, fb = NC * sizeof(float), cb = C * sizeof(float);
  const size_t nb = N * sizeof(float);
  float *a = frand(NC, 160, -1, 1), *b = frand(NC, 161, -2, 3);
  float *w = frand(C, 162, 0.5f, 1.5f), *bs = frand(C, 163, -1, 1);
  float *res = fnan(NC), *out = fnan(NC), *mean = fnan(N), *rstd = fnan(N);
  ZT_OK(zeroc_k_residual_layernorm_forward(K, NULL, res, out, mean, rstd, a, b, w, bs, N, C));
  float *r0 = fcopy(a, NC), *o0 = fnan(NC), *m0 = fnan(N), *s0 = fnan(N);
  ZT_OK(zeroc_k_add(K, NULL, r0, b, NC));
  ZT_OK(zeroc_k_layernorm_forward(K, NULL, o0, m0, s0, r0, w, bs, N, C));
  ZT_ASSERT_MSG(!memcmp(res, r0, fb) && !memcmp(out, o0, fb) && !memcmp(mean, m0, nb) &&
                    !memcmp(rstd, s0, nb),
                "residual_layernorm_forward N%d C%d differs from add + layernorm_forward", N, C);
  float *ai = fcopy(a, NC);
  ZT_OK(zeroc_k_residual_layernorm_forward(K, NULL, ai, out, mean, rstd, ai, b, w, bs, N, C));
  ZT_ASSERT_MSG(!memcmp(ai, r0, fb) && !memcmp(out, o0, fb),
                "residual_layernorm_forward N%d C%d in place on a differs", N, C);

  float *dout = frand(NC, 164, -1, 1), *dres = frand(NC, 165, -1, 1);
  for (int c = 0; c < C; c++) dout[c] = -0.0f;
  float *dw0 = frand(C, 166, -1, 1), *db0 = frand(C, 167, -1, 1);
  float *want = fcopy(dres, NC), *ww = fcopy(dw0, C), *wb = fcopy(db0, C);
  ZT_OK(zeroc_k_layernorm_backward(K, NULL, want, ww, wb, dout, r0, w, m0, s0, N, C));
  float *zero = talloc(fb), *wz = fcopy(dw0, C), *wzb = fcopy(db0, C);
  ZT_OK(zeroc_k_layernorm_backward(K, NULL, zero, wz, wzb, dout, r0, w, m0, s0, N, C));
  const struct {
    const char *how;
    int alias, null;
  } ways[] = {{"dres apart", 0, 0}, {"dres == dinp", 1, 0}, {"dres NULL", 0, 1}};
  for (int i = 0; i < 3; i++) {
    float *dx = ways[i].alias ? fcopy(dres, NC) : fnan(NC), *dw = fcopy(dw0, C);
    float *db = fcopy(db0, C);
    const float *base = ways[i].null ? NULL : ways[i].alias ? dx : dres;
    ZT_OK(zeroc_k_layernorm_backward_ex(K, NULL, dx, dw, db, dout, r0, w, m0, s0, N, C, base,
                                        ZEROC_K_DINP_SET));
    const float *wx = ways[i].null ? zero : want;
    ZT_ASSERT_MSG(!memcmp(dx, wx, fb) && !memcmp(dw, ww, cb) && !memcmp(db, wb, cb),
                  "layernorm_backward_ex (%s) N%d C%d differs from copy + layernorm_backward",
                  ways[i].how, N, C);
  }
}

static void test_layernorm_fused(void) {
  /* C below, at and past the vector width, past the one-thread dweight rows (4096); N*C
   * past the threading threshold (37 x 768, 65 x 256) */
  const int shapes[][2] = {{5, 13},   {9, 100},  {7, 300},  {37, 768}, {65, 256},
                           {5, 1000}, {3, 2056}, {2, 4100}, {1, 3}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    check_layernorm_fused(shapes[i][0], shapes[i][1]);
  float *buf = frand(64, 168, -1, 1);
  CU_ASSERT_EQUAL(
      zeroc_k_layernorm_backward_ex(K, NULL, buf, buf, buf, buf, buf, buf, buf, buf, 2, 8, buf, 0),
      ZEROC_ERR_INVALID_ARG); /* dres without ZEROC_K_DINP_SET */
  CU_ASSERT_EQUAL(
      zeroc_k_layernorm_backward_ex(K, NULL, buf, buf, buf, buf, buf, buf, buf, buf, 2, 8, NULL, 2),
      ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(
      zeroc_k_residual_layernorm_forward(K, NULL, buf, buf, buf, buf, buf, buf, buf, buf, 2, 8),
      ZEROC_ERR_INVALID_ARG); /* out aliasing res */
  release();
}

/* ---- matmul ------------------------------------------------------------------------- */

typedef struct {
  double *x, *w, *b;
  int N, C, OC;
} mm_args_t;

static void mm_eval(const void *a, double *out) {
  const mm_args_t *m = a;
  ref_matmul(out, m->x, m->w, m->b, m->N, m->C, m->OC);
}

static void check_matmul(int N, int C, int OC, int with_bias) {
  const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
  char what[96];
  float *x = frand(NC, 31, -1, 1), *w = frand(OCC, 32, -1, 1), *b = frand(OC, 33, -1, 1);
  float *out = fnan(NO);
  ZT_OK(zeroc_k_matmul_forward(K, NULL, out, x, w, with_bias ? b : NULL, N, C, OC));
  mm_args_t a = {to_d(x, NC), to_d(w, OCC), with_bias ? to_d(b, OC) : NULL, N, C, OC};
  double *ref = dalloc(NO);
  mm_eval(&a, ref);
  snprintf(what, sizeof what, "matmul fwd N%d C%d OC%d bias %d", N, C, OC, with_bias);
  expect_close(what, out, ref, NO, TOL_FWD);

  float *R = frand(NO, 34, -1, 1);
  float *dx0 = frand(NC, 35, -1, 1), *dw0 = frand(OCC, 36, -1, 1), *db0 = frand(OC, 37, -1, 1);
  float *dx = fcopy(dx0, NC), *dw = fcopy(dw0, OCC), *db = fcopy(db0, OC);
  /* without a bias, dinp and dbias are left out (NULL) as the header allows */
  ZT_OK(zeroc_k_matmul_backward(K, NULL, with_bias ? dx : NULL, dw, with_bias ? db : NULL, R, x, w,
                                N, C, OC));
  double *Rd = to_d(R, NO), *g = dalloc(OCC > NC ? OCC : NC);
  fd_grad(mm_eval, &a, a.w, OCC, Rd, NO, g);
  snprintf(what, sizeof what, "matmul dweight bias %d", with_bias);
  expect_grad(what, dw, dw0, g, OCC, TOL_BWD);
  if (with_bias) {
    fd_grad(mm_eval, &a, a.x, NC, Rd, NO, g);
    expect_grad("matmul dinp", dx, dx0, g, NC, TOL_BWD);
    fd_grad(mm_eval, &a, a.b, OC, Rd, NO, g);
    expect_grad("matmul dbias", db, db0, g, OC, TOL_BWD);
  }
}

static void test_matmul(void) {
  check_matmul(14, 24, 37, 1);
  check_matmul(26, 48, 144, 1);
  check_matmul(13, 24, 37, 0);
  check_matmul(3, 5, 5, 1); /* bias sums shorter than one vector */
  release();
}

/* ---- elementwise -------------------------------------------------------------------- */

typedef struct {
  double *x;
  size_t n;
} ew_args_t;

static void gelu_eval(const void *a, double *out) {
  const ew_args_t *e = a;
  for (size_t i = 0; i < e->n; i++) out[i] = ref_gelu(e->x[i]);
}

static void test_gelu(void) {
  const size_t N = 1001;
  float *x = frand(N, 51, -5, 5), *out = fnan(N);
  ZT_OK(zeroc_k_gelu_forward(K, NULL, out, x, N));
  ew_args_t a = {to_d(x, N), N};
  double *ref = dalloc(N);
  gelu_eval(&a, ref);
  expect_close("gelu fwd", out, ref, N, TOL_FWD);

  float *R = frand(N, 52, -1, 1), *d0 = frand(N, 53, -1, 1), *d = fcopy(d0, N);
  ZT_OK(zeroc_k_gelu_backward(K, NULL, d, x, R, N));
  double *g = dalloc(N);
  fd_grad(gelu_eval, &a, a.x, N, to_d(R, N), N, g);
  expect_grad("gelu bwd", d, d0, g, N, TOL_BWD);

  /* far tails: exp overflows inside, the result must still be the limit */
  float big[6] = {-1e4f, -100, -12, 12, 100, 1e4f}, gb[6], db[6] = {0};
  const float one[6] = {1, 1, 1, 1, 1, 1};
  ZT_OK(zeroc_k_gelu_forward(K, NULL, gb, big, 6));
  ZT_OK(zeroc_k_gelu_backward(K, NULL, db, big, one, 6));
  for (int i = 0; i < 6; i++) {
    const double want = ref_gelu(big[i]), dwant = big[i] < 0 ? 0.0 : 1.0;
    ZT_ASSERT_MSG(fabs(gb[i] - want) <= 1e-6 * fmax(1.0, fabs(want)), "gelu(%g) = %g, want %g",
                  big[i], gb[i], want);
    ZT_ASSERT_MSG(fabs(db[i] - dwant) <= 1e-6, "gelu'(%g) = %g, want %g", big[i], db[i], dwant);
  }
  release();
}

/* The vector loop's tails (lengths below and not a multiple of 8: the two
 * clones and the thread split put elements in different lanes and tails, each
 * must give the scalar result), the exp's saturation edge, and NaN kept. */
static void test_gelu_lengths(void) {
  static const size_t lens[] = {1, 3, 7, 9, 17, 33};
  for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
    const size_t N = lens[k];
    float *x = frand(N, 54 + k, -6, 6), *out = fnan(N);
    ZT_OK(zeroc_k_gelu_forward(K, NULL, out, x, N));
    ew_args_t a = {to_d(x, N), N};
    double *ref = dalloc(N), *g = dalloc(N);
    gelu_eval(&a, ref);
    expect_close("gelu fwd, short", out, ref, N, TOL_FWD);
    /* dout away from 0 and a small prefill: with one element the norm is that
     * element, and gelu' is ~0.01 near its zero at x = -0.75, where a prefill
     * of ~1 would round the result to its own ulp */
    float *R = frand(N, 64 + k, 0.5f, 1.5f), *d0 = frand(N, 74 + k, -0.1f, 0.1f);
    float *d = fcopy(d0, N);
    ZT_OK(zeroc_k_gelu_backward(K, NULL, d, x, R, N));
    fd_grad(gelu_eval, &a, a.x, N, to_d(R, N), N, g);
    expect_grad("gelu bwd, short", d, d0, g, N, TOL_BWD);
  }
  /* 2k(x + a x^3) crosses exp's limits (-87.3, 88.4) near |x| = 10.0, 10.04 */
  float x[9] = {-10.2f, -10.05f, -10.03f, -9.9f, 9.9f, 9.99f, 10.01f, 10.2f, NAN}, y[9],
        dy[9] = {0};
  const float one[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  ZT_OK(zeroc_k_gelu_forward(K, NULL, y, x, 9));
  ZT_OK(zeroc_k_gelu_backward(K, NULL, dy, x, one, 9));
  for (int i = 0; i < 8; i++) {
    const double want = ref_gelu(x[i]), h = 1e-3;
    const double dwant = (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h);
    ZT_ASSERT_MSG(fabs(y[i] - want) <= 1e-6 * fmax(1.0, fabs(want)), "gelu(%g) = %g, want %g", x[i],
                  y[i], want);
    ZT_ASSERT_MSG(fabs(dy[i] - dwant) <= 1e-6, "gelu'(%g) = %g, want %g", x[i], dy[i], dwant);
  }
  ZT_ASSERT_MSG(isnan(y[8]) && isnan(dy[8]), "gelu(NaN) = %g, gelu'(NaN) = %g: not NaN", y[8],
                dy[8]);
  release();
}

static double ref_gelu_slope(double x) {
  const double k = 0.7978845608028654, a = 0.044715, t = tanh(k * (x + a * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * a * x * x);
}

/* matmul_backward_ex's GELU slope takes the sigmoid from the forward's output (s = g / x,
 * its first-order form near 0): against the exact slope over [-12, 12] on a fine grid, at
 * and around the switch (|x| = 1e-6), at 0, -0, a denormal, past exp's limits and NaN, in
 * the vector loop and its scalar tail (N not a multiple of 8). The recomputed slope of
 * gelu_backward is off by up to 2e-6 here; this one by up to 4e-6 (near x = 5, where
 * 1 - s keeps few digits). */
static void test_gelu_slope_from_out(void) {
  static const float edge[] = {0.0f,  -0.0f, 1e-40f, -1e-40f, 9.9e-7f, -9.9e-7f, 1e-6f,
                               -1e-6f, 1.1e-6f, -1.1e-6f, 1e-5f, -1e-5f, 1e-3f,   -1e-3f,
                               -10.05f, -10.2f, 9.99f,  10.2f,  -50.0f, 60.0f,   NAN};
  const size_t ne = sizeof edge / sizeof *edge, ng = 24001, N = ng + ne; /* N % 8 = 6 */
  float *x = talloc(N * 4), *g = fnan(N), *d = talloc(N * 4);
  for (size_t i = 0; i < ng; i++) x[i] = -12.0f + 1e-3f * (float)i;
  memcpy(x + ng, edge, sizeof edge);
  ZT_OK(zeroc_k_gelu_forward(K, NULL, g, x, N));
  for (size_t i = 0; i < N; i++) d[i] = 1.0f;
  zeroc__cpu_gelu_scale(d, x, g, N);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i + 1 < N; i++) {
    const double e = fabs(d[i] - ref_gelu_slope(x[i]));
    if (!(e <= worst)) worst = e, at = i;
  }
  ZT_ASSERT_MSG(worst <= 8e-6, "gelu slope from the output: off by %.3g at x = %.9g (got %.9g, "
                "want %.9g); accepted 8e-6", worst, x[at], d[at], ref_gelu_slope(x[at]));
  ZT_ASSERT_MSG(isnan(d[N - 1]), "gelu slope from the output at NaN: %g, not NaN", d[N - 1]);
  /* a short array: the scalar tail alone */
  float xs[3] = {-2.5f, 0.0f, 3.25f}, gs[3], ds[3] = {2, 2, 2};
  ZT_OK(zeroc_k_gelu_forward(K, NULL, gs, xs, 3));
  zeroc__cpu_gelu_scale(ds, xs, gs, 3);
  for (int i = 0; i < 3; i++)
    ZT_ASSERT_MSG(fabs(ds[i] - 2 * ref_gelu_slope(xs[i])) <= 1e-5,
                  "gelu slope from the output, tail: %g at x = %g, want %g", ds[i], xs[i],
                  2 * ref_gelu_slope(xs[i]));
  release();
}

static void test_residual_add(void) {
  const size_t N = 1001;
  float *a = frand(N, 61, -1, 1), *b = frand(N, 62, -1, 1), *out = fnan(N);
  double *ref = dalloc(N);
  for (size_t i = 0; i < N; i++) ref[i] = (double)a[i] + b[i];
  ZT_OK(zeroc_k_residual_forward(K, NULL, out, a, b, N));
  expect_close("residual fwd", out, ref, N, TOL_FWD);
  float *a2 = fcopy(a, N); /* out aliasing a, as the header allows */
  ZT_OK(zeroc_k_residual_forward(K, NULL, a2, a2, b, N));
  expect_close("residual fwd, out == a", a2, ref, N, TOL_FWD);
  float *b2 = fcopy(b, N);
  ZT_OK(zeroc_k_residual_forward(K, NULL, b2, a, b2, N));
  expect_close("residual fwd, out == b", b2, ref, N, TOL_FWD);

  float *y = fcopy(a, N); /* add: y += x, twice */
  ZT_OK(zeroc_k_add(K, NULL, y, b, N));
  ZT_OK(zeroc_k_add(K, NULL, y, b, N));
  for (size_t i = 0; i < N; i++) ref[i] = (double)a[i] + 2.0 * b[i];
  expect_close("add twice", y, ref, N, TOL_FWD);
  release();
}

/* ---- cross-entropy ------------------------------------------------------------------ */

typedef struct {
  double *x;
  const int32_t *tg;
  int N, V, Vp;
} xent_args_t;

static void xent_eval(const void *a, double *loss) {
  const xent_args_t *e = a;
  ref_xent(loss, e->x, e->tg, e->N, e->V, e->Vp);
}

/* Returns targets with every fifth one negative (masked). */
static int32_t *xent_targets(int N, int V, uint64_t seed) {
  int32_t *tg = tokens((size_t)N, seed, V);
  for (int n = 0; n < N; n += 5) tg[n] = -1 - n % 3;
  return tg;
}

static void check_xent(int N, int V, int Vp, float offset, float dloss) {
  const size_t NV = (size_t)N * Vp;
  char what[96];
  int32_t *tg = xent_targets(N, V, 71);
  float *x = frand(NV, 72, -4, 4);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < Vp; i++)
      x[(size_t)n * Vp + i] = i < V ? x[(size_t)n * Vp + i] + offset : 1e4f;
  xent_args_t a = {to_d(x, NV), tg, N, V, Vp};
  double *ref = dalloc(N), *g = dalloc(NV);
  xent_eval(&a, ref);
  /* L = sum_n dloss * loss_n: its gradient is what the kernel writes in place */
  double *Rd = dalloc(N);
  for (int n = 0; n < N; n++) Rd[n] = dloss;
  fd_grad(xent_eval, &a, a.x, NV, Rd, N, g);

  float *loss = fnan(N);
  ZT_OK(zeroc_k_crossentropy_forward_backward(K, NULL, loss, x, tg, N, V, Vp, dloss));
  snprintf(what, sizeof what, "crossentropy loss V%d Vp%d +%g", V, Vp, offset);
  expect_close(what, loss, ref, N, TOL_FWD);
  float *zero = talloc(NV * sizeof *zero);
  snprintf(what, sizeof what, "crossentropy grad V%d Vp%d +%g", V, Vp, offset);
  expect_grad(what, x, zero, g, NV, TOL_BWD);
  int pad_zero = 1, masked_zero = 1;
  for (int n = 0; n < N; n++) {
    for (int i = V; i < Vp; i++) pad_zero &= x[(size_t)n * Vp + i] == 0.0f;
    if (tg[n] < 0) {
      masked_zero &= loss[n] == 0.0f;
      for (int i = 0; i < Vp; i++) masked_zero &= x[(size_t)n * Vp + i] == 0.0f;
    }
  }
  ZT_ASSERT_MSG(pad_zero, "crossentropy: padding columns of the gradient are not exactly 0");
  ZT_ASSERT_MSG(masked_zero, "crossentropy: a negative target gave a loss or gradient != 0");
}

static void test_crossentropy(void) {
  check_xent(14, 37, 48, 0, 1.0f / 14); /* padding logits 1e4 would dominate if read */
  check_xent(13, 37, 37, 0, 0.37f);     /* no padding */
  check_xent(14, 37, 48, 100, 0.5f);    /* exp(100) overflows fp32 without the max shift */
  /* the vector loops' tails: rows shorter than and not a multiple of 8, one row */
  check_xent(6, 5, 8, 0, 0.25f);
  check_xent(6, 3, 3, 0, 1.0f);
  check_xent(2, 13, 16, 0, 1.0f); /* row 0 is masked: one row of work */
  check_xent(7, 9, 11, 0, 0.5f);
  check_xent(4, 200, 208, 0, 1.0f); /* rows over several 64-term blocks of the sum */
  release();
}

/* A NaN logit (a diverged model) gives that row a NaN loss, wherever it sits
 * in the row (first element, vector body, tail), and leaves the others alone. */
static void test_crossentropy_nan_logit(void) {
  const int N = 4, V = 37, Vp = 40;
  const int at[4] = {0, 9, 36, -1}; /* -1: no NaN in that row */
  int32_t tg[4] = {3, 30, 5, 7};
  float *x = frand((size_t)N * Vp, 76, -4, 4), *loss = fnan(N);
  for (int n = 0; n < N; n++)
    if (at[n] >= 0) x[(size_t)n * Vp + at[n]] = NAN;
  const float *x0 = fcopy(x, (size_t)N * Vp);
  ZT_OK(zeroc_k_crossentropy_forward_backward(K, NULL, loss, x, tg, N, V, Vp, 0.0f));
  for (int n = 0; n < 3; n++)
    ZT_ASSERT_MSG(isnan(loss[n]), "row %d: NaN logit, loss %g", n, loss[n]);
  double ref[4];
  int32_t ok_tg[4] = {-1, -1, -1, 7};
  ref_xent(ref, to_d(x0, (size_t)N * Vp), ok_tg, N, V, Vp);
  CU_ASSERT(fabs(loss[3] - ref[3]) <= 1e-5 * ref[3]);
  release();
}

/* A target >= V cannot be reported from inside the kernel: its row gets a NaN
 * loss and a NaN gradient, so the step's non-finite check refuses the update;
 * the other rows are unaffected. */
static void test_crossentropy_bad_target(void) {
  const int N = 3, V = 37, Vp = 48;
  int32_t tg[3] = {5, V, 7};
  float *x = frand((size_t)N * Vp, 75, -4, 4), *x0 = fcopy(x, (size_t)N * Vp), *loss = fnan(N);
  ZT_OK(zeroc_k_crossentropy_forward_backward(K, NULL, loss, x, tg, N, V, Vp, 1.0f));
  CU_ASSERT(isnan(loss[1]));
  CU_ASSERT(isfinite(loss[0]) && isfinite(loss[2]));
  int row_nan = 1;
  for (int i = 0; i < V; i++) row_nan &= isnan(x[Vp + i]);
  CU_ASSERT(row_nan);
  double ref[3];
  int32_t ok_tg[3] = {5, -1, 7};
  ref_xent(ref, to_d(x0, (size_t)N * Vp), ok_tg, N, V, Vp);
  CU_ASSERT(fabs(loss[0] - ref[0]) <= 1e-5 * ref[0] && fabs(loss[2] - ref[2]) <= 1e-5 * ref[2]);
  release();
}

/* dloss == 0 computes the losses and leaves every logit bit as it was. */
static void test_crossentropy_dloss0(void) {
  const int N = 14, V = 37, Vp = 48;
  const size_t NV = (size_t)N * Vp;
  int32_t *tg = xent_targets(N, V, 73);
  float *x = frand(NV, 74, -4, 4), *x0 = fcopy(x, NV), *loss = fnan(N);
  ZT_OK(zeroc_k_crossentropy_forward_backward(K, NULL, loss, x, tg, N, V, Vp, 0.0f));
  CU_ASSERT_EQUAL(memcmp(x, x0, NV * sizeof *x), 0);
  double *ref = dalloc(N);
  ref_xent(ref, to_d(x0, NV), tg, N, V, Vp);
  expect_close("crossentropy loss, dloss 0", loss, ref, N, TOL_FWD);
  release();
}

/* The fused forms (what the GPT block calls) against the separate kernels they replace,
 * bit for bit: matmul_forward_gelu = matmul + gelu; matmul_backward_ex with pre = a zeroed
 * dinp += product, a zeroed dpre += gelu' * dinp (to a few ulp: the fused form takes the
 * slope's sigmoid from the GELU's output, test_gelu_slope_from_out), dpre_bias += column
 * sums of it;
 * ZEROC_K_DINP_SET = a zeroed dinp += product (over a NaN-filled buffer); adamw_mixed =
 * cast + adamw + cast. */
static void test_fused_twins(void) {
  const int N = 37, C = 48, OC = 20, K0 = 24;
  const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
  float *x = frand((size_t)N * K0, 120, -1, 1), *w = frand((size_t)C * K0, 121, -1, 1);
  float *b = frand(C, 122, -1, 1), *pre = fnan(NC), *out = fnan(NC);
  float *pre2 = fnan(NC), *out2 = fnan(NC);
  ZT_OK(zeroc_k_matmul_forward_gelu(K, NULL, pre, out, x, w, b, N, K0, C));
  ZT_OK(zeroc_k_matmul_forward(K, NULL, pre2, x, w, b, N, K0, C));
  ZT_OK(zeroc_k_gelu_forward(K, NULL, out2, pre2, NC));
  ZT_ASSERT_MSG(!memcmp(pre, pre2, NC * 4) && !memcmp(out, out2, NC * 4),
                "matmul_forward_gelu differs from matmul_forward + gelu_forward");

  float *w2 = frand(OCC, 123, -1, 1), *g = frand(NO, 124, -1, 1);
  float *dw = frand(OCC, 125, -1, 1), *db = frand(OC, 126, -1, 1), *dpb = frand(C, 127, -1, 1);
  float *dw2 = fcopy(dw, OCC), *db2 = fcopy(db, OC), *dpb2 = fcopy(dpb, C);
  float *dpre = fnan(NC), *t = talloc(NC * 4), *dpre2 = talloc(NC * 4);
  ZT_OK(zeroc_k_matmul_backward_ex(K, NULL, dpre, dw, db, g, out, w2, N, C, OC, pre, dpb,
                                   ZEROC_K_DINP_SET));
  memset(t, 0, NC * 4);
  memset(dpre2, 0, NC * 4);
  ZT_OK(zeroc_k_matmul_backward(K, NULL, t, dw2, db2, g, out, w2, N, C, OC));
  ZT_OK(zeroc_k_gelu_backward(K, NULL, dpre2, pre, t, NC));
  for (int r = 0; r < N; r++)
    for (int c = 0; c < C; c++) dpb2[c] += dpre2[(size_t)r * C + c];
  expect_close("matmul_backward_ex: dpre", dpre, to_d(dpre2, NC), NC, 1e-6);
  expect_close("matmul_backward_ex: dpre_bias", dpb, to_d(dpb2, C), C, 1e-6);
  ZT_ASSERT_MSG(!memcmp(dw, dw2, OCC * 4) && !memcmp(db, db2, OC * 4),
                "matmul_backward_ex: dweight or dbias differs");
  float *ds = fnan(NC);
  ZT_OK(zeroc_k_matmul_backward_ex(K, NULL, ds, dw, NULL, g, out, w2, N, C, OC, NULL, NULL,
                                   ZEROC_K_DINP_SET));
  ZT_ASSERT_MSG(!memcmp(ds, t, NC * 4), "matmul_backward_ex ZEROC_K_DINP_SET differs");
  /* attention_backward_ex ZEROC_K_DQKV_SET over a NaN-filled dqkv = a zeroed dqkv +=;
   * T 2100 > the 2048 queries a chunk of the cpu backward holds, with key tiles of 40
   * (head size 200) that straddle the chunks' border */
  const int ash[2][4] = {{2, 37, 32, 4}, {1, 2100, 200, 1}};
  for (int sh = 0; sh < 2; sh++) {
    const int AB = ash[sh][0], AT = ash[sh][1], AC = ash[sh][2], ANH = ash[sh][3];
    const size_t n3 = (size_t)AB * AT * 3 * AC, n1 = (size_t)AB * AT * AC;
    float *qkv = frand(n3, 152, -1, 1), *ao = fnan(n1), *lse = fnan((size_t)AB * ANH * AT);
    float *ady = frand(n1, 153, -1, 1), *dset = fnan(n3), *dadd = talloc(n3 * 4);
    ZT_OK(zeroc_k_attention_forward(K, NULL, ao, lse, qkv, AB, AT, AC, ANH, NULL));
    memset(dadd, 0, n3 * 4);
    ZT_OK(zeroc_k_attention_backward(K, NULL, dadd, ady, qkv, ao, lse, AB, AT, AC, ANH, NULL));
    ZT_OK(zeroc_k_attention_backward_ex(K, NULL, dset, ady, qkv, ao, lse, AB, AT, AC, ANH, NULL,
                                        ZEROC_K_DQKV_SET));
    ZT_ASSERT_MSG(!memcmp(dset, dadd, n3 * 4), "attention_backward_ex ZEROC_K_DQKV_SET differs");
    CU_ASSERT_EQUAL(zeroc_k_attention_backward_ex(K, NULL, dset, ady, qkv, ao, lse, AB, AT, AC, ANH,
                                                  NULL, 2),
                    ZEROC_ERR_INVALID_ARG);
  }
  /* pre without dinp, dpre_bias without pre, unknown flags */
  CU_ASSERT_EQUAL(zeroc_k_matmul_backward_ex(K, NULL, NULL, dw, NULL, g, out, w2, N, C, OC, pre,
                                             NULL, 1),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_matmul_backward_ex(K, NULL, ds, dw, NULL, g, out, w2, N, C, OC, NULL,
                                             dpb, 1),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_matmul_backward_ex(K, NULL, ds, dw, NULL, g, out, w2, N, C, OC, NULL,
                                             NULL, 2),
                  ZEROC_ERR_INVALID_ARG);

  const size_t n = 70001; /* past the threading threshold */
  zeroc_adamw_args_t a = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.1f, 0.05f, NULL};
  float *p = frand(n, 128, -1, 1), *m = frand(n, 129, -0.1f, 0.1f), *v = frand(n, 130, 0, 0.01f);
  float *gf = frand(n, 131, -1, 1), *p2 = fcopy(p, n), *m2 = fcopy(m, n), *v2 = fcopy(v, n);
  uint16_t *gb = talloc(n * 2), *o = talloc(n * 2), *o2 = talloc(n * 2);
  float *g32 = talloc(n * 4), *of = talloc(n * 4);
  ZT_OK(zeroc_k_cast(K, NULL, gb, ZEROC_BF16, gf, ZEROC_FP32, n));
  ZT_OK(zeroc_k_adamw_mixed(K, NULL, p, m, v, gb, ZEROC_BF16, o, ZEROC_BF16, n, &a));
  ZT_OK(zeroc_k_cast(K, NULL, g32, ZEROC_FP32, gb, ZEROC_BF16, n));
  ZT_OK(zeroc_k_adamw(K, NULL, p2, m2, v2, g32, n, &a));
  ZT_OK(zeroc_k_cast(K, NULL, o2, ZEROC_BF16, p2, ZEROC_FP32, n));
  ZT_ASSERT_MSG(!memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4) &&
                    !memcmp(o, o2, n * 2),
                "adamw_mixed (bf16 gradient, bf16 copy) differs from cast + adamw + cast");
  ZT_OK(zeroc_k_adamw_mixed(K, NULL, p, m, v, gf, ZEROC_FP32, of, ZEROC_FP32, n, &a));
  ZT_OK(zeroc_k_adamw(K, NULL, p2, m2, v2, gf, n, &a));
  ZT_ASSERT_MSG(!memcmp(p, p2, n * 4) && !memcmp(of, p2, n * 4),
                "adamw_mixed (fp32 gradient, fp32 copy) differs from adamw");
  ZT_OK(zeroc_k_adamw_mixed(K, NULL, p, m, v, gf, ZEROC_FP32, NULL, ZEROC_BF16, n, &a));
  ZT_OK(zeroc_k_adamw(K, NULL, p2, m2, v2, gf, n, &a));
  ZT_ASSERT_MSG(!memcmp(p, p2, n * 4), "adamw_mixed without a copy differs from adamw");
  CU_ASSERT_EQUAL(zeroc_k_adamw_mixed(K, NULL, p, m, v, gf, ZEROC_FP64, NULL, ZEROC_BF16, n, &a),
                  ZEROC_ERR_INVALID_ARG);
  release();
}

/* ---- errors and determinism --------------------------------------------------------- */

static void test_bad_shapes(void) {
  float *buf = frand(4096, 121, -1, 1), *keep = fcopy(buf, 4096);
  int32_t tg[4] = {0, 1, 2, 3};
  CU_ASSERT_EQUAL(zeroc_k_attention_forward(K, NULL, buf, buf, buf, 2, 4, 50, 4, NULL),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "NH"));
  CU_ASSERT_EQUAL(zeroc_k_attention_backward(K, NULL, buf, buf, buf, buf, buf, 2, 4, 50, 4, NULL),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_attention_forward(K, NULL, buf, buf, buf, 2, 4, 48, 0, NULL),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_layernorm_forward(K, NULL, buf, buf, buf, buf, buf, buf, 0, 24),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "has 0"));
  CU_ASSERT_EQUAL(
      zeroc_k_layernorm_backward(K, NULL, buf, buf, buf, buf, buf, buf, buf, buf, 4, -1),
      ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_matmul_forward(K, NULL, buf, buf, buf, NULL, 0, 24, 37),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_matmul_backward(K, NULL, buf, buf, NULL, buf, buf, buf, 4, 24, 0),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_encoder_forward(K, NULL, buf, tg, buf, buf, 0, 4, 8),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_encoder_backward(K, NULL, buf, buf, buf, tg, 1, 4, -8),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_crossentropy_forward_backward(K, NULL, buf, buf, tg, 4, 48, 37, 1.0f),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "Vp"));
  CU_ASSERT_EQUAL(zeroc_k_crossentropy_forward_backward(K, NULL, buf, buf, tg, 0, 37, 48, 1.0f),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_cast(K, NULL, buf, ZEROC_INT32, buf, ZEROC_FP32, 8),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_accumulate(K, NULL, buf, buf, ZEROC_FP64, 8, 1.0f),
                  ZEROC_ERR_INVALID_ARG);
  /* a rejected call touches nothing */
  CU_ASSERT_EQUAL(memcmp(buf, keep, 4096 * sizeof *buf), 0);
  zeroc_kernels_t *k2 = NULL;
  CU_ASSERT_EQUAL(
      zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_BF16, &k2),
      ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(k2);
  release();
}

/* Runs every threaded kernel once with `threads` OpenMP threads, on shapes
 * above every threading threshold (N*C = 49152 > 32768); outputs land in `o`. */
enum { DB = 3, DT = 128, DC = 128, DNH = 4, DV = 500, DVp = 512, DG = 100000 };
typedef struct {
  float *enc, *dwte, *dwpe, *ln, *mean, *rstd, *dln, *dlw, *dlb, *att, *lse, *datt, *gelu, *dgelu,
      *loss, *logits, *cast, *acc, *adam_p, *adam_m, *adam_v, *dpre, *dpb;
  double sumsq;
} det_out_t;
enum { DMN = 1000, DMC = 45 }; /* N*C = 45000 > 32768, C % 8 = 5: a scalar column tail */

static void det_run(int threads, det_out_t *o) {
  const size_t N = (size_t)DB * DT, NC = N * DC;
  omp_set_num_threads(threads);
  int32_t *inp = tokens(N, 131, 7); /* few distinct tokens: long sums per dwte row */
  float *wte = frand(7 * DC, 132, -1, 1), *wpe = frand(NC, 133, -1, 1);
  float *dout = frand(NC, 134, -1, 1), *qkv = frand(3 * NC, 135, -1, 1);
  float *w = frand(DC, 136, 0.5f, 1.5f), *b = frand(DC, 137, -1, 1);
  float *g = frand(DG, 138, -3, 3);
  o->enc = fnan(NC);
  ZT_OK(zeroc_k_encoder_forward(K, NULL, o->enc, inp, wte, wpe, DB, DT, DC));
  o->dwte = frand(7 * DC, 139, -1, 1), o->dwpe = frand(NC, 140, -1, 1);
  ZT_OK(zeroc_k_encoder_backward(K, NULL, o->dwte, o->dwpe, dout, inp, DB, DT, DC));
  o->ln = fnan(NC), o->mean = fnan(N), o->rstd = fnan(N);
  ZT_OK(zeroc_k_layernorm_forward(K, NULL, o->ln, o->mean, o->rstd, o->enc, w, b, (int)N, DC));
  o->dln = frand(NC, 141, -1, 1), o->dlw = frand(DC, 142, -1, 1), o->dlb = frand(DC, 143, -1, 1);
  ZT_OK(zeroc_k_layernorm_backward(K, NULL, o->dln, o->dlw, o->dlb, dout, o->enc, w, o->mean,
                                   o->rstd, (int)N, DC));
  o->att = fnan(NC), o->lse = fnan((size_t)DB * DNH * DT);
  ZT_OK(zeroc_k_attention_forward(K, NULL, o->att, o->lse, qkv, DB, DT, DC, DNH, NULL));
  o->datt = frand(3 * NC, 144, -1, 1);
  ZT_OK(zeroc_k_attention_backward(K, NULL, o->datt, dout, qkv, o->att, o->lse, DB, DT, DC, DNH, NULL));
  o->gelu = fnan(DG), o->dgelu = frand(DG, 145, -1, 1);
  ZT_OK(zeroc_k_gelu_forward(K, NULL, o->gelu, g, DG));
  ZT_OK(zeroc_k_gelu_backward(K, NULL, o->dgelu, g, g, DG));
  /* matmul_backward_ex's GELU slope from its output with the bias gradient's column
   * sums, one pass (alone: OpenBLAS's own product changes bits with its threads) */
  float *pre = frand((size_t)DMN * DMC, 148, -4, 4), *act = fnan((size_t)DMN * DMC);
  ZT_OK(zeroc_k_gelu_forward(K, NULL, act, pre, (size_t)DMN * DMC));
  o->dpre = frand((size_t)DMN * DMC, 150, -1, 1), o->dpb = frand(DMC, 149, -1, 1);
  zeroc__cpu_gelu_scale_colsum(o->dpre, pre, act, o->dpb, DMN, DMC);
  o->loss = fnan(N), o->logits = frand(N * DVp, 146, -5, 5);
  ZT_OK(zeroc_k_crossentropy_forward_backward(K, NULL, o->loss, o->logits, tokens(N, 147, DV),
                                              (int)N, DV, DVp, 0.01f));
  o->cast = fnan(DG);
  uint16_t *h = talloc(DG * sizeof *h);
  ZT_OK(zeroc_k_cast(K, NULL, h, ZEROC_BF16, g, ZEROC_FP32, DG));
  ZT_OK(zeroc_k_cast(K, NULL, o->cast, ZEROC_FP32, h, ZEROC_BF16, DG));
  o->acc = fcopy(g, DG);
  ZT_OK(zeroc_k_accumulate(K, NULL, o->acc, h, ZEROC_BF16, DG, 0.5f));
  ZT_OK(zeroc_k_scale(K, NULL, o->acc, DG, 0.7f));
  o->adam_p = fcopy(g, DG), o->adam_m = talloc(DG * 4), o->adam_v = talloc(DG * 4);
  zeroc_adamw_args_t a = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.001f, NULL};
  ZT_OK(zeroc_k_adamw(K, NULL, o->adam_p, o->adam_m, o->adam_v, o->dgelu, DG, &a));
  o->sumsq = 0;
  ZT_OK(zeroc_k_sumsq(K, NULL, &o->sumsq, o->dgelu, ZEROC_FP32, DG));
  omp_set_num_threads(1);
}

/* Same inputs, 1 vs 3 threads: our kernels give the same bits (no atomics, every
 * sum in a fixed order); 3 vs 3 again: so does the engine's sumsq. */
static void test_thread_determinism(void) {
  det_out_t one, three, again;
  det_run(1, &one);
  det_run(3, &three);
  det_run(3, &again);
  const size_t N = (size_t)DB * DT, NC = N * DC;
  const struct {
    const char *name;
    const float *a, *b;
    size_t n;
  } cmp[] = {
      {"encoder fwd", one.enc, three.enc, NC},
      {"encoder dwte", one.dwte, three.dwte, 7 * DC},
      {"encoder dwpe", one.dwpe, three.dwpe, NC},
      {"layernorm fwd", one.ln, three.ln, NC},
      {"layernorm rstd", one.rstd, three.rstd, N},
      {"layernorm dinp", one.dln, three.dln, NC},
      {"layernorm dweight", one.dlw, three.dlw, DC},
      {"layernorm dbias", one.dlb, three.dlb, DC},
      {"attention fwd", one.att, three.att, NC},
      {"attention lse", one.lse, three.lse, (size_t)DB * DNH * DT},
      {"attention bwd", one.datt, three.datt, 3 * NC},
      {"gelu fwd", one.gelu, three.gelu, DG},
      {"gelu bwd", one.dgelu, three.dgelu, DG},
      {"matmul bwd: gelu slope", one.dpre, three.dpre, (size_t)DMN * DMC},
      {"matmul bwd: gelu bias sums", one.dpb, three.dpb, DMC},
      {"crossentropy loss", one.loss, three.loss, N},
      {"crossentropy grad", one.logits, three.logits, N * DVp},
      {"cast", one.cast, three.cast, DG},
      {"accumulate + scale", one.acc, three.acc, DG},
      {"adamw param", one.adam_p, three.adam_p, DG},
      {"adamw v", one.adam_v, three.adam_v, DG},
  };
  for (size_t i = 0; i < sizeof cmp / sizeof *cmp; i++)
    ZT_ASSERT_MSG(!memcmp(cmp[i].a, cmp[i].b, cmp[i].n * sizeof(float)),
                  "%s: 1 and 3 threads give different bits", cmp[i].name);
  ZT_ASSERT_MSG(three.sumsq == again.sumsq, "sumsq: two runs on 3 threads differ (%.17g, %.17g)",
                three.sumsq, again.sumsq);
  ZT_ASSERT_MSG(fabs(one.sumsq - three.sumsq) <= 1e-12 * one.sumsq,
                "sumsq: 1 vs 3 threads %.17g, %.17g", one.sumsq, three.sumsq);
  release();
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"encoder fwd/bwd vs reference and finite differences", test_encoder},
      {"encoder backward sums repeated tokens", test_encoder_repeated_tokens},
      {"layernorm fwd/bwd vs reference and finite differences", test_layernorm},
      {"residual + layernorm forward and the set backward equal the calls they replace",
       test_layernorm_fused},
      {"matmul fwd/bwd vs reference and finite differences", test_matmul},
      {"gelu fwd/bwd vs reference and finite differences", test_gelu},
      {"residual and add", test_residual_add},
      {"gelu on short lengths, at exp's edges and on NaN", test_gelu_lengths},
      {"gelu slope from the forward's output vs the exact slope", test_gelu_slope_from_out},
      {"crossentropy: loss, gradient, padding, masked targets", test_crossentropy},
      {"crossentropy with dloss 0 leaves the logits", test_crossentropy_dloss0},
      {"crossentropy with a target >= V gives NaN", test_crossentropy_bad_target},
      {"crossentropy with a NaN logit gives NaN", test_crossentropy_nan_logit},
      {"fused and set forms equal the kernels they replace (the GELU slope to a few ulp)",
       test_fused_twins},
      {"bad shapes are rejected", test_bad_shapes},
      {"results do not depend on the thread count", test_thread_determinism},
      ZT_END,
  };
  return kt_main(argc, argv, "kernels_cpu", tests);
}
