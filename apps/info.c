/*
 * apps/info.c - `zeroc info`: the build, the mesh and each rank's binding, and
 * a quick all-gather / reduce-scatter bandwidth check on the dp group.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cli.h"
#include "zeroc/zeroc.h"

int zeroc_cmd_info(int argc, char **argv) {
  size_t mib = 16;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: mpirun -np N zeroc info [--mib M]\n"
             "  prints the build, the mesh and each rank's cores, then times all-gather and\n"
             "  reduce-scatter of M MiB (default 16) per rank over all ranks.\n");
      return 0;
    }
    if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
      mib = (size_t)atol(argv[++i]);
      if (mib < 1 || mib > 4096) {
        fprintf(stderr, "zeroc info: --mib %s: accepted 1..4096\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "zeroc info: unknown flag '%s'; accepted: --mib M, --help\n", argv[i]);
      return 2;
    }
  }
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  zeroc_ctx_t *ctx = NULL;
  zeroc_result_t r = zeroc_ctx_create(&ctx, &cfg);
  if (r != ZEROC_OK) {
    fprintf(stderr, "zeroc info: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  const zeroc_mesh_info_t *m = zeroc_ctx_mesh(ctx);
  if (m->rank == 0) {
    printf("zeroc %s, %s backend, %d ranks\n", ZEROC_VERSION_STRING,
           zeroc_ctx_device(ctx) == ZEROC_DEVICE_CUDA ? "cuda/nccl" : "cpu/mpi", m->world);
#ifdef ZEROC_HAVE_CUDA
    printf("built with CUDA (sm_90 + PTX)\n");
#else
    printf("built without CUDA\n");
#endif
  }
  zeroc_ctx_print_topology(ctx, stdout);
  double t_ag = 0, t_rs = 0;
  r = zeroc_ctx_probe_collectives(ctx, mib * 1048576, 4, &t_ag, &t_rs);
  if (!r && m->rank == 0 && m->world > 1) {
    double bus = (double)mib * 1048576 * (m->world - 1);
    printf(
        "all-gather     %zu MiB/rank over %d ranks: %.2f ms, bus bandwidth %.2f GB/s (best of 4)\n",
        mib, m->world, t_ag * 1e3, bus / t_ag / 1e9);
    printf(
        "reduce-scatter %zu MiB/rank over %d ranks: %.2f ms, bus bandwidth %.2f GB/s (best of 4)\n",
        mib, m->world, t_rs * 1e3, bus / t_rs / 1e9);
  }
  if (r) fprintf(stderr, "zeroc info: rank %d: %s\n", m->rank, zeroc_last_error(NULL));
  zeroc_result_t f = zeroc_ctx_finalize(ctx);
  return r || f ? 1 : 0;
}
