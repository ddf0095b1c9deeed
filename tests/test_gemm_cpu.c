/*
 * tests/test_gemm_cpu.c - zeroc's AVX-512 matrix product (src/kernels/cpu/gemm.c)
 * against a double-precision reference: every mode (add, set, bias) with a and b
 * each plain, transposed or with neither stride 1, over shapes that end inside a
 * micro-kernel's 12 rows, its 32 columns and its 16-wide transposes, and past its
 * K and column blocks; c's padding and the rows below it are never written; set
 * and bias never read c; K = 0; the same bits on 1, 2 and 3 threads, split by rows
 * and by columns. Skips (77) where the CPU has no AVX-512 or ZEROC_CPU_GEMM=0.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "testutil.h"

/* layouts of an operand: row-major, transposed (column-major), neither stride 1 */
enum { PLAIN, TRANS, STRIDED };

typedef struct {
  float *p;
  size_t rs, cs, n; /* element (i, j) at p[i * rs + j * cs]; n floats allocated */
} mat_t;

static mat_t mat_make(int rows, int cols, int layout, uint64_t seed) {
  mat_t m;
  if (layout == PLAIN) m.rs = (size_t)cols + 3, m.cs = 1;
  if (layout == TRANS) m.rs = 1, m.cs = (size_t)rows + 5;
  if (layout == STRIDED) m.rs = 2 * (size_t)cols + 1, m.cs = 2;
  m.n = (size_t)(rows > 0 ? rows : 1) * m.rs + (size_t)(cols > 0 ? cols : 1) * m.cs + 1;
  m.p = malloc(m.n * sizeof *m.p);
  zt_fill_uniform(m.p, m.n, seed, -1, 1);
  return m;
}

static double at(const mat_t *m, int i, int j) { return m->p[(size_t)i * m->rs + (size_t)j * m->cs]; }

/* c (M x N, ldc N + 7, M + 2 rows allocated) against the reference; 0 if it holds */
static int check_one(zeroc_gemm_mode_t mode, int M, int N, int K, int la, int lb) {
  mat_t a = mat_make(M, K, la, 11 + (uint64_t)M), b = mat_make(K, N, lb, 23 + (uint64_t)N);
  const size_t ldc = (size_t)N + 7, nc = ldc * (size_t)(M + 2);
  float *c = malloc(nc * sizeof *c), *c0 = malloc(nc * sizeof *c0), *bias = malloc(N * sizeof *bias);
  zt_fill_uniform(c0, nc, 31, -1, 1);
  zt_fill_uniform(bias, (size_t)N, 37, -1, 1);
  memcpy(c, c0, nc * sizeof *c);
  if (mode != ZEROC_GEMM_ADD) /* set and bias must not read c */
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) c[(size_t)i * ldc + j] = NAN;
  int bad = zeroc__gemm(mode, M, N, K, a.p, a.rs, a.cs, b.p, b.rs, b.cs,
                        mode == ZEROC_GEMM_BIAS ? bias : NULL, c, ldc) != 0;
  for (int i = 0; i < M + 2 && !bad; i++)
    for (int j = 0; j < (int)ldc && !bad; j++) {
      const size_t o = (size_t)i * ldc + j;
      if (i >= M || j >= N) { /* padding and the rows below: untouched */
        bad = memcmp(&c[o], &c0[o], sizeof *c) != 0;
        continue;
      }
      double ref = mode == ZEROC_GEMM_ADD ? c0[o] : mode == ZEROC_GEMM_BIAS ? bias[j] : 0;
      double mag = fabs(ref);
      for (int k = 0; k < K; k++) {
        ref += at(&a, i, k) * at(&b, k, j);
        mag += fabs(at(&a, i, k) * at(&b, k, j));
      }
      /* fp32 sums of K + 1 terms: |error| <= (K + 1) u sum |terms|, u = 2^-24 */
      bad = !(fabs(c[o] - ref) <= (K + 2) * 0x1p-24 * mag + 1e-30);
      if (bad)
        fprintf(stderr, "  mode %d M %d N %d K %d a %d b %d: c[%d][%d] = %.9g, expected %.9g\n",
                mode, M, N, K, la, lb, i, j, c[o], ref);
    }
  free(a.p), free(b.p), free(c), free(c0), free(bias);
  return bad;
}

static void test_against_reference(void) {
  /* rows: inside one micro-kernel, a whole one and one more, several; columns: one
   * vector, part of the second, a whole panel and more, past the 256-column block;
   * k: inside a 16-wide transpose, across them, past the 256 block */
  static const int Ms[] = {1, 5, 12, 13, 37};
  static const int Ns[] = {1, 16, 17, 33, 64, 300};
  static const int Ks[] = {1, 15, 17, 256, 300};
  int fails = 0, runs = 0;
  for (int mode = 0; mode < 3; mode++)
    for (int la = 0; la < 3; la++)
      for (int lb = 0; lb < 3; lb++)
        for (size_t x = 0; x < sizeof Ms / sizeof *Ms; x++)
          for (size_t y = 0; y < sizeof Ns / sizeof *Ns; y++)
            for (size_t z = 0; z < sizeof Ks / sizeof *Ks; z++) {
              if (la == STRIDED && (Ms[x] > 13 || Ks[z] > 17)) continue; /* the slow path: few */
              if (lb == STRIDED && (Ns[y] > 33 || Ks[z] > 17)) continue;
              fails += check_one((zeroc_gemm_mode_t)mode, Ms[x], Ns[y], Ks[z], la, lb);
              runs++;
            }
  ZT_ASSERT_MSG(fails == 0, "%d of %d products differ from the reference", fails, runs);
  /* the GPT's shapes, small: K past two blocks, columns past two */
  ZT_ASSERT_MSG(!check_one(ZEROC_GEMM_BIAS, 100, 520, 64, PLAIN, TRANS), "forward shape");
  ZT_ASSERT_MSG(!check_one(ZEROC_GEMM_ADD, 100, 64, 520, PLAIN, PLAIN), "input-gradient shape");
  ZT_ASSERT_MSG(!check_one(ZEROC_GEMM_ADD, 76, 64, 600, TRANS, PLAIN), "weight-gradient shape");
}

static void test_k0(void) {
  const int M = 3, N = 5;
  float c[15], bias[5] = {1, 2, 3, 4, 5};
  const float a = 0, b = 0;
  for (int m = 0; m < 3; m++) {
    for (int i = 0; i < 15; i++) c[i] = 7;
    ZT_ASSERT_MSG(zeroc__gemm((zeroc_gemm_mode_t)m, M, N, 0, &a, 1, 1, &b, 1, 1, bias, c, N) == 0,
                  "K = 0, mode %d", m);
    for (int i = 0; i < 15; i++) {
      const float want = m == ZEROC_GEMM_ADD ? 7 : m == ZEROC_GEMM_SET ? 0 : bias[i % N];
      ZT_ASSERT_MSG(c[i] == want, "K = 0, mode %d: c[%d] = %g, expected %g", m, i, c[i], want);
    }
  }
}

/* the same bits whatever the thread count: one split by rows (few columns), one by columns */
static void test_threads_same_bits(void) {
  static const int shapes[][3] = {{301, 40, 700}, {50, 1100, 300}};
  for (int s = 0; s < 2; s++) {
    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    mat_t a = mat_make(M, K, PLAIN, 5), bt = mat_make(K, N, TRANS, 6);
    float *bias = malloc(N * sizeof *bias), *c[3];
    zt_fill_uniform(bias, (size_t)N, 7, -1, 1);
    for (int t = 0; t < 3; t++) {
      c[t] = malloc((size_t)M * N * sizeof *c[t]);
      omp_set_num_threads(t + 1);
      ZT_ASSERT_MSG(zeroc__gemm(ZEROC_GEMM_BIAS, M, N, K, a.p, a.rs, a.cs, bt.p, bt.rs, bt.cs, bias,
                                c[t], (size_t)N) == 0,
                    "threads %d", t + 1);
    }
    for (int t = 1; t < 3; t++)
      ZT_ASSERT_MSG(!memcmp(c[0], c[t], (size_t)M * N * sizeof *c[0]),
                    "M %d N %d K %d: %d threads give other bits than 1", M, N, K, t + 1);
    for (int t = 0; t < 3; t++) free(c[t]);
    free(a.p), free(bt.p), free(bias);
  }
  omp_set_num_threads(1);
}

int main(void) {
  if (!zeroc__gemm_available()) {
    printf("test_gemm_cpu: skipped (no AVX-512 on this CPU, or ZEROC_CPU_GEMM=0)\n");
    return ZT_SKIP_CODE;
  }
  static const zt_test_t tests[] = {
      {"products against a double reference (modes, layouts, edges)", test_against_reference},
      {"K = 0: add leaves c, set clears it, bias copies the bias", test_k0},
      {"same bits on 1, 2 and 3 threads (row and column splits)", test_threads_same_bits},
      ZT_END,
  };
  return zt_run("gemm_cpu", tests);
}
