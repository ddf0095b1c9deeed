/*
 * zeroc/device.h - memory, streams and events on the context's device.
 *
 * The cpu backend runs a stream as a worker thread with a FIFO queue (the
 * default compute stream runs inline on the calling thread) and an event as a
 * counter; the cuda backend maps them to cudaStream_t and cudaEvent_t.
 * Work on one stream runs in order; an event orders work across streams.
 * A NULL context, stream, event or buffer (of a copy or set of > 0 bytes) is
 * refused with ZEROC_ERR_INVALID_ARG and a one-line message; the destroys and
 * zeroc_mem_free take NULL and do nothing.
 */
#ifndef ZEROC_DEVICE_H
#define ZEROC_DEVICE_H

#include <stddef.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zeroc_stream zeroc_stream_t;
typedef struct zeroc_event zeroc_event_t;

/*
 * Allocates `bytes` of memory of `kind`, tagged `tag` in the accountant.
 * Device and pinned memory are 256-byte aligned, host memory 64-byte aligned.
 * Returns ZEROC_ERR_NOMEM (naming the size, kind and tag), ZEROC_ERR_INVALID_ARG.
 */
ZEROC_API zeroc_result_t zeroc_mem_alloc(zeroc_ctx_t *ctx, zeroc_memkind_t kind, zeroc_memtag_t tag,
                                         size_t bytes, void **ptr);
/* Frees memory from zeroc_mem_alloc. free(NULL) does nothing. */
ZEROC_API void zeroc_mem_free(zeroc_ctx_t *ctx, void *ptr);

/* The compute stream of the context (inline on cpu). Not to be destroyed. */
ZEROC_API zeroc_stream_t *zeroc_ctx_compute_stream(zeroc_ctx_t *ctx);

/*
 * Creates a stream. priority: 0 normal, 1 high (cuda: stream priority).
 * Returns ZEROC_ERR_NOMEM, ZEROC_ERR_CUDA, ZEROC_ERR_INTERNAL (thread creation).
 */
ZEROC_API zeroc_result_t zeroc_stream_create(zeroc_ctx_t *ctx, int priority, zeroc_stream_t **s);
/* Waits for the stream's work, then frees it. destroy(NULL) does nothing. */
ZEROC_API void zeroc_stream_destroy(zeroc_stream_t *s);
/* Blocks until all work enqueued on `s` has run. Returns the first error any of
 * that work reported (sticky until the stream is destroyed). */
ZEROC_API zeroc_result_t zeroc_stream_sync(zeroc_stream_t *s);
/* The backend handle: cudaStream_t on cuda, NULL on cpu. */
ZEROC_API void *zeroc_stream_native(zeroc_stream_t *s);
/* Enqueues a host function in stream order. */
ZEROC_API zeroc_result_t zeroc_stream_launch_host(zeroc_stream_t *s, void (*fn)(void *), void *arg);
/* Copies `bytes` in stream order (any direction between host and device). */
ZEROC_API zeroc_result_t zeroc_memcpy_async(zeroc_stream_t *s, void *dst, const void *src,
                                            size_t bytes);
/* Sets `bytes` to `value` in stream order. */
ZEROC_API zeroc_result_t zeroc_memset_async(zeroc_stream_t *s, void *dst, int value, size_t bytes);

ZEROC_API zeroc_result_t zeroc_event_create(zeroc_ctx_t *ctx, zeroc_event_t **e);
ZEROC_API void zeroc_event_destroy(zeroc_event_t *e);
/* Captures the work enqueued on `s` so far; the event completes when it has run. */
ZEROC_API zeroc_result_t zeroc_event_record(zeroc_event_t *e, zeroc_stream_t *s);
/* Work enqueued on `s` after this call waits for `e`'s captured work. */
ZEROC_API zeroc_result_t zeroc_stream_wait_event(zeroc_stream_t *s, zeroc_event_t *e);
/* Blocks the calling thread until `e` completes; returns that work's error. */
ZEROC_API zeroc_result_t zeroc_event_sync(zeroc_event_t *e);
/* *done = 1 when `e` has completed (or was never recorded). */
ZEROC_API zeroc_result_t zeroc_event_query(zeroc_event_t *e, int *done);

#ifdef __cplusplus
}
#endif
#endif
