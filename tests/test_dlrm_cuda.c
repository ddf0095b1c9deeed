/*
 * tests/test_dlrm_cuda.c - the DLRM kernels on the GPU against their cpu twins, through
 * the dispatch (kernels/dlrm_kernels.h), on the same random inputs: ReLU, the
 * interaction (26 tables, as the MLPerf model), binary cross-entropy with extreme logits.
 * fp32, relative tolerance 1e-5 over each tensor (only the order of the sums differs).
 * Exits 77 (skipped) when no GPU is visible.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "kernels/dlrm_kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *kc, *kg; /* cpu twins (host memory) and cuda */
static zeroc_stream_t *st;
static void *bufs[64]; /* freed in teardown */
static int nbufs;

static float *dev(const float *h, size_t n) {
  void *p = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, n * sizeof(float) + 16, &p));
  if (p && nbufs < 64) bufs[nbufs++] = p;
  if (p && h) ZT_OK(zeroc_memcpy_async(st, p, h, n * sizeof(float)));
  return p;
}

static void expect(const char *what, const float *d, const float *ref, size_t n) {
  float *got = malloc(n * sizeof(float));
  ZT_OK(zeroc_memcpy_async(st, got, d, n * sizeof(float)));
  ZT_OK(zeroc_stream_sync(st));
  double e = zt_rel_err(got, ref, n);
  ZT_ASSERT_MSG(e <= 1e-5, "%s (n %zu): relative error %.3g", what, n, e);
  free(got);
}

static float *rnd(size_t n, uint64_t seed) {
  float *x = malloc(n * sizeof(float));
  zt_fill_uniform(x, n, seed, -1, 1);
  return x;
}

static void test_relu_bce(void) {
  size_t n = 1001;
  float *x = rnd(n, 1), *dy = rnd(n, 2), *dx = rnd(n, 3), *y = malloc(n * 4);
  float *gx = dev(x, n), *gy = dev(NULL, n), *gdy = dev(dy, n), *gdx = dev(dx, n);
  ZT_OK(zeroc_k_relu_forward(kc, NULL, y, x, n));
  ZT_OK(zeroc_k_relu_forward(kg, st, gy, gx, n));
  expect("relu forward", gy, y, n);
  ZT_OK(zeroc_k_relu_backward(kc, NULL, dx, y, dy, n));
  ZT_OK(zeroc_k_relu_backward(kg, st, gdx, gy, gdy, n));
  expect("relu backward", gdx, dx, n);
  int B = 513;
  for (int b = 0; b < B; b++) x[b] *= b % 7 ? 8 : 90, dy[b] = b % 3 == 0;
  float *loss = malloc(B * 4), *dl = malloc(B * 4);
  float *gl = dev(x, B), *glab = dev(dy, B), *gloss = dev(NULL, B), *gdl = dev(NULL, B);
  ZT_OK(zeroc_k_bce_forward_backward(kc, NULL, loss, dl, x, dy, B, 0.125f));
  ZT_OK(zeroc_k_bce_forward_backward(kg, st, gloss, gdl, gl, glab, B, 0.125f));
  expect("bce losses", gloss, loss, B);
  expect("bce gradient", gdl, dl, B);
  free(x), free(dy), free(dx), free(y), free(loss), free(dl);
}

static void interact(int B, int T, int D) {
  int F = T + 1, W = D + F * (F - 1) / 2;
  size_t nz = (size_t)B * D, ne = (size_t)B * T * D, nw = (size_t)B * W;
  float *z = rnd(nz, 4), *e = rnd(ne, 5), *g = rnd(nw, 6), *dz = rnd(nz, 7), *de = rnd(ne, 8);
  float *out = malloc(nw * 4);
  float *gz = dev(z, nz), *ge = dev(e, ne), *gg = dev(g, nw), *gdz = dev(dz, nz),
        *gde = dev(de, ne);
  float *gout = dev(NULL, nw);
  ZT_OK(zeroc_k_interact_forward(kc, NULL, out, z, e, B, T, D));
  ZT_OK(zeroc_k_interact_forward(kg, st, gout, gz, ge, B, T, D));
  expect("interaction forward", gout, out, nw);
  ZT_OK(zeroc_k_interact_backward(kc, NULL, dz, de, g, z, e, B, T, D));
  ZT_OK(zeroc_k_interact_backward(kg, st, gdz, gde, gg, gz, ge, B, T, D));
  expect("interaction backward dz", gdz, dz, nz);
  expect("interaction backward demb", gde, de, ne);
  free(z), free(e), free(g), free(dz), free(de), free(out);
}

static void test_interaction(void) {
  interact(7, 4, 8);
  interact(33, 26, 128); /* the MLPerf shape: 351 pairs */
  interact(3, 1, 5);
}

static int setup(void) {
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CUDA;
  cfg.threads = 1;
  if (zeroc_ctx_create(&ctx, &cfg) != ZEROC_OK) {
    fprintf(stderr, "cuda context: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  st = zeroc_ctx_compute_stream(ctx);
  /* the cpu twins need a kernels object of the cpu kind: host pointers, inline */
  static zeroc_kernels_t cpu = {0};
  cpu.device = ZEROC_DEVICE_CPU;
  cpu.dtype = ZEROC_FP32;
  kc = &cpu;
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), st, ZEROC_FP32, &kg)) {
    fprintf(stderr, "cuda kernels: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  return 0;
}

static int teardown(void) {
  zeroc_stream_sync(st);
  for (int i = 0; i < nbufs; i++) zeroc_mem_free(ctx, bufs[i]);
  zeroc_kernels_destroy(kg);
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}

int main(int argc, char **argv) {
  if (zeroc__cuda_device_count() == 0) {
    printf("test_dlrm_cuda: no GPU visible: skipped\n");
    return ZT_SKIP_CODE;
  }
  static const zt_test_t tests[] = {
      {"relu and binary cross-entropy", test_relu_bce},
      {"interaction", test_interaction},
      ZT_END,
  };
  return zt_run_mpi_ex(argc, argv, "dlrm_cuda", tests, 1, 1, setup, teardown);
}
