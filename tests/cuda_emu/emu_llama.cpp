/*
 * tests/cuda_emu/emu_llama.cpp - the Llama-family kernels of llama.cu on the CPU emulation
 * against references in double: RMSNorm forward (plain, and after the residual sum: the
 * bits of add + forward) and backward (adding and from dres), RoPE forward and backward
 * with llama3 scaling and scattered positions, SwiGLU forward and backward.
 */
#include "emu_check.h"
#include "kernels/rope.h"

static void t_rmsnorm(zeroc_dtype_t dt, int N, int C) {
  const char *dn = zeroc_dtype_name(dt);
  const size_t n = (size_t)N * C;
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, n, -2, 3), b = randv(dt, n), w = randv(dt, C, 0.5f, 1.5f);
  void *out = d.put(dt, vec(n, NAN)), *px = d.put(dt, x), *pw = d.put(dt, w);
  float *rstd = d.raw<float>(N, NAN);
  OK(zeroc_i_cuda_rmsnorm_forward(&K.k, NULL, NULL, out, rstd, px, NULL, pw, 1e-5f, N, C));
  dvec ref(n), rr(N);
  for (int r = 0; r < N; r++) {
    double ss = 0;
    for (int c = 0; c < C; c++) ss += (double)x[(size_t)r * C + c] * x[(size_t)r * C + c];
    rr[r] = 1 / std::sqrt(ss / C + 1e-5);
    for (int c = 0; c < C; c++) ref[(size_t)r * C + c] = x[(size_t)r * C + c] * rr[r] * w[c];
  }
  double e = relerr(get(dt, out, n), ref);
  CHECK(e < tol(dt), "rmsnorm_forward %s %dx%d: error %g", dn, N, C, e);
  e = relerr(vec(rstd, rstd + N), rr);
  CHECK(e < 1e-5, "rmsnorm_forward rstd %s: error %g", dn, e);

  /* fused: res = x + b, then the forward of res: the bits of add + forward */
  void *res = d.put(dt, vec(n, NAN)), *out2 = d.put(dt, vec(n, NAN)), *res2 = d.put(dt, x);
  void *pb = d.put(dt, b);
  float *rstd2 = d.raw<float>(N, NAN);
  OK(zeroc_i_cuda_rmsnorm_forward(&K.k, NULL, res, out, rstd, px, pb, pw, 1e-5f, N, C));
  OK(zeroc_i_cuda_add(&K.k, NULL, res2, pb, n));
  OK(zeroc_i_cuda_rmsnorm_forward(&K.k, NULL, NULL, out2, rstd2, res2, NULL, pw, 1e-5f, N, C));
  const size_t es = zeroc_dtype_size(dt);
  CHECK(same_bytes(res, res2, n * es) && same_bytes(out, out2, n * es) &&
            same_bytes(rstd, rstd2, N * sizeof(float)),
        "residual rmsnorm %s %dx%d: the bits of add + forward", dn, N, C);

  /* backward, adding into di, and set from dres */
  vec g = randv(dt, n), di = randv(dt, n), dw = randv(dt, C);
  float *prr = d.raw<float>(N, 0);
  for (int r = 0; r < N; r++) prr[r] = (float)rr[r];
  void *g_in = d.put(dt, di), *g_w = d.put(dt, dw), *pg = d.put(dt, g);
  OK(zeroc_i_cuda_rmsnorm_backward(&K.k, NULL, g_in, g_w, pg, px, pw, prr, N, C, g_in));
  dvec rdi = tod(di), rdw = tod(dw), rset = tod(b);
  for (int r = 0; r < N; r++) {
    double s = 0;
    for (int c = 0; c < C; c++) {
      const size_t i = (size_t)r * C + c;
      s += (double)g[i] * w[c] * x[i] * (float)rr[r];
    }
    s /= C;
    for (int c = 0; c < C; c++) {
      const size_t i = (size_t)r * C + c;
      const double xh = x[i] * (double)(float)rr[r], gi = (float)rr[r] * (g[i] * w[c] - xh * s);
      rdi[i] += gi, rset[i] += gi;
      rdw[c] += g[i] * xh;
    }
  }
  e = relerr(get(dt, g_in, n), rdi);
  CHECK(e < tol(dt), "rmsnorm_backward dinp %s %dx%d: error %g", dn, N, C, e);
  e = relerr(get(dt, g_w, C), rdw);
  CHECK(e < tol(dt) * 4, "rmsnorm_backward dweight %s %dx%d: error %g", dn, N, C, e);
  void *g_set = d.put(dt, vec(n, NAN));
  OK(zeroc_i_cuda_rmsnorm_backward(&K.k, NULL, g_set, g_w, pg, px, pw, prr, N, C, pb));
  e = relerr(get(dt, g_set, n), rset);
  CHECK(e < tol(dt), "rmsnorm_backward set from dres %s %dx%d: error %g", dn, N, C, e);
}

static void t_rope(zeroc_dtype_t dt, int N, int NH, int NKV, int HS) {
  const char *dn = zeroc_dtype_name(dt);
  const zeroc_rope_t r = {500000, 8, 1, 4, 8192};
  const int W = (NH + 2 * NKV) * HS, H2 = HS / 2;
  const size_t n = (size_t)N * W;
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, n);
  int32_t *pos = d.raw<int32_t>(N, 0);
  for (int i = 0; i < N; i++) pos[i] = (i * 7919 + 3) % 20000;
  float inv[ZEROC_ROPE_HS_MAX / 2];
  zeroc_i_rope_inv_freq(&r, HS, inv);
  void *px = d.put(dt, x);
  OK(zeroc_i_cuda_rope(&K.k, NULL, px, W, pos, inv, N, NH + NKV, HS, 0));
  dvec ref = tod(x);
  for (int t = 0; t < N; t++)
    for (int h = 0; h < NH + NKV; h++)
      for (int i = 0; i < H2; i++) {
        const size_t j = (size_t)t * W + h * HS + i;
        const double a = (double)pos[t] * inv[i];
        ref[j] = x[j] * std::cos(a) - x[j + H2] * std::sin(a);
        ref[j + H2] = x[j + H2] * std::cos(a) + x[j] * std::sin(a);
      }
  double e = relerr(get(dt, px, n), ref);
  CHECK(e < tol(dt), "rope forward %s N%d NH%d NKV%d HS%d: error %g", dn, N, NH, NKV, HS, e);
  OK(zeroc_i_cuda_rope(&K.k, NULL, px, W, pos, inv, N, NH + NKV, HS, 1));
  e = relerr(get(dt, px, n), tod(x));
  CHECK(e < tol(dt), "rope backward(forward) %s: error %g", dn, e);
}

static void t_swiglu(zeroc_dtype_t dt, int N, int F) {
  const char *dn = zeroc_dtype_name(dt);
  const size_t n = (size_t)N * F;
  Dev d;
  Kernels K(dt);
  vec gu = randv(dt, 2 * n, -4, 4), g = randv(dt, n), dgu = randv(dt, 2 * n);
  void *pgu = d.put(dt, gu), *out = d.put(dt, vec(n, NAN)), *pd = d.put(dt, dgu);
  OK(zeroc_i_cuda_swiglu_forward(&K.k, NULL, out, pgu, N, F));
  OK(zeroc_i_cuda_swiglu_backward(&K.k, NULL, pd, d.put(dt, g), pgu, N, F));
  dvec ref(n), rd = tod(dgu);
  for (int r = 0; r < N; r++)
    for (int f = 0; f < F; f++) {
      const size_t gi = (size_t)r * 2 * F + f, ui = gi + F, o = (size_t)r * F + f;
      const double x = gu[gi], u = gu[ui], s = 1 / (1 + std::exp(-x));
      ref[o] = x * s * u;
      rd[gi] += g[o] * u * s * (1 + x * (1 - s));
      rd[ui] += g[o] * x * s;
    }
  double e = relerr(get(dt, out, n), ref);
  CHECK(e < tol(dt), "swiglu forward %s N%d F%d: error %g", dn, N, F, e);
  e = relerr(get(dt, pd, 2 * n), rd);
  CHECK(e < tol(dt), "swiglu backward %s N%d F%d: error %g", dn, N, F, e);
}

void t_llama(zeroc_dtype_t dt) {
  t_rmsnorm(dt, 19, 64);
  t_rmsnorm(dt, 5, 37); /* element path */
  t_rmsnorm(dt, 3, 600);
  t_rope(dt, 13, 4, 2, 16);
  t_rope(dt, 5, 3, 3, 6);
  t_swiglu(dt, 9, 40);
  t_swiglu(dt, 3, 5);
}
