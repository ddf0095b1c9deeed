/*
 * tests/test_model_acts.c - a user model's activations and the devices and dtypes of
 * its callbacks (issue 36).
 *
 * The residual MLP of examples/resmlp.c (input layer, residual blocks
 * h + W2 relu(W1 h + b1) + b2, softmax head; plain C) in two builds: one keeps its
 * activations in static arrays (what the example does, invisible to the accountant),
 * the other registers them (zeroc_layer_t.act_bytes) and keeps them in io->acts. Both
 * must train to the same bits; the registered bytes must show in the accountant's
 * current and peak activations exactly, on every rank count, and go with the model;
 * two micro-batches in flight (a pipeline's slots) get a set each.
 * Then: io->dtype on the cpu, and the refusal of host callbacks on a cuda context.
 */
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shard/engine.h"
#include "shard/rules.h"
#include "testutil.h"

enum { IN = 12, D = 32, HID = 64, CLS = 4, NBLOCK = 3, GB = 16, NU = NBLOCK + 2, STEPS = 3 };

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

/* What the callbacks saw, for the checks. */
static void *seen_fwd[NU];
static int seen_misaligned, seen_changed, seen_dtype = -1;

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
  seen_dtype = (int)io->dtype;
  acts_t *A = acts_of(io);
  if (io->acts && (uintptr_t)io->acts % 256) seen_misaligned = 1;
  seen_fwd[io->unit] = io->acts;
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
  if (io->acts != seen_fwd[io->unit]) seen_changed = 1; /* the forward's buffer, kept */
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

typedef struct {
  float loss[STEPS];
  uint64_t registered;            /* sum of act_bytes */
  uint64_t act_bytes_query;       /* zeroc_model_activation_bytes */
  uint64_t cur_delta, peak_delta; /* accountant's activations: model alive, over the run */
  uint64_t after_destroy;         /* current activations after destroy, less the baseline */
  int ok;
} run_t;

static void run_model(int registered, zeroc_dtype_t pdt, run_t *out) {
  memset(out, 0, sizeof *out);
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int rows = GB / mesh->dp, first = mesh->dp_rank * rows;
  zeroc_layer_t L[NU];
  layers(L, registered ? rows : 0);
  for (int u = 0; u < NU; u++) out->registered += L[u].act_bytes;
  zeroc_mem_stats_t m0, m1;
  zeroc_ctx_memory(ctx, &m0);
  zeroc_ctx_memory_reset_peak(ctx);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.param_dtype = pdt;
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, NU, &sc, &m));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  out->act_bytes_query = zeroc_model_activation_bytes(m);
  memset(seen_fwd, 0, sizeof seen_fwd);
  float x[GB * IN];
  int y[GB];
  batch_t b = {rows, x, y};
  for (int k = 0; k < STEPS; k++) {
    make_batch(k, first, rows, x, y);
    zeroc_step_info_t info;
    ZT_OK(zeroc_model_forward(m, &b));
    ZT_OK(zeroc_model_backward(m));
    ZT_OK(zeroc_model_step(m, 0.01f, &info));
    out->loss[k] = info.loss;
  }
  zeroc_ctx_memory(ctx, &m1);
  const int A = ZEROC_TAG_ACTIVATIONS, DV = ZEROC_MEM_DEVICE;
  out->cur_delta = m1.current[DV][A] - m0.current[DV][A];
  out->peak_delta = m1.peak[DV][A] - m0.current[DV][A];
  zeroc_model_destroy(m);
  zeroc_ctx_memory(ctx, &m1);
  out->after_destroy = m1.current[DV][A] - m0.current[DV][A];
  ZT_OK(zeroc_ctx_finalize(ctx));
  out->ok = 1;
}

/* Registered activations: the accountant's current and peak activations grow by exactly
 * the registered bytes (per rank: half the rows on 2 ranks, so about half the bytes),
 * zeroc_model_activation_bytes says the same, destroy gives them back; the model trains
 * to the same bits as with static arrays, each unit's buffer its own. */
static void test_registered_activations(void) {
  run_t st, reg;
  run_model(0, ZEROC_FP32, &st);
  seen_misaligned = seen_changed = 0;
  run_model(1, ZEROC_FP32, &reg);
  CU_ASSERT_FATAL(st.ok && reg.ok);
  CU_ASSERT_EQUAL(st.registered, 0);
  CU_ASSERT_EQUAL(st.act_bytes_query, 0);
  CU_ASSERT_EQUAL(st.peak_delta, 0); /* static arrays: invisible, as the issue found */
  int rows = GB / zt_world();
  ZT_ASSERT_MSG(reg.registered > 0, "nothing registered");
  ZT_ASSERT_MSG(reg.act_bytes_query == reg.registered,
                "zeroc_model_activation_bytes %llu, registered %llu",
                (unsigned long long)reg.act_bytes_query, (unsigned long long)reg.registered);
  ZT_ASSERT_MSG(reg.cur_delta == reg.registered, "current activations +%llu, registered %llu",
                (unsigned long long)reg.cur_delta, (unsigned long long)reg.registered);
  ZT_ASSERT_MSG(reg.peak_delta == reg.registered, "peak activations +%llu, registered %llu",
                (unsigned long long)reg.peak_delta, (unsigned long long)reg.registered);
  CU_ASSERT_EQUAL(reg.after_destroy, 0);
  CU_ASSERT_EQUAL(seen_misaligned, 0);
  CU_ASSERT_EQUAL(seen_changed, 0);
  for (int u = 0; u < NU; u++) CU_ASSERT_PTR_NOT_NULL(seen_fwd[u]);
  for (int u = 0; u < NU; u++)
    for (int v = u + 1; v < NU; v++) CU_ASSERT_PTR_NOT_EQUAL(seen_fwd[u], seen_fwd[v]);
  for (int k = 0; k < STEPS; k++)
    ZT_ASSERT_MSG(reg.loss[k] == st.loss[k], "step %d loss %.9g, static arrays %.9g", k + 1,
                  reg.loss[k], st.loss[k]);
  ZT_ASSERT_MSG(st.loss[STEPS - 1] < st.loss[0], "loss %g -> %g does not fall", st.loss[0],
                st.loss[STEPS - 1]);
  /* every rank registered for its own rows: on 2 ranks half of the 1-rank figure's rows */
  double per_rank = (double)reg.registered, lo = per_rank, hi = per_rank;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CU_ASSERT_EQUAL(lo, hi);
  if (zt_rank() == 0)
    printf("  activations registered per rank (%d rows): %llu bytes, accountant peak +%llu\n", rows,
           (unsigned long long)reg.registered, (unsigned long long)reg.peak_delta);
}

/* Two micro-batches in flight (a pipeline's slots, zeroc__model_set_slots): each slot
 * gets its own buffers, counted (2 x the registered bytes), and the forwards of both
 * before their backwards (F0 F1 B0 B1) train to the same bits as one after the other,
 * which the static arrays could not (the second forward overwrites the first's). */
static void run_slots(int interleave, float *loss, uint64_t *act, uint64_t *counted) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int rows = GB / mesh->dp / 2;
  zeroc_layer_t L[NU];
  layers(L, rows);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = 1; /* what a pipeline allows */
  sc.grad_accum = 2;
  zeroc_mem_stats_t m0, m1;
  zeroc_ctx_memory(ctx, &m0);
  zeroc_model_t *m = NULL;
  ZT_OK(zeroc_shard(ctx, L, NU, &sc, &m));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  ZT_OK(zeroc__model_set_slots(m, 2)); /* frees the 1-slot set, allocates 2 */
  zeroc_ctx_memory(ctx, &m1);
  *act = zeroc_model_activation_bytes(m);
  *counted = m1.current[ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS] -
             m0.current[ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS];
  float x[2][GB * IN];
  int y[2][GB];
  batch_t b[2] = {{rows, x[0], y[0]}, {rows, x[1], y[1]}};
  for (int k = 0; k < STEPS; k++) {
    void *o = NULL;
    for (int u = 0; u < 2; u++)
      make_batch(k, (u * mesh->dp + mesh->dp_rank) * rows, rows, x[u], y[u]);
    if (interleave) {
      for (int u = 0; u < 2; u++)
        ZT_OK(zeroc__model_forward_units(m, 0, NU - 1, u, u, &b[u], NULL, &o));
      for (int u = 0; u < 2; u++)
        ZT_OK(zeroc__model_backward_units(m, 0, NU - 1, u, u, &b[u], NULL, &o));
    } else {
      for (int u = 0; u < 2; u++) {
        ZT_OK(zeroc__model_forward_units(m, 0, NU - 1, 0, u, &b[u], NULL, &o));
        ZT_OK(zeroc__model_backward_units(m, 0, NU - 1, 0, u, &b[u], NULL, &o));
      }
    }
    zeroc_step_info_t info;
    ZT_OK(zeroc_model_step(m, 0.01f, &info));
    loss[k] = info.loss;
  }
  zeroc_model_destroy(m);
  ZT_OK(zeroc_ctx_finalize(ctx));
}

static void test_slots(void) {
  float seq[STEPS], inter[STEPS];
  uint64_t act1, act2, counted1, counted2;
  run_slots(0, seq, &act1, &counted1);
  run_slots(1, inter, &act2, &counted2);
  zeroc_layer_t L[NU];
  layers(L, GB / zt_world() / 2);
  uint64_t reg = 0;
  for (int u = 0; u < NU; u++) reg += L[u].act_bytes;
  ZT_ASSERT_MSG(act2 == 2 * reg, "2 slots: zeroc_model_activation_bytes %llu, 2 x %llu registered",
                (unsigned long long)act2, (unsigned long long)reg);
  ZT_ASSERT_MSG(counted2 == 2 * reg, "2 slots: the accountant counts %llu, 2 x %llu registered",
                (unsigned long long)counted2, (unsigned long long)reg);
  for (int k = 0; k < STEPS; k++)
    ZT_ASSERT_MSG(inter[k] == seq[k], "step %d: F0 F1 B0 B1 loss %.9g, one after the other %.9g",
                  k + 1, inter[k], seq[k]);
}

/* io->dtype is the compute dtype the callbacks get: fp32 on the cpu whether the
 * parameters are fp32 or bf16 (the cpu kernels compute in fp32 from a copy). */
static void test_io_dtype(void) {
  run_t r;
  seen_dtype = -1;
  run_model(1, ZEROC_BF16, &r);
  CU_ASSERT(r.ok);
  CU_ASSERT_EQUAL(seen_dtype, ZEROC_FP32);
}

/* Host callbacks on a cuda context are refused, one line naming the unit and both ways
 * out, and saying when ZEROC_DEVICE_AUTO chose cuda; device callbacks and the cpu pass.
 * The rule is checked directly (this machine may have no GPU), then end to end: a bad
 * callbacks value through zeroc_shard on the cpu, and, where a GPU is visible, host
 * callbacks on an AUTO context. */
static void test_host_callbacks_refused_on_cuda(void) {
  zeroc_layer_t L[NU];
  layers(L, 0);
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CPU, ZEROC_DEVICE_AUTO),
                  ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CUDA, ZEROC_DEVICE_AUTO),
                  ZEROC_ERR_UNSUPPORTED);
  const char *e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(strstr(e, "unit 0 ('input') has host callbacks") &&
                    strstr(e, "ZEROC_DEVICE_AUTO found a GPU") && strstr(e, "ZEROC_DEVICE_CPU") &&
                    strstr(e, "ZEROC_CALLBACKS_DEVICE") && !strchr(e, '\n'),
                "message: %s", e);
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CUDA, ZEROC_DEVICE_CUDA),
                  ZEROC_ERR_UNSUPPORTED);
  e = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(strstr(e, "context's device is cuda,") && !strstr(e, "AUTO"), "message: %s", e);
  for (int u = 0; u < NU; u++) L[u].callbacks = ZEROC_CALLBACKS_DEVICE;
  L[2].callbacks = ZEROC_CALLBACKS_HOST; /* one host unit is enough to refuse */
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CUDA, ZEROC_DEVICE_CUDA),
                  ZEROC_ERR_UNSUPPORTED);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "unit 2 ('block')"), "message: %s",
                zeroc_last_error(NULL));
  L[2].callbacks = ZEROC_CALLBACKS_DEVICE;
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CUDA, ZEROC_DEVICE_AUTO),
                  ZEROC_OK);
  CU_ASSERT_EQUAL(zeroc__shard_check_callbacks(L, NU, ZEROC_DEVICE_CPU, ZEROC_DEVICE_CPU),
                  ZEROC_OK);

  /* end to end on a cpu context: zeroc_shard applies the rule */
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
  L[1].callbacks = (zeroc_callbacks_t)7;
  zeroc_model_t *m = NULL;
  CU_ASSERT_EQUAL(zeroc_shard(ctx, L, NU, NULL, &m), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "unit 1 ('block'): callbacks 7; accepted"),
                "message: %s", zeroc_last_error(ctx));
  CU_ASSERT_PTR_NULL(m);
  ZT_OK(zeroc_ctx_finalize(ctx));

  /* where ZEROC_DEVICE_AUTO finds a GPU: the refusal itself, through zeroc_shard */
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT; /* device AUTO */
  cc.comm_timeout_s = 120;
  zeroc_ctx_t *c = NULL;
  if (zeroc_ctx_create(&c, &cc) != ZEROC_OK || zeroc_ctx_device(c) != ZEROC_DEVICE_CUDA) {
    zt_not_checked("host callbacks on a context ZEROC_DEVICE_AUTO made cuda (no GPU here)");
    if (c) ZT_OK(zeroc_ctx_finalize(c));
    return;
  }
  layers(L, 0);
  CU_ASSERT_EQUAL(zeroc_shard(c, L, NU, NULL, &m), ZEROC_ERR_UNSUPPORTED);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(c), "ZEROC_DEVICE_AUTO found a GPU"), "message: %s",
                zeroc_last_error(c));
  CU_ASSERT_PTR_NULL(m);
  ZT_OK(zeroc_ctx_finalize(c));
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"registered activations: the accountant's peak, exactly; same bits as static arrays",
       test_registered_activations},
      {"two slots in flight: own buffers, counted, the same bits as one after the other",
       test_slots},
      {"io->dtype is the compute dtype (fp32 on the cpu, bf16 parameters too)", test_io_dtype},
      {"host callbacks are refused on a cuda context, one line",
       test_host_callbacks_refused_on_cuda},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "model_acts", tests, 1, 0);
}
