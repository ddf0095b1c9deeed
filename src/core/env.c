/*
 * core/env.c - reading ZEROC_* knobs from the environment, each logged once,
 * each checked against its accepted range (the table below is the one place
 * where the ranges live; docs/build.md's "Environment knobs" names them).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

typedef struct {
  const char *name;
  int is_int;
  double lo, hi; /* inclusive; exact for the integer knobs' bounds used here */
  const char *what;
} knob_t;

/* The numeric knobs. Bounds are what the code behind each one can take: a
 * thread count OpenMP and OpenBLAS accept, a block size that is a whole number
 * of pages and fits the swapper's buffers, a byte count below 2^60. */
static const knob_t KNOBS[] = {
    {"ZEROC_BIND", 1, 0, 1, "1 binds each rank to its cores, 0 leaves it to the launcher"},
    {"ZEROC_THREADS", 1, 1, 4096, "compute threads per rank"},
    {"ZEROC_CPU_GEMM", 1, 0, 1, "1 (default): the cpu matmul's products by zeroc's AVX-512 kernel where the CPU has AVX-512, 0: OpenBLAS's sgemm"},
    {"ZEROC_HUGE_PAGES", 1, 0, 1, "1 (default) puts cpu buffers of 2 MiB or more on transparent huge pages, 0 on 4 KiB pages"},
    {"ZEROC_COMM_TIMEOUT", 0, 0.001, 1e7, "seconds a collective may wait"},
    {"ZEROC_HEARTBEAT_TIMEOUT", 0, 0, 3600, "seconds of silence before a node counts as lost, 0 = off, else at least 0.2"},
    {"ZEROC_DEVICE_MEM_LIMIT", 1, 0, 1152921504606846976.0, "bytes of device memory, 0 = no cap"},
    {"ZEROC_OFFLOAD_BLOCK_KIB", 1, 4, 65536, "NVMe swap block in KiB, a multiple of 4"},
    {"ZEROC_OFFLOAD_QD", 1, 1, 1024, "NVMe swap queue depth"},
    {"ZEROC_OFFLOAD_DIRECT", 1, 0, 1, "1 uses O_DIRECT for the NVMe swap"},
    {"ZEROC_OFFLOAD_PREALLOC", 1, 0, 1, "1 preallocates the NVMe swap files"},
    {"ZEROC_CUDA_SCRATCH_MB", 1, 1, 65536, "MiB of CUDA kernel scratch"},
    {"ZEROC_CUDA_TF32", 1, 0, 1, "1 allows TF32 matmuls"},
    {"ZEROC_CUDA_LT_EPILOGUE", 1, 0, 2, "1 (default): bias gradients and the bf16 GELU forward in cuBLASLt epilogues, 2: also fp32 GELU and the GELU backward, 0: separate kernels"},
    {"ZEROC_CUDA_FLASH", 1, 0, 1, "1 (default): bf16 attention on the tensor cores, 0: the fp32 SIMT kernels"},
    {"ZEROC_CUDA_DETERMINISTIC", 1, 0, 1, "0 (default): cuDNN attention's fast backward (fp32 dQ atomics), 1: its deterministic one"},
    {"ZEROC_NCCL_SELF", 1, 0, 1, "1 runs NCCL on one-rank groups"},
    {"ZEROC_PEAK_TFLOPS", 0, 0.001, 1e7, "peak TFLOP/s per GPU for the MFU figure"},
    {"ZEROC_DLRM_EMBED", 1, 0, 1, "1 (default): the DLRM trainer's tables model-parallel (src/embed), 0: replicated host tables (the reference)"},
    {"ZEROC_DLRM_HOST_TABLES", 1, 0, 1152921504606846976.0, "bytes: the DLRM trainer's tables above this on a rank live in host memory, 0 (default) = none"},
    {"ZEROC_EXPORT_SHARD_BYTES", 1, 1, 1152921504606846976.0, "bytes: a save_pretrained export above this is cut into model-0000k-of-0000n.safetensors shards of at most this (default 5000000000, transformers' 5GB)"},
    {"ZEROC_CP_OVERLAP", 1, 0, 1, "1 overlaps the ring's K/V hops with attention, 0 waits for each first"},
};

static const knob_t *knob_of(const char *name) {
  for (size_t i = 0; i < sizeof KNOBS / sizeof KNOBS[0]; i++)
    if (!strcmp(KNOBS[i].name, name)) return &KNOBS[i];
  return NULL;
}

/* Parses `name`'s value as the knob says; *set is 0 when unset or empty. */
static zeroc_result_t read_knob(const char *name, double *x, long long *ix, int *set) {
  *set = 0;
  const knob_t *k = knob_of(name);
  if (!k)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "environment knob %s is not in env.c's table", name);
  const char *v = getenv(name);
  if (!v || !*v) return ZEROC_OK;
  char *end;
  errno = 0;
  int ok;
  if (k->is_int) {
    *ix = strtoll(v, &end, 10);
    ok = !errno && end != v && !*end && (double)*ix >= k->lo && (double)*ix <= k->hi;
  } else {
    *x = strtod(v, &end);
    ok = !errno && end != v && !*end && isfinite(*x) && *x >= k->lo && *x <= k->hi;
  }
  if (!ok && k->is_int)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s='%.64s': accepted an integer %.0f to %.0f (%s)",
                      name, v, k->lo, k->hi, k->what);
  if (!ok)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s='%.64s': accepted a number %g to %g (%s)", name, v,
                      k->lo, k->hi, k->what);
  *set = 1;
  return ZEROC_OK;
}

zeroc_result_t zeroc__env_i64(const char *name, int64_t dflt, int64_t *out) {
  double x = 0;
  long long ix = 0;
  int set;
  *out = dflt;
  ZEROC_CHECK(read_knob(name, &x, &ix, &set));
  if (set && !knob_of(name)->is_int)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "environment knob %s is a number, read as an integer",
                      name);
  if (set) {
    ZINFO(ENV, "%s set by environment to %lld", name, ix);
    *out = ix;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__env_f64(const char *name, double dflt, double *out) {
  double x = 0;
  long long ix = 0;
  int set;
  *out = dflt;
  ZEROC_CHECK(read_knob(name, &x, &ix, &set));
  if (set) {
    if (knob_of(name)->is_int) x = (double)ix;
    ZINFO(ENV, "%s set by environment to %g", name, x);
    *out = x;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__env_check_all(void) {
  for (size_t i = 0; i < sizeof KNOBS / sizeof KNOBS[0]; i++) {
    double x;
    long long ix;
    int set;
    ZEROC_CHECK(read_knob(KNOBS[i].name, &x, &ix, &set));
  }
  return ZEROC_OK;
}

const char *zeroc__env_str(const char *name, const char *dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  ZINFO(ENV, "%s set by environment to '%s'", name, v);
  return v;
}
