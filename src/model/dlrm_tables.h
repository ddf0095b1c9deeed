/*
 * model/dlrm_tables.h - the DLRM trainer's embedding bags behind one small
 * interface: the model-parallel layer of src/embed (zeroc/embed.h), or with
 * ZEROC_DLRM_EMBED=0 replicated host tables (dlrm_tables.c) with the same
 * arithmetic: sum pooling, gradients summed over the data-parallel ranks,
 * row-wise AdaGrad (s_row += mean of g^2 over the row; w -= lr g / (sqrt(s) + eps)).
 */
#ifndef ZEROC_MODEL_DLRM_TABLES_H
#define ZEROC_MODEL_DLRM_TABLES_H

#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/dlrm.h"

typedef struct zeroc__tables zeroc__tables_t;

/* The tables' environment, as zeroc__tables_create and the planner read it:
 * ZEROC_DLRM_HOST_TABLES=BYTES (tables above it per rank in host memory; 0 or
 * less: none) and ZEROC_DLRM_EMBED (0: the replicated reference tables).
 * Errors: a value that is not a number (zeroc__env_i64). */
zeroc_result_t zeroc__tables_env(uint64_t *host_threshold, int *use_embed);

/* The tables of `c` (c->hot ids per bag at most, `batch` samples per rank),
 * weights uniform(-1/sqrt(rows), 1/sqrt(rows)) from `seed`; `sharding` is
 * --embedding-sharding (0 auto .. 4 data). Collective over the dp group. */
zeroc_result_t zeroc__tables_create(zeroc_ctx_t *ctx, const zeroc_dlrm_config_t *c, int batch,
                                    int sharding, uint64_t seed, zeroc__tables_t **out);
void zeroc__tables_destroy(zeroc__tables_t *t);
/* lengths (T,B), ids table-major (host) -> pooled (B,T,D) device. Collective. */
zeroc_result_t zeroc__tables_forward(zeroc__tables_t *t, int B, const int32_t *lengths,
                                     const int64_t *ids, float *pooled);
/* dpooled (B,T,D) device: d(the global batch's mean loss)/d(this rank's pooled);
 * applies AdaGrad with `lr` to the rows the step used. Collective. */
zeroc_result_t zeroc__tables_backward(zeroc__tables_t *t, const float *dpooled, float lr);
/* The tables' weights and AdaGrad state into / from directory `dir` (zeroc_embed_save
 * and _load: any world size and sharding on load). Collective. ZEROC_ERR_UNSUPPORTED
 * for the replicated tables. */
zeroc_result_t zeroc__tables_save(zeroc__tables_t *t, const char *dir);
zeroc_result_t zeroc__tables_load(zeroc__tables_t *t, const char *dir);
/* Table t's sharding (zeroc_embed_sharding_t), or -1 for the replicated tables. */
int zeroc__tables_sharding(const zeroc__tables_t *t, int table);

#endif
