/*
 * runtime/context.h - the context's insides (struct zeroc_ctx), read only by the
 * files of runtime/ (never installed): ctx.c builds it, groups.c, query.c and
 * device_api.c read it. Every other layer gets what it needs through the handles
 * built here (the place, the allocation handle, the comm environment, the pool
 * environment) or through the accessors of runtime/runtime.h.
 */
#ifndef ZEROC_RUNTIME_CONTEXT_H
#define ZEROC_RUNTIME_CONTEXT_H

#include <hwloc.h>
#include <mpi.h>
#include <stddef.h>

#include "comm/comm.h"
#include "comm/heartbeat.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/mem.h"
#include "core/topo.h"
#include "device/device.h"
#include "offload/offload.h"
#include "runtime/runtime.h"
#include "zeroc/ctx.h"
#include "zeroc/mesh.h"

/* A live context's `magic`; cleared when it is freed, so that a handle used
 * after zeroc_ctx_finalize / zeroc_ctx_destroy is caught while its memory is
 * still unchanged (zeroc__ctx_check). */
#define ZEROC__CTX_MAGIC 0x7a637478u /* "zctx" */

struct zeroc_ctx {
  uint32_t magic;                    /* ZEROC__CTX_MAGIC while alive */
  char last_error[ZEROC_ERRMSG_MAX]; /* the last failure's text (zeroc__ctx_ret) */
  zeroc_ctx_config_t cfg;
  int live_models;     /* models built on this context and not yet destroyed (zeroc__ctx_models) */
  int doomed;          /* zeroc_ctx_destroy ran while models were alive: freed with the last one */
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
  zeroc__watchdog_t *wd;
  zeroc__heartbeat_t *hb; /* node leaders with peers on other nodes only */
  double hb_timeout;      /* ZEROC_HEARTBEAT_TIMEOUT, seconds; 0: off */
  zeroc__fault_t *fault;  /* test-only ZEROC_FAULT specs (core/fault.h); NULL when off */
  zeroc__mem_t mem;
  uint64_t device_limit; /* ZEROC_DEVICE_MEM_LIMIT: device bytes allowed (0: no limit) */
  /* The narrow handles each layer is given, filled as the parts above come up. */
  zeroc__place_t place;       /* watchdog and heartbeat: world, node, host */
  zeroc__devmem_t devmem;     /* device allocation: device, accountant, limit */
  zeroc__comm_env_t comm_env; /* groups: backend, world rank, timeout, watchdog */
  zeroc__pool_env_t pool_env; /* pinned pool: accountant, topology, NUMA node, device */
};

#endif
