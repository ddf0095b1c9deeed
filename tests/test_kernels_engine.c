/*
 * tests/test_kernels_engine.c - the cpu engine kernels through the public dispatch
 * (zeroc_k_*): cast fp32 <-> bf16 against a round-to-nearest-even reference, add_to,
 * accumulate and scale, sumsq with NaN and Inf, AdamW against a double reference over
 * several steps, and the kernels' vectorisable exp against exp. Split from
 * test_kernels_cpu.c (the model's kernels), which keeps the thread-determinism check of
 * all of them.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "kernels_test.h"

/* ---- engine kernels ----------------------------------------------------------------- */

/* The bf16 nearest to x, ties to even, found by comparing the two neighbours. */
static uint16_t ref_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  const uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  float flo, fhi;
  memcpy(&flo, &lo, 4);
  memcpy(&fhi, &hi, 4);
  const double dl = fabs((double)x - flo), dh = fabs((double)fhi - x);
  if (dl < dh || (dl == dh && !((lo >> 16) & 1))) return (uint16_t)(lo >> 16);
  return (uint16_t)(hi >> 16);
}

static void test_cast(void) {
  const size_t n = 4099;
  float *x = frand(n, 81, -3, 3), *y = fnan(n);
  x[0] = 1.0f + 0x1p-8f;     /* exactly halfway: ties to even (1.0) */
  x[1] = 1.0f + 3 * 0x1p-8f; /* halfway, rounds up to the even 1 + 2^-6 */
  x[2] = -1.0f - 0x1p-8f;
  x[3] = 3.0e38f; /* near the top of the range */
  x[4] = 1e-30f;
  uint16_t *h = talloc(n * sizeof *h);
  ZT_OK(zeroc_k_cast(K, NULL, h, ZEROC_BF16, x, ZEROC_FP32, n));
  ZT_OK(zeroc_k_cast(K, NULL, y, ZEROC_FP32, h, ZEROC_BF16, n));
  int exact = 1;
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    exact &= h[i] == ref_bf16(x[i]);
    worst = fmax(worst, fabs((double)y[i] - x[i]) / fabs((double)x[i]));
  }
  ZT_ASSERT_MSG(exact, "fp32 -> bf16 differs from round-to-nearest-even");
  ZT_ASSERT_MSG(worst <= 0x1p-8, "fp32 -> bf16 -> fp32 relative error %.3g > 2^-8", worst);
  CU_ASSERT_EQUAL(h[0], 0x3f80);
  CU_ASSERT_EQUAL(h[1], 0x3f82);

  /* bf16 -> fp32 -> bf16 is exact for every finite bf16 */
  uint16_t *hb = talloc(n * sizeof *hb), *hc = talloc(n * sizeof *hc);
  uint64_t s = 82;
  for (size_t i = 0; i < n; i++) {
    do hb[i] = (uint16_t)zt_rand_u64(&s);
    while ((hb[i] & 0x7f80) == 0x7f80); /* skip Inf/NaN patterns */
  }
  ZT_OK(zeroc_k_cast(K, NULL, y, ZEROC_FP32, hb, ZEROC_BF16, n));
  ZT_OK(zeroc_k_cast(K, NULL, hc, ZEROC_BF16, y, ZEROC_FP32, n));
  CU_ASSERT_EQUAL(memcmp(hb, hc, n * sizeof *hb), 0);

  /* non-finite values survive, fp32 -> fp32 is a copy */
  float sp[3] = {NAN, INFINITY, -INFINITY}, back[3];
  uint16_t hs[3];
  ZT_OK(zeroc_k_cast(K, NULL, hs, ZEROC_BF16, sp, ZEROC_FP32, 3));
  ZT_OK(zeroc_k_cast(K, NULL, back, ZEROC_FP32, hs, ZEROC_BF16, 3));
  CU_ASSERT(isnan(back[0]) && back[1] == INFINITY && back[2] == -INFINITY);
  float *z = fnan(n);
  ZT_OK(zeroc_k_cast(K, NULL, z, ZEROC_FP32, x, ZEROC_FP32, n));
  CU_ASSERT_EQUAL(memcmp(z, x, n * sizeof *x), 0);
  release();
}

/* add_to: fp32 adds exactly; bf16 adds in fp32 and rounds once, to nearest even. */
static void test_add_to(void) {
  const size_t n = 1001;
  float *d = frand(n, 93, -1, 1), *src = frand(n, 94, -2, 2), *d0 = fcopy(d, n);
  ZT_OK(zeroc_k_add_to(K, NULL, d, ZEROC_FP32, src, n));
  for (size_t i = 0; i < n; i++) CU_ASSERT_EQUAL(d[i], d0[i] + src[i]);
  uint16_t *h = talloc(n * sizeof *h);
  for (size_t i = 0; i < n; i++) h[i] = ref_bf16(d0[i]);
  uint16_t *h0 = talloc(n * sizeof *h0);
  memcpy(h0, h, n * sizeof *h);
  ZT_OK(zeroc_k_add_to(K, NULL, h, ZEROC_BF16, src, n));
  for (size_t i = 0; i < n; i++) {
    const uint32_t u = (uint32_t)h0[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    CU_ASSERT_EQUAL(h[i], ref_bf16(f + src[i]));
  }
  CU_ASSERT_EQUAL(zeroc_k_add_to(K, NULL, h, ZEROC_INT32, src, n), ZEROC_ERR_INVALID_ARG);
  release();
}

static void test_accumulate_scale(void) {
  const size_t n = 1001;
  float *d = frand(n, 91, -1, 1), *src = frand(n, 92, -2, 2), *d0 = fcopy(d, n);
  double *ref = dalloc(n);
  ZT_OK(zeroc_k_accumulate(K, NULL, d, src, ZEROC_FP32, n, 0.75f));
  for (size_t i = 0; i < n; i++) ref[i] = (double)d0[i] + 0.75 * src[i];
  expect_close("accumulate fp32", d, ref, n, TOL_FWD);

  uint16_t *hs = talloc(n * sizeof *hs);
  for (size_t i = 0; i < n; i++) hs[i] = ref_bf16(src[i]);
  float *e = fcopy(d0, n);
  ZT_OK(zeroc_k_accumulate(K, NULL, e, hs, ZEROC_BF16, n, -1.5f));
  for (size_t i = 0; i < n; i++) {
    const uint32_t u = (uint32_t)hs[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    ref[i] = (double)d0[i] - 1.5 * f;
  }
  expect_close("accumulate bf16", e, ref, n, TOL_FWD);

  float *x = fcopy(src, n);
  ZT_OK(zeroc_k_scale(K, NULL, x, n, -0.3f));
  for (size_t i = 0; i < n; i++) ref[i] = -0.3 * src[i];
  expect_close("scale", x, ref, n, TOL_FWD);
  release();
}

/* ---- the kernels' vectorisable exp ------------------------------------------------- */

/* zeroc__expf against double exp over its whole range (a fine grid plus the
 * values softmax and GELU feed it), and its edges: 0 below the smallest normal,
 * +inf above its top, NaN kept. */
static void test_vexpf(void) {
  double worst = 0;
  float worst_x = 0;
  for (int i = 0; i <= 2000000; i++) {
    const float x = ZEROC_EXPF_LO + (ZEROC_EXPF_HI - ZEROC_EXPF_LO) * (float)i / 2000000.0f;
    const double want = exp((double)x), e = fabs((double)zeroc__expf(x) - want) / want;
    if (e > worst) worst = e, worst_x = x;
  }
  const float small[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f, -0.5f, 0.34657359f, -0.34657359f};
  for (size_t i = 0; i < sizeof small / sizeof *small; i++) {
    const double want = exp((double)small[i]);
    const double e = fabs((double)zeroc__expf(small[i]) - want) / want;
    if (e > worst) worst = e, worst_x = small[i];
  }
  if (verbose) printf("\n    zeroc__expf worst rel err %.2e at %g", worst, worst_x);
  /* 3 ulp of 1.0f (2^-23 each) */
  ZT_ASSERT_MSG(worst <= 3.6e-7, "zeroc__expf: relative error %.3g at x = %.9g > 3.6e-7", worst,
                worst_x);
  ZT_ASSERT_MSG(zeroc__expf(0.0f) == 1.0f, "zeroc__expf(0) = %.9g, want 1", zeroc__expf(0.0f));
  ZT_ASSERT_MSG(zeroc__expf(-100.0f) == 0.0f && zeroc__expf(-INFINITY) == 0.0f,
                "zeroc__expf below the normal range: %g, %g, want 0", zeroc__expf(-100.0f),
                zeroc__expf(-INFINITY));
  ZT_ASSERT_MSG(isinf(zeroc__expf(89.0f)) && isinf(zeroc__expf(INFINITY)),
                "zeroc__expf above its range: %g, %g, want inf", zeroc__expf(89.0f),
                zeroc__expf(INFINITY));
  ZT_ASSERT_MSG(isnan(zeroc__expf(NAN)), "zeroc__expf(NaN) = %g, want NaN", zeroc__expf(NAN));
  /* the same through a vectorised loop (8 lanes, a tail of 3) */
  float in[19], out[19];
  for (int i = 0; i < 19; i++) in[i] = -9.0f + (float)i;
  in[4] = NAN;
  in[7] = -INFINITY;
#pragma omp simd
  for (int i = 0; i < 19; i++) out[i] = zeroc__expf(in[i]);
  for (int i = 0; i < 19; i++) {
    if (i == 4) {
      ZT_ASSERT_MSG(isnan(out[i]), "vectorised zeroc__expf(NaN) = %g", out[i]);
      continue;
    }
    const double want = exp((double)in[i]);
    ZT_ASSERT_MSG(fabs(out[i] - want) <= 3.6e-7 * want,
                  "vectorised zeroc__expf(%g) = %.9g, want %.9g", in[i], out[i], want);
  }
}

static void test_sumsq(void) {
  const size_t n = 100003; /* above the threading threshold */
  float *x = frand(n, 101, -2, 2);
  double ref = 3.0, got = 3.0; /* sumsq adds to what is there */
  for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
  ZT_OK(zeroc_k_sumsq(K, NULL, &got, x, ZEROC_FP32, n));
  ZT_ASSERT_MSG(fabs(got - ref) <= 1e-12 * ref, "sumsq %.17g, reference %.17g", got, ref);
  x[n / 2] = NAN;
  got = 0;
  ZT_OK(zeroc_k_sumsq(K, NULL, &got, x, ZEROC_FP32, n));
  ZT_ASSERT_MSG(isnan(got), "sumsq with a NaN gave %g", got);
  x[n / 2] = INFINITY;
  got = 0;
  ZT_OK(zeroc_k_sumsq(K, NULL, &got, x, ZEROC_FP32, n));
  ZT_ASSERT_MSG(isinf(got), "sumsq with an Inf gave %g", got);
  /* a bf16 gradient read in place: the sum of its exactly widened values */
  uint16_t *xb = malloc(n * sizeof *xb);
  ZT_ASSERT_MSG(xb != NULL, "out of memory");
  double refb = 0.5, gotb = 0.5;
  for (size_t i = 0; i < n; i++) {
    xb[i] = zeroc_f32_to_bf16(sinf((float)i * 0.37f) * 3.0f);
    const double w = zeroc_bf16_to_f32(xb[i]);
    refb += w * w;
  }
  ZT_OK(zeroc_k_sumsq(K, NULL, &gotb, xb, ZEROC_BF16, n));
  ZT_ASSERT_MSG(fabs(gotb - refb) <= 1e-12 * refb, "sumsq of bf16 %.17g, reference %.17g", gotb,
                refb);
  ZT_ASSERT_MSG(zeroc_k_sumsq(K, NULL, &gotb, xb, ZEROC_FP64, n) == ZEROC_ERR_INVALID_ARG,
                "sumsq of fp64 accepted");
  free(xb);
  release();
}

static void test_adamw(void) {
  const size_t n = 1003;
  const int steps = 5;
  zeroc_adamw_args_t a = {.lr = 1e-2f,
                          .beta1 = 0.9f,
                          .beta2 = 0.95f,
                          .eps = 1e-8f,
                          .weight_decay = 0.1f,
                          .grad_scale = 0.5f};
  float *p = frand(n, 111, -1, 1), *m = talloc(n * 4), *v = talloc(n * 4);
  const float *p0 = fcopy(p, n);
  double *rp = to_d(p, n), *rm = dalloc(n), *rv = dalloc(n), *rdp = dalloc(n);
  float *dpf = talloc(n * sizeof *dpf);
  for (int t = 1; t <= steps; t++) {
    float *g = frand(n, 112 + t, -1, 1);
    a.bias_corr1 = 1.0f - powf(a.beta1, (float)t);
    a.bias_corr2 = 1.0f - powf(a.beta2, (float)t);
    ZT_OK(zeroc_k_adamw(K, NULL, p, m, v, g, n, &a));
    const double b1 = a.beta1, b2 = a.beta2;
    for (size_t i = 0; i < n; i++) {
      const double gi = (double)g[i] * a.grad_scale;
      rm[i] = b1 * rm[i] + (1 - b1) * gi;
      rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
      const double mh = rm[i] / (1 - pow(b1, t)), vh = rv[i] / (1 - pow(b2, t));
      rp[i] -= (double)a.lr * (mh / (sqrt(vh) + a.eps) + (double)a.weight_decay * rp[i]);
    }
  }
  /* compare the total update (p - p0), not p: the update is ~lr, p is ~1, so
   * an fp32 p - p0 carries ~ulp(1)/lr = 1e-5 relative error of its own */
  for (size_t i = 0; i < n; i++) {
    dpf[i] = p[i] - p0[i];
    rdp[i] = rp[i] - p0[i];
  }
  expect_close("adamw m", m, rm, n, TOL_FWD);
  expect_close("adamw v", v, rv, n, TOL_FWD);
  expect_close("adamw update after 5 steps", dpf, rdp, n, 1e-4);
  release();
}

/* The step's verdict decided by a kernel (kernels/clip.h): the multiplier from the sum of
 * squares, NaN for a non-finite norm; AdamW reading it from memory gives the bits of
 * grad_scale, and with NaN there writes nothing (a skipped step). */
static void test_clip_scale(void) {
  const double sums[] = {0, 0.25, 1, 4, 1e30, INFINITY, NAN};
  for (size_t i = 0; i < sizeof sums / sizeof *sums; i++)
    for (int c = 0; c < 3; c++) {
      const float clip = c == 0 ? 0.0f : c == 1 ? 1.0f : INFINITY;
      float got = -1;
      ZT_OK(zeroc_k_clip_scale(K, NULL, &got, &sums[i], clip));
      const double norm = sqrt(sums[i]);
      const float want = !isfinite(norm)           ? NAN
                         : clip > 0 && norm > clip ? (float)(clip / (norm + 1e-6))
                                                   : 1.0f;
      ZT_ASSERT_MSG(isnan(want) ? isnan(got) : got == want,
                    "clip_scale of sum %g, clip %g: %.9g, expected %.9g", sums[i], clip, got, want);
    }
  float s;
  CU_ASSERT_EQUAL(zeroc_k_clip_scale(K, NULL, &s, &sums[1], -1.0f), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_k_clip_scale(K, NULL, &s, &sums[1], NAN), ZEROC_ERR_INVALID_ARG);

  const size_t n = 517;
  const float *p0 = frand(n, 121, -1, 1), *m0 = frand(n, 122, -0.1f, 0.1f);
  const float *v0 = frand(n, 123, 0, 0.01f), *g = frand(n, 124, -1, 1);
  zeroc_adamw_args_t a = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.37f, 0.19f, 0.0975f, NULL};
  float *p1 = fcopy(p0, n), *m1 = fcopy(m0, n), *v1 = fcopy(v0, n), *o1 = talloc(n * 4);
  ZT_OK(zeroc_k_adamw_mixed(K, NULL, p1, m1, v1, g, ZEROC_FP32, o1, ZEROC_FP32, n, &a));
  float dev_scale = a.grad_scale;
  a.grad_scale = 5.0f; /* ignored: the multiplier is read from scale_dev */
  a.scale_dev = &dev_scale;
  for (int mixed = 0; mixed < 2; mixed++) {
    float *p2 = fcopy(p0, n), *m2 = fcopy(m0, n), *v2 = fcopy(v0, n), *o2 = talloc(n * 4);
    if (mixed)
      ZT_OK(zeroc_k_adamw_mixed(K, NULL, p2, m2, v2, g, ZEROC_FP32, o2, ZEROC_FP32, n, &a));
    else
      ZT_OK(zeroc_k_adamw(K, NULL, p2, m2, v2, g, n, &a));
    ZT_ASSERT_MSG(!memcmp(p1, p2, n * 4) && !memcmp(m1, m2, n * 4) && !memcmp(v1, v2, n * 4) &&
                      (!mixed || !memcmp(o1, o2, n * 4)),
                  "adamw%s with the multiplier in memory differs", mixed ? "_mixed" : "");
  }
  dev_scale = NAN; /* skipped: nothing written */
  float *p3 = fcopy(p0, n), *m3 = fcopy(m0, n), *v3 = fcopy(v0, n), *o3 = fcopy(p0, n);
  ZT_OK(zeroc_k_adamw(K, NULL, p3, m3, v3, g, n, &a));
  ZT_OK(zeroc_k_adamw_mixed(K, NULL, p3, m3, v3, g, ZEROC_FP32, o3, ZEROC_FP32, n, &a));
  ZT_ASSERT_MSG(!memcmp(p3, p0, n * 4) && !memcmp(m3, m0, n * 4) && !memcmp(v3, v0, n * 4) &&
                    !memcmp(o3, p0, n * 4),
                "adamw with a NaN multiplier in memory changed the state");
  CU_ASSERT_EQUAL(zeroc_k_host_adamw(p3, m3, v3, g, n, &a), ZEROC_ERR_INVALID_ARG);
  release();
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"cast fp32 <-> bf16", test_cast},
      {"accumulate and scale", test_accumulate_scale},
      {"add_to into fp32 and bf16", test_add_to},
      {"vectorisable expf vs exp, edges, NaN", test_vexpf},
      {"sumsq, NaN and Inf propagate", test_sumsq},
      {"adamw vs reference over 5 steps", test_adamw},
      {"clip_scale, adamw reading it (NaN: no write)", test_clip_scale},
      ZT_END,
  };
  return kt_main(argc, argv, "kernels_engine", tests);
}
