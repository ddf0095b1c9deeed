/*
 * zeroc/result.h - the one result type every fallible zeroc call returns.
 *
 * ZEROC_OK is 0. zeroc_result_string() gives a sentence with a hint;
 * zeroc_last_error() gives the detailed message of the calling thread's (or the
 * context's) last failure: one line naming the call or the value and what is
 * accepted. The zeroc source file and line it was raised at are not part of it:
 * ZEROC_DEBUG=TRACE (with ZEROC_DEBUG_SUBSYS=ERROR, or ALL) logs them.
 *
 * The contract: a call that fails records its message in the calling thread
 * and, when it was given a context or an object made on one (a model, a GPT),
 * in that context, so zeroc_last_error(ctx) names that failure. A call that
 * succeeds leaves the recorded message as it was (as errno is left): read it
 * right after a call returned something other than ZEROC_OK. A call with no
 * context to record in (zeroc_ctx_create, the data set calls of data.h, a
 * NULL model) reports through zeroc_last_error(NULL) only.
 */
#ifndef ZEROC_RESULT_H
#define ZEROC_RESULT_H

#include "zeroc/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zeroc_result {
  ZEROC_OK = 0,
  ZEROC_ERR_INVALID_ARG = 1, /* a caller-supplied value is out of range or inconsistent */
  ZEROC_ERR_NOMEM = 2,       /* an allocation failed (device, pinned or host) */
  ZEROC_ERR_CUDA = 3,        /* a CUDA runtime / cuBLAS call failed */
  ZEROC_ERR_NCCL = 4,        /* an NCCL call failed or reported an async error */
  ZEROC_ERR_MPI = 5,         /* an MPI call failed */
  ZEROC_ERR_IO = 6,          /* a file or io_uring operation failed (errno in the message) */
  ZEROC_ERR_TIMEOUT = 7,     /* a collective or wait exceeded the communication timeout */
  ZEROC_ERR_REMOTE = 8,      /* another rank failed; this rank stopped to stay consistent */
  ZEROC_ERR_UNSUPPORTED = 9, /* the combination asked for is not supported (yet) */
  ZEROC_ERR_NUMERIC = 10,    /* non-finite values (NaN/Inf) where finite ones are required */
  ZEROC_ERR_CORRUPT = 11,    /* a file's contents are malformed or fail their checksum */
  ZEROC_ERR_NODEVICE = 12,   /* the requested device (e.g. a GPU) is not present */
  ZEROC_ERR_INTERNAL = 13,   /* a zeroc bug: please report it with the message */
  ZEROC_RESULT_COUNT
} zeroc_result_t;

/* A short sentence describing `r`, with a hint where one helps. Never NULL. */
ZEROC_API const char *zeroc_result_string(zeroc_result_t r);

/* The enum name of `r`, e.g. "ZEROC_ERR_TIMEOUT". Never NULL. */
ZEROC_API const char *zeroc_result_name(zeroc_result_t r);

/* Records a failure's message (printf-style) as the calling thread's last
 * error, what zeroc_last_error(NULL) then gives, and returns `r`: for a
 * layer's callback or a program on top of zeroc to say what went wrong in the
 * library's own channel, e.g. `return zeroc_error_set(ZEROC_ERR_IO, "read %s", p);`.
 * A callback (zeroc_layer_t.forward / .backward) that fails returns its code;
 * the engine adds the unit's index and name and the rank to the message it
 * set, "<message> (in the forward callback of unit 2 ('head') on rank 0)", and
 * records it in the model's context. A callback that fails without setting
 * one gets "... returned ZEROC_ERR_X without a message": zeroc_last_error is
 * never empty, nor an older failure's, after a failing callback. */
ZEROC_API zeroc_result_t zeroc_error_set(zeroc_result_t r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
