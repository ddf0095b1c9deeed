/*
 * tests/test_kernels_cuda_llama.c - the Llama-family cuda kernels (kernels/cuda/llama.cu)
 * against their cpu twins on the same inputs, fp32 and bf16: RMSNorm forward, its fused
 * residual form (bit for bit add + forward on the device) and backward (dinp adding, set
 * from dres and from +0; dweight, repeatable); RoPE forward and backward with llama3
 * scaling and scattered positions; SwiGLU; grouped-query attention (NKV == NH through the
 * multi-head kernels, NKV < NH refused). Exits 77 (skipped) when no GPU is visible.
 * Tolerances and helpers in kernels_cuda_test.h.
 */
#include "kernels/llama_kernels.h"
#include "kernels_cuda_test.h"

static void check_rmsnorm(zeroc_dtype_t dt, int N, int C) {
  zeroc_kernels_t *k = kern(dt);
  const size_t n = (size_t)N * C;
  float *a = host_rand(dt, n, 10, -2, 3), *b = host_rand(dt, n, 11, -1, 1);
  float *w = host_rand(dt, C, 12, 0.5f, 1.5f);
  void *da = dev_from(dt, a, n, 0), *db = dev_from(dt, b, n, 0), *dw = dev_from(dt, w, C, 0);
  void *out = dev_alloc(dt, n, 0), *res = dev_alloc(dt, n, 0), *out2 = dev_alloc(dt, n, 0);
  void *res2 = dev_from(dt, a, n, 0);
  float *rstd = dev_alloc(ZEROC_FP32, N, 0), *rstd2 = dev_alloc(ZEROC_FP32, N, 0);
  ZT_OK(zeroc_k_rmsnorm_forward(k, st, out, rstd, da, dw, 1e-5f, N, C));
  float *ref = malloc(n * sizeof(float)), *rr = malloc(N * sizeof(float));
  zeroc__cpu_rmsnorm_forward(ref, rr, a, w, 1e-5f, N, C);
  expect_close("rmsnorm_forward out", dt, out, ref, n, tol(dt));
  expect_close("rmsnorm_forward rstd", ZEROC_FP32, rstd, rr, N, TOL_FP32);

  /* fused: the bits of add + forward on the device */
  ZT_OK(zeroc_k_residual_rmsnorm_forward(k, st, res, out, rstd, da, db, dw, 1e-5f, N, C));
  ZT_OK(zeroc_k_add(k, st, res2, db, n));
  ZT_OK(zeroc_k_rmsnorm_forward(k, st, out2, rstd2, res2, dw, 1e-5f, N, C));
  float *h1 = malloc(n * sizeof(float)), *h2 = malloc(n * sizeof(float));
  dev_get(dt, h1, out, n);
  dev_get(dt, h2, out2, n);
  ZT_ASSERT_MSG(!memcmp(h1, h2, n * sizeof(float)),
                "residual_rmsnorm_forward (%s) differs from add + rmsnorm_forward",
                zeroc_dtype_name(dt));

  /* backward against the cpu twin, both on the cpu's rstd: adding, then set from dres */
  float *dout = host_rand(dt, n, 13, -1, 1), *dinp = host_rand(dt, n, 14, -1, 1);
  float *dwt = host_rand(dt, C, 15, -1, 1);
  void *d_dinp = dev_from(dt, dinp, n, 0), *d_dw = dev_from(dt, dwt, C, 0);
  void *d_dout = dev_from(dt, dout, n, 0);
  float *d_rr = dev_from(ZEROC_FP32, rr, N, 0);
  ZT_OK(zeroc_k_rmsnorm_backward(k, st, d_dinp, d_dw, d_dout, da, dw, d_rr, N, C, NULL, 0));
  zeroc__cpu_rmsnorm_backward(dinp, dwt, dout, a, w, rr, N, C, dinp);
  expect_close("rmsnorm_backward dinp", dt, d_dinp, dinp, n, tol(dt));
  expect_close("rmsnorm_backward dweight", dt, d_dw, dwt, C, tol(dt));
  void *d_set = dev_alloc(dt, n, 0), *d_res = dev_from(dt, b, n, 0);
  ZT_OK(zeroc_k_rmsnorm_backward(k, st, d_set, d_dw, d_dout, da, dw, d_rr, N, C, d_res,
                                 ZEROC_K_DINP_SET));
  float *want = host_copy(b, n);
  zeroc__cpu_rmsnorm_backward(want, dwt, dout, a, w, rr, N, C, want);
  expect_close("rmsnorm_backward set dinp", dt, d_set, want, n, tol(dt));
  dev_free_all();
  free(a), free(b), free(w), free(ref), free(rr), free(h1), free(h2), free(dout), free(dinp);
  free(dwt), free(want);
}

static void test_rmsnorm(void) {
  for (int i = 0; i < 2; i++) {
    check_rmsnorm(DTYPES[i], 257, 768);
    check_rmsnorm(DTYPES[i], 33, 100); /* element path */
    check_rmsnorm(DTYPES[i], 9, 4100);
  }
}

static void check_rope(zeroc_dtype_t dt, int N, int NH, int NKV, int HS) {
  zeroc_kernels_t *k = kern(dt);
  const zeroc_rope_t r = {500000, 8, 1, 4, 8192};
  const size_t n = (size_t)N * (NH + 2 * NKV) * HS;
  int32_t *pos = malloc(N * sizeof *pos), *dpos = NULL;
  for (int i = 0; i < N; i++) pos[i] = (i * 7919 + 3) % 20000;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof *pos,
                        (void **)&dpos));
  ZT_OK(zeroc_memcpy_async(st, dpos, pos, N * sizeof *pos));
  float *x = host_rand(dt, n, 20, -1, 1), *inv = malloc(HS / 2 * sizeof(float));
  zeroc_i_rope_inv_freq(&r, HS, inv);
  void *dx = dev_from(dt, x, n, 0);
  ZT_OK(zeroc_k_rope_forward(k, st, dx, dpos, &r, N, NH, NKV, HS));
  zeroc__cpu_rope(x, (size_t)(NH + 2 * NKV) * HS, pos, inv, N, NH + NKV, HS, 0);
  expect_close("rope_forward", dt, dx, x, n, tol(dt));
  ZT_OK(zeroc_k_rope_backward(k, st, dx, dpos, &r, N, NH, NKV, HS));
  zeroc__cpu_rope(x, (size_t)(NH + 2 * NKV) * HS, pos, inv, N, NH + NKV, HS, 1);
  expect_close("rope_backward", dt, dx, x, n, tol(dt));
  ZT_OK(zeroc_stream_sync(st));
  zeroc_mem_free(ctx, dpos);
  dev_free_all();
  free(pos), free(x), free(inv);
}

static void test_rope(void) {
  for (int i = 0; i < 2; i++) {
    check_rope(DTYPES[i], 300, 8, 2, 64);
    check_rope(DTYPES[i], 17, 3, 3, 6);
  }
}

static void check_swiglu(zeroc_dtype_t dt, int N, int F) {
  zeroc_kernels_t *k = kern(dt);
  const size_t n = (size_t)N * F;
  float *gu = host_rand(dt, 2 * n, 30, -4, 4), *dout = host_rand(dt, n, 31, -1, 1);
  float *dgu = host_rand(dt, 2 * n, 32, -1, 1), *ref = malloc(n * sizeof(float));
  void *d_gu = dev_from(dt, gu, 2 * n, 0), *out = dev_alloc(dt, n, 0);
  void *d_dgu = dev_from(dt, dgu, 2 * n, 0);
  ZT_OK(zeroc_k_swiglu_forward(k, st, out, d_gu, N, F));
  zeroc__cpu_swiglu_forward(ref, gu, N, F);
  expect_close("swiglu_forward", dt, out, ref, n, tol(dt));
  ZT_OK(zeroc_k_swiglu_backward(k, st, d_dgu, dev_from(dt, dout, n, 0), d_gu, N, F));
  zeroc__cpu_swiglu_backward(dgu, dout, gu, N, F);
  expect_close("swiglu_backward", dt, d_dgu, dgu, 2 * n, tol(dt));
  dev_free_all();
  free(gu), free(dout), free(dgu), free(ref);
}

static void test_swiglu(void) {
  for (int i = 0; i < 2; i++) {
    check_swiglu(DTYPES[i], 64, 1024);
    check_swiglu(DTYPES[i], 7, 13);
  }
}

/* NKV == NH runs the multi-head kernels (their own tests check them): the same bits;
 * NKV < NH is refused on cuda with ZEROC_ERR_UNSUPPORTED. */
static void test_gqa(void) {
  const int B = 2, T = 33, NH = 4, HS = 64, C = NH * HS;
  const size_t n3 = (size_t)B * T * 3 * C, nc = (size_t)B * T * C;
  float *qkv = host_rand(ZEROC_FP32, n3, 40, -1, 1);
  void *d = dev_from(ZEROC_FP32, qkv, n3, 0), *o1 = dev_alloc(ZEROC_FP32, nc, 0);
  void *o2 = dev_alloc(ZEROC_FP32, nc, 0);
  float *l1 = dev_alloc(ZEROC_FP32, (size_t)B * NH * T, 0);
  float *l2 = dev_alloc(ZEROC_FP32, (size_t)B * NH * T, 0);
  ZT_OK(zeroc_k_attention_forward(kf, st, o1, l1, d, B, T, C, NH, NULL));
  ZT_OK(zeroc_k_attention_gqa_forward(kf, st, o2, l2, d, B, T, NH, NH, HS, NULL));
  float *h1 = malloc(nc * sizeof(float)), *h2 = malloc(nc * sizeof(float));
  dev_get(ZEROC_FP32, h1, o1, nc);
  dev_get(ZEROC_FP32, h2, o2, nc);
  ZT_ASSERT_MSG(!memcmp(h1, h2, nc * sizeof(float)), "gqa NKV == NH differs on cuda");
  zeroc_result_t r = zeroc_k_attention_gqa_forward(kf, st, o2, l2, d, B, T, NH, 2, HS, NULL);
  ZT_ASSERT_MSG(r == ZEROC_ERR_UNSUPPORTED, "gqa NKV 2 < NH 4 on cuda -> %s: %s",
                zeroc_result_name(r), zeroc_last_error(NULL));
  dev_free_all();
  free(qkv), free(h1), free(h2);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"rmsnorm", test_rmsnorm},
      {"rope", test_rope},
      {"swiglu", test_swiglu},
      {"grouped-query attention", test_gqa},
      ZT_END,
  };
  return kc_main(argc, argv, "kernels_cuda_llama", tests);
}
