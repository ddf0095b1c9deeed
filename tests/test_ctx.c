/*
 * tests/test_ctx.c - context creation on real ranks: versioned configs, errors
 * that every rank reports together (no hang), topology printing, repeated
 * create/finalize.
 */
#include <cblas.h>
#include <mpi.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "device/device.h"
#include "testutil.h"

static void test_create_finalize_repeatedly(void) {
  for (int i = 0; i < 3; i++) {
    zeroc_ctx_t *c = zt_ctx(1, 1, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(zeroc_ctx_mesh(c)->world, zt_world());
    CU_ASSERT_EQUAL(zeroc_ctx_mesh(c)->rank, zt_rank());
    CU_ASSERT_EQUAL(zeroc_ctx_device(c), ZEROC_DEVICE_CPU);
    CU_ASSERT_PTR_NOT_NULL(zeroc_ctx_compute_stream(c));
    int lr = -1, ls = -1;
    zeroc_ctx_local(c, &lr, &ls);
    CU_ASSERT(ls >= 1 && lr >= 0 && lr < ls);
    ZT_OK(zeroc_ctx_finalize(c));
  }
  zeroc_ctx_destroy(NULL);
}

static void test_versioned_config(void) {
  /* An older caller's smaller struct: the fields it lacks keep their defaults. */
  zeroc_ctx_config_t old = ZEROC_CTX_CONFIG_INIT;
  old.device = ZEROC_DEVICE_CPU;
  old.size = offsetof(zeroc_ctx_config_t, comm_timeout_s);
  old.comm_timeout_s = -5; /* beyond the old size: must be ignored */
  zeroc_ctx_t *c = NULL;
  ZT_OK(zeroc_ctx_create(&c, &old));
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(zeroc_ctx_comm_timeout(c) > 0);
  ZT_OK(zeroc_ctx_finalize(c));
  /* An uninitialised struct is rejected on every rank. */
  zeroc_ctx_config_t junk;
  memset(&junk, 0xab, sizeof junk);
  c = NULL;
  CU_ASSERT_EQUAL(zeroc_ctx_create(&c, &junk), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "ZEROC_CTX_CONFIG_INIT"));
}

static void test_bad_mesh_fails_everywhere(void) {
  int W = zt_world();
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CPU;
  cfg.tp = W + 1;
  zeroc_ctx_t *c = NULL;
  CU_ASSERT_EQUAL(zeroc_ctx_create(&c, &cfg), ZEROC_ERR_INVALID_ARG);
  char want[128];
  snprintf(want, sizeof want, "does not divide the world size %d", W);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), want), "message: %s", zeroc_last_error(NULL));
  cfg.tp = 1;
  cfg.hsdp = W + 1;
  CU_ASSERT_EQUAL(zeroc_ctx_create(&c, &cfg), ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zeroc_last_error(NULL), "does not divide the data-parallel size"));
  /* and the next context still works: nobody was left waiting */
  c = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  ZT_OK(zeroc_ctx_finalize(c));
}

static void test_cuda_without_gpu(void) {
  if (zeroc__cuda_device_count() > 0) return; /* a GPU is here: nothing to check */
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CUDA;
  zeroc_ctx_t *c = NULL;
  CU_ASSERT_EQUAL(zeroc_ctx_create(&c, &cfg), ZEROC_ERR_NODEVICE);
  CU_ASSERT_PTR_NULL(c);
  /* auto picks the cpu */
  cfg.device = ZEROC_DEVICE_AUTO;
  ZT_OK(zeroc_ctx_create(&c, &cfg));
  if (c) {
    CU_ASSERT_EQUAL(zeroc_ctx_device(c), ZEROC_DEVICE_CPU);
    ZT_OK(zeroc_ctx_finalize(c));
  }
}

static void test_print_topology(void) {
  zeroc_ctx_t *c = zt_ctx(1, 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  FILE *f = tmpfile();
  ZT_OK(zeroc_ctx_print_topology(c, f));
  if (zt_rank() == 0) {
    rewind(f);
    char line[1024];
    int n = 0, have_cores = 0;
    while (fgets(line, sizeof line, f)) {
      n++;
      have_cores += strstr(line, "cores") != NULL;
    }
    CU_ASSERT_EQUAL(n, zt_world());
    CU_ASSERT_EQUAL(have_cores, zt_world());
  }
  fclose(f);
  ZT_OK(zeroc_ctx_finalize(c));
}

/* The context's thread count reaches both OpenMP (the kernels) and OpenBLAS
 * (sgemm). With the OpenMP build (CMakeLists.txt's ZEROC_OPENBLAS) the library
 * loaded at run time must be that build, not whatever the system's
 * libopenblas.so.0 alternative names. (That build takes its count from
 * omp_get_max_threads() at each call, so sgemm and the kernels agree.) */
static void test_threads_reach_openmp_and_openblas(void) {
  for (int n = 2; n >= 1; n--) {
    zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
    cfg.device = ZEROC_DEVICE_CPU;
    cfg.threads = n;
    zeroc_ctx_t *c = NULL;
    ZT_OK(zeroc_ctx_create(&c, &cfg));
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(omp_get_max_threads(), n);
    CU_ASSERT_EQUAL(openblas_get_num_threads(), n);
#ifdef ZEROC_OPENBLAS_OPENMP
    ZT_ASSERT_MSG(openblas_get_parallel() == 2,
                  "built with OpenBLAS's OpenMP build, but the loaded libopenblas.so.0 reports "
                  "threading %d (0 serial, 1 pthread, 2 OpenMP): is LD_LIBRARY_PATH overriding "
                  "the RUNPATH?",
                  openblas_get_parallel());
#endif
    ZT_OK(zeroc_ctx_finalize(c));
  }
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"create and finalize repeatedly", test_create_finalize_repeatedly},
      {"versioned config: older accepted, uninitialised rejected", test_versioned_config},
      {"a bad mesh fails on every rank, no hang", test_bad_mesh_fails_everywhere},
      {"cuda without a GPU", test_cuda_without_gpu},
      {"topology printed for every rank", test_print_topology},
      {"the thread count reaches OpenMP and OpenBLAS", test_threads_reach_openmp_and_openblas},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "ctx", tests, 1, 0);
}
