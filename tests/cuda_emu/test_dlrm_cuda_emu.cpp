/*
 * tests/cuda_emu/test_dlrm_cuda_emu.cpp - the cuda DLRM kernels (src/kernels/cuda/dlrm.cu,
 * turned into C++ by transform.py) on the CPU emulation of CUDA, against double
 * references: ReLU forward/backward, the interaction forward/backward (its pair
 * indexing in both directions), binary cross-entropy with its gradient. So the
 * kernels' logic is checked on machines without a GPU; test_kernels_cuda runs them
 * on one.
 */
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_runtime.h"
#define ZEROC_HAVE_CUDA 1 /* the cuda twins' declarations */
#include "kernels/dlrm_kernels.h"

static thread_local char g_err[1024];

extern "C" {
zeroc_result_t zeroc__fail(zeroc_result_t r, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(g_err, sizeof g_err, "%s:%d: ", file, line);
  vsnprintf(g_err + n, sizeof g_err - n, fmt, ap);
  va_end(ap);
  return r;
}
const char *zeroc__tls_error(void) { return g_err; }
void *zeroc_stream_native(zeroc_stream_t *) { return nullptr; }
}

static int g_fail, g_checks;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    g_checks++;                                                                                    \
    if (!(cond)) {                                                                                 \
      g_fail++;                                                                                    \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)
#define OK(call) CHECK((call) == ZEROC_OK, "%s: %s", #call, g_err)

typedef std::vector<float> vec;
static uint64_t g_rng = 777;
static float urand() {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static vec randv(size_t n) {
  vec v(n);
  for (auto &x : v) x = urand();
  return v;
}
static double maxdiff(const vec &a, const std::vector<double> &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); i++) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

static void t_relu(zeroc_kernels_t *k, size_t n) {
  vec x = randv(n), y(n), dy = randv(n), dx = randv(n);
  std::vector<double> ry(n), rdx(n);
  for (size_t i = 0; i < n; i++)
    ry[i] = x[i] > 0 ? x[i] : 0, rdx[i] = dx[i] + (x[i] > 0 ? dy[i] : 0);
  OK(zeroc__cuda_relu_forward(k, NULL, y.data(), x.data(), n));
  CHECK(maxdiff(y, ry) == 0, "relu forward n %zu", n);
  OK(zeroc__cuda_relu_backward(k, NULL, dx.data(), y.data(), dy.data(), n));
  CHECK(maxdiff(dx, rdx) < 1e-7, "relu backward n %zu", n);
}

static void t_interact(zeroc_kernels_t *k, int B, int T, int D) {
  int F = T + 1, W = D + F * (F - 1) / 2;
  vec z = randv((size_t)B * D), e = randv((size_t)B * T * D), out((size_t)B * W);
  vec g = randv((size_t)B * W), dz = randv((size_t)B * D), de = randv((size_t)B * T * D);
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
  OK(zeroc__cuda_interact_forward(k, NULL, out.data(), z.data(), e.data(), B, T, D));
  CHECK(maxdiff(out, ro) < 1e-5, "interact forward B %d T %d D %d: %g", B, T, D, maxdiff(out, ro));
  OK(zeroc__cuda_interact_backward(k, NULL, dz.data(), de.data(), g.data(), z.data(), e.data(), B,
                                   T, D));
  CHECK(maxdiff(dz, rdz) < 1e-5, "interact backward dz B %d T %d D %d: %g", B, T, D,
        maxdiff(dz, rdz));
  CHECK(maxdiff(de, rde) < 1e-5, "interact backward demb B %d T %d D %d: %g", B, T, D,
        maxdiff(de, rde));
}

static void t_bce(zeroc_kernels_t *k, int B) {
  vec x = randv(B), y(B), loss(B), dl(B);
  for (int b = 0; b < B; b++) x[b] *= b % 5 == 0 ? 80 : 6, y[b] = b % 3 == 0;
  std::vector<double> rl(B), rd(B);
  for (int b = 0; b < B; b++) {
    double p = 1 / (1 + std::exp(-(double)x[b]));
    rl[b] = std::fmax(x[b], 0) - x[b] * y[b] + std::log1p(std::exp(-std::fabs((double)x[b])));
    rd[b] = 0.25 * (p - y[b]);
  }
  OK(zeroc__cuda_bce(k, NULL, loss.data(), dl.data(), x.data(), y.data(), B, 0.25f));
  CHECK(maxdiff(loss, rl) < 1e-5, "bce losses B %d: %g", B, maxdiff(loss, rl));
  CHECK(maxdiff(dl, rd) < 1e-6, "bce gradient B %d: %g", B, maxdiff(dl, rd));
}

int main() {
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
