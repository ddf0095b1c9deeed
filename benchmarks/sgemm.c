/*
 * benchmarks/sgemm.c - the CPU's matrix-multiply ceiling: OpenBLAS cblas_sgemm on
 * n x n x n fp32 (default n = 2048) at a given thread count, best and median of
 * the repetitions in GFLOP/s (2 n^3 FLOPs each). Issue 20 compares the model
 * FLOP/s of `zeroc train` with this figure.
 *
 *   bench_sgemm [N] [THREADS] [REPS]     (defaults 2048, 1, 7)
 */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
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

int main(int argc, char **argv) {
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
