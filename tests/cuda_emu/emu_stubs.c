/*
 * tests/cuda_emu/emu_stubs.c - the few zeroc core functions the cuda kernels call, and
 * what kernels/kernels.c hands them (the environment knobs), for the programs that run
 * them on the CPU emulation (nothing of libzeroc is linked). C, not C++: the core's
 * internal names contain "__", which C++ reserves (core/error.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "kernels/cuda/cuda_kernels.h"
#include "zeroc/types.h"

static _Thread_local char err[ZEROC_ERRMSG_MAX];

const char *emu_error(void) { return err; }

zeroc_result_t zeroc__fail(zeroc_result_t r, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(err, sizeof err, "%s:%d: ", file, line);
  vsnprintf(err + n, sizeof err - n, fmt, ap);
  va_end(ap);
  return r;
}
const char *zeroc__tls_error(void) { return err; }

static int64_t knob(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  return v ? atoll(v) : dflt;
}
void emu_cuda_knobs(zeroc_i_cuda_knobs_t *kn) {
  kn->scratch_mb = knob("ZEROC_CUDA_SCRATCH_MB", ZEROC_K_SCRATCH_MB_DEFAULT);
  kn->tf32 = knob("ZEROC_CUDA_TF32", 0);
  kn->flash = knob("ZEROC_CUDA_FLASH", 1);
  kn->lt_epilogue = knob("ZEROC_CUDA_LT_EPILOGUE", 1);
}

const char *zeroc_dtype_name(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? "fp32" : dt == ZEROC_BF16 ? "bf16" : "?";
}
size_t zeroc_dtype_size(zeroc_dtype_t dt) {
  return dt == ZEROC_FP32 ? 4 : dt == ZEROC_BF16 ? 2 : 0;
}
void *zeroc_stream_native(zeroc_stream_t *s) { return NULL; }
zeroc_result_t zeroc_i_device_alloc(const zeroc__devmem_t *h, zeroc_memkind_t kind,
                                    zeroc_memtag_t tag, size_t bytes, void **p) {
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*p) memset(*p, 0xff, bytes); /* like fresh device memory: not zeros */
  return *p ? ZEROC_OK : ZEROC_ERR_NOMEM;
}
void zeroc_i_device_free(const zeroc__devmem_t *h, void *p) { free(p); }
