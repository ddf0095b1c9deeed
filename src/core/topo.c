/*
 * core/topo.c - planning each node-local rank's cores with hwloc: a share of
 * the node, or of the cores near the rank's GPU, or the launcher's binding as
 * it found it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/topo.h"

/* Cores, or PUs where a virtual machine reports no cores. */
static hwloc_obj_type_t unit_type(hwloc_topology_t topo) {
  return hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
}

/* "4-7" for a run of logical indices, else "4,6,9" (cut with "..." where it does not fit). */
static void list_text(const int *idx, int n, char *out, size_t size) {
  int run = n > 0;
  for (int i = 1; i < n; i++) run &= idx[i] == idx[i - 1] + 1;
  if (n == 1 || !run) {
    out[0] = 0;
    for (int i = 0; i < n; i++) {
      size_t len = strlen(out);
      if (len + 16 >= size) {
        snprintf(out + len, size - len, "...");
        break;
      }
      snprintf(out + len, size - len, "%s%d", i ? "," : "", idx[i]);
    }
  } else {
    snprintf(out, size, "%d-%d", idx[0], idx[n - 1]);
  }
  if (n == 0) snprintf(out, size, "none");
}

/* Fills b from the units idx[0..n) (logical indices of `unit`) and, when
 * cpuset is not NULL, their PUs. */
static void fill(hwloc_topology_t topo, hwloc_obj_type_t unit, const int *idx, int n,
                 zeroc_binding_t *b, hwloc_bitmap_t cpuset) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int i = 0; i < n; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, unit, (unsigned)idx[i]);
    if (o && o->cpuset) hwloc_bitmap_or(set, set, o->cpuset);
  }
  b->first_core = n > 0 ? idx[0] : -1;
  b->ncores = n;
  b->numa = -1;
  hwloc_obj_t first = n > 0 ? hwloc_get_obj_by_type(topo, unit, (unsigned)idx[0]) : NULL;
  if (first && first->cpuset) { /* the NUMA node of the first core */
    hwloc_bitmap_t fn = hwloc_bitmap_alloc();
    hwloc_cpuset_to_nodeset(topo, first->cpuset, fn);
    if (!hwloc_bitmap_iszero(fn)) b->numa = hwloc_bitmap_first(fn);
    hwloc_bitmap_free(fn);
  }
  list_text(idx, n, b->cores, sizeof b->cores);
  if (cpuset) hwloc_bitmap_copy(cpuset, set);
  hwloc_bitmap_free(set);
}

/* Splits the units idx[0..n) between `size` ranks and fills b with rank's share:
 * contiguous blocks (the remainder going to the first ranks), or, with more
 * ranks than units, ranks sharing units round the set evenly. */
static void split(hwloc_topology_t topo, hwloc_obj_type_t unit, const int *idx, int n, int rank,
                  int size, zeroc_binding_t *b, hwloc_bitmap_t cpuset) {
  int first, count;
  if (size <= n) {
    int base = n / size, rem = n % size;
    first = rank * base + (rank < rem ? rank : rem);
    count = base + (rank < rem);
    b->shared = 0;
  } else {
    first = (int)((long)rank * n / size);
    count = 1;
    b->shared = 1;
  }
  fill(topo, unit, idx + first, count, b, cpuset);
  b->threads = count;
}

/* The logical indices of the units inside `within` (NULL: every unit); *n their count. */
static int *units_in(hwloc_topology_t topo, hwloc_obj_type_t unit, hwloc_const_bitmap_t within,
                     int *n) {
  int all = hwloc_get_nbobjs_by_type(topo, unit);
  int *idx = malloc(sizeof(int) * (size_t)(all > 0 ? all : 1));
  *n = 0;
  if (!idx) return NULL;
  for (int i = 0; i < all; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, unit, (unsigned)i);
    if (!within || (o->cpuset && hwloc_bitmap_isincluded(o->cpuset, within))) idx[(*n)++] = i;
  }
  return idx;
}

zeroc_result_t zeroc__topo_plan(hwloc_topology_t topo, int local_rank, int local_size,
                                zeroc_binding_t *b, hwloc_bitmap_t cpuset) {
  return zeroc__topo_plan_near(topo, local_rank, local_size, NULL, b, cpuset);
}

zeroc_result_t zeroc__topo_plan_near(hwloc_topology_t topo, int local_rank, int local_size,
                                     hwloc_const_bitmap_t const *near, zeroc_binding_t *b,
                                     hwloc_bitmap_t cpuset) {
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "local rank %d of %d", local_rank, local_size);
  memset(b, 0, sizeof *b);
  hwloc_obj_type_t unit = unit_type(topo);
  int n = 0;
  int *idx = units_in(topo, unit, NULL, &n);
  if (!idx) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "core table");
  if (n <= 0) {
    free(idx);
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "hwloc topology has no cores or PUs");
  }
  b->total_cores = n;
  hwloc_const_bitmap_t mine = near ? near[local_rank] : NULL;
  int m = 0, *in = mine ? units_in(topo, unit, mine, &m) : NULL;
  if (in && m > 0) {
    /* the ranks near the same cores share them, in local-rank order */
    int pos = 0, group = 0;
    for (int q = 0; q < local_size; q++)
      if (near[q] && hwloc_bitmap_isequal(near[q], mine)) {
        if (q < local_rank) pos++;
        group++;
      }
    split(topo, unit, in, m, pos, group, b, cpuset);
  } else {
    split(topo, unit, idx, n, local_rank, local_size, b, cpuset);
  }
  free(in);
  free(idx);
  return ZEROC_OK;
}

int zeroc__topo_launcher_bound(hwloc_const_bitmap_t bound, hwloc_const_bitmap_t allowed) {
  if (!bound || !allowed || hwloc_bitmap_iszero(bound)) return 0;
  /* anything the process may use that its binding leaves out: narrower */
  return hwloc_bitmap_isincluded(allowed, bound) == 0;
}

void zeroc__topo_describe(hwloc_topology_t topo, hwloc_const_bitmap_t set, int sharers,
                          zeroc_binding_t *b) {
  memset(b, 0, sizeof *b);
  hwloc_obj_type_t unit = unit_type(topo);
  b->total_cores = hwloc_get_nbobjs_by_type(topo, unit);
  int n = 0, *idx = units_in(topo, unit, set, &n);
  if (idx && n == 0) { /* a binding narrower than a core (one PU of it): the cores it touches */
    int all = b->total_cores;
    for (int i = 0; i < all; i++) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, unit, (unsigned)i);
      if (o->cpuset && hwloc_bitmap_intersects(o->cpuset, set)) idx[n++] = i;
    }
  }
  fill(topo, unit, idx, idx ? n : 0, b, NULL);
  free(idx);
  if (sharers < 1) sharers = 1;
  b->shared = sharers > n;
  b->threads = n / sharers > 0 ? n / sharers : 1;
  b->launcher = 1;
}

int zeroc__topo_launcher_local_rank(const char **var) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                     "MV2_COMM_WORLD_LOCAL_RANK",  "SLURM_LOCALID",
                                     "PALS_LOCAL_RANKID",          "LOCAL_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (!v || !*v) continue;
    char *end;
    errno = 0;
    long r = strtol(v, &end, 10);
    if (errno || *end || r < 0 || r > 1 << 20) continue;
    if (var) *var = vars[i];
    return (int)r;
  }
  if (var) *var = NULL;
  return -1;
}
