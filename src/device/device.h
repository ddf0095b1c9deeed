/*
 * device/device.h - the device backend table and the stream/event structs
 * shared by the cpu and cuda backends.
 *
 * A backend fills zeroc_device_ops_t. Streams and events start with the common
 * header below; each backend allocates its own larger struct around it.
 * Besides the public API, src/ can enqueue any host function with an inline
 * payload on a stream (zeroc__stream_enqueue): the mpi comm backend uses this
 * to run collectives on a stream's worker thread.
 */
#ifndef ZEROC_DEVICE_DEVICE_H
#define ZEROC_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/mem.h"
#include "zeroc/device.h"

/* C linkage for the cuda kernels (C++), which allocate their workspace here */
#ifdef __cplusplus
extern "C" {
#endif

/* An operation run in stream order; its payload is copied into the queue. */
typedef zeroc_result_t (*zeroc__op_fn)(void *payload);
#define ZEROC_OP_PAYLOAD_MAX 224

typedef struct zeroc_device zeroc_device_t;

struct zeroc_stream {
  zeroc_device_t *dev;
  int channel; /* index of this stream's duplicated communicators; 0 = compute */
  int inline_; /* work runs on the calling thread (cpu compute stream) */
  void *native; /* cudaStream_t on cuda */
  /* p2p streams: the way their messages go round the group's ring, +1 (sent to
   * rank+1, received from rank-1) or -1; 0: any peer (zeroc__stream_create_p2p) */
  int p2p_dir;
  /* The comm backend's state for this stream (the staged backend's worker and
   * staging buffers), made on first use; zeroc_stream_destroy calls
   * comm_free(s) before the stream goes. */
  void *comm;
  void (*comm_free)(zeroc_stream_t *s);
};

struct zeroc_event {
  zeroc_device_t *dev;
};

typedef struct zeroc_device_ops {
  const char *name;
  /* 1: device memory is host memory (cpu), so a view across the boundary
   * (zeroc__view_host, zeroc__view_device) is the memory itself; 0 (cuda): a
   * view is a copy staged in stream order. Read by device/device.c only. */
  int host_memory;
  zeroc_result_t (*open)(zeroc_device_t *dev, int ordinal);
  void (*close)(zeroc_device_t *dev);
  zeroc_result_t (*alloc)(zeroc_device_t *dev, zeroc_memkind_t kind, size_t bytes, void **p);
  void (*free)(zeroc_device_t *dev, zeroc_memkind_t kind, void *p, size_t bytes);
  zeroc_result_t (*stream_create)(zeroc_device_t *dev, int priority, int inline_,
                                  zeroc_stream_t **s);
  void (*stream_destroy)(zeroc_stream_t *s);
  zeroc_result_t (*stream_sync)(zeroc_stream_t *s);
  zeroc_result_t (*enqueue)(zeroc_stream_t *s, zeroc__op_fn fn, const void *payload, size_t n);
  zeroc_result_t (*memcpy_async)(zeroc_stream_t *s, void *dst, const void *src, size_t n);
  zeroc_result_t (*memset_async)(zeroc_stream_t *s, void *dst, int v, size_t n);
  zeroc_result_t (*event_create)(zeroc_device_t *dev, zeroc_event_t **e);
  void (*event_destroy)(zeroc_event_t *e);
  zeroc_result_t (*event_record)(zeroc_event_t *e, zeroc_stream_t *s);
  zeroc_result_t (*stream_wait_event)(zeroc_stream_t *s, zeroc_event_t *e);
  zeroc_result_t (*event_sync)(zeroc_event_t *e);
  zeroc_result_t (*event_query)(zeroc_event_t *e, int *done);
  /* See zeroc__stream_notify and zeroc__stream_wait_value below. */
  zeroc_result_t (*notify)(zeroc_stream_t *s, void (*fn)(void *), void *arg);
  zeroc_result_t (*wait_value)(zeroc_stream_t *s, const uint32_t *flag, uint32_t v);
} zeroc_device_ops_t;

struct zeroc_device {
  const zeroc_device_ops_t *ops;
  zeroc_device_kind_t kind;
  int ordinal;
  char name[128];
  double peak_tflops_bf16; /* dense bf16 peak of one device; 0 when unknown */
  size_t total_mem;
  unsigned char uuid[16]; /* cuda: the GPU's UUID, the same for ranks sharing it; cpu: zero */
  uint64_t host_waits;    /* stream and event synchronisations so far (device.c), so a
                             test can hold the step loop to a number per step */
  int next_channel;       /* channel of the stream being created */
  unsigned channels_used; /* bit c: a live stream holds channel c */
  int huge_pages;         /* cpu: buffers of 2 MiB or more on transparent huge pages */
  void *impl;
  /* Host waits on cuda work (event/stream sync) poll with this bound (seconds;
   * 0: wait forever) and ask `health` twice a second whether the
   * communicators report an asynchronous error; on an error or the timeout they
   * call `abort_comms` (ncclCommAbort, so kernels stuck in a collective exit)
   * and fail. Set by the context. */
  double sync_timeout;
  int (*health)(void *arg, char *why, size_t n);
  void (*abort_comms)(void *arg);
  void *hook_arg;
};

extern const zeroc_device_ops_t zeroc__cpu_device_ops;
#ifdef ZEROC_HAVE_CUDA
extern const zeroc_device_ops_t zeroc__cuda_device_ops;
#endif

#ifdef ZEROC_HAVE_CUDA
/* The caching allocator behind device memory (device/pool_cuda.c): freed
 * blocks are kept per rounded size and reused, so a steady step loop makes no
 * cudaMalloc/cudaFree calls; on cudaMalloc failure the cache is released and
 * the allocation retried once. A freed block is handed out again only once
 * every live stream has passed the free (events), so frees and allocations
 * may happen at any time, work still queued on any stream notwithstanding. */
zeroc_result_t zeroc__cuda_pool_open(zeroc_device_t *dev);
void zeroc__cuda_pool_close(zeroc_device_t *dev);
zeroc_result_t zeroc__cuda_pool_alloc(zeroc_device_t *dev, size_t bytes, void **p);
void zeroc__cuda_pool_free(zeroc_device_t *dev, void *p, size_t bytes);
/* cudaMalloc calls made so far (to check the step loop makes none). */
uint64_t zeroc__cuda_pool_mallocs(zeroc_device_t *dev);
/* The device's live streams (cudaStream_t), on which a free records its events. */
zeroc_result_t zeroc__cuda_pool_stream_add(zeroc_device_t *dev, void *stream);
void zeroc__cuda_pool_stream_remove(zeroc_device_t *dev, void *stream);
#endif

/* Number of CUDA devices visible (0 without the CUDA backend or a GPU). */
int zeroc__cuda_device_count(void);

/* Makes CUDA device `ordinal` the process's current one, before MPI_Init (a
 * CUDA-aware MPI opens its context on the current device then: device 0 for
 * every rank otherwise). 0 on success; -1 without the CUDA backend, or when
 * cudaSetDevice fails (the device is then chosen after MPI starts, as before). */
int zeroc__cuda_select(int ordinal);

/* The PUs of the NUMA node(s) nearest CUDA device `ordinal` (the PCI device's
 * local CPUs, hwloc/cudart.h, widened to whole NUMA nodes) into `set`. 0, or -1
 * where that is unknown (no CUDA backend, no such device). */
struct hwloc_topology;
struct hwloc_bitmap_s;
int zeroc__cuda_near_cpuset(struct hwloc_topology *topo, int ordinal, struct hwloc_bitmap_s *set);

/* Enqueues fn(payload copy) in stream order. n <= ZEROC_OP_PAYLOAD_MAX. */
zeroc_result_t zeroc__stream_enqueue(zeroc_stream_t *s, zeroc__op_fn fn, const void *payload,
                                     size_t n);

/* Calls fn(arg) on a host thread when `s` reaches this point. fn must not block
 * or call the device API. cuda: it runs even after an earlier operation of `s`
 * failed (so a stream waiting on what fn starts cannot hang); cpu: skipped
 * then, like every later operation of a failed stream, waits included. */
zeroc_result_t zeroc__stream_notify(zeroc_stream_t *s, void (*fn)(void *), void *arg);

/* Work enqueued on `s` after this waits until (int32_t)(*flag - v) >= 0 (a
 * cyclic >=). `flag`: host memory from the device's ZEROC_MEM_PINNED
 * allocation, written by a host thread with a release store. cuda: a
 * stream memory wait (cuStreamWaitValue32), so no host thread blocks; cpu: the
 * stream's worker (the caller, on an inline stream) polls it. */
zeroc_result_t zeroc__stream_wait_value(zeroc_stream_t *s, const uint32_t *flag, uint32_t v);

/* Creates a stream with an explicit inline flag (cpu: run on the caller). */
zeroc_result_t zeroc__stream_create(zeroc_device_t *dev, int priority, int inline_,
                                    zeroc_stream_t **s);

/* Creates a stream that only sends and receives point to point (pipeline
 * activations): p2p uses ZEROC_P2P_CHANNEL's communicators, so such a stream
 * takes no collective channel and any number of them can exist. `dir` +1: it
 * only sends to rank+1 or only receives from rank-1 of the groups it is used
 * on; -1: the reverse; 0: any peer. On nccl a directed stream gets a
 * communicator of its own (comm_nccl_cuda.c), so that streams do not wait for
 * each other; each direction and side (send or receive) wants its own stream. */
zeroc_result_t zeroc__stream_create_p2p(zeroc_device_t *dev, int priority, int dir,
                                        zeroc_stream_t **s);

/* What allocating needs (the context hands it over): the device, the
 * accountant that sees every byte, and the cap on device bytes
 * (ZEROC_DEVICE_MEM_LIMIT; 0: none). */
typedef struct zeroc__devmem {
  zeroc_device_t *dev;
  zeroc__mem_t *mem;
  uint64_t limit;
} zeroc__devmem_t;

/* zeroc_mem_alloc / zeroc_mem_free on a handle: allocates on the device's
 * backend and tracks the block in the accountant under (kind, tag). Returns
 * ZEROC_ERR_INVALID_ARG (kind or tag out of range), ZEROC_ERR_NOMEM (the cap,
 * or the backend's own failure code with the bytes in use named). */
zeroc_result_t zeroc_i_device_alloc(const zeroc__devmem_t *h, zeroc_memkind_t kind,
                                    zeroc_memtag_t tag, size_t bytes, void **ptr);
/* Frees a block from zeroc_i_device_alloc; an unknown pointer is ignored with a warning. */
void zeroc_i_device_free(const zeroc__devmem_t *h, void *ptr);
/* Creates an event on the device. */
zeroc_result_t zeroc__event_create(zeroc_device_t *dev, zeroc_event_t **e);

/* ---- crossing the host/device boundary ------------------------------------------
 * The layers above never ask which device they run on: host code that reads or
 * writes device memory, and device work on host memory, go through a view.
 * Where device memory is host memory (cpu) a view is the memory itself and
 * nothing is copied; otherwise (cuda) it is a copy made in stream order. */

enum {
  ZEROC_VIEW_IN = 1,  /* the view starts with the viewed memory's bytes */
  ZEROC_VIEW_OUT = 2, /* ending the view writes it back to the viewed memory */
};

typedef struct zeroc__view {
  void *ptr;  /* the view: a host address (view_host) or a device address (view_device) */
  void *mem;  /* the memory viewed */
  size_t bytes;
  int flags;  /* ZEROC_VIEW_IN | ZEROC_VIEW_OUT */
  int to_host; /* 1: a host view of device memory; 0: a device view of host memory */
  zeroc_stream_t *s;
  int owned;        /* ptr was allocated for the view (freed by zeroc__view_end) */
  const zeroc__devmem_t *h; /* device views: where an allocated ptr came from */
} zeroc__view_t;

/* A host view of `bytes` of device memory `dev`, usable at once on the calling
 * thread: the work enqueued on `s` so far is finished first. `staging`: host
 * memory (>= bytes, pinned for speed) a copy may use; NULL: allocated here
 * and freed by zeroc__view_end. End it with zeroc__view_end (with
 * ZEROC_VIEW_OUT it writes the host bytes back and waits for that). */
zeroc_result_t zeroc__view_host(zeroc_stream_t *s, void *dev, size_t bytes, int flags,
                                void *staging, zeroc__view_t *v);

/* A device view of `bytes` of host memory `host` for work enqueued on `s`
 * after this call. `staging`: device memory (>= bytes) a copy may use, from
 * zeroc__staging_alloc; NULL: allocated from `h` (tag workspace) when a copy
 * is needed. With ZEROC_VIEW_IN the copy is enqueued on s (the caller keeps
 * `host` unchanged until s has run it). A view with neither ZEROC_VIEW_OUT nor
 * an allocated buffer needs no zeroc__view_end; otherwise zeroc__view_end
 * copies back (OUT), waits for s, and frees. */
zeroc_result_t zeroc__view_device(const zeroc__devmem_t *h, zeroc_stream_t *s, void *host, size_t bytes,
                                  int flags, void *staging, zeroc__view_t *v);

/* Ends a view (see above); a zeroed or already ended view is a no-op. */
zeroc_result_t zeroc__view_end(zeroc__view_t *v);

/* Device memory to stage host data through (tag `tag`), or *p = NULL where
 * device memory is host memory and no staging is needed. Free with
 * zeroc_mem_free (NULL is fine). */
zeroc_result_t zeroc__staging_alloc(const zeroc__devmem_t *h, zeroc_memtag_t tag, size_t bytes,
                                    void **p);

/* Copies `bytes` in `s`'s order and returns when they have arrived (host or device memory on
 * either side). The stream's earlier work is waited for first with the polled
 * wait, so a copy to or from pageable memory (which the driver may perform
 * synchronously) never blocks in the driver behind a stuck collective: only
 * the copy itself runs outside the polled wait. Per-step reads of small device
 * results use zeroc__read_back (pinned, no drain) instead. */
zeroc_result_t zeroc__memcpy_sync(zeroc_stream_t *s, void *dst, const void *src, size_t bytes);

/* Pinned host memory (tag `tag`) that small device results are read back
 * into (zeroc__read_back), or *p = NULL where device memory is host memory
 * and nothing is staged. Free with zeroc_mem_free (NULL is fine). */
zeroc_result_t zeroc__readback_alloc(const zeroc__devmem_t *h, zeroc_memtag_t tag, size_t bytes,
                                     void **p);

/* Reads `bytes` of device memory `src` into host `dst` in `s`'s order, without
 * a pageable copy and without blocking in the driver: an asynchronous copy
 * into `pinned` (>= bytes, from zeroc__readback_alloc), then `ev` recorded on
 * `s` and waited on with the device's polled wait (--comm-timeout, the
 * communicators' asynchronous errors). Where device memory is host memory
 * (pinned NULL) it waits for `s` and copies. Work on `s` after this call is
 * not waited for. */
zeroc_result_t zeroc__read_back(zeroc_stream_t *s, zeroc_event_t *ev, void *pinned, void *dst,
                                const void *src, size_t bytes);

/* zeroc__read_back in two halves, so the host can queue more work on `s` behind the
 * copy before it waits: _start queues the copy into `pinned` and records `ev` (where
 * device memory is host memory it waits for `s` and copies into `dst` at once);
 * _finish waits for `ev` with the polled wait and copies `pinned` into `dst`. Between
 * the two, `pinned` and `ev` belong to the read. */
zeroc_result_t zeroc__read_back_start(zeroc_stream_t *s, zeroc_event_t *ev, void *pinned, void *dst,
                                      const void *src, size_t bytes);
zeroc_result_t zeroc__read_back_finish(zeroc_event_t *ev, void *pinned, void *dst, size_t bytes);

#define ZEROC_MAX_CHANNELS 8
/* Point-to-point messages match only on one communicator, whatever stream each
 * side issues them on: send/recv always use this channel, told apart by tag.
 * Streams get channels 0 .. ZEROC_P2P_CHANNEL-1. */
#define ZEROC_P2P_CHANNEL (ZEROC_MAX_CHANNELS - 1)

#ifdef __cplusplus
}
#endif

#endif
