/*
 * core/topo.c - planning each node-local rank's cores with hwloc.
 */
#include <stdio.h>

#include "core/error.h"
#include "core/topo.h"

zeroc_result_t zeroc__topo_plan(hwloc_topology_t topo, int local_rank, int local_size,
                                zeroc_binding_t *b, hwloc_bitmap_t cpuset) {
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "local rank %d of %d", local_rank, local_size);
  hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
  int n = hwloc_get_nbobjs_by_type(topo, unit);
  if (n <= 0) { /* some virtual machines report PUs only */
    unit = HWLOC_OBJ_PU;
    n = hwloc_get_nbobjs_by_type(topo, unit);
  }
  if (n <= 0) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "hwloc topology has no cores or PUs");
  b->total_cores = n;
  if (local_size <= n) {
    int base = n / local_size, rem = n % local_size;
    b->first_core = local_rank * base + (local_rank < rem ? local_rank : rem);
    b->ncores = base + (local_rank < rem);
    b->shared = 0;
  } else {
    b->first_core = (int)((long)local_rank * n / local_size);
    b->ncores = 1;
    b->shared = 1;
  }
  b->threads = b->ncores;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int i = 0; i < b->ncores; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, unit, (unsigned)(b->first_core + i));
    if (o && o->cpuset) hwloc_bitmap_or(set, set, o->cpuset);
  }
  b->numa = -1;
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  hwloc_cpuset_to_nodeset(topo, set, nodes);
  if (!hwloc_bitmap_iszero(nodes)) {
    /* the NUMA node of the first core */
    hwloc_obj_t first = hwloc_get_obj_by_type(topo, unit, (unsigned)b->first_core);
    hwloc_bitmap_t fn = hwloc_bitmap_alloc();
    hwloc_cpuset_to_nodeset(topo, first->cpuset, fn);
    b->numa = hwloc_bitmap_first(fn);
    hwloc_bitmap_free(fn);
  }
  hwloc_bitmap_free(nodes);
  if (b->ncores == 1)
    snprintf(b->cores, sizeof b->cores, "%d", b->first_core);
  else
    snprintf(b->cores, sizeof b->cores, "%d-%d", b->first_core, b->first_core + b->ncores - 1);
  if (cpuset) hwloc_bitmap_copy(cpuset, set);
  hwloc_bitmap_free(set);
  return ZEROC_OK;
}
