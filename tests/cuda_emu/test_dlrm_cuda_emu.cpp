/*
 * tests/cuda_emu/test_dlrm_cuda_emu.cpp - the cuda DLRM kernels (src/kernels/cuda/dlrm.cu,
 * turned into C++ by transform.py) on the CPU emulation of CUDA, against double
 * references: ReLU forward/backward, the interaction forward/backward (its pair
 * indexing in both directions), binary cross-entropy with its gradient. So the
 * kernels' logic is checked on machines without a GPU; test_kernels_cuda runs them
 * on one.
 */
#include "emu_check.h"
#define ZEROC_HAVE_CUDA 1 /* the cuda twins' declarations */
#include "kernels/dlrm_kernels.h"

/* uniform in [-1, 1) from emu_check.h's sequence */
static float urand_pm1() { return (float)(2 * urand() - 1); }
static vec randv_pm1(size_t n) {
  vec v(n);
  for (auto &x : v) x = urand_pm1();
  return v;
}
static double maxdiff(const vec &a, const std::vector<double> &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); i++) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

static void t_relu(zeroc_kernels_t *k, size_t n) {
  vec x = randv_pm1(n), y(n), dy = randv_pm1(n), dx = randv_pm1(n);
  std::vector<double> ry(n), rdx(n);
  for (size_t i = 0; i < n; i++)
    ry[i] = x[i] > 0 ? x[i] : 0, rdx[i] = dx[i] + (x[i] > 0 ? dy[i] : 0);
  OK(zeroc_i_cuda_relu_forward(k, NULL, y.data(), x.data(), n));
  CHECK(maxdiff(y, ry) == 0, "relu forward n %zu", n);
  OK(zeroc_i_cuda_relu_backward(k, NULL, dx.data(), y.data(), dy.data(), n));
  CHECK(maxdiff(dx, rdx) < 1e-7, "relu backward n %zu", n);
}

static void t_interact(zeroc_kernels_t *k, int B, int T, int D) {
  int F = T + 1, W = D + F * (F - 1) / 2;
  vec z = randv_pm1((size_t)B * D), e = randv_pm1((size_t)B * T * D), out((size_t)B * W);
  vec g = randv_pm1((size_t)B * W), dz = randv_pm1((size_t)B * D), de = randv_pm1((size_t)B * T * D);
  std::vector<double> ro((size_t)B * W), rdz(dz.begin(), dz.end()), rde(de.begin(), de.end());
  auto v = [&](int b, int f) { return f ? &e[((size_t)b * T + f - 1) * D] : &z[(size_t)b * D]; };
  for (int b = 0; b < B; b++) {
    for (int d = 0; d < D; d++)
      ro[(size_t)b * W + d] = z[(size_t)b * D + d], rdz[(size_t)b * D + d] += g[(size_t)b * W + d];
    int p = D;
    for (int i = 0; i < F; i++)
      for (int j = i + 1; j < F; j++, p++) {
        double s = 0, gp = g[(size_t)b * W + p];
        for (int d = 0; d < D; d++) s += (double)v(b, i)[d] * v(b, j)[d];
        ro[(size_t)b * W + p] = s;
        for (int d = 0; d < D; d++) {
          double *di = i ? &rde[((size_t)b * T + i - 1) * D + d] : &rdz[(size_t)b * D + d];
          *di += gp * v(b, j)[d];
          rde[((size_t)b * T + j - 1) * D + d] += gp * v(b, i)[d];
        }
      }
  }
  OK(zeroc_i_cuda_interact_forward(k, NULL, out.data(), z.data(), e.data(), B, T, D));
  CHECK(maxdiff(out, ro) < 1e-5, "interact forward B %d T %d D %d: %g", B, T, D, maxdiff(out, ro));
  OK(zeroc_i_cuda_interact_backward(k, NULL, dz.data(), de.data(), g.data(), z.data(), e.data(), B,
                                    T, D));
  CHECK(maxdiff(dz, rdz) < 1e-5, "interact backward dz B %d T %d D %d: %g", B, T, D,
        maxdiff(dz, rdz));
  CHECK(maxdiff(de, rde) < 1e-5, "interact backward demb B %d T %d D %d: %g", B, T, D,
        maxdiff(de, rde));
}

static void t_bce(zeroc_kernels_t *k, int B) {
  vec x = randv_pm1(B), y(B), loss(B), dl(B);
  for (int b = 0; b < B; b++) x[b] *= b % 5 == 0 ? 80 : 6, y[b] = b % 3 == 0;
  std::vector<double> rl(B), rd(B);
  for (int b = 0; b < B; b++) {
    double p = 1 / (1 + std::exp(-(double)x[b]));
    rl[b] = std::fmax(x[b], 0) - x[b] * y[b] + std::log1p(std::exp(-std::fabs((double)x[b])));
    rd[b] = 0.25 * (p - y[b]);
  }
  OK(zeroc_i_cuda_bce(k, NULL, loss.data(), dl.data(), x.data(), y.data(), B, 0.25f));
  CHECK(maxdiff(loss, rl) < 1e-5, "bce losses B %d: %g", B, maxdiff(loss, rl));
  CHECK(maxdiff(dl, rd) < 1e-6, "bce gradient B %d: %g", B, maxdiff(dl, rd));
}

int main() {
  g_rng = 777;
  zeroc_kernels_t k = {};
  k.device = ZEROC_DEVICE_CUDA;
  k.dtype = ZEROC_FP32;
  t_relu(&k, 1000);
  t_relu(&k, 3);
  t_interact(&k, 3, 4, 5);
  t_interact(&k, 2, 26, 16); /* the MLPerf table count: 351 pairs, more than a block */
  t_interact(&k, 1, 1, 3);
  t_bce(&k, 700);
  printf("test_dlrm_cuda_emu: %d checks, %d failed\n", g_checks, g_fail);
  return g_fail != 0;
}
