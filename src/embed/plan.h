/*
 * embed/plan.h - which rank holds what of every embedding table and the element
 * count of every exchange buffer (embed/plan.c): one source for the cost model
 * (zeroc_embed_plan) and the allocator (embed/embed.c), which includes this
 * through embed/embed.h.
 */
#ifndef ZEROC_EMBED_PLAN_H
#define ZEROC_EMBED_PLAN_H

#include <stdint.h>

#include "zeroc/embed.h"

/* AUTO never replicates a table larger than this: its dense all-reduce grows
 * with the table while the exchange it saves grows only with the batch. */
#define ZEROC_EMBED_DATA_MAX_BYTES (1u << 20)

/* One table as this rank sees it. */
typedef struct zeroc__etab {
  int64_t rows;
  int dim;
  int sharding;   /* zeroc_embed_sharding_t, resolved (never AUTO) */
  int owner;      /* table-wise: the rank holding it; -1 otherwise */
  int host;       /* 1: weights and state in pinned host memory */
  int64_t r0, r1; /* this rank's rows [r0, r1) (empty: r0 == r1) */
  int c0, c1;     /* this rank's columns [c0, c1) */
  int pcol;       /* the table's first column in pooled (sum of the dims before it) */
  /* placement in the exchange buffers (-1: not there) */
  int inv;      /* index among the tables this rank holds rows of (a2a and row-wise) */
  int rowi;     /* index among the row-wise tables */
  float *w;     /* (r1-r0, c1-c0) weights, device or pinned */
  float *state; /* (r1-r0) AdaGrad state (NULL when no columns are held) */
} zeroc__etab_t;

/* Element counts of every buffer (what the allocator allocates and the cost
 * model prices); computed once by zeroc__embed_layout. */
typedef struct zeroc__ebufs {
  uint64_t send_len, recv_len; /* int32 */
  uint64_t send_ids, recv_ids; /* int64 */
  uint64_t out_send, out_recv; /* fp32 */
  uint64_t rs_send, rs_recv;   /* fp32 */
  uint64_t idx;                /* int64: per held table 3 x N*B*bag (rows, remap, unique) */
  uint64_t offs;               /* int32: per held table N*B+1 bag offsets */
  uint64_t grow;               /* fp32: the largest (unique rows x dc) row gradient */
  uint64_t ss;                 /* fp32: per-row sums of squares (N*B*bag, or a data table's rows) */
  uint64_t pairs;              /* int64: (row, position) pairs to sort one table's ids (host) */
  uint64_t fetch;              /* fp32: fetched rows + state of the largest host table */
  uint64_t dense;              /* fp32: dense gradient of the largest data-parallel table */
} zeroc__ebufs_t;

/* Resolves the sharding, owner, host flag and shard range of every table of
 * `cfg` for `rank` of `nranks`, the buffer sizes and the cost. `tabs` (T) and
 * `bufs` may be NULL. Returns ZEROC_ERR_INVALID_ARG naming the bad field. */
zeroc_result_t zeroc__embed_layout(const zeroc_embed_config_t *cfg, int nranks, int rank,
                                   zeroc__etab_t *tabs, zeroc__ebufs_t *bufs,
                                   zeroc_embed_cost_t *cost);

/* Column range [c0, c1) of rank r for a dim-D table over n ranks, and row range. */
static inline int zeroc__embed_col(int D, int n, int r) { return (int)((int64_t)D * r / n); }
static inline int64_t zeroc__embed_row(int64_t R, int n, int r) { return R * r / n; }

#endif
