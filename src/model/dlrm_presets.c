/*
 * model/dlrm_presets.c - the named DLRM shapes, their checks and counts.
 */
#include <string.h>

#include "core/error.h"
#include "zeroc/dlrm.h"

/* MLPerf DLRM (Criteo Terabyte, max_ind_range 40M): the rows of its 26 tables */
static const int64_t MLPERF_ROWS[26] = {
    39884406, 39043,    17289,    7420,     20263,  3,     7120, 1543, 63,
    38532951, 2953546,  403346,   10,       2208,   11938, 155,  4,    976,
    14,       39979771, 25641295, 39664984, 585935, 12972, 108,  36};

static const char *const NAMES = "dlrm-tiny, dlrm, dlrm-mlperf";

int zeroc_dlrm_is_preset(const char *name) {
  return name &&
         (!strcmp(name, "dlrm") || !strcmp(name, "dlrm-tiny") || !strcmp(name, "dlrm-mlperf"));
}

zeroc_result_t zeroc_dlrm_preset(const char *name, zeroc_dlrm_config_t *out) {
  zeroc_dlrm_config_t c;
  memset(&c, 0, sizeof c);
  c.hot = 1;
  if (name && !strcmp(name, "dlrm-tiny")) {
    static const int64_t rows[4] = {50, 100, 200, 400};
    c.tables = 4, c.dim = 8, c.dense = 4, c.batch = 32;
    memcpy(c.rows, rows, sizeof rows);
    c.nbottom = 2, c.bottom[0] = 16, c.bottom[1] = 8;
    c.ntop = 2, c.top[0] = 32, c.top[1] = 1;
  } else if (name && !strcmp(name, "dlrm")) {
    static const int64_t rows[8] = {1000, 2000, 5000, 10000, 20000, 50000, 100000, 100000};
    c.tables = 8, c.dim = 16, c.dense = 13, c.batch = 128;
    memcpy(c.rows, rows, sizeof rows);
    c.nbottom = 2, c.bottom[0] = 64, c.bottom[1] = 16;
    c.ntop = 3, c.top[0] = 64, c.top[1] = 32, c.top[2] = 1;
  } else if (name && !strcmp(name, "dlrm-mlperf")) {
    c.tables = 26, c.dim = 128, c.dense = 13, c.batch = 2048;
    memcpy(c.rows, MLPERF_ROWS, sizeof MLPERF_ROWS);
    c.nbottom = 3, c.bottom[0] = 512, c.bottom[1] = 256, c.bottom[2] = 128;
    c.ntop = 5, c.top[0] = 1024, c.top[1] = 1024, c.top[2] = 512, c.top[3] = 256, c.top[4] = 1;
  } else {
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "model '%s' unknown; DLRM presets accepted: %s",
                      name ? name : "(null)", NAMES);
  }
  *out = c;
  return ZEROC_OK;
}

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

zeroc_result_t zeroc_dlrm_config_check(const zeroc_dlrm_config_t *c) {
  if (c->tables < 1 || c->tables > ZEROC_DLRM_MAX_TABLES)
    return BAD("dlrm tables %d: accepted 1..%d", c->tables, ZEROC_DLRM_MAX_TABLES);
  if (c->dim < 1 || c->dense < 1 || c->batch < 1 || c->hot < 1)
    return BAD("dlrm dim %d, dense %d, batch %d, hot %d: each must be >= 1", c->dim, c->dense,
               c->batch, c->hot);
  if (c->dim > 4096 || c->dense > 65536 || c->hot > 1024)
    return BAD("dlrm dim %d (at most 4096), dense %d (at most 65536), hot %d (at most 1024)",
               c->dim, c->dense, c->hot);
  for (int t = 0; t < c->tables; t++)
    if (c->rows[t] < 1 || c->rows[t] > ((int64_t)1 << 40))
      return BAD("dlrm table %d rows %lld: accepted 1..2^40", t, (long long)c->rows[t]);
  if (c->nbottom < 1 || c->nbottom > ZEROC_DLRM_MAX_LAYERS || c->ntop < 1 ||
      c->ntop > ZEROC_DLRM_MAX_LAYERS)
    return BAD("dlrm bottom MLP of %d layers, top MLP of %d: each accepted 1..%d", c->nbottom,
               c->ntop, ZEROC_DLRM_MAX_LAYERS);
  for (int i = 0; i < c->nbottom; i++)
    if (c->bottom[i] < 1 || c->bottom[i] > 65536)
      return BAD("dlrm bottom width %d: accepted 1..65536", c->bottom[i]);
  for (int i = 0; i < c->ntop; i++)
    if (c->top[i] < 1 || c->top[i] > 65536)
      return BAD("dlrm top width %d: accepted 1..65536", c->top[i]);
  if (c->bottom[c->nbottom - 1] != c->dim)
    return BAD("dlrm bottom MLP ends in %d but dim is %d: the bottom output meets the embeddings "
               "in the interaction, so they must be equal",
               c->bottom[c->nbottom - 1], c->dim);
  if (c->top[c->ntop - 1] != 1)
    return BAD("dlrm top MLP ends in %d: its last layer is the click logit, width 1",
               c->top[c->ntop - 1]);
  return ZEROC_OK;
}

int zeroc_dlrm_interaction_width(const zeroc_dlrm_config_t *c) {
  int F = c->tables + 1;
  return c->dim + F * (F - 1) / 2;
}

uint64_t zeroc_dlrm_mlp_params(const zeroc_dlrm_config_t *c) {
  uint64_t n = 0, in = (uint64_t)c->dense;
  for (int i = 0; i < c->nbottom; i++)
    n += (in + 1) * (uint64_t)c->bottom[i], in = (uint64_t)c->bottom[i];
  in = (uint64_t)zeroc_dlrm_interaction_width(c);
  for (int i = 0; i < c->ntop; i++) n += (in + 1) * (uint64_t)c->top[i], in = (uint64_t)c->top[i];
  return n;
}

uint64_t zeroc_dlrm_table_params(const zeroc_dlrm_config_t *c) {
  uint64_t n = 0;
  for (int t = 0; t < c->tables; t++) n += (uint64_t)c->rows[t] * (uint64_t)c->dim;
  return n;
}
