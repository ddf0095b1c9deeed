/*
 * zeroc/embed.h - model-parallel embedding-bag tables (DLRM's sparse half).
 *
 * A collection of tables, each (rows, dim) fp32 with sum pooling over
 * multi-hot bags, sharded over a process group (the run's data-parallel group)
 * in one of four ways per table:
 *   table-wise   whole table on one rank (tables placed to balance bytes);
 *   column-wise  rank r holds columns [r*dim/N, (r+1)*dim/N) of every row;
 *   row-wise     rank r holds rows [r*rows/N, (r+1)*rows/N) of every column;
 *   data         the table replicated on every rank, gradients all-reduced.
 * Each rank brings its own mini-batch of B samples with jagged ids per table.
 * Forward sends ids (lengths, then values) by all-to-all to the ranks holding
 * their rows and brings the pooled rows back by all-to-all (table-, column-wise)
 * or reduce-scatter over samples (row-wise: every rank pools its rows' partial
 * sums for every sample of the group). Backward sends the pooled gradient back
 * the reverse way and applies row-wise AdaGrad to only the rows the batch
 * touched, at once, without a dense gradient (data-parallel tables: a dense
 * all-reduce, then the same update):
 *
 *   g      = sum over the group's ranks of this row's gradient, divided by N
 *            (duplicate ids summed first; the average over ranks matches the
 *            dense parameters' all-reduce AVG: a single-rank run of the
 *            global batch gives the same tables)
 *   s_row += mean over the row's dim columns of g^2      (one fp32 per row)
 *   w_row -= lr * g / (sqrt(s_row) + eps)
 *
 * (column-wise tables all-reduce the per-row sum of squares, so the state is
 * that of the whole row, as on one rank). Tables may live in host memory
 * (pinned, through the offload pool): a batch's rows are fetched to the
 * device, used, updated and written back.
 * Shapes: B samples per rank, T tables, D dim of a table, N ranks of the group.
 */
#ifndef ZEROC_EMBED_H
#define ZEROC_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"
#include "zeroc/result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_embed zeroc_embed_t;

typedef enum zeroc_embed_sharding {
  ZEROC_EMBED_AUTO = 0,   /* picked per table by the cost model (see zeroc_embed_plan) */
  ZEROC_EMBED_TABLE = 1,  /* whole tables on one rank */
  ZEROC_EMBED_COLUMN = 2, /* a column block of every row on each rank */
  ZEROC_EMBED_ROW = 3,    /* a contiguous row range on each rank */
  ZEROC_EMBED_DATA = 4,   /* replicated; dense gradients all-reduced */
  ZEROC_EMBED_SHARDING_COUNT
} zeroc_embed_sharding_t;

/* One table. */
typedef struct zeroc_embed_table {
  int64_t rows;                    /* >= 1 */
  int dim;                         /* >= 1 */
  zeroc_embed_sharding_t sharding; /* AUTO: the config's choice (forced or planned) */
  int host;                        /* 1: in host memory; 0: device; -1: by host_threshold */
} zeroc_embed_table_t;

#define ZEROC_EMBED_TABLE_INIT(rows_, dim_)                                                        \
  { (rows_), (dim_), ZEROC_EMBED_AUTO, -1 }

/*
 * The collection's settings. Initialise with ZEROC_EMBED_CONFIG_INIT; then set
 * ntables, tables, batch and bag.
 */
typedef struct zeroc_embed_config {
  size_t size;                       /* sizeof(zeroc_embed_config_t), set by the initializer */
  uint32_t magic;                    /* ZEROC_CONFIG_MAGIC */
  int ntables;                       /* T >= 1 */
  const zeroc_embed_table_t *tables; /* (T), copied at create */
  /* AUTO: each table's own choice, and the cost model for the tables left
   * AUTO; anything else: forced on every table (--embedding-sharding). */
  zeroc_embed_sharding_t sharding;
  int batch;               /* B: most samples per rank per call (>= 1); sizes the buffers */
  int bag;                 /* most ids per sample per table (>= 1); sizes the buffers */
  float lr;                /* AdaGrad step; 0 (unset): 0.01. zeroc_embed_set_lr changes it */
  float eps;               /* AdaGrad epsilon; 0 (unset): 1e-8 */
  float init_accum;        /* AdaGrad state start value; < 0 (unset): 0 */
  uint64_t seed;           /* weights: uniform(-1/sqrt(rows), 1/sqrt(rows)) by (seed, table,
                              row, column), the same for every sharding and world size */
  uint64_t host_threshold; /* tables with host == -1 whose bytes on one rank exceed this
                              live in host memory; 0 (unset): none do */
  int group;               /* zeroc_group_kind_t to shard over; -1 (unset): ZEROC_GROUP_DP */
} zeroc_embed_config_t;

#define ZEROC_EMBED_CONFIG_INIT                                                                    \
  {                                                                                                \
    sizeof(zeroc_embed_config_t), ZEROC_CONFIG_MAGIC, 0, NULL, ZEROC_EMBED_AUTO, 0, 0, 0.0f, 0.0f, \
        -1.0f, 0, 0, -1                                                                            \
  }

/* What one rank of a plan costs: memory by tag and where, and bytes per step.
 * zeroc_embed_create allocates exactly these (the accountant sees the same). */
typedef struct zeroc_embed_cost {
  uint64_t param_device;     /* tables on the device (tag params) */
  uint64_t param_host;       /* tables in pinned host memory (tag params) */
  uint64_t optimizer_device; /* AdaGrad state on the device (tag optimizer) */
  uint64_t optimizer_host;   /* AdaGrad state in pinned host memory (tag optimizer) */
  uint64_t grads_device;     /* the dense gradient of the largest data-parallel table (tag grads) */
  uint64_t buffers_device;   /* staging: all-to-all buffers, ids, row gradients (tag buffers) */
  uint64_t buffers_pinned;   /* host-side staging of ids and fetched rows (pinned, tag buffers) */
  uint64_t alltoall_bytes;   /* payload this rank sends by all-to-all per step (forward +
                                backward) when every bag holds `bag` ids */
  uint64_t reduce_scatter_bytes; /* payload (whole send buffer) of the row-wise
                                    reduce-scatter of the forward */
  uint64_t allgather_bytes;      /* payload (whole receive buffer) of the row-wise all-gather
                                    of the pooled gradient in backward */
  uint64_t allreduce_bytes;      /* payload of the data-parallel tables' all-reduce, plus at
                                    most that of the column-wise per-row sums of squares (one
                                    fp32 per distinct row of the step: an upper bound) */
} zeroc_embed_cost_t;

/*
 * The plan of a config on N ranks: each table's sharding (never AUTO) and, for
 * table-wise tables, the owning rank (-1 for the others), and this rank's cost.
 * The cost model behind AUTO (src/embed/plan.c, the one source the allocator
 * uses too), per table of R rows and D dim, B = batch, L = bag, N ranks, in
 * bytes per rank per step (forward + backward, averaged over the ranks):
 *   memory  table, data: R*D*4 + R*4 (weights + AdaGrad state, on the owner /
 *           everywhere); column: R*ceil(D/N)*4 + R*4; row: ceil(R/N)*(D*4 + 4)
 *   traffic ids = B*(4 + 8L) (lengths + values), pooled = B*D*4:
 *           table: ids + 2*pooled; column: N*ids + 2*pooled + N*B*L*4 (the
 *           per-row sums of squares); row: N*B*4 + 8*B*L + 2*N*pooled
 *           (reduce-scatter + all-gather); data: R*D*4 (the all-reduce), 0 on one rank
 * AUTO, table by table: data-parallel when R*D*4 <= 1 MiB and its traffic is no
 * more than table-wise's; else table-wise when the table's memory is at most an
 * even share (the sum over the tables not replicated, / N); else split:
 * column- or row-wise, whichever has less traffic (column needs D >= N, row
 * R >= N). Table-wise tables are then placed largest first on the rank holding
 * the fewest bytes (split tables counted), ties to the lower rank.
 * The cost reported is exact for the allocations and, with every bag full,
 * for the all-to-all, reduce-scatter and all-gather bytes.
 *   cfg: an initialised config; nranks >= 1; rank in [0, nranks);
 *   sharding, owner: (T) or NULL; cost: or NULL.
 * Returns ZEROC_ERR_INVALID_ARG naming the field and what is accepted.
 */
ZEROC_API zeroc_result_t zeroc_embed_plan(const zeroc_embed_config_t *cfg, int nranks, int rank,
                                          zeroc_embed_sharding_t *sharding, int *owner,
                                          zeroc_embed_cost_t *cost);

/*
 * Creates the tables on ctx's group (cfg->group), initialised from cfg->seed.
 * Returns ZEROC_ERR_INVALID_ARG (bad config, the same on every rank),
 * ZEROC_ERR_NOMEM, ZEROC_ERR_CUDA. Collective over the group.
 */
ZEROC_API zeroc_result_t zeroc_embed_create(zeroc_ctx_t *ctx, const zeroc_embed_config_t *cfg,
                                            zeroc_embed_t **out);
/* Frees every buffer. destroy(NULL) does nothing. */
ZEROC_API void zeroc_embed_destroy(zeroc_embed_t *e);

/*
 * Forward of this rank's B samples (B <= cfg batch, the same B on every rank):
 *   lengths (T,B) int32: ids of sample b in table t at lengths[t*B + b], each in [0, bag];
 *   ids: the ids, table-major then sample, sum(lengths) of them, each in [0, rows(t));
 *   pooled (B, sum_t D_t) fp32 device memory <- table t's pooled row of sample b at
 *   columns [sum_{t'<t} D_t', + D_t): (B,T,D) when every table has dim D. A bag of
 *   0 ids pools to 0.
 * Host arrays lengths and ids are read before the call returns. Returns
 * ZEROC_ERR_INVALID_ARG for an id or length out of range (naming table, sample,
 * value and range; every rank returns an error), comm errors. Collective.
 */
ZEROC_API zeroc_result_t zeroc_embed_forward(zeroc_embed_t *e, int B, const int32_t *lengths,
                                             const int64_t *ids, float *pooled);

/*
 * Backward of the last forward, and the AdaGrad update of the rows it touched:
 *   dpooled (B, sum_t D_t) fp32 device memory: d(this rank's loss)/d(pooled).
 * Collective. Returns comm errors; ZEROC_ERR_INVALID_ARG without a forward.
 */
ZEROC_API zeroc_result_t zeroc_embed_backward(zeroc_embed_t *e, const float *dpooled);

/* The AdaGrad step for the following updates (a learning-rate schedule). */
ZEROC_API void zeroc_embed_set_lr(zeroc_embed_t *e, float lr);

/* Number of tables, and table t's rows, dim and resolved sharding (-1 / 0 for
 * a t out of range). */
ZEROC_API int zeroc_embed_num_tables(const zeroc_embed_t *e);
ZEROC_API zeroc_embed_sharding_t zeroc_embed_table_sharding(const zeroc_embed_t *e, int t);
/* This rank's cost (what was allocated; the plan's figures). */
ZEROC_API void zeroc_embed_cost(const zeroc_embed_t *e, zeroc_embed_cost_t *out);

/*
 * Table t as a whole: get gathers (rows, D) weights (and, if state is not NULL,
 * the (rows) AdaGrad state) into host memory on every rank; set takes each rank's
 * part from a whole (rows, D) host array (state may be NULL: unchanged).
 * Collective. For tests and small tables: every rank holds the whole table.
 */
ZEROC_API zeroc_result_t zeroc_embed_get_table(zeroc_embed_t *e, int t, float *weights,
                                               float *state);
ZEROC_API zeroc_result_t zeroc_embed_set_table(zeroc_embed_t *e, int t, const float *weights,
                                               const float *state);

/*
 * Writes this rank's shards (weights and AdaGrad state) under directory `dir`
 * (created by the caller, shared by the ranks), one file per shard named by
 * table, row and column range, so that zeroc_embed_load on any group size
 * (and any sharding) re-cuts them. Returns ZEROC_ERR_IO naming the file.
 * Collective (ends with a barrier so every file is there when it returns).
 */
ZEROC_API zeroc_result_t zeroc_embed_save(zeroc_embed_t *e, const char *dir);
/* Reads the shards this rank holds from `dir` (written by zeroc_embed_save of
 * the same tables, any group size). Returns ZEROC_ERR_IO (missing, short or
 * mismatched files, naming them), ZEROC_ERR_INVALID_ARG (table shapes differ). */
ZEROC_API zeroc_result_t zeroc_embed_load(zeroc_embed_t *e, const char *dir);

ZEROC_API const char *
zeroc_embed_sharding_name(zeroc_embed_sharding_t s); /* "auto", "table", ... */
/* Parses "auto|table|column|row|data"; ZEROC_ERR_INVALID_ARG otherwise. */
ZEROC_API zeroc_result_t zeroc_embed_sharding_parse(const char *s, zeroc_embed_sharding_t *out);

#ifdef __cplusplus
}
#endif
#endif
