/*
 * examples/dlrm.c - a small DLRM assembled from the public API, outside the
 * built-in trainer: the dense half (zeroc/dlrm.h) sharded with zeroc_shard()
 * (ZeRO-3 over the data-parallel ranks), the tables model-parallel with
 * zeroc_embed (each table placed by the cost model), one step =
 *
 *   embed forward (ids all-to-all, pooled rows back) -> MLPs forward/backward
 *   -> embed backward (row-wise AdaGrad on the rows used) -> AdamW on the MLPs
 *
 *   mpirun -np 2 ./dlrm
 *
 * The clicks come from a rule the model can learn: a click is likely when the
 * first table's id is even and the first dense feature is positive.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zeroc/zeroc.h"

#define GLOBAL_BATCH 64
#define STEPS        60
#define T            3
#define D            8
#define F            4 /* dense features */

static float hashf(unsigned x) { /* [0, 1) from an integer */
  x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
  return (float)(x >> 8) / 16777216.0f;
}

int main(void) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx;
  if (zeroc_ctx_create(&ctx, &cc)) {
    fprintf(stderr, "%s\n", zeroc_last_error(NULL));
    return 1;
  }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int B = GLOBAL_BATCH / mesh->dp; /* this rank's samples */

  /* the dense half: bottom 16-8, top 16-1, as zeroc layers, sharded */
  zeroc_dlrm_config_t c = {0};
  c.tables = T, c.dim = D, c.dense = F, c.batch = B, c.hot = 1;
  c.nbottom = 2, c.bottom[0] = 16, c.bottom[1] = D;
  c.ntop = 2, c.top[0] = 16, c.top[1] = 1;
  for (int t = 0; t < T; t++) c.rows[t] = 100 * (t + 1);
  zeroc_dlrm_t *dlrm;
  zeroc_model_t *model;
  int n;
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT; /* ZeRO-3 */
  if (zeroc_dlrm_create(ctx, &c, B, &dlrm)) {
    fprintf(stderr, "%s\n", zeroc_last_error(ctx));
    return 1;
  }
  const zeroc_layer_t *layers = zeroc_dlrm_layers(dlrm, &n);
  if (zeroc_shard(ctx, layers, n, &sc, &model)) {
    fprintf(stderr, "%s\n", zeroc_last_error(ctx));
    return 1;
  }

  /* the tables: model-parallel over the data-parallel ranks */
  zeroc_embed_table_t tabs[T];
  for (int t = 0; t < T; t++) tabs[t] = (zeroc_embed_table_t)ZEROC_EMBED_TABLE_INIT(c.rows[t], D);
  zeroc_embed_config_t ec = ZEROC_EMBED_CONFIG_INIT;
  ec.ntables = T, ec.tables = tabs, ec.batch = B, ec.bag = 1, ec.seed = 1;
  zeroc_embed_t *emb;
  if (zeroc_embed_create(ctx, &ec, &emb)) {
    fprintf(stderr, "%s\n", zeroc_last_error(ctx));
    return 1;
  }

  float *dense = malloc(sizeof(float) * B * F), *labels = malloc(sizeof(float) * B);
  float *pooled = malloc(sizeof(float) * B * T * D), *dpooled = malloc(sizeof(float) * B * T * D);
  int32_t *lengths = malloc(sizeof(int32_t) * T * B);
  int64_t *ids = malloc(sizeof(int64_t) * T * B);
  float first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < B; i++) { /* sample g of the global batch */
      unsigned g = (unsigned)(step * GLOBAL_BATCH + mesh->dp_rank * B + i);
      for (int f = 0; f < F; f++) dense[i * F + f] = 2 * hashf(g * 7 + f) - 1;
      for (int t = 0; t < T; t++) { /* table-major ids, one per bag */
        lengths[t * B + i] = 1;
        ids[t * B + i] = (int64_t)(hashf(g * 13 + t) * c.rows[t]);
      }
      float p = (ids[i] % 2 == 0) && dense[i * F] > 0 ? 0.9f : 0.1f;
      labels[i] = hashf(g * 31 + 5) < p ? 1.0f : 0.0f;
    }
    zeroc_dlrm_batch_t b = {B, dense, labels, pooled, dpooled};
    zeroc_step_info_t info;
    zeroc_embed_set_lr(emb, 0.05f);
    if (zeroc_embed_forward(emb, B, lengths, ids, pooled) || zeroc_model_forward(model, &b) ||
        zeroc_model_backward(model) || zeroc_embed_backward(emb, dpooled) ||
        zeroc_model_step(model, 0.01f, &info)) {
      fprintf(stderr, "rank %d: %s\n", mesh->rank, zeroc_last_error(ctx));
      zeroc_ctx_abort(ctx, 1, "training failed");
    }
    if (step == 0) first = info.loss;
    if (step >= STEPS - 10) last += info.loss / 10; /* the last 10 steps' mean: batches are small */
    if (mesh->rank == 0 && step % 10 == 0) printf("step %2d  loss %.4f\n", step, info.loss);
  }
  if (mesh->rank == 0)
    printf("loss %.4f -> %.4f (last 10 steps); table 0 is %s-wise\n", first, last,
           zeroc_embed_sharding_name(zeroc_embed_table_sharding(emb, 0)));
  free(dense), free(labels), free(pooled), free(dpooled), free(lengths), free(ids);
  zeroc_embed_destroy(emb);
  zeroc_model_destroy(model);
  zeroc_dlrm_destroy(dlrm);
  zeroc_ctx_finalize(ctx);
  return last < 0.8f * first ? 0 : 1;
}
