/*
 * core/topo.h - hwloc topology: which cores (and NUMA node, and GPU) each
 * node-local rank gets, and applying that binding.
 *
 * The plan is a pure function of the topology and (local rank, local size), so
 * tests drive it with synthetic topologies ("node:2 core:4 pu:2").
 */
#ifndef ZEROC_CORE_TOPO_H
#define ZEROC_CORE_TOPO_H

#include <hwloc.h>

#include "zeroc/result.h"

typedef struct zeroc_binding {
  int total_cores; /* cores the process may use on this node */
  int first_core;  /* logical index of the first core assigned */
  int ncores;      /* cores assigned (1 when shared) */
  int shared;      /* 1 when more ranks than cores: this core is shared */
  int numa;        /* OS index of the NUMA node of the first core, -1 if unknown */
  int threads;     /* compute threads for OpenMP / OpenBLAS */
  char cores[64];  /* e.g. "4-7" */
} zeroc_binding_t;

/*
 * Plans the binding of node-local rank `local_rank` of `local_size`: cores are
 * split into contiguous blocks (the remainder going to the first ranks), or,
 * with more ranks than cores, ranks share cores round the node evenly.
 * `cpuset`, when not NULL, receives the PUs of the assigned cores.
 * Returns ZEROC_ERR_INVALID_ARG for a bad rank/size or a topology with no cores.
 */
zeroc_result_t zeroc__topo_plan(hwloc_topology_t topo, int local_rank, int local_size,
                                zeroc_binding_t *b, hwloc_bitmap_t cpuset);

#endif
