/*
 * examples/mlp.c - a user's own MLP trained with zeroc_shard(): three layers
 * written as plain C callbacks, sharded ZeRO-3 over all ranks.
 *   mpirun -np 4 ./mlp        (exits 1 if the loss did not fall)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <zeroc/zeroc.h>

enum { IN = 16, HID = 48, CLS = 4, GLOBAL_BATCH = 64, STEPS = 60 };

typedef struct { int n; const float *x; const int *y; } batch_t;
typedef struct { int in, out, relu; float *act, *dx; const int *y; float *probs; } linear_t;
static int g_rows; /* rows of this rank's micro-batch */

/* out (n, out) = act(x (n, in) @ W^T + b) */
static zeroc_result_t lin_fwd(zeroc_layer_io_t *io) {
  linear_t *L = io->user;
  const float *x = io->unit == 0 ? ((const batch_t *)io->in)->x : io->in;
  const float *W = io->params[0], *bias = io->params[1]; /* views of the gathered params */
  int rows = g_rows;
  for (int i = 0; i < rows; i++)
    for (int o = 0; o < L->out; o++) {
      float s = bias[o];
      for (int c = 0; c < L->in; c++) s += x[i * L->in + c] * W[o * L->in + c];
      L->act[i * L->out + o] = L->relu && s < 0 ? 0 : s;
    }
  if (L->probs) { /* the head: softmax cross-entropy against the labels */
    const int *y = L->y;
    double loss = 0;
    for (int i = 0; i < rows; i++) {
      float *p = &L->probs[i * CLS], mx = -1e30f, z = 0;
      for (int k = 0; k < CLS; k++) mx = fmaxf(mx, L->act[i * CLS + k]);
      for (int k = 0; k < CLS; k++) z += p[k] = expf(L->act[i * CLS + k] - mx);
      for (int k = 0; k < CLS; k++) p[k] /= z;
      loss -= log(p[y[i]]);
    }
    *io->loss = (float)(loss / rows);
  }
  io->out = L->act;
  return ZEROC_OK;
}

static zeroc_result_t lin_bwd(zeroc_layer_io_t *io) {
  linear_t *L = io->user;
  const float *x = io->unit == 0 ? ((const batch_t *)io->in)->x : io->in, *W = io->params[0];
  float *dW = io->grads[0], *db = io->grads[1], g[GLOBAL_BATCH * HID];
  int rows = g_rows;
  for (int i = 0; i < rows; i++)
    for (int o = 0; o < L->out; o++) {
      float d = L->probs ? (L->probs[i * CLS + o] - (o == L->y[i])) * io->grad_scale / rows
                         : ((const float *)io->dout)[i * L->out + o];
      g[i * L->out + o] = L->relu && L->act[i * L->out + o] <= 0 ? 0 : d;
    }
  memset(L->dx, 0, sizeof(float) * rows * L->in);
  for (int i = 0; i < rows; i++)
    for (int o = 0; o < L->out; o++) {
      float d = g[i * L->out + o];
      db[o] += d; /* callbacks accumulate into the gradients */
      for (int c = 0; c < L->in; c++) {
        dW[o * L->in + c] += d * x[i * L->in + c];
        L->dx[i * L->in + c] += d * W[o * L->in + c];
      }
    }
  io->din = L->dx;
  return ZEROC_OK;
}

int main(void) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx;
  if (zeroc_ctx_create(&ctx, &cc)) { fprintf(stderr, "%s\n", zeroc_last_error(NULL)); return 1; }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int rows = GLOBAL_BATCH / mesh->dp; /* this rank's share of the global batch */
  g_rows = rows;
  static float a1[GLOBAL_BATCH * HID], a2[GLOBAL_BATCH * HID], a3[GLOBAL_BATCH * CLS], probs[GLOBAL_BATCH * CLS];
  static float d1[GLOBAL_BATCH * IN], d2[GLOBAL_BATCH * HID], d3[GLOBAL_BATCH * HID], x[GLOBAL_BATCH * IN];
  static int y[GLOBAL_BATCH];
  linear_t l1 = {IN, HID, 1, a1, d1, NULL, NULL}, l2 = {HID, HID, 1, a2, d2, NULL, NULL},
           l3 = {HID, CLS, 0, a3, d3, y, probs};
  zeroc_param_desc_t p1[] = {{"w", 2, {HID, IN}, ZEROC_INIT_NORMAL, 0.25f}, {"b", 1, {HID}, ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t p2[] = {{"w", 2, {HID, HID}, ZEROC_INIT_NORMAL, 0.15f}, {"b", 1, {HID}, ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t p3[] = {{"w", 2, {CLS, HID}, ZEROC_INIT_NORMAL, 0.15f}, {"b", 1, {CLS}, ZEROC_INIT_ZEROS}};
  zeroc_layer_t layers[] = {{"fc1", 2, p1, -1, lin_fwd, lin_bwd, 0, &l1},
                            {"fc2", 2, p2, -1, lin_fwd, lin_bwd, 0, &l2},
                            {"head", 2, p3, -1, lin_fwd, lin_bwd, 0, &l3}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT; /* ZeRO-3, prefetch 2 */
  zeroc_model_t *model;
  if (zeroc_shard(ctx, layers, 3, &sc, &model)) { fprintf(stderr, "%s\n", zeroc_last_error(ctx)); return 1; }
  float first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    /* the global batch of this step; this rank takes rows [dp_rank*rows, +rows) */
    for (int i = 0; i < rows; i++) {
      unsigned s = (unsigned)(step * GLOBAL_BATCH + mesh->dp_rank * rows + i) * 2654435761u;
      float dot = 0;
      for (int c = 0; c < IN; c++) {
        s = s * 1103515245u + 12345u;
        x[i * IN + c] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
        dot += x[i * IN + c] * (float)((c * 7) % 5 - 2);
      }
      y[i] = dot < -1.5f ? 0 : dot < 0 ? 1 : dot < 1.5f ? 2 : 3;
    }
    batch_t b = {rows, x, y};
    zeroc_step_info_t info;
    if (zeroc_model_forward(model, &b) || zeroc_model_backward(model) ||
        zeroc_model_step(model, 0.01f, &info)) {
      fprintf(stderr, "rank %d: %s\n", mesh->rank, zeroc_last_error(ctx));
      zeroc_ctx_abort(ctx, 1, "training failed");
    }
    if (step == 0) first = info.loss;
    last = info.loss;
    if (mesh->rank == 0 && step % 10 == 0)
      printf("step %2d  loss %.4f  grad norm %.3f\n", step, info.loss, info.grad_norm);
  }
  if (mesh->rank == 0) printf("loss %.4f -> %.4f\n", first, last);
  zeroc_model_destroy(model);
  zeroc_ctx_finalize(ctx);
  return last < 0.7f * first ? 0 : 1;
}
