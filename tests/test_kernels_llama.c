/*
 * tests/test_kernels_llama.c - the Llama-family cpu kernels (kernels/llama_kernels.h)
 * through the dispatch: RMSNorm, its fused residual form and its backward's set forms;
 * RoPE on hand-computed values (plain and with llama3 scaling), against a double
 * reference on the GQA layout with arbitrary positions, and its backward against
 * finite differences; SwiGLU; grouped-query attention (NKV == NH bit for bit the
 * multi-head kernel, NKV < NH against the multi-head kernel on repeated kv heads and
 * against central differences of a double reference); the same bits for 1 and 3 threads.
 * Backwards are checked with their gradient buffers pre-filled, so accumulation is checked
 * too. Helpers in kernels_test.h.
 */
#include <omp.h>

#include "kernels/llama_kernels.h"
#include "kernels_test.h"

/* ---- RMSNorm ------------------------------------------------------------------------ */

typedef struct {
  double *x, *w;
  double eps;
  int N, C;
} rms_args_t;

static void ref_rmsnorm(const void *args, double *out) {
  const rms_args_t *a = args;
  for (int n = 0; n < a->N; n++) {
    const double *x = a->x + (size_t)n * a->C;
    double ss = 0;
    for (int c = 0; c < a->C; c++) ss += x[c] * x[c];
    const double r = 1 / sqrt(ss / a->C + a->eps);
    for (int c = 0; c < a->C; c++) out[(size_t)n * a->C + c] = x[c] * r * a->w[c];
  }
}

static void check_rmsnorm(int N, int C, float eps, float offset) {
  const size_t NC = (size_t)N * C;
  char what[96];
  float *x = frand(NC, 51, -1, 1), *w = frand(C, 52, 0.5f, 1.5f);
  for (size_t i = 0; i < NC; i++) x[i] += offset;
  float *out = fnan(NC), *rstd = fnan(N);
  ZT_OK(zeroc_k_rmsnorm_forward(K, NULL, out, rstd, x, w, eps, N, C));
  rms_args_t a = {to_d(x, NC), to_d(w, C), eps, N, C};
  double *ref = dalloc(NC), *rr = dalloc(N);
  ref_rmsnorm(&a, ref);
  for (int n = 0; n < N; n++) {
    double ss = 0;
    for (int c = 0; c < C; c++) ss += a.x[(size_t)n * C + c] * a.x[(size_t)n * C + c];
    rr[n] = 1 / sqrt(ss / C + eps);
  }
  snprintf(what, sizeof what, "rmsnorm fwd N%d C%d eps%g +%g", N, C, eps, offset);
  expect_close(what, out, ref, NC, TOL_FWD);
  expect_close("rmsnorm rstd", rstd, rr, N, TOL_FWD);

  float *R = frand(NC, 53, -1, 1), *dx0 = frand(NC, 54, -1, 1), *dw0 = frand(C, 55, -1, 1);
  float *dx = fcopy(dx0, NC), *dw = fcopy(dw0, C);
  ZT_OK(zeroc_k_rmsnorm_backward(K, NULL, dx, dw, R, x, w, rstd, N, C, NULL, 0));
  double *Rd = to_d(R, NC), *g = dalloc(NC);
  /* a row's output depends on its own inputs only: the differences row by row (the whole
   * reference per element would be quadratic in N C) */
  for (int n = 0; n < N; n++) {
    rms_args_t row = {a.x + (size_t)n * C, a.w, eps, 1, C};
    fd_grad(ref_rmsnorm, &row, row.x, (size_t)C, Rd + (size_t)n * C, (size_t)C, g + (size_t)n * C);
  }
  snprintf(what, sizeof what, "rmsnorm dinp N%d C%d", N, C);
  expect_grad(what, dx, dx0, g, NC, TOL_BWD);
  fd_grad(ref_rmsnorm, &a, a.w, C, Rd, NC, g);
  snprintf(what, sizeof what, "rmsnorm dweight N%d C%d", N, C);
  expect_grad(what, dw, dw0, g, C, TOL_BWD);
}

static void test_rmsnorm(void) {
  check_rmsnorm(14, 24, 1e-5f, 0);
  check_rmsnorm(26, 48, 1e-6f, 0);
  check_rmsnorm(5, 3, 1e-5f, 0);
  check_rmsnorm(1, 13, 1e-5f, 0);
  check_rmsnorm(7, 70, 1e-5f, 3);   /* across the 64-channel dweight blocks, rows off zero */
  check_rmsnorm(40, 700, 1e-5f, 0); /* past the threading threshold */
  release();
}

/* The fused forms against the calls they replace, bit for bit: residual_rmsnorm_forward =
 * add + rmsnorm_forward (apart and in place on a); rmsnorm_backward set = a copy of dres
 * (apart, or dres == dinp) or a zeroed dinp + the plain backward. Row 0 of dout is -0. */
static void check_rmsnorm_fused(int N, int C) {
  const size_t NC = (size_t)N * C, fb = NC * sizeof(float), cb = C * sizeof(float);
  float *a = frand(NC, 60, -1, 1), *b = frand(NC, 61, -2, 3), *w = frand(C, 62, 0.5f, 1.5f);
  float *res = fnan(NC), *out = fnan(NC), *rstd = fnan(N);
  ZT_OK(zeroc_k_residual_rmsnorm_forward(K, NULL, res, out, rstd, a, b, w, 1e-5f, N, C));
  float *r0 = fcopy(a, NC), *o0 = fnan(NC), *s0 = fnan(N);
  ZT_OK(zeroc_k_add(K, NULL, r0, b, NC));
  ZT_OK(zeroc_k_rmsnorm_forward(K, NULL, o0, s0, r0, w, 1e-5f, N, C));
  ZT_ASSERT_MSG(!memcmp(res, r0, fb) && !memcmp(out, o0, fb) &&
                    !memcmp(rstd, s0, N * sizeof(float)),
                "residual_rmsnorm_forward N%d C%d differs from add + rmsnorm_forward", N, C);
  float *ai = fcopy(a, NC);
  ZT_OK(zeroc_k_residual_rmsnorm_forward(K, NULL, ai, out, rstd, ai, b, w, 1e-5f, N, C));
  ZT_ASSERT_MSG(!memcmp(ai, r0, fb) && !memcmp(out, o0, fb),
                "residual_rmsnorm_forward N%d C%d in place on a differs", N, C);

  float *dout = frand(NC, 63, -1, 1), *dres = frand(NC, 64, -1, 1), *dw0 = frand(C, 65, -1, 1);
  for (int c = 0; c < C; c++) dout[c] = -0.0f;
  float *want = fcopy(dres, NC), *ww = fcopy(dw0, C), *zero = talloc(fb), *wz = fcopy(dw0, C);
  ZT_OK(zeroc_k_rmsnorm_backward(K, NULL, want, ww, dout, r0, w, s0, N, C, NULL, 0));
  ZT_OK(zeroc_k_rmsnorm_backward(K, NULL, zero, wz, dout, r0, w, s0, N, C, NULL, 0));
  for (int i = 0; i < 3; i++) { /* dres apart, dres == dinp, dres NULL */
    float *dx = i == 1 ? fcopy(dres, NC) : fnan(NC), *dw = fcopy(dw0, C);
    const float *base = i == 2 ? NULL : i == 1 ? dx : dres;
    ZT_OK(zeroc_k_rmsnorm_backward(K, NULL, dx, dw, dout, r0, w, s0, N, C, base, ZEROC_K_DINP_SET));
    ZT_ASSERT_MSG(!memcmp(dx, i == 2 ? zero : want, fb) && !memcmp(dw, ww, cb),
                  "rmsnorm_backward set (way %d) N%d C%d differs from copy + backward", i, N, C);
  }
}

static void test_rmsnorm_fused(void) {
  const int shapes[][2] = {{5, 13}, {9, 100}, {37, 768}, {2, 4100}, {1, 3}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    check_rmsnorm_fused(shapes[i][0], shapes[i][1]);
  float *buf = frand(64, 66, -1, 1);
  CU_ASSERT_EQUAL(zeroc_k_rmsnorm_backward(K, NULL, buf, buf, buf, buf, buf, buf, 2, 8, buf, 0),
                  ZEROC_ERR_INVALID_ARG); /* dres without ZEROC_K_DINP_SET */
  CU_ASSERT_EQUAL(zeroc_k_rmsnorm_backward(K, NULL, buf, buf, buf, buf, buf, buf, 2, 8, NULL, 2),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(
      zeroc_k_residual_rmsnorm_forward(K, NULL, buf, buf, buf, buf, buf, buf, 1e-5f, 2, 8),
      ZEROC_ERR_INVALID_ARG); /* out aliasing res */
  CU_ASSERT_EQUAL(zeroc_k_rmsnorm_forward(K, NULL, buf, buf, buf, buf, 0.0f, 2, 8),
                  ZEROC_ERR_INVALID_ARG); /* eps 0 */
  CU_ASSERT_EQUAL(zeroc_k_rmsnorm_forward(K, NULL, buf, buf, buf, buf, 1e-5f, 0, 8),
                  ZEROC_ERR_INVALID_ARG);
  release();
}

/* ---- RoPE --------------------------------------------------------------------------- */

static const zeroc_rope_t ROPE_PLAIN = {10000, 0, 0, 0, 0};
static const zeroc_rope_t ROPE_LLAMA3 = {500000, 8, 1, 4, 8192}; /* Llama 3.1's */

/* One token, one q and one k head of 4 (v untouched), theta 10000, position 3: inv_freq
 * (1, 0.01); q (1, 2, 3, 4) -> pair (0, 2) turned by 3 rad, (1, 3) by 0.03 rad, by hand:
 * (1 cos 3 - 3 sin 3, 2 cos .03 - 4 sin .03, 3 cos 3 + sin 3, 4 cos .03 + 2 sin .03). */
static void test_rope_hand(void) {
  float x[12] = {1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t pos[1] = {3};
  ZT_OK(zeroc_k_rope_forward(K, NULL, x, pos, &ROPE_PLAIN, 1, 1, 1, 4));
  const double hand[4] = {-1.4133525208, 1.8791180667, -2.8288574817, 4.0581911354};
  double want[12] = {0};
  for (int i = 0; i < 4; i++) want[i] = want[4 + i] = hand[i], want[8 + i] = 5 + i;
  expect_close("rope by hand (q, k; v untouched)", x, want, 12, 1e-7);
  ZT_ASSERT_MSG(x[8] == 5 && x[9] == 6 && x[10] == 7 && x[11] == 8, "rope touched v");
  /* position 0 turns nothing */
  float y[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int32_t p0[1] = {0};
  ZT_OK(zeroc_k_rope_forward(K, NULL, y, p0, &ROPE_PLAIN, 1, 1, 1, 4));
  for (int i = 0; i < 12; i++) ZT_ASSERT_MSG(y[i] == i + 1, "rope at position 0 moved %d", i);

  /* llama3 scaling, HS 8, theta 500000, factor 8, low 1, high 4, original 8192: wavelengths
   * 6.3, 167, 4443, 118142; the first two under 2048 (kept), the third blended with
   * s = (8192 / 4443 - 1) / 3, the last over 8192 (divided by 8). By hand: */
  const double inv[4] = {1.0, 3.760603093e-02, 5.248461610e-04, 6.647869871e-06};
  float tab[4];
  zeroc_i_rope_inv_freq(&ROPE_LLAMA3, 8, tab);
  expect_close("llama3 inv_freq by hand", tab, inv, 4, 1e-8);
  /* the kernel on those frequencies (as rounded to fp32), q and k of 3 tokens, one far out:
   * the angle is reduced in double, so even 131071 rad keeps its digits */
  const int N = 3, W = 3 * 8;
  float *q = frand((size_t)N * W, 70, -1, 1), *q0 = fcopy(q, (size_t)N * W);
  const int32_t ps[3] = {5, 1000, 131071};
  ZT_OK(zeroc_k_rope_forward(K, NULL, q, ps, &ROPE_LLAMA3, N, 1, 1, 8));
  double *ref = dalloc((size_t)N * W);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < W; c++) {
      const int h = c / 8, i = c % 4, hi = c % 8 >= 4;
      const float *row = q0 + (size_t)n * W + h * 8;
      const double an = ps[n] * (double)tab[i], x1 = row[i], x2 = row[i + 4];
      ref[(size_t)n * W + c] = h == 2 ? row[c % 8] /* v */
                               : hi   ? x2 * cos(an) + x1 * sin(an)
                                      : x1 * cos(an) - x2 * sin(an);
    }
  expect_close("rope llama3 positions 5, 1000, 131071", q, ref, (size_t)N * W, 1e-6);
  release();
}

typedef struct {
  double *x;
  const int32_t *pos;
  const float *inv;
  int N, NH, NKV, HS;
} rope_args_t;

/* the rotation in double on the fused layout (v copied) */
static void ref_rope(const void *args, double *out) {
  const rope_args_t *a = args;
  const int W = (a->NH + 2 * a->NKV) * a->HS, H2 = a->HS / 2;
  for (int n = 0; n < a->N; n++) {
    const double *x = a->x + (size_t)n * W;
    double *o = out + (size_t)n * W;
    for (int c = 0; c < W; c++) o[c] = x[c];
    for (int h = 0; h < a->NH + a->NKV; h++)
      for (int i = 0; i < H2; i++) {
        const double an = (double)a->pos[n] * a->inv[i], x1 = x[h * a->HS + i];
        const double x2 = x[h * a->HS + i + H2];
        o[h * a->HS + i] = x1 * cos(an) - x2 * sin(an);
        o[h * a->HS + i + H2] = x2 * cos(an) + x1 * sin(an);
      }
  }
}

static void check_rope(int N, int NH, int NKV, int HS, const zeroc_rope_t *r, const char *tag) {
  const size_t W = (size_t)(NH + 2 * NKV) * HS, NW = (size_t)N * W;
  char what[96];
  int32_t *pos = talloc(N * sizeof *pos);
  for (int n = 0; n < N; n++) pos[n] = (n * 37 + 11) % 97; /* out of order, as zigzag chunks */
  float *inv = talloc(HS / 2 * sizeof *inv), *x = frand(NW, 71, -1, 1), *x0 = fcopy(x, NW);
  zeroc_i_rope_inv_freq(r, HS, inv);
  ZT_OK(zeroc_k_rope_forward(K, NULL, x, pos, r, N, NH, NKV, HS));
  rope_args_t a = {to_d(x0, NW), pos, inv, N, NH, NKV, HS};
  double *ref = dalloc(NW);
  ref_rope(&a, ref);
  snprintf(what, sizeof what, "rope fwd %s N%d NH%d NKV%d HS%d", tag, N, NH, NKV, HS);
  expect_close(what, x, ref, NW, TOL_FWD);
  ZT_ASSERT_MSG(!memcmp(x + (NH + NKV) * HS, x0 + (NH + NKV) * HS, NKV * HS * sizeof(float)),
                "rope %s moved v", tag);
  /* backward: in place, the gradient of sum(R * rope(x)) w.r.t. x (by finite differences
   * on the small shapes: each costs a whole forward) */
  float *R = frand(NW, 72, -1, 1), *d = fcopy(R, NW);
  ZT_OK(zeroc_k_rope_backward(K, NULL, d, pos, r, N, NH, NKV, HS));
  if (NW <= 4096) {
    double *Rd = to_d(R, NW), *g = dalloc(NW);
    fd_grad(ref_rope, &a, a.x, NW, Rd, NW, g);
    float *zero = talloc(NW * sizeof(float));
    snprintf(what, sizeof what, "rope bwd %s N%d NH%d NKV%d HS%d", tag, N, NH, NKV, HS);
    expect_grad(what, d, zero, g, NW, TOL_BWD);
  }
  /* the backward undoes the forward */
  ZT_OK(zeroc_k_rope_backward(K, NULL, x, pos, r, N, NH, NKV, HS));
  expect_close("rope bwd(fwd(x)) == x", x, a.x, NW, 1e-6);
}

static void test_rope(void) {
  check_rope(6, 2, 2, 8, &ROPE_PLAIN, "theta 1e4");
  check_rope(5, 4, 2, 16, &ROPE_LLAMA3, "llama3");
  check_rope(7, 6, 1, 6, &(zeroc_rope_t){1e6, 0, 0, 0, 0}, "theta 1e6");
  check_rope(300, 4, 4, 64, &ROPE_LLAMA3, "llama3"); /* past the threading threshold */
  float *buf = frand(64, 73, -1, 1);
  int32_t pos[2] = {0, 1};
  CU_ASSERT_EQUAL(zeroc_k_rope_forward(K, NULL, buf, pos, &ROPE_PLAIN, 2, 1, 1, 5),
                  ZEROC_ERR_INVALID_ARG); /* odd head size */
  CU_ASSERT_EQUAL(zeroc_k_rope_forward(K, NULL, buf, pos, &ROPE_PLAIN, 2, 3, 2, 4),
                  ZEROC_ERR_INVALID_ARG); /* NH not a multiple of NKV */
  CU_ASSERT_EQUAL(
      zeroc_k_rope_forward(K, NULL, buf, pos, &(zeroc_rope_t){0, 0, 0, 0, 0}, 2, 1, 1, 4),
      ZEROC_ERR_INVALID_ARG); /* theta 0 */
  CU_ASSERT_EQUAL(
      zeroc_k_rope_backward(K, NULL, buf, pos, &(zeroc_rope_t){1e4, 8, 4, 1, 8192}, 2, 1, 1, 4),
      ZEROC_ERR_INVALID_ARG); /* low >= high */
  release();
}

/* ---- SwiGLU ------------------------------------------------------------------------- */

typedef struct {
  double *gu;
  int N, F;
} swiglu_args_t;

static void ref_swiglu(const void *args, double *out) {
  const swiglu_args_t *a = args;
  for (int n = 0; n < a->N; n++)
    for (int f = 0; f < a->F; f++) {
      const double g = a->gu[(size_t)n * 2 * a->F + f], u = a->gu[(size_t)n * 2 * a->F + a->F + f];
      out[(size_t)n * a->F + f] = g / (1 + exp(-g)) * u;
    }
}

static void check_swiglu(int N, int F) {
  const size_t NF = (size_t)N * F, N2 = 2 * NF;
  char what[96];
  float *gu = frand(N2, 80, -4, 4), *out = fnan(NF);
  ZT_OK(zeroc_k_swiglu_forward(K, NULL, out, gu, N, F));
  swiglu_args_t a = {to_d(gu, N2), N, F};
  double *ref = dalloc(NF);
  ref_swiglu(&a, ref);
  snprintf(what, sizeof what, "swiglu fwd N%d F%d", N, F);
  expect_close(what, out, ref, NF, TOL_FWD);
  float *R = frand(NF, 81, -1, 1), *d0 = frand(N2, 82, -1, 1), *d = fcopy(d0, N2);
  ZT_OK(zeroc_k_swiglu_backward(K, NULL, d, R, gu, N, F));
  double *Rd = to_d(R, NF), *g = dalloc(N2);
  for (int n = 0; n < N; n++) { /* row by row: a row's output reads its own gate and up */
    swiglu_args_t row = {a.gu + (size_t)n * 2 * F, 1, F};
    fd_grad(ref_swiglu, &row, row.gu, 2 * (size_t)F, Rd + (size_t)n * F, (size_t)F,
            g + (size_t)n * 2 * F);
  }
  snprintf(what, sizeof what, "swiglu dgate|dup N%d F%d", N, F);
  expect_grad(what, d, d0, g, N2, TOL_BWD);
}

static void test_swiglu(void) {
  check_swiglu(5, 7);
  check_swiglu(16, 48);
  check_swiglu(1, 1);
  check_swiglu(40, 520); /* past the threading threshold */
  float *buf = frand(16, 83, -1, 1);
  CU_ASSERT_EQUAL(zeroc_k_swiglu_forward(K, NULL, buf, buf, 2, 0), ZEROC_ERR_INVALID_ARG);
  release();
}

/* ---- grouped-query attention -------------------------------------------------------- */

typedef struct {
  double *qkv;
  int B, T, NH, NKV, HS;
} gqa_args_t;

/* causal attention in double, materialising each row of scores; q head h reads kv head
 * h % NKV */
static void ref_gqa(const void *args, double *out) {
  const gqa_args_t *a = args;
  const int W = (a->NH + 2 * a->NKV) * a->HS, HS = a->HS;
  double *s = malloc((size_t)a->T * sizeof *s);
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->NH; h++)
      for (int t = 0; t < a->T; t++) {
        const double *q = a->qkv + ((size_t)b * a->T + t) * W + h * HS;
        const int kc = (a->NH + h % a->NKV) * HS, vc = kc + a->NKV * HS;
        double mx = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {
          const double *k = a->qkv + ((size_t)b * a->T + j) * W + kc;
          double x = 0;
          for (int i = 0; i < HS; i++) x += q[i] * k[i];
          s[j] = x / sqrt((double)HS);
          mx = fmax(mx, s[j]);
        }
        for (int j = 0; j <= t; j++) z += exp(s[j] - mx);
        double *o = out + ((size_t)b * a->T + t) * a->NH * HS + h * HS;
        for (int i = 0; i < HS; i++) o[i] = 0;
        for (int j = 0; j <= t; j++)
          for (int i = 0; i < HS; i++)
            o[i] += exp(s[j] - mx) / z * a->qkv[((size_t)b * a->T + j) * W + vc + i];
      }
  free(s);
}

/* qkv (B,T,(NH+2NKV)HS) -> e (B,T,3 NH HS): every kv head repeated for its query heads */
static float *repeat_kv(const float *qkv, int B, int T, int NH, int NKV, int HS) {
  const size_t W = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS;
  float *e = talloc((size_t)B * T * 3 * C * sizeof *e);
  for (size_t r = 0; r < (size_t)B * T; r++) {
    memcpy(e + r * 3 * C, qkv + r * W, C * sizeof *e);
    for (int h = 0; h < NH; h++) {
      const int kv = h % NKV;
      memcpy(e + r * 3 * C + C + h * HS, qkv + r * W + C + kv * HS, HS * sizeof *e);
      memcpy(e + r * 3 * C + 2 * C + h * HS, qkv + r * W + C + (NKV + kv) * HS, HS * sizeof *e);
    }
  }
  return e;
}

/* NKV == NH: the GQA entry points give the multi-head kernel's bits, forward and backward
 * (adding, and with ZEROC_K_DQKV_SET), with and without dropout. */
static void check_gqa_mha(int B, int T, int NH, int HS, float p) {
  const size_t C = (size_t)NH * HS, N3 = (size_t)B * T * 3 * C, NC = (size_t)B * T * C;
  const size_t NL = (size_t)B * NH * T;
  const zeroc_dropout_t d = {p, zeroc_i_dropout_key(5, 2, 1, ZEROC_DROP_ATTN), 0, 0, T, T, NH, 0};
  const zeroc_dropout_t *dp = p > 0 ? &d : NULL;
  float *qkv = frand(N3, 90, -2, 2), *o1 = fnan(NC), *l1 = fnan(NL), *o2 = fnan(NC);
  float *l2 = fnan(NL);
  ZT_OK(zeroc_k_attention_forward(K, NULL, o1, l1, qkv, B, T, (int)C, NH, dp));
  ZT_OK(zeroc_k_attention_gqa_forward(K, NULL, o2, l2, qkv, B, T, NH, NH, HS, dp));
  ZT_ASSERT_MSG(!memcmp(o1, o2, NC * 4) && !memcmp(l1, l2, NL * 4),
                "gqa forward NKV == NH (B%d T%d NH%d HS%d p%g) differs from the MHA kernel", B, T,
                NH, HS, p);
  float *R = frand(NC, 91, -1, 1), *g1 = frand(N3, 92, -1, 1), *g2 = fcopy(g1, N3);
  ZT_OK(zeroc_k_attention_backward(K, NULL, g1, R, qkv, o1, l1, B, T, (int)C, NH, dp));
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, g2, R, qkv, o1, l1, B, T, NH, NH, HS, dp, 0));
  ZT_ASSERT_MSG(!memcmp(g1, g2, N3 * 4), "gqa backward NKV == NH differs from the MHA kernel");
  float *s1 = fnan(N3), *s2 = fnan(N3);
  ZT_OK(zeroc_k_attention_backward_ex(K, NULL, s1, R, qkv, o1, l1, B, T, (int)C, NH, dp,
                                      ZEROC_K_DQKV_SET));
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, s2, R, qkv, o1, l1, B, T, NH, NH, HS, dp,
                                       ZEROC_K_DQKV_SET));
  ZT_ASSERT_MSG(!memcmp(s1, s2, N3 * 4), "gqa backward set NKV == NH differs from the MHA kernel");
}

/* NKV < NH: against the multi-head kernel on repeated kv heads (out, lse and dq the same
 * bits; dk, dv the sums over each group) and against central differences of ref_gqa. */
static void check_gqa(int B, int T, int NH, int NKV, int HS, float p) {
  const size_t W = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS, NW = (size_t)B * T * W;
  const size_t NC = (size_t)B * T * C, NL = (size_t)B * NH * T, N3 = (size_t)B * T * 3 * C;
  const zeroc_dropout_t d = {p, zeroc_i_dropout_key(5, 2, 1, ZEROC_DROP_ATTN), 0, 0, T, T, NH, 0};
  const zeroc_dropout_t *dp = p > 0 ? &d : NULL;
  char what[96];
  float *qkv = frand(NW, 93, -2, 2), *e = repeat_kv(qkv, B, T, NH, NKV, HS);
  float *out = fnan(NC), *lse = fnan(NL), *oe = fnan(NC), *le = fnan(NL);
  ZT_OK(zeroc_k_attention_gqa_forward(K, NULL, out, lse, qkv, B, T, NH, NKV, HS, dp));
  ZT_OK(zeroc_k_attention_forward(K, NULL, oe, le, e, B, T, (int)C, NH, dp));
  ZT_ASSERT_MSG(!memcmp(out, oe, NC * 4) && !memcmp(lse, le, NL * 4),
                "gqa forward B%d T%d NH%d NKV%d HS%d p%g differs from MHA on repeated kv heads", B,
                T, NH, NKV, HS, p);

  float *R = frand(NC, 94, -1, 1), *d0 = frand(NW, 95, -1, 1), *dg = fcopy(d0, NW);
  float *de = talloc(N3 * sizeof *de);
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, dg, R, qkv, out, lse, B, T, NH, NKV, HS, dp, 0));
  ZT_OK(zeroc_k_attention_backward(K, NULL, de, R, e, oe, le, B, T, (int)C, NH, dp));
  double *want = dalloc(NW); /* prefill + the repeated heads' gradients summed per group */
  for (size_t r = 0; r < (size_t)B * T; r++) {
    for (size_t c = 0; c < W; c++) want[r * W + c] = 0;
    for (size_t c = 0; c < C; c++) want[r * W + c] = de[r * 3 * C + c];
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < HS; i++) {
        const int kv = h % NKV;
        want[r * W + C + kv * HS + i] += de[r * 3 * C + C + h * HS + i];
        want[r * W + C + (NKV + kv) * HS + i] += de[r * 3 * C + 2 * C + h * HS + i];
      }
  }
  snprintf(what, sizeof what, "gqa dqkv vs repeated B%d T%d NH%d NKV%d p%g", B, T, NH, NKV, p);
  expect_grad(what, dg, d0, want, NW, 1e-6);
  float *z = talloc(NW * sizeof *z), *s = fnan(NW); /* set == a zeroed buffer += */
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, z, R, qkv, out, lse, B, T, NH, NKV, HS, dp, 0));
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, s, R, qkv, out, lse, B, T, NH, NKV, HS, dp,
                                       ZEROC_K_DQKV_SET));
  size_t bad = 0, badq = 0;
  for (size_t i = 0; i < NW; i++) bad += !(s[i] == z[i]);
  for (size_t r = 0; r < (size_t)B * T; r++) /* dq: each head's own, so the same bits */
    badq += memcmp(z + r * W, de + r * 3 * C, C * sizeof *z) != 0;
  ZT_ASSERT_MSG(!badq, "gqa dq differs from MHA's on repeated kv heads in %zu rows", badq);
  ZT_ASSERT_MSG(!bad, "gqa backward set: %zu of %zu elements differ from a zeroed dqkv +=", bad,
                NW);
  if (p > 0 || NW > 2000) return; /* finite differences on the small ones, without dropout */
  gqa_args_t a = {to_d(qkv, NW), B, T, NH, NKV, HS};
  double *ref = dalloc(NC), *Rd = to_d(R, NC), *g = dalloc(NW);
  ref_gqa(&a, ref);
  snprintf(what, sizeof what, "gqa fwd vs double B%d T%d NH%d NKV%d", B, T, NH, NKV);
  expect_close(what, out, ref, NC, TOL_FWD);
  fd_grad(ref_gqa, &a, a.qkv, NW, Rd, NC, g);
  snprintf(what, sizeof what, "gqa dqkv vs finite differences B%d T%d NH%d NKV%d", B, T, NH, NKV);
  expect_grad(what, dg, d0, g, NW, TOL_BWD);
}

static void test_gqa(void) {
  check_gqa_mha(2, 13, 4, 8, 0);
  check_gqa_mha(1, 70, 2, 24, 0.2f);
  check_gqa(2, 7, 4, 2, 6, 0);
  check_gqa(1, 9, 6, 1, 4, 0);
  check_gqa(2, 70, 8, 2, 16, 0);    /* across the 64-row tiles */
  check_gqa(1, 65, 4, 2, 32, 0.2f); /* with dropout */
  float *buf = frand(64, 96, -1, 1);
  CU_ASSERT_EQUAL(zeroc_k_attention_gqa_forward(K, NULL, buf, buf, buf, 1, 2, 3, 2, 4, NULL),
                  ZEROC_ERR_INVALID_ARG); /* NH not a multiple of NKV */
  CU_ASSERT_EQUAL(
      zeroc_k_attention_gqa_backward(K, NULL, buf, buf, buf, buf, buf, 1, 2, 4, 2, 4, NULL, 4),
      ZEROC_ERR_INVALID_ARG); /* unknown flag */
  release();
}

/* ---- thread determinism -------------------------------------------------------------- */

/* Every kernel above once with `threads` OpenMP threads, on shapes past their threading
 * thresholds; the n[i] floats of each output in o[i]. */
enum { LN = 160, LC = 256, LNH = 4, LNKV = 2, LHS = 32, LT = 96, NOUT = 9 };
static void llama_run(int threads, float *o[NOUT], size_t n[NOUT]) {
  const size_t NC = (size_t)LN * LC, W = (size_t)(LNH + 2 * LNKV) * LHS, NW = (size_t)LT * W;
  const size_t NO = (size_t)LT * LNH * LHS;
  omp_set_num_threads(threads);
  float *x = frand(NC, 100, -1, 1), *w = frand(LC, 101, 0.5f, 1.5f), *d = frand(NC, 102, -1, 1);
  o[0] = fnan(NC), o[1] = fnan(LN), n[0] = NC, n[1] = LN;
  ZT_OK(zeroc_k_rmsnorm_forward(K, NULL, o[0], o[1], x, w, 1e-5f, LN, LC));
  o[2] = frand(NC, 103, -1, 1), o[3] = frand(LC, 104, -1, 1), n[2] = NC, n[3] = LC;
  ZT_OK(zeroc_k_rmsnorm_backward(K, NULL, o[2], o[3], d, x, w, o[1], LN, LC, NULL, 0));
  int32_t *pos = talloc(LT * sizeof *pos);
  for (int t = 0; t < LT; t++) pos[t] = (t * 13) % 101;
  o[4] = frand(NW, 105, -1, 1), n[4] = NW;
  ZT_OK(zeroc_k_rope_forward(K, NULL, o[4], pos, &ROPE_LLAMA3, LT, LNH, LNKV, LHS));
  o[5] = fnan(NC / 2), o[6] = frand(NC, 106, -1, 1), n[5] = NC / 2, n[6] = NC;
  ZT_OK(zeroc_k_swiglu_forward(K, NULL, o[5], x, LN, LC / 2));
  ZT_OK(zeroc_k_swiglu_backward(K, NULL, o[6], d, x, LN, LC / 2));
  float *lse = fnan((size_t)LNH * LT), *dy = frand(NO, 107, -1, 1);
  o[7] = fnan(NO), o[8] = frand(NW, 108, -1, 1), n[7] = NO, n[8] = NW;
  ZT_OK(zeroc_k_attention_gqa_forward(K, NULL, o[7], lse, o[4], 1, LT, LNH, LNKV, LHS, NULL));
  ZT_OK(zeroc_k_attention_gqa_backward(K, NULL, o[8], dy, o[4], o[7], lse, 1, LT, LNH, LNKV, LHS,
                                       NULL, 0));
  omp_set_num_threads(1);
}

static void test_thread_determinism(void) {
  static const char *names[NOUT] = {"rmsnorm fwd",     "rmsnorm rstd", "rmsnorm dinp",
                                    "rmsnorm dweight", "rope fwd",     "swiglu fwd",
                                    "swiglu bwd",      "gqa fwd",      "gqa bwd"};
  float *one[NOUT], *three[NOUT];
  size_t n[NOUT];
  llama_run(1, one, n);
  llama_run(3, three, n);
  for (int i = 0; i < NOUT; i++)
    ZT_ASSERT_MSG(!memcmp(one[i], three[i], n[i] * sizeof(float)), "%s: 1 and 3 threads differ",
                  names[i]);
  release();
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"rmsnorm fwd/bwd vs reference and finite differences", test_rmsnorm},
      {"rmsnorm fused residual and set forms, bad input", test_rmsnorm_fused},
      {"rope by hand, llama3 frequencies by hand", test_rope_hand},
      {"rope vs reference, backward vs finite differences", test_rope},
      {"swiglu fwd/bwd vs reference and finite differences", test_swiglu},
      {"grouped-query attention", test_gqa},
      {"results do not depend on the thread count", test_thread_determinism},
      ZT_END,
  };
  return kt_main(argc, argv, "kernels_llama", tests);
}
