/*
 * examples/dlrm_layers.c - a DLRM written entirely by the user: its own MLP
 * layers as plain C callbacks sharded with zeroc_shard() (ZeRO-3), its own
 * pairwise-dot interaction, and zeroc_embed for the tables (model-parallel,
 * placed by the cost model or forced), driven by its own loop:
 *
 *   embed forward (ids out by all-to-all, pooled rows back)
 *   -> model forward/backward (bottom MLP, interaction + top MLP, BCE;
 *      the interaction writes the gradient of the pooled rows)
 *   -> embed backward (row-wise AdaGrad on the rows used) -> AdamW on the MLPs
 *
 *   mpirun -np 2 ./dlrm_layers [auto|table|column|row|data] [losses.txt]
 *
 * Every rank takes its slice of one global batch, so any number of ranks and
 * any sharding trains the same model: the losses file (rank 0, one per step)
 * equals the single-rank run's. Exits 1 if the loss did not fall.
 * Shapes: B samples per rank, F dense features, T tables of dim D,
 * P = (T+1)T/2 pairs of the interaction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zeroc/zeroc.h>

enum { F = 4, T = 3, D = 8, H = 16, P = (T + 1) * T / 2, Z = D + P, GB = 64, STEPS = 60 };
enum { W = Z > H ? Z : H }; /* the widest layer input */

typedef struct { int n; const float *dense, *labels, *pooled; float *dpooled; } batch_t;
/* one linear layer: out (B, out) = act(in (B, in) @ W^T + b); `interact` builds its
 * input from the previous output and the pooled rows, `head` ends in BCE */
typedef struct { int in, out, relu, interact, head; float *z, *act, *dz, *dx; } linear_t;

static float hashf(unsigned x) { /* [0, 1) from an integer */
  x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
  return (float)(x >> 8) / 16777216.0f;
}

/* vector k of sample i among (bottom output, table 0 .. T-1): (D) */
static const float *vec(const batch_t *b, const float *x, int i, int k) {
  return k == 0 ? &x[i * D] : &b->pooled[(i * T + k - 1) * D];
}

/* z (B, Z) = [x, dot(v_j, v_k) for k < j] */
static void interact(const batch_t *b, const float *x, float *z) {
  for (int i = 0; i < b->n; i++) {
    float *zi = &z[i * Z];
    memcpy(zi, &x[i * D], sizeof(float) * D);
    for (int j = 1, p = D; j <= T; j++)
      for (int k = 0; k < j; k++, p++) {
        float s = 0;
        for (int c = 0; c < D; c++) s += vec(b, x, i, j)[c] * vec(b, x, i, k)[c];
        zi[p] = s;
      }
  }
}

/* dz (B, Z) -> dx (B, D) and the batch's dpooled (B, T, D) */
static void interact_backward(const batch_t *b, const float *x, const float *dz, float *dx) {
  memset(b->dpooled, 0, sizeof(float) * b->n * T * D);
  for (int i = 0; i < b->n; i++) {
    memcpy(&dx[i * D], &dz[i * Z], sizeof(float) * D);
    for (int j = 1, p = D; j <= T; j++)
      for (int k = 0; k < j; k++, p++) {
        float g = dz[i * Z + p];
        float *dj = &b->dpooled[(i * T + j - 1) * D];
        float *dk = k == 0 ? &dx[i * D] : &b->dpooled[(i * T + k - 1) * D];
        for (int c = 0; c < D; c++) {
          dj[c] += g * vec(b, x, i, k)[c];
          dk[c] += g * vec(b, x, i, j)[c];
        }
      }
  }
}

static const float *layer_in(zeroc_layer_io_t *io) {
  const batch_t *b = io->batch;
  return io->unit == 0 ? b->dense : io->in;
}

static zeroc_result_t lin_fwd(zeroc_layer_io_t *io) {
  linear_t *L = io->user;
  const batch_t *b = io->batch;
  const float *x = layer_in(io), *W = io->params[0], *bias = io->params[1];
  if (L->interact) interact(b, x, L->z), x = L->z;
  for (int i = 0; i < b->n; i++)
    for (int o = 0; o < L->out; o++) {
      float s = bias[o];
      for (int c = 0; c < L->in; c++) s += x[i * L->in + c] * W[o * L->in + c];
      L->act[i * L->out + o] = L->relu && s < 0 ? 0 : s;
    }
  if (L->head) { /* mean binary cross-entropy of the logits, computed stably */
    double loss = 0;
    for (int i = 0; i < b->n; i++) {
      float s = L->act[i];
      loss += fmaxf(s, 0) - s * b->labels[i] + log1pf(expf(-fabsf(s)));
    }
    *io->loss = (float)(loss / b->n);
  }
  io->out = L->act;
  return ZEROC_OK;
}

static zeroc_result_t lin_bwd(zeroc_layer_io_t *io) {
  linear_t *L = io->user;
  const batch_t *b = io->batch;
  const float *x = L->interact ? L->z : layer_in(io), *W = io->params[0];
  float *dW = io->grads[0], *db = io->grads[1], g[GB * H];
  for (int i = 0; i < b->n; i++)
    for (int o = 0; o < L->out; o++) {
      float d;
      if (L->head) /* d(mean BCE)/d(logit) = (sigmoid(s) - y) / B, scaled for the all-reduce */
        d = (1 / (1 + expf(-L->act[i])) - b->labels[i]) * io->grad_scale / b->n;
      else
        d = ((const float *)io->dout)[i * L->out + o];
      g[i * L->out + o] = L->relu && L->act[i * L->out + o] <= 0 ? 0 : d;
    }
  float *dx = L->interact ? L->dz : L->dx;
  memset(dx, 0, sizeof(float) * b->n * L->in);
  for (int i = 0; i < b->n; i++)
    for (int o = 0; o < L->out; o++) {
      float d = g[i * L->out + o];
      db[o] += d; /* callbacks accumulate into the gradients */
      for (int c = 0; c < L->in; c++) {
        dW[o * L->in + c] += d * x[i * L->in + c];
        dx[i * L->in + c] += d * W[o * L->in + c];
      }
    }
  if (L->interact) {
    /* the interaction's gradients carry grad_scale (1 / ranks): zeroc_embed_backward
     * takes the gradient of this rank's own mean loss and averages over ranks itself */
    interact_backward(b, layer_in(io), L->dz, L->dx);
    for (int k = 0; k < b->n * T * D; k++) b->dpooled[k] /= io->grad_scale;
  }
  io->din = L->dx;
  return ZEROC_OK;
}

/* the synthetic clicks of sample g: the click probability is a logistic function of
 * the first two dense features and of whether table 0's id is even */
static void make_sample(unsigned g, const int64_t *rows, float *dense, int64_t *ids, int B, int i,
                        float *label) {
  for (int f = 0; f < F; f++) dense[i * F + f] = 2 * hashf(g * 7 + f) - 1;
  for (int t = 0; t < T; t++) ids[t * B + i] = (int64_t)(hashf(g * 13 + t) * (float)rows[t]);
  float s = 3 * (dense[i * F] + dense[i * F + 1]) + (ids[i] % 2 == 0 ? 1.5f : -1.5f);
  *label = hashf(g * 31 + 5) < 1 / (1 + expf(-s)) ? 1.0f : 0.0f;
}

static int fail(zeroc_ctx_t *ctx, const char *what) {
  fprintf(stderr, "%s: %s\n", what, zeroc_last_error(ctx));
  return 1;
}

int main(int argc, char **argv) {
  zeroc_embed_sharding_t sharding = ZEROC_EMBED_AUTO;
  if (argc > 1 && zeroc_embed_sharding_parse(argv[1], &sharding)) {
    fprintf(stderr, "sharding '%s': expected auto|table|column|row|data\n", argv[1]);
    return 2;
  }
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx;
  if (zeroc_ctx_create(&ctx, &cc)) return fail(NULL, "ctx");
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int B = GB / mesh->dp; /* this rank's share of the global batch */

  static float z[GB * Z], dz[GB * Z], a[4][GB * H], d[4][GB * W];
  linear_t bot1 = {F, H, 1, 0, 0, NULL, a[0], NULL, d[0]}, bot2 = {H, D, 1, 0, 0, NULL, a[1], NULL, d[1]};
  linear_t top1 = {Z, H, 1, 1, 0, z, a[2], dz, d[2]}, top2 = {H, 1, 0, 0, 1, NULL, a[3], NULL, d[3]};
  zeroc_param_desc_t p1[] = {{"w", 2, {H, F}, ZEROC_INIT_NORMAL, 0.5f}, {"b", 1, {H}, ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t p2[] = {{"w", 2, {D, H}, ZEROC_INIT_NORMAL, 0.25f}, {"b", 1, {D}, ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t p3[] = {{"w", 2, {H, Z}, ZEROC_INIT_NORMAL, 0.25f}, {"b", 1, {H}, ZEROC_INIT_ZEROS}};
  zeroc_param_desc_t p4[] = {{"w", 2, {1, H}, ZEROC_INIT_NORMAL, 0.25f}, {"b", 1, {1}, ZEROC_INIT_ZEROS}};
  zeroc_layer_t layers[] = {{"bottom1", 2, p1, -1, lin_fwd, lin_bwd, 0, &bot1},
                            {"bottom2", 2, p2, -1, lin_fwd, lin_bwd, 0, &bot2},
                            {"interact_top1", 2, p3, -1, lin_fwd, lin_bwd, 0, &top1},
                            {"top2", 2, p4, -1, lin_fwd, lin_bwd, 0, &top2}};
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT; /* ZeRO-3 */
  zeroc_model_t *model;
  if (zeroc_shard(ctx, layers, 4, &sc, &model)) return fail(ctx, "shard");

  /* the tables: model-parallel over the data-parallel ranks */
  int64_t rows[T] = {64, 200, 1000};
  zeroc_embed_table_t tabs[T];
  for (int t = 0; t < T; t++) tabs[t] = (zeroc_embed_table_t)ZEROC_EMBED_TABLE_INIT(rows[t], D);
  zeroc_embed_config_t ec = ZEROC_EMBED_CONFIG_INIT;
  ec.ntables = T, ec.tables = tabs, ec.batch = B, ec.bag = 1, ec.seed = 1, ec.sharding = sharding;
  ec.lr = 0.05f;
  zeroc_embed_t *emb;
  if (zeroc_embed_create(ctx, &ec, &emb)) return fail(ctx, "embed");

  FILE *out = argc > 2 && mesh->rank == 0 ? fopen(argv[2], "w") : NULL;
  if (argc > 2 && mesh->rank == 0 && !out) perror(argv[2]);
  static float dense[GB * F], labels[GB], pooled[GB * T * D], dpooled[GB * T * D];
  static int32_t lengths[T * GB];
  static int64_t ids[T * GB];
  for (int k = 0; k < T * B; k++) lengths[k] = 1; /* one id per bag */
  float first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < B; i++)
      make_sample((unsigned)(step * GB + mesh->dp_rank * B + i), rows, dense, ids, B, i, &labels[i]);
    batch_t b = {B, dense, labels, pooled, dpooled};
    zeroc_step_info_t info;
    if (zeroc_embed_forward(emb, B, lengths, ids, pooled) || zeroc_model_forward(model, &b) ||
        zeroc_model_backward(model) || zeroc_embed_backward(emb, dpooled) ||
        zeroc_model_step(model, 0.02f, &info)) {
      fprintf(stderr, "rank %d: %s\n", mesh->rank, zeroc_last_error(ctx));
      zeroc_ctx_abort(ctx, 1, "training failed");
    }
    if (out) fprintf(out, "%.9g\n", info.loss);
    if (step < 5) first += info.loss / 5; /* means of 5 steps: the batches are small */
    if (step >= STEPS - 5) last += info.loss / 5;
    if (mesh->rank == 0 && step % 10 == 0) printf("step %2d  loss %.4f\n", step, info.loss);
  }
  if (mesh->rank == 0)
    printf("loss %.4f -> %.4f (means of 5 steps); tables %s, %s, %s on %d ranks\n", first, last,
           zeroc_embed_sharding_name(zeroc_embed_table_sharding(emb, 0)),
           zeroc_embed_sharding_name(zeroc_embed_table_sharding(emb, 1)),
           zeroc_embed_sharding_name(zeroc_embed_table_sharding(emb, 2)), mesh->dp);
  if (out) fclose(out);
  zeroc_embed_destroy(emb);
  zeroc_model_destroy(model);
  zeroc_ctx_finalize(ctx);
  return last < 0.85f * first ? 0 : 1;
}
