/*
 * model/dlrm_sizes.c - the DLRM's sizes for the planner and the allocators
 * (dlrm_sizes.h). zeroc__dlrm_buffer_bytes follows wire() in dlrm.c buffer by
 * buffer; test_plan_dlrm checks the two against the memory accountant.
 */
#include "model/dlrm_sizes.h"

#define ALIGN 8     /* src/shard/flat.h's ZEROC_FLAT_ALIGN, elements */
#define EPS   1e-8f /* the trainer's AdaGrad epsilon (train/dlrm_tables.c's replicated twin) */

void zeroc__dlrm_embed_config(const zeroc_dlrm_config_t *c, int batch, int sharding, uint64_t seed,
                              uint64_t host_threshold, zeroc_embed_table_t *tabs,
                              zeroc_embed_config_t *ec) {
  for (int k = 0; k < c->tables; k++)
    tabs[k] = (zeroc_embed_table_t)ZEROC_EMBED_TABLE_INIT(c->rows[k], c->dim);
  *ec = (zeroc_embed_config_t)ZEROC_EMBED_CONFIG_INIT;
  ec->ntables = c->tables;
  ec->tables = tabs;
  ec->sharding = (zeroc_embed_sharding_t)sharding;
  ec->batch = batch;
  ec->bag = c->hot;
  ec->eps = EPS;
  ec->seed = seed;
  ec->host_threshold = host_threshold;
}

/* unit i's input and output widths, as wire() sets them */
static void unit_shape(const zeroc_dlrm_config_t *c, int i, int *C, int *OC) {
  int top = i >= c->nbottom, j = top ? i - c->nbottom : i;
  *OC = top ? c->top[j] : c->bottom[j];
  if (top && j == 0)
    *C = zeroc_dlrm_interaction_width(c);
  else if (top)
    *C = c->top[j - 1];
  else
    *C = j == 0 ? c->dense : c->bottom[j - 1];
}

double zeroc__dlrm_unit_flat(const zeroc_dlrm_config_t *c, int i, int shard_size) {
  int C, OC;
  unit_shape(c, i, &C, &OC);
  uint64_t w = (uint64_t)OC * (uint64_t)C;
  uint64_t end = (w + ALIGN - 1) / ALIGN * ALIGN + (uint64_t)OC;
  uint64_t q = (uint64_t)ALIGN * (uint64_t)shard_size;
  return (double)((end + q - 1) / q * q);
}

void zeroc__dlrm_buffer_bytes(const zeroc_dlrm_config_t *c, int B, zeroc__dlrm_bytes_t *out) {
  double act = 0, ws = 0, b = B;
  int maxoc = 1, nu = c->nbottom + c->ntop;
  for (int i = 0; i < nu; i++) {
    int C, OC, interact = i == c->nbottom;
    unit_shape(c, i, &C, &OC);
    if (OC > maxoc) maxoc = OC;
    act += b * OC;                                /* out */
    if (i > 0) ws += b * (interact ? c->dim : C); /* din */
    if (interact) act += b * C, ws += b * C;      /* inter, dinter */
  }
  ws += b * maxoc;   /* dpre */
  act += b, ws += b; /* losses, dlogits */
  out->activations = 4 * act;
  out->workspace = 4 * ws;
}
