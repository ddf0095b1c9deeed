/*
 * tests/test_kernels_cuda_engine.c - the engine kernels on the GPU against their cpu
 * twins: cast (bit for bit against zeroc_f32_to_bf16), accumulate, scale, add_to,
 * dropout, sumsq, adamw and adamw_mixed, and a loss head's mean added on the device and
 * read back through pinned memory, the clipping multiplier decided on the device. Split
 * from test_kernels_cuda.c (helpers in kernels_cuda_test.h). Exits 77 (skipped) when no
 * GPU is visible.
 *
 * The engine kernels use the cpu's IEEE operations in the cpu's order, so most checks
 * are bit for bit; the rest hold to 1e-6 relative.
 */
#include "kernels/clip.h"
#include "kernels_cuda_test.h"

/* ---- engine ------------------------------------------------------------------------- */

static void check_engine(size_t n, size_t off) {
  float *x = host_rand(ZEROC_FP32, n, 80, -100, 100);
  const float special[] = {NAN,         INFINITY, -INFINITY, 1.00390625f,
                           1.01171875f, -0.0f,    3.4e38f,   1e-40f};
  for (size_t i = 0; i < 8 && i < n; i++) x[i] = special[i];
  float *src = dev_from(ZEROC_FP32, x, n, off);
  uint16_t *bf = dev_alloc(ZEROC_BF16, n, off);
  uint16_t *hb = malloc(n * sizeof *hb);
  ZT_OK(zeroc_k_cast(kf, st, bf, ZEROC_BF16, src, ZEROC_FP32, n));
  ZT_OK(zeroc_memcpy_async(st, hb, bf, n * sizeof *hb));
  ZT_OK(zeroc_stream_sync(st));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += hb[i] != zeroc_f32_to_bf16(x[i]);
  ZT_ASSERT_MSG(bad == 0, "cast fp32 -> bf16: %zu of %zu differ from zeroc_f32_to_bf16", bad, n);
  float *back = dev_alloc(ZEROC_FP32, n, off), *hback = malloc(n * sizeof(float)),
        *ref = malloc(n * sizeof(float));
  ZT_OK(zeroc_k_cast(kf, st, back, ZEROC_FP32, bf, ZEROC_BF16, n));
  dev_get(ZEROC_FP32, hback, back, n);
  zeroc__cpu_cast(ref, ZEROC_FP32, hb, ZEROC_BF16, n);
  ZT_ASSERT_MSG(!memcmp(hback, ref, n * sizeof(float)), "cast bf16 -> fp32 differs from the cpu");

  float *a = host_rand(ZEROC_FP32, n, 81, -1, 1), *b = host_rand(ZEROC_FP32, n, 82, -1, 1);
  float *da = dev_from(ZEROC_FP32, a, n, off);
  ZT_OK(zeroc_k_accumulate(kf, st, da, dev_from(ZEROC_BF16, b, n, off), ZEROC_BF16, n, 0.37f));
  for (size_t i = 0; i < n; i++) hb[i] = zeroc_f32_to_bf16(b[i]);
  zeroc__cpu_accumulate(a, hb, ZEROC_BF16, n, 0.37f);
  expect_close("accumulate bf16", ZEROC_FP32, da, a, n, 1e-6);
  ZT_OK(zeroc_k_accumulate(kf, st, da, dev_from(ZEROC_FP32, b, n, off), ZEROC_FP32, n, -2.0f));
  zeroc__cpu_accumulate(a, b, ZEROC_FP32, n, -2.0f);
  expect_close("accumulate fp32", ZEROC_FP32, da, a, n, 1e-6);
  ZT_OK(zeroc_k_scale(kf, st, da, n, 0.3f));
  zeroc__cpu_scale(a, n, 0.3f);
  expect_close("scale", ZEROC_FP32, da, a, n, 1e-6);
  /* Bit for bit, too: both sides round the product, then the sum (the cuda kernels
   * by _rn intrinsics, kernels/cpu/engine.c by -ffp-contract=off). */
  dev_get(ZEROC_FP32, hback, da, n);
  ZT_ASSERT_MSG(!memcmp(hback, a, n * sizeof(float)),
                "accumulate + scale differ from the cpu in the last bits (a fused multiply-add?)");
  /* add_to and sumsq below check themselves alone: from here on both sides start
   * from the device's values, whatever the lines above found */
  memcpy(a, hback, n * sizeof(float));
  /* add_to against its cpu twin, into fp32 and into bf16 (bitwise: one rounding) */
  float *dw = dev_from(ZEROC_FP32, b, n, off);
  ZT_OK(zeroc_k_add_to(kf, st, da, ZEROC_FP32, dw, n));
  zeroc__cpu_add_to(a, ZEROC_FP32, b, n);
  ZT_OK(zeroc_memcpy_async(st, hb, bf, n * sizeof *hb)); /* the cast values above, NaN and all */
  ZT_OK(zeroc_stream_sync(st));
  ZT_OK(zeroc_k_add_to(kf, st, bf, ZEROC_BF16, dw, n));
  zeroc__cpu_add_to(hb, ZEROC_BF16, b, n);
  dev_get(ZEROC_FP32, hback, da, n);
  ZT_ASSERT_MSG(!memcmp(hback, a, n * sizeof(float)), "add_to fp32 differs from the cpu");
  uint16_t *hb2 = malloc(n * sizeof *hb2);
  ZT_OK(zeroc_memcpy_async(st, hb2, bf, n * sizeof *hb2));
  ZT_OK(zeroc_stream_sync(st));
  /* A NaN stays a NaN, but its payload is not the cpu's: IEEE 754 leaves the NaN
   * an operation returns open, x86 passes the operand's on, cuda returns its one
   * canonical NaN. Every other value bit for bit. */
  size_t bad_add = 0;
  for (size_t i = 0; i < n; i++) {
    const int nan_got = isnan(zeroc_bf16_to_f32(hb2[i])), nan_want = isnan(zeroc_bf16_to_f32(hb[i]));
    bad_add += nan_got != nan_want || (!nan_want && hb2[i] != hb[i]);
  }
  ZT_ASSERT_MSG(bad_add == 0, "add_to bf16: %zu of %zu differ from the cpu", bad_add, n);
  free(hb2);
  /* dropout against its cpu twin, bit for bit (fp32), rows from a sequence-parallel split */
  if (n >= 50) {
    const int C = 50, N = (int)(n / (size_t)C), T = 7;
    zeroc_dropout_t dp = {0.3f, zeroc_i_dropout_key(2, 4, 1, ZEROC_DROP_ATTN_RESID), 3, 5, T, 9, C,
                          0};
    float *want = malloc((size_t)N * C * sizeof *want), *got = malloc((size_t)N * C * sizeof *got);
    void *dy = dev_alloc(ZEROC_FP32, (size_t)N * C, off);
    ZT_OK(zeroc_k_dropout(kf, st, dy, dw, &dp, N, C));
    zeroc__cpu_dropout(want, b, &dp, N, C);
    dev_get(ZEROC_FP32, got, dy, (size_t)N * C);
    ZT_ASSERT_MSG(!memcmp(got, want, (size_t)N * C * sizeof *got), "dropout differs from the cpu");
    free(want), free(got);
  }

  double init = 2.5, *dsum = dev_alloc(ZEROC_FP64, 1, 0), got = 0;
  ZT_OK(zeroc_memcpy_async(st, dsum, &init, sizeof init));
  ZT_OK(zeroc_k_sumsq(kf, st, dsum, da, ZEROC_FP32, n));
  ZT_OK(zeroc_memcpy_async(st, &got, dsum, sizeof got));
  ZT_OK(zeroc_stream_sync(st));
  double want = init + zeroc__cpu_sumsq(a, ZEROC_FP32, n);
  ZT_ASSERT_MSG(fabs(got - want) <= 1e-12 * want, "sumsq %.17g, cpu %.17g", got, want);
  /* NaN propagates */
  ZT_OK(zeroc_k_sumsq(kf, st, dsum, src, ZEROC_FP32, n));
  ZT_OK(zeroc_memcpy_async(st, &got, dsum, sizeof got));
  ZT_OK(zeroc_stream_sync(st));
  ZT_ASSERT_MSG(n < 8 || isnan(got), "sumsq over a NaN gave %g", got);

  float *p = host_rand(ZEROC_FP32, n, 83, -1, 1), *m = host_rand(ZEROC_FP32, n, 84, -0.1f, 0.1f);
  float *v = host_rand(ZEROC_FP32, n, 85, 0, 0.01f), *g = host_rand(ZEROC_FP32, n, 86, -1, 1);
  float *dp = dev_from(ZEROC_FP32, p, n, off), *dm = dev_from(ZEROC_FP32, m, n, off);
  float *dv = dev_from(ZEROC_FP32, v, n, off);
  zeroc_adamw_args_t ar = {
      3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, 1 - 0.9f * 0.9f, 1 - 0.95f * 0.95f, NULL};
  ZT_OK(zeroc_k_adamw(kf, st, dp, dm, dv, dev_from(ZEROC_FP32, g, n, off), n, &ar));
  zeroc__cpu_adamw(p, m, v, g, n, ar.lr, ar.beta1, ar.beta2, ar.eps, ar.weight_decay, ar.grad_scale,
                   ar.bias_corr1, ar.bias_corr2);
  expect_close("adamw param", ZEROC_FP32, dp, p, n, 1e-6);
  expect_close("adamw m", ZEROC_FP32, dm, m, n, 1e-6);
  expect_close("adamw v", ZEROC_FP32, dv, v, n, 1e-6);
  dev_free_all();
  free(x), free(hb), free(hback), free(ref), free(a), free(b), free(p), free(m), free(v), free(g);
}

static void test_engine(void) {
  check_engine(1000003, 0);
  check_engine(1000003, 1); /* unaligned: element path */
  check_engine(5, 0);
}

/* adamw_mixed against its cpu twin (1e-6, as adamw above), the bf16 gradient read as is,
 * and the compute copy it writes bit for bit the rounding of its own new param. */
static void check_adamw_mixed(size_t n, size_t off, zeroc_dtype_t out_dt) {
  float *p = host_rand(ZEROC_FP32, n, 83, -1, 1), *m = host_rand(ZEROC_FP32, n, 84, -0.1f, 0.1f);
  float *v = host_rand(ZEROC_FP32, n, 85, 0, 0.01f), *g = host_rand(ZEROC_BF16, n, 86, -1, 1);
  uint16_t *gb = malloc(n * sizeof *gb), *ob = malloc(n * sizeof *ob);
  for (size_t i = 0; i < n; i++) gb[i] = zeroc_f32_to_bf16(g[i]);
  float *dp = dev_from(ZEROC_FP32, p, n, off), *dm = dev_from(ZEROC_FP32, m, n, off);
  float *dv = dev_from(ZEROC_FP32, v, n, off);
  void *dout_ = dev_alloc(out_dt, n, off);
  zeroc_adamw_args_t ar = {
      3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, 1 - 0.9f * 0.9f, 1 - 0.95f * 0.95f, NULL};
  ZT_OK(zeroc_k_adamw_mixed(kf, st, dp, dm, dv, dev_from(ZEROC_BF16, g, n, off), ZEROC_BF16, dout_,
                            out_dt, n, &ar));
  float *out = malloc(n * sizeof(float));
  zeroc__cpu_adamw_mixed(p, m, v, gb, ZEROC_BF16, out_dt == ZEROC_BF16 ? (void *)ob : out, out_dt,
                         n, ar.lr, ar.beta1, ar.beta2, ar.eps, ar.weight_decay, ar.grad_scale,
                         ar.bias_corr1, ar.bias_corr2);
  expect_close("adamw_mixed param", ZEROC_FP32, dp, p, n, 1e-6);
  expect_close("adamw_mixed m", ZEROC_FP32, dm, m, n, 1e-6);
  expect_close("adamw_mixed v", ZEROC_FP32, dv, v, n, 1e-6);
  float *np = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  dev_get(ZEROC_FP32, np, dp, n);
  dev_get(out_dt, got, dout_, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += out_dt == ZEROC_BF16 ? zeroc_f32_to_bf16(got[i]) != zeroc_f32_to_bf16(np[i])
                                : memcmp(&got[i], &np[i], sizeof(float)) != 0;
  ZT_ASSERT_MSG(bad == 0, "adamw_mixed %s copy: %zu of %zu differ from the new param rounded",
                zeroc_dtype_name(out_dt), bad, n);
  dev_free_all();
  free(p), free(m), free(v), free(g), free(gb), free(ob), free(out), free(np), free(got);
}

static void test_adamw_mixed(void) {
  check_adamw_mixed(1000003, 0, ZEROC_BF16);
  check_adamw_mixed(1000003, 1, ZEROC_BF16); /* unaligned: element path */
  check_adamw_mixed(1000003, 0, ZEROC_FP32);
  check_adamw_mixed(5, 0, ZEROC_BF16);
}

/* ---- a loss head's mean added on the device, read back through pinned memory -------- */

/* mean_add against its cpu twin (the fp32 rounding of the mean is the same, so
 * the sums agree to fp32 rounding at worst), accumulated over three calls as
 * micro-steps do; then zeroc__read_back: pinned staging, the polled event
 * wait, and later work on the stream not waited for. */
static void check_mean_add(size_t n, size_t off) {
  float *x = host_rand(ZEROC_FP32, n, 90, 0, 12);
  float *dx = dev_from(ZEROC_FP32, x, n, off);
  double *acc = dev_alloc(ZEROC_FP64, 2, 0), want = 0.75, init[2] = {0.75, -1};
  ZT_OK(zeroc_memcpy_async(st, acc, init, sizeof init));
  ZT_OK(zeroc_stream_sync(st));
  const double denom[3] = {(double)n, 4.0 * (double)n, 3.0};
  for (int c = 0; c < 3; c++) {
    ZT_OK(zeroc_k_mean_add(kf, st, acc, dx, n, denom[c]));
    want += zeroc__cpu_mean(x, n, denom[c]);
  }
  const zeroc__devmem_t *h = zeroc__ctx_devmem(ctx);
  double *pinned = NULL, got[2] = {0, 0};
  zeroc_event_t *ev = NULL;
  ZT_OK(zeroc__readback_alloc(h, ZEROC_TAG_WORKSPACE, sizeof got, (void **)&pinned));
  ZT_ASSERT_MSG(pinned != NULL, "no pinned read-back buffer on the cuda device");
  ZT_OK(zeroc_event_create(ctx, &ev));
  ZT_OK(zeroc__read_back(st, ev, pinned, got, acc, sizeof got));
  ZT_ASSERT_MSG(fabs(got[0] - want) <= 1e-6 * fabs(want), "mean_add %.17g, cpu %.17g (n %zu)",
                got[0], want, n);
  ZT_ASSERT_MSG(got[1] == -1, "mean_add wrote past its one double: %g", got[1]);
  /* n = 0 adds (float)0 and NaN propagates, as on the cpu */
  ZT_OK(zeroc_k_mean_add(kf, st, acc, dx, 0, 1.0));
  ZT_OK(zeroc__read_back(st, ev, pinned, got, acc, sizeof got[0]));
  ZT_ASSERT_MSG(fabs(got[0] - want) <= 1e-6 * fabs(want), "mean_add of nothing changed the sum");
  x[n / 2] = NAN;
  dev_put(ZEROC_FP32, dx, x, n);
  ZT_OK(zeroc_k_mean_add(kf, st, acc, dx, n, 1.0));
  ZT_OK(zeroc__read_back(st, ev, pinned, got, acc, sizeof got[0]));
  ZT_ASSERT_MSG(isnan(got[0]), "mean_add over a NaN gave %g", got[0]);
  zeroc_result_t r = zeroc_k_mean_add(kf, st, acc, dx, n, 0.0);
  ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG, "mean_add with denominator 0 -> %s", zeroc_result_name(r));
  zeroc_event_destroy(ev);
  zeroc_mem_free(ctx, pinned);
  free(x);
  dev_free_all();
}

static void test_mean_add(void) {
  check_mean_add(16384, 0);
  check_mean_add(16384, 1);
  check_mean_add(1000003, 0);
  check_mean_add(7, 0);
}

/* ---- the step's verdict on the device ------------------------------------------------ */

/* clip_scale on the GPU gives the host formula's bits (kernels/clip.h), and adamw reading
 * a NaN multiplier from device memory leaves param, m and v as they were */
static void test_clip_scale(void) {
  const double sums[] = {0, 0.25, 4, 1e30, INFINITY, NAN};
  double *ds = dev_alloc(ZEROC_FP32, 2, 0); /* 8 bytes: one double */
  float *dsc = dev_alloc(ZEROC_FP32, 1, 0), got;
  for (size_t i = 0; i < sizeof sums / sizeof *sums; i++)
    for (int c = 0; c < 2; c++) {
      const float clip = c ? 1.0f : 0.0f, want = zeroc_i_clip_scale(sums[i], clip);
      ZT_OK(zeroc_memcpy_async(st, ds, &sums[i], sizeof(double)));
      ZT_OK(zeroc_k_clip_scale(kf, st, dsc, ds, clip));
      ZT_OK(zeroc_memcpy_async(st, &got, dsc, sizeof got));
      ZT_OK(zeroc_stream_sync(st));
      ZT_ASSERT_MSG(isnan(want) ? isnan(got) : got == want,
                    "clip_scale of %g, clip %g: %.9g on the GPU, %.9g on the host", sums[i], clip,
                    got, want);
    }
  const size_t n = 4099;
  float *p = host_rand(ZEROC_FP32, n, 87, -1, 1), *g = host_rand(ZEROC_FP32, n, 88, -1, 1);
  float *dp = dev_from(ZEROC_FP32, p, n, 0), *dm = dev_from(ZEROC_FP32, p, n, 0);
  float *dv = dev_from(ZEROC_FP32, p, n, 0), *back = malloc(n * sizeof *back);
  ZT_OK(zeroc_memcpy_async(st, ds, &sums[4], sizeof(double))); /* Inf: NaN multiplier */
  ZT_OK(zeroc_k_clip_scale(kf, st, dsc, ds, 1.0f));
  zeroc_adamw_args_t ar = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.19f, 0.0975f, dsc};
  ZT_OK(zeroc_k_adamw(kf, st, dp, dm, dv, dev_from(ZEROC_FP32, g, n, 0), n, &ar));
  for (int t = 0; t < 3; t++) {
    dev_get(ZEROC_FP32, back, t == 0 ? dp : t == 1 ? dm : dv, n);
    ZT_ASSERT_MSG(!memcmp(back, p, n * sizeof *back), "adamw with a NaN multiplier wrote");
  }
  free(p), free(g), free(back);
  dev_free_all();
}

/* ---- main --------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"cast, accumulate, scale, sumsq, adamw", test_engine},
      {"adamw_mixed: bf16 gradient in, compute copy out", test_adamw_mixed},
      {"loss mean on the device, pinned read-back", test_mean_add},
      {"clip multiplier on the device, adamw skipping on NaN", test_clip_scale},
      ZT_END,
  };
  return kc_main(argc, argv, "kernels_cuda_engine", tests);
}
