/*
 * tests/kernels_cuda_test.h - what the cuda kernel tests share (test_kernels_cuda.c,
 * test_kernels_cuda_engine.c, test_cuda_parallel.c): the cuda context, stream and the
 * fp32 / bf16 kernels objects, the tolerances, device buffers freed together, host <->
 * device copies with bf16 rounding, seeded host data, the comparison of a device tensor
 * against the cpu result, and the setup, teardown and main all three run.
 * Static definitions: include it from exactly one .c of a test binary; the helpers are
 * static inline because not every binary uses all of them.
 */
#ifndef ZEROC_TESTS_KERNELS_CUDA_TEST_H
#define ZEROC_TESTS_KERNELS_CUDA_TEST_H

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *kf, *kb; /* fp32 and bf16 activations */
static zeroc_stream_t *st;

#define TOL_FP32 1e-5
#define TOL_BF16 1e-2

static inline zeroc_kernels_t *kern(zeroc_dtype_t dt) { return dt == ZEROC_FP32 ? kf : kb; }
static inline double tol(zeroc_dtype_t dt) { return dt == ZEROC_FP32 ? TOL_FP32 : TOL_BF16; }

/* ---- device buffers ------------------------------------------------------------------ */

#define MAX_BUFS 64
static void *bufs[MAX_BUFS];
static int nbufs;

/* Device memory for n elements of dt, offset by `off` elements from a 256-byte boundary
 * (to reach the unaligned paths), filled with NaN bytes. Freed by dev_free_all. */
static inline void *dev_alloc(zeroc_dtype_t dt, size_t n, size_t off) {
  void *p = NULL;
  size_t bytes = (n + off) * zeroc_dtype_size(dt) + 16;
  ZT_ASSERT_MSG(nbufs < MAX_BUFS, "test bug: more than %d live buffers", MAX_BUFS);
  if (nbufs >= MAX_BUFS) return NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, bytes, &p));
  if (!p) return NULL;
  bufs[nbufs++] = p;
  ZT_OK(zeroc_memset_async(st, p, 0xff, bytes));
  return (char *)p + off * zeroc_dtype_size(dt);
}

static inline void dev_free_all(void) {
  ZT_OK(zeroc_stream_sync(st));
  for (int i = 0; i < nbufs; i++) zeroc_mem_free(ctx, bufs[i]);
  nbufs = 0;
}

/* Host fp32 -> device dt (bf16 rounded to nearest even). */
static inline void dev_put(zeroc_dtype_t dt, void *d, const float *h, size_t n) {
  void *tmp = malloc(n * zeroc_dtype_size(dt));
  if (dt == ZEROC_BF16)
    for (size_t i = 0; i < n; i++) ((uint16_t *)tmp)[i] = zeroc_f32_to_bf16(h[i]);
  else
    memcpy(tmp, h, n * sizeof(float));
  ZT_OK(zeroc_memcpy_async(st, d, tmp, n * zeroc_dtype_size(dt)));
  ZT_OK(zeroc_stream_sync(st));
  free(tmp);
}

static inline void *dev_from(zeroc_dtype_t dt, const float *h, size_t n, size_t off) {
  void *d = dev_alloc(dt, n, off);
  dev_put(dt, d, h, n);
  return d;
}

/* Device dt -> host fp32 (synchronises the stream). */
static inline void dev_get(zeroc_dtype_t dt, float *h, const void *d, size_t n) {
  void *tmp = malloc(n * zeroc_dtype_size(dt));
  ZT_OK(zeroc_memcpy_async(st, tmp, d, n * zeroc_dtype_size(dt)));
  ZT_OK(zeroc_stream_sync(st));
  if (dt == ZEROC_BF16)
    for (size_t i = 0; i < n; i++) h[i] = zeroc_bf16_to_f32(((uint16_t *)tmp)[i]);
  else
    memcpy(h, tmp, n * sizeof(float));
  free(tmp);
}

/* Random host data, rounded to bf16 when dt is bf16 so both sides see the same values. */
static inline float *host_rand(zeroc_dtype_t dt, size_t n, uint64_t seed, float lo, float hi) {
  float *x = malloc(n * sizeof(float));
  zt_fill_uniform(x, n, seed, lo, hi);
  if (dt == ZEROC_BF16)
    for (size_t i = 0; i < n; i++) x[i] = zeroc_bf16_to_f32(zeroc_f32_to_bf16(x[i]));
  return x;
}

static inline float *host_copy(const float *x, size_t n) {
  float *y = malloc(n * sizeof(float));
  memcpy(y, x, n * sizeof(float));
  return y;
}

/* The device tensor against the cpu result. */
static inline void expect_close(const char *what, zeroc_dtype_t dt, const void *d, const float *ref,
                                size_t n, double tolerance) {
  float *got = malloc(n * sizeof(float));
  dev_get(dt, got, d, n);
  double e = zt_rel_err(got, ref, n);
  ZT_ASSERT_MSG(e <= tolerance, "%s (%s, n %zu): relative error %.3g > %.1g", what,
                zeroc_dtype_name(dt), n, e, tolerance);
  free(got);
}

static const zeroc_dtype_t DTYPES[2] = {ZEROC_FP32, ZEROC_BF16};

/* ---- setup, teardown, main ---------------------------------------------------------- */

static inline int setup(void) {
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CUDA;
  cfg.threads = 1;
  if (zeroc_ctx_create(&ctx, &cfg) != ZEROC_OK) {
    fprintf(stderr, "cuda context: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  st = zeroc_ctx_compute_stream(ctx);
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), st, ZEROC_FP32, &kf) ||
      zeroc_kernels_create(zeroc__ctx_devmem(ctx), st, ZEROC_BF16, &kb)) {
    fprintf(stderr, "cuda kernels: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  return 0;
}

static inline int teardown(void) {
  zeroc_kernels_destroy(kf);
  zeroc_kernels_destroy(kb);
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}

/* On a GPU machine without cuDNN: a failure naming `why`, since a pass that never ran cuDNN
 * would hide the path the figures rely on (the GPU scripts put PyTorch's cuDNN on the
 * path). ZEROC_TEST_CUDNN=0 says a machine has none on purpose: then the check is "NOT
 * CHECKED" in its own line and in the suite's summary line, not silently passed. */
static inline void kc_no_cudnn(const char *what, const char *why) {
  const char *opt = getenv("ZEROC_TEST_CUDNN");
  if (opt && !strcmp(opt, "0")) {
    char note[640];
    snprintf(note, sizeof note, "%s (ZEROC_TEST_CUDNN=0; cuDNN: %.500s)", what, why);
    printf("  NOT CHECKED: %s\n", note);
    zt_not_checked(note);
    return;
  }
  ZT_ASSERT_MSG(0,
                "%s: cuDNN missing: %s (a GPU machine needs cuDNN 9 on LD_LIBRARY_PATH, see "
                "benchmarks/gpu/cudnn_env.sh; ZEROC_TEST_CUDNN=0 skips this check, said in the "
                "summary)",
                what, why);
}

/* Runs the suite `name` (binary test_<name>) on one rank; 77 (skipped) without a GPU. */
static inline int kc_main(int argc, char **argv, const char *name, const zt_test_t *tests) {
  if (zeroc__cuda_device_count() == 0) {
    printf("test_%s: no GPU visible: skipped\n", name);
    return ZT_SKIP_CODE;
  }
  return zt_run_mpi_ex(argc, argv, name, tests, 1, 1, setup, teardown);
}

#endif
