/*
 * tests/cuda_emu/emu_stubs.cpp - the few zeroc core functions the cuda kernels call,
 * for the programs that run them on the CPU emulation (nothing of libzeroc is linked).
 */
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_runtime.h"
#include "kernels/cuda/cuda_kernels.h"
#include "zeroc/types.h"

thread_local char g_err[1024];

extern "C" {
zeroc_result_t zeroc__fail(zeroc_result_t r, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(g_err, sizeof g_err, "%s:%d: ", file, line);
  vsnprintf(g_err + n, sizeof g_err - n, fmt, ap);
  va_end(ap);
  return r;
}
const char *zeroc__tls_error(void) { return g_err; }
zeroc_result_t zeroc__env_i64(const char *name, int64_t dflt, int64_t *out) {
  const char *v = getenv(name);
  *out = v ? atoll(v) : dflt;
  return ZEROC_OK;
}
const char *zeroc_dtype_name(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? "fp32" : dt == ZEROC_BF16 ? "bf16" : "?";
}
size_t zeroc_dtype_size(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? 4 : dt == ZEROC_BF16 ? 2 : 0;
}
void *zeroc_stream_native(zeroc_stream_t *) { return nullptr; }
zeroc_result_t zeroc__device_alloc(const zeroc__devmem_t *, zeroc_memkind_t, zeroc_memtag_t,
                                   size_t bytes, void **p) {
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*p) memset(*p, 0xff, bytes); /* like fresh device memory: not zeros */
  return *p ? ZEROC_OK : ZEROC_ERR_NOMEM;
}
void zeroc__device_free(const zeroc__devmem_t *, void *p) { free(p); }
}
