/*
 * embed/plan.c - which rank holds what of every table, the cost model behind
 * AUTO, and the size of every buffer. zeroc_embed_create allocates exactly the
 * sizes computed here and zeroc_embed_plan reports them, so a plan cannot
 * drift from what is allocated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "embed/plan.h"
#include "offload/offload.h" /* zeroc__pinned_class_size */

/* ---- config checks -------------------------------------------------------------- */

static zeroc_result_t check_config(const zeroc_embed_config_t *c, int nranks, int rank) {
  if (!c) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed: NULL config");
  if (c->size != sizeof(*c) || c->magic != ZEROC_CONFIG_MAGIC)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed config: not initialised (size %zu, magic 0x%x); start from "
                      "ZEROC_EMBED_CONFIG_INIT",
                      c->size, c->magic);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed: rank %d of %d ranks; need 0 <= rank < ranks",
                      rank, nranks);
  if (c->ntables < 1 || !c->tables)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed config: ntables %d (tables %s); need >= 1 table", c->ntables,
                      c->tables ? "set" : "NULL");
  if ((int)c->sharding < 0 || c->sharding >= ZEROC_EMBED_SHARDING_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed config: sharding %d; accepted: auto, table, column, row, data",
                      (int)c->sharding);
  if (c->batch < 1 || c->bag < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed config: batch %d, bag %d; both must be >= 1",
                      c->batch, c->bag);
  if (!(c->lr >= 0.0f) || !(c->eps >= 0.0f))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed config: lr %g, eps %g; need finite values >= 0",
                      (double)c->lr, (double)c->eps);
  if (c->group != -1 && (c->group < 0 || c->group >= ZEROC_GROUP_COUNT))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "embed config: group %d; need -1 or a zeroc_group_kind_t", c->group);
  for (int t = 0; t < c->ntables; t++) {
    const zeroc_embed_table_t *x = &c->tables[t];
    if (x->rows < 1 || x->dim < 1 || x->dim > (1 << 20))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "embed table %d: rows %lld, dim %d; need rows >= 1 and 1 <= dim <= 2^20", t,
                        (long long)x->rows, x->dim);
    if ((int)x->sharding < 0 || x->sharding >= ZEROC_EMBED_SHARDING_COUNT)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "embed table %d: sharding %d; accepted: auto, table, column, row, data", t,
                        (int)x->sharding);
    if (x->host < -1 || x->host > 1)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "embed table %d: host %d; accepted: -1, 0, 1", t,
                        x->host);
  }
  return ZEROC_OK;
}

/* ---- the cost model ------------------------------------------------------------- */

/* Bytes one rank holds of a table (weights + one fp32 AdaGrad state per row)
 * under scheme s, the largest share over the ranks. */
static double table_mem(int s, double R, double D, int N) {
  switch (s) {
  case ZEROC_EMBED_COLUMN:
    return R * ceil(D / N) * 4 + R * 4;
  case ZEROC_EMBED_ROW:
    return ceil(R / N) * (D * 4 + 4);
  default:
    return R * D * 4 + R * 4; /* table (on its owner), data (everywhere) */
  }
}

/* Bytes one rank sends per step for a table under scheme s (forward +
 * backward, every bag full), averaged over the ranks: what AUTO compares. */
static double table_comm(int s, double R, double D, int N, double B, double L) {
  double ids = B * (4 + 8 * L), pooled = B * D * 4;
  switch (s) {
  case ZEROC_EMBED_TABLE:
    return ids + 2 * pooled;
  case ZEROC_EMBED_COLUMN:
    return N * ids + 2 * pooled + (N > 1 ? N * B * L * 4 : 0);
  case ZEROC_EMBED_ROW:
    return N * B * 4 + B * L * 8 + 2 * N * pooled;
  default:
    return N > 1 ? R * D * 4 : 0; /* data: the dense all-reduce */
  }
}

/* AUTO for one table: data-parallel when it is small and its all-reduce costs
 * no more than sending its ids and pooled rows; else NEED_SHARD (-1) to let
 * the placement decide between table-wise and a split. */
static int auto_first(double R, double D, int N, double B, double L) {
  double bytes = R * D * 4;
  if (bytes <= ZEROC_EMBED_DATA_MAX_BYTES &&
      table_comm(ZEROC_EMBED_DATA, R, D, N, B, L) <= table_comm(ZEROC_EMBED_TABLE, R, D, N, B, L))
    return ZEROC_EMBED_DATA;
  return -1;
}

/* A table larger than an even share of all sharded bytes would unbalance a
 * table-wise placement: it is split, row- or column-wise by the lower
 * traffic (column needs D >= N columns, row R >= N rows). */
static int auto_split(double R, double D, int N, double B, double L) {
  int col_ok = D >= N, row_ok = R >= N;
  if (col_ok && row_ok)
    return table_comm(ZEROC_EMBED_COLUMN, R, D, N, B, L) <=
                   table_comm(ZEROC_EMBED_ROW, R, D, N, B, L)
               ? ZEROC_EMBED_COLUMN
               : ZEROC_EMBED_ROW;
  return col_ok ? ZEROC_EMBED_COLUMN : row_ok ? ZEROC_EMBED_ROW : ZEROC_EMBED_TABLE;
}

/* Resolves every table's sharding and the table-wise owners. */
static zeroc_result_t resolve(const zeroc_embed_config_t *c, int N, int *sh, int *owner) {
  int T = c->ntables;
  double B = c->batch, L = c->bag, total = 0;
  for (int t = 0; t < T; t++) {
    const zeroc_embed_table_t *x = &c->tables[t];
    sh[t] = c->sharding != ZEROC_EMBED_AUTO ? (int)c->sharding : (int)x->sharding;
    if (sh[t] == ZEROC_EMBED_AUTO) sh[t] = auto_first((double)x->rows, x->dim, N, B, L);
    if (sh[t] != ZEROC_EMBED_DATA)
      total += table_mem(ZEROC_EMBED_TABLE, (double)x->rows, x->dim, 1);
  }
  double share = total / N;
  for (int t = 0; t < T; t++) {
    const zeroc_embed_table_t *x = &c->tables[t];
    if (sh[t] != -1) continue;
    sh[t] = N > 1 && table_mem(ZEROC_EMBED_TABLE, (double)x->rows, x->dim, 1) > share
                ? auto_split((double)x->rows, x->dim, N, B, L)
                : ZEROC_EMBED_TABLE;
  }
  /* table-wise placement: largest first onto the least-loaded rank (bytes
   * already held by split tables count), ties to the lower table and rank */
  double *load = calloc((size_t)N, sizeof(double));
  int *order = malloc((size_t)T * sizeof(int));
  if (!load || !order) {
    free(load);
    free(order);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed plan: %d tables", T);
  }
  int n = 0;
  for (int t = 0; t < T; t++) {
    owner[t] = -1;
    double R = (double)c->tables[t].rows, D = c->tables[t].dim;
    if (sh[t] == ZEROC_EMBED_TABLE)
      order[n++] = t;
    else if (sh[t] == ZEROC_EMBED_COLUMN || sh[t] == ZEROC_EMBED_ROW)
      for (int r = 0; r < N; r++) load[r] += table_mem(sh[t], R, D, N);
  }
  for (int i = 1; i < n; i++) /* insertion sort: bytes descending, index ascending */
    for (int j = i; j > 0; j--) {
      int a = order[j - 1], b = order[j];
      double ma = (double)c->tables[a].rows * c->tables[a].dim;
      double mb = (double)c->tables[b].rows * c->tables[b].dim;
      if (mb > ma) {
        order[j - 1] = b;
        order[j] = a;
      } else
        break;
    }
  for (int i = 0; i < n; i++) {
    int t = order[i], best = 0;
    for (int r = 1; r < N; r++)
      if (load[r] < load[best]) best = r;
    owner[t] = best;
    load[best] += table_mem(ZEROC_EMBED_TABLE, (double)c->tables[t].rows, c->tables[t].dim, 1);
  }
  free(load);
  free(order);
  return ZEROC_OK;
}

/* ---- layout, buffers and cost of one rank ------------------------------------------ */

static void shard_range(zeroc__etab_t *x, int N, int rank) {
  x->r0 = 0;
  x->r1 = x->rows;
  x->c0 = 0;
  x->c1 = x->dim;
  if (x->sharding == ZEROC_EMBED_TABLE && x->owner != rank) x->r1 = 0, x->c1 = 0;
  if (x->sharding == ZEROC_EMBED_COLUMN) {
    x->c0 = zeroc__embed_col(x->dim, N, rank);
    x->c1 = zeroc__embed_col(x->dim, N, rank + 1);
  }
  if (x->sharding == ZEROC_EMBED_ROW) {
    x->r0 = zeroc__embed_row(x->rows, N, rank);
    x->r1 = zeroc__embed_row(x->rows, N, rank + 1);
  }
}

static uint64_t u64max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Adds table x's buffer needs (and its all-to-all bytes) for `rank`. */
static void add_table(zeroc__ebufs_t *b, zeroc_embed_cost_t *c, const zeroc__etab_t *x, int N,
                      int rank, uint64_t B, uint64_t L) {
  uint64_t D = (uint64_t)x->dim, dc = (uint64_t)(x->c1 - x->c0), n = (uint64_t)N;
  int s = x->sharding;
  int held = s == ZEROC_EMBED_COLUMN || s == ZEROC_EMBED_ROW ||
             (s == ZEROC_EMBED_TABLE && x->owner == rank);
  uint64_t bags = s == ZEROC_EMBED_DATA ? B : n * B; /* bags this rank pools for the table */
  if (s != ZEROC_EMBED_DATA) {
    uint64_t dests = s == ZEROC_EMBED_TABLE ? 1 : n;
    b->send_len += B * dests;
    b->send_ids += s == ZEROC_EMBED_ROW ? B * L : B * L * dests;
  }
  if (held || s == ZEROC_EMBED_DATA) {
    b->idx += 3 * bags * L;
    b->offs += bags + 1;
    b->grow = u64max(b->grow, bags * L * dc);
    b->ss = u64max(b->ss, s == ZEROC_EMBED_DATA ? (uint64_t)x->rows : bags * L);
    b->pairs = u64max(b->pairs, 2 * bags * L);
    if (x->host) b->fetch = u64max(b->fetch, bags * L * (dc + 1));
  }
  if (held) {
    b->recv_len += n * B;
    b->recv_ids += n * B * L;
  }
  if (s == ZEROC_EMBED_TABLE || s == ZEROC_EMBED_COLUMN) {
    if (held) b->out_send += n * B * dc;
    b->out_recv += B * D;
  }
  if (s == ZEROC_EMBED_ROW) {
    b->rs_send += n * B * D;
    b->rs_recv += B * D;
    c->reduce_scatter_bytes += n * B * D * 4;
    c->allgather_bytes += n * B * D * 4;
  }
  if (s == ZEROC_EMBED_DATA) {
    b->dense = u64max(b->dense, (uint64_t)x->rows * D);
    if (N > 1) c->allreduce_bytes += (uint64_t)x->rows * D * 4;
  }
  if (s == ZEROC_EMBED_COLUMN && N > 1) c->allreduce_bytes += n * B * L * 4;
}

/* Bytes of the tables and state of x on this rank, into the cost. */
static void add_memory(zeroc_embed_cost_t *c, const zeroc__etab_t *x) {
  uint64_t rows = (uint64_t)(x->r1 - x->r0), cols = (uint64_t)(x->c1 - x->c0);
  uint64_t w = rows * cols * 4, st = cols ? rows * 4 : 0;
  if (x->host) {
    c->param_host += w ? zeroc__pinned_class_size(w) : 0;
    c->optimizer_host += st ? zeroc__pinned_class_size(st) : 0;
  } else {
    c->param_device += w;
    c->optimizer_device += st;
  }
}

zeroc_result_t zeroc__embed_layout(const zeroc_embed_config_t *cfg, int nranks, int rank,
                                   zeroc__etab_t *tabs, zeroc__ebufs_t *bufs,
                                   zeroc_embed_cost_t *cost) {
  ZEROC_CHECK(check_config(cfg, nranks, rank));
  int T = cfg->ntables;
  int *sh = malloc((size_t)T * 2 * sizeof(int));
  zeroc__etab_t *x = tabs ? tabs : malloc((size_t)T * sizeof(*x));
  if (!sh || !x) {
    free(sh);
    if (!tabs) free(x);
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed plan: %d tables", T);
  }
  zeroc_result_t r = resolve(cfg, nranks, sh, sh + T);
  zeroc__ebufs_t b;
  zeroc_embed_cost_t c;
  memset(&b, 0, sizeof(b));
  memset(&c, 0, sizeof(c));
  uint64_t B = (uint64_t)cfg->batch, L = (uint64_t)cfg->bag;
  int pcol = 0, nheld = 0, nrow = 0;
  for (int t = 0; t < T && r == ZEROC_OK; t++) {
    const zeroc_embed_table_t *in = &cfg->tables[t];
    memset(&x[t], 0, sizeof(x[t]));
    x[t].rows = in->rows;
    x[t].dim = in->dim;
    x[t].sharding = sh[t];
    x[t].owner = sh[T + t];
    shard_range(&x[t], nranks, rank);
    uint64_t shard = (uint64_t)(x[t].r1 - x[t].r0) * (uint64_t)(x[t].c1 - x[t].c0) * 4;
    x[t].host = sh[t] == ZEROC_EMBED_DATA ? 0
                : in->host >= 0           ? in->host
                                          : (cfg->host_threshold && shard > cfg->host_threshold);
    x[t].pcol = pcol;
    pcol += in->dim;
    int held = sh[t] == ZEROC_EMBED_COLUMN || sh[t] == ZEROC_EMBED_ROW ||
               (sh[t] == ZEROC_EMBED_TABLE && x[t].owner == rank);
    x[t].inv = held || sh[t] == ZEROC_EMBED_DATA ? nheld++ : -1;
    x[t].rowi = sh[t] == ZEROC_EMBED_ROW ? nrow++ : -1;
    add_table(&b, &c, &x[t], nranks, rank, B, L);
    add_memory(&c, &x[t]);
  }
  if (r == ZEROC_OK) {
    /* all-to-all payload: ids and lengths out, pooled rows back, and the same
     * pooled bytes again in backward */
    c.alltoall_bytes = b.send_len * 4 + b.send_ids * 8 + b.out_send * 4 + b.out_recv * 4;
    c.grads_device = b.dense * 4;
    c.buffers_device =
        (b.send_len + b.recv_len + b.offs) * 4 + (b.send_ids + b.recv_ids + b.idx) * 8 +
        (b.out_send + b.out_recv + b.rs_send + b.rs_recv + b.grow + b.ss + b.fetch) * 4;
    c.buffers_pinned = (b.send_len + b.recv_len + b.offs + b.fetch) * 4 +
                       (b.send_ids + b.recv_ids + b.idx + b.pairs) * 8;
    if (bufs) *bufs = b;
    if (cost) *cost = c;
  }
  free(sh);
  if (!tabs) free(x);
  return r;
}

zeroc_result_t zeroc_embed_plan(const zeroc_embed_config_t *cfg, int nranks, int rank,
                                zeroc_embed_sharding_t *sharding, int *owner,
                                zeroc_embed_cost_t *cost) {
  ZEROC_CHECK(check_config(cfg, nranks, rank));
  zeroc__etab_t *x = malloc((size_t)cfg->ntables * sizeof(*x));
  if (!x) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "embed plan: %d tables", cfg->ntables);
  zeroc_result_t r = zeroc__embed_layout(cfg, nranks, rank, x, NULL, cost);
  for (int t = 0; r == ZEROC_OK && t < cfg->ntables; t++) {
    if (sharding) sharding[t] = (zeroc_embed_sharding_t)x[t].sharding;
    if (owner) owner[t] = x[t].owner;
  }
  free(x);
  return r;
}

static const char *const names[] = {"auto", "table", "column", "row", "data"};

const char *zeroc_embed_sharding_name(zeroc_embed_sharding_t s) {
  return (int)s >= 0 && s < ZEROC_EMBED_SHARDING_COUNT ? names[s] : "?";
}

zeroc_result_t zeroc_embed_sharding_parse(const char *s, zeroc_embed_sharding_t *out) {
  for (int i = 0; s && i < ZEROC_EMBED_SHARDING_COUNT; i++)
    if (!strcmp(s, names[i])) {
      if (out) *out = (zeroc_embed_sharding_t)i;
      return ZEROC_OK;
    }
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "embedding sharding '%s'; accepted: auto, table, column, row, data",
                    s ? s : "(null)");
}
