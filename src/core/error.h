/*
 * core/error.h - error text and the check macros used across src/.
 *
 * A failure is reported once, where it happens: ZEROC_FAIL formats a message
 * into the calling thread's error buffer (the file and line only into the
 * TRACE log: a user's message names values, not our sources) and returns the
 * code, which callers pass up unchanged.
 */
#ifndef ZEROC_CORE_ERROR_H
#define ZEROC_CORE_ERROR_H

/*
 * Names inside src/. The public API is zeroc_<object>_<verb> (include/zeroc/);
 * internal non-static functions and types are zeroc__* (two underscores), the
 * kernel dispatch zeroc_k_*. C++ reserves every identifier that contains a
 * double underscore, so a name that C++ code (.cu, .cuh, .cpp: the cuda kernels
 * and their CPU emulation in tests/cuda_emu) defines or spells out is zeroc_i_*
 * ("internal") instead: the cuda kernels zeroc_i_cuda_* (kernels/cuda/cuda_kernels.h)
 * and the helpers .cu code shares with C: zeroc_i_dropout_* (kernels/dropout.h),
 * zeroc_i_clip_scale (kernels/clip.h), zeroc_i_device_alloc/_free (device/device.h).
 * What C++ code reaches only through a macro or a header (zeroc__fail behind
 * ZEROC_FAIL) keeps its C name.
 */

#include <stdarg.h>

#include "zeroc/result.h"

#define ZEROC_ERRMSG_MAX 1024

zeroc_result_t zeroc__fail(zeroc_result_t r, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The calling thread's last error text ("" if none). */
const char *zeroc__tls_error(void);
/* Replaces the calling thread's error text (e.g. with a worker thread's). */
void zeroc__tls_error_set(const char *msg);
void zeroc__tls_error_clear(void);
/* Counts the calling thread's error texts: a change tells that something
 * recorded a message (a layer callback's zeroc_error_set) since a mark. */
unsigned long zeroc__tls_error_seq(void);

/* (zeroc__ctx_ret, which records this text as a context's last error, is in
 * runtime/runtime.h.) */

/* Its value is `r` itself rather than what zeroc__fail returns (the same), so
 * the compiler sees that a failure path never yields ZEROC_OK: an out
 * parameter written only on success is then not "maybe uninitialized" at
 * -O2/-O3. `r` is evaluated twice: give it no side effects. */
#define ZEROC_FAIL(r, ...) zeroc__failed(zeroc__fail((r), __FILE__, __LINE__, __VA_ARGS__), (r))
/* (a function, not a comma expression: ZEROC_FAIL may stand alone as a statement) */
static inline zeroc_result_t zeroc__failed(zeroc_result_t logged, zeroc_result_t r) {
  (void)logged;
  return r;
}

/* Returns from the enclosing function when `call` fails. */
#define ZEROC_CHECK(call)                                                                          \
  do {                                                                                             \
    zeroc_result_t zeroc_r_ = (call);                                                              \
    if (zeroc_r_ != ZEROC_OK) return zeroc_r_;                                                     \
  } while (0)

/* The short form of ZEROC_CHECK, for code that checks one call after another. */
#define CHK(call) ZEROC_CHECK(call)

/* Sets `res` and jumps to `fail` when `call` fails (one cleanup path). */
#define ZEROC_TRY(call)                                                                           \
  do {                                                                                            \
    res = (call);                                                                                 \
    if (res != ZEROC_OK) goto fail;                                                               \
  } while (0)

#endif
