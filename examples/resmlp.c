/*
 * examples/resmlp.c - a user's residual MLP on zeroc_shard(): an input layer,
 * residual blocks h + W2 relu(W1 h + b1) + b2 and a softmax head, written as
 * plain C callbacks. Trains (warm-up and cosine rates from zeroc_lr_at),
 * evaluates a held-out batch with the mean over the data-parallel ranks
 * (zeroc_model_eval_mean), counts correct answers over them
 * (zeroc_ctx_allreduce), and exports / imports the weights by name. The second
 * half of the run takes each step's batch in two micro-batches
 * (zeroc_model_set_accum: the same gradients, half the activations). Each unit
 * keeps its activations in the buffer zeroc allocates for it (act_bytes,
 * io->acts), so the accountant's peak counts them.
 *   mpirun -np 4 ./resmlp [--stage S] [--hsdp H] [--steps N] [--import F] [--export F]
 * Every layout prints the same figures as one rank (examples/resmlp_check.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zeroc/zeroc.h>

enum { IN = 12, D = 32, HID = 64, CLS = 4, NBLOCK = 3, GB = 64 };

typedef struct {
  int rows;
  const float *x;
  const int *y;
} batch_t;
/* What a unit keeps from its forward to its backward: registered as act_bytes, so zeroc
 * allocates it (io->acts) and its accountant counts it under "activations". */
typedef struct {
  float h[GB * D], a[GB * HID], dx[GB * IN > GB *D ? GB *IN : GB *D];
} acts_t;
static float probs[GB * CLS];
static double correct; /* the head's right answers in the last evaluation */

/* y (n, o) = x (n, i) @ W^T (o, i) + b */
static void lin(float *y, const float *x, const float *W, const float *b, int n, int i, int o) {
  for (int r = 0; r < n; r++)
    for (int k = 0; k < o; k++) {
      float s = b[k];
      for (int c = 0; c < i; c++) s += x[r * i + c] * W[k * i + c];
      y[r * o + k] = s;
    }
}

/* dW += dy^T x, db += sum dy, dx (+)= dy W (dx may be NULL) */
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
  acts_t *A = io->acts;
  const batch_t *b = io->batch;
  const float *x = input_of(io);
  void *const *P = io->params;
  int n = b->rows;
  if (io->unit == 0) lin(A->h, x, P[0], P[1], n, IN, D);
  if (io->unit > 0 && io->unit <= NBLOCK) { /* h = x + W2 relu(W1 x + b1) + b2 */
    lin(A->a, x, P[0], P[1], n, D, HID);
    for (int j = 0; j < n * HID; j++) A->a[j] = A->a[j] > 0 ? A->a[j] : 0;
    lin(A->h, A->a, P[2], P[3], n, HID, D);
    for (int j = 0; j < n * D; j++) A->h[j] += x[j];
  }
  if (io->unit == NBLOCK + 1) { /* softmax cross-entropy, mean over this rank's rows */
    lin(A->h, x, P[0], P[1], n, D, CLS);
    double loss = 0;
    correct = 0;
    for (int r = 0; r < n; r++) {
      float *p = &probs[r * CLS], *z = &A->h[r * CLS], mx = z[0], s = 0;
      int best = 0;
      for (int k = 1; k < CLS; k++)
        if (z[k] > mx) mx = z[k], best = k;
      for (int k = 0; k < CLS; k++) s += p[k] = expf(z[k] - mx);
      for (int k = 0; k < CLS; k++) p[k] /= s;
      loss -= log(p[b->y[r]]);
      correct += best == b->y[r];
    }
    *io->loss = (float)(loss / n);
  }
  io->out = A->h;
  return ZEROC_OK;
}

static zeroc_result_t bwd(zeroc_layer_io_t *io) {
  acts_t *A = io->acts;
  const batch_t *b = io->batch;
  const float *x = input_of(io);
  void *const *P = io->params, *const *G = io->grads;
  int n = b->rows;
  static float dy[GB * D], da[GB * HID];
  if (io->unit == NBLOCK + 1) { /* the loss is a mean: each row's share times grad_scale */
    for (int r = 0; r < n; r++)
      for (int k = 0; k < CLS; k++)
        dy[r * CLS + k] = (probs[r * CLS + k] - (k == b->y[r])) * io->grad_scale / n;
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

/* Rows [first, first + n) of the global batch `step` (step < 0: the held-out one). */
static void make_batch(int step, int first, int n, float *x, int *y) {
  for (int r = 0; r < n; r++) {
    unsigned s = (unsigned)((step + 1000) * GB + first + r) * 2654435761u;
    float dot = 0, *xr = x + r * IN;
    for (int c = 0; c < IN; c++) {
      s = s * 1103515245u + 12345u;
      xr[c] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int c = 0; c < IN; c++) /* a linear and a quadratic part */
      dot += xr[c] * (float)((c * 7) % 5 - 2) + 0.3f * xr[c] * xr[(c + 1) % IN];
    y[r] = dot < -2 ? 0 : dot < 0 ? 1 : dot < 2 ? 2 : 3;
  }
}

#define DIE(what)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "%s: %s\n", what, zeroc_last_error(ctx));                                      \
    zeroc_ctx_abort(ctx, 1, what);                                                                 \
  } while (0)

int main(int argc, char **argv) {
  int stage = 3, hsdp = 0, steps = 40;
  const char *import = NULL, *export = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--stage"))
      stage = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--hsdp"))
      hsdp = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps"))
      steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--import"))
      import = argv[i + 1];
    else if (!strcmp(argv[i], "--export"))
      export = argv[i + 1];
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.hsdp = hsdp;
  zeroc_ctx_t *ctx = NULL;
  if (zeroc_ctx_create(&ctx, &cc)) {
    fprintf(stderr, "%s\n", zeroc_last_error(NULL));
    return 1;
  }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  zeroc_param_desc_t pin[] = {{.name = "w", .ndim = 2, .shape = {D, IN}, .init_scale = 0.3f},
                              {.name = "b", .ndim = 1, .shape = {D}, .init = ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t pblk[] = {{.name = "w1", .ndim = 2, .shape = {HID, D}, .init_scale = 0.15f},
                               {.name = "b1", .ndim = 1, .shape = {HID}, .init = ZEROC_INIT_ZEROS},
                               {.name = "w2", .ndim = 2, .shape = {D, HID}, .init_scale = 0.05f},
                               {.name = "b2", .ndim = 1, .shape = {D}, .init = ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t phead[] = {{.name = "w", .ndim = 2, .shape = {CLS, D}, .init_scale = 0.15f},
                                {.name = "b", .ndim = 1, .shape = {CLS}, .init = ZEROC_INIT_ZEROS}};
  zeroc_layer_t L[NBLOCK + 2];
  L[0] = (zeroc_layer_t){.name = "input",
                         .nparams = 2,
                         .params = pin,
                         .shares = -1,
                         .forward = fwd,
                         .backward = bwd,
                         .act_bytes = sizeof(acts_t)};
  for (int k = 1; k <= NBLOCK; k++) /* named alike: exported as block.0.w1, block.1.w1, ... */
    L[k] = (zeroc_layer_t){.name = "block",
                           .nparams = 4,
                           .params = pblk,
                           .shares = -1,
                           .forward = fwd,
                           .backward = bwd,
                           .act_bytes = sizeof(acts_t)};
  L[NBLOCK + 1] = (zeroc_layer_t){.name = "head",
                                  .nparams = 2,
                                  .params = phead,
                                  .shares = -1,
                                  .forward = fwd,
                                  .backward = bwd,
                                  .act_bytes = sizeof(acts_t)};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = stage;
  sc.grad_accum = 2; /* buffers that accumulate: a step may then take 1 or 2 micro-batches */
  zeroc_model_t *model = NULL;
  if (zeroc_shard(ctx, L, NBLOCK + 2, &sc, &model)) DIE("zeroc_shard");
  if (import && zeroc_model_import(model, import)) DIE("zeroc_model_import");
  int rows = GB / mesh->dp, first = mesh->dp_rank * rows; /* this rank's rows of each batch */
  static float x[GB * IN];
  static int y[GB];
  batch_t b = {rows, x, y};
  for (int step = 0; step < steps; step++) {
    const int micro = step < steps / 2 ? 1 : 2; /* every rank the same count */
    if (zeroc_model_set_accum(model, micro)) DIE("zeroc_model_set_accum");
    make_batch(step, first, rows, x, y);
    for (int u = 0; u < micro; u++) { /* the head scales by grad_scale / its rows */
      const int n = rows / micro;
      batch_t mb = {n, x + u * n * IN, y + u * n};
      if (zeroc_model_forward(model, &mb) || zeroc_model_backward(model)) DIE("training");
    }
    zeroc_step_info_t info;
    if (zeroc_model_step(model, zeroc_lr_at(ZEROC_LR_COSINE, 0.01, 5, steps, step), &info))
      DIE("training");
    if (mesh->rank == 0 && step % 10 == 0) printf("step %2d  loss %.6f\n", step, info.loss);
  }
  make_batch(-1, first, rows, x, y);
  double eval = 0, acc[2];
  if (zeroc_model_eval_mean(model, &b, &eval)) DIE("zeroc_model_eval_mean");
  acc[0] = correct, acc[1] = rows;
  if (zeroc_ctx_allreduce(ctx, ZEROC_GROUP_DP, acc, 2, ZEROC_SUM)) DIE("zeroc_ctx_allreduce");
  if (mesh->rank == 0) printf("eval loss %.9f  accuracy %.6f\n", eval, acc[0] / acc[1]);
  zeroc_mem_stats_t mem; /* the activations are in the accountant's peak */
  zeroc_ctx_memory(ctx, &mem);
  if (mesh->rank == 0)
    printf("activations %llu bytes registered, %llu at the peak\n",
           (unsigned long long)zeroc_model_activation_bytes(model),
           (unsigned long long)mem.peak[ZEROC_MEM_DEVICE][ZEROC_TAG_ACTIVATIONS]);
  if (export && zeroc_model_export(model, export)) DIE("zeroc_model_export");
  zeroc_model_destroy(model);
  zeroc_ctx_finalize(ctx);
  return 0;
}
