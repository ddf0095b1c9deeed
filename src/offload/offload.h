/*
 * offload/offload.h - the offload I/O layer (internal): a pool of page-aligned,
 * NUMA-local pinned host buffers, the NVMe swapper (io_uring, O_DIRECT) and the
 * per-unit (master, m, v) state that lives in pinned memory or on the swapper.
 *
 * The sharding engine keeps each unit's fp32 master and Adam moments here and
 * pipelines them: read unit i+1 and write back unit i-1 while unit i updates.
 */
#ifndef ZEROC_OFFLOAD_OFFLOAD_H
#define ZEROC_OFFLOAD_OFFLOAD_H

#include <hwloc.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mem.h"
#include "zeroc/mem.h"
#include "zeroc/result.h"
#include "zeroc/types.h" /* zeroc_device_kind_t */

/* O_DIRECT wants buffers, offsets and lengths aligned to the device's logical
 * block; 4 KiB covers 512-byte and 4Kn NVMe namespaces alike. */
#define ZEROC_OFFLOAD_ALIGN 4096u

/* ==========================================================================
 * Pinned-buffer pool
 *
 * Buffers are multiples of 4 KiB, 4 KiB-aligned, bound to the rank's NUMA node
 * (hwloc) when it is known, page-locked for the GPU (cudaHostRegister) on the
 * cuda device, and counted as ZEROC_MEM_PINNED in the context's accountant.
 * A put buffer is cached in its size class and handed out again by the next
 * get of that class, so a steady step loop allocates nothing. Thread-safe.
 * ========================================================================== */

typedef struct zeroc__pinned_pool zeroc__pinned_pool_t;

typedef struct zeroc__pinned_stats {
  uint64_t allocs;       /* buffers obtained from the system so far */
  uint64_t frees;        /* buffers returned to the system so far (trim, destroy) */
  uint64_t gets, hits;   /* get calls, and those served from the cache */
  uint64_t bytes_out;    /* capacity of the buffers handed out now */
  uint64_t bytes_cached; /* capacity of the cached (put) buffers */
  int numa;              /* NUMA node (OS index) buffers are bound to; -1: none */
} zeroc__pinned_stats_t;

/* The capacity a get of `bytes` (<= 2^56) returns: `bytes` rounded up to its size class
 * (4 KiB multiples; at most 12.5% above the request beyond 32 KiB). 0 for 0. */
size_t zeroc__pinned_class_size(size_t bytes);

/* What a pool needs of the rank's place; the context hands it over
 * (zeroc__ctx_pool_env, runtime/runtime.h) and it must outlive the pool. */
typedef struct zeroc__pool_env {
  zeroc__mem_t *mem;          /* the accountant pinned buffers are counted in */
  hwloc_topology_t topo;      /* NUMA-bound buffers come from here; NULL: none */
  int numa;                   /* the rank's NUMA node (OS index); -1: unknown */
  zeroc_device_kind_t device; /* cuda: buffers are page-locked for the GPU */
} zeroc__pool_env_t;

/* Creates a pool from `env` (its accountant, topology, NUMA node and device).
 * Returns ZEROC_ERR_INVALID_ARG (env NULL), ZEROC_ERR_NOMEM. */
zeroc_result_t zeroc__pinned_pool_create(const zeroc__pool_env_t *env, zeroc__pinned_pool_t **out);
/* Frees every buffer, cached or still handed out (those are reported with a
 * warning: their owner still points at them). destroy(NULL) does nothing. */
void zeroc__pinned_pool_destroy(zeroc__pinned_pool_t *p);

/* A buffer of at least `bytes` (> 0), counted under `tag`. Its capacity is
 * zeroc__pinned_class_size(bytes); contents are unspecified.
 * Returns ZEROC_ERR_INVALID_ARG (bytes 0, bad tag), ZEROC_ERR_NOMEM,
 * ZEROC_ERR_CUDA (page-locking for the GPU failed). */
zeroc_result_t zeroc__pinned_get(zeroc__pinned_pool_t *p, size_t bytes, zeroc_memtag_t tag,
                                 void **buf);
/* Gives `buf` back to its size class. Returns ZEROC_ERR_INVALID_ARG for a
 * pointer this pool did not hand out (or already took back). put(p, NULL) is OK. */
zeroc_result_t zeroc__pinned_put(zeroc__pinned_pool_t *p, void *buf);
/* Capacity of a buffer handed out by this pool, 0 if it is not one. */
size_t zeroc__pinned_capacity(zeroc__pinned_pool_t *p, const void *buf);
/* Returns all cached buffers to the system (e.g. after initialisation). */
void zeroc__pinned_trim(zeroc__pinned_pool_t *p);
void zeroc__pinned_stats(zeroc__pinned_pool_t *p, zeroc__pinned_stats_t *out);

#ifdef ZEROC_HAVE_CUDA
/* offload/pin_cuda.c: page-locks host memory for DMA to the GPU and back. */
zeroc_result_t zeroc__offload_cuda_register(void *p, size_t bytes);
void zeroc__offload_cuda_unregister(void *p);
#endif

/* ==========================================================================
 * NVMe swapper
 *
 * Files live under <dir>/<job>/rank<r>/, one file per slot (a tensor region:
 * one unit's master, m or v). One file per slot rather than one big file with
 * offsets: a slot can grow without relocating its neighbours, the file system
 * keeps each slot's extents contiguous for sequential reads, a truncated or
 * short file names the tensor it belongs to, and no free-space allocator is
 * needed inside the file. The cost is one descriptor per slot (a few hundred).
 *
 * Each slot's file space is reserved with fallocate when it is created or
 * grows, so running out of space is reported synchronously, by the call that
 * asked for the space, before any byte of the slot changes. Transfers of any
 * byte size are split into blocks of `block_bytes`; the part after the last
 * whole 4 KiB page goes through a per-ticket bounce page, so the file region is
 * padded to 4 KiB while the slot keeps its logical size and the caller's
 * buffer needs only `bytes` bytes (4 KiB-aligned start, as the pool gives).
 *
 * Threading contract: one I/O thread per swapper owns the io_uring ring and
 * keeps `queue_depth` blocks in flight across all tickets, so transfers make
 * progress while the caller computes. Every call below may be made from any
 * thread; they serialise on one mutex (never held across a system call that
 * waits for I/O). A ticket is consumed by exactly one wait, or by the poll
 * that reports it done; using it again is an error. Tickets on the same slot
 * run one after another in submission order (a read submitted after a write
 * sees that write); tickets on different slots run concurrently. Until its
 * ticket is consumed the caller must not touch a buffer being read into, nor
 * change one being written from.
 * ========================================================================== */

typedef struct zeroc__swap zeroc__swap_t;
/* A transfer in flight: (generation << 16) | index. 0 is never a ticket. */
typedef uint64_t zeroc__ticket_t;

/* Defaults chosen with benchmarks/offload_bw.sh (benchmarks/RESULTS.md,
 * "Offload I/O bandwidth (issue 6)"): on the disk measured, 1 MiB and 4 MiB
 * blocks reach the same plateau at every queue depth from 4 to 32, while
 * 128 KiB blocks read 15-30% slower. 1 MiB at depth 16 (16 MiB in flight)
 * sits inside the plateau with room on either side, and NVMe drives, whose
 * largest transfer is often 128 KiB-1 MiB, split bigger blocks anyway. */
#define ZEROC_SWAP_DEFAULT_BLOCK   (1u << 20)
#define ZEROC_SWAP_DEFAULT_QD      16
#define ZEROC_SWAP_DEFAULT_TICKETS 256

typedef struct zeroc__swap_config {
  const char *dir;    /* an existing directory (--nvme-dir) */
  const char *job;    /* job name: [A-Za-z0-9._-], 1..64 characters, not starting with '.' */
  int rank;           /* world rank (>= 0; -1: unset, refused) */
  size_t block_bytes; /* bytes per request, a 4 KiB multiple <= 64 MiB;
                         0: ZEROC_OFFLOAD_BLOCK_KIB or the default */
  int queue_depth;    /* requests in flight, 1..1024; 0: ZEROC_OFFLOAD_QD or the default */
  int max_tickets;    /* tickets outstanding at once, 1..4096; 0: 256 */
  int direct;         /* 1: O_DIRECT (buffered, with one warning, where the file
                         system refuses it); 0: buffered; -1: ZEROC_OFFLOAD_DIRECT or 1 */
  int prealloc;       /* 1: reserve slot space with fallocate; 0: do not (then a full
                         disk fails the write itself); -1: ZEROC_OFFLOAD_PREALLOC or 1 */
  int check_size;     /* 1: before a read, check the file still holds the slot
                         (a truncated file fails without touching the buffer); 0: rely
                         on the short-read check alone (tests use this) */
} zeroc__swap_config_t;

#define ZEROC__SWAP_CONFIG_INIT                                                                    \
  { NULL, NULL, -1, 0, 0, 0, -1, -1, 1 }

/*
 * Creates the rank directory <dir>/<job>/rank<r>/ (and <job>/ if needed), takes
 * an exclusive lock in it (a second swapper on the same directory fails) and
 * starts the I/O thread. `mem`: the accountant its bounce buffers are counted in
 * (NULL: not counted).
 * Returns ZEROC_ERR_INVALID_ARG (bad config, naming the field and what is
 * accepted), ZEROC_ERR_IO (directory missing, read-only, locked; io_uring
 * unavailable), ZEROC_ERR_NOMEM, ZEROC_ERR_INTERNAL (thread creation).
 */
zeroc_result_t zeroc__swap_create(zeroc__mem_t *mem, const zeroc__swap_config_t *cfg,
                                  zeroc__swap_t **out);
/* Waits for every transfer in flight, closes and removes the slot files, then
 * the rank directory and the job directory when they are empty.
 * destroy(NULL) does nothing. */
void zeroc__swap_destroy(zeroc__swap_t *sw);

/* Creates a slot whose file is `name` (NULL: "slot<k>"; same rules as a job
 * name) with `capacity` bytes reserved (0: reserve on first write).
 * Returns ZEROC_ERR_INVALID_ARG (bad or duplicate name), ZEROC_ERR_IO (open
 * failed, or no space: the message names the path, offset, size and errno). */
zeroc_result_t zeroc__swap_slot_create(zeroc__swap_t *sw, const char *name, uint64_t capacity,
                                       int *slot);
/* Closes and removes a slot's file. The slot must have no ticket outstanding
 * (ZEROC_ERR_INVALID_ARG otherwise). */
zeroc_result_t zeroc__swap_slot_destroy(zeroc__swap_t *sw, int slot);

/*
 * Submits a write of `bytes` (>= 1) from `buf` (4 KiB-aligned) replacing slot
 * `slot`'s contents; grows the slot's reserved space first when needed.
 * Returns ZEROC_ERR_INVALID_ARG (bad slot, buffer, size; too many tickets
 * outstanding), ZEROC_ERR_IO (no space to grow: nothing was written).
 * Failures of the transfer itself come from wait/poll: ZEROC_ERR_IO naming the
 * path, offset, size and errno text; the slot then holds no valid data and
 * later reads of it fail until a write succeeds. `buf` is never modified.
 */
zeroc_result_t zeroc__swap_write(zeroc__swap_t *sw, int slot, const void *buf, uint64_t bytes,
                                 zeroc__ticket_t *ticket);
/*
 * Submits a read of the first `bytes` (>= 1) of slot `slot` into `buf`
 * (4 KiB-aligned, `bytes` long: nothing past `bytes` is written).
 * Returns ZEROC_ERR_INVALID_ARG (bad slot or buffer, more bytes than the slot
 * will hold after the writes submitted before). From wait/poll: ZEROC_ERR_IO
 * for a slot whose last write failed, a file shorter than the slot (truncated
 * behind our back: the buffer is untouched when check_size is on), or a failed
 * read, naming the path, offset, size and errno text.
 */
zeroc_result_t zeroc__swap_read(zeroc__swap_t *sw, int slot, void *buf, uint64_t bytes,
                                zeroc__ticket_t *ticket);
/* Blocks until `ticket` is done; returns its result and consumes it. */
zeroc_result_t zeroc__swap_wait(zeroc__swap_t *sw, zeroc__ticket_t ticket);
/* *done = 1 and the ticket's result (consuming it) when it is done; *done = 0
 * and ZEROC_OK while it runs. ZEROC_ERR_INVALID_ARG for an unknown ticket. */
zeroc_result_t zeroc__swap_poll(zeroc__swap_t *sw, zeroc__ticket_t ticket, int *done);

/* What the swapper settled on. */
typedef struct zeroc__swap_info {
  size_t block_bytes;
  int queue_depth;
  int max_tickets;
  int direct;          /* 1 when files are opened with O_DIRECT */
  int prealloc;        /* 1 when slot space is reserved with fallocate */
  uint64_t requests;   /* requests submitted to io_uring so far */
  int max_inflight;    /* most requests in flight at once so far (<= queue_depth) */
  char rank_dir[4096]; /* <dir>/<job>/rank<r> */
} zeroc__swap_info_t;
void zeroc__swap_info(zeroc__swap_t *sw, zeroc__swap_info_t *out);
/* The path of a slot's file (NULL for a bad slot); valid until it is destroyed. */
const char *zeroc__swap_slot_path(zeroc__swap_t *sw, int slot);
/* A slot's logical size after every write submitted so far. */
uint64_t zeroc__swap_slot_size(zeroc__swap_t *sw, int slot);

/* ==========================================================================
 * Offload state: per unit, the fp32 master and Adam m and v
 *
 * In pinned memory (swap NULL) every unit has its own buffers and prefetch /
 * writeback do nothing. On the swapper each of them is a slot
 * ("u<i>.master", "u<i>.m", "u<i>.v") and a unit is resident only in one of
 * `nstage` staging sets of pinned buffers: the engine's pipeline
 *
 *   prefetch(0); for i: prefetch(i+1); wait(i) -> update -> writeback(i)
 *
 * needs 3 (i-1 being written, i updated, i+1 read). A unit never written reads
 * as zeros (Adam's initial moments; the engine fills the master). Single
 * threaded: all calls from the thread that drives the step.
 * ========================================================================== */

typedef struct zeroc__offload zeroc__offload_t;

typedef struct zeroc__offload_view {
  float *master, *m, *v; /* each (numel,) fp32 */
  size_t numel;
} zeroc__offload_view_t;

/*
 * Creates the state of `nunits` units of numel[i] fp32 elements each.
 * pool: pinned buffers (required). swap: NULL keeps everything in pinned
 * memory. nstage: staging sets on the swapper (2.., 0: 3).
 * Returns ZEROC_ERR_INVALID_ARG, ZEROC_ERR_NOMEM, ZEROC_ERR_IO (slot space).
 */
zeroc_result_t zeroc__offload_create(zeroc__pinned_pool_t *pool, zeroc__swap_t *swap, int nunits,
                                     const size_t *numel, int nstage, zeroc__offload_t **out);
/* Waits for writes in flight, removes the slots, returns the buffers. */
void zeroc__offload_destroy(zeroc__offload_t *o);
/* Starts reading unit i into a free staging set (waiting for the oldest
 * write-back to free one when needed). Resident or loading units: nothing.
 * Returns ZEROC_ERR_INVALID_ARG (bad i; every set held by a unit neither
 * written back nor released), ZEROC_ERR_IO. */
zeroc_result_t zeroc__offload_prefetch(zeroc__offload_t *o, int i);
/* Waits for unit i (prefetching it first if needed) and gives its buffers,
 * which stay valid until writeback(i). */
zeroc_result_t zeroc__offload_wait(zeroc__offload_t *o, int i, zeroc__offload_view_t *view);
/* Starts writing unit i back; its staging set is reused once that is done. */
zeroc_result_t zeroc__offload_writeback(zeroc__offload_t *o, int i);
/* Waits for every write-back in flight (e.g. before a checkpoint). */
zeroc_result_t zeroc__offload_flush(zeroc__offload_t *o);

#endif
