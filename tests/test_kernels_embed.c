/*
 * tests/test_kernels_embed.c - the cpu embedding-bag kernels (kernels/cpu/embedbag.c,
 * through the kernels.h dispatch) against plain references in double: sum pooling
 * of bags with repeats and empty bags in blocked output rows, the backward into a
 * compact gradient, the row sums of squares and row-wise AdaGrad, the strided copy,
 * and the shape checks. The cuda twins are checked against these in
 * test_kernels_cuda.c (on a GPU) and test_kernels_cuda_emu (everywhere).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "testutil.h"

static zeroc_kernels_t K = {.device = ZEROC_DEVICE_CPU, .dtype = ZEROC_FP32};

enum { R = 11, NB = 9, BLK = 4, DC = 7, LDO = 10, STRIDE = BLK * LDO + 3 };

static void bags(int32_t *offs, int64_t *idx) {
  uint64_t s = 5;
  offs[0] = 0;
  for (int b = 0; b < NB; b++) { /* 0..3 ids, row 2 often repeated */
    offs[b + 1] = offs[b] + b % 4;
    for (int i = offs[b]; i < offs[b + 1]; i++) idx[i] = i % 2 ? 2 : (int64_t)(zt_rand_u64(&s) % R);
  }
}

static size_t orow(int b) { return (size_t)(b / BLK) * STRIDE + (size_t)(b % BLK) * LDO; }

static void test_forward_backward(void) {
  int32_t offs[NB + 1];
  int64_t idx[4 * NB];
  bags(offs, idx);
  float w[R * DC], out[3 * STRIDE], dout[3 * STRIDE], g[R * DC];
  double wantg[R * DC] = {0};
  zt_fill_uniform(w, R * DC, 1, -1, 1);
  zt_fill_uniform(dout, 3 * STRIDE, 2, -1, 1);
  for (int i = 0; i < 3 * STRIDE; i++) out[i] = NAN;
  ZT_OK(zeroc_k_embedbag_forward(&K, NULL, out, BLK, STRIDE, LDO, w, DC, idx, offs, NB, DC));
  double err = 0;
  for (int b = 0; b < NB; b++)
    for (int j = 0; j < DC; j++) {
      double a = 0;
      for (int i = offs[b]; i < offs[b + 1]; i++) {
        a += w[idx[i] * DC + j];
        wantg[idx[i] * DC + j] += dout[orow(b) + j];
      }
      err = fmax(err, fabs(out[orow(b) + j] - a));
    }
  ZT_ASSERT_MSG(err <= 1e-6, "forward: max abs err %.3g", err);
  for (int i = 0; i < R * DC; i++) g[i] = 0.5f; /* backward accumulates */
  ZT_OK(zeroc_k_embedbag_backward(&K, NULL, g, DC, idx, offs, NB, dout, BLK, STRIDE, LDO, DC));
  err = 0;
  for (int i = 0; i < R * DC; i++) err = fmax(err, fabs(g[i] - 0.5 - wantg[i]));
  ZT_ASSERT_MSG(err <= 1e-6, "backward: max abs err %.3g", err);
}

static void test_adagrad(void) {
  enum { U = 4, D = 9 };
  float w[R * DC], st[R], g[U * DC], ss[U];
  int64_t rows[U] = {0, 3, 7, 10};
  zt_fill_uniform(w, R * DC, 3, -1, 1);
  zt_fill_uniform(st, R, 4, 0, 1);
  zt_fill_uniform(g, U * DC, 5, -1, 1);
  double ws[R * DC], sts[R];
  for (int i = 0; i < R * DC; i++) ws[i] = w[i];
  for (int i = 0; i < R; i++) sts[i] = st[i];
  const double scale = 0.25, lr = 0.1, eps = 1e-8;
  ZT_OK(zeroc_k_rowwise_sumsq(&K, NULL, ss, g, U, DC, (float)scale));
  ZT_OK(zeroc_k_rowwise_adagrad(&K, NULL, w, DC, st, rows, g, ss, U, DC, D, (float)scale, (float)lr,
                                (float)eps));
  double ew = 0, es = 0;
  for (int u = 0; u < U; u++) {
    double q = 0;
    for (int j = 0; j < DC; j++) q += scale * g[u * DC + j] * scale * g[u * DC + j];
    sts[rows[u]] += q / D; /* the mean over the row's D columns, DC of them here */
    for (int j = 0; j < DC; j++)
      ws[rows[u] * DC + j] -= lr * scale * g[u * DC + j] / (sqrt(sts[rows[u]]) + eps);
  }
  for (int i = 0; i < R * DC; i++) ew = fmax(ew, fabs(w[i] - ws[i]));
  for (int i = 0; i < R; i++) es = fmax(es, fabs(st[i] - sts[i]));
  ZT_ASSERT_MSG(ew <= 1e-6 && es <= 1e-6, "adagrad: weights %.3g, state %.3g", ew, es);
}

static void test_copy_and_shapes(void) {
  float src[6 * 5], dst[6 * 8];
  zt_fill_uniform(src, 30, 6, -1, 1);
  memset(dst, 0, sizeof(dst));
  ZT_OK(zeroc_k_copy2d(&K, NULL, dst + 2, 8, src, 5, 6, 4));
  int bad = 0;
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 8; j++)
      bad += dst[i * 8 + j] != (j >= 2 && j < 6 ? src[i * 5 + j - 2] : 0.0f);
  ZT_ASSERT_MSG(bad == 0, "copy2d: %d wrong", bad);
  ZT_ASSERT_MSG(zeroc_k_embedbag_forward(&K, NULL, dst, 0, 0, 1, src, 1, NULL, NULL, 3, 1) ==
                    ZEROC_ERR_INVALID_ARG,
                "blk 0 refused");
  ZT_ASSERT_MSG(zeroc_k_rowwise_adagrad(&K, NULL, dst, 1, dst, NULL, src, src, 1, 5, 4, 1, 1, 1) ==
                    ZEROC_ERR_INVALID_ARG,
                "dc > D refused");
  ZT_OK(zeroc_k_embedbag_forward(&K, NULL, NULL, 1, 0, 1, NULL, 1, NULL, NULL, 0, 4)); /* no bags */
}

int main(void) {
  static const zt_test_t tests[] = {
      {"embedding bags forward and backward vs double", test_forward_backward},
      {"row-wise AdaGrad vs double", test_adagrad},
      {"strided copy and bad shapes", test_copy_and_shapes},
      ZT_END,
  };
  return zt_run("kernels_embed", tests);
}
