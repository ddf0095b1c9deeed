/*
 * tests/test_shard_predict.c - zeroc_shard_predict against the accountant (issue 36).
 *
 * A user model (the residual MLP of tests/test_model_acts.c: input layer, residual
 * blocks, softmax head; plain C) is predicted before its context exists, then built
 * and trained one full step; the accountant's peak per memory kind and tag, less what
 * the context held before, must equal the prediction to the byte on every rank: ZeRO
 * stages 0-3, with and without registered activations, one and two micro-steps, bf16
 * parameters, 16-bit reduction, a unit shared by a later one, optimizer and parameter
 * offload to cpu, HSDP, two activation slots. Then the argument checks.
 */
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shard/engine.h"
#include "testutil.h"

enum {
  IN = 12,
  D = 32,
  HID = 64,
  CLS = 4,
  NBLOCK = 3,
  GB = 16,
  NU = NBLOCK + 2,
};

/* ---- the residual MLP (examples/resmlp.c's layer code) ------------------------------- */

typedef struct {
  int rows;
  const float *x;
  const int *y;
} batch_t;

/* One unit's activations for one micro-batch of up to GB rows: its output h, the
 * block's hidden a, its input gradient dx and the head's probabilities. */
typedef struct {
  float h[GB * D], a[GB * HID], dx[GB * D], probs[GB * CLS];
} acts_t;
static acts_t static_acts[NU]; /* the unregistered build */

static acts_t *acts_of(zeroc_layer_io_t *io) {
  return io->acts ? (acts_t *)io->acts : &static_acts[io->unit];
}

/* y (n, o) = x (n, i) @ W^T (o, i) + b */
static void lin(float *y, const float *x, const float *W, const float *b, int n, int i, int o) {
  for (int r = 0; r < n; r++)
    for (int k = 0; k < o; k++) {
      float s = b[k];
      for (int c = 0; c < i; c++) s += x[r * i + c] * W[k * i + c];
      y[r * o + k] = s;
    }
}

/* dW += dy^T x, db += sum dy, dx += dy W (dx may be NULL) */
static void lin_bwd(float *dW, float *db, float *dx, const float *dy, const float *x,
                    const float *W, int n, int i, int o) {
  for (int r = 0; r < n; r++)
    for (int k = 0; k < o; k++) {
      float d = dy[r * o + k];
      db[k] += d;
      for (int c = 0; c < i; c++) {
        dW[k * i + c] += d * x[r * i + c];
        if (dx) dx[r * i + c] += d * W[k * i + c];
      }
    }
}

static const float *input_of(zeroc_layer_io_t *io) {
  return io->unit == 0 ? ((const batch_t *)io->in)->x : io->in;
}

static zeroc_result_t fwd(zeroc_layer_io_t *io) {
  if (io->dtype != ZEROC_FP32) /* plain C written for fp32 */
    return zeroc_error_set(ZEROC_ERR_UNSUPPORTED, "dtype %s: written for fp32",
                           zeroc_dtype_name(io->dtype));
  acts_t *A = acts_of(io);
  const batch_t *b = io->batch;
  const float *x = input_of(io);
  void *const *P = io->params;
  int n = b->rows;
  if (io->unit == 0) lin(A->h, x, P[0], P[1], n, IN, D);
  if (io->unit > 0 && io->unit <= NBLOCK) {
    lin(A->a, x, P[0], P[1], n, D, HID);
    for (int j = 0; j < n * HID; j++) A->a[j] = A->a[j] > 0 ? A->a[j] : 0;
    lin(A->h, A->a, P[2], P[3], n, HID, D);
    for (int j = 0; j < n * D; j++) A->h[j] += x[j];
  }
  if (io->unit == NU - 1) { /* softmax cross-entropy, mean over this rank's rows */
    lin(A->h, x, P[0], P[1], n, D, CLS);
    double loss = 0;
    for (int r = 0; r < n; r++) {
      float *p = &A->probs[r * CLS], *z = &A->h[r * CLS], mx = z[0], s = 0;
      for (int k = 1; k < CLS; k++) mx = z[k] > mx ? z[k] : mx;
      for (int k = 0; k < CLS; k++) s += p[k] = expf(z[k] - mx);
      for (int k = 0; k < CLS; k++) p[k] /= s;
      loss -= log(p[b->y[r]]);
    }
    *io->loss = (float)(loss / n);
  }
  io->out = A->h;
  return ZEROC_OK;
}

static zeroc_result_t bwd(zeroc_layer_io_t *io) {
  acts_t *A = acts_of(io);
  const batch_t *b = io->batch;
  const float *x = input_of(io);
  void *const *P = io->params, *const *G = io->grads;
  int n = b->rows;
  static float dy[GB * D], da[GB * HID];
  if (io->unit == NU - 1) {
    for (int r = 0; r < n; r++)
      for (int k = 0; k < CLS; k++)
        dy[r * CLS + k] = (A->probs[r * CLS + k] - (k == b->y[r])) * io->grad_scale / n;
    memset(A->dx, 0, sizeof(float) * n * D);
    lin_bwd(G[0], G[1], A->dx, dy, x, P[0], n, D, CLS);
  } else if (io->unit > 0) {
    memcpy(A->dx, io->dout, sizeof(float) * n * D); /* the residual path */
    memset(da, 0, sizeof(float) * n * HID);
    lin_bwd(G[2], G[3], da, io->dout, A->a, P[2], n, HID, D);
    for (int j = 0; j < n * HID; j++) da[j] = A->a[j] > 0 ? da[j] : 0;
    lin_bwd(G[0], G[1], A->dx, da, x, P[0], n, D, HID);
  } else {
    lin_bwd(G[0], G[1], NULL, io->dout, x, P[0], n, IN, D);
  }
  io->din = A->dx;
  return ZEROC_OK;
}

static void make_batch(int step, int first, int n, float *x, int *y) {
  uint64_t s = 77 + (uint64_t)step;
  float gx[GB * IN];
  int gy[GB];
  for (int r = 0; r < GB; r++) {
    float dot = 0;
    for (int c = 0; c < IN; c++) {
      gx[r * IN + c] = (float)(zt_rand_u64(&s) % 2000) / 1000.0f - 1.0f;
      dot += gx[r * IN + c] * (float)((c * 7) % 5 - 2);
    }
    gy[r] = dot < -2 ? 0 : dot < 0 ? 1 : dot < 2 ? 2 : 3;
  }
  memcpy(x, gx + first * IN, sizeof(float) * (size_t)n * IN);
  memcpy(y, gy + first, sizeof(int) * (size_t)n);
}

static const zeroc_param_desc_t P_in[] = {
    {.name = "w", .ndim = 2, .shape = {D, IN}, .init_scale = 0.3f},
    {.name = "b", .ndim = 1, .shape = {D}, .init = ZEROC_INIT_ZEROS}};
static const zeroc_param_desc_t P_blk[] = {
    {.name = "w1", .ndim = 2, .shape = {HID, D}, .init_scale = 0.15f},
    {.name = "b1", .ndim = 1, .shape = {HID}, .init = ZEROC_INIT_ZEROS},
    {.name = "w2", .ndim = 2, .shape = {D, HID}, .init_scale = 0.05f},
    {.name = "b2", .ndim = 1, .shape = {D}, .init = ZEROC_INIT_ZEROS}};
static const zeroc_param_desc_t P_head[] = {
    {.name = "w", .ndim = 2, .shape = {CLS, D}, .init_scale = 0.15f},
    {.name = "b", .ndim = 1, .shape = {CLS}, .init = ZEROC_INIT_ZEROS}};

/* The unit list; `rows` > 0: each unit registers what it keeps for `rows` rows. */
static void layers(zeroc_layer_t *L, int rows) {
  for (int u = 0; u < NU; u++) {
    int head = u == NU - 1, blk = u > 0 && !head;
    L[u] = (zeroc_layer_t){.name = u == 0 ? "input"
                                   : head ? "head"
                                          : "block",
                           .nparams = blk ? 4 : 2,
                           .params = u == 0 ? P_in
                                     : head ? P_head
                                            : P_blk,
                           .shares = -1,
                           .forward = fwd,
                           .backward = bwd};
    /* the bytes each unit really uses for `rows` rows, which differ by unit and rank
     * count (the head's h is rows x CLS); laid out in acts_t, so a unit's registered
     * bytes reach to the end of the last field it uses */
    size_t end = head  ? offsetof(acts_t, probs) + sizeof(float) * (size_t)rows * CLS
                 : blk ? offsetof(acts_t, dx) + sizeof(float) * (size_t)rows * D
                       : offsetof(acts_t, h) + sizeof(float) * (size_t)rows * D;
    L[u].act_bytes = rows > 0 ? end : 0;
  }
}

/* ---- prediction against the accountant ------------------------------------------------ */

typedef struct {
  const char *what;
  int stage, accum, acts, share, slots, hsdp;
  zeroc_dtype_t pdt, rdt;
  zeroc_offload_t oo, op;
} case_t;

static zeroc_ctx_config_t ctx_config(int hsdp) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU; /* what zt_ctx makes */
  cc.hsdp = hsdp;
  return cc;
}

static zeroc_shard_config_t shard_config(const case_t *k) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = k->stage;
  sc.grad_accum = k->accum;
  sc.param_dtype = k->pdt ? k->pdt : ZEROC_FP32;
  sc.reduce_dtype = k->rdt ? k->rdt : ZEROC_FP32;
  sc.offload_optimizer = k->oo;
  sc.offload_params = k->op;
  return sc;
}

/* One step of `accum` micro-steps through the whole model (slots 1), or through both
 * slots at once, F0 F1 B0 B1, as a pipeline stage would (slots 2). */
static void train_step(zeroc_model_t *m, const case_t *k, int rows, int dp, int dp_rank) {
  float x[2][GB * IN];
  int y[2][GB];
  batch_t b[2] = {{rows, x[0], y[0]}, {rows, x[1], y[1]}};
  for (int u = 0; u < k->accum; u++) make_batch(0, (u * dp + dp_rank) * rows, rows, x[u], y[u]);
  if (k->slots == 2) {
    void *o = NULL;
    for (int u = 0; u < 2; u++)
      ZT_OK(zeroc__model_forward_units(m, 0, NU - 1, u, u, &b[u], NULL, &o));
    for (int u = 0; u < 2; u++)
      ZT_OK(zeroc__model_backward_units(m, 0, NU - 1, u, u, &b[u], NULL, &o));
  } else {
    for (int u = 0; u < k->accum; u++) {
      ZT_OK(zeroc_model_forward(m, &b[u]));
      ZT_OK(zeroc_model_backward(m));
    }
  }
  zeroc_step_info_t info;
  ZT_OK(zeroc_model_step(m, 0.01f, &info));
  CU_ASSERT(isfinite(info.loss) && info.skipped == 0);
}

/* Predicts case k, builds and trains it on a fresh context, and compares every kind and
 * tag of the accountant's peak (less the context's own bytes) with the prediction. */
static void check_case(const case_t *k) {
  const int world = zt_world(), hsdp = k->hsdp ? k->hsdp : 1;
  if (world % hsdp || (hsdp > 1 && world == hsdp)) return; /* HSDP needs a shard group > 1 */
  const int rows = GB / world / k->accum;
  zeroc_layer_t L[NU];
  layers(L, k->acts ? rows : 0);
  if (k->share) L[NU - 1].shares = 1; /* the head "uses" block 1: pinned, own buffers */
  zeroc_shard_config_t sc = shard_config(k);
  zeroc_ctx_config_t cc = ctx_config(hsdp);
  zeroc_mem_prediction_t pred;
  ZT_OK(zeroc_shard_predict(L, NU, &sc, &cc, world, k->slots, &pred));

  zeroc_ctx_t *ctx = zt_ctx(1, 1, hsdp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_mem_stats_t m0, m1, m2;
  zeroc_ctx_memory(ctx, &m0);
  zeroc_ctx_memory_reset_peak(ctx);
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, NU, &sc, &m));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  if (k->slots == 2) ZT_OK(zeroc__model_set_slots(m, 2));
  train_step(m, k, rows, mesh->dp, mesh->dp_rank);
  zeroc_ctx_memory(ctx, &m1);
  int bad = 0;
  for (int kind = 0; kind < ZEROC_MEM_KIND_COUNT; kind++)
    for (int t = 0; t < ZEROC_TAG_COUNT; t++) {
      uint64_t got = m1.peak[kind][t] - m0.current[kind][t], want = pred.bytes[kind][t];
      if (got == want) continue;
      bad = 1;
      fprintf(stderr, "[rank %d] %s: %s %s: accountant peak %llu bytes, predicted %llu\n",
              zt_rank(), k->what, zeroc_memkind_name((zeroc_memkind_t)kind),
              zeroc_memtag_name((zeroc_memtag_t)t), (unsigned long long)got,
              (unsigned long long)want);
    }
  for (int kind = 0; kind < ZEROC_MEM_KIND_COUNT; kind++) {
    uint64_t sum = 0;
    for (int t = 0; t < ZEROC_TAG_COUNT; t++) sum += pred.bytes[kind][t];
    CU_ASSERT_EQUAL(pred.total[kind], sum);
    /* everything is allocated when the model is made: the peak of the sum is the sum */
    CU_ASSERT_EQUAL(m1.peak_total[kind] - m0.current_total[kind], pred.total[kind]);
  }
  ZT_ASSERT_MSG(!bad, "%s: the prediction is not the accountant's peak (per tag above)", k->what);
  if (zt_rank() == 0 && !bad)
    printf("  %d ranks, %s: device %llu bytes (activations %llu), pinned %llu: as predicted\n",
           world, k->what, (unsigned long long)pred.total[ZEROC_MEM_DEVICE],
           (unsigned long long)pred.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS],
           (unsigned long long)pred.total[ZEROC_MEM_PINNED]);
  /* registered activations are the model's own figure too */
  CU_ASSERT_EQUAL(pred.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS],
                  zeroc_model_activation_bytes(m));
  zeroc_model_destroy(m);
  zeroc_ctx_memory(ctx, &m2);
  for (int kind = 0; kind < ZEROC_MEM_KIND_COUNT; kind++)
    CU_ASSERT_EQUAL(m2.current_total[kind], m0.current_total[kind]);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

/* ZeRO 0-3 x activations registered or not x one or two micro-steps. */
static void test_stages(void) {
  uint64_t dev[4][2] = {{0}};
  for (int st = 0; st <= 3; st++)
    for (int acts = 0; acts <= 1; acts++)
      for (int accum = 1; accum <= 2; accum++) {
        char what[64];
        snprintf(what, sizeof what, "stage %d, acts %d, grad_accum %d", st, acts, accum);
        case_t k = {.what = what, .stage = st, .accum = accum, .acts = acts};
        check_case(&k);
        if (accum == 1) {
          zeroc_layer_t L[NU];
          layers(L, acts ? GB / zt_world() : 0);
          zeroc_shard_config_t sc = shard_config(&k);
          zeroc_ctx_config_t cc = ctx_config(1);
          zeroc_mem_prediction_t p;
          ZT_OK(zeroc_shard_predict(L, NU, &sc, &cc, zt_world(), 1, &p));
          dev[st][acts] = p.total[ZEROC_MEM_DEVICE];
        }
      }
  /* stage 1 shards the optimizer's 12 bytes a parameter over the ranks (later stages trade
   * their shards against pools of the largest unit, which on units this small can cost
   * more than they save); registered activations add */
  if (zt_world() > 1)
    ZT_ASSERT_MSG(dev[1][0] < dev[0][0], "stage 1: %llu bytes, stage 0: %llu",
                  (unsigned long long)dev[1][0], (unsigned long long)dev[0][0]);
  for (int st = 0; st <= 3; st++) CU_ASSERT(dev[st][1] > dev[st][0]);
}

/* dtypes, a shared unit, offload, HSDP, two slots. */
static void test_variants(void) {
  static const case_t cases[] = {
      {"stage 3, bf16 params (compute copies)", 3, 1, 1, 0, 0, 0, ZEROC_BF16, 0, 0, 0},
      {"stage 2, bf16 reduce, grad_accum 2", 2, 2, 1, 0, 0, 0, 0, ZEROC_BF16, 0, 0},
      {"stage 1, bf16 params and reduce, grad_accum 2", 1, 2, 1, 0, 0, 0, ZEROC_BF16, ZEROC_BF16, 0,
       0},
      {"stage 3, shared unit", 3, 1, 1, 1, 0, 0, 0, 0, 0, 0},
      {"stage 2, shared unit, bf16 params", 2, 1, 0, 1, 0, 0, ZEROC_BF16, 0, 0, 0},
      {"stage 3, optimizer offload cpu", 3, 1, 1, 0, 0, 0, 0, 0, ZEROC_OFFLOAD_CPU, 0},
      {"stage 1, optimizer offload cpu, grad_accum 2", 1, 2, 1, 0, 0, 0, 0, 0, ZEROC_OFFLOAD_CPU,
       0},
      {"stage 3, parameter offload cpu", 3, 1, 1, 0, 0, 0, 0, 0, 0, ZEROC_OFFLOAD_CPU},
      {"stage 3, optimizer and parameter offload cpu, bf16", 3, 1, 0, 0, 0, 0, ZEROC_BF16, 0,
       ZEROC_OFFLOAD_CPU, ZEROC_OFFLOAD_CPU},
      {"stage 2, HSDP 2", 2, 1, 1, 0, 0, 2, 0, 0, 0, 0},
      {"stage 1, two activation slots, grad_accum 2", 1, 2, 1, 0, 2, 0, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

/* ---- cuda -------------------------------------------------------------------------------
 * Where a GPU is visible: a model of device callbacks that compute nothing (forward passes
 * its input on, backward gives no input gradient: the buffers, not the numbers, are under
 * test), at stages 0-3 and with bf16 parameters, against the accountant as above, so the
 * kernels' workspace, the pinned read-back and the compute copies of cuda are checked. */

static zeroc_result_t nop_fwd(zeroc_layer_io_t *io) {
  io->out = (void *)io->in;
  return ZEROC_OK;
}

static zeroc_result_t nop_bwd(zeroc_layer_io_t *io) {
  io->din = NULL;
  return ZEROC_OK;
}

static void check_cuda(zeroc_ctx_t *ctx, int stage, zeroc_dtype_t pdt) {
  zeroc_layer_t L[NU];
  layers(L, 8);
  for (int u = 0; u < NU; u++) {
    L[u].forward = nop_fwd, L[u].backward = nop_bwd;
    L[u].callbacks = ZEROC_CALLBACKS_DEVICE;
    L[u].workspace_bytes = 1000 + 24 * (size_t)u; /* the largest counts once */
  }
  case_t k = {.stage = stage, .accum = 1, .pdt = pdt};
  zeroc_shard_config_t sc = shard_config(&k);
  zeroc_ctx_config_t cc = ctx_config(1);
  cc.device = ZEROC_DEVICE_CUDA;
  zeroc_mem_prediction_t pred;
  ZT_OK(zeroc_shard_predict(L, NU, &sc, &cc, zt_world(), 1, &pred));
  zeroc_mem_stats_t m0, m1;
  zeroc_ctx_memory(ctx, &m0);
  zeroc_ctx_memory_reset_peak(ctx);
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, NU, &sc, &m));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  float x[GB * IN] = {0};
  int y[GB] = {0};
  batch_t b = {1, x, y};
  ZT_OK(zeroc_model_forward(m, &b));
  ZT_OK(zeroc_model_backward(m));
  ZT_OK(zeroc_model_step(m, 0.01f, NULL));
  zeroc_ctx_memory(ctx, &m1);
  for (int kind = 0; kind < ZEROC_MEM_KIND_COUNT; kind++)
    for (int t = 0; t < ZEROC_TAG_COUNT; t++) {
      uint64_t got = m1.peak[kind][t] - m0.current[kind][t], want = pred.bytes[kind][t];
      ZT_ASSERT_MSG(got == want, "cuda, stage %d, %s: %s %s: accountant peak %llu, predicted %llu",
                    stage, zeroc_dtype_name(sc.param_dtype),
                    zeroc_memkind_name((zeroc_memkind_t)kind), zeroc_memtag_name((zeroc_memtag_t)t),
                    (unsigned long long)got, (unsigned long long)want);
    }
  zeroc_model_destroy(m);
}

static void test_cuda(void) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT; /* device AUTO */
  cc.comm_timeout_s = 120;
  zeroc_ctx_t *ctx = NULL;
  if (zeroc_ctx_create(&ctx, &cc) != ZEROC_OK || zeroc_ctx_device(ctx) != ZEROC_DEVICE_CUDA) {
    zt_not_checked("the prediction on a cuda context (no GPU here)");
    if (ctx) ZT_OK(zeroc_ctx_finalize(ctx));
    return;
  }
  for (int st = 0; st <= 3; st++) check_cuda(ctx, st, ZEROC_FP32);
  check_cuda(ctx, 3, ZEROC_BF16);
  check_cuda(ctx, 1, ZEROC_BF16);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

/* ---- argument checks ------------------------------------------------------------------ */

#define EXPECT_ERR(call, code, needle)                                                             \
  do {                                                                                             \
    CU_ASSERT_EQUAL((call), (code));                                                               \
    const char *e_ = zeroc_last_error(NULL);                                                       \
    ZT_ASSERT_MSG(strstr(e_, (needle)) && !strchr(e_, '\n'), "message '%s' lacks '%s'", e_,        \
                  (needle));                                                                       \
  } while (0)

static void test_arguments(void) {
  zeroc_layer_t L[NU];
  layers(L, 4);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  zeroc_ctx_config_t cc = ctx_config(1);
  zeroc_mem_prediction_t p;
  const zeroc_result_t INV = ZEROC_ERR_INVALID_ARG;
  EXPECT_ERR(zeroc_shard_predict(NULL, NU, &sc, &cc, 1, 1, &p), INV, "layers (nil)");
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, NULL, 1, 1, &p), INV, "ctx_cfg (nil)");
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, NULL), INV, "out (nil)");
  EXPECT_ERR(zeroc_shard_predict(L, 0, &sc, &cc, 1, 1, &p), INV, "0 units");
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 0, 1, &p), INV, "world 0");
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, -1, &p), INV, "slots -1");
  sc.stage = 4;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "ZeRO stage 4: accepted 0");
  sc.stage = 3;
  sc.size = 0; /* not from ZEROC_SHARD_CONFIG_INIT */
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "ZEROC_SHARD_CONFIG_INIT");
  sc = (zeroc_shard_config_t)ZEROC_SHARD_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_AUTO;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "device");
  cc = ctx_config(1);
  cc.magic = 0;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "ZEROC_CTX_CONFIG_INIT");
  cc = ctx_config(1);
  cc.tp = 3; /* does not divide 4 ranks */
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 4, 1, &p), INV,
             "does not divide the world size 4");
  cc = ctx_config(2);
  sc.stage = 0; /* HSDP needs sharding */
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 4, 1, &p), INV, "HSDP");
  cc = ctx_config(1);
  cc.pp = 2;
  sc.stage = 2;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 2, 1, &p), INV, "pipeline");
  cc = ctx_config(1);
  sc.stage = 1;
  sc.offload_params = ZEROC_OFFLOAD_CPU;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "needs ZeRO stage 3");
  sc = (zeroc_shard_config_t)ZEROC_SHARD_CONFIG_INIT;
  L[2].shares = 3;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "unit 2 ('block') shares 3");
  L[2].shares = -1;
  L[1].nparams = 0;
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), INV, "unit 1");
  L[1].nparams = 4;
  cc.device = ZEROC_DEVICE_CUDA; /* host callbacks: refused before any device is asked */
  EXPECT_ERR(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p), ZEROC_ERR_UNSUPPORTED,
             "has host callbacks");
  /* device callbacks on cuda: predicted without a GPU, with the kernels' workspace */
  for (int u = 0; u < NU; u++) L[u].callbacks = ZEROC_CALLBACKS_DEVICE;
  ZT_OK(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &p));
  zeroc_mem_prediction_t q;
  cc.device = ZEROC_DEVICE_CPU;
  ZT_OK(zeroc_shard_predict(L, NU, &sc, &cc, 1, 1, &q));
  CU_ASSERT(p.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_WORKSPACE] >
            q.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_WORKSPACE] + (1u << 20));
  CU_ASSERT_EQUAL(p.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_PARAMS],
                  q.bytes[ZEROC_MEM_DEVICE][ZEROC_TAG_PARAMS]);
  ZT_OK(zeroc_shard_predict(L, NU, NULL, &cc, 1, 0, &q)); /* NULL config: every field unset */
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"ZeRO 0-3, activations, grad_accum 2: the accountant's peak to the byte", test_stages},
      {"bf16, shared unit, offload cpu, HSDP, two slots: to the byte", test_variants},
      {"argument checks: one-line errors", test_arguments},
      {"cuda (where a GPU is visible): the accountant's peak to the byte", test_cuda},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "shard_predict", tests, 1, 0);
}
