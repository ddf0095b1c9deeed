/*
 * core/ctx.h - the context's insides, shared by src/ (never installed).
 */
#ifndef ZEROC_CORE_CTX_H
#define ZEROC_CORE_CTX_H

#include <hwloc.h>
#include <mpi.h>
#include <stddef.h>

#include "core/error.h"
#include "core/mem.h"
#include "core/topo.h"
#include "device/device.h"
#include "zeroc/ctx.h"
#include "zeroc/mesh.h"

struct zeroc_comm_ops;
struct zeroc_group;
struct zeroc__watchdog;
struct zeroc__heartbeat;
struct zeroc__fault;

struct zeroc_ctx {
  zeroc__errhead_t err; /* first: the last failure's text (core/error.h) */
  zeroc_ctx_config_t cfg;
  int mpi_initialised_here;
  double comm_timeout; /* seconds */
  zeroc_mesh_info_t mesh;
  int local_rank, local_size;
  int *local_of_world; /* node-local index of each world rank on this node, -1 elsewhere */
  char host[64];
  MPI_Comm wcomm; /* the context's world: a duplicate of MPI_COMM_WORLD or cfg.mpi_comm */
  MPI_Comm node_comm;
  hwloc_topology_t topo;
  zeroc_binding_t binding;
  zeroc_device_t dev;
  zeroc_stream_t *compute;
  const struct zeroc_comm_ops *comm_ops;
  struct zeroc_group *groups[ZEROC_GROUP_COUNT];
  struct zeroc__watchdog *wd;
  struct zeroc__heartbeat *hb; /* node leaders with peers on other nodes only */
  double hb_timeout;           /* ZEROC_HEARTBEAT_TIMEOUT, seconds; 0: off */
  struct zeroc__fault *fault; /* test-only ZEROC_FAULT specs (core/fault.h); NULL when off */
  zeroc__mem_t mem;
  uint64_t device_limit; /* ZEROC_DEVICE_MEM_LIMIT: device bytes allowed (0: no limit) */
};
_Static_assert(offsetof(struct zeroc_ctx, err) == 0, "zeroc__ctx_ret finds the error head first");

/* The context's test-only fault specs (core/fault.h); NULL when none are armed. */
struct zeroc__fault *zeroc__ctx_fault(zeroc_ctx_t *ctx);

/* Creates the mesh groups (world, tp, pp, dp, dp_shard, dp_replicate). */
zeroc_result_t zeroc__mesh_create_groups(zeroc_ctx_t *ctx);

#endif
