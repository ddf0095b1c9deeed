/*
 * tests/testutil.h - running CUnit suites as single processes or on MPI ranks,
 * and the numeric helpers the tests share (seeded random fills, errors).
 */
#ifndef ZEROC_TESTUTIL_H
#define ZEROC_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "zeroc/zeroc.h"

typedef struct zt_test {
  const char *name;
  void (*fn)(void);
} zt_test_t;

#define ZT_END {NULL, NULL}
#define ZT_SKIP_CODE 77

/* Runs `tests` as one CUnit suite in this process. Returns the exit code:
 * 0 all passed, 1 a failure. */
int zt_run(const char *suite, const zt_test_t *tests);

/* As zt_run, on every MPI rank (MPI initialised here with MPI_THREAD_MULTIPLE):
 * failures are summed over ranks; rank 0 prints the summary; every rank returns
 * the same code. `min_ranks`/`max_ranks` (0: any) out of range exits 77. */
int zt_run_mpi(int argc, char **argv, const char *suite, const zt_test_t *tests, int min_ranks,
               int max_ranks);
/* As zt_run_mpi, with CUnit suite set-up and tear-down run after MPI starts
 * (return 0 on success). */
int zt_run_mpi_ex(int argc, char **argv, const char *suite, const zt_test_t *tests, int min_ranks,
                  int max_ranks, int (*setup)(void), int (*teardown)(void));

/* Records that a check was not made (what, and why): the suite's summary line then says
 * "NOT CHECKED: ..." so a pass without it cannot be mistaken for a full one. */
void zt_not_checked(const char *what);

/* The world rank and size (MPI tests). */
int zt_rank(void);
int zt_world(void);

/* A context for tests: cpu device, the given mesh, a short comm timeout. */
zeroc_ctx_t *zt_ctx(int tp, int pp, int hsdp);
/* The same with a context-parallel size. */
zeroc_ctx_t *zt_ctx_cp(int tp, int cp, int pp, int hsdp);

/* Deterministic fills (xoshiro-like generator seeded by `seed`). */
void zt_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);
void zt_fill_normal(float *x, size_t n, uint64_t seed, float std);
uint64_t zt_rand_u64(uint64_t *state);

/* ||a - b|| / max(||b||, tiny), in double. */
double zt_rel_err(const float *a, const float *b, size_t n);
/* Maximum |a - b|. */
double zt_max_abs_diff(const float *a, const float *b, size_t n);

/* A temporary directory (mkdtemp under TMPDIR or /tmp), removed with zt_rmtree. */
char *zt_tempdir(const char *prefix);
void zt_rmtree(const char *path);
/* The one file "<prefix>.<anything>" (a temporary with a random tail) into
 * out: 0, or -1 when there is none or more than one. */
int zt_find_prefixed(const char *prefix, char *out, size_t n);

/* CUnit assertion with a formatted message printed on failure. */
#define ZT_ASSERT_MSG(cond, ...)                                                                  \
  do {                                                                                            \
    int zt_c_ = !!(cond);                                                                         \
    if (!zt_c_) {                                                                                 \
      fprintf(stderr, "  [rank %d] %s:%d: ", zt_rank(), __FILE__, __LINE__);                      \
      fprintf(stderr, __VA_ARGS__);                                                               \
      fprintf(stderr, "\n");                                                                      \
    }                                                                                             \
    CU_ASSERT(zt_c_);                                                                             \
  } while (0)

#define ZT_OK(call)                                                                               \
  do {                                                                                            \
    zeroc_result_t zt_r_ = (call);                                                                \
    ZT_ASSERT_MSG(zt_r_ == ZEROC_OK, "%s -> %s: %s", #call, zeroc_result_name(zt_r_),             \
                  zeroc_last_error(NULL));                                                        \
  } while (0)

#endif
