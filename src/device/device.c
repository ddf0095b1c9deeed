/*
 * device/device.c - the memory/stream/event API, dispatching to the device's
 * backend table and counting every allocation in the accountant. The public
 * functions that take a context unpack it in runtime/device_api.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "device/device.h"

#ifndef ZEROC_HAVE_CUDA
int zeroc__cuda_device_count(void) { return 0; }
int zeroc__cuda_select(int ordinal) {
  (void)ordinal;
  return -1;
}
int zeroc__cuda_near_cpuset(struct hwloc_topology *topo, int ordinal, struct hwloc_bitmap_s *set) {
  (void)topo, (void)ordinal, (void)set;
  return -1;
}
#endif

zeroc_result_t zeroc_i_device_alloc(const zeroc__devmem_t *h, zeroc_memkind_t kind,
                                    zeroc_memtag_t tag, size_t bytes, void **ptr) {
  *ptr = NULL;
  if ((unsigned)kind >= ZEROC_MEM_KIND_COUNT || (unsigned)tag >= ZEROC_TAG_COUNT)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_mem_alloc: kind %d / tag %d out of range",
                      (int)kind, (int)tag);
  size_t n = bytes ? bytes : 1;
  void *p = NULL;
  if (kind == ZEROC_MEM_DEVICE && h->limit) {
    zeroc_mem_stats_t st;
    zeroc__mem_stats(h->mem, &st);
    if (st.current_total[ZEROC_MEM_DEVICE] + bytes > h->limit)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM,
                        "device memory limit reached: %zu more bytes for %s on top of %llu in use "
                        "exceed ZEROC_DEVICE_MEM_LIMIT=%llu",
                        bytes, zeroc_memtag_name(tag),
                        (unsigned long long)st.current_total[ZEROC_MEM_DEVICE],
                        (unsigned long long)h->limit);
  }
  zeroc_result_t r = h->dev->ops->alloc(h->dev, kind, n, &p);
  if (r != ZEROC_OK) {
    zeroc_mem_stats_t st;
    zeroc__mem_stats(h->mem, &st);
    return ZEROC_FAIL(r, "%s (%zu bytes of %s memory for %s; %llu bytes of %s memory in use)",
                      zeroc__tls_error(), bytes, zeroc_memkind_name(kind), zeroc_memtag_name(tag),
                      (unsigned long long)st.current_total[kind], zeroc_memkind_name(kind));
  }
  r = zeroc__mem_track(h->mem, p, kind, tag, bytes);
  if (r != ZEROC_OK) {
    h->dev->ops->free(h->dev, kind, p, n);
    return r;
  }
  ZTRACE(MEM, "alloc %zu bytes %s/%s at %p", bytes, zeroc_memkind_name(kind),
         zeroc_memtag_name(tag), p);
  *ptr = p;
  return ZEROC_OK;
}

void zeroc_i_device_free(const zeroc__devmem_t *h, void *ptr) {
  if (!ptr) return;
  zeroc__mem_rec_t rec;
  if (!zeroc__mem_untrack(h->mem, ptr, &rec)) {
    ZWARN(MEM, "zeroc_mem_free(%p): pointer not allocated by zeroc_mem_alloc; ignored", ptr);
    return;
  }
  h->dev->ops->free(h->dev, (zeroc_memkind_t)rec.kind, ptr, rec.bytes ? rec.bytes : 1);
}

zeroc_result_t zeroc__stream_create(zeroc_device_t *dev, int priority, int inline_,
                                    zeroc_stream_t **s) {
  /* the lowest channel no live stream holds (destroyed streams give theirs back) */
  int c = 0;
  while (c < ZEROC_P2P_CHANNEL && (dev->channels_used >> c & 1u)) c++;
  if (c >= ZEROC_P2P_CHANNEL)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "too many streams at once: each stream that issues collectives owns a "
                      "communicator channel and all %d are in use (destroy a stream or a model "
                      "first)",
                      ZEROC_P2P_CHANNEL);
  dev->next_channel = c; /* read by the backend while it starts the stream */
  zeroc_result_t r = dev->ops->stream_create(dev, priority, inline_, s);
  if (r != ZEROC_OK) return r;
  (*s)->channel = c;
  (*s)->p2p_dir = 0;
  dev->channels_used |= 1u << c;
  return ZEROC_OK;
}

zeroc_result_t zeroc__stream_create_p2p(zeroc_device_t *dev, int priority, int dir,
                                        zeroc_stream_t **s) {
  if (dir < -1 || dir > 1)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "p2p stream direction %d: accepted -1, 0, +1", dir);
  zeroc_result_t r = dev->ops->stream_create(dev, priority, 0, s);
  if (r != ZEROC_OK) return r;
  (*s)->channel = ZEROC_P2P_CHANNEL;
  (*s)->p2p_dir = dir;
  return ZEROC_OK;
}

void zeroc_stream_destroy(zeroc_stream_t *s) {
  if (!s) return;
  zeroc_device_t *dev = s->dev;
  int c = s->channel;
  if (s->comm_free) s->comm_free(s);
  dev->ops->stream_destroy(s);
  if (c >= 0 && c < ZEROC_P2P_CHANNEL) dev->channels_used &= ~(1u << c);
}

/* The public stream and event calls check their handles (a cold branch each):
 * a NULL one is a one-line error, not a crash. */
#define NEED(x, fn)                                                                                \
  do {                                                                                             \
    if (!(x)) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, fn ": a NULL argument (needs " #x ")");     \
  } while (0)

zeroc_result_t zeroc_stream_sync(zeroc_stream_t *s) {
  NEED(s, "zeroc_stream_sync");
  __atomic_fetch_add(&s->dev->host_waits, 1, __ATOMIC_RELAXED); /* any thread may wait */
  return s->dev->ops->stream_sync(s);
}

void *zeroc_stream_native(zeroc_stream_t *s) { return s ? s->native : NULL; }

zeroc_result_t zeroc__stream_enqueue(zeroc_stream_t *s, zeroc__op_fn fn, const void *payload,
                                     size_t n) {
  if (n > ZEROC_OP_PAYLOAD_MAX)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "stream op payload %zu > %d bytes", n,
                      ZEROC_OP_PAYLOAD_MAX);
  return s->dev->ops->enqueue(s, fn, payload, n);
}

zeroc_result_t zeroc__stream_notify(zeroc_stream_t *s, void (*fn)(void *), void *arg) {
  return s->dev->ops->notify(s, fn, arg);
}

zeroc_result_t zeroc__stream_wait_value(zeroc_stream_t *s, const uint32_t *flag, uint32_t v) {
  return s->dev->ops->wait_value(s, flag, v);
}

typedef struct {
  void (*fn)(void *);
  void *arg;
} host_call_t;

static zeroc_result_t run_host_call(void *p) {
  host_call_t *c = p;
  c->fn(c->arg);
  return ZEROC_OK;
}

zeroc_result_t zeroc_stream_launch_host(zeroc_stream_t *s, void (*fn)(void *), void *arg) {
  if (!s || !fn) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_stream_launch_host: NULL argument");
  host_call_t c = {fn, arg};
  return zeroc__stream_enqueue(s, run_host_call, &c, sizeof c);
}

zeroc_result_t zeroc_memcpy_async(zeroc_stream_t *s, void *dst, const void *src, size_t bytes) {
  NEED(s, "zeroc_memcpy_async");
  if (!bytes) return ZEROC_OK;
  NEED(dst && src, "zeroc_memcpy_async");
  return s->dev->ops->memcpy_async(s, dst, src, bytes);
}

zeroc_result_t zeroc_memset_async(zeroc_stream_t *s, void *dst, int value, size_t bytes) {
  NEED(s, "zeroc_memset_async");
  if (!bytes) return ZEROC_OK;
  NEED(dst, "zeroc_memset_async");
  return s->dev->ops->memset_async(s, dst, value, bytes);
}

zeroc_result_t zeroc__event_create(zeroc_device_t *dev, zeroc_event_t **e) {
  return dev->ops->event_create(dev, e);
}
void zeroc_event_destroy(zeroc_event_t *e) {
  if (e) e->dev->ops->event_destroy(e);
}
zeroc_result_t zeroc_event_record(zeroc_event_t *e, zeroc_stream_t *s) {
  NEED(e && s, "zeroc_event_record");
  return e->dev->ops->event_record(e, s);
}
zeroc_result_t zeroc_stream_wait_event(zeroc_stream_t *s, zeroc_event_t *e) {
  NEED(s && e, "zeroc_stream_wait_event");
  return s->dev->ops->stream_wait_event(s, e);
}
zeroc_result_t zeroc_event_sync(zeroc_event_t *e) {
  NEED(e, "zeroc_event_sync");
  __atomic_fetch_add(&e->dev->host_waits, 1, __ATOMIC_RELAXED);
  return e->dev->ops->event_sync(e);
}
zeroc_result_t zeroc_event_query(zeroc_event_t *e, int *done) {
  NEED(e && done, "zeroc_event_query");
  return e->dev->ops->event_query(e, done);
}

/* ---- views across the host/device boundary ---------------------------------------- */

zeroc_result_t zeroc__memcpy_sync(zeroc_stream_t *s, void *dst, const void *src, size_t bytes) {
  ZEROC_CHECK(zeroc_stream_sync(s)); /* polled: the copy then waits for nothing upstream */
  ZEROC_CHECK(zeroc_memcpy_async(s, dst, src, bytes));
  return zeroc_stream_sync(s);
}

zeroc_result_t zeroc__staging_alloc(const zeroc__devmem_t *h, zeroc_memtag_t tag, size_t bytes,
                                    void **p) {
  *p = NULL;
  if (h->dev->ops->host_memory) return ZEROC_OK;
  return zeroc_i_device_alloc(h, ZEROC_MEM_DEVICE, tag, bytes, p);
}

zeroc_result_t zeroc__readback_alloc(const zeroc__devmem_t *h, zeroc_memtag_t tag, size_t bytes,
                                     void **p) {
  *p = NULL;
  if (h->dev->ops->host_memory) return ZEROC_OK;
  return zeroc_i_device_alloc(h, ZEROC_MEM_PINNED, tag, bytes, p);
}

zeroc_result_t zeroc__read_back_start(zeroc_stream_t *s, zeroc_event_t *ev, void *pinned, void *dst,
                                      const void *src, size_t bytes) {
  if (!pinned) {
    if (!s->dev->ops->host_memory)
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "read back of %zu device bytes with no pinned staging",
                        bytes);
    ZEROC_CHECK(zeroc_stream_sync(s));
    memcpy(dst, src, bytes);
    return ZEROC_OK;
  }
  ZEROC_CHECK(zeroc_memcpy_async(s, pinned, src, bytes));
  return zeroc_event_record(ev, s);
}

zeroc_result_t zeroc__read_back_finish(zeroc_event_t *ev, void *pinned, void *dst, size_t bytes) {
  if (!pinned) return ZEROC_OK;      /* copied by _start */
  ZEROC_CHECK(zeroc_event_sync(ev)); /* polled on cuda: never a blocking wait in the driver */
  memcpy(dst, pinned, bytes);
  return ZEROC_OK;
}

zeroc_result_t zeroc__read_back(zeroc_stream_t *s, zeroc_event_t *ev, void *pinned, void *dst,
                                const void *src, size_t bytes) {
  ZEROC_CHECK(zeroc__read_back_start(s, ev, pinned, dst, src, bytes));
  return zeroc__read_back_finish(ev, pinned, dst, bytes);
}

zeroc_result_t zeroc__view_host(zeroc_stream_t *s, void *dev, size_t bytes, int flags,
                                void *staging, zeroc__view_t *v) {
  *v = (zeroc__view_t){.ptr = dev, .mem = dev, .bytes = bytes, .flags = flags, .to_host = 1, .s = s};
  ZEROC_CHECK(zeroc_stream_sync(s)); /* the host reads what the stream wrote */
  if (s->dev->ops->host_memory) return ZEROC_OK;
  v->ptr = staging;
  if (!staging) {
    v->ptr = malloc(bytes ? bytes : 1);
    if (!v->ptr) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "host view of %zu bytes", bytes);
    v->owned = 1;
  }
  if (flags & ZEROC_VIEW_IN) return zeroc__memcpy_sync(s, v->ptr, dev, bytes);
  return ZEROC_OK;
}

zeroc_result_t zeroc__view_device(const zeroc__devmem_t *h, zeroc_stream_t *s, void *host, size_t bytes,
                                  int flags, void *staging, zeroc__view_t *v) {
  *v = (zeroc__view_t){.ptr = host, .mem = host, .bytes = bytes, .flags = flags, .s = s};
  if (s->dev->ops->host_memory) return ZEROC_OK;
  v->ptr = staging;
  if (!staging) {
    ZEROC_CHECK(zeroc_i_device_alloc(h, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, bytes, &v->ptr));
    v->owned = 1;
    v->h = h;
  }
  if (flags & ZEROC_VIEW_IN) return zeroc_memcpy_async(s, v->ptr, host, bytes);
  return ZEROC_OK;
}

zeroc_result_t zeroc__view_end(zeroc__view_t *v) {
  zeroc_result_t r = ZEROC_OK;
  if (!v->s) return ZEROC_OK;
  if (v->ptr != v->mem && (v->flags & ZEROC_VIEW_OUT)) {
    r = zeroc_memcpy_async(v->s, v->mem, v->ptr, v->bytes);
    if (!r) r = zeroc_stream_sync(v->s);
  } else if (v->owned || (v->flags & ZEROC_VIEW_OUT)) {
    r = zeroc_stream_sync(v->s); /* the view's last user is done before it goes */
  }
  if (v->owned && v->to_host) free(v->ptr);
  else if (v->owned)
    zeroc_i_device_free(v->h, v->ptr);
  *v = (zeroc__view_t){0};
  return r;
}
