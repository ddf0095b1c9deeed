/*
 * comm/comm.c - groups and the collective entry points: argument checks,
 * byte counters, then the backend's implementation.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

zeroc_result_t zeroc__group_create(const zeroc__comm_env_t *env, MPI_Comm comm, int kind,
                                   const char *name, zeroc_group_t *parent, int color, int key,
                                   zeroc_group_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_group_t *g = calloc(1, sizeof *g);
  if (!g) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "group struct");
  g->env = *env;
  g->kind = kind;
  snprintf(g->name, sizeof g->name, "%s", name);
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) g->mpi[c] = MPI_COMM_NULL;
  g->mpi_staged = MPI_COMM_NULL;
  MPI_Comm_size(comm, &g->size);
  MPI_Comm_rank(comm, &g->rank);
  g->world_ranks = malloc(sizeof(int) * (size_t)g->size);
  if (!g->world_ranks) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "group rank table");
    goto fail;
  }
  int me = env->world_rank;
  int e = MPI_Allgather(&me, 1, MPI_INT, g->world_ranks, 1, MPI_INT, comm);
  if (e != MPI_SUCCESS) {
    res = ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Allgather of world ranks for group %s: error %d", name, e);
    goto fail;
  }
  g->mpi[0] = comm;
  for (int c = 1; c < ZEROC_MAX_CHANNELS; c++) {
    e = MPI_Comm_dup(comm, &g->mpi[c]);
    if (e != MPI_SUCCESS) {
      res = ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_dup for group %s channel %d: error %d", name, c, e);
      goto fail;
    }
  }
  g->ops = env->ops;
  if (g->ops->group_init) ZEROC_TRY(g->ops->group_init(g));
  if (g->ops->group_connect) ZEROC_TRY(g->ops->group_connect(g, parent, color, key));
  ZINFO(COMM, "group %s: rank %d of %d, %d channels, backend %s", name, g->rank, g->size,
        ZEROC_MAX_CHANNELS, g->ops->name);
  *out = g;
  return ZEROC_OK;
fail:
  g->ops = NULL;
  zeroc__group_destroy(g);
  return res;
}

zeroc_result_t zeroc__group_split(zeroc_group_t *parent, int color, int key, const char *name,
                                  zeroc_group_t **out) {
  MPI_Comm c;
  *out = NULL;
  int e = MPI_Comm_split(parent->mpi[0], color < 0 ? MPI_UNDEFINED : color, key, &c);
  if (e != MPI_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_split of group %s for %s: error %d", parent->name,
                      name, e);
  if (c == MPI_COMM_NULL)
    return parent->ops->split_out ? parent->ops->split_out(parent, key) : ZEROC_OK;
  return zeroc__group_create(&parent->env, c, -1, name, parent, color, key, out);
}

void zeroc__group_destroy(zeroc_group_t *g) {
  if (!g) return;
  if (g->ops && g->ops->group_fini) g->ops->group_fini(g);
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++)
    if (g->mpi[c] != MPI_COMM_NULL) MPI_Comm_free(&g->mpi[c]);
  if (g->mpi_staged != MPI_COMM_NULL) MPI_Comm_free(&g->mpi_staged);
  for (int c = 0; c < ZEROC_MAX_CHANNELS; c++) free(g->rs_buf[c]);
  free(g->world_ranks);
  free(g);
}

static void count(zeroc_group_t *g, zeroc_coll_t c, uint64_t bytes, uint64_t bus) {
  atomic_fetch_add_explicit(&g->ctr_calls[c], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g->ctr_bytes[c], bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&g->ctr_bus[c], bus, memory_order_relaxed);
}

static zeroc_result_t check(zeroc_group_t *g, zeroc_stream_t *s, zeroc_dtype_t dt, const char *op) {
  if (!g || !s) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: NULL group or stream", op);
  if (!zeroc_dtype_size(dt)) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s: bad dtype %d", op, (int)dt);
  if (s->channel < 0 || s->channel >= ZEROC_MAX_CHANNELS)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "%s: stream channel %d", op, s->channel);
  g->seq[s->channel]++;
  return ZEROC_OK;
}

zeroc_result_t zeroc__allgather(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                                size_t count_, zeroc_dtype_t dt) {
  ZEROC_CHECK(check(g, s, dt, "allgather"));
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt) * (uint64_t)g->size;
  count(g, ZEROC_COLL_ALLGATHER, total, total / (uint64_t)g->size * (uint64_t)(g->size - 1));
  return g->ops->allgather(g, s, send, recv, count_, dt);
}

zeroc_result_t zeroc__reduce_scatter(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                     void *recv, size_t count_, zeroc_dtype_t dt, zeroc_redop_t op) {
  ZEROC_CHECK(check(g, s, dt, "reduce_scatter"));
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt) * (uint64_t)g->size;
  count(g, ZEROC_COLL_REDUCE_SCATTER, total, total / (uint64_t)g->size * (uint64_t)(g->size - 1));
  return g->ops->reduce_scatter(g, s, send, recv, count_, dt, op);
}

zeroc_result_t zeroc__allreduce(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                                size_t count_, zeroc_dtype_t dt, zeroc_redop_t op) {
  ZEROC_CHECK(check(g, s, dt, "allreduce"));
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt);
  count(g, ZEROC_COLL_ALLREDUCE, total, 2 * total / (uint64_t)g->size * (uint64_t)(g->size - 1));
  return g->ops->allreduce(g, s, send, recv, count_, dt, op);
}

zeroc_result_t zeroc__broadcast(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count_,
                                zeroc_dtype_t dt, int root) {
  ZEROC_CHECK(check(g, s, dt, "broadcast"));
  if (root < 0 || root >= g->size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "broadcast on %s: root %d not in [0, %d)", g->name,
                      root, g->size);
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt);
  count(g, ZEROC_COLL_BROADCAST, total, g->size > 1 ? total : 0);
  return g->ops->broadcast(g, s, buf, count_, dt, root);
}

zeroc_result_t zeroc__send(zeroc_group_t *g, zeroc_stream_t *s, const void *buf, size_t count_,
                           zeroc_dtype_t dt, int peer, int tag) {
  ZEROC_CHECK(check(g, s, dt, "send"));
  if (peer < 0 || peer >= g->size || peer == g->rank)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "send on %s: peer %d (self %d, size %d)", g->name,
                      peer, g->rank, g->size);
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt);
  count(g, ZEROC_COLL_SEND, total, total);
  return g->ops->send(g, s, buf, count_, dt, peer, tag);
}

zeroc_result_t zeroc__recv(zeroc_group_t *g, zeroc_stream_t *s, void *buf, size_t count_,
                           zeroc_dtype_t dt, int peer, int tag) {
  ZEROC_CHECK(check(g, s, dt, "recv"));
  if (peer < 0 || peer >= g->size || peer == g->rank)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "recv on %s: peer %d (self %d, size %d)", g->name,
                      peer, g->rank, g->size);
  uint64_t total = (uint64_t)count_ * zeroc_dtype_size(dt);
  count(g, ZEROC_COLL_RECV, total, 0);
  return g->ops->recv(g, s, buf, count_, dt, peer, tag);
}

zeroc_result_t zeroc__alltoall(zeroc_group_t *g, zeroc_stream_t *s, const void *send, void *recv,
                               size_t count_, zeroc_dtype_t dt) {
  ZEROC_CHECK(check(g, s, dt, "alltoall"));
  if (count_ && send == recv)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "alltoall on %s: send == recv (in place is not supported)",
                      g->name);
  uint64_t block = (uint64_t)count_ * zeroc_dtype_size(dt);
  count(g, ZEROC_COLL_ALLTOALL, block * (uint64_t)g->size, block * (uint64_t)(g->size - 1));
  return g->ops->alltoall(g, s, send, recv, count_, dt);
}

zeroc_result_t zeroc__alltoallv(zeroc_group_t *g, zeroc_stream_t *s, const void *send,
                                const size_t *send_counts, const size_t *send_displs, void *recv,
                                const size_t *recv_counts, const size_t *recv_displs,
                                zeroc_dtype_t dt) {
  ZEROC_CHECK(check(g, s, dt, "alltoallv"));
  if (!send_counts || !send_displs || !recv_counts || !recv_displs)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "alltoallv on %s: NULL count or displacement array",
                      g->name);
  uint64_t esz = zeroc_dtype_size(dt), total = 0, others = 0, in = 0;
  for (int p = 0; p < g->size; p++) {
    total += send_counts[p] * esz;
    if (p != g->rank) others += send_counts[p] * esz;
    in += recv_counts[p];
  }
  if (total && in && send == recv)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "alltoallv on %s: send == recv (in place is not supported)", g->name);
  count(g, ZEROC_COLL_ALLTOALL, total, others);
  return g->ops->alltoallv(g, s, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                           dt);
}

void zeroc__group_counters(const zeroc_group_t *g, zeroc_comm_counters_t *out) {
  for (int c = 0; c < ZEROC_COLL_COUNT; c++) {
    out->calls[c] = atomic_load(&((zeroc_group_t *)g)->ctr_calls[c]);
    out->bytes[c] = atomic_load(&((zeroc_group_t *)g)->ctr_bytes[c]);
    out->bus_bytes[c] = atomic_load(&((zeroc_group_t *)g)->ctr_bus[c]);
  }
}

void zeroc__group_counters_reset(zeroc_group_t *g) {
  for (int c = 0; c < ZEROC_COLL_COUNT; c++) {
    atomic_store(&g->ctr_calls[c], 0);
    atomic_store(&g->ctr_bytes[c], 0);
    atomic_store(&g->ctr_bus[c], 0);
  }
}

zeroc_result_t zeroc__comm_group_start(zeroc_group_t *g) {
  return g->ops->group_start ? g->ops->group_start(g) : ZEROC_OK;
}

zeroc_result_t zeroc__comm_group_end(zeroc_group_t *g) {
  return g->ops->group_end ? g->ops->group_end(g) : ZEROC_OK;
}
