/*
 * tests/cuda_emu/test_kernels_cuda_emu.cpp - the kernels of src/kernels/cuda, turned into
 * C++ by transform.py and run on the CPU emulation in include/, against references
 * computed here in double. It checks the kernels' logic (indexing, tiling, causal masks,
 * online softmax, vector and element paths, reductions) on machines without a GPU; the
 * label `gpu` test (test_kernels_cuda.c) checks the real thing on a GPU.
 *
 * Tolerances (relative over a tensor): fp32 2e-6 (fp32 arithmetic against double),
 * bf16 1e-2; attention's backward in bf16 5e-2 on the change it makes to dqkv (the
 * change is small next to the bf16 rounding of the accumulated values). The engine
 * kernels must match the cpu formula bit for bit.
 */
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "zeroc/types.h"

/* ---- the few zeroc core functions the kernels call ----------------------------------- */

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
zeroc_result_t zeroc__env_i64(const char *name, int64_t dflt, int64_t *out) {
  const char *v = getenv(name);
  *out = v ? atoll(v) : dflt;
  return ZEROC_OK;
}
const char *zeroc_dtype_name(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? "fp32" : dt == ZEROC_BF16 ? "bf16" : "?";
}
size_t zeroc_dtype_size(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? 4 : dt == ZEROC_BF16 ? 2 : 0;
}
void *zeroc_stream_native(zeroc_stream_t *) { return nullptr; }
zeroc_result_t zeroc__device_alloc(const zeroc__devmem_t *, zeroc_memkind_t, zeroc_memtag_t,
                                   size_t bytes, void **p) {
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*p) memset(*p, 0xff, bytes); /* like fresh device memory: not zeros */
  return *p ? ZEROC_OK : ZEROC_ERR_NOMEM;
}
void zeroc__device_free(const zeroc__devmem_t *, void *p) { free(p); }
}

/* ---- checks and data ----------------------------------------------------------------- */

static int g_fail, g_checks;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    g_checks++;                                                                                    \
    if (getenv("ZEROC_EMU_VERBOSE")) {                                                             \
      printf("  ");                                                                                \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
    if (!(cond)) {                                                                                 \
      g_fail++;                                                                                    \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)
#define OK(call)                                                                                   \
  do {                                                                                             \
    zeroc_result_t r_ = (call);                                                                    \
    CHECK(r_ == ZEROC_OK, "%s -> %d: %s", #call, (int)r_, g_err);                                  \
  } while (0)

typedef std::vector<float> vec;
typedef std::vector<double> dvec;

static uint64_t g_rng = 12345;
static double urand() { /* splitmix64 */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
/* Uniform in [lo, hi), rounded to bf16 when dt is bf16 so the reference sees the same. */
static vec randv(zeroc_dtype_t dt, size_t n, float lo = -1, float hi = 1) {
  vec v(n);
  for (auto &x : v) {
    x = lo + (hi - lo) * (float)urand();
    if (dt == ZEROC_BF16) x = zeroc_bf16_to_f32(zeroc_f32_to_bf16(x));
  }
  return v;
}
static dvec tod(const vec &v) { return dvec(v.begin(), v.end()); }
static double tol(zeroc_dtype_t dt) { return dt == ZEROC_FP32 ? 2e-6 : 1e-2; }

static double relerr(const vec &a, const dvec &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); i++) {
    double d = a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

/* "Device" buffers in dt, optionally `off` elements past a 256-byte boundary. */
struct Dev {
  std::vector<void *> owned;
  ~Dev() {
    for (auto p : owned) free(p);
  }
  void *put(zeroc_dtype_t dt, const vec &v, size_t off = 0) {
    size_t es = zeroc_dtype_size(dt);
    char *base = (char *)aligned_alloc(256, ((v.size() + off) * es + 511) / 256 * 256);
    owned.push_back(base);
    char *p = base + off * es;
    for (size_t i = 0; i < v.size(); i++) {
      if (dt == ZEROC_FP32)
        ((float *)p)[i] = v[i];
      else
        ((uint16_t *)p)[i] = zeroc_f32_to_bf16(v[i]);
    }
    return p;
  }
  template <typename X> X *raw(size_t n, X fill) {
    X *p = (X *)aligned_alloc(256, (n * sizeof(X) + 511) / 256 * 256);
    owned.push_back(p);
    for (size_t i = 0; i < n; i++) p[i] = fill;
    return p;
  }
};

static vec get(zeroc_dtype_t dt, const void *p, size_t n) {
  vec v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = dt == ZEROC_FP32 ? ((const float *)p)[i] : zeroc_bf16_to_f32(((const uint16_t *)p)[i]);
  return v;
}

struct Kernels {
  zeroc_kernels_t k = {};
  explicit Kernels(zeroc_dtype_t dt) {
    k.device = ZEROC_DEVICE_CUDA;
    k.dtype = dt;
    OK(zeroc__cuda_kernels_init(&k));
  }
  ~Kernels() { zeroc__cuda_kernels_fini(&k); }
};

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
  OK(zeroc__cuda_encoder_forward(&K.k, NULL, out, tok, d.put(dt, wte), d.put(dt, wpe), B, T, C));
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
  OK(zeroc__cuda_encoder_backward(&K.k, NULL, g_wte, g_wpe, d.put(dt, dout), tok, B, T, C));
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
  OK(zeroc__cuda_layernorm_forward(&K.k, NULL, out, mean, rstd, px, pw, d.put(dt, b), N, C));
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
  OK(zeroc__cuda_layernorm_backward(&K.k, NULL, g_in, g_w, g_b, d.put(dt, g), px, pw, mean, rstd, N,
                                    C, g_in));
  dvec rdi = tod(di), rdw = tod(dw), rdb = tod(db);
  ref_ln_backward(g, x, w, rm, rr, N, C, rdi, rdw, rdb);
  e = relerr(get(dt, g_in, n), rdi);
  CHECK(e < tol(dt), "layernorm_backward dinp %s %dx%d: error %g", dn, N, C, e);
  e = relerr(get(dt, g_w, C), rdw);
  CHECK(e < tol(dt), "layernorm_backward dweight %s %dx%d: error %g", dn, N, C, e);
  e = relerr(get(dt, g_b, C), rdb);
  CHECK(e < tol(dt), "layernorm_backward dbias %s %dx%d: error %g", dn, N, C, e);
}

static bool same_bytes(const void *a, const void *b, size_t bytes) { return !memcmp(a, b, bytes); }

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
  OK(zeroc__cuda_residual_layernorm_forward(&K.k, NULL, res, out, mean, rstd, pa, pb, pw, pbs, N,
                                            C));
  void *res0 = d.put(dt, a), *out0 = d.put(dt, vec(n, NAN));
  float *m0 = d.raw<float>(N, NAN), *r0 = d.raw<float>(N, NAN);
  OK(zeroc__cuda_add(&K.k, NULL, res0, pb, n));
  OK(zeroc__cuda_layernorm_forward(&K.k, NULL, out0, m0, r0, res0, pw, pbs, N, C));
  CHECK(same_bytes(res, res0, n * es) && same_bytes(out, out0, n * es) &&
            same_bytes(mean, m0, N * 4) && same_bytes(rstd, r0, N * 4),
        "residual_layernorm_forward %s %dx%d: bits of add + layernorm_forward", dn, N, C);
  void *ai = d.put(dt, a);
  OK(zeroc__cuda_residual_layernorm_forward(&K.k, NULL, ai, out, mean, rstd, ai, pb, pw, pbs, N,
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
    OK(zeroc__cuda_layernorm_backward(&K.k, NULL, dx, gw, gb, pg, res0, pw, m0, r0, N, C, base));
    void *dx0 = d.put(dt, way == 2 ? vec(n, 0.0f) : dr), *gw0 = d.put(dt, dw), *gb0 = d.put(dt, db);
    OK(zeroc__cuda_layernorm_backward(&K.k, NULL, dx0, gw0, gb0, pg, res0, pw, m0, r0, N, C, dx0));
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
  OK(zeroc__cuda_matmul_forward(&K.k, NULL, out, px, pw, bias ? d.put(dt, b) : NULL, N, C, OC));
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
  OK(zeroc__cuda_matmul_backward(&K.k, NULL, g_in, g_w, bias ? g_b : NULL, d.put(dt, g), px, pw, N,
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
  OK(zeroc__cuda_matmul_forward_gelu(&K.k, NULL, pre, out, d.put(dt, x), d.put(dt, w), d.put(dt, b),
                                     N, K0, C));
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
  OK(zeroc__cuda_matmul_backward_ex(&K.k, NULL, di, g_w, g_b, pg, out, pw2, N, C, OC, pre, g_pb,
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
  OK(zeroc__cuda_matmul_backward_ex(&K.k, NULL, ds, NULL, NULL, pg, out, pw2, N, C, OC, NULL, NULL,
                                    ZEROC_K_DINP_SET));
  e = relerr(get(dt, ds, (size_t)N * C), rset);
  CHECK(e < tol(dt), "matmul_backward_ex set %s epi %d: error %g", dn, epi, e);
  unsetenv("ZEROC_CUDA_LT_EPILOGUE");
}

/* ---- attention ----------------------------------------------------------------------- */

/* The dropout rule of kernels/dropout.h, written out: 1/(1-p) when kept, else 0. */
static double drop_mask(const zeroc_dropout_t *dp, uint64_t row, uint32_t col) {
  uint32_t bits = zeroc__dropout_bits(zeroc__dropout_hash(dp->key, row), col);
  return (double)bits >= std::floor((double)dp->p * 4294967296.0) ? 1.0 / (1.0 - dp->p) : 0.0;
}

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T); then dqkv += from dout (B,T,C); dp: dropout
// on the probabilities (the reference multiplies each by its mask) or NULL. fresh: dqkv
// starts at 0, so the whole gradient is the change and bf16 is held to 1e-2 on it too.
static void t_attention(zeroc_dtype_t dt, int B, int T, int NH, int HS, size_t off,
                        const zeroc_dropout_t *dp_ = nullptr, bool fresh = false) {
  const char *dn = zeroc_dtype_name(dt);
  const int C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
  Dev d;
  Kernels K(dt);
  vec qkv = randv(dt, nq, -1.5f, 1.5f), g = randv(dt, no), dqkv0 = fresh ? vec(nq, 0.0f) : randv(dt, nq);
  void *pq = d.put(dt, qkv, off), *out = d.put(dt, vec(no, NAN), off);
  float *lse = d.raw<float>((size_t)B * NH * T, NAN);
  OK(zeroc__cuda_attention_forward(&K.k, NULL, out, lse, pq, B, T, C, NH, dp_));

  const double sc = 1 / std::sqrt((double)HS);
  dvec ro(no), rl((size_t)B * NH * T), rd = tod(dqkv0);
  auto at = [&](int b, int t, int part, int h, int x) {
    return ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * HS + x;
  };
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < T; i++) {
        dvec s(i + 1), p(i + 1), dp(i + 1), m(i + 1, 1.0);
        double mx = -1e300, sum = 0, D = 0;
        if (dp_)
          for (int j = 0; j <= i; j++) {
            uint64_t bh = (dp_->seq0 + (uint64_t)b) * (uint64_t)dp_->width + (dp_->first + h);
            m[j] = drop_mask(dp_, bh * dp_->Tmax + (uint64_t)i, (uint32_t)j);
          }
        for (int j = 0; j <= i; j++) {
          double a = 0;
          for (int x = 0; x < HS; x++) a += (double)qkv[at(b, i, 0, h, x)] * qkv[at(b, j, 1, h, x)];
          s[j] = a * sc;
          mx = std::max(mx, s[j]);
        }
        for (int j = 0; j <= i; j++) sum += std::exp(s[j] - mx);
        rl[((size_t)b * NH + h) * T + i] = mx + std::log(sum);
        for (int j = 0; j <= i; j++) p[j] = std::exp(s[j] - mx) / sum;
        const size_t o = ((size_t)b * T + i) * C + (size_t)h * HS;
        for (int x = 0; x < HS; x++) {
          double a = 0;
          for (int j = 0; j <= i; j++) a += m[j] * p[j] * qkv[at(b, j, 2, h, x)];
          ro[o + x] = a;
        }
        for (int j = 0; j <= i; j++) {
          double a = 0;
          for (int x = 0; x < HS; x++) a += (double)g[o + x] * qkv[at(b, j, 2, h, x)];
          dp[j] = m[j] * a;
          D += p[j] * dp[j];
        }
        for (int j = 0; j <= i; j++) {
          double ds = p[j] * (dp[j] - D);
          for (int x = 0; x < HS; x++) {
            rd[at(b, i, 0, h, x)] += sc * ds * qkv[at(b, j, 1, h, x)];
            rd[at(b, j, 1, h, x)] += sc * ds * qkv[at(b, i, 0, h, x)];
            rd[at(b, j, 2, h, x)] += m[j] * p[j] * g[o + x];
          }
        }
      }
  double e = relerr(get(dt, out, no), ro);
  CHECK(e < tol(dt), "attention_forward %s B %d T %d NH %d HS %d off %zu: error %g", dn, B, T, NH,
        HS, off, e);
  e = relerr(vec(lse, lse + (size_t)B * NH * T), rl);
  CHECK(e < 1e-5, "attention_forward lse %s T %d HS %d: error %g", dn, T, HS, e);

  void *pd = d.put(dt, dqkv0, off);
  OK(zeroc__cuda_attention_backward(&K.k, NULL, pd, d.put(dt, g, off), pq, out, lse, B, T, C, NH,
                                    dp_));
  vec got = get(dt, pd, nq), change(nq);
  dvec want(nq);
  for (size_t i = 0; i < nq; i++) {
    change[i] = got[i] - dqkv0[i];
    want[i] = rd[i] - dqkv0[i];
  }
  e = relerr(change, want);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-5 : fresh ? 1e-2 : 5e-2),
        "attention_backward %s B %d T %d NH %d HS %d off %zu: error %g", dn, B, T, NH, HS, off, e);
}

/* ---- attention blocks (context parallelism) ------------------------------------------ */

/* A causal sequence of T = 4c tokens cut into 4 chunks, every visible (query chunk, key
 * chunk) pair a block (diagonal or full) merged by log-sum-exp, then every pair's backward
 * with the final out and lse: equals the one-piece kernel (itself checked against double
 * above), out, lse and dqkv; plus the strided row copy, assigned and accumulated. */
static void t_attention_blocks(zeroc_dtype_t dt, int B, int c, int NH, int HS,
                               const zeroc_dropout_t *dp = nullptr) {
  const char *dn = zeroc_dtype_name(dt);
  const int T = 4 * c, C = NH * HS, NCH = 4;
  const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
  Dev d;
  Kernels K(dt);
  vec qkv = randv(dt, n3, -1.5f, 1.5f), g = randv(dt, n1);
  void *pq = d.put(dt, qkv), *pg = d.put(dt, g);
  void *out = d.put(dt, vec(n1, NAN)), *dq = d.put(dt, vec(n3, 0.0f));
  float *lse = d.raw<float>(nl, NAN);
  OK(zeroc__cuda_attention_forward(&K.k, NULL, out, lse, pq, B, T, C, NH, dp));
  OK(zeroc__cuda_attention_backward(&K.k, NULL, dq, pg, pq, out, lse, B, T, C, NH, dp));
  void *o2 = d.put(dt, vec(n1, NAN)), *dq2 = d.put(dt, vec(n3, 0.0f));
  float *l2 = d.raw<float>(nl, NAN), *pl = d.raw<float>(nl, NAN);
  void *po = d.put(dt, vec(n1, NAN));
  const size_t es = zeroc_dtype_size(dt);
  auto at = [&](void *p, size_t e) { return (void *)((char *)p + e * es); };
  for (int pass = 0; pass < 2; pass++)
    for (int qc = 0; qc < NCH; qc++)
      for (int kc = 0; kc <= qc; kc++) {
        zeroc_attn_block_t a = {B, NH, HS, c, c, qc == kc, 3 * (size_t)C, (size_t)T * 3 * C,
                                3 * (size_t)C, (size_t)T * 3 * C, (size_t)C, (size_t)T * C,
                                (size_t)T, (size_t)NH * T, (int64_t)qc * c, (int64_t)kc * c};
        void *q = at(pq, (size_t)qc * c * 3 * C), *kk = at(pq, (size_t)kc * c * 3 * C + C);
        void *oq = at(o2, (size_t)qc * c * C);
        if (pass == 0) {
          OK(zeroc__cuda_attention_block_forward(&K.k, NULL, po, pl, q, kk, at(kk, C), &a, dp));
          OK(zeroc__cuda_attention_merge(&K.k, NULL, oq, l2 + qc * c, po, pl, &a, kc == 0));
        } else {
          void *gq = at(dq2, (size_t)qc * c * 3 * C), *gk = at(dq2, (size_t)kc * c * 3 * C + C);
          OK(zeroc__cuda_attention_block_backward(&K.k, NULL, gq, gk, at(gk, C),
                                                  at(pg, (size_t)qc * c * C), q, kk, at(kk, C), oq,
                                                  l2 + qc * c, &a, dp));
        }
      }
  const double to = dt == ZEROC_FP32 ? 1e-5 : 2e-2, tb = dt == ZEROC_FP32 ? 1e-5 : 5e-2;
  double e = relerr(get(dt, o2, n1), tod(get(dt, out, n1)));
  CHECK(e < to, "attention blocks %s B %d c %d NH %d HS %d drop %d: out error %g", dn, B, c, NH,
        HS, dp != nullptr, e);
  CHECK((e = relerr(vec(l2, l2 + nl), tod(vec(lse, lse + nl)))) < 1e-5, "blocks lse %s: %g", dn, e);
  e = relerr(get(dt, dq2, n3), tod(get(dt, dq, n3)));
  CHECK(e < tb, "attention blocks %s B %d c %d NH %d HS %d drop %d: dqkv error %g", dn, B, c, NH,
        HS, dp != nullptr, e);
  /* rows 1.. of width 3 from a stride-5 source into a stride-7 destination, twice (add) */
  vec src = randv(dt, 20), dst0(28, 0.5f);
  void *pd = d.put(dt, dst0);
  OK(zeroc__cuda_copy_rows(&K.k, NULL, at(pd, 1), 7, at(d.put(dt, src), 2), 5, 4, 3, 0));
  vec once = get(dt, pd, 28);
  size_t bad = 0;
  for (int r = 0; r < 4; r++)
    for (int w = 0; w < 7; w++)
      bad += once[r * 7 + w] != (w >= 1 && w < 4 ? src[r * 5 + 1 + w] : 0.5f);
  CHECK(bad == 0, "copy_rows %s: %zu differ", dn, bad);
}

/* ---- dropout ------------------------------------------------------------------------ */

// in (N,C) -> out (N,C) = in * mask: bit for bit the rule (in fp32, rounded once to dt), in
// place too, with rows starting at row0 (a sequence-parallel rank's)
static void t_dropout(zeroc_dtype_t dt, int T, int C, size_t off) {
  const char *dn = zeroc_dtype_name(dt);
  const int B = 3, N = B * T - 2; /* a row split that does not start a sequence */
  Dev d;
  Kernels K(dt);
  zeroc_dropout_t dp = {0.3f, zeroc__dropout_key(1, 9, 4, ZEROC_DROP_MLP_RESID), 6, 2, T, T + 5,
                        C, 0};
  vec x = randv(dt, (size_t)N * C);
  void *px = d.put(dt, x, off), *py = d.put(dt, vec((size_t)N * C, NAN), off);
  OK(zeroc__cuda_dropout(&K.k, NULL, py, px, &dp, N, C));
  const float sc = zeroc__dropout_scale(dp.p);
  size_t bad = 0, kept = 0;
  vec want((size_t)N * C);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < C; c++) {
      const int64_t g = dp.row0 + r;
      const uint64_t row = (dp.seq0 + (uint64_t)(g / T)) * dp.Tmax + (uint64_t)(g % T);
      const size_t i = (size_t)r * C + c;
      const bool k = drop_mask(&dp, row, (uint32_t)c) != 0;
      kept += k;
      float w = k ? x[i] * sc : 0.0f;
      if (dt == ZEROC_BF16) w = zeroc_bf16_to_f32(zeroc_f32_to_bf16(w));
      want[i] = w;
    }
  vec got = get(dt, py, (size_t)N * C);
  for (size_t i = 0; i < got.size(); i++) bad += memcmp(&got[i], &want[i], 4) != 0;
  CHECK(bad == 0 && kept > 0 && kept < got.size(), "dropout %s T %d C %d: %zu differ, %zu kept",
        dn, T, C, bad, kept);
  OK(zeroc__cuda_dropout(&K.k, NULL, px, px, &dp, N, C));
  got = get(dt, px, (size_t)N * C);
  bad = 0;
  for (size_t i = 0; i < got.size(); i++) bad += memcmp(&got[i], &want[i], 4) != 0;
  CHECK(bad == 0, "dropout in place %s T %d C %d: %zu differ", dn, T, C, bad);
}

/* ---- elementwise --------------------------------------------------------------------- */

static void t_elementwise(zeroc_dtype_t dt, size_t n, size_t off) {
  const char *dn = zeroc_dtype_name(dt);
  const double s = std::sqrt(2 / M_PI);
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, n, -4, 4), y = randv(dt, n), z = randv(dt, n);
  void *out = d.put(dt, vec(n, NAN), off), *px = d.put(dt, x, off);
  OK(zeroc__cuda_gelu_forward(&K.k, NULL, out, px, n));
  dvec r(n);
  for (size_t i = 0; i < n; i++)
    r[i] = 0.5 * x[i] * (1 + std::tanh(s * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  double e = relerr(get(dt, out, n), r);
  CHECK(e < tol(dt), "gelu_forward %s n %zu off %zu: error %g", dn, n, off, e);

  void *pz = d.put(dt, z, off);
  OK(zeroc__cuda_gelu_backward(&K.k, NULL, pz, px, d.put(dt, y, off), n));
  for (size_t i = 0; i < n; i++) {
    double t = std::tanh(s * (x[i] + 0.044715 * x[i] * x[i] * x[i]));
    r[i] = z[i] +
           y[i] * (0.5 * (1 + t) + 0.5 * x[i] * (1 - t * t) * s * (1 + 3 * 0.044715 * x[i] * x[i]));
  }
  e = relerr(get(dt, pz, n), r);
  CHECK(e < tol(dt), "gelu_backward %s n %zu off %zu: error %g", dn, n, off, e);

  void *py = d.put(dt, y, off);
  OK(zeroc__cuda_residual_forward(&K.k, NULL, py, py, d.put(dt, z, off), n)); /* out aliases a */
  for (size_t i = 0; i < n; i++) r[i] = (double)y[i] + z[i];
  e = relerr(get(dt, py, n), r);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-7 : 4e-3), "residual_forward %s: error %g", dn, e);
  OK(zeroc__cuda_add(&K.k, NULL, py, d.put(dt, x, off), n));
  for (size_t i = 0; i < n; i++) r[i] += x[i];
  e = relerr(get(dt, py, n), r);
  CHECK(e < tol(dt), "add %s: error %g", dn, e);
}

/* ---- classifier ---------------------------------------------------------------------- */

// logits (N,Vp) -> losses (N), logits = dloss * (softmax - onehot); row 2 has no target
static void t_crossentropy(zeroc_dtype_t dt, int Vp, float dloss) {
  const char *dn = zeroc_dtype_name(dt);
  const int N = 7, V = 37;
  Dev d;
  Kernels K(dt);
  vec lg = randv(dt, (size_t)N * Vp, -3, 5);
  int32_t *tg = d.raw<int32_t>(N, 0);
  for (int r = 0; r < N; r++) tg[r] = r == 2 ? -1 : (int)(urand() * V);
  float *loss = d.raw<float>(N, NAN);
  void *pl = d.put(dt, lg);
  OK(zeroc__cuda_crossentropy_forward_backward(&K.k, NULL, loss, pl, tg, N, V, Vp, dloss));
  dvec rl(N), rg((size_t)N * Vp);
  for (int r = 0; r < N; r++) {
    const float *row = &lg[(size_t)r * Vp];
    double mx = -1e300, sum = 0;
    for (int j = 0; j < V; j++) mx = std::max(mx, (double)row[j]);
    for (int j = 0; j < V; j++) sum += std::exp(row[j] - mx);
    rl[r] = tg[r] < 0 ? 0 : mx + std::log(sum) - row[tg[r]];
    for (int j = 0; j < Vp; j++) {
      double grad = tg[r] < 0 || j >= V ? 0 : dloss * (std::exp(row[j] - mx) / sum - (j == tg[r]));
      rg[(size_t)r * Vp + j] = dloss == 0 ? row[j] : grad;
    }
  }
  double e = relerr(vec(loss, loss + N), rl);
  CHECK(e < 1e-6, "crossentropy losses %s Vp %d: error %g", dn, Vp, e);
  e = relerr(get(dt, pl, (size_t)N * Vp), rg);
  CHECK(dloss == 0 ? e == 0 : e < tol(dt), "crossentropy logits %s Vp %d dloss %g: error %g", dn,
        Vp, dloss, e);

  tg[0] = V; /* out of range: a NaN loss, the other rows unharmed, padding still 0 */
  pl = d.put(dt, lg);
  OK(zeroc__cuda_crossentropy_forward_backward(&K.k, NULL, loss, pl, tg, N, V, Vp, dloss));
  CHECK(std::isnan(loss[0]) && std::fabs(loss[1] - rl[1]) < 1e-5 * std::fabs(rl[1]),
        "crossentropy with target V: losses %g %g", loss[0], loss[1]);
  const vec row0 = get(dt, pl, Vp);
  double pad = 0;
  for (int j = V; j < Vp; j++) pad += std::fabs(row0[j] - (dloss == 0 ? lg[j] : 0.0f));
  CHECK(pad == 0, "crossentropy with target V: padding columns changed by %g", pad);
}

/* ---- vocabulary-parallel (tensor parallelism) ------------------------------------------ */

// Two ranks' slices of a vocabulary of V = 37 padded to 48 (24 rows each); the
// all-reduces between the cross-entropy passes are done here on the host. The
// result must equal the unsplit softmax cross-entropy and embedding.
static void t_vocab(zeroc_dtype_t dt, float dloss) {
  const char *dn = zeroc_dtype_name(dt);
  const int N = 6, V = 37, Vp = 48, Vl = 24, C = 8, B = 2, T = 3;
  Dev d;
  Kernels K(dt);
  vec lg = randv(dt, (size_t)N * Vp, -3, 5);
  int32_t *tg = d.raw<int32_t>(N, 0);
  for (int r = 0; r < N; r++) tg[r] = r == 1 ? -1 : (int)(urand() * V);
  tg[3] = 30; /* a target in the second slice (its real columns end at 37) */
  float *mx[2], *xt[2], *se[2], *loss[2];
  void *pl[2];
  for (int k = 0; k < 2; k++) {
    vec part((size_t)N * Vl);
    for (int r = 0; r < N; r++)
      for (int j = 0; j < Vl; j++) part[(size_t)r * Vl + j] = lg[(size_t)r * Vp + k * Vl + j];
    pl[k] = d.put(dt, part);
    mx[k] = d.raw<float>(N, NAN);
    xt[k] = d.raw<float>(N, NAN);
    se[k] = d.raw<float>(N, NAN);
    loss[k] = d.raw<float>(N, NAN);
    OK(zeroc__cuda_vocab_ce_local(&K.k, NULL, mx[k], xt[k], pl[k], tg, N, Vl, k * Vl, V));
  }
  float *gmx = d.raw<float>(N, 0), *gxt = d.raw<float>(N, 0), *gse = d.raw<float>(N, 0);
  for (int r = 0; r < N; r++) gmx[r] = std::max(mx[0][r], mx[1][r]), gxt[r] = xt[0][r] + xt[1][r];
  for (int k = 0; k < 2; k++) OK(zeroc__cuda_vocab_ce_sumexp(&K.k, NULL, se[k], pl[k], gmx, N, Vl, k * Vl, V));
  for (int r = 0; r < N; r++) gse[r] = se[0][r] + se[1][r];
  for (int k = 0; k < 2; k++)
    OK(zeroc__cuda_vocab_ce_finish(&K.k, NULL, loss[k], pl[k], tg, gmx, gse, gxt, N, Vl, k * Vl, V, dloss));
  dvec rl(N), rg((size_t)N * Vp);
  for (int r = 0; r < N; r++) {
    const float *row = &lg[(size_t)r * Vp];
    double m = -1e300, sum = 0;
    for (int j = 0; j < V; j++) m = std::max(m, (double)row[j]);
    for (int j = 0; j < V; j++) sum += std::exp(row[j] - m);
    rl[r] = tg[r] < 0 ? 0 : m + std::log(sum) - row[tg[r]];
    for (int j = 0; j < Vp; j++)
      rg[(size_t)r * Vp + j] = tg[r] < 0 || j >= V ? 0 : dloss * (std::exp(row[j] - m) / sum - (j == tg[r]));
  }
  double el = 0, nl = 0;
  for (int k = 0; k < 2; k++)
    for (int r = 0; r < N; r++) {
      el += std::pow(loss[k][r] - rl[r], 2);
      nl += rl[r] * rl[r];
    }
  CHECK(std::sqrt(el / nl) < 1e-6, "vocab cross-entropy losses %s: error %g", dn, std::sqrt(el / nl));
  if (dloss != 0) {
    vec got((size_t)N * Vp);
    for (int k = 0; k < 2; k++) {
      vec part = get(dt, pl[k], (size_t)N * Vl);
      for (int r = 0; r < N; r++)
        for (int j = 0; j < Vl; j++) got[(size_t)r * Vp + k * Vl + j] = part[(size_t)r * Vl + j];
    }
    double e = relerr(got, rg);
    CHECK(e < tol(dt), "vocab cross-entropy gradient %s: error %g", dn, e);
  }
  /* the embedding: each slice writes only its tokens' rows; the sum is the whole */
  vec wte = randv(dt, (size_t)Vp * C), wpe = randv(dt, (size_t)T * C), dout = randv(dt, (size_t)B * T * C);
  int32_t *ids = d.raw<int32_t>(B * T, 0);
  for (int i = 0; i < B * T; i++) ids[i] = i == 4 ? ids[0] : (int)(urand() * V); /* a repeat */
  dvec out((size_t)B * T * C, 0), dw((size_t)Vp * C, 0);
  for (int k = 0; k < 2; k++) {
    vec slice(wte.begin() + (size_t)k * Vl * C, wte.begin() + (size_t)(k + 1) * Vl * C);
    void *o = d.put(dt, vec((size_t)B * T * C, NAN));
    OK(zeroc__cuda_vocab_embed_forward(&K.k, NULL, o, ids, d.put(dt, slice), k == 0 ? d.put(dt, wpe) : NULL,
                                       B, T, C, k * Vl, Vl));
    vec got = get(dt, o, (size_t)B * T * C);
    for (size_t i = 0; i < got.size(); i++) out[i] += got[i];
    vec dws = randv(dt, (size_t)Vl * C, -1, 1);
    void *pd = d.put(dt, dws);
    OK(zeroc__cuda_vocab_embed_backward(&K.k, NULL, pd, NULL, d.put(dt, dout), ids, B, T, C, k * Vl, Vl));
    vec gd = get(dt, pd, (size_t)Vl * C);
    for (size_t i = 0; i < gd.size(); i++) dw[(size_t)k * Vl * C + i] = (double)gd[i] - dws[i];
  }
  dvec ro((size_t)B * T * C), rw((size_t)Vp * C, 0);
  for (int i = 0; i < B * T; i++)
    for (int c = 0; c < C; c++) {
      ro[(size_t)i * C + c] = (double)wte[(size_t)ids[i] * C + c] + wpe[(size_t)(i % T) * C + c];
      rw[(size_t)ids[i] * C + c] += dout[(size_t)i * C + c];
    }
  double e = relerr(vec(out.begin(), out.end()), ro);
  CHECK(e < tol(dt), "vocab embedding forward %s: error %g", dn, e);
  e = relerr(vec(dw.begin(), dw.end()), rw);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-5 : 3e-2), "vocab embedding backward %s: error %g", dn, e);
}

/* ---- engine -------------------------------------------------------------------------- */

static void t_engine(size_t n, size_t off) {
  Dev d;
  Kernels K(ZEROC_FP32);
  vec x = randv(ZEROC_FP32, n, -100, 100);
  const float special[] = {NAN,         INFINITY, -INFINITY, 1.00390625f,
                           1.01171875f, -0.0f,    3.4e38f,   1e-40f};
  for (size_t i = 0; i < 8 && i < n; i++) x[i] = special[i];
  float *src = (float *)d.put(ZEROC_FP32, x, off);
  uint16_t *bf = (uint16_t *)d.put(ZEROC_BF16, vec(n, 0), off);
  OK(zeroc__cuda_cast(&K.k, NULL, bf, ZEROC_BF16, src, ZEROC_FP32, n));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += bf[i] != zeroc_f32_to_bf16(x[i]);
  CHECK(bad == 0, "cast fp32 -> bf16 n %zu: %zu differ from zeroc_f32_to_bf16", n, bad);
  float *back = (float *)d.put(ZEROC_FP32, vec(n, NAN), off);
  OK(zeroc__cuda_cast(&K.k, NULL, back, ZEROC_FP32, bf, ZEROC_BF16, n));
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float r = zeroc_bf16_to_f32(bf[i]);
    bad += memcmp(&r, &back[i], 4) != 0;
  }
  CHECK(bad == 0, "cast bf16 -> fp32 n %zu: %zu differ", n, bad);

  vec a = randv(ZEROC_FP32, n), b = randv(ZEROC_BF16, n);
  float *pa = (float *)d.put(ZEROC_FP32, a, off);
  OK(zeroc__cuda_accumulate(&K.k, NULL, pa, d.put(ZEROC_BF16, b, off), ZEROC_BF16, n, 0.37f));
  OK(zeroc__cuda_scale(&K.k, NULL, pa, n, -1.7f));
  bad = 0;
  for (size_t i = 0; i < n; i++) bad += pa[i] != (a[i] + 0.37f * b[i]) * -1.7f;
  CHECK(bad == 0, "accumulate + scale n %zu: %zu differ", n, bad);

  /* add_to, against the cpu twin's rule: fp32 adds exactly; bf16 adds in fp32
   * and rounds once, to nearest even */
  vec w = randv(ZEROC_FP32, n), y = randv(ZEROC_FP32, n);
  const float *pw = (const float *)d.put(ZEROC_FP32, w, off);
  float *py = (float *)d.put(ZEROC_FP32, y, off);
  uint16_t *pz = (uint16_t *)d.put(ZEROC_BF16, randv(ZEROC_BF16, n), off);
  std::vector<uint16_t> z0(pz, pz + n);
  OK(zeroc__cuda_add_to(&K.k, NULL, py, ZEROC_FP32, pw, n));
  OK(zeroc__cuda_add_to(&K.k, NULL, pz, ZEROC_BF16, pw, n));
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float f = y[i] + w[i];
    bad += memcmp(&f, &py[i], 4) != 0;
    bad += pz[i] != zeroc_f32_to_bf16(zeroc_bf16_to_f32(z0[i]) + w[i]);
  }
  CHECK(bad == 0, "add_to fp32 and bf16 n %zu: %zu differ", n, bad);

  double *acc = d.raw<double>(1, 2.5), want = 2.5;
  OK(zeroc__cuda_sumsq(&K.k, NULL, acc, pa, n));
  for (size_t i = 0; i < n; i++) want += (double)pa[i] * pa[i];
  CHECK(std::fabs(*acc - want) <= 1e-12 * want, "sumsq n %zu: %.17g, want %.17g", n, *acc, want);

  /* a loss head's mean added on the device: (float)(sum / denom) twice, against the
   * index-order sum of the cpu twin (the block's order differs: fp32 rounding at worst) */
  vec ls = randv(ZEROC_FP32, n, 0, 12);
  const float *pl = (const float *)d.put(ZEROC_FP32, ls, off);
  double *lacc = d.raw<double>(2, -1.0), lwant = -1.0;
  OK(zeroc__cuda_mean_add(&K.k, NULL, lacc, pl, n, (double)n));
  OK(zeroc__cuda_mean_add(&K.k, NULL, lacc, pl, n, 3.0));
  for (double den : {(double)n, 3.0}) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += ls[i];
    lwant += (double)(float)(sum / den);
  }
  CHECK(std::fabs(lacc[0] - lwant) <= 1e-6 * std::fabs(lwant), "mean_add n %zu: %.17g, want %.17g",
        n, lacc[0], lwant);
  CHECK(lacc[1] == -1.0, "mean_add n %zu wrote past its double: %g", n, lacc[1]);

  vec p = randv(ZEROC_FP32, n), m = randv(ZEROC_FP32, n, -0.1f, 0.1f),
      v = randv(ZEROC_FP32, n, 0, 0.01f);
  vec g = randv(ZEROC_FP32, n);
  float *pp = (float *)d.put(ZEROC_FP32, p, off), *pm = (float *)d.put(ZEROC_FP32, m, off);
  float *pv = (float *)d.put(ZEROC_FP32, v, off);
  const zeroc_adamw_args_t ar = {3e-4f, 0.9f, 0.95f,           1e-8f,
                                 0.1f,  0.8f, 1 - 0.9f * 0.9f, 1 - 0.95f * 0.95f};
  OK(zeroc__cuda_adamw(&K.k, NULL, pp, pm, pv, (float *)d.put(ZEROC_FP32, g, off), n, &ar));
  /* kernels/cpu/engine.c's formula, operation for operation */
  const float ib1 = 1.0f - ar.beta1, ib2 = 1.0f - ar.beta2;
  const float rbc1 = 1.0f / ar.bias_corr1, rbc2 = 1.0f / ar.bias_corr2;
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * ar.grad_scale;
    float mi = ar.beta1 * m[i] + ib1 * gi, vi = ar.beta2 * v[i] + ib2 * gi * gi;
    float pi = p[i] - ar.lr * ((mi * rbc1) / (sqrtf(vi * rbc2) + ar.eps) + ar.weight_decay * p[i]);
    bad += pi != pp[i] || mi != pm[i] || vi != pv[i];
  }
  CHECK(bad == 0, "adamw n %zu: %zu differ", n, bad);

  /* adamw_mixed: the bf16 gradient read as is, the new param also written in bf16 (and
   * fp32): the bits of cast + adamw + cast, so of the loop above on the same inputs */
  for (int od = 0; od < 2; od++) {
    const zeroc_dtype_t out_dt = od ? ZEROC_FP32 : ZEROC_BF16;
    vec gb = randv(ZEROC_BF16, n); /* bf16 values: exact in fp32 */
    float *qp = (float *)d.put(ZEROC_FP32, p, off), *qm = (float *)d.put(ZEROC_FP32, m, off);
    float *qv = (float *)d.put(ZEROC_FP32, v, off);
    void *qo = d.put(out_dt, vec(n, NAN), off);
    OK(zeroc__cuda_adamw_mixed(&K.k, NULL, qp, qm, qv, d.put(ZEROC_BF16, gb, off), ZEROC_BF16, qo,
                               out_dt, n, &ar));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      float gi = gb[i] * ar.grad_scale;
      float mi = ar.beta1 * m[i] + ib1 * gi, vi = ar.beta2 * v[i] + ib2 * gi * gi;
      float pi =
          p[i] - ar.lr * ((mi * rbc1) / (sqrtf(vi * rbc2) + ar.eps) + ar.weight_decay * p[i]);
      bool ob = od ? ((float *)qo)[i] != pi : ((uint16_t *)qo)[i] != zeroc_f32_to_bf16(pi);
      bad += pi != qp[i] || mi != qm[i] || vi != qv[i] || ob;
    }
    CHECK(bad == 0, "adamw_mixed (bf16 grad, %s out) n %zu: %zu differ", zeroc_dtype_name(out_dt),
          n, bad);
  }
}

// embed/'s bags: w (R,dc), nb bags in blocks of 3 (out rows blk_stride apart), then
// the compact gradient, row sums of squares and row-wise AdaGrad on rows 1, 4, 6
static void t_embedbag(int dc) {
  Kernels K(ZEROC_FP32);
  Dev d;
  const int R = 7, nb = 8, blk = 3, ldo = dc + 2, stride = blk * ldo + 5;
  vec w = randv(ZEROC_FP32, (size_t)R * dc), dout = randv(ZEROC_FP32, (size_t)3 * stride);
  int32_t *offs = d.raw<int32_t>(nb + 1, 0);
  int64_t *idx = d.raw<int64_t>(3 * nb, 0);
  for (int b = 0; b < nb; b++) { /* bags of 0..3 ids with repeats */
    offs[b + 1] = offs[b] + b % 4;
    for (int i = offs[b]; i < offs[b + 1]; i++) idx[i] = (int64_t)(urand() * R);
  }
  float *out = (float *)d.put(ZEROC_FP32, vec((size_t)3 * stride, 0.0f)), *pw = (float *)d.put(ZEROC_FP32, w);
  OK(zeroc__cuda_embedbag_forward(&K.k, NULL, out, blk, stride, ldo, pw, dc, idx, offs, nb, dc));
  vec got, gg;
  dvec want, wg((size_t)R * dc, 0.0);
  for (int b = 0; b < nb; b++) {
    size_t o = (size_t)(b / blk) * stride + (size_t)(b % blk) * ldo;
    for (int j = 0; j < dc; j++) {
      double a = 0;
      for (int i = offs[b]; i < offs[b + 1]; i++) {
        a += w[(size_t)idx[i] * dc + j];
        wg[(size_t)idx[i] * dc + j] += dout[o + j];
      }
      got.push_back(out[o + j]);
      want.push_back(a);
    }
  }
  CHECK(relerr(got, want) <= tol(ZEROC_FP32), "embedbag_forward dc %d: rel %.3g", dc, relerr(got, want));
  float *g = (float *)d.put(ZEROC_FP32, vec((size_t)R * dc, 0.0f));
  OK(zeroc__cuda_embedbag_backward(&K.k, NULL, g, dc, idx, offs, nb, (float *)d.put(ZEROC_FP32, dout), blk, stride, ldo, dc));
  gg = get(ZEROC_FP32, g, (size_t)R * dc);
  CHECK(relerr(gg, wg) <= tol(ZEROC_FP32), "embedbag_backward dc %d: rel %.3g", dc, relerr(gg, wg));
  vec st = randv(ZEROC_FP32, R, 0.1f, 1.0f), gr = randv(ZEROC_FP32, (size_t)3 * dc);
  float *ss = d.raw<float>(3, NAN), *pg = (float *)d.put(ZEROC_FP32, gr), *pst = (float *)d.put(ZEROC_FP32, st);
  int64_t *rows = d.raw<int64_t>(3, 0);
  rows[0] = 1, rows[1] = 4, rows[2] = 6;
  OK(zeroc__cuda_rowwise_sumsq(&K.k, NULL, ss, pg, 3, dc, 0.5f));
  OK(zeroc__cuda_rowwise_adagrad(&K.k, NULL, pw, dc, pst, rows, pg, ss, 3, dc, dc + 1, 0.5f, 0.1f, 1e-8f));
  dvec ws = tod(w), wst = tod(st);
  for (int u = 0; u < 3; u++) {
    double q = 0;
    for (int j = 0; j < dc; j++) q += 0.25 * gr[(size_t)u * dc + j] * gr[(size_t)u * dc + j];
    wst[rows[u]] += q / (dc + 1);
    for (int j = 0; j < dc; j++)
      ws[(size_t)rows[u] * dc + j] -= 0.1 * 0.5 * gr[(size_t)u * dc + j] / (std::sqrt(wst[rows[u]]) + 1e-8);
  }
  CHECK(relerr(get(ZEROC_FP32, pw, (size_t)R * dc), ws) <= tol(ZEROC_FP32), "rowwise_adagrad dc %d", dc);
  CHECK(relerr(get(ZEROC_FP32, pst, R), wst) <= tol(ZEROC_FP32), "rowwise_adagrad state dc %d", dc);
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
      /* rows in registers: 2..8 packs of 8 per lane (the backward to 4), a ragged last
       * pack, and past them the loop kernels */
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
      zeroc_dropout_t dp = {0.2f, zeroc__dropout_key(7, 2, 1, ZEROC_DROP_ATTN), 5, 0, 70, 96, 8, 3};
      t_attention(dt, 2, 70, 2, 16, 0, &dp);
      dp.T = 100;
      dp.Tmax = 100;
      t_attention(dt, 1, 100, 1, 128, 1, &dp);
    }
    if (want("attention_blocks")) {
      t_attention_blocks(dt, 2, 5, 3, 16);
      t_attention_blocks(dt, 1, 3, 2, 40); /* two dims per lane, the last partly */
      t_attention_blocks(dt, 1, 2, 1, 128);
      zeroc_dropout_t dp = {0.2f, zeroc__dropout_key(7, 2, 1, ZEROC_DROP_ATTN), 5, 0, 20, 96, 8, 3};
      t_attention_blocks(dt, 2, 5, 3, 16, &dp);
    }
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
  }
  printf("test_kernels_cuda_emu: %d checks, %d failed\n", g_checks, g_fail);
  return g_fail != 0;
}
