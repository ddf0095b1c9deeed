/*
 * tests/test_ctx_owned_mpi.c - zeroc_ctx_create when zeroc itself initialises
 * MPI (this program never calls MPI_Init): a create that fails on a bad
 * argument leaves MPI up, so a second attempt works; MPI is finalized only by
 * the finalize of the last live context; a create after that fails cleanly.
 * With the argument "fail-only" the program ends after the failed create and
 * must still exit cleanly (MPI finalized at exit, so the launcher sees a
 * normal end). Plain main, not CUnit: zt_run_mpi would initialise MPI itself.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "zeroc/zeroc.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "test_ctx_owned_mpi:%d: %s: ", __LINE__, #cond);                             \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static int mpi_finalized(void) {
  int f = 0;
  MPI_Finalized(&f);
  return f;
}

static zeroc_ctx_config_t cpu_config(void) {
  zeroc_ctx_config_t c = ZEROC_CTX_CONFIG_INIT;
  c.device = ZEROC_DEVICE_CPU;
  c.comm_timeout_s = 60;
  return c;
}

int main(int argc, char **argv) {
  int fail_only = argc > 1 && !strcmp(argv[1], "fail-only");
  int inited = 1;
  MPI_Initialized(&inited);
  CHECK(!inited, "MPI is initialised before the first zeroc call");

  /* a bad argument: tp 1000 divides no world this test runs on */
  zeroc_ctx_config_t bad = cpu_config();
  bad.tp = 1000;
  zeroc_ctx_t *c = NULL;
  zeroc_result_t r = zeroc_ctx_create(&c, &bad);
  CHECK(r == ZEROC_ERR_INVALID_ARG, "bad create -> %s: %s", zeroc_result_name(r),
        zeroc_last_error(NULL));
  CHECK(c == NULL, "a failed create left a handle");
  CHECK(!mpi_finalized(), "a failed create finalized MPI");
  if (fail_only) return failures ? 1 : 0; /* MPI is finalized at exit */

  /* the second attempt works, and so does a second live context */
  zeroc_ctx_config_t good = cpu_config();
  r = zeroc_ctx_create(&c, &good);
  CHECK(r == ZEROC_OK && c, "second attempt -> %s: %s", zeroc_result_name(r),
        zeroc_last_error(NULL));
  zeroc_ctx_t *c2 = NULL;
  r = zeroc_ctx_create(&c2, &good);
  CHECK(r == ZEROC_OK && c2, "another context -> %s: %s", zeroc_result_name(r),
        zeroc_last_error(NULL));
  if (c) {
    int64_t v = zeroc_ctx_mesh(c)->rank;
    r = zeroc_ctx_max_i64(c, &v);
    CHECK(r == ZEROC_OK && v == zeroc_ctx_mesh(c)->world - 1, "max over the world: %lld",
          (long long)v);
  }
  /* the first finalize leaves MPI to the context still alive */
  if (c) CHECK(zeroc_ctx_finalize(c) == ZEROC_OK, "finalize: %s", zeroc_last_error(NULL));
  CHECK(!mpi_finalized(), "MPI finalized while a context is alive");
  if (c2) {
    int64_t v = 1;
    CHECK(zeroc_ctx_max_i64(c2, &v) == ZEROC_OK, "the other context after a finalize: %s",
          zeroc_last_error(NULL));
    CHECK(zeroc_ctx_finalize(c2) == ZEROC_OK, "finalize: %s", zeroc_last_error(NULL));
  }
  /* zeroc started MPI and the last context is gone: MPI is down */
  CHECK(mpi_finalized(), "the last finalize left MPI up");
  /* a create now fails with a message, without aborting the job */
  c = NULL;
  r = zeroc_ctx_create(&c, &good);
  CHECK(r == ZEROC_ERR_MPI && !c, "create after the end -> %s", zeroc_result_name(r));
  CHECK(strstr(zeroc_last_error(NULL), "already finalized") != NULL, "message: %s",
        zeroc_last_error(NULL));
  if (failures) fprintf(stderr, "test_ctx_owned_mpi: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
