/*
 * tests/test_io_data_mpi.c - the batching rule on real MPI ranks: each rank,
 * as data-parallel rank d of dp = world, reads only its own micro-batches;
 * gathered, they are exactly the global batch (2 x world sequences) a single
 * rank reads, for shards (with and without --shuffle) and for the synthetic
 * corpus.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zeroc/data.h"

#define V    512
#define T    12
#define NTOK 3001

static char g_dir[4096];
static char g_glob[4200];

/* Rank 0 writes two shards into a fresh directory all ranks can see. */
static int setup(void) {
  if (zt_rank() == 0) {
    char *dir = zt_tempdir("zeroc-io-mpi");
    snprintf(g_dir, sizeof g_dir, "%s", dir ? dir : "");
    free(dir);
  }
  MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!g_dir[0]) return 1;
  snprintf(g_glob, sizeof g_glob, "%s/part_*.bin", g_dir);
  int ok = 1;
  if (zt_rank() == 0) {
    int32_t *tok = malloc(sizeof(int32_t) * NTOK);
    uint64_t s = 3;
    for (int i = 0; i < NTOK; i++) tok[i] = (int32_t)(zt_rand_u64(&s) % V);
    for (int f = 0; f < 2 && ok; f++) {
      char p[4300];
      snprintf(p, sizeof p, "%s/part_%d.bin", g_dir, f);
      zeroc_shard_writer_t *w = NULL;
      int n = f == 0 ? 1000 : NTOK - 1000;
      ok = zeroc_shard_writer_create(p, &w) == ZEROC_OK &&
           zeroc_shard_writer_append(w, tok + (f ? 1000 : 0), (size_t)n) == ZEROC_OK &&
           zeroc_shard_writer_finish(w) == ZEROC_OK;
      zeroc_shard_writer_destroy(w);
    }
    free(tok);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok ? 0 : 1;
}

static int teardown(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (zt_rank() == 0) zt_rmtree(g_dir);
  return 0;
}

static void check_source(const char *source, int shuffle) {
  int world = zt_world(), rank = zt_rank(), G = 2 * world;
  zeroc_data_config_t c = ZEROC_DATA_CONFIG_INIT;
  c.source = source;
  c.vocab = V;
  c.seq = T;
  c.global_batch = G;
  c.shuffle = shuffle;
  c.seed = 77;
  zeroc_data_t *d = NULL;
  ZT_OK(zeroc_data_create(&c, &d));
  CU_ASSERT_FATAL(d != NULL);
  size_t rows = (size_t)G * T;
  int32_t *mine_in = malloc(rows * sizeof(int32_t)), *mine_tg = malloc(rows * sizeof(int32_t));
  int32_t *all_in = malloc(rows * sizeof(int32_t)), *all_tg = malloc(rows * sizeof(int32_t));
  int32_t *ref_in = malloc(rows * sizeof(int32_t)), *ref_tg = malloc(rows * sizeof(int32_t));
  const uint64_t steps[] = {0, 3, 25, 250};
  for (int ga = 1; ga <= 2; ga++) {
    int b = G / (world * ga); /* 2 or 1 */
    for (size_t si = 0; si < sizeof steps / sizeof *steps; si++) {
      /* this rank's rows, micro-step by micro-step: (ga * b, T) */
      zeroc_data_layout_t l = {world, rank, b, ga};
      for (int u = 0; u < ga; u++)
        ZT_OK(zeroc_data_batch(d, &l, steps[si], u, mine_in + u * b * T, mine_tg + u * b * T));
      MPI_Allgather(mine_in, ga * b * T, MPI_INT32_T, all_in, ga * b * T, MPI_INT32_T,
                    MPI_COMM_WORLD);
      MPI_Allgather(mine_tg, ga * b * T, MPI_INT32_T, all_tg, ga * b * T, MPI_INT32_T,
                    MPI_COMM_WORLD);
      /* the single-rank global batch, made here independently */
      zeroc_data_layout_t one = {1, 0, G, 1};
      ZT_OK(zeroc_data_batch(d, &one, steps[si], 0, ref_in, ref_tg));
      /* rank r's micro-step u row i is slot (u*world + r)*b + i */
      int bad = 0;
      for (int r = 0; r < world; r++)
        for (int u = 0; u < ga; u++)
          for (int i = 0; i < b; i++) {
            int slot = (u * world + r) * b + i;
            size_t at = ((size_t)r * ga * b + (size_t)u * b + (size_t)i) * T;
            bad += memcmp(all_in + at, ref_in + slot * T, T * sizeof(int32_t)) != 0;
            bad += memcmp(all_tg + at, ref_tg + slot * T, T * sizeof(int32_t)) != 0;
          }
      ZT_ASSERT_MSG(bad == 0,
                    "%s shuffle %d step %llu grad-accum %d on %d ranks: %d rows differ from the "
                    "single-rank batch",
                    source, shuffle, (unsigned long long)steps[si], ga, world, bad);
    }
  }
  free(mine_in);
  free(mine_tg);
  free(all_in);
  free(all_tg);
  free(ref_in);
  free(ref_tg);
  zeroc_data_destroy(d);
}

static void test_files(void) { check_source(g_glob, 0); }
static void test_files_shuffled(void) { check_source(g_glob, 1); }
static void test_synthetic(void) { check_source("synthetic", 0); }

static const zt_test_t tests[] = {
    {"files", test_files},
    {"files_shuffled", test_files_shuffled},
    {"synthetic", test_synthetic},
    ZT_END,
};

int main(int argc, char **argv) {
  return zt_run_mpi_ex(argc, argv, "io_data_mpi", tests, 2, 0, setup, teardown);
}
