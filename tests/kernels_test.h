/*
 * tests/kernels_test.h - what the cpu kernel tests share (test_kernels_cpu.c,
 * test_kernels_attn.c): tolerances, the context and dispatch globals, the test
 * allocation pool, comparison against double references, central differences,
 * the double-precision references of test_kernels_cpu.c, and the main both run.
 * Static definitions: include it from exactly one .c of a test binary.
 */
#ifndef ZEROC_TESTS_KERNELS_TEST_H
#define ZEROC_TESTS_KERNELS_TEST_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"

/* Tolerances (relative, on the norm of the whole tensor): fp32 kernels against
 * double references. Each output is a few fp32 roundings (~6e-8 each) away
 * from the exact value, and central differences on the double reference add
 * ~h^2 = 1e-10; measured errors are below 1e-6 (ZEROC_TEST_VERBOSE=1 prints them). */
#define TOL_FWD 1e-5
#define TOL_BWD 1e-5
#define FD_H    1e-5

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *K;
static int verbose; /* ZEROC_TEST_VERBOSE=1 prints every measured error */

/* ---- allocation and comparison helpers ------------------------------------------ */

/* Every buffer of a test comes from here and is freed by release() at its end. */
static void *pool[512];
static int npool;

static void *talloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p || npool == (int)(sizeof pool / sizeof *pool)) {
    fprintf(stderr, "test allocation of %zu bytes failed\n", bytes);
    exit(1);
  }
  return pool[npool++] = p;
}

static void release(void) {
  while (npool) free(pool[--npool]);
}

static float *frand(size_t n, uint64_t seed, float lo, float hi) {
  float *x = talloc(n * sizeof *x);
  zt_fill_uniform(x, n, seed, lo, hi);
  return x;
}

static float *fcopy(const float *x, size_t n) {
  float *y = talloc(n * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

static float *fnan(size_t n) { /* a forward must overwrite every element of its output */
  float *x = talloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = NAN;
  return x;
}

static double *dalloc(size_t n) { return talloc(n * sizeof(double)); }

static double *to_d(const float *x, size_t n) {
  double *y = dalloc(n);
  for (size_t i = 0; i < n; i++) y[i] = x[i];
  return y;
}

/* Only test_kernels_cpu.c draws tokens. */
__attribute__((unused)) static int32_t *tokens(size_t n, uint64_t seed, int V) {
  int32_t *t = talloc(n * sizeof *t);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) t[i] = (int32_t)(zt_rand_u64(&s) % (uint64_t)V);
  return t;
}

/* ||got - ref|| / ||ref||, in double. */
static double rel_err(const float *got, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num) / (den > 0 ? sqrt(den) : 1e-300);
}

static void expect_close(const char *what, const float *got, const double *ref, size_t n,
                         double tol) {
  const double e = rel_err(got, ref, n);
  if (verbose) printf("\n    %-34s rel err %.2e (tol %.0e)", what, e, tol);
  ZT_ASSERT_MSG(e <= tol, "%s: relative error %.3g > tolerance %.3g", what, e, tol);
}

/* A backward accumulates: `got` must be `prefill + g`. Compared as
 * ||(got - prefill) - g|| / ||g||, so the prefill does not hide an error in g. */
static inline void expect_grad(const char *what, const float *got, const float *prefill,
                               const double *g, size_t n, double tol) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = ((double)got[i] - prefill[i]) - g[i];
    num += d * d;
    den += g[i] * g[i];
  }
  const double e = sqrt(num) / (den > 0 ? sqrt(den) : 1e-300);
  if (verbose) printf("\n    %-34s rel err %.2e (tol %.0e)", what, e, tol);
  ZT_ASSERT_MSG(den > 0, "%s: the reference gradient is zero: the test checks nothing", what);
  ZT_ASSERT_MSG(e <= tol, "%s: gradient relative error %.3g > tolerance %.3g", what, e, tol);
}

/* ---- finite differences ----------------------------------------------------------- */

typedef void (*eval_fn)(const void *args, double *out);

static double dot_d(const double *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* g (n) = dL/dx by central differences of L = sum(out * R) on the double
 * reference f; x is one of the arrays `args` points to, perturbed in place. */
static inline void fd_grad(eval_fn f, const void *args, double *x, size_t n, const double *R,
                           size_t nout, double *g) {
  double *o = malloc(nout * sizeof *o);
  for (size_t i = 0; i < n; i++) {
    const double x0 = x[i], h = FD_H;
    x[i] = x0 + h;
    f(args, o);
    const double lp = dot_d(o, R, nout);
    x[i] = x0 - h;
    f(args, o);
    const double lm = dot_d(o, R, nout);
    x[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  free(o);
}

/* ---- double-precision references -------------------------------------------------- */

/* The ones test_kernels_cpu.c checks against (attention's is in test_kernels_attn.c);
 * static inline: the attention binary does not use them. */
static inline void ref_encoder(double *out, const int32_t *inp, const double *wte,
                               const double *wpe, int B, int T, int C) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++)
        out[((size_t)b * T + t) * C + c] =
            wte[(size_t)inp[b * T + t] * C + c] + wpe[(size_t)t * C + c];
}

static inline void ref_layernorm(double *out, double *mean, double *rstd, const double *x,
                                 const double *w, const double *bias, int N, int C) {
  for (int n = 0; n < N; n++) {
    const double *r = x + (size_t)n * C;
    double mu = 0, var = 0;
    for (int c = 0; c < C; c++) mu += r[c];
    mu /= C;
    for (int c = 0; c < C; c++) var += (r[c] - mu) * (r[c] - mu);
    var /= C;
    const double rs = 1.0 / sqrt(var + 1e-5);
    for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (r[c] - mu) * rs * w[c] + bias[c];
    if (mean) mean[n] = mu;
    if (rstd) rstd[n] = rs;
  }
}

static inline void ref_matmul(double *out, const double *x, const double *w, const double *bias,
                              int N, int C, int OC) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = bias ? bias[o] : 0;
      for (int c = 0; c < C; c++) s += x[(size_t)n * C + c] * w[(size_t)o * C + c];
      out[(size_t)n * OC + o] = s;
    }
}

static inline double ref_gelu(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* loss (N) = logsumexp(x[n, :V]) - x[n, target]; 0 for a negative target. */
static inline void ref_xent(double *loss, const double *x, const int32_t *tg, int N, int V,
                            int Vp) {
  for (int n = 0; n < N; n++) {
    const double *r = x + (size_t)n * Vp;
    if (tg[n] < 0) {
      loss[n] = 0;
      continue;
    }
    double mx = r[0], z = 0;
    for (int i = 1; i < V; i++) mx = fmax(mx, r[i]);
    for (int i = 0; i < V; i++) z += exp(r[i] - mx);
    loss[n] = mx + log(z) - r[tg[n]];
  }
}

/* ---- main --------------------------------------------------------------------------- */

/* One rank: the context needs MPI, started here as a singleton; K is the fp32
 * dispatch the tests call. Runs `tests` as CUnit suite `suite`. */
static int kt_main(int argc, char **argv, const char *suite, const zt_test_t *tests) {
  const char *ve = getenv("ZEROC_TEST_VERBOSE");
  verbose = ve && *ve == '1';
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &K) !=
      ZEROC_OK) {
    fprintf(stderr, "zeroc_kernels_create: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  int rc = zt_run(suite, tests);
  zeroc_kernels_destroy(K);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return rc;
}

#endif
