/*
 * tests/cuda_emu/emu_check.h - what the tests on the CPU emulation of CUDA share: the
 * CHECK/OK counters, random data, double references' error measure, "device" buffers
 * and a kernels object (emu_stubs.c holds the zeroc core functions the kernels call).
 * test_kernels_cuda_emu.cpp (main, encoder, layernorm, matmul), emu_attention.cpp
 * (attention, its context-parallel blocks, dropout), emu_vocab_engine.cpp
 * (elementwise, cross-entropy, vocabulary-parallel, engine, embedding bags) and
 * emu_llama.cpp (RMSNorm, RoPE, SwiGLU) are one program; test_dlrm_cuda_emu.cpp is
 * another.
 */
#ifndef ZEROC_TESTS_CUDA_EMU_EMU_CHECK_H
#define ZEROC_TESTS_CUDA_EMU_EMU_CHECK_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "zeroc/types.h"

/* emu_stubs.c: the calling thread's last error message (ZEROC_FAIL's); the cuda knobs
 * from the environment, as kernels/kernels.c reads them */
extern "C" const char *emu_error(void);
extern "C" void emu_cuda_knobs(zeroc_i_cuda_knobs_t *kn);
inline int g_fail, g_checks;

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
    CHECK(r_ == ZEROC_OK, "%s -> %d: %s", #call, (int)r_, emu_error());                            \
  } while (0)

typedef std::vector<float> vec;
typedef std::vector<double> dvec;

inline uint64_t g_rng = 12345; /* one sequence for the whole program */
inline double urand() {        /* splitmix64 */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
/* Uniform in [lo, hi), rounded to bf16 when dt is bf16 so the reference sees the same. */
inline vec randv(zeroc_dtype_t dt, size_t n, float lo = -1, float hi = 1) {
  vec v(n);
  for (auto &x : v) {
    x = lo + (hi - lo) * (float)urand();
    if (dt == ZEROC_BF16) x = zeroc_bf16_to_f32(zeroc_f32_to_bf16(x));
  }
  return v;
}
inline dvec tod(const vec &v) { return dvec(v.begin(), v.end()); }
inline double tol(zeroc_dtype_t dt) { return dt == ZEROC_FP32 ? 2e-6 : 1e-2; }

inline double relerr(const vec &a, const dvec &b) {
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

inline vec get(zeroc_dtype_t dt, const void *p, size_t n) {
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
    zeroc_i_cuda_knobs_t knobs;
    emu_cuda_knobs(&knobs);
    OK(zeroc_i_cuda_kernels_init(&k, &knobs));
  }
  ~Kernels() { zeroc_i_cuda_kernels_fini(&k); }
};

inline bool same_bytes(const void *a, const void *b, size_t bytes) { return !memcmp(a, b, bytes); }

/* the checks of each file, called by main (test_kernels_cuda_emu.cpp) */
void t_attention(zeroc_dtype_t dt, int B, int T, int NH, int HS, size_t off,
                 const zeroc_dropout_t *dp = nullptr, bool fresh = false);
void t_attention_blocks(zeroc_dtype_t dt, int B, int c, int NH, int HS,
                        const zeroc_dropout_t *dp = nullptr);
void t_dropout(zeroc_dtype_t dt, int T, int C, size_t off);
void t_elementwise(zeroc_dtype_t dt, size_t n, size_t off);
void t_crossentropy(zeroc_dtype_t dt, int Vp, float dloss);
void t_vocab(zeroc_dtype_t dt, float dloss);
void t_engine(size_t n, size_t off);
void t_clip_scale();
void t_embedbag(int dc);
void t_llama(zeroc_dtype_t dt); /* emu_llama.cpp */

#endif
