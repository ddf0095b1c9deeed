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
  int launcher;    /* 1: the launcher had bound the process already; zeroc left that alone */
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

/*
 * The plan of zeroc__topo_plan inside `near` (the cores near this rank's GPU,
 * its NUMA node): the cores of `near` are split between the local ranks whose
 * near set is the same one. near[q] is local rank q's set (NULL: not known);
 * with no set for this rank, or one holding no core, it is zeroc__topo_plan.
 */
zeroc_result_t zeroc__topo_plan_near(hwloc_topology_t topo, int local_rank, int local_size,
                                     hwloc_const_bitmap_t const *near, zeroc_binding_t *b,
                                     hwloc_bitmap_t cpuset);

/*
 * Whether a launcher (mpirun --bind-to core, srun --cpu-bind) bound the process
 * already: its binding `bound` (hwloc_get_cpubind) is narrower than the PUs the
 * process may use (`allowed`: the cgroup's cpuset, hwloc's allowed set). Such a
 * binding is left alone.
 */
int zeroc__topo_launcher_bound(hwloc_const_bitmap_t bound, hwloc_const_bitmap_t allowed);

/*
 * The binding `b` describes for a set of PUs zeroc did not choose (a launcher's):
 * the cores inside it, the NUMA node of the first, and its threads, those cores
 * shared evenly by the `sharers` local ranks bound to the same set (>= 1 each).
 */
void zeroc__topo_describe(hwloc_topology_t topo, hwloc_const_bitmap_t set, int sharers,
                          zeroc_binding_t *b);

/*
 * The node-local rank the launcher gave this process, read before MPI starts
 * (so that the device can be chosen first): OMPI_COMM_WORLD_LOCAL_RANK (Open
 * MPI), MPI_LOCALRANKID (MPICH, Intel MPI), MV2_COMM_WORLD_LOCAL_RANK
 * (MVAPICH2), SLURM_LOCALID (srun), PALS_LOCAL_RANKID (Cray PALS), LOCAL_RANK
 * (torchrun), the first that holds a number >= 0. -1 when none does; *var
 * (may be NULL) names the variable read.
 */
int zeroc__topo_launcher_local_rank(const char **var);

#endif
