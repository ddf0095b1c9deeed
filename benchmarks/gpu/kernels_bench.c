/*
 * benchmarks/gpu/kernels_bench.c - times every cuda kernel at GPT-2 124M shapes
 * (B 8, T 1024, C 768, NH 12, V 50257 padded to 50304; 124M-element flat shard for the
 * engine kernels) with CUDA events, median of repetitions, and prints GB/s or TFLOP/s
 * against the ceilings of the device: a device-to-device copy measured here first, and
 * the dense matrix rates given on the command line (defaults: H200, bf16 790 TFLOP/s
 * measured on random data, fp32 67 TFLOP/s by the datasheet).
 *
 * usage: zeroc_kernels_bench [--reps N] [--bf16-tflops X] [--fp32-tflops X] [--dtype
 * bf16|fp32|both]
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_cudnn.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "zeroc/zeroc.h"

#define B     8
#define T     1024
#define C     768
#define NH    12
#define V     50257
#define VP    50304
#define N     (B * T)
#define SHARD 124475904 /* GPT-2 124M parameters, padded */

static zeroc_ctx_t *ctx;
static zeroc_stream_t *zs;
static cudaStream_t cs;
static int reps = 20;
static double copy_gbs, bf16_tflops = 790, fp32_tflops = 67;

#define CK(call)                                                                                   \
  do {                                                                                             \
    zeroc_result_t r_ = (call);                                                                    \
    if (r_ != ZEROC_OK) {                                                                          \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, zeroc_result_name(r_),   \
              zeroc_last_error(ctx));                                                              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CU(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* Device buffer of n elements of dt holding uniform random values in [lo, hi). */
static void *dbuf(zeroc_kernels_t *k, zeroc_dtype_t dt, size_t n, unsigned seed, float lo,
                  float hi) {
  float *h = malloc(n * sizeof(float)), *d32 = NULL;
  void *d = NULL;
  if (!h) exit(1);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    h[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
  }
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, n * zeroc_dtype_size(dt), &d));
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, n * sizeof(float), (void **)&d32));
  CU(cudaMemcpy(d32, h, n * sizeof(float), cudaMemcpyHostToDevice));
  CK(zeroc_k_cast(k, zs, d, dt, d32, ZEROC_FP32, n));
  CK(zeroc_stream_sync(zs));
  zeroc_mem_free(ctx, d32);
  free(h);
  return d;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef void (*body_fn)(void *arg);

/* Median milliseconds of `reps` timed runs after 3 warm-up runs. */
static float time_ms(body_fn fn, void *arg) {
  cudaEvent_t e0, e1;
  float *ms = malloc(reps * sizeof(float)), med;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  for (int i = 0; i < 3; i++) fn(arg);
  for (int i = 0; i < reps; i++) {
    CU(cudaEventRecord(e0, cs));
    fn(arg);
    CU(cudaEventRecord(e1, cs));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms[i], e0, e1));
  }
  CK(zeroc_stream_sync(zs));
  qsort(ms, reps, sizeof(float), cmp_float);
  med = ms[reps / 2];
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  free(ms);
  return med;
}

static void row_bytes(const char *name, zeroc_dtype_t dt, const char *shape, float ms,
                      double bytes) {
  double gbs = bytes / (ms * 1e-3) / 1e9;
  printf("%-26s %-5s %-24s %9.3f ms %9.1f GB/s      %5.1f%% of copy\n", name, zeroc_dtype_name(dt),
         shape, ms, gbs, 100 * gbs / copy_gbs);
}

static void row_flops(const char *name, zeroc_dtype_t dt, const char *shape, float ms, double flops,
                      double ceiling) {
  double tf = flops / (ms * 1e-3) / 1e12;
  printf("%-26s %-5s %-24s %9.3f ms %9.1f TFLOP/s   %5.1f%% of %.0f\n", name, zeroc_dtype_name(dt),
         shape, ms, tf, 100 * tf / ceiling, ceiling);
}

/* ---- bodies: each launches one kernel with the arguments in its struct ------------- */

typedef struct {
  zeroc_kernels_t *k;
  void *a, *b, *c, *d, *e, *f, *g, *h; /* buffers, named per body below */
  int32_t *tok;
  int n, cc, oc, h_b;
  size_t len;
} args_t;

static void b_copy(void *p) {
  args_t *a = p;
  CU(cudaMemcpyAsync(a->a, a->b, a->len, cudaMemcpyDeviceToDevice, cs));
}
static void b_enc_f(void *p) {
  args_t *a = p;
  CK(zeroc_k_encoder_forward(a->k, zs, a->a, a->tok, a->b, a->c, B, T, C));
}
static void b_enc_b(void *p) {
  args_t *a = p;
  CK(zeroc_k_encoder_backward(a->k, zs, a->a, a->b, a->c, a->tok, B, T, C));
}
static void b_ln_f(void *p) {
  args_t *a = p;
  CK(zeroc_k_layernorm_forward(a->k, zs, a->a, a->d, a->e, a->b, a->c, a->f, N, C));
}
static void b_ln_b(void *p) {
  args_t *a = p;
  CK(zeroc_k_layernorm_backward(a->k, zs, a->a, a->g, a->h, a->b, a->c, a->f, a->d, a->e, N, C));
}
static void b_mm_f(void *p) {
  args_t *a = p;
  CK(zeroc_k_matmul_forward(a->k, zs, a->a, a->b, a->c, a->d, a->n, a->cc, a->oc));
}
static void b_mm_b(void *p) {
  args_t *a = p;
  CK(zeroc_k_matmul_backward(a->k, zs, a->a, a->e, a->f, a->g, a->b, a->c, a->n, a->cc, a->oc));
}
/* fused linear + GELU: pre a, out h, inp b, weight c, bias d */
static void b_mm_fg(void *p) {
  args_t *a = p;
  CK(zeroc_k_matmul_forward_gelu(a->k, zs, a->a, a->h, a->b, a->c, a->d, a->n, a->cc, a->oc));
}
/* the down-projection's backward through the GELU: dpre a (set), dweight e, dbias f, dout g,
 * inp b, weight c, pre h, dpre_bias d */
static void b_mm_bg(void *p) {
  args_t *a = p;
  CK(zeroc_k_matmul_backward_ex(a->k, zs, a->a, a->e, a->f, a->g, a->b, a->c, a->n, a->cc, a->oc,
                                a->h, a->d, ZEROC_K_DINP_SET));
}
/* attention: batch h, tokens n, channels cc, heads oc */
static void b_at_f(void *p) {
  args_t *a = p;
  CK(zeroc_k_attention_forward(a->k, zs, a->a, a->d, a->b, a->h_b, a->n, a->cc, a->oc, NULL));
}
/* as the model calls it: dqkv set, not added to (the only form cuDNN takes) */
static void b_at_b(void *p) {
  args_t *a = p;
  CK(zeroc_k_attention_backward_ex(a->k, zs, a->c, a->e, a->b, a->a, a->d, a->h_b, a->n, a->cc,
                                   a->oc, NULL, ZEROC_K_DQKV_SET));
}
static void b_gelu_f(void *p) {
  args_t *a = p;
  CK(zeroc_k_gelu_forward(a->k, zs, a->a, a->b, a->len));
}
static void b_gelu_b(void *p) {
  args_t *a = p;
  CK(zeroc_k_gelu_backward(a->k, zs, a->a, a->b, a->c, a->len));
}
static void b_res(void *p) {
  args_t *a = p;
  CK(zeroc_k_residual_forward(a->k, zs, a->a, a->b, a->c, a->len));
}
static void b_add(void *p) {
  args_t *a = p;
  CK(zeroc_k_add(a->k, zs, a->a, a->b, a->len));
}
static void b_ce(void *p) {
  args_t *a = p;
  CK(zeroc_k_crossentropy_forward_backward(a->k, zs, a->d, a->a, a->tok, N, V, VP, 1.0f / N));
}
static void b_cast(void *p) {
  args_t *a = p;
  CK(zeroc_k_cast(a->k, zs, a->a, ZEROC_BF16, a->b, ZEROC_FP32, a->len));
}
static void b_acc(void *p) {
  args_t *a = p;
  CK(zeroc_k_accumulate(a->k, zs, a->b, a->a, ZEROC_BF16, a->len, 0.5f));
}
static void b_scale(void *p) {
  args_t *a = p;
  CK(zeroc_k_scale(a->k, zs, a->b, a->len, 0.999f));
}
static void b_sumsq(void *p) {
  args_t *a = p;
  CK(zeroc_k_sumsq(a->k, zs, a->g, a->b, ZEROC_FP32, a->len));
}
static void b_sumsq_bf16(void *p) {
  args_t *a = p;
  CK(zeroc_k_sumsq(a->k, zs, a->g, a->a, ZEROC_BF16, a->len));
}
static void b_adamw(void *p) {
  args_t *a = p;
  zeroc_adamw_args_t ar = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f, NULL};
  CK(zeroc_k_adamw(a->k, zs, a->b, a->c, a->d, a->e, a->len, &ar));
}
/* bf16 gradient a in, bf16 compute copy f out */
static void b_adamw_mixed(void *p) {
  args_t *a = p;
  zeroc_adamw_args_t ar = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f, NULL};
  CK(zeroc_k_adamw_mixed(a->k, zs, a->b, a->c, a->d, a->a, ZEROC_BF16, a->f, ZEROC_BF16, a->len,
                         &ar));
}

/* Causal attention: half the T x T work; the backward counted as 2.5 forwards (its five
 * products; the deterministic kernels recompute the scores once more). bf16 against the
 * bf16 GEMM ceiling (tensor cores, attention_mma.cu) unless ZEROC_CUDA_FLASH=0. In bf16
 * each shape also runs on cuDNN's flash attention (rows "... cudnn"), side by side. */
static void bench_attention(zeroc_kernels_t *k, zeroc_dtype_t dt, int b, int t, int c, int nh,
                            const char *shape) {
  args_t a = {.k = k, .n = t, .cc = c, .oc = nh, .h_b = b};
  const size_t n = (size_t)b * t;
  a.a = dbuf(k, dt, n * c, 16, -1, 1);     /* out */
  a.b = dbuf(k, dt, n * 3 * c, 17, -1, 1); /* qkv */
  a.c = dbuf(k, dt, n * 3 * c, 18, -1, 1); /* dqkv */
  a.e = dbuf(k, dt, n * c, 19, -1, 1);     /* dout */
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS,
                     (size_t)b * nh * t * sizeof(float), &a.d));
  const char *fl = getenv("ZEROC_CUDA_FLASH");
  const double ceil = dt == ZEROC_BF16 && !(fl && !strcmp(fl, "0")) ? bf16_tflops : fp32_tflops;
  double flops = 2.0 * b * nh * (double)t * t * (c / nh); /* 2 matmuls x 2 flops x T^2/2 */
  zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_OFF); /* zeroc's own kernels */
  double ms = time_ms(b_at_f, &a);
  row_flops("attention_forward", dt, shape, ms, flops, ceil);
  ms = time_ms(b_at_b, &a);
  row_flops("attention_backward", dt, shape, ms, 2.5 * flops, ceil);
  if (dt == ZEROC_BF16) { /* the same calls on cuDNN's flash attention, where it runs */
    int done = 0;
    zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_REQUIRED);
    zeroc_result_t r =
        zeroc__cudnn_attention_forward(k, zs, a.a, a.d, a.b, b, t, c, nh, NULL, &done);
    if (r || !done) {
      printf("%-26s %-5s %-24s not run: %s\n", "attention_forward cudnn", zeroc_dtype_name(dt),
             shape, r ? zeroc_last_error(NULL) : "not applicable");
    } else {
      ms = time_ms(b_at_f, &a);
      row_flops("attention_forward cudnn", dt, shape, ms, flops, ceil);
      r = zeroc__cudnn_attention_backward(k, zs, a.c, a.e, a.b, a.a, a.d, b, t, c, nh, NULL,
                                          ZEROC_K_DQKV_SET, &done);
      if (r || !done)
        printf("%-26s %-5s %-24s not run: %s\n", "attention_backward cudnn",
               zeroc_dtype_name(dt), shape, r ? zeroc_last_error(NULL) : "not applicable");
      else
        row_flops("attention_backward cudnn", dt, shape, time_ms(b_at_b, &a), 2.5 * flops, ceil);
    }
    zeroc__cudnn_attention_set_mode(k, ZEROC__CUDNN_AUTO);
  }
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.b), zeroc_mem_free(ctx, a.c);
  zeroc_mem_free(ctx, a.d), zeroc_mem_free(ctx, a.e);
}

static void model_kernels(zeroc_dtype_t dt) {
  zeroc_kernels_t *k;
  CK(zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), dt, &k));
  const double es = (double)zeroc_dtype_size(dt), nc = (double)N * C;
  const double gemm_ceiling = dt == ZEROC_BF16 ? bf16_tflops : fp32_tflops;
  args_t a = {.k = k};
  float ms;

  /* encoder */
  int32_t *htok = malloc(N * sizeof(int32_t));
  uint64_t s = 88172645463325252ULL;
  for (int i = 0; i < N; i++) s ^= s << 13, s ^= s >> 7, s ^= s << 17, htok[i] = (int32_t)(s % V);
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof(int32_t),
                     (void **)&a.tok));
  CU(cudaMemcpy(a.tok, htok, N * sizeof(int32_t), cudaMemcpyHostToDevice));
  a.a = dbuf(k, dt, (size_t)N * C, 1, -1, 1);
  a.b = dbuf(k, dt, (size_t)V * C, 2, -1, 1);
  a.c = dbuf(k, dt, (size_t)T * C, 3, -1, 1);
  ms = time_ms(b_enc_f, &a);
  row_bytes("encoder_forward", dt, "B8 T1024 C768", ms, 3 * nc * es);
  void *dout = a.a;
  a.a = a.b, a.b = a.c, a.c = dout; /* dwte, dwpe, dout */
  ms = time_ms(b_enc_b, &a);
  row_bytes("encoder_backward", dt, "B8 T1024 C768", ms, 3 * nc * es); /* dout + dwte rows r/w */
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.b), zeroc_mem_free(ctx, a.c);

  /* layernorm */
  a.a = dbuf(k, dt, (size_t)N * C, 4, -1, 1);
  a.b = dbuf(k, dt, (size_t)N * C, 5, -1, 1);
  a.c = dbuf(k, dt, C, 6, -1, 1);
  a.f = dbuf(k, dt, C, 7, -1, 1);
  a.g = dbuf(k, dt, C, 8, -1, 1);
  a.h = dbuf(k, dt, C, 8, -1, 1);
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof(float), &a.d));
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof(float), &a.e));
  {
    args_t f = a;
    f.a = a.a, f.b = a.b, f.c = a.c, f.f = a.f; /* out, inp, weight, bias */
    ms = time_ms(b_ln_f, &f);
    row_bytes("layernorm_forward", dt, "N8192 C768", ms, 2 * nc * es);
    args_t g = a;
    g.a = a.a, g.b = a.b, g.c = a.b, g.f = a.c; /* dinp, dout, inp, weight; dweight g, dbias h */
    ms = time_ms(b_ln_b, &g);
    row_bytes("layernorm_backward", dt, "N8192 C768", ms, 4 * nc * es);
  }
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.b), zeroc_mem_free(ctx, a.c);
  zeroc_mem_free(ctx, a.d), zeroc_mem_free(ctx, a.e), zeroc_mem_free(ctx, a.f),
      zeroc_mem_free(ctx, a.g);
  zeroc_mem_free(ctx, a.h);

  /* matmuls: qkv, attention projection, mlp up, mlp down, lm head */
  static const struct {
    const char *name;
    int cc, oc, bias;
  } mm[] = {{"qkv C->3C", C, 3 * C, 1},
            {"attn proj C->C", C, C, 1},
            {"fc C->4C", C, 4 * C, 1},
            {"fc proj 4C->C", 4 * C, C, 1},
            {"lm head C->Vp", C, VP, 0}};
  for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
    args_t m = {.k = k, .n = N, .cc = mm[i].cc, .oc = mm[i].oc};
    m.a = dbuf(k, dt, (size_t)N * mm[i].oc, 9, -1, 1);
    m.b = dbuf(k, dt, (size_t)N * mm[i].cc, 10, -1, 1);
    m.c = dbuf(k, dt, (size_t)mm[i].oc * mm[i].cc, 11, -0.05f, 0.05f);
    m.d = mm[i].bias ? dbuf(k, dt, mm[i].oc, 12, -1, 1) : NULL;
    double flops = 2.0 * N * mm[i].cc * mm[i].oc;
    ms = time_ms(b_mm_f, &m);
    row_flops("matmul_forward", dt, mm[i].name, ms, flops, gemm_ceiling);
    /* backward: dinp += dout W, dweight += dout^T inp, dbias */
    m.e = dbuf(k, dt, (size_t)N * mm[i].cc, 13, -1, 1);
    m.f = dbuf(k, dt, (size_t)mm[i].oc * mm[i].cc, 14, -1, 1);
    m.g = mm[i].bias ? dbuf(k, dt, mm[i].oc, 15, -1, 1) : NULL;
    args_t bw = m;
    bw.a = m.e, bw.e = m.f, bw.f = m.g, bw.g = m.a; /* dinp, dweight, dbias, dout */
    ms = time_ms(b_mm_b, &bw);
    row_flops("matmul_backward", dt, mm[i].name, ms, 2 * flops, gemm_ceiling);
    zeroc_mem_free(ctx, m.a), zeroc_mem_free(ctx, m.b), zeroc_mem_free(ctx, m.c);
    zeroc_mem_free(ctx, m.d), zeroc_mem_free(ctx, m.e), zeroc_mem_free(ctx, m.f),
        zeroc_mem_free(ctx, m.g);
  }

  /* the MLP fused (cuBLASLt epilogues): compare matmul_forward "fc C->4C" + gelu_forward,
   * and matmul_backward "fc proj 4C->C" + gelu_backward (+ the fc bias's column sums) */
  {
    const size_t h4 = (size_t)N * 4 * C;
    args_t m = {.k = k, .n = N, .cc = C, .oc = 4 * C};
    m.a = dbuf(k, dt, h4, 40, -1, 1);
    m.h = dbuf(k, dt, h4, 41, -1, 1);
    m.b = dbuf(k, dt, (size_t)N * C, 42, -1, 1);
    m.c = dbuf(k, dt, (size_t)4 * C * C, 43, -0.05f, 0.05f);
    m.d = dbuf(k, dt, 4 * C, 44, -1, 1);
    double flops = 2.0 * N * C * 4 * C;
    ms = time_ms(b_mm_fg, &m);
    row_flops("matmul_forward_gelu", dt, "fc C->4C +gelu", ms, flops, gemm_ceiling);
    args_t bw = {.k = k, .n = N, .cc = 4 * C, .oc = C};
    bw.a = dbuf(k, dt, h4, 45, -1, 1);             /* dpre */
    bw.e = dbuf(k, dt, (size_t)4 * C * C, 46, -1, 1); /* dweight */
    bw.f = dbuf(k, dt, C, 47, -1, 1);              /* dbias */
    bw.g = dbuf(k, dt, (size_t)N * C, 48, -1, 1);  /* dout */
    bw.b = m.h, bw.c = m.c, bw.h = m.a, bw.d = m.d; /* inp = gelu(pre), weight, pre, dpre_bias */
    ms = time_ms(b_mm_bg, &bw);
    row_flops("matmul_backward_ex dgelu", dt, "fc proj 4C->C +dgelu", ms, 2 * flops,
              gemm_ceiling);
    zeroc_mem_free(ctx, m.a), zeroc_mem_free(ctx, m.h), zeroc_mem_free(ctx, m.b);
    zeroc_mem_free(ctx, m.c), zeroc_mem_free(ctx, m.d), zeroc_mem_free(ctx, bw.a);
    zeroc_mem_free(ctx, bw.e), zeroc_mem_free(ctx, bw.f), zeroc_mem_free(ctx, bw.g);
  }

  /* attention at GPT-2 124M's and the 1.3B model's shapes */
  bench_attention(k, dt, 8, 1024, 768, 12, "B8 NH12 T1024 HS64");
  bench_attention(k, dt, 4, 2048, 2048, 16, "B4 NH16 T2048 HS128");

  /* elementwise on the MLP activation (N, 4C) and the residual stream (N, C) */
  a.len = (size_t)N * 4 * C;
  a.a = dbuf(k, dt, a.len, 20, -3, 3);
  a.b = dbuf(k, dt, a.len, 21, -3, 3);
  a.c = dbuf(k, dt, a.len, 22, -1, 1);
  ms = time_ms(b_gelu_f, &a);
  row_bytes("gelu_forward", dt, "N8192 x 4C", ms, 2 * es * a.len);
  ms = time_ms(b_gelu_b, &a);
  row_bytes("gelu_backward", dt, "N8192 x 4C", ms, 4 * es * a.len);
  a.len = (size_t)N * C;
  ms = time_ms(b_res, &a);
  row_bytes("residual_forward", dt, "N8192 x C", ms, 3 * es * a.len);
  ms = time_ms(b_add, &a);
  row_bytes("add", dt, "N8192 x C", ms, 3 * es * a.len);
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.b), zeroc_mem_free(ctx, a.c);

  /* fused classifier: logits read twice and written once */
  a.a = dbuf(k, dt, (size_t)N * VP, 23, -4, 4);
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof(float), &a.d));
  ms = time_ms(b_ce, &a);
  row_bytes("crossentropy fwd+bwd", dt, "N8192 Vp50304", ms, 3 * es * (double)N * VP);
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.d), zeroc_mem_free(ctx, a.tok);
  free(htok);
  zeroc_kernels_destroy(k);
}

static void engine_kernels(void) {
  zeroc_kernels_t *k;
  CK(zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &k));
  args_t a = {.k = k, .len = SHARD};
  a.a = dbuf(k, ZEROC_BF16, SHARD, 30, -1, 1);
  a.b = dbuf(k, ZEROC_FP32, SHARD, 31, -1, 1);
  a.c = dbuf(k, ZEROC_FP32, SHARD, 32, -0.1f, 0.1f);
  a.d = dbuf(k, ZEROC_FP32, SHARD, 33, 0, 0.01f);
  a.e = dbuf(k, ZEROC_FP32, SHARD, 34, -1, 1);
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, sizeof(double), &a.g));
  CU(cudaMemset(a.g, 0, sizeof(double)));
  float ms = time_ms(b_cast, &a);
  row_bytes("cast fp32->bf16", ZEROC_FP32, "124M", ms, 6.0 * SHARD);
  ms = time_ms(b_acc, &a);
  row_bytes("accumulate bf16->fp32", ZEROC_FP32, "124M", ms, 10.0 * SHARD);
  ms = time_ms(b_scale, &a);
  row_bytes("scale", ZEROC_FP32, "124M", ms, 8.0 * SHARD);
  ms = time_ms(b_sumsq, &a);
  row_bytes("sumsq", ZEROC_FP32, "124M", ms, 4.0 * SHARD);
  ms = time_ms(b_sumsq_bf16, &a);
  row_bytes("sumsq of bf16", ZEROC_FP32, "124M", ms, 2.0 * SHARD);
  ms = time_ms(b_adamw, &a);
  row_bytes("adamw", ZEROC_FP32, "124M", ms, 28.0 * SHARD);
  /* one pass for what took cast bf16->fp32 (6 B) + adamw (28 B) + cast fp32->bf16 (6 B) */
  a.f = dbuf(k, ZEROC_BF16, SHARD, 35, -1, 1);
  ms = time_ms(b_adamw_mixed, &a);
  row_bytes("adamw_mixed bf16 in/out", ZEROC_FP32, "124M", ms, 28.0 * SHARD);
  zeroc_mem_free(ctx, a.a), zeroc_mem_free(ctx, a.b), zeroc_mem_free(ctx, a.c);
  zeroc_mem_free(ctx, a.d), zeroc_mem_free(ctx, a.e), zeroc_mem_free(ctx, a.g);
  zeroc_mem_free(ctx, a.f);
  zeroc_kernels_destroy(k);
}

int main(int argc, char **argv) {
  const char *which = "both";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--bf16-tflops") && i + 1 < argc)
      bf16_tflops = atof(argv[++i]);
    else if (!strcmp(argv[i], "--fp32-tflops") && i + 1 < argc)
      fp32_tflops = atof(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
      which = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--reps N] [--bf16-tflops X] [--fp32-tflops X] [--dtype bf16|fp32|both]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 1 || bf16_tflops <= 0 || fp32_tflops <= 0 ||
      (strcmp(which, "bf16") && strcmp(which, "fp32") && strcmp(which, "both"))) {
    fprintf(stderr, "--reps >= 1, positive --*-tflops, --dtype bf16|fp32|both\n");
    return 2;
  }
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CUDA;
  CK(zeroc_ctx_create(&ctx, &cfg));
  zs = zeroc_ctx_compute_stream(ctx);
  cs = (cudaStream_t)zeroc_stream_native(zs);
  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  printf("zeroc cuda kernels, %s, median of %d runs\n", prop.name, reps);
  {
    char path[256];
    long ver = 0;
    if (zeroc__cudnn_probe(path, sizeof path, &ver) == ZEROC_OK)
      printf("cuDNN %ld loaded from %s (attention rows marked cudnn)\n", ver, path);
    else
      printf("cuDNN not loaded, attention on zeroc's kernels only: %s\n", zeroc_last_error(NULL));
  }

  /* the copy ceiling, measured: 1 GiB device to device (read + write counted) */
  args_t c = {.len = (size_t)1 << 30};
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, c.len, &c.a));
  CK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, c.len, &c.b));
  copy_gbs = 1; /* so the copy row prints 100% against itself */
  float ms = time_ms(b_copy, &c);
  copy_gbs = 2.0 * c.len / (ms * 1e-3) / 1e9;
  row_bytes("cudaMemcpy D2D (ceiling)", ZEROC_UINT8, "1 GiB", ms, 2.0 * c.len);
  zeroc_mem_free(ctx, c.a), zeroc_mem_free(ctx, c.b);

  if (strcmp(which, "fp32")) model_kernels(ZEROC_BF16);
  if (strcmp(which, "bf16")) model_kernels(ZEROC_FP32);
  engine_kernels();
  return zeroc_ctx_finalize(ctx) != ZEROC_OK;
}
