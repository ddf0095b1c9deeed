/*
 * benchmarks/gemm.c - zeroc's AVX-512 matrix product (src/kernels/cpu/gemm.c)
 * against OpenBLAS's sgemm on the products of a GPT step, each issued as the cpu
 * matmul issues it: the forward with a bias (OpenBLAS: the bias copied into c,
 * then beta 1; zeroc: stored with the first K block), the input gradient
 * accumulated (beta 1, ADD) and the weight gradient accumulated. The two alternate
 * call by call; per product the median time of REPS of each and their ratio, then
 * the sum over a step (LAYERS blocks and the tied head).
 *
 *   bench_gemm TOKENS HIDDEN VOCAB [LAYERS] [REPS] [--evict]   (e.g. 1024 256 4096 4 15)
 *
 * --evict writes 64 MiB before every call, so the operands come from memory as in
 * a step. Threads: OMP_NUM_THREADS (both libraries use the OpenMP pool).
 */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm.h"

#define EVICT_BYTES ((size_t)64 << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static float *fill(size_t n, unsigned seed) {
  float *x = aligned_alloc(64, (n * sizeof *x + 63) / 64 * 64);
  if (!x) {
    fprintf(stderr, "bench_gemm: out of memory (%zu floats)\n", n);
    exit(1);
  }
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u + seed) % 2001) * 1e-3f - 1.0f;
  return x;
}

typedef struct {
  const char *name;
  int M, N, K, kind; /* kind 0 forward (bias), 1 input gradient, 2 weight gradient */
  int per_step;      /* how many a step issues */
} prod_t;

static float *ga, *gb, *gc, *gbias;
static char *junk;

static void run_openblas(const prod_t *p) {
  if (p->kind == 0) {
    for (int i = 0; i < p->M; i++) memcpy(gc + (size_t)i * p->N, gbias, (size_t)p->N * sizeof *gc);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->M, p->N, p->K, 1.0f, ga, p->K, gb,
                p->K, 1.0f, gc, p->N);
  } else if (p->kind == 1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->M, p->N, p->K, 1.0f, ga, p->K, gb,
                p->N, 1.0f, gc, p->N);
  } else {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->M, p->N, p->K, 1.0f, ga, p->M, gb,
                p->N, 1.0f, gc, p->N);
  }
}

static void run_zeroc(const prod_t *p) {
  int rc;
  if (p->kind == 0)
    rc = zeroc__gemm(ZEROC_GEMM_BIAS, p->M, p->N, p->K, ga, (size_t)p->K, 1, gb, 1, (size_t)p->K,
                     gbias, gc, (size_t)p->N);
  else if (p->kind == 1)
    rc = zeroc__gemm(ZEROC_GEMM_ADD, p->M, p->N, p->K, ga, (size_t)p->K, 1, gb, (size_t)p->N, 1,
                     NULL, gc, (size_t)p->N);
  else
    rc = zeroc__gemm(ZEROC_GEMM_ADD, p->M, p->N, p->K, ga, 1, (size_t)p->M, gb, (size_t)p->N, 1,
                     NULL, gc, (size_t)p->N);
  if (rc) {
    fprintf(stderr, "bench_gemm: zeroc__gemm could not allocate its scratch\n");
    exit(1);
  }
}

int main(int argc, char **argv) {
  int evict = argc > 1 && !strcmp(argv[argc - 1], "--evict");
  if (evict) argc--;
  if (argc < 4) {
    fprintf(stderr, "usage: bench_gemm TOKENS HIDDEN VOCAB [LAYERS] [REPS] [--evict]\n");
    return 2;
  }
  const int T = atoi(argv[1]), C = atoi(argv[2]), V = atoi(argv[3]);
  const int L = argc > 4 ? atoi(argv[4]) : 4, reps = argc > 5 ? atoi(argv[5]) : 15;
  if (T < 1 || T > 65536 || C < 1 || C > 16384 || V < 1 || V > 262144 || L < 1 || L > 1000 ||
      reps < 1 || reps > 1000) {
    fprintf(stderr, "bench_gemm: TOKENS 1-65536, HIDDEN 1-16384, VOCAB 1-262144, LAYERS 1-1000, "
                    "REPS 1-1000; got %s %s %s %d %d\n", argv[1], argv[2], argv[3], L, reps);
    return 2;
  }
  if (!zeroc__gemm_available()) {
    fprintf(stderr, "bench_gemm: zeroc's product does not run here (no AVX-512, or "
                    "ZEROC_CPU_GEMM=0)\n");
    return 77;
  }
  const prod_t p[] = {
      {"qkv fwd", T, 3 * C, C, 0, L},     {"qkv dinp", T, C, 3 * C, 1, L},
      {"qkv dw", 3 * C, C, T, 2, L},      {"att fwd", T, C, C, 0, L},
      {"att dinp", T, C, C, 1, L},        {"att dw", C, C, T, 2, L},
      {"fc fwd", T, 4 * C, C, 0, L},      {"fc dinp", T, C, 4 * C, 1, L},
      {"fc dw", 4 * C, C, T, 2, L},       {"fcp fwd", T, C, 4 * C, 0, L},
      {"fcp dinp", T, 4 * C, C, 1, L},    {"fcp dw", C, 4 * C, T, 2, L},
      {"head fwd", T, V, C, 0, 1},        {"head dinp", T, C, V, 1, 1},
      {"head dw", V, C, T, 2, 1},
  };
  size_t big = 0;
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
    const size_t mk = (size_t)p[i].M * p[i].K, kn = (size_t)p[i].K * p[i].N,
                 mn = (size_t)p[i].M * p[i].N;
    big = mk > big ? mk : big, big = kn > big ? kn : big, big = mn > big ? mn : big;
  }
  ga = fill(big, 1), gb = fill(big, 2), gc = fill(big, 3);
  gbias = fill((size_t)(V > 4 * C ? V : 4 * C), 4);
  junk = evict ? malloc(EVICT_BYTES) : NULL;
  double *to = malloc(reps * sizeof *to), *tz = malloc(reps * sizeof *tz), so = 0, sz = 0;
  if (!to || !tz || (evict && !junk)) return 1;
  printf("GPT products: %d tokens, hidden %d, vocab %d, %d layers, %d thread(s), median of %d%s\n",
         T, C, V, L, omp_get_max_threads(), reps, evict ? ", 64 MiB evicted before each call" : "");
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
    run_openblas(&p[i]), run_zeroc(&p[i]); /* warm: pages, scratch, thread pool */
    for (int r = 0; r < reps; r++) {
      for (int side = 0; side < 2; side++) {
        const int z = (r + side) % 2; /* the order alternates */
        if (evict) memset(junk, r + side, EVICT_BYTES);
        const double t0 = now();
        z ? run_zeroc(&p[i]) : run_openblas(&p[i]);
        (z ? tz : to)[r] = now() - t0;
      }
    }
    qsort(to, (size_t)reps, sizeof *to, cmp_double);
    qsort(tz, (size_t)reps, sizeof *tz, cmp_double);
    const double mo = to[reps / 2], mz = tz[reps / 2], f = 2.0 * p[i].M * p[i].N * (double)p[i].K;
    so += p[i].per_step * mo, sz += p[i].per_step * mz;
    printf("%-9s M %5d N %5d K %5d: openblas %6.1f GFLOP/s, zeroc %6.1f GFLOP/s, zeroc/openblas "
           "time %.3f\n", p[i].name, p[i].M, p[i].N, p[i].K, f / mo / 1e9, f / mz / 1e9, mz / mo);
  }
  printf("a step's products: openblas %.1f ms, zeroc %.1f ms, zeroc/openblas %.3f\n", so * 1e3,
         sz * 1e3, sz / so);
  free(to), free(tz), free(junk), free(ga), free(gb), free(gc), free(gbias);
  return 0;
}
