/*
 * benchmarks/kernels_cpu.c - times every cpu kernel on one GPT shape (default the
 * `small` preset: B=4, T=128, C=128, NH=4, V=512) and prints the median time of
 * each, with GFLOP/s for the matmuls and attention.
 *
 *   bench_kernels_cpu [--model NAME] [--batch B] [--reps N] [--seq T] [--hidden C]
 *                     [--heads NH] [--vocab V]   (each overrides the preset's value)
 *   bench_kernels_cpu --attention B T C NH [--reps N]
 *   bench_kernels_cpu --layernorm N C [--reps N]
 * The second times only attention, forward and backward, with and without
 * dropout, the current kernels beside the previous ones (attention_ref.c),
 * interleaved rep by rep so a busy machine slows both alike. The third times the
 * fused LayerNorm forms the GPT block calls beside the calls they replace, likewise.
 * Threads: ZEROC_THREADS (default: the cores hwloc gives the rank).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_ref.h"
#include "core/clock.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "zeroc/zeroc.h"

#define CHECK(call)                                                                                \
  do {                                                                                             \
    zeroc_result_t r_ = (call);                                                                    \
    if (r_ != ZEROC_OK) {                                                                          \
      fprintf(stderr, "bench_kernels_cpu: %s: %s\n", #call, zeroc_last_error(NULL));               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int reps = 20;

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static float *buf(size_t n, unsigned seed, float lo, float hi) {
  float *x = malloc(n * sizeof *x);
  if (!x) {
    fprintf(stderr, "bench_kernels_cpu: out of memory (%zu floats)\n", n);
    exit(1);
  }
  unsigned s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
  }
  return x;
}

/* One kernel call, set up so it can be repeated; `reset` (may be NULL) runs
 * untimed before each call (e.g. restoring logits a fused kernel overwrote). */
typedef struct bench {
  const char *name;
  double flops; /* per call; 0: not reported */
  void (*run)(struct bench *b);
  void (*reset)(struct bench *b);
  void *p[12];
  long i[6];
} bench_t;

static zeroc_kernels_t *K;

static void report(bench_t *b) {
  double *t = malloc((size_t)reps * sizeof *t);
  for (int w = 0; w < 2; w++) { /* warm caches, pages and threads */
    if (b->reset) b->reset(b);
    b->run(b);
  }
  for (int r = 0; r < reps; r++) {
    if (b->reset) b->reset(b);
    const double t0 = zeroc__now_s();
    b->run(b);
    t[r] = zeroc__now_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  const double med = t[reps / 2], best = t[0];
  printf("%-26s %9.3f %9.3f", b->name, 1e3 * med, 1e3 * best);
  if (b->flops > 0) printf(" %9.2f %9.2f", b->flops / med * 1e-9, b->flops / best * 1e-9);
  printf("\n");
  free(t);
}

/* ---- the calls -------------------------------------------------------------------- */

static void enc_f(bench_t *b) {
  CHECK(zeroc_k_encoder_forward(K, NULL, b->p[0], b->p[1], b->p[2], b->p[3], b->i[0], b->i[1],
                                b->i[2]));
}
static void enc_b(bench_t *b) {
  CHECK(zeroc_k_encoder_backward(K, NULL, b->p[4], b->p[5], b->p[0], b->p[1], b->i[0], b->i[1],
                                 b->i[2]));
}
static void ln_f(bench_t *b) {
  CHECK(zeroc_k_layernorm_forward(K, NULL, b->p[0], b->p[1], b->p[2], b->p[3], b->p[4], b->p[5],
                                  b->i[0], b->i[1]));
}
static void ln_b(bench_t *b) {
  CHECK(zeroc_k_layernorm_backward(K, NULL, b->p[6], b->p[7], b->p[8], b->p[0], b->p[3], b->p[4],
                                   b->p[1], b->p[2], b->i[0], b->i[1]));
}
static void mm_f(bench_t *b) {
  CHECK(zeroc_k_matmul_forward(K, NULL, b->p[0], b->p[1], b->p[2], b->p[3], b->i[0], b->i[1],
                               b->i[2]));
}
static void mm_b(bench_t *b) {
  CHECK(zeroc_k_matmul_backward(K, NULL, b->p[4], b->p[5], b->p[6], b->p[0], b->p[1], b->p[2],
                                b->i[0], b->i[1], b->i[2]));
}
static void att_f(bench_t *b) {
  CHECK(zeroc_k_attention_forward(K, NULL, b->p[0], b->p[1], b->p[2], b->i[0], b->i[1], b->i[2],
                                  b->i[3], b->p[5]));
}
static void att_b(bench_t *b) {
  CHECK(zeroc_k_attention_backward(K, NULL, b->p[3], b->p[4], b->p[2], b->p[0], b->p[1], b->i[0],
                                   b->i[1], b->i[2], b->i[3], b->p[5]));
}
/* p[5]: the dropout descriptor (attention above: NULL for none) */
static void drop(bench_t *b) {
  CHECK(zeroc_k_dropout(K, NULL, b->p[2], b->p[0], b->p[5], (int)b->i[0], (int)b->i[1]));
}
static void gelu_f(bench_t *b) {
  CHECK(zeroc_k_gelu_forward(K, NULL, b->p[0], b->p[1], (size_t)b->i[0]));
}
static void gelu_b(bench_t *b) {
  CHECK(zeroc_k_gelu_backward(K, NULL, b->p[2], b->p[1], b->p[0], (size_t)b->i[0]));
}
static void resid(bench_t *b) {
  CHECK(zeroc_k_residual_forward(K, NULL, b->p[2], b->p[0], b->p[1], (size_t)b->i[0]));
}
static void add(bench_t *b) { CHECK(zeroc_k_add(K, NULL, b->p[2], b->p[0], (size_t)b->i[0])); }
static void xent_reset(bench_t *b) {
  memcpy(b->p[1], b->p[3], (size_t)b->i[0] * (size_t)b->i[2] * sizeof(float));
}
static void xent(bench_t *b) {
  CHECK(zeroc_k_crossentropy_forward_backward(K, NULL, b->p[0], b->p[1], b->p[2], b->i[0], b->i[1],
                                              b->i[2], 1.0f / (float)b->i[0]));
}
static void cast(bench_t *b) {
  CHECK(zeroc_k_cast(K, NULL, b->p[4], ZEROC_BF16, b->p[0], ZEROC_FP32, (size_t)b->i[0]));
}
static void sumsq(bench_t *b) {
  double s = 0;
  CHECK(zeroc_k_sumsq(K, NULL, &s, b->p[3], ZEROC_FP32, (size_t)b->i[0]));
}
static void adamw(bench_t *b) {
  zeroc_adamw_args_t a = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f, NULL};
  CHECK(zeroc_k_adamw(K, NULL, b->p[0], b->p[1], b->p[2], b->p[3], (size_t)b->i[0], &a));
}

/* ---- attention, previous kernels beside the current ones -------------------------- */

/* attention FLOPs actually done on the causal triangle, T(T+1)/2 (query, key) pairs
 * per head: forward q.k and p.v (4 HS each: 2 B NH T(T+1) HS in all); backward q.k,
 * dout.v, and the dv, dq, dk updates (10 HS each) */
static int bench_attention(int B, int T, int C, int NH) {
  const size_t NC = (size_t)B * T * C;
  float *qkv = buf(3 * NC, 15, -1, 1), *dqkv = buf(3 * NC, 16, -1, 1), *out = buf(NC, 2, -1, 1);
  float *dout = buf(NC, 3, -1, 1), *lse = buf((size_t)B * NH * T, 17, 0, 1);
  float *out2 = buf(NC, 2, -1, 1), *lse2 = buf((size_t)B * NH * T, 17, 0, 1);
  const double pairs = (double)B * NH * T * (T + 1) / 2, HS = (double)C / NH;
  const zeroc_dropout_t d_att = {0.1f, 1, 0, 0, T, T, NH, 0};
  printf("attention B=%d T=%d C=%d NH=%d (HS %g), median (min) of %d interleaved reps\n", B, T, C,
         NH, HS, reps);
  printf("%-24s %10s %10s %9s %10s %10s %9s %7s\n", "", "old ms", "(min)", "GFLOP/s", "new ms",
         "(min)", "GFLOP/s", "speedup");
  double *t = malloc(8 * (size_t)reps * sizeof *t);
  for (int w = -2; w < reps; w++) /* 2 warm-up rounds */
    for (int v = 0; v < 8; v++) {
      const zeroc_dropout_t *d = v & 4 ? &d_att : NULL;
      const double t0 = zeroc__now_s();
      switch (v & 3) {
      case 0:
        bench_ref_attention_forward(out2, lse2, qkv, B, T, C, NH, d);
        break;
      case 1:
        CHECK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, d));
        break;
      case 2:
        bench_ref_attention_backward(dqkv, dout, qkv, out2, lse2, B, T, C, NH, d);
        break;
      default:
        CHECK(zeroc_k_attention_backward(K, NULL, dqkv, dout, qkv, out, lse, B, T, C, NH, d));
      }
      if (w >= 0) t[(size_t)v * reps + w] = zeroc__now_s() - t0;
    }
  double maxd = 0; /* the two agree to rounding (the last forward had dropout) */
  for (size_t i = 0; i < NC; i++) maxd = fmax(maxd, fabs((double)out[i] - out2[i]));
  for (int v = 0; v < 8; v += 2) {
    const double f = (v & 2 ? 10 : 4) * HS * pairs;
    double med[2], best[2];
    for (int k = 0; k < 2; k++) {
      double *tv = t + (size_t)(v + k) * reps;
      qsort(tv, (size_t)reps, sizeof *tv, cmp_double);
      med[k] = tv[reps / 2], best[k] = tv[0];
    }
    char name[40];
    snprintf(name, sizeof name, "attention %s%s", v & 2 ? "bwd" : "fwd", v & 4 ? " dropout" : "");
    printf("%-24s %10.3f %10.3f %9.2f %10.3f %10.3f %9.2f %6.2fx\n", name, 1e3 * med[0],
           1e3 * best[0], f / med[0] * 1e-9, 1e3 * med[1], 1e3 * best[1], f / med[1] * 1e-9,
           med[0] / med[1]);
  }
  printf("max |out new - out old| %.3g\n", maxd);
  free(t), free(qkv), free(dqkv), free(out), free(dout), free(lse), free(out2), free(lse2);
  return 0;
}

/* ---- fused LayerNorm forms beside the calls they replace -------------------------- */

/* The block's residual + LayerNorm 2 (in place on the residual, as there), its backward
 * from the residual's gradient, and the head's backward into a fresh gradient: each pair
 * (separate calls, fused call) interleaved rep by rep. */
static int bench_layernorm(int N, int C) {
  const size_t NC = (size_t)N * C;
  float *res = buf(NC, 40, -1, 1), *x = buf(NC, 41, -1, 1), *out = buf(NC, 42, -1, 1);
  float *mean = buf(N, 43, -1, 1), *rstd = buf(N, 44, 0.5f, 2), *w = buf(C, 45, 0.5f, 1.5f);
  float *b = buf(C, 46, -1, 1), *dout = buf(NC, 47, -1, 1), *dres = buf(NC, 48, -1, 1);
  float *dx = buf(NC, 49, -1, 1), *dw = buf(C, 50, -1, 1), *db = buf(C, 51, -1, 1);
  CHECK(zeroc_k_layernorm_forward(K, NULL, out, mean, rstd, res, w, b, N, C));
  static const char *names[3][2] = {{"add + layernorm fwd", "residual_layernorm fwd"},
                                    {"memcpy + layernorm bwd", "layernorm bwd_ex dres"},
                                    {"memset + layernorm bwd", "layernorm bwd_ex NULL"}};
  printf("layernorm N=%d C=%d, median (min) of %d interleaved reps\n", N, C, reps);
  printf("%-24s %9s %9s   %-24s %9s %9s %7s\n", "separate", "ms", "(min)", "fused", "ms", "(min)",
         "speedup");
  double *t = malloc(6 * (size_t)reps * sizeof *t);
  for (int r = -2; r < reps; r++) /* 2 warm-up rounds */
    for (int v = 0; v < 6; v++) {
      const int v2 = r & 1 ? v ^ 1 : v; /* alternate which of a pair goes first */
      const double t0 = zeroc__now_s();
      switch (v2) {
      case 0:
        CHECK(zeroc_k_add(K, NULL, res, x, NC));
        CHECK(zeroc_k_layernorm_forward(K, NULL, out, mean, rstd, res, w, b, N, C));
        break;
      case 1:
        CHECK(
            zeroc_k_residual_layernorm_forward(K, NULL, res, out, mean, rstd, res, x, w, b, N, C));
        break;
      case 2:
        memcpy(dx, dres, NC * sizeof *dx);
        CHECK(zeroc_k_layernorm_backward(K, NULL, dx, dw, db, dout, res, w, mean, rstd, N, C));
        break;
      case 3:
        CHECK(zeroc_k_layernorm_backward_ex(K, NULL, dx, dw, db, dout, res, w, mean, rstd, N, C,
                                            dres, ZEROC_K_DINP_SET));
        break;
      case 4:
        memset(dx, 0, NC * sizeof *dx);
        CHECK(zeroc_k_layernorm_backward(K, NULL, dx, dw, db, dout, res, w, mean, rstd, N, C));
        break;
      default:
        CHECK(zeroc_k_layernorm_backward_ex(K, NULL, dx, dw, db, dout, res, w, mean, rstd, N, C,
                                            NULL, ZEROC_K_DINP_SET));
      }
      if (r >= 0) t[(size_t)v2 * reps + r] = zeroc__now_s() - t0;
    }
  for (int v = 0; v < 6; v += 2) {
    double med[2], best[2];
    for (int k = 0; k < 2; k++) {
      double *tv = t + (size_t)(v + k) * reps;
      qsort(tv, (size_t)reps, sizeof *tv, cmp_double);
      med[k] = tv[reps / 2], best[k] = tv[0];
    }
    printf("%-24s %9.3f %9.3f   %-24s %9.3f %9.3f %6.2fx\n", names[v / 2][0], 1e3 * med[0],
           1e3 * best[0], names[v / 2][1], 1e3 * med[1], 1e3 * best[1], med[0] / med[1]);
  }
  free(t), free(res), free(x), free(out), free(mean), free(rstd), free(w), free(b), free(dout);
  free(dres), free(dx), free(dw), free(db);
  return 0;
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  const char *model = "small";
  int batch = 0, seq = 0, hidden = 0, heads = 0, vocab = 0, att[4] = {0}, lnorm[2] = {0};
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--model") && a + 1 < argc)
      model = argv[++a];
    else if (!strcmp(argv[a], "--batch") && a + 1 < argc)
      batch = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
      reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--attention") && a + 4 < argc)
      for (int k = 0; k < 4; k++) att[k] = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--layernorm") && a + 2 < argc)
      for (int k = 0; k < 2; k++) lnorm[k] = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--seq") && a + 1 < argc)
      seq = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--hidden") && a + 1 < argc)
      hidden = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--heads") && a + 1 < argc)
      heads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--vocab") && a + 1 < argc)
      vocab = atoi(argv[++a]);
    else {
      fprintf(stderr,
              "usage: %s [--model NAME] [--batch B >= 1] [--reps N >= 1] [--seq T >= 1] "
              "[--hidden C >= 1] [--heads NH >= 1, dividing C] [--vocab V >= 1] "
              "[--attention B T C NH] [--layernorm N C]\n",
              argv[0]);
      return 2;
    }
  }
  if (att[0] && (att[0] < 1 || att[1] < 1 || att[3] < 1 || att[2] < att[3] || att[2] % att[3])) {
    fprintf(
        stderr,
        "bench_kernels_cpu: --attention %d %d %d %d: accepted B, T, NH >= 1, C a multiple of NH\n",
        att[0], att[1], att[2], att[3]);
    return 2;
  }
  if ((lnorm[0] || lnorm[1]) && (lnorm[0] < 1 || lnorm[1] < 1)) {
    fprintf(stderr, "bench_kernels_cpu: --layernorm %d %d: accepted N, C >= 1\n", lnorm[0],
            lnorm[1]);
    return 2;
  }
  if (reps < 1 || batch < 0 || seq < 0 || hidden < 0 || heads < 0 || vocab < 0) {
    fprintf(stderr,
            "bench_kernels_cpu: --reps %d / --batch %d / --seq %d / --hidden %d / --heads %d / "
            "--vocab %d: accepted >= 1\n",
            reps, batch, seq, hidden, heads, vocab);
    return 2;
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  zeroc_gpt_config_t g;
  CHECK(zeroc_gpt_preset(model, &g));
  if (seq) g.seq = seq;
  if (hidden) g.hidden = hidden;
  if (heads) g.heads = heads;
  if (vocab) g.vocab = vocab;
  if (g.hidden % g.heads) {
    fprintf(stderr, "bench_kernels_cpu: --heads %d does not divide --hidden %d\n", g.heads,
            g.hidden);
    MPI_Finalize();
    return 2;
  }
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx = NULL;
  CHECK(zeroc_ctx_create(&ctx, &cfg));
  CHECK(
      zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &K));
  if (att[0] || lnorm[0]) {
    const int rc = att[0] ? bench_attention(att[0], att[1], att[2], att[3])
                          : bench_layernorm(lnorm[0], lnorm[1]);
    zeroc_kernels_destroy(K);
    zeroc_ctx_destroy(ctx);
    MPI_Finalize();
    return rc;
  }

  const int B = batch ? batch : g.batch, T = g.seq, C = g.hidden, NH = g.heads, V = g.vocab;
  const int Vp = (V + 127) / 128 * 128, N = B * T, L = g.layers;
  const size_t NC = (size_t)N * C;
  const char *thr = getenv("ZEROC_THREADS");
  printf("cpu kernels, model %s: B=%d T=%d C=%d NH=%d V=%d (Vp %d), median of %d, threads %s\n",
         model, B, T, C, NH, V, Vp, reps, thr ? thr : "(topology)");

  /* inputs (random, never zero), outputs and gradients, all fp32 */
  int32_t *tok = malloc((size_t)N * sizeof *tok);
  for (int n = 0; n < N; n++) tok[n] = (int32_t)((n * 7919u + 13u) % (unsigned)V);
  float *x = buf(NC, 1, -1, 1), *out = buf(NC, 2, -1, 1), *dout = buf(NC, 3, -1, 1);
  float *dx = buf(NC, 4, -1, 1), *wte = buf((size_t)Vp * C, 5, -1, 1),
        *wpe = buf((size_t)T * C, 6, -1, 1);
  float *dwte = buf((size_t)Vp * C, 7, -1, 1), *dwpe = buf((size_t)T * C, 8, -1, 1);
  float *mean = buf(N, 9, -1, 1), *rstd = buf(N, 10, 0.5f, 2), *lw = buf(C, 11, 0.5f, 1.5f);
  float *lb = buf(C, 12, -1, 1), *dlw = buf(C, 13, -1, 1), *dlb = buf(C, 14, -1, 1);
  float *qkv = buf(3 * NC, 15, -1, 1), *dqkv = buf(3 * NC, 16, -1, 1),
        *lse = buf((size_t)B * NH * T, 17, 0, 1);
  float *h = buf(4 * NC, 18, -3, 3), *hout = buf(4 * NC, 19, -1, 1), *dh = buf(4 * NC, 20, -1, 1);
  float *dh2 = buf(4 * NC, 21, -1, 1), *w = buf((size_t)4 * C * C, 22, -0.1f, 0.1f);
  float *dw = buf((size_t)4 * C * C, 23, -1, 1), *bias = buf((size_t)4 * C, 24, -1, 1);
  float *dbias = buf((size_t)4 * C, 25, -1, 1), *logits0 = buf((size_t)N * Vp, 26, -4, 4);
  float *logits = buf((size_t)N * Vp, 26, -4, 4), *losses = buf(N, 27, 0, 1);
  float *mm_out = buf((size_t)N * Vp > 4 * NC ? (size_t)N * Vp : 4 * NC, 28, -1, 1);
  float *mm_dout = buf((size_t)N * Vp > 4 * NC ? (size_t)N * Vp : 4 * NC, 29, -1, 1);
  float *dwte_head = buf((size_t)Vp * C, 30, -1, 1);
  const size_t P = (size_t)Vp * C + (size_t)T * C +
                   (size_t)L * (12 * (size_t)C * C + 13 * (size_t)C) + 2 * (size_t)C;
  float *pp = buf(P, 31, -1, 1), *pm = buf(P, 32, -0.01f, 0.01f), *pv = buf(P, 33, 0, 1e-4f);
  float *pg = buf(P, 34, -1, 1);
  uint16_t *p16 = malloc(P * sizeof *p16);
  int32_t *tgt = malloc((size_t)N * sizeof *tgt);
  for (int n = 0; n < N; n++) tgt[n] = tok[(n + 1) % N];
  if (!tok || !p16 || !tgt) return 1;
  zeroc_k_layernorm_forward(K, NULL, out, mean, rstd, x, lw, lb, N, C);
  zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, NULL);

  /* matmul FLOPs: forward 2 N C OC; backward 4 N C OC (dinp and dweight) */
  const struct {
    const char *name;
    int C, OC;
    float *w, *bias;
  } mms[] = {{"qkv", C, 3 * C, w, bias},
             {"attproj", C, C, w, bias},
             {"fc", C, 4 * C, w, bias},
             {"fcproj", 4 * C, C, w, bias},
             {"lm head", C, Vp, wte, NULL}};
  /* attention FLOPs actually done on the causal triangle, T(T+1)/2 (query, key)
   * pairs per head: forward q.k and p v (4 HS each); backward q.k, dout.v, and
   * the dv, dq, dk updates (10 HS each) */
  const double pairs = (double)B * NH * T * (T + 1) / 2, HS = (double)C / NH;

  bench_t all[32];
  int nb = 0;
  all[nb++] = (bench_t){"encoder fwd", 0, enc_f, NULL, {out, tok, wte, wpe, dwte, dwpe}, {B, T, C}};
  all[nb++] =
      (bench_t){"encoder bwd", 0, enc_b, NULL, {dout, tok, wte, wpe, dwte, dwpe}, {B, T, C}};
  all[nb++] = (bench_t){"layernorm fwd", 0, ln_f, NULL, {out, mean, rstd, x, lw, lb}, {N, C}};
  all[nb++] = (bench_t){"layernorm bwd", 0, ln_b, NULL, {dout, mean, rstd, x, lw, lb, dx, dlw, dlb},
                        {N, C}};
  for (size_t m = 0; m < sizeof mms / sizeof *mms; m++) {
    static char names[2][5][40];
    snprintf(names[0][m], 40, "matmul %s fwd", mms[m].name);
    snprintf(names[1][m], 40, "matmul %s bwd", mms[m].name);
    const double f = 2.0 * N * mms[m].C * mms[m].OC;
    float *dwm = mms[m].w == wte ? dwte_head : dw;
    all[nb++] = (bench_t){
        names[0][m], f, mm_f, NULL, {mm_out, h, mms[m].w, mms[m].bias}, {N, mms[m].C, mms[m].OC}};
    all[nb++] = (bench_t){names[1][m],
                          2 * f,
                          mm_b,
                          NULL,
                          {mm_dout, h, mms[m].w, NULL, dh, dwm, mms[m].bias ? dbias : NULL},
                          {N, mms[m].C, mms[m].OC}};
  }
  all[nb++] = (bench_t){"attention fwd", 4 * HS * pairs, att_f, NULL, {out, lse, qkv, dqkv, dout},
                        {B, T, C, NH}};
  all[nb++] = (bench_t){"attention bwd", 10 * HS * pairs, att_b, NULL, {out, lse, qkv, dqkv, dout},
                        {B, T, C, NH}};
  /* dropout 0.1 (--dropout): the masks drawn from the hash in forward and again in backward */
  static zeroc_dropout_t d_att, d_res;
  d_att = (zeroc_dropout_t){0.1f, 1, 0, 0, T, T, NH, 0};
  d_res = (zeroc_dropout_t){0.1f, 2, 0, 0, T, T, C, 0};
  all[nb++] = (bench_t){"attention fwd dropout",
                        4 * HS * pairs,
                        att_f,
                        NULL,
                        {out, lse, qkv, dqkv, dout, &d_att},
                        {B, T, C, NH}};
  all[nb++] = (bench_t){"attention bwd dropout",
                        10 * HS * pairs,
                        att_b,
                        NULL,
                        {out, lse, qkv, dqkv, dout, &d_att},
                        {B, T, C, NH}};
  all[nb++] = (bench_t){"dropout (N,C)", 0, drop, NULL, {x, NULL, out, NULL, NULL, &d_res}, {N, C}};
  all[nb++] = (bench_t){"gelu fwd", 0, gelu_f, NULL, {hout, h, dh2}, {(long)(4 * NC)}};
  all[nb++] = (bench_t){"gelu bwd", 0, gelu_b, NULL, {hout, h, dh2}, {(long)(4 * NC)}};
  all[nb++] = (bench_t){"residual fwd", 0, resid, NULL, {x, dout, out}, {(long)NC}};
  all[nb++] = (bench_t){"add", 0, add, NULL, {x, dout, dx}, {(long)NC}};
  all[nb++] = (bench_t){"crossentropy fwd+bwd",         0,         xent, xent_reset,
                        {losses, logits, tgt, logits0}, {N, V, Vp}};
  all[nb++] =
      (bench_t){"cast fp32->bf16 (params)", 0, cast, NULL, {pp, pm, pv, pg, p16}, {(long)P}};
  all[nb++] = (bench_t){"sumsq (params)", 0, sumsq, NULL, {pp, pm, pv, pg, p16}, {(long)P}};
  all[nb++] = (bench_t){"adamw (params)", 0, adamw, NULL, {pp, pm, pv, pg, p16}, {(long)P}};
  printf("(the optimizer rows use %zu parameters; min beside median helps on a busy machine)\n", P);
  printf("%-26s %9s %9s %9s %9s\n", "kernel", "median ms", "min ms", "GFLOP/s", "(at min)");
  for (int b = 0; b < nb; b++) report(&all[b]);

  zeroc_kernels_destroy(K);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return 0;
}
