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
  if (!ctx || !ptr) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_mem_alloc: NULL ctx or ptr");
  return zeroc__ctx_ret(ctx, zeroc_i_device_alloc(&ctx->devmem, kind, tag, bytes, ptr));
}

void zeroc_mem_free(zeroc_ctx_t *ctx, void *ptr) {
  if (!ptr || !ctx) return;
  zeroc_i_device_free(&ctx->devmem, ptr);
}

zeroc_stream_t *zeroc_ctx_compute_stream(zeroc_ctx_t *ctx) { return ctx ? ctx->compute : NULL; }

zeroc_result_t zeroc_stream_create(zeroc_ctx_t *ctx, int priority, zeroc_stream_t **s) {
  if (!ctx || !s) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_stream_create: NULL argument");
  return zeroc__ctx_ret(ctx, zeroc__stream_create(&ctx->dev, priority, 0, s));
}

zeroc_result_t zeroc_event_create(zeroc_ctx_t *ctx, zeroc_event_t **e) {
  return zeroc__ctx_ret(ctx, zeroc__event_create(&ctx->dev, e));
}
