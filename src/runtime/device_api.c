/*
 * runtime/device_api.c - the public memory, stream and event functions that
 * take a context: each unpacks the context into the device layer's narrow
 * handles (device/device.h) and records a failure as the context's last
 * error (zeroc__ctx_ret).
 */
#include "core/error.h"
#include "device/device.h"
#include "runtime/context.h"

zeroc_result_t zeroc_mem_alloc(zeroc_ctx_t *ctx, zeroc_memkind_t kind, zeroc_memtag_t tag,
                               size_t bytes, void **ptr) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_mem_alloc"));
  if (!ptr)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_mem_alloc: ptr is NULL"));
  return zeroc__ctx_ret(ctx, zeroc_i_device_alloc(&ctx->devmem, kind, tag, bytes, ptr));
}

void zeroc_mem_free(zeroc_ctx_t *ctx, void *ptr) {
  /* a context zeroc_ctx_destroy left to its models still frees their memory */
  if (!ptr || !ctx || ctx->magic != ZEROC__CTX_MAGIC) return;
  zeroc_i_device_free(&ctx->devmem, ptr);
}

zeroc_stream_t *zeroc_ctx_compute_stream(zeroc_ctx_t *ctx) {
  return zeroc__ctx_check(ctx, "zeroc_ctx_compute_stream") ? NULL : ctx->compute;
}

zeroc_result_t zeroc_stream_create(zeroc_ctx_t *ctx, int priority, zeroc_stream_t **s) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_stream_create"));
  if (!s)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_stream_create: s is NULL"));
  return zeroc__ctx_ret(ctx, zeroc__stream_create(&ctx->dev, priority, 0, s));
}

zeroc_result_t zeroc_event_create(zeroc_ctx_t *ctx, zeroc_event_t **e) {
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_event_create"));
  if (!e)
    return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_event_create: e is NULL"));
  return zeroc__ctx_ret(ctx, zeroc__event_create(&ctx->dev, e));
}
