/*
 * model/gpt_query.c - what a built GPT answers: its units and chunks, its
 * parameters, its shapes, its last losses and logits, an imported position
 * tail.
 */
#include <stdlib.h>

#include "model/gpt_impl.h"

void zeroc__gpt_set_wpe_tail(zeroc_gpt_t *g, float *rows, int nrows) {
  free(g->wpe_tail);
  g->wpe_tail = nrows > 0 ? rows : NULL;
  g->wpe_tail_rows = nrows > 0 ? nrows : 0;
  if (nrows <= 0) free(rows);
}

/* g NULL (a trainer running another model, e.g. the DLRM): no cp, 0 */
double zeroc__gpt_cp_wait_s(const zeroc_gpt_t *g) { return g && g->cp.cp ? g->cp.cp->wait_s : 0; }

const void *zeroc__gpt_logits(const zeroc_gpt_t *g, int slot) {
  return slot >= 0 && slot < g->slots ? g->act[slot].logits : NULL;
}

const float *zeroc__gpt_wpe_tail(const zeroc_gpt_t *g, int *nrows) {
  *nrows = g->wpe_tail_rows;
  return g->wpe_tail;
}

const zeroc_layer_t *zeroc_gpt_layers(const zeroc_gpt_t *g, int *n) {
  if (n) *n = g->nlayers;
  return g->layers;
}

int zeroc_gpt_chunks(const zeroc_gpt_t *g) { return g->nchunks; }

void zeroc_gpt_chunk_units(const zeroc_gpt_t *g, int chunk, int *first, int *count) {
  int ok = chunk >= 0 && chunk < g->nchunks;
  if (first) *first = ok ? g->chunk_first[chunk] : 0;
  if (count) *count = ok ? g->chunk_count[chunk] : 0;
}

int zeroc_gpt_global_unit(const zeroc_gpt_t *g, int local) {
  return local >= 0 && local < g->nlayers ? g->gunit[local] : -1;
}

const zeroc_param_desc_t *zeroc_gpt_unit_params(const zeroc_gpt_t *g, int unit, int *n) {
  int L = g->cfg.layers;
  /* Llama: embed_tokens; the head's norm and an untied lm_head (a tied copy of
   * the embedding is the embedding's, as GPT-2's wte) */
  int embed = g->llama ? 1 : 2, head = g->llama ? 1 + g->cfg.untied : 2;
  *n = unit == 0 ? embed : unit == L + 1 ? head : unit > 0 && unit <= L ? g->nbp : 0;
  if (unit == 0) return g->embed_p;
  if (unit == L + 1) return g->head_p; /* ln_f only: a tied wte copy is the embedding's */
  return *n ? &g->block_p[(size_t)(unit - 1) * BLOCK_PARAMS] : NULL;
}

int zeroc_gpt_padded_vocab(const zeroc_gpt_t *g) { return g->Vp; }
int zeroc_gpt_local_vocab(const zeroc_gpt_t *g) { return g->Vl; }
int zeroc_gpt_sequence_parallel(const zeroc_gpt_t *g) { return g->tp.sp; }
const zeroc_gpt_config_t *zeroc_gpt_config(const zeroc_gpt_t *g) { return &g->cfg; }
uint64_t zeroc_gpt_activation_bytes(const zeroc_gpt_t *g) { return g->act_bytes; }
const float *zeroc_gpt_losses(const zeroc_gpt_t *g) { return g->last_losses; }
