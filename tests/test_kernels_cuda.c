/*
 * tests/test_kernels_cuda.c - every cuda kernel against its cpu twin on the same random
 * inputs, forward and backward, with fp32 and bf16 activations; finite differences for
 * the attention and layernorm gradients; repeat runs of the deterministic reductions;
 * bad shapes. Exits 77 (skipped) when no GPU is visible.
 *
 * Tolerances (relative, over the whole tensor): fp32 1e-5 (exact-fp32 GEMMs; only the
 * order of the sums differs from the cpu), bf16 1e-2 (outputs rounded to bf16, about
 * 2e-3 each). The engine kernels (cast, accumulate, adamw, the loss mean) are in
 * test_kernels_cuda_engine.c, the helpers in kernels_cuda_test.h.
 */
#include "kernels/attention_cudnn.h"
#include "kernels_cuda_test.h"

/* fp32 GEMMs on TF32 tensor cores (ZEROC_CUDA_TF32=1) keep 10 mantissa bits: about 1e-3. */
static double tol_gemm(zeroc_dtype_t dt) {
  const char *tf32 = getenv("ZEROC_CUDA_TF32");
  return dt == ZEROC_FP32 && tf32 && atoi(tf32) ? 3e-3 : tol(dt);
}

/* ---- encoder ------------------------------------------------------------------------ */

static void check_encoder(zeroc_dtype_t dt, int B, int T, int C, int V) {
  zeroc_kernels_t *k = kern(dt);
  const size_t N = (size_t)B * T;
  int32_t *tok = malloc(N * sizeof *tok);
  uint64_t rs = 99;
  for (size_t i = 0; i < N; i++) tok[i] = (int32_t)(zt_rand_u64(&rs) % (uint64_t)V);
  float *wte = host_rand(dt, (size_t)V * C, 1, -1, 1),
        *wpe = host_rand(dt, (size_t)T * C, 2, -1, 1);
  int32_t *dtok = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof *tok,
                        (void **)&dtok));
  ZT_OK(zeroc_memcpy_async(st, dtok, tok, N * sizeof *tok));
  void *out = dev_alloc(dt, N * C, 0);
  ZT_OK(zeroc_k_encoder_forward(k, st, out, dtok, dev_from(dt, wte, (size_t)V * C, 0),
                                dev_from(dt, wpe, (size_t)T * C, 0), B, T, C));
  float *ref = malloc(N * C * sizeof(float));
  zeroc__cpu_encoder_forward(ref, tok, wte, wpe, B, T, C);
  expect_close("encoder_forward", dt, out, ref, N * C, tol(dt));

  float *dout = host_rand(dt, N * C, 3, -1, 1);
  float *dwte = host_rand(dt, (size_t)V * C, 4, -1, 1),
        *dwpe = host_rand(dt, (size_t)T * C, 5, -1, 1);
  void *d_dwte = dev_from(dt, dwte, (size_t)V * C, 0),
       *d_dwpe = dev_from(dt, dwpe, (size_t)T * C, 0);
  void *d_dout = dev_from(dt, dout, N * C, 0);
  ZT_OK(zeroc_k_encoder_backward(k, st, d_dwte, d_dwpe, d_dout, dtok, B, T, C));
  zeroc__cpu_encoder_backward(dwte, dwpe, dout, tok, B, T, C);
  expect_close("encoder_backward dwte", dt, d_dwte, dwte, (size_t)V * C, tol(dt));
  expect_close("encoder_backward dwpe", dt, d_dwpe, dwpe, (size_t)T * C, tol(dt));

  /* deterministic: the same inputs give the same bits */
  float *again = host_rand(dt, (size_t)V * C, 4, -1, 1);
  float *first = malloc((size_t)V * C * sizeof(float)),
        *second = malloc((size_t)V * C * sizeof(float));
  dev_get(dt, first, d_dwte, (size_t)V * C);
  dev_put(dt, d_dwte, again, (size_t)V * C);
  ZT_OK(zeroc_k_encoder_backward(k, st, d_dwte, d_dwpe, d_dout, dtok, B, T, C));
  dev_get(dt, second, d_dwte, (size_t)V * C);
  ZT_ASSERT_MSG(!memcmp(first, second, (size_t)V * C * sizeof(float)),
                "encoder_backward (%s): two runs differ", zeroc_dtype_name(dt));
  zeroc_mem_free(ctx, dtok);
  dev_free_all();
  free(tok), free(wte), free(wpe), free(ref), free(dout), free(dwte), free(dwpe), free(again);
  free(first), free(second);
}

static void test_encoder(void) {
  for (int i = 0; i < 2; i++) {
    check_encoder(DTYPES[i], 4, 64, 96, 50); /* vector path; tokens repeat */
    check_encoder(DTYPES[i], 3, 17, 20, 5);  /* C % 8 != 0: element path */
  }
}

/* ---- layernorm ---------------------------------------------------------------------- */

static void check_layernorm(zeroc_dtype_t dt, int N, int C) {
  zeroc_kernels_t *k = kern(dt);
  const size_t n = (size_t)N * C;
  float *x = host_rand(dt, n, 10, -2, 3), *w = host_rand(dt, C, 11, 0.5f, 1.5f),
        *b = host_rand(dt, C, 12, -1, 1);
  void *dx = dev_from(dt, x, n, 0), *dw = dev_from(dt, w, C, 0), *db = dev_from(dt, b, C, 0);
  void *out = dev_alloc(dt, n, 0);
  float *mean = dev_alloc(ZEROC_FP32, N, 0), *rstd = dev_alloc(ZEROC_FP32, N, 0);
  ZT_OK(zeroc_k_layernorm_forward(k, st, out, mean, rstd, dx, dw, db, N, C));
  float *ref = malloc(n * sizeof(float)), *rm = malloc(N * sizeof(float)),
        *rr = malloc(N * sizeof(float));
  zeroc__cpu_layernorm_forward(ref, rm, rr, x, w, b, N, C);
  expect_close("layernorm_forward out", dt, out, ref, n, tol(dt));
  expect_close("layernorm_forward mean", ZEROC_FP32, mean, rm, N, TOL_FP32);
  expect_close("layernorm_forward rstd", ZEROC_FP32, rstd, rr, N, TOL_FP32);

  float *dout = host_rand(dt, n, 13, -1, 1), *dinp = host_rand(dt, n, 14, -1, 1);
  float *dwt = host_rand(dt, C, 15, -1, 1), *dbs = host_rand(dt, C, 16, -1, 1);
  void *d_dinp = dev_from(dt, dinp, n, 0), *d_dw = dev_from(dt, dwt, C, 0),
       *d_db = dev_from(dt, dbs, C, 0);
  void *d_dout = dev_from(dt, dout, n, 0);
  /* both sides use the cpu statistics, so the backward is checked on its own */
  float *d_rm = dev_from(ZEROC_FP32, rm, N, 0), *d_rr = dev_from(ZEROC_FP32, rr, N, 0);
  ZT_OK(zeroc_k_layernorm_backward(k, st, d_dinp, d_dw, d_db, d_dout, dx, dw, d_rm, d_rr, N, C));
  zeroc__cpu_layernorm_backward(dinp, dwt, dbs, dout, x, w, rm, rr, N, C, dinp);
  expect_close("layernorm_backward dinp", dt, d_dinp, dinp, n, tol(dt));
  expect_close("layernorm_backward dweight", dt, d_dw, dwt, C, tol(dt));
  expect_close("layernorm_backward dbias", dt, d_db, dbs, C, tol(dt));

  /* deterministic dweight/dbias */
  float *a = malloc(C * sizeof(float)), *a2 = malloc(C * sizeof(float));
  float *z = calloc(C, sizeof(float));
  dev_put(dt, d_dw, z, C);
  ZT_OK(zeroc_k_layernorm_backward(k, st, d_dinp, d_dw, d_db, d_dout, dx, dw, d_rm, d_rr, N, C));
  dev_get(dt, a, d_dw, C);
  dev_put(dt, d_dw, z, C);
  ZT_OK(zeroc_k_layernorm_backward(k, st, d_dinp, d_dw, d_db, d_dout, dx, dw, d_rm, d_rr, N, C));
  dev_get(dt, a2, d_dw, C);
  ZT_ASSERT_MSG(!memcmp(a, a2, C * sizeof(float)), "layernorm_backward (%s): two runs differ",
                zeroc_dtype_name(dt));
  dev_free_all();
  free(x), free(w), free(b), free(ref), free(rm), free(rr), free(dout), free(dinp), free(dwt);
  free(dbs), free(a), free(a2), free(z);
}

/* The fused forms: residual_layernorm_forward against its cpu twin and, bit for bit,
 * against add + layernorm_forward on the device; layernorm_backward_ex set with dres apart
 * and NULL against the cpu twin and, bit for bit, against a copy (or a memset) of dres +
 * layernorm_backward on the device. */
static void check_layernorm_fused(zeroc_dtype_t dt, int N, int C) {
  zeroc_kernels_t *k = kern(dt);
  const size_t n = (size_t)N * C, es = zeroc_dtype_size(dt);
  float *a = host_rand(dt, n, 30, -1, 1), *b = host_rand(dt, n, 31, -2, 3);
  float *w = host_rand(dt, C, 32, 0.5f, 1.5f), *bs = host_rand(dt, C, 33, -1, 1);
  void *da = dev_from(dt, a, n, 0), *db = dev_from(dt, b, n, 0), *dw = dev_from(dt, w, C, 0);
  void *dbs = dev_from(dt, bs, C, 0), *res = dev_alloc(dt, n, 0), *out = dev_alloc(dt, n, 0);
  void *out0 = dev_alloc(dt, n, 0), *res0 = dev_from(dt, a, n, 0);
  float *mean = dev_alloc(ZEROC_FP32, N, 0), *rstd = dev_alloc(ZEROC_FP32, N, 0);
  float *m0 = dev_alloc(ZEROC_FP32, N, 0), *r0 = dev_alloc(ZEROC_FP32, N, 0);
  ZT_OK(zeroc_k_residual_layernorm_forward(k, st, res, out, mean, rstd, da, db, dw, dbs, N, C));
  ZT_OK(zeroc_k_add(k, st, res0, db, n));
  ZT_OK(zeroc_k_layernorm_forward(k, st, out0, m0, r0, res0, dw, dbs, N, C));
  float *rr = malloc(n * sizeof(float)), *ro = malloc(n * sizeof(float));
  float *rm = malloc(N * sizeof(float)), *rs = malloc(N * sizeof(float));
  zeroc__cpu_residual_layernorm_forward(rr, ro, rm, rs, a, b, w, bs, N, C);
  expect_close("residual_layernorm_forward res", dt, res, rr, n, tol(dt));
  expect_close("residual_layernorm_forward out", dt, out, ro, n, tol(dt));
  /* in bf16 the device's res is rounded, the cpu's not: the statistics differ as much */
  expect_close("residual_layernorm_forward mean", ZEROC_FP32, mean, rm, N, tol(dt));
  expect_close("residual_layernorm_forward rstd", ZEROC_FP32, rstd, rs, N, tol(dt));
  void *h = malloc(2 * n * es);
  const struct {
    const void *got, *want;
    size_t bytes;
  } same[] = {{res, res0, n * es}, {out, out0, n * es}, {mean, m0, N * 4}, {rstd, r0, N * 4}};
  for (int i = 0; i < 4; i++) {
    ZT_OK(zeroc_memcpy_async(st, h, same[i].got, same[i].bytes));
    ZT_OK(zeroc_memcpy_async(st, (char *)h + n * es, same[i].want, same[i].bytes));
    ZT_OK(zeroc_stream_sync(st));
    ZT_ASSERT_MSG(!memcmp(h, (char *)h + n * es, same[i].bytes),
                  "residual_layernorm_forward (%s) N%d C%d: output %d differs from add + "
                  "layernorm_forward",
                  zeroc_dtype_name(dt), N, C, i);
  }

  /* the backward on the fp32 statistics of the device's res0 (as in the model) */
  float *dout = host_rand(dt, n, 34, -1, 1), *dres = host_rand(dt, n, 35, -1, 1);
  float *x = malloc(n * sizeof(float)), *gw = calloc(C, sizeof(float));
  float *gb = calloc(C, sizeof(float)), *hm = malloc(N * 4), *hs = malloc(N * 4);
  dev_get(dt, x, res0, n);
  dev_get(ZEROC_FP32, hm, m0, N);
  dev_get(ZEROC_FP32, hs, r0, N);
  void *d_dout = dev_from(dt, dout, n, 0), *d_dres = dev_from(dt, dres, n, 0);
  void *gwd = dev_from(dt, gw, C, 0), *gbd = dev_from(dt, gb, C, 0);
  void *dx = dev_alloc(dt, n, 0), *dx0 = dev_alloc(dt, n, 0);
  for (int null = 0; null < 2; null++) {
    float *want = null ? calloc(n, sizeof(float)) : host_copy(dres, n);
    zeroc__cpu_layernorm_backward(want, gw, gb, dout, x, w, hm, hs, N, C, want);
    ZT_OK(zeroc_k_layernorm_backward_ex(k, st, dx, gwd, gbd, d_dout, res0, dw, m0, r0, N, C,
                                        null ? NULL : d_dres, ZEROC_K_DINP_SET));
    expect_close("layernorm_backward_ex dinp", dt, dx, want, n, tol(dt));
    if (null)
      ZT_OK(zeroc_memset_async(st, dx0, 0, n * es));
    else
      ZT_OK(zeroc_memcpy_async(st, dx0, d_dres, n * es));
    ZT_OK(zeroc_k_layernorm_backward(k, st, dx0, gwd, gbd, d_dout, res0, dw, m0, r0, N, C));
    ZT_OK(zeroc_memcpy_async(st, h, dx, n * es));
    ZT_OK(zeroc_memcpy_async(st, (char *)h + n * es, dx0, n * es));
    ZT_OK(zeroc_stream_sync(st));
    ZT_ASSERT_MSG(!memcmp(h, (char *)h + n * es, n * es),
                  "layernorm_backward_ex (%s, dres %s) N%d C%d differs from %s + "
                  "layernorm_backward",
                  zeroc_dtype_name(dt), null ? "NULL" : "apart", N, C, null ? "memset" : "copy");
    free(want);
  }
  dev_free_all();
  free(a), free(b), free(w), free(bs), free(rr), free(ro), free(rm), free(rs), free(h);
  free(dout), free(dres), free(x), free(gw), free(gb), free(hm), free(hs);
}

static void test_layernorm(void) {
  for (int i = 0; i < 2; i++) {
    check_layernorm(DTYPES[i], 257, 768);
    check_layernorm(DTYPES[i], 33, 100); /* element path */
    /* the fused forms on the register-row kernels, a ragged row and the loop kernels */
    check_layernorm_fused(DTYPES[i], 257, 768);
    check_layernorm_fused(DTYPES[i], 33, 100);
    check_layernorm_fused(DTYPES[i], 9, 2056);
  }
}

/* d/dx of L = sum(out * R) against central differences, fp32, at a few inputs. */
static void test_layernorm_finite_differences(void) {
  const int N = 8, C = 64;
  const size_t n = (size_t)N * C;
  float *x = host_rand(ZEROC_FP32, n, 20, -2, 2), *w = host_rand(ZEROC_FP32, C, 21, 0.5f, 1.5f);
  float *b = host_rand(ZEROC_FP32, C, 22, -1, 1), *R = host_rand(ZEROC_FP32, n, 23, -1, 1);
  float *out = malloc(n * sizeof(float)), *g = calloc(n, sizeof(float));
  float *gw = calloc(C, sizeof(float)), *gb = calloc(C, sizeof(float));
  void *dx = dev_from(ZEROC_FP32, x, n, 0), *dw = dev_from(ZEROC_FP32, w, C, 0);
  void *db = dev_from(ZEROC_FP32, b, C, 0), *dout = dev_alloc(ZEROC_FP32, n, 0);
  float *mean = dev_alloc(ZEROC_FP32, N, 0), *rstd = dev_alloc(ZEROC_FP32, N, 0);
  void *dgx = dev_from(ZEROC_FP32, g, n, 0), *dgw = dev_from(ZEROC_FP32, gw, C, 0);
  void *dgb = dev_from(ZEROC_FP32, gb, C, 0);
  ZT_OK(zeroc_k_layernorm_forward(kf, st, dout, mean, rstd, dx, dw, db, N, C));
  ZT_OK(zeroc_k_layernorm_backward(kf, st, dgx, dgw, dgb, dev_from(ZEROC_FP32, R, n, 0), dx, dw,
                                   mean, rstd, N, C));
  dev_get(ZEROC_FP32, g, dgx, n);
  const float eps = 1e-2f;
  for (int s = 0; s < 12; s++) {
    size_t i = (size_t)s * 41 % n;
    double L[2];
    for (int side = 0; side < 2; side++) {
      float *xp = host_copy(x, n);
      xp[i] += side ? -eps : eps;
      dev_put(ZEROC_FP32, dx, xp, n);
      ZT_OK(zeroc_k_layernorm_forward(kf, st, dout, mean, rstd, dx, dw, db, N, C));
      dev_get(ZEROC_FP32, out, dout, n);
      L[side] = 0;
      for (size_t j = 0; j < n; j++) L[side] += (double)out[j] * R[j];
      free(xp);
    }
    double fd = (L[0] - L[1]) / (2 * eps);
    ZT_ASSERT_MSG(fabs(fd - g[i]) <= 2e-3 + 1e-2 * fabs(fd),
                  "layernorm d/dx[%zu]: backward %.6g, finite difference %.6g", i, g[i], fd);
  }
  dev_free_all();
  free(x), free(w), free(b), free(R), free(out), free(g), free(gw), free(gb);
}

/* ---- matmul ------------------------------------------------------------------------- */

static void check_matmul(zeroc_dtype_t dt, int N, int C, int OC, int with_bias, size_t off) {
  zeroc_kernels_t *k = kern(dt);
  float *x = host_rand(dt, (size_t)N * C, 30, -1, 1), *w = host_rand(dt, (size_t)OC * C, 31, -1, 1);
  float *b = host_rand(dt, OC, 32, -1, 1);
  void *dx = dev_from(dt, x, (size_t)N * C, off), *dw = dev_from(dt, w, (size_t)OC * C, off);
  void *db = with_bias ? dev_from(dt, b, OC, off) : NULL;
  void *out = dev_alloc(dt, (size_t)N * OC, off);
  ZT_OK(zeroc_k_matmul_forward(k, st, out, dx, dw, db, N, C, OC));
  float *ref = malloc((size_t)N * OC * sizeof(float));
  zeroc__cpu_matmul_forward(ref, x, w, with_bias ? b : NULL, N, C, OC);
  expect_close("matmul_forward", dt, out, ref, (size_t)N * OC, tol_gemm(dt));

  float *dout = host_rand(dt, (size_t)N * OC, 33, -1, 1),
        *dinp = host_rand(dt, (size_t)N * C, 34, -1, 1);
  float *dwt = host_rand(dt, (size_t)OC * C, 35, -1, 1), *dbs = host_rand(dt, OC, 36, -1, 1);
  void *d_dinp = dev_from(dt, dinp, (size_t)N * C, off),
       *d_dw = dev_from(dt, dwt, (size_t)OC * C, off);
  void *d_db = dev_from(dt, dbs, OC, off), *d_dout = dev_from(dt, dout, (size_t)N * OC, off);
  ZT_OK(zeroc_k_matmul_backward(k, st, d_dinp, d_dw, with_bias ? d_db : NULL, d_dout, dx, dw, N, C,
                                OC));
  float *dbs0 = host_copy(dbs, OC);
  zeroc__cpu_matmul_backward(dinp, dwt, with_bias ? dbs : NULL, dout, x, w, N, C, OC);
  expect_close("matmul_backward dinp", dt, d_dinp, dinp, (size_t)N * C, tol_gemm(dt));
  expect_close("matmul_backward dweight", dt, d_dw, dwt, (size_t)OC * C, tol_gemm(dt));
  expect_close("matmul_backward dbias", dt, d_db, with_bias ? dbs : dbs0, OC,
               with_bias ? tol_gemm(dt) : 0);
  dev_free_all();
  free(x), free(w), free(b), free(ref), free(dout), free(dinp), free(dwt), free(dbs), free(dbs0);
}

static void test_matmul(void) {
  for (int i = 0; i < 2; i++) {
    check_matmul(DTYPES[i], 257, 96, 200, 1, 0);
    check_matmul(DTYPES[i], 64, 768, 2304, 0, 0);
    check_matmul(DTYPES[i], 33, 40, 24, 1, 8); /* 16-byte (not 256-byte) aligned views */
  }
}

/* The fused linear + GELU paths against their cpu twins: cuBLASLt's GELU_AUX_BIAS,
 * DGELU_BGRAD and BGRADB epilogues where it has an algorithm, the kernels otherwise (or
 * everywhere with ZEROC_CUDA_LT_EPILOGUE=0). GELU goes into the epilogue for bf16 only,
 * unless ZEROC_CUDA_LT_EPILOGUE=2: then the fp32 rows check cuBLASLt's GELU against the
 * cpu's tanh GELU at 1e-5, where an erf GELU would fail. pre (N,C) = x w^T + b and out =
 * gelu(pre); then the next layer's backward (w2 (OC,C), input out) straight to dpre =
 * gelu'(pre) * (dout w2) (written over NaN: ZEROC_K_DINP_SET), dpre_bias += its column
 * sums, dweight +=, dbias +=. The backward runs twice: the bias gradients must repeat bit
 * for bit (the determinism the ZeRO stages promise). */
static void check_matmul_fused(zeroc_dtype_t dt, int N, int K0, int C, int OC, size_t off) {
  zeroc_kernels_t *k = kern(dt);
  const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
  float *x = host_rand(dt, (size_t)N * K0, 90, -1, 1);
  float *w = host_rand(dt, (size_t)C * K0, 91, -1, 1);
  float *b = host_rand(dt, C, 92, -1, 1);
  void *dpre = dev_alloc(dt, NC, off), *dout_ = dev_alloc(dt, NC, off);
  ZT_OK(zeroc_k_matmul_forward_gelu(k, st, dpre, dout_, dev_from(dt, x, (size_t)N * K0, off),
                                    dev_from(dt, w, (size_t)C * K0, off), dev_from(dt, b, C, off),
                                    N, K0, C));
  float *pre = malloc(NC * sizeof(float)), *act = malloc(NC * sizeof(float));
  zeroc__cpu_matmul_forward(pre, x, w, b, N, K0, C);
  zeroc__cpu_gelu_forward(act, pre, NC);
  expect_close("matmul_forward_gelu pre", dt, dpre, pre, NC, tol_gemm(dt));
  expect_close("matmul_forward_gelu out", dt, dout_, act, NC, tol_gemm(dt));
  /* the backward from the device's own pre and out, so both sides see the same inputs */
  dev_get(dt, pre, dpre, NC);
  dev_get(dt, act, dout_, NC);
  float *w2 = host_rand(dt, OCC, 93, -1, 1), *g = host_rand(dt, NO, 94, -1, 1);
  float *dw = host_rand(dt, OCC, 95, -1, 1), *db = host_rand(dt, OC, 96, -1, 1);
  float *dpb = host_rand(dt, C, 97, -1, 1), *di = malloc(NC * sizeof(float));
  void *pw2 = dev_from(dt, w2, OCC, off), *pg = dev_from(dt, g, NO, off);
  float *got[2][3];
  for (int rep = 0; rep < 2; rep++) {
    void *g_di = dev_alloc(dt, NC, off), *g_w = dev_from(dt, dw, OCC, off);
    void *g_b = dev_from(dt, db, OC, off), *g_pb = dev_from(dt, dpb, C, off);
    ZT_OK(zeroc_k_matmul_backward_ex(k, st, g_di, g_w, g_b, pg, dout_, pw2, N, C, OC, dpre, g_pb,
                                     ZEROC_K_DINP_SET));
    got[rep][0] = malloc(NC * sizeof(float));
    got[rep][1] = malloc(C * sizeof(float));
    got[rep][2] = malloc(OC * sizeof(float));
    dev_get(dt, got[rep][0], g_di, NC);
    dev_get(dt, got[rep][1], g_pb, C);
    dev_get(dt, got[rep][2], g_b, OC);
    if (rep == 0) { /* the cpu accumulates into copies: the repeat starts from dw, db, dpb */
      float *rw = host_copy(dw, OCC), *rb = host_copy(db, OC), *rpb = host_copy(dpb, C);
      zeroc__cpu_matmul_backward_ex(di, rw, rb, g, act, w2, N, C, OC, pre, rpb, 1);
      expect_close("matmul_backward_ex dgelu", dt, g_di, di, NC, tol_gemm(dt));
      /* dpre_bias is the column sum of the dgelu the device wrote (in bf16, rounded): sum
       * that, as the backward above takes the device's own pre and out. Against the cpu's
       * sum of its fp32 dgelu, 33 rows of bf16 rounding came to 1.01e-2 on an H200. */
      for (int c = 0; c < C; c++) {
        double sum = dpb[c];
        for (int r = 0; r < N; r++) sum += got[rep][0][(size_t)r * C + c];
        rpb[c] = (float)sum;
      }
      expect_close("matmul_backward_ex dpre_bias", dt, g_pb, rpb, C, tol_gemm(dt));
      expect_close("matmul_backward_ex dweight", dt, g_w, rw, OCC, tol_gemm(dt));
      expect_close("matmul_backward_ex dbias", dt, g_b, rb, OC, tol_gemm(dt));
      free(rw), free(rb), free(rpb);
    }
  }
  ZT_ASSERT_MSG(!memcmp(got[0][0], got[1][0], NC * sizeof(float)) &&
                    !memcmp(got[0][1], got[1][1], C * sizeof(float)) &&
                    !memcmp(got[0][2], got[1][2], OC * sizeof(float)),
                "matmul_backward_ex (%s, C %d): a repeat differs (not deterministic)",
                zeroc_dtype_name(dt), C);
  /* ZEROC_K_DINP_SET alone: NaN before, the product after */
  void *ds = dev_alloc(dt, NC, off);
  ZT_OK(zeroc_k_matmul_backward_ex(k, st, ds, NULL, NULL, pg, dout_, pw2, N, C, OC, NULL, NULL,
                                   ZEROC_K_DINP_SET));
  for (size_t i = 0; i < NC; i++) di[i] = NAN; /* cblas beta 0 reads nothing */
  float *dw0 = host_copy(dw, OCC);
  zeroc__cpu_matmul_backward_ex(di, dw0, NULL, g, act, w2, N, C, OC, NULL, NULL, 1);
  expect_close("matmul_backward_ex set", dt, ds, di, NC, tol_gemm(dt));
  dev_free_all();
  for (int rep = 0; rep < 2; rep++) free(got[rep][0]), free(got[rep][1]), free(got[rep][2]);
  free(x), free(w), free(b), free(pre), free(act), free(w2), free(g), free(dw), free(db);
  free(dpb), free(di), free(dw0);
}

static void test_matmul_fused(void) {
  for (int i = 0; i < 2; i++) {
    check_matmul_fused(DTYPES[i], 257, 96, 384, 96, 0);   /* the MLP's shape, scaled down */
    check_matmul_fused(DTYPES[i], 64, 768, 3072, 768, 0); /* GPT-2's MLP on 64 tokens */
    check_matmul_fused(DTYPES[i], 33, 40, 24, 16, 8);     /* 16-byte aligned views */
    check_matmul_fused(DTYPES[i], 9, 8, 20, 8, 0);        /* C % 8 != 0: the kernels */
  }
}

/* ---- attention ---------------------------------------------------------------------- */

/* dp: dropout on the probabilities (the cpu twin draws the same mask), or NULL */
static void check_attention_drop(zeroc_dtype_t dt, int B, int T, int NH, int HS,
                                 const zeroc_dropout_t *dp) {
  zeroc_kernels_t *k = kern(dt);
  const int C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
  float *qkv = host_rand(dt, nq, 40, -1.5f, 1.5f);
  void *dqkv_in = dev_from(dt, qkv, nq, 0), *out = dev_alloc(dt, no, 0);
  float *lse = dev_alloc(ZEROC_FP32, nl, 0);
  ZT_OK(zeroc_k_attention_forward(k, st, out, lse, dqkv_in, B, T, C, NH, dp));
  float *ro = malloc(no * sizeof(float)), *rl = malloc(nl * sizeof(float));
  zeroc__cpu_attention_forward(ro, rl, qkv, B, T, C, NH, dp);
  expect_close("attention_forward out", dt, out, ro, no, tol(dt));
  expect_close("attention_forward lse", ZEROC_FP32, lse, rl, nl, TOL_FP32);

  float *dout = host_rand(dt, no, 41, -1, 1), *dqkv = host_rand(dt, nq, 42, -0.1f, 0.1f);
  void *d_dqkv = dev_from(dt, dqkv, nq, 0);
  ZT_OK(zeroc_k_attention_backward(k, st, d_dqkv, dev_from(dt, dout, no, 0), dqkv_in, out, lse, B,
                                   T, C, NH, dp));
  zeroc__cpu_attention_backward(dqkv, dout, qkv, ro, rl, B, T, C, NH, dp, 0);
  expect_close("attention_backward dqkv", dt, d_dqkv, dqkv, nq, tol(dt));
  /* ZEROC_K_DQKV_SET: the old contents (here the accumulated result) are not read */
  ZT_OK(zeroc_k_attention_backward_ex(k, st, d_dqkv, dev_from(dt, dout, no, 0), dqkv_in, out, lse,
                                      B, T, C, NH, dp, ZEROC_K_DQKV_SET));
  zeroc__cpu_attention_backward(dqkv, dout, qkv, ro, rl, B, T, C, NH, dp, 1);
  expect_close("attention_backward_ex set dqkv", dt, d_dqkv, dqkv, nq, tol(dt));
  dev_free_all();
  free(qkv), free(ro), free(rl), free(dout), free(dqkv);
}

static void check_attention(zeroc_dtype_t dt, int B, int T, int NH, int HS) {
  check_attention_drop(dt, B, T, NH, HS, NULL);
}

static void test_attention(void) {
#ifdef ZEROC_HAVE_CUDA
  zeroc__cudnn_attention_set_mode(kb, ZEROC__CUDNN_OFF); /* zeroc's kernels, not cuDNN's */
#endif
  /* dropout: heads 2.. of 8 as a tp rank holds them, positions on a longer context */
  zeroc_dropout_t dp = {0.1f, zeroc_i_dropout_key(3, 5, 2, ZEROC_DROP_ATTN), 9, 0, 200, 256, 8, 2};
  for (int i = 0; i < 2; i++) {
    check_attention_drop(DTYPES[i], 2, 200, 3, 64, &dp);
    check_attention(DTYPES[i], 2, 200, 3, 64); /* GPT-2 head size, T not a tile multiple */
    check_attention(DTYPES[i], 1, 77, 2, 128); /* the largest head */
    check_attention(DTYPES[i], 2, 65, 4, 20);  /* HS % 8 != 0: element loads */
    check_attention(DTYPES[i], 1, 1, 1, 32);   /* one token */
  }
}

/* The tensor-core kernels (attention_mma.cu: bf16, head 64 or 128) at training lengths,
 * against the cpu kernels on the same bf16 inputs; the gradient starts at 0 so all of it
 * is held to 1e-2, and the backward runs twice, bit for bit (no atomics: deterministic). */
static void check_attention_mma(int B, int T, int NH, int HS) {
  const zeroc_dtype_t dt = ZEROC_BF16;
  zeroc_kernels_t *k = kern(dt);
  const int C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
  float *qkv = host_rand(dt, nq, 43, -1.5f, 1.5f), *dout = host_rand(dt, no, 44, -1, 1);
  float *ro = malloc(no * sizeof(float)), *rl = malloc(nl * sizeof(float));
  float *g = calloc(nq, sizeof(float)), *h1 = malloc(nq * sizeof(float)),
        *h2 = malloc(nq * sizeof(float));
  void *d_qkv = dev_from(dt, qkv, nq, 0), *out = dev_alloc(dt, no, 0), *d_dout = dev_from(dt, dout, no, 0);
  void *g1 = dev_from(dt, g, nq, 0), *g2 = dev_from(dt, g, nq, 0);
  float *lse = dev_alloc(ZEROC_FP32, nl, 0);
  ZT_OK(zeroc_k_attention_forward(k, st, out, lse, d_qkv, B, T, C, NH, NULL));
  zeroc__cpu_attention_forward(ro, rl, qkv, B, T, C, NH, NULL);
  expect_close("attention_forward out (tensor cores)", dt, out, ro, no, TOL_BF16);
  expect_close("attention_forward lse (tensor cores)", ZEROC_FP32, lse, rl, nl, TOL_FP32);
  ZT_OK(zeroc_k_attention_backward(k, st, g1, d_dout, d_qkv, out, lse, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_backward(k, st, g2, d_dout, d_qkv, out, lse, B, T, C, NH, NULL));
  zeroc__cpu_attention_backward(g, dout, qkv, ro, rl, B, T, C, NH, NULL, 0);
  expect_close("attention_backward dqkv (tensor cores)", dt, g1, g, nq, TOL_BF16);
  dev_get(dt, h1, g1, nq);
  dev_get(dt, h2, g2, nq);
  ZT_ASSERT_MSG(!memcmp(h1, h2, nq * sizeof(float)), "attention_backward (T %d, HS %d): two runs differ", T, HS);
  dev_free_all();
  free(qkv), free(dout), free(ro), free(rl), free(g), free(h1), free(h2);
}

static void test_attention_mma(void) {
#ifdef ZEROC_HAVE_CUDA
  zeroc__cudnn_attention_set_mode(kb, ZEROC__CUDNN_OFF); /* zeroc's kernels, not cuDNN's */
#endif
  check_attention_mma(2, 1024, 2, 64);  /* GPT-2's head */
  check_attention_mma(1, 2048, 2, 128); /* the 1.3B model's */
  check_attention_mma(1, 300, 3, 128);  /* T not a tile multiple */
}

#ifdef ZEROC_HAVE_CUDA
/* cuDNN's fused flash attention (attention_cudnn_cuda.c, mode cudnn: it must run) against
 * the cpu kernels on the same bf16 inputs, tolerances as the tensor-core kernels'. dqkv
 * starts as NaN bytes: with ZEROC_K_DQKV_SET nothing may read it. The backward runs fast
 * (the default: fp32 dQ atomics), then deterministic twice, bit for bit; each path's forward
 * feeds the other's backward (both store the natural log-sum-exp of the scaled scores). */
/* The workspace buffer of kb's cuDNN path so far: the largest shape's formula beyond the
 * kernel scratch (zeroc__cudnn_ws, what the planner predicts), nothing more. */
static size_t g_cudnn_own;

static void check_attention_cudnn(int B, int T, int NH, int HS) {
  const zeroc_dtype_t dt = ZEROC_BF16;
  zeroc_kernels_t *k = kb;
  const int C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
  float *qkv = host_rand(dt, nq, 53, -1.5f, 1.5f), *dout = host_rand(dt, no, 54, -1, 1);
  float *ro = malloc(no * sizeof(float)), *rl = malloc(nl * sizeof(float));
  float *g = calloc(nq, sizeof(float)), *h1 = malloc(nq * sizeof(float)),
        *h2 = malloc(nq * sizeof(float));
  void *d_qkv = dev_from(dt, qkv, nq, 0), *d_dout = dev_from(dt, dout, no, 0);
  void *out = dev_alloc(dt, no, 0), *out_z = dev_alloc(dt, no, 0);
  void *g1 = dev_alloc(dt, nq, 0), *g2 = dev_alloc(dt, nq, 0), *g3 = dev_alloc(dt, nq, 0);
  float *lse = dev_alloc(ZEROC_FP32, nl, 0), *lse_z = dev_alloc(ZEROC_FP32, nl, 0);
  int done = 0;
  zeroc__cpu_attention_forward(ro, rl, qkv, B, T, C, NH, NULL);
  zeroc__cpu_attention_backward(g, dout, qkv, ro, rl, B, T, C, NH, NULL, 1);

  zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_REQUIRED);
  ZT_OK(zeroc__cudnn_attention_forward(k, st, out, lse, d_qkv, B, T, C, NH, NULL, &done));
  ZT_ASSERT_MSG(done, "cuDNN attention_forward (B %d T %d NH %d HS %d) did not run", B, T, NH, HS);
  expect_close("attention_forward out (cuDNN)", dt, out, ro, no, TOL_BF16);
  expect_close("attention_forward lse (cuDNN)", ZEROC_FP32, lse, rl, nl, TOL_FP32);
  for (int det = 0; det < 2; det++) { /* fast (the default), then deterministic */
    zeroc_k_set_deterministic(k, det);
    ZT_OK(zeroc__cudnn_attention_backward(k, st, g1, d_dout, d_qkv, out, lse, B, T, C, NH, NULL,
                                          ZEROC_K_DQKV_SET, &done));
    ZT_ASSERT_MSG(done, "cuDNN attention_backward (T %d HS %d det %d) did not run", T, HS, det);
    expect_close(det ? "attention_backward dqkv (cuDNN, deterministic)"
                     : "attention_backward dqkv (cuDNN, fast)",
                 dt, g1, g, nq, TOL_BF16);
    char use[320]; /* the backend reports the graph that ran: no silent fallback */
    zeroc_k_attention_backend(ZEROC_DEVICE_CUDA, ZEROC_BF16, use, sizeof use);
    ZT_ASSERT_MSG(strstr(use, det ? "deterministic backward" : "fast backward"), "%s", use);
    /* its workspace is the formula's (each plan's own request was checked against it when
     * it was built: mode cudnn fails above otherwise) */
    zeroc__cudnn_ws_t w;
    zeroc__cudnn_ws(B, T, C, NH, det, &w);
    size_t own = zeroc__cudnn_ws_own(w.total, zeroc__kernels_scratch_bytes());
    if (own > g_cudnn_own) g_cudnn_own = own;
    ZT_ASSERT_MSG(zeroc__cudnn_attention_ws_bytes(k) == g_cudnn_own,
                  "cuDNN's own workspace (B %d T %d C %d NH %d det %d): %zu bytes, the formula "
                  "%zu (total %zu, scratch %zu)",
                  B, T, C, NH, det, zeroc__cudnn_attention_ws_bytes(k), g_cudnn_own, w.total,
                  zeroc__kernels_scratch_bytes());
  }
  ZT_OK(zeroc__cudnn_attention_backward(k, st, g2, d_dout, d_qkv, out, lse, B, T, C, NH, NULL,
                                        ZEROC_K_DQKV_SET, &done));
  dev_get(dt, h1, g1, nq);
  dev_get(dt, h2, g2, nq);
  ZT_ASSERT_MSG(!memcmp(h1, h2, nq * sizeof(float)),
                "cuDNN deterministic attention_backward (T %d, HS %d): two runs differ", T, HS);
  zeroc_k_set_deterministic(k, 0);

  /* zeroc's forward -> cuDNN's backward, and cuDNN's forward -> zeroc's backward */
  zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_OFF);
  ZT_OK(zeroc_k_attention_forward(k, st, out_z, lse_z, d_qkv, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_backward_ex(k, st, g3, d_dout, d_qkv, out, lse, B, T, C, NH, NULL,
                                      ZEROC_K_DQKV_SET));
  expect_close("cuDNN forward -> zeroc backward dqkv", dt, g3, g, nq, TOL_BF16);
  zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_REQUIRED);
  ZT_OK(zeroc__cudnn_attention_backward(k, st, g3, d_dout, d_qkv, out_z, lse_z, B, T, C, NH, NULL,
                                        ZEROC_K_DQKV_SET, &done));
  expect_close("zeroc forward -> cuDNN backward dqkv", dt, g3, g, nq, TOL_BF16);
  zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_OFF);
  dev_free_all();
  free(qkv), free(dout), free(ro), free(rl), free(g), free(h1), free(h2);
}

static void test_attention_cudnn(void) {
  char path[256];
  long ver = 0;
  if (zeroc__cudnn_probe(path, sizeof path, &ver) != ZEROC_OK) {
    kc_no_cudnn("cuDNN attention", zeroc_last_error(NULL));
    return;
  }
  printf("  cuDNN %ld from %s\n", ver, path);
  check_attention_cudnn(2, 256, 12, 64);   /* GPT-2's head */
  check_attention_cudnn(4, 1024, 12, 64);  /* GPT-2 124M at its training length */
  check_attention_cudnn(1, 2048, 16, 128); /* the 1.3B model's */
  check_attention_cudnn(1, 300, 3, 128);   /* T not a tile multiple */
}
#endif

/* Context parallelism's block pair (q and k/v from different chunks of a packed qkv),
 * its merge into a running (out, lse) and its backward, against the cpu twins. */
static void check_attention_block(zeroc_dtype_t dt, int causal, const zeroc_dropout_t *dp) {
  zeroc_kernels_t *k = kern(dt);
  const int B = 2, c = 37, NH = 3, HS = 64, C = NH * HS, T = 2 * c;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
  const size_t np = (size_t)B * c * C, npl = (size_t)B * NH * c;
  const int kc = causal ? 1 : 0;
  zeroc_attn_block_t a = {.B = B, .NH = NH, .HS = HS, .Tq = c, .Tk = c, .causal = causal,
                          .q_t = 3 * (size_t)C, .q_b = (size_t)T * 3 * C, .kv_t = 3 * (size_t)C,
                          .kv_b = (size_t)T * 3 * C, .o_t = (size_t)C, .o_b = (size_t)T * C,
                          .l_h = (size_t)T, .l_b = (size_t)NH * T, .q_pos = c, .k_pos = kc * c};
  float *qkv = host_rand(dt, nq, 50, -1.5f, 1.5f), *o = host_rand(dt, no, 51, -1, 1);
  float *l = host_rand(ZEROC_FP32, nl, 52, -1, 1), *dout = host_rand(dt, no, 53, -1, 1);
  float *dq = host_rand(dt, nq, 54, -0.1f, 0.1f);
  void *d_qkv = dev_from(dt, qkv, nq, 0), *d_o = dev_from(dt, o, no, 0);
  float *d_l = dev_from(ZEROC_FP32, l, nl, 0);
  void *d_po = dev_alloc(dt, np, 0), *d_dq = dev_from(dt, dq, nq, 0);
  float *d_pl = dev_alloc(ZEROC_FP32, npl, 0);
  const size_t es = zeroc_dtype_size(dt), qo = (size_t)c * 3 * C, ko = (size_t)kc * c * 3 * C + C;
#define AT(p, e) ((void *)((char *)(p) + (e) * es))
  ZT_OK(zeroc_k_attention_block_forward(k, st, d_po, d_pl, AT(d_qkv, qo), AT(d_qkv, ko),
                                        AT(d_qkv, ko + C), &a, dp));
  ZT_OK(zeroc_k_attention_merge(k, st, AT(d_o, (size_t)c * C), d_l + c, d_po, d_pl, &a, 0));
  float *po = malloc(np * sizeof(float)), *pl = malloc(npl * sizeof(float));
  zeroc__cpu_attention_block_forward(po, pl, qkv + qo, qkv + ko, qkv + ko + C, &a, dp);
  expect_close("attention_block_forward out", dt, d_po, po, np, tol(dt));
  expect_close("attention_block_forward lse", ZEROC_FP32, d_pl, pl, npl, TOL_FP32);
  zeroc__cpu_attention_merge(o + (size_t)c * C, l + c, po, pl, &a, 0);
  expect_close("attention_merge out", dt, d_o, o, no, tol(dt));
  expect_close("attention_merge lse", ZEROC_FP32, d_l, l, nl, TOL_FP32);
  ZT_OK(zeroc_k_attention_block_backward(
      k, st, AT(d_dq, qo), AT(d_dq, ko), AT(d_dq, ko + C), AT(dev_from(dt, dout, no, 0), (size_t)c * C),
      AT(d_qkv, qo), AT(d_qkv, ko), AT(d_qkv, ko + C), AT(d_o, (size_t)c * C), d_l + c, &a, dp));
#undef AT
  zeroc__cpu_attention_block_backward(dq + qo, dq + ko, dq + ko + C, dout + (size_t)c * C,
                                      qkv + qo, qkv + ko, qkv + ko + C, o + (size_t)c * C, l + c,
                                      &a, dp);
  expect_close("attention_block_backward dqkv", dt, d_dq, dq, nq, tol(dt));
  dev_free_all();
  free(qkv), free(o), free(l), free(dout), free(dq), free(po), free(pl);
}

static void test_attention_block(void) {
  zeroc_dropout_t dp = {0.1f, zeroc_i_dropout_key(3, 5, 2, ZEROC_DROP_ATTN), 9, 0, 74, 256, 8, 2};
  for (int i = 0; i < 2; i++)
    for (int causal = 0; causal < 2; causal++) {
      check_attention_block(DTYPES[i], causal, NULL);
      check_attention_block(DTYPES[i], causal, &dp);
    }
}

/* d/dqkv of L = sum(out * R) against central differences (fp32), and repeat runs. */
static void test_attention_finite_differences(void) {
  const int B = 1, T = 70, NH = 2, HS = 16, C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
  float *qkv = host_rand(ZEROC_FP32, nq, 50, -1, 1), *R = host_rand(ZEROC_FP32, no, 51, -1, 1);
  float *g = calloc(nq, sizeof(float)), *g2 = calloc(nq, sizeof(float)),
        *out = malloc(no * sizeof(float));
  void *dq = dev_from(ZEROC_FP32, qkv, nq, 0), *dout = dev_alloc(ZEROC_FP32, no, 0);
  float *lse = dev_alloc(ZEROC_FP32, (size_t)B * NH * T, 0);
  void *dg = dev_from(ZEROC_FP32, g, nq, 0), *dR = dev_from(ZEROC_FP32, R, no, 0);
  ZT_OK(zeroc_k_attention_forward(kf, st, dout, lse, dq, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_backward(kf, st, dg, dR, dq, dout, lse, B, T, C, NH, NULL));
  dev_get(ZEROC_FP32, g, dg, nq);
  /* a second run from zero gives the same bits */
  float *zero = calloc(nq, sizeof(float));
  dev_put(ZEROC_FP32, dg, zero, nq);
  ZT_OK(zeroc_k_attention_backward(kf, st, dg, dR, dq, dout, lse, B, T, C, NH, NULL));
  dev_get(ZEROC_FP32, g2, dg, nq);
  ZT_ASSERT_MSG(!memcmp(g, g2, nq * sizeof(float)), "attention_backward: two runs differ");
  const float eps = 1e-2f;
  for (int s = 0; s < 18; s++) {
    /* spread over q, k and v of several tokens and heads */
    size_t t = (size_t)(s * 13) % T, part = (size_t)s % 3, col = (size_t)(s * 7) % C;
    size_t i = t * 3 * C + part * C + col;
    double L[2];
    for (int side = 0; side < 2; side++) {
      float *xp = host_copy(qkv, nq);
      xp[i] += side ? -eps : eps;
      dev_put(ZEROC_FP32, dq, xp, nq);
      ZT_OK(zeroc_k_attention_forward(kf, st, dout, lse, dq, B, T, C, NH, NULL));
      dev_get(ZEROC_FP32, out, dout, no);
      L[side] = 0;
      for (size_t j = 0; j < no; j++) L[side] += (double)out[j] * R[j];
      free(xp);
    }
    double fd = (L[0] - L[1]) / (2 * eps);
    ZT_ASSERT_MSG(fabs(fd - g[i]) <= 2e-3 + 1e-2 * fabs(fd),
                  "attention d/dqkv[t %zu, %c, col %zu]: backward %.6g, finite difference %.6g", t,
                  "qkv"[part], col, g[i], fd);
  }
  dev_free_all();
  free(qkv), free(R), free(g), free(g2), free(out), free(zero);
}

/* ---- elementwise -------------------------------------------------------------------- */

static void check_elementwise(zeroc_dtype_t dt, size_t n, size_t off) {
  zeroc_kernels_t *k = kern(dt);
  float *x = host_rand(dt, n, 60, -4, 4), *y = host_rand(dt, n, 61, -1, 1),
        *z = host_rand(dt, n, 62, -1, 1);
  float *ref = malloc(n * sizeof(float));
  void *dx = dev_from(dt, x, n, off), *out = dev_alloc(dt, n, off);
  ZT_OK(zeroc_k_gelu_forward(k, st, out, dx, n));
  zeroc__cpu_gelu_forward(ref, x, n);
  expect_close("gelu_forward", dt, out, ref, n, tol(dt));
  void *dz = dev_from(dt, z, n, off);
  ZT_OK(zeroc_k_gelu_backward(k, st, dz, dx, dev_from(dt, y, n, off), n));
  float *zz = host_copy(z, n);
  zeroc__cpu_gelu_backward(zz, x, y, n);
  expect_close("gelu_backward", dt, dz, zz, n, tol(dt));
  void *dy = dev_from(dt, y, n, off);
  ZT_OK(zeroc_k_residual_forward(k, st, dy, dy, dev_from(dt, z, n, off), n)); /* out aliases a */
  zeroc__cpu_residual_forward(ref, y, z, n);
  expect_close("residual_forward", dt, dy, ref, n, tol(dt));
  ZT_OK(zeroc_k_add(k, st, dy, dx, n));
  zeroc__cpu_add(ref, x, n);
  expect_close("add", dt, dy, ref, n, tol(dt));
  dev_free_all();
  free(x), free(y), free(z), free(ref), free(zz);
}

static void test_elementwise(void) {
  for (int i = 0; i < 2; i++) {
    check_elementwise(DTYPES[i], 100003, 0);
    check_elementwise(DTYPES[i], 100003, 1); /* unaligned: element path */
  }
}

/* ---- classifier --------------------------------------------------------------------- */

static void check_crossentropy(zeroc_dtype_t dt, int N, int V, int Vp, float dloss) {
  zeroc_kernels_t *k = kern(dt);
  const size_t n = (size_t)N * Vp;
  float *lg = host_rand(dt, n, 70, -4, 6);
  int32_t *tg = malloc(N * sizeof *tg);
  uint64_t rs = 7;
  for (int i = 0; i < N; i++) tg[i] = i % 5 == 3 ? -1 : (int32_t)(zt_rand_u64(&rs) % (uint64_t)V);
  int32_t *dtg = NULL;
  ZT_OK(
      zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof *tg, (void **)&dtg));
  ZT_OK(zeroc_memcpy_async(st, dtg, tg, N * sizeof *tg));
  void *dl = dev_from(dt, lg, n, 0);
  float *loss = dev_alloc(ZEROC_FP32, N, 0), *rl = malloc(N * sizeof(float));
  ZT_OK(zeroc_k_crossentropy_forward_backward(k, st, loss, dl, dtg, N, V, Vp, dloss));
  zeroc__cpu_crossentropy_forward_backward(rl, lg, tg, N, V, Vp, dloss);
  expect_close("crossentropy losses", ZEROC_FP32, loss, rl, N, TOL_FP32);
  /* lg now holds the cpu's gradient (or the untouched logits when dloss == 0) */
  expect_close(dloss != 0 ? "crossentropy gradient" : "crossentropy logits untouched", dt, dl, lg,
               n, dloss != 0 ? tol(dt) : 0);
  zeroc_mem_free(ctx, dtg);
  dev_free_all();
  free(lg), free(tg), free(rl);
}

static void test_crossentropy(void) {
  for (int i = 0; i < 2; i++) {
    check_crossentropy(DTYPES[i], 33, 1000, 1024, 1.0f / 33);
    check_crossentropy(DTYPES[i], 9, 997, 1003, 0.5f); /* Vp % 8 != 0: element path */
    check_crossentropy(DTYPES[i], 9, 1000, 1024, 0.0f);
  }
}

/* ---- bad input ---------------------------------------------------------------------- */

/* The embedding-bag kernels of embed/ (fp32 only): bags with repeats in blocked rows,
 * the atomic backward, row sums of squares and row-wise AdaGrad, against the cpu. */
static void test_embedbag(void) {
  enum { R = 50, NB = 40, BLK = 16, DC = 33, LDO = 40, STRIDE = BLK * LDO + 8, U = 20 };
  int32_t offs[NB + 1] = {0};
  int64_t idx[4 * NB], rows[U];
  uint64_t s = 9;
  for (int b = 0; b < NB; b++) {
    offs[b + 1] = offs[b] + b % 5;
    for (int i = offs[b]; i < offs[b + 1]; i++) idx[i] = (int64_t)(zt_rand_u64(&s) % R);
  }
  for (int u = 0; u < U; u++) rows[u] = 2 * u + 1;
  float *w = malloc(R * DC * 4), *dout = malloc(3 * STRIDE * 4), *ref = malloc(3 * STRIDE * 4);
  float *got = malloc(3 * STRIDE * 4), *g = calloc(R * DC, 4), *sv = malloc(R * 4),
        *ss = malloc(U * 4);
  zt_fill_uniform(w, R * DC, 1, -1, 1);
  zt_fill_uniform(dout, 3 * STRIDE, 2, -1, 1);
  zt_fill_uniform(sv, R, 3, 0, 1);
  memcpy(ref, dout, 3 * STRIDE * 4);
  float *dw = dev_from(ZEROC_FP32, w, R * DC, 0), *dd = dev_from(ZEROC_FP32, dout, 3 * STRIDE, 0);
  float *dg = dev_from(ZEROC_FP32, g, R * DC, 0), *dst = dev_from(ZEROC_FP32, sv, R, 0);
  float *dss = dev_alloc(ZEROC_FP32, U, 0);
  int64_t *di = dev_alloc(ZEROC_INT64, 4 * NB, 0), *dr = dev_alloc(ZEROC_INT64, U, 0);
  int32_t *dof = dev_alloc(ZEROC_INT32, NB + 1, 0);
  ZT_OK(zeroc_memcpy_async(st, di, idx, sizeof(idx)));
  ZT_OK(zeroc_memcpy_async(st, dr, rows, sizeof(rows)));
  ZT_OK(zeroc_memcpy_async(st, dof, offs, sizeof(offs)));
  ZT_OK(zeroc_k_embedbag_forward(kf, st, dd, BLK, STRIDE, LDO, dw, DC, di, dof, NB, DC));
  zeroc__cpu_embedbag_forward(ref, BLK, STRIDE, LDO, w, DC, idx, offs, NB, DC);
  ZT_OK(zeroc__memcpy_sync(st, got, dd, 3 * STRIDE * 4));
  ZT_ASSERT_MSG(zt_rel_err(got, ref, 3 * STRIDE) <= TOL_FP32, "embedbag forward");
  ZT_OK(zeroc_k_embedbag_backward(kf, st, dg, DC, di, dof, NB, dd, BLK, STRIDE, LDO, DC));
  zeroc__cpu_embedbag_backward(g, DC, idx, offs, NB, ref, BLK, STRIDE, LDO, DC);
  ZT_OK(zeroc__memcpy_sync(st, got, dg, R * DC * 4));
  ZT_ASSERT_MSG(zt_rel_err(got, g, R * DC) <= TOL_FP32, "embedbag backward");
  ZT_OK(zeroc_k_rowwise_sumsq(kf, st, dss, dg, U, DC, 0.5f));
  ZT_OK(zeroc_k_rowwise_adagrad(kf, st, dw, DC, dst, dr, dg, dss, U, DC, DC, 0.5f, 0.1f, 1e-8f));
  zeroc__cpu_rowwise_sumsq(ss, g, U, DC, 0.5f);
  zeroc__cpu_rowwise_adagrad(w, DC, sv, rows, g, ss, U, DC, DC, 0.5f, 0.1f, 1e-8f);
  ZT_OK(zeroc__memcpy_sync(st, got, dw, R * DC * 4));
  ZT_ASSERT_MSG(zt_rel_err(got, w, R * DC) <= TOL_FP32, "row-wise adagrad weights");
  ZT_OK(zeroc__memcpy_sync(st, got, dst, R * 4));
  ZT_ASSERT_MSG(zt_rel_err(got, sv, R) <= TOL_FP32, "row-wise adagrad state");
  dev_free_all();
  free(w), free(dout), free(ref), free(got), free(g), free(sv), free(ss);
}

static void test_bad_input(void) {
  void *buf = dev_alloc(ZEROC_FP32, 3 * 512 * 4, 0);
  float *lse = dev_alloc(ZEROC_FP32, 64, 0);
  zeroc_result_t r = zeroc_k_attention_forward(kf, st, buf, lse, buf, 1, 4, 512, 2, NULL);
  ZT_ASSERT_MSG(r == ZEROC_ERR_UNSUPPORTED && strstr(zeroc_last_error(NULL), "head size 256"),
                "attention with head size 256 -> %s: %s", zeroc_result_name(r),
                zeroc_last_error(NULL));
  r = zeroc_k_layernorm_forward(kf, st, buf, NULL, NULL, buf, NULL, buf, 4, 8);
  ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG && strstr(zeroc_last_error(NULL), "weight is NULL"),
                "layernorm without weight -> %s: %s", zeroc_result_name(r), zeroc_last_error(NULL));
  dev_free_all();
}

/* ---- main --------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"encoder", test_encoder},
      {"layernorm", test_layernorm},
      {"layernorm finite differences", test_layernorm_finite_differences},
      {"matmul", test_matmul},
      {"matmul with GELU and bias gradients fused (cuBLASLt epilogues)", test_matmul_fused},
      {"attention", test_attention},
      {"attention finite differences and repeat", test_attention_finite_differences},
      {"attention on the tensor cores at training lengths, deterministic", test_attention_mma},
#ifdef ZEROC_HAVE_CUDA
      {"attention on cuDNN (flash SDPA), both directions, mixed with zeroc's", test_attention_cudnn},
#endif
      {"attention block pair, merge, backward (context parallelism)", test_attention_block},
      {"gelu, residual, add", test_elementwise},
      {"crossentropy", test_crossentropy},
      {"embedding bags, row-wise AdaGrad", test_embedbag},
      {"bad input", test_bad_input},
      ZT_END,
  };
#ifdef ZEROC_HAVE_CUDA
  /* Without a GPU: the ZEROC_CUDA_ATTENTION values, and whether cuDNN loads here. */
  zeroc__cudnn_mode_t m;
  int bad = zeroc__cudnn_mode_parse("auto", &m) || m != ZEROC__CUDNN_AUTO ||
            zeroc__cudnn_mode_parse("cudnn", &m) || m != ZEROC__CUDNN_REQUIRED ||
            zeroc__cudnn_mode_parse("zeroc", &m) || m != ZEROC__CUDNN_OFF ||
            zeroc__cudnn_mode_parse(NULL, &m) || m != ZEROC__CUDNN_AUTO; /* the default */
  if (zeroc__cudnn_mode_parse("flash", &m) != ZEROC_ERR_INVALID_ARG ||
      !strstr(zeroc_last_error(NULL), "'flash'") ||
      !strstr(zeroc_last_error(NULL), "accepted auto"))
    bad = 1;
  printf("ZEROC_CUDA_ATTENTION=flash -> %s\n", zeroc_last_error(NULL));
  if (bad) {
    printf("FAIL: ZEROC_CUDA_ATTENTION parsing\n");
    return 1;
  }
  char path[256];
  long ver = 0;
  if (zeroc__cudnn_probe(path, sizeof path, &ver) == ZEROC_OK)
    printf("cuDNN %ld loads from %s\n", ver, path);
  else
    printf("cuDNN not loadable here: %s\n", zeroc_last_error(NULL));
#endif
  return kc_main(argc, argv, "kernels_cuda", tests);
}
