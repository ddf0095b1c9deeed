/*
 * embed/embed.h - the model-parallel embedding-bag tables inside (the public
 * side is include/zeroc/embed.h): the per-table layout one rank holds and the
 * sizes of every buffer (embed/plan.h, one source for the cost model and the
 * allocator), and the state a forward leaves for its backward.
 *
 * Exchange layouts (N ranks, B samples per rank; "a2a tables" are the
 * table-wise and column-wise ones, held by this rank or by a peer):
 *   ids out:    [dest][tables dest holds, table order] (B lengths), and values
 *   pooled out: out_send [dest][a2a tables I hold] (B, dc) -> out_recv
 *               [src][a2a tables src holds] (B, dc_src)
 *   row-wise:   rs_send [rank][row tables] (B, D) --reduce-scatter--> rs_recv
 *               [row tables] (B, D)
 * Backward runs the same buffers the other way (all-gather for row-wise).
 */
#ifndef ZEROC_EMBED_EMBED_INTERNAL_H
#define ZEROC_EMBED_EMBED_INTERNAL_H

#include <stdint.h>

#include "comm/comm.h"
#include "embed/plan.h"
#include "kernels/kernels.h"
#include "offload/offload.h"
#include "zeroc/embed.h"

/* Per-step state a forward leaves for the backward, for one held table. */
typedef struct zeroc__eheld {
  int t;                              /* table index */
  int64_t nids;                       /* ids received for it (over the N*B bags) */
  int64_t nuniq;                      /* distinct rows among them */
  int64_t *h_rows;                    /* (nids) local row of each id (host) */
  int64_t *h_remap;                   /* (nids) index of its row among the distinct rows */
  int64_t *h_uniq;                    /* (nuniq) the distinct local rows, ascending */
  int32_t *h_offs;                    /* (N*B+1) bag offsets */
  int64_t *d_rows, *d_remap, *d_uniq; /* device copies */
  int32_t *d_offs;
} zeroc__eheld_t;

struct zeroc_embed {
  zeroc_ctx_t *ctx;
  zeroc_group_t *g;
  zeroc_stream_t *s; /* the compute stream */
  zeroc_kernels_t *k;
  const zeroc__devmem_t *dm;
  zeroc__pinned_pool_t *pool; /* host tables */
  int N, rank, T, batch, bag;
  float lr, eps, init_accum;
  uint64_t seed;
  int64_t sumD;       /* width of pooled */
  zeroc__etab_t *tab; /* (T) */
  zeroc__ebufs_t nb;
  zeroc_embed_cost_t cost;
  int nheld, nrow;
  zeroc__eheld_t *held; /* (nheld) in table order */
  /* device buffers */
  int32_t *d_send_len, *d_recv_len;
  int64_t *d_send_ids, *d_recv_ids;
  float *d_out_send, *d_out_recv, *d_rs_send, *d_rs_recv;
  int64_t *d_idx;
  int32_t *d_offs;
  float *d_grow, *d_ss, *d_fetch, *d_dense;
  /* pinned host mirrors */
  int32_t *h_send_len, *h_recv_len;
  int64_t *h_send_ids, *h_recv_ids;
  int64_t *h_idx;
  int32_t *h_offs;
  float *h_fetch;
  int64_t *h_pairs;
  int64_t *tstart; /* (T+1) first id of each table in the caller's ids */
  /* counts of the last forward, for its backward (host, N entries each) */
  /* alltoallv counts per rank (elements) of the lengths, ids and pooled rows
   * of the last forward (backward sends pooled gradients with osc/orc
   * swapped), and displacement scratch */
  size_t *lsc, *lrc, *isc, *irc, *osc, *orc, *sd, *rd;
  int nx;     /* held tables that receive ids (not data-parallel) */
  int last_B; /* B of the last forward; 0: none pending */
};

/* ---- embed.c ------------------------------------------------------------------ */
/* The weight of (table t, row, column) for `seed`: uniform(-1/sqrt(rows), +). */
float zeroc__embed_init_value(uint64_t seed, int t, int64_t rows, int64_t row, int col);

/* ---- exchange.c: the collectives, in one place --------------------------------- */
/* alltoallv of `dt` elements: sc/rc counts per rank (elements), displacements
 * are their prefix sums. */
zeroc_result_t zeroc__embed_a2av(zeroc_embed_t *e, const void *send, const size_t *sc, void *recv,
                                 const size_t *rc, zeroc_dtype_t dt);

/* ---- forward.c: helpers backward.c shares ------------------------------------------ */
/* Table- or column-wise (pooled rows travel by all-to-all). */
int zeroc__embed_is_a2a(const zeroc__etab_t *x);
/* Columns rank d holds of a2a table x (its first in *c0). */
int zeroc__embed_dc_of(const zeroc__etab_t *x, int N, int d, int *c0);
/* A synchronous copy in the compute stream's order (nothing for 0 bytes). */
zeroc_result_t zeroc__embed_h2d(zeroc_embed_t *e, void *dst, const void *src, size_t bytes);
/* Host tables: the distinct rows of h (then, with_state, their state) into d_fetch. */
zeroc_result_t zeroc__embed_fetch(zeroc_embed_t *e, const zeroc__eheld_t *h, int with_state);
/* Floats per sample of one peer's block of out_send, and of one rank's rs chunk. */
int64_t zeroc__embed_a2a_width(const zeroc_embed_t *e);
int64_t zeroc__embed_row_width(const zeroc_embed_t *e);
/* out_recv <-> pooled, rs_recv <-> pooled (to_pooled: 1 forward, 0 backward). */
zeroc_result_t zeroc__embed_a2a_unpack(zeroc_embed_t *e, int B, float *pooled, int to_pooled);
zeroc_result_t zeroc__embed_row_unpack(zeroc_embed_t *e, int B, float *pooled, int to_pooled);

#endif
