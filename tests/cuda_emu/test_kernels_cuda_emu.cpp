/*
 * tests/cuda_emu/test_kernels_cuda_emu.cpp - the kernels of src/kernels/cuda, turned into
 * C++ by transform.py and run on the CPU emulation in include/, against references
 * computed here in double. It checks the kernels' logic (indexing, tiling, causal masks,
 * online softmax, vector and element paths, reductions) on machines without a GPU; the
 * label `gpu` test (test_kernels_cuda.c) checks the real thing on a GPU. This file
 * holds main, the encoder, LayerNorm and matmul checks; emu_attention.cpp and
 * emu_vocab_engine.cpp the rest, emu_check.h what they share.
 *
 * Tolerances (relative over a tensor): fp32 2e-6 (fp32 arithmetic against double),
 * bf16 1e-2; attention's backward in bf16 5e-2 on the change it makes to dqkv (the
 * change is small next to the bf16 rounding of the accumulated values). The engine
 * kernels must match the cpu formula bit for bit.
 */
#include <string>

#include "emu_check.h"

/* ---- encoder ------------------------------------------------------------------------- */

// tokens (B,T) with repeats, wte (V,C), wpe (T,C)
static void t_encoder(zeroc_dtype_t dt, int C) {
  const int B = 3, T = 5, V = 7, N = B * T;
  const char *dn = zeroc_dtype_name(dt);
  Dev d;
  Kernels K(dt);
  vec wte = randv(dt, (size_t)V * C), wpe = randv(dt, (size_t)T * C);
  int32_t *tok = d.raw<int32_t>(N, 0);
  for (int i = 0; i < N; i++) tok[i] = (int)(urand() * V);
  void *out = d.put(dt, vec((size_t)N * C, NAN));
  OK(zeroc_i_cuda_encoder_forward(&K.k, NULL, out, tok, d.put(dt, wte), d.put(dt, wpe), B, T, C));
  dvec ref((size_t)N * C);
  for (int bt = 0; bt < N; bt++)
    for (int c = 0; c < C; c++)
      ref[(size_t)bt * C + c] =
          (double)wte[(size_t)tok[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
  double e = relerr(get(dt, out, (size_t)N * C), ref);
  CHECK(e < tol(dt), "encoder_forward %s C %d: error %g", dn, C, e);

  vec dout = randv(dt, (size_t)N * C), dwte = randv(dt, (size_t)V * C),
      dwpe = randv(dt, (size_t)T * C);
  void *g_wte = d.put(dt, dwte), *g_wpe = d.put(dt, dwpe);
  OK(zeroc_i_cuda_encoder_backward(&K.k, NULL, g_wte, g_wpe, d.put(dt, dout), tok, B, T, C));
  dvec rte = tod(dwte), rpe = tod(dwpe);
  for (int bt = 0; bt < N; bt++)
    for (int c = 0; c < C; c++) {
      rte[(size_t)tok[bt] * C + c] += dout[(size_t)bt * C + c];
      rpe[(size_t)(bt % T) * C + c] += dout[(size_t)bt * C + c];
    }
  e = relerr(get(dt, g_wte, (size_t)V * C), rte);
  CHECK(e < tol(dt), "encoder_backward dwte %s C %d: error %g", dn, C, e);
  e = relerr(get(dt, g_wpe, (size_t)T * C), rpe);
  CHECK(e < tol(dt), "encoder_backward dwpe %s C %d: error %g", dn, C, e);
}

/* ---- layernorm ----------------------------------------------------------------------- */

/* The forward of x (N,C) in double: ref (N,C), rm, rr (N). */
static void ref_ln_forward(const vec &x, const vec &w, const vec &b, int N, int C, dvec &ref,
                           dvec &rm, dvec &rr) {
  ref.assign((size_t)N * C, 0), rm.assign(N, 0), rr.assign(N, 0);
  for (int r = 0; r < N; r++) {
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += x[(size_t)r * C + c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[(size_t)r * C + c] - m) * (x[(size_t)r * C + c] - m);
    rm[r] = m;
    rr[r] = 1 / std::sqrt(v / C + 1e-5);
    for (int c = 0; c < C; c++)
      ref[(size_t)r * C + c] = (x[(size_t)r * C + c] - m) * rr[r] * w[c] + b[c];
  }
}

/* The backward in double: rdi (N,C) += input gradient, rdw, rdb (C) += theirs. */
static void ref_ln_backward(const vec &g, const vec &x, const vec &w, const dvec &rm,
                            const dvec &rr, int N, int C, dvec &rdi, dvec &rdw, dvec &rdb) {
  for (int r = 0; r < N; r++) {
    double s1 = 0, s2 = 0;
    for (int c = 0; c < C; c++) {
      size_t i = (size_t)r * C + c;
      double dnorm = w[c] * g[i];
      s1 += dnorm;
      s2 += dnorm * (x[i] - rm[r]) * rr[r];
    }
    s1 /= C, s2 /= C;
    for (int c = 0; c < C; c++) {
      size_t i = (size_t)r * C + c;
      double norm = (x[i] - rm[r]) * rr[r];
      rdi[i] += (w[c] * g[i] - s1 - norm * s2) * rr[r];
      rdw[c] += norm * g[i];
      rdb[c] += g[i];
    }
  }
}

static void t_layernorm(zeroc_dtype_t dt, int N, int C) {
  const char *dn = zeroc_dtype_name(dt);
  const size_t n = (size_t)N * C;
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, n, -2, 3), w = randv(dt, C), b = randv(dt, C);
  void *out = d.put(dt, vec(n, NAN)), *px = d.put(dt, x), *pw = d.put(dt, w);
  float *mean = d.raw<float>(N, NAN), *rstd = d.raw<float>(N, NAN);
  OK(zeroc_i_cuda_layernorm_forward(&K.k, NULL, out, mean, rstd, px, pw, d.put(dt, b), N, C));
  dvec ref, rm, rr;
  ref_ln_forward(x, w, b, N, C, ref, rm, rr);
  double e = relerr(get(dt, out, n), ref);
  CHECK(e < tol(dt), "layernorm_forward %s %dx%d: error %g", dn, N, C, e);
  e = relerr(vec(mean, mean + N), rm);
  CHECK(e < 2e-6, "layernorm_forward mean: error %g", e);
  e = relerr(vec(rstd, rstd + N), rr);
  CHECK(e < 1e-5, "layernorm_forward rstd: error %g", e);

  vec g = randv(dt, n), di = randv(dt, n), dw = randv(dt, C), db = randv(dt, C);
  void *g_in = d.put(dt, di), *g_w = d.put(dt, dw), *g_b = d.put(dt, db);
  OK(zeroc_i_cuda_layernorm_backward(&K.k, NULL, g_in, g_w, g_b, d.put(dt, g), px, pw, mean, rstd,
                                     N, C, g_in));
  dvec rdi = tod(di), rdw = tod(dw), rdb = tod(db);
  ref_ln_backward(g, x, w, rm, rr, N, C, rdi, rdw, rdb);
  e = relerr(get(dt, g_in, n), rdi);
  CHECK(e < tol(dt), "layernorm_backward dinp %s %dx%d: error %g", dn, N, C, e);
  e = relerr(get(dt, g_w, C), rdw);
  CHECK(e < tol(dt), "layernorm_backward dweight %s %dx%d: error %g", dn, N, C, e);
  e = relerr(get(dt, g_b, C), rdb);
  CHECK(e < tol(dt), "layernorm_backward dbias %s %dx%d: error %g", dn, N, C, e);
}

/* The fused forms against the unfused kernels, bit for bit, and against the double
 * references: residual_layernorm_forward (res apart and in place on a) = add +
 * layernorm_forward; the backward from dres (apart, == dinp, NULL) = a copy of dres (a
 * zeroed dinp) + the backward adding into it. Row 0 of dout is -0, whose gradient has -0s
 * that a zeroed dinp turns into +0. */
static void t_layernorm_fused(zeroc_dtype_t dt, int N, int C) {
  const char *dn = zeroc_dtype_name(dt);
  const size_t n = (size_t)N * C, es = zeroc_dtype_size(dt);
  Dev d;
  Kernels K(dt);
  vec a = randv(dt, n, -1, 1), b = randv(dt, n, -2, 3), w = randv(dt, C), bs = randv(dt, C);
  void *pa = d.put(dt, a), *pb = d.put(dt, b), *pw = d.put(dt, w), *pbs = d.put(dt, bs);
  void *res = d.put(dt, vec(n, NAN)), *out = d.put(dt, vec(n, NAN));
  float *mean = d.raw<float>(N, NAN), *rstd = d.raw<float>(N, NAN);
  OK(zeroc_i_cuda_residual_layernorm_forward(&K.k, NULL, res, out, mean, rstd, pa, pb, pw, pbs, N,
                                             C));
  void *res0 = d.put(dt, a), *out0 = d.put(dt, vec(n, NAN));
  float *m0 = d.raw<float>(N, NAN), *r0 = d.raw<float>(N, NAN);
  OK(zeroc_i_cuda_add(&K.k, NULL, res0, pb, n));
  OK(zeroc_i_cuda_layernorm_forward(&K.k, NULL, out0, m0, r0, res0, pw, pbs, N, C));
  CHECK(same_bytes(res, res0, n * es) && same_bytes(out, out0, n * es) &&
            same_bytes(mean, m0, N * 4) && same_bytes(rstd, r0, N * 4),
        "residual_layernorm_forward %s %dx%d: bits of add + layernorm_forward", dn, N, C);
  void *ai = d.put(dt, a);
  OK(zeroc_i_cuda_residual_layernorm_forward(&K.k, NULL, ai, out, mean, rstd, ai, pb, pw, pbs, N,
                                             C));
  CHECK(same_bytes(ai, res0, n * es) && same_bytes(out, out0, n * es),
        "residual_layernorm_forward %s %dx%d in place on a: bits of add + layernorm_forward", dn, N,
        C);
  vec x(n); /* the sum as the kernels store it */
  for (size_t i = 0; i < n; i++) {
    x[i] = a[i] + b[i];
    if (dt == ZEROC_BF16) x[i] = zeroc_bf16_to_f32(zeroc_f32_to_bf16(x[i]));
  }
  CHECK(get(dt, res, n) == x, "residual_layernorm_forward %s %dx%d: res is not a + b", dn, N, C);
  dvec ref, rm, rr;
  ref_ln_forward(x, w, bs, N, C, ref, rm, rr);
  double e = relerr(get(dt, out, n), ref);
  CHECK(e < tol(dt), "residual_layernorm_forward %s %dx%d: error %g", dn, N, C, e);

  vec g = randv(dt, n), dr = randv(dt, n), dw = randv(dt, C), db = randv(dt, C);
  for (int c = 0; c < C; c++) g[c] = -0.0f;
  void *pg = d.put(dt, g), *pdr = d.put(dt, dr);
  for (int way = 0; way < 3; way++) { /* dres apart, dres == dinp, NULL */
    const char *how = way == 0 ? "apart" : way == 1 ? "== dinp" : "NULL";
    void *dx = d.put(dt, way == 1 ? dr : vec(n, NAN)), *gw = d.put(dt, dw), *gb = d.put(dt, db);
    const void *base = way == 0 ? pdr : way == 1 ? dx : nullptr;
    OK(zeroc_i_cuda_layernorm_backward(&K.k, NULL, dx, gw, gb, pg, res0, pw, m0, r0, N, C, base));
    void *dx0 = d.put(dt, way == 2 ? vec(n, 0.0f) : dr), *gw0 = d.put(dt, dw), *gb0 = d.put(dt, db);
    OK(zeroc_i_cuda_layernorm_backward(&K.k, NULL, dx0, gw0, gb0, pg, res0, pw, m0, r0, N, C, dx0));
    CHECK(same_bytes(dx, dx0, n * es) && same_bytes(gw, gw0, C * es) && same_bytes(gb, gb0, C * es),
          "layernorm_backward from dres %s, %s %dx%d: bits of %s + the backward", how, dn, N, C,
          way == 2 ? "a zeroed dinp" : "a copy");
    dvec rdi = way == 2 ? dvec(n, 0.0) : tod(dr), rdw = tod(dw), rdb = tod(db);
    ref_ln_backward(g, x, w, rm, rr, N, C, rdi, rdw, rdb);
    e = relerr(get(dt, dx, n), rdi);
    CHECK(e < tol(dt), "layernorm_backward from dres %s, %s %dx%d: error %g", how, dn, N, C, e);
  }
}

/* ---- matmul -------------------------------------------------------------------------- */

// inp (N,C), weight (OC,C), bias (OC) -> out (N,OC); then the backward
static void t_matmul(zeroc_dtype_t dt, int N, int C, int OC, bool bias) {
  const char *dn = zeroc_dtype_name(dt);
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, (size_t)N * C), w = randv(dt, (size_t)OC * C), b = randv(dt, OC);
  void *out = d.put(dt, vec((size_t)N * OC, NAN)), *px = d.put(dt, x), *pw = d.put(dt, w);
  OK(zeroc_i_cuda_matmul_forward(&K.k, NULL, out, px, pw, bias ? d.put(dt, b) : NULL, N, C, OC));
  dvec ref((size_t)N * OC);
  for (int r = 0; r < N; r++)
    for (int o = 0; o < OC; o++) {
      double a = bias ? b[o] : 0;
      for (int c = 0; c < C; c++) a += (double)x[(size_t)r * C + c] * w[(size_t)o * C + c];
      ref[(size_t)r * OC + o] = a;
    }
  double e = relerr(get(dt, out, (size_t)N * OC), ref);
  CHECK(e < tol(dt), "matmul_forward %s %d %d %d: error %g", dn, N, C, OC, e);

  vec g = randv(dt, (size_t)N * OC), di = randv(dt, (size_t)N * C), dw = randv(dt, (size_t)OC * C);
  vec db = randv(dt, OC);
  void *g_in = d.put(dt, di), *g_w = d.put(dt, dw), *g_b = d.put(dt, db);
  OK(zeroc_i_cuda_matmul_backward(&K.k, NULL, g_in, g_w, bias ? g_b : NULL, d.put(dt, g), px, pw, N,
                                  C, OC));
  dvec rdi = tod(di), rdw = tod(dw), rdb = tod(db);
  for (int r = 0; r < N; r++)
    for (int o = 0; o < OC; o++) {
      double go = g[(size_t)r * OC + o];
      if (bias) rdb[o] += go;
      for (int c = 0; c < C; c++) {
        rdi[(size_t)r * C + c] += go * w[(size_t)o * C + c];
        rdw[(size_t)o * C + c] += go * x[(size_t)r * C + c];
      }
    }
  e = relerr(get(dt, g_in, (size_t)N * C), rdi);
  CHECK(e < tol(dt), "matmul_backward dinp %s: error %g", dn, e);
  e = relerr(get(dt, g_w, (size_t)OC * C), rdw);
  CHECK(e < tol(dt), "matmul_backward dweight %s: error %g", dn, e);
  e = relerr(get(dt, g_b, OC), rdb);
  CHECK(bias ? e < tol(dt) : e == 0, "matmul_backward dbias %s (bias %d): error %g", dn, bias, e);
}

static double gelu_d(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_d(double x) {
  double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

// The fused linear + GELU: forward pre (N,C) = x w^T + b, out = gelu(pre); backward of the
// next layer (weight w2 (OC,C), input gelu(pre)) straight to dpre = gelu'(pre) * (dout w2)
// with dpre_bias += its column sums, and ZEROC_K_DINP_SET without pre. `epi` 0: the
// fallback kernels (ZEROC_CUDA_LT_EPILOGUE=0); C % 8 != 0 falls back too.
static void t_matmul_fused(zeroc_dtype_t dt, int N, int K0, int C, int OC, bool epi) {
  const char *dn = zeroc_dtype_name(dt);
  setenv("ZEROC_CUDA_LT_EPILOGUE", epi ? "2" : "0", 1); /* 2: GELU in the epilogue in fp32 too */
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, (size_t)N * K0), w = randv(dt, (size_t)C * K0), b = randv(dt, C);
  void *pre = d.put(dt, vec((size_t)N * C, NAN)), *out = d.put(dt, vec((size_t)N * C, NAN));
  OK(zeroc_i_cuda_matmul_forward_gelu(&K.k, NULL, pre, out, d.put(dt, x), d.put(dt, w),
                                      d.put(dt, b), N, K0, C));
  dvec rp((size_t)N * C), ro((size_t)N * C);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < C; c++) {
      double a = b[c];
      for (int j = 0; j < K0; j++) a += (double)x[(size_t)r * K0 + j] * w[(size_t)c * K0 + j];
      rp[(size_t)r * C + c] = a;
      ro[(size_t)r * C + c] = gelu_d(a);
    }
  double e = relerr(get(dt, pre, (size_t)N * C), rp);
  CHECK(e < tol(dt), "matmul_forward_gelu pre %s %d %d %d epi %d: error %g", dn, N, K0, C, epi, e);
  e = relerr(get(dt, out, (size_t)N * C), ro);
  CHECK(e < tol(dt), "matmul_forward_gelu out %s %d %d %d epi %d: error %g", dn, N, K0, C, epi, e);

  vec pv = get(dt, pre, (size_t)N * C), inp = get(dt, out, (size_t)N * C);
  vec w2 = randv(dt, (size_t)OC * C), g = randv(dt, (size_t)N * OC);
  vec dw = randv(dt, (size_t)OC * C), db = randv(dt, OC), dpb = randv(dt, C);
  void *di = d.put(dt, vec((size_t)N * C, NAN)), *g_w = d.put(dt, dw), *g_b = d.put(dt, db);
  void *g_pb = d.put(dt, dpb), *pw2 = d.put(dt, w2), *pg = d.put(dt, g);
  OK(zeroc_i_cuda_matmul_backward_ex(&K.k, NULL, di, g_w, g_b, pg, out, pw2, N, C, OC, pre, g_pb,
                                     ZEROC_K_DINP_SET));
  dvec rdi((size_t)N * C), rdw = tod(dw), rdb = tod(db), rpb = tod(dpb), rset((size_t)N * C);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < C; c++) {
      double a = 0;
      for (int o = 0; o < OC; o++) a += (double)g[(size_t)r * OC + o] * w2[(size_t)o * C + c];
      rset[(size_t)r * C + c] = a;
      rdi[(size_t)r * C + c] = a * gelu_grad_d(pv[(size_t)r * C + c]);
      rpb[c] += rdi[(size_t)r * C + c];
    }
  for (int r = 0; r < N; r++)
    for (int o = 0; o < OC; o++) {
      rdb[o] += g[(size_t)r * OC + o];
      for (int c = 0; c < C; c++)
        rdw[(size_t)o * C + c] += (double)g[(size_t)r * OC + o] * inp[(size_t)r * C + c];
    }
  const double tb = dt == ZEROC_FP32 ? tol(dt) : 2e-2; /* bias gradients: sums of N roundings */
  e = relerr(get(dt, di, (size_t)N * C), rdi);
  CHECK(e < tol(dt), "matmul_backward_ex dgelu %s epi %d C %d: error %g", dn, epi, C, e);
  e = relerr(get(dt, g_pb, C), rpb);
  CHECK(e < tb, "matmul_backward_ex dpre_bias %s epi %d C %d: error %g", dn, epi, C, e);
  e = relerr(get(dt, g_w, (size_t)OC * C), rdw);
  CHECK(e < tol(dt), "matmul_backward_ex dweight %s epi %d: error %g", dn, epi, e);
  e = relerr(get(dt, g_b, OC), rdb);
  CHECK(e < tb, "matmul_backward_ex dbias %s epi %d: error %g", dn, epi, e);
  /* ZEROC_K_DINP_SET without pre: dinp (NaN before) is the product, nothing added */
  void *ds = d.put(dt, vec((size_t)N * C, NAN));
  OK(zeroc_i_cuda_matmul_backward_ex(&K.k, NULL, ds, NULL, NULL, pg, out, pw2, N, C, OC, NULL, NULL,
                                     ZEROC_K_DINP_SET));
  e = relerr(get(dt, ds, (size_t)N * C), rset);
  CHECK(e < tol(dt), "matmul_backward_ex set %s epi %d: error %g", dn, epi, e);
  if (!epi && C % 8 == 0) {
    /* the one-pass GELU backward + column sums against gelu_scale and the two-pass sum:
     * pre and dinp one element off 16 bytes take the latter; the same bits both ways */
    void *pre1 = d.put(dt, pv, 1), *di1 = d.put(dt, vec((size_t)N * C, NAN), 1);
    void *pb0 = d.put(dt, dpb), *pb1 = d.put(dt, dpb);
    OK(zeroc_i_cuda_matmul_backward_ex(&K.k, NULL, di, NULL, NULL, pg, out, pw2, N, C, OC, pre, pb0,
                                       ZEROC_K_DINP_SET));
    OK(zeroc_i_cuda_matmul_backward_ex(&K.k, NULL, di1, NULL, NULL, pg, out, pw2, N, C, OC, pre1,
                                       pb1, ZEROC_K_DINP_SET));
    vec a0 = get(dt, di, (size_t)N * C), a1 = get(dt, di1, (size_t)N * C);
    vec b0 = get(dt, pb0, C), b1 = get(dt, pb1, C);
    CHECK(!memcmp(a0.data(), a1.data(), a0.size() * sizeof(float)) &&
              !memcmp(b0.data(), b1.data(), b0.size() * sizeof(float)),
          "dgelu + dpre_bias %s N %d C %d: one pass and two differ", dn, N, C);
  }
  unsetenv("ZEROC_CUDA_LT_EPILOGUE");
}
int main(int argc, char **argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char *s) { return only.empty() || only == s; };
  for (zeroc_dtype_t dt : {ZEROC_FP32, ZEROC_BF16}) {
    if (want("encoder")) {
      t_encoder(dt, 24); /* vector path */
      t_encoder(dt, 13); /* element path */
    }
    if (want("layernorm")) {
      t_layernorm(dt, 37, 256);
      t_layernorm(dt, 9, 100);
      t_layernorm(dt, 5, 13);
      /* rows in registers: 2..8 packs of 8 per lane (the backward to 8 in bf16, 4 in fp32), a
       * ragged last pack, and past them the loop kernels */
      t_layernorm(dt, 11, 300);
      t_layernorm(dt, 9, 768);
      t_layernorm(dt, 5, 1000);
      t_layernorm(dt, 4, 1600);
      t_layernorm(dt, 3, 2048);
      t_layernorm(dt, 3, 2056);
      for (int C : {256, 100, 13, 300, 768, 1000, 1600, 2048, 2056})
        t_layernorm_fused(dt, C < 1000 ? 9 : 3, C);
    }
    if (want("matmul")) {
      t_matmul(dt, 33, 40, 24, true);
      t_matmul(dt, 17, 8, 5, false);
      for (bool epi : {true, false}) {
        t_matmul_fused(dt, 21, 24, 40, 16, epi);
        t_matmul_fused(dt, 9, 8, 13, 5, epi); /* C % 8 != 0: the kernels even with epilogues */
        t_matmul_fused(dt, 70, 8, 264, 8, epi); /* 3 row groups, 2 column blocks of 256 */
      }
    }
    if (want("elementwise")) {
      t_elementwise(dt, 1003, 0);
      t_elementwise(dt, 1003, 1);
    }
    if (want("crossentropy")) {
      t_crossentropy(dt, 40, 1.0f / 7);
      t_crossentropy(dt, 45, 0.5f);
      t_crossentropy(dt, 40, 0.0f);
    }
    if (want("vocab")) {
      t_vocab(dt, 1.0f / 6);
      t_vocab(dt, 0.0f);
    }
    if (want("attention")) {
      t_attention(dt, 2, 70, 2, 16, 0);   /* two query tiles, HSMAX 32 */
      t_attention(dt, 1, 130, 2, 24, 0);  /* three tiles, HS % 16 != 0 */
      t_attention(dt, 1, 65, 2, 20, 0);   /* HS % 8 != 0: element loads */
      t_attention(dt, 1, 64, 1, 64, 0);   /* exactly one tile */
      t_attention(dt, 1, 100, 1, 128, 1); /* the largest head, unaligned */
      t_attention(dt, 1, 3, 3, 8, 0);
      /* bf16 here takes the tensor-core kernels (attention_mma.cu, emulated mma.cuh) */
      t_attention(dt, 2, 200, 2, 64, 0, nullptr, true); /* tiles of 64, T not a multiple */
      t_attention(dt, 1, 130, 2, 128, 0, nullptr, true); /* head 128: backward tiles of 32 */
      t_attention(dt, 1, 1, 1, 64, 0, nullptr, true);
      /* dropout on the probabilities: heads 3.. of 8 (a tp rank's), sequences from slot 5,
       * positions numbered on a longer context */
      zeroc_dropout_t dp = {0.2f, zeroc_i_dropout_key(7, 2, 1, ZEROC_DROP_ATTN), 5, 0, 70, 96, 8,
                            3};
      t_attention(dt, 2, 70, 2, 16, 0, &dp);
      dp.T = 100;
      dp.Tmax = 100;
      t_attention(dt, 1, 100, 1, 128, 1, &dp);
    }
    if (want("attention_blocks")) {
      t_attention_blocks(dt, 2, 5, 3, 16);
      t_attention_blocks(dt, 1, 3, 2, 40); /* two dims per lane, the last partly */
      t_attention_blocks(dt, 1, 2, 1, 128);
      zeroc_dropout_t dp = {0.2f, zeroc_i_dropout_key(7, 2, 1, ZEROC_DROP_ATTN), 5, 0, 20, 96, 8,
                            3};
      t_attention_blocks(dt, 2, 5, 3, 16, &dp);
    }
    if (want("llama")) t_llama(dt);
    if (want("dropout")) {
      t_dropout(dt, 7, 24, 0); /* vector path, rows not a multiple of the pack */
      t_dropout(dt, 9, 13, 1); /* element path */
    }
  }
  if (want("embedbag")) {
    t_embedbag(13);
    t_embedbag(200); /* more columns than threads */
  }
  if (want("engine")) {
    t_engine(5000, 0);
    t_engine(5003, 1);
    t_engine(300001, 0); /* more packs than the grid has threads: the grid strides */
    t_engine(3, 0);
    t_clip_scale();
  }
  printf("test_kernels_cuda_emu: %d checks, %d failed\n", g_checks, g_fail);
  return g_fail != 0;
}
