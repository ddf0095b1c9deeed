/*
 * benchmarks/sgemm.c - the CPU's matrix-multiply ceiling: OpenBLAS cblas_sgemm on
 * n x n x n fp32 (default n = 2048) at a given thread count, best and median of
 * the repetitions in GFLOP/s (2 n^3 FLOPs each). Issue 20 compares the model
 * FLOP/s of `zeroc train` with this figure.
 *
 *   bench_sgemm [N] [THREADS] [REPS]     (defaults 2048, 1, 7)
 *
 * With --gpt, the products one GPT block and the tied head issue through
 * zeroc's cpu matmul (forward inp @ w^T, backward dout @ w and dout^T @ inp), each
 * timed alone, median of REPS; with 2 threads also the backward's two products
 * side by side on one thread each against one after the other on both (the
 * second is what zeroc does: the first measured no faster, RESULTS.md):
 *
 *   bench_sgemm --gpt TOKENS HIDDEN VOCAB [THREADS] [REPS]   (e.g. 1024 256 4096 1)
 */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <omp.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- --gpt: the shapes of a GPT step ---------------------------------------------------- */

static float *ga, *gb, *gc, *gd; /* operands big enough for every product */

/* c (M,N) = a (M,K, or K,M when ta) @ b (K,N, or N,K when tb), row-major */
static void mm(int ta, int tb, int M, int N, int K, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, 1.0f, ga, ta ? M : K, gb, tb ? K : N, beta, c, N);
}

static double median_ms(double *t, int reps) {
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  return t[reps / 2] * 1e3;
}

/* one linear layer (N tokens, C in, OC out): forward, dinp, dweight; then the pair */
static void gpt_linear(const char *name, int N, int C, int OC, int th, int reps) {
  const struct {
    const char *what;
    int ta, tb, M, Nn, K;
    float beta;
  } p[3] = {{"forward", 0, 1, N, OC, C, 1.0f},
            {"dinp", 0, 0, N, C, OC, 0.0f},
            {"dweight", 1, 0, OC, C, N, 1.0f}};
  double sum = 0, t[1000];
  for (int i = 0; i < 3; i++) {
    mm(p[i].ta, p[i].tb, p[i].M, p[i].Nn, p[i].K, p[i].beta, gc);
    for (int r = 0; r < reps; r++) {
      double t0 = now();
      mm(p[i].ta, p[i].tb, p[i].M, p[i].Nn, p[i].K, p[i].beta, gc);
      t[r] = now() - t0;
    }
    double ms = median_ms(t, reps);
    if (i) sum += ms;
    printf("%-8s %-8s M %5d N %5d K %5d: %7.3f ms %6.1f GFLOP/s\n", name, p[i].what, p[i].M,
           p[i].Nn, p[i].K, ms, 2.0 * p[i].M * p[i].Nn * (double)p[i].K / ms / 1e6);
  }
  if (th != 2) return;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      mm(0, 0, N, C, OC, 0.0f, gc);
#pragma omp section
      mm(1, 0, OC, C, N, 1.0f, gd);
    }
    t[r] = now() - t0;
  }
  double ms = median_ms(t, reps);
  printf("%-8s backward: one after the other on 2 threads %7.3f ms, side by side on 1 each "
         "%7.3f ms (%.2fx)\n", name, sum, ms, sum / ms);
}

static int gpt_shapes(int argc, char **argv) {
  int N = argc > 2 ? atoi(argv[2]) : 0, C = argc > 3 ? atoi(argv[3]) : 0;
  int V = argc > 4 ? atoi(argv[4]) : 0, th = argc > 5 ? atoi(argv[5]) : 1;
  int reps = argc > 6 ? atoi(argv[6]) : 9;
  if (N < 1 || N > 65536 || C < 1 || C > 16384 || V < 1 || V > 262144 || th < 1 || th > 1024 ||
      reps < 1 || reps > 1000) {
    fprintf(stderr, "bench_sgemm --gpt TOKENS HIDDEN VOCAB [THREADS] [REPS]: got %d %d %d %d %d; "
                    "accepted TOKENS 1..65536, HIDDEN 1..16384, VOCAB 1..262144, THREADS 1..1024, "
                    "REPS 1..1000\n", N, C, V, th, reps);
    return 2;
  }
  openblas_set_num_threads(th);
  /* the biggest operand: max(N, V, 4C) x max(4C, C) */
  size_t rows = (size_t)(N > V ? N : V), cols = 4 * (size_t)C;
  if (rows < cols) rows = cols;
  size_t n = rows * cols;
  ga = malloc(n * sizeof *ga), gb = malloc(n * sizeof *gb), gc = malloc(n * sizeof *gc);
  gd = malloc(n * sizeof *gd);
  if (!ga || !gb || !gc || !gd) {
    fprintf(stderr, "bench_sgemm: out of memory for four %zu x %zu operands\n", rows, cols);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    ga[i] = (float)((i * 7u) % 13u) * 0.01f;
    gb[i] = (float)((i * 5u) % 11u) * 0.01f;
  }
  memset(gc, 0, n * sizeof *gc);
  memset(gd, 0, n * sizeof *gd);
  printf("GPT products: %d tokens, hidden %d, vocab %d, %d thread(s), median of %d\n", N, C, V, th,
         reps);
  gpt_linear("qkv", N, C, 3 * C, th, reps);
  gpt_linear("attproj", N, C, C, th, reps);
  gpt_linear("fc", N, C, 4 * C, th, reps);
  gpt_linear("fcproj", N, 4 * C, C, th, reps);
  gpt_linear("head", N, C, V, th, reps);
  free(ga), free(gb), free(gc), free(gd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--gpt")) return gpt_shapes(argc, argv);
  int n = argc > 1 ? atoi(argv[1]) : 2048, th = argc > 2 ? atoi(argv[2]) : 1;
  int reps = argc > 3 ? atoi(argv[3]) : 7;
  if (n < 1 || th < 1 || reps < 1 || reps > 1000) {
    fprintf(stderr, "bench_sgemm: N %d, THREADS %d, REPS %d: accepted N >= 1, THREADS >= 1, "
                    "REPS 1..1000\n", n, th, reps);
    return 2;
  }
  openblas_set_num_threads(th);
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
  if (!a || !b || !c) {
    fprintf(stderr, "bench_sgemm: out of memory for three %d x %d matrices\n", n, n);
    return 1;
  }
  for (size_t i = 0; i < nn; i++) {
    a[i] = (float)((i * 7u) % 13u) * 0.01f;
    b[i] = (float)((i * 5u) % 11u) * 0.01f;
    c[i] = 0.0f;
  }
  /* one untimed call: OpenBLAS starts its threads and pages the buffers in */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  double g[1000];
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    g[r] = 2.0 * n * (double)n * n / (now() - t0) / 1e9;
  }
  qsort(g, (size_t)reps, sizeof g[0], cmp_double);
  printf("sgemm n=%d threads=%d: best %.1f GFLOP/s, median %.1f GFLOP/s (%d reps; %s)\n", n, th,
         g[reps - 1], g[reps / 2], reps, openblas_get_config());
  free(a), free(b), free(c);
  return 0;
}
