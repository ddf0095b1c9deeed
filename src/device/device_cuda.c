/*
 * device/device_cuda.c - the cuda device backend (compiled only with CUDA).
 *
 * Device memory comes from a caching pool (device/pool_cuda.c) so the step
 * loop never calls cudaMalloc/cudaFree; pinned host memory from
 * cudaMallocHost. Streams and events are cudaStream_t (with priorities) and
 * cudaEvent_t (timing disabled). Host operations enqueued on a stream run
 * through cudaLaunchHostFunc; their failures are kept as the stream's sticky
 * error and returned by the next synchronisation.
 */
#include <cuda.h> /* types of the one driver call, found at run time (no libcuda link) */
#include <cuda_runtime.h>
#include <hwloc.h>
#include <hwloc/cudart.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "device/device.h"

#define CUDA_TRY(call)                                                                            \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess)                                                                        \
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "%s failed: %s (%s)", #call, cudaGetErrorString(e_),      \
                        cudaGetErrorName(e_));                                                    \
  } while (0)

typedef struct cuda_stream {
  struct zeroc_stream base;
  cudaStream_t s;
  pthread_mutex_t mu;
  zeroc_result_t err;
  char errmsg[ZEROC_ERRMSG_MAX];
} cuda_stream_t;

typedef struct cuda_event {
  struct zeroc_event base;
  cudaEvent_t e;
  cuda_stream_t *s; /* stream it was last recorded on, for its sticky error */
} cuda_event_t;

int zeroc__cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear: no driver or no device */
    return 0;
  }
  return n;
}

int zeroc__cuda_select(int ordinal) {
  if (cudaSetDevice(ordinal) != cudaSuccess) {
    cudaGetLastError(); /* clear: the choice after MPI_Init reports it */
    return -1;
  }
  return 0;
}

int zeroc__cuda_near_cpuset(struct hwloc_topology *topo, int ordinal, struct hwloc_bitmap_s *set) {
  if (ordinal < 0 || ordinal >= zeroc__cuda_device_count()) return -1;
  if (hwloc_cudart_get_device_cpuset(topo, ordinal, set) != 0 || hwloc_bitmap_iszero(set)) {
    cudaGetLastError();
    return -1;
  }
  /* whole NUMA nodes: sysfs' local_cpus is the node's, but say so whatever it gives */
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  hwloc_cpuset_to_nodeset(topo, set, nodes);
  if (!hwloc_bitmap_iszero(nodes)) hwloc_cpuset_from_nodeset(topo, set, nodes);
  hwloc_bitmap_free(nodes);
  hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
  return hwloc_bitmap_iszero(set) ? -1 : 0;
}

/* Dense bf16 tensor-core peak (TFLOP/s) by device name, for MFU. Leads from
 * the vendors' datasheets; ZEROC_PEAK_TFLOPS overrides. */
static double peak_bf16_tflops(const char *name) {
  static const struct {
    const char *key;
    double tflops;
  } table[] = {
      {"H200", 989.4}, {"H100 PCIe", 756.0}, {"H100", 989.4}, {"H800", 989.4},
      {"GH200", 989.4}, {"B200", 2250.0},    {"A100", 312.0}, {"A800", 312.0},
      {"L40S", 362.0},  {"A10", 125.0},      {"L4", 121.0},   {"RTX 4090", 165.2},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strstr(name, table[i].key)) return table[i].tflops;
  return 0;
}

static zeroc_result_t cuda_open(zeroc_device_t *dev, int ordinal) {
  CUDA_TRY(cudaSetDevice(ordinal));
  struct cudaDeviceProp prop;
  CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  dev->kind = ZEROC_DEVICE_CUDA;
  dev->ordinal = ordinal;
  snprintf(dev->name, sizeof dev->name, "%s", prop.name);
  dev->total_mem = prop.totalGlobalMem;
  memcpy(dev->uuid, prop.uuid.bytes, sizeof dev->uuid);
  dev->peak_tflops_bf16 = peak_bf16_tflops(prop.name);
  ZINFO(DEVICE, "cuda device %d: %s, %d SMs, %.1f GiB, peak bf16 %.0f TFLOP/s", ordinal,
        prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0,
        dev->peak_tflops_bf16);
  return zeroc__cuda_pool_open(dev);
}

static void cuda_close(zeroc_device_t *dev) { zeroc__cuda_pool_close(dev); }

static zeroc_result_t cuda_alloc(zeroc_device_t *dev, zeroc_memkind_t kind, size_t bytes,
                                 void **p) {
  switch (kind) {
  case ZEROC_MEM_DEVICE: return zeroc__cuda_pool_alloc(dev, bytes, p);
  case ZEROC_MEM_PINNED: CUDA_TRY(cudaMallocHost(p, bytes)); return ZEROC_OK;
  default: {
    size_t n = (bytes + 63) / 64 * 64;
    *p = aligned_alloc(64, n);
    if (!*p) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "aligned_alloc(64, %zu) failed", n);
    return ZEROC_OK;
  }
  }
}

static void cuda_free(zeroc_device_t *dev, zeroc_memkind_t kind, void *p, size_t bytes) {
  switch (kind) {
  case ZEROC_MEM_DEVICE: zeroc__cuda_pool_free(dev, p, bytes); break;
  case ZEROC_MEM_PINNED: cudaFreeHost(p); break;
  default: free(p); break;
  }
}

static zeroc_result_t cuda_stream_create(zeroc_device_t *dev, int priority, int inline_,
                                         zeroc_stream_t **out) {
  (void)inline_; /* cuda streams are always asynchronous */
  int lo = 0, hi = 0;
  CUDA_TRY(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cuda_stream_t *s = calloc(1, sizeof *s);
  if (!s) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "stream struct");
  cudaError_t e = cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking, priority ? hi : lo);
  if (e != cudaSuccess) {
    free(s);
    return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaStreamCreateWithPriority: %s", cudaGetErrorString(e));
  }
  zeroc_result_t r = zeroc__cuda_pool_stream_add(dev, s->s);
  if (r != ZEROC_OK) {
    cudaStreamDestroy(s->s);
    free(s);
    return r;
  }
  pthread_mutex_init(&s->mu, NULL);
  s->base.dev = dev;
  s->base.native = s->s;
  *out = &s->base;
  return ZEROC_OK;
}

/* Waits for an event or a stream without blocking in the driver, so that a
 * collective whose peer died cannot hang the host: polls, checks the
 * communicators' asynchronous errors, and gives up at the timeout. */
static zeroc_result_t poll_wait(zeroc_device_t *dev, cudaEvent_t ev, cudaStream_t st, const char *what) {
  double t0 = zeroc__now_s(), next = t0 + 0.5;
  long ns = 2000;
  for (;;) {
    cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(st);
    if (e == cudaSuccess) return ZEROC_OK;
    if (e != cudaErrorNotReady)
      return ZEROC_FAIL(ZEROC_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 500000) ns += ns / 2;
    double t = zeroc__now_s();
    if (t < next) continue;
    next = t + 0.5;
    char why[512];
    if (dev->health && dev->health(dev->hook_arg, why, sizeof why)) {
      if (dev->abort_comms) dev->abort_comms(dev->hook_arg);
      return ZEROC_FAIL(ZEROC_ERR_NCCL, "%s: %s; communicators aborted", what, why);
    }
    if (dev->sync_timeout > 0 && t - t0 > dev->sync_timeout) {
      if (dev->abort_comms) dev->abort_comms(dev->hook_arg);
      return ZEROC_FAIL(ZEROC_ERR_TIMEOUT,
                        "%s did not complete within %.0f s (a collective waiting for a dead or "
                        "stuck peer); communicators aborted",
                        what, dev->sync_timeout);
    }
  }
}

static zeroc_result_t sticky(cuda_stream_t *s) {
  pthread_mutex_lock(&s->mu);
  zeroc_result_t r = s->err;
  if (r) zeroc__tls_error_set(s->errmsg);
  pthread_mutex_unlock(&s->mu);
  return r;
}

static zeroc_result_t cuda_stream_sync(zeroc_stream_t *bs) {
  cuda_stream_t *s = (cuda_stream_t *)bs;
  ZEROC_CHECK(poll_wait(bs->dev, NULL, s->s, "cuda stream synchronisation"));
  return sticky(s);
}

static void cuda_stream_destroy(zeroc_stream_t *bs) {
  cuda_stream_t *s = (cuda_stream_t *)bs;
  cudaStreamSynchronize(s->s);
  zeroc__cuda_pool_stream_remove(bs->dev, s->s);
  cudaStreamDestroy(s->s);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

typedef struct {
  cuda_stream_t *s;
  zeroc__op_fn fn;
  _Alignas(16) unsigned char payload[ZEROC_OP_PAYLOAD_MAX];
} host_op_t;

static void CUDART_CB run_host_op(void *arg) {
  host_op_t *op = arg;
  pthread_mutex_lock(&op->s->mu);
  zeroc_result_t failed = op->s->err;
  pthread_mutex_unlock(&op->s->mu);
  if (!failed) {
    zeroc_result_t r = op->fn(op->payload);
    if (r) {
      pthread_mutex_lock(&op->s->mu);
      if (!op->s->err) {
        op->s->err = r;
        snprintf(op->s->errmsg, sizeof op->s->errmsg, "%s", zeroc__tls_error());
      }
      pthread_mutex_unlock(&op->s->mu);
    }
  }
  free(op);
}

static zeroc_result_t cuda_enqueue(zeroc_stream_t *bs, zeroc__op_fn fn, const void *payload,
                                   size_t n) {
  cuda_stream_t *s = (cuda_stream_t *)bs;
  host_op_t *op = malloc(sizeof *op);
  if (!op) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "host op");
  op->s = s;
  op->fn = fn;
  memcpy(op->payload, payload, n);
  cudaError_t e = cudaLaunchHostFunc(s->s, run_host_op, op);
  if (e != cudaSuccess) {
    free(op);
    return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaLaunchHostFunc: %s", cudaGetErrorString(e));
  }
  return ZEROC_OK;
}

static zeroc_result_t cuda_memcpy_async(zeroc_stream_t *bs, void *dst, const void *src, size_t n) {
  CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, ((cuda_stream_t *)bs)->s));
  return ZEROC_OK;
}

static zeroc_result_t cuda_memset_async(zeroc_stream_t *bs, void *dst, int v, size_t n) {
  CUDA_TRY(cudaMemsetAsync(dst, v, n, ((cuda_stream_t *)bs)->s));
  return ZEROC_OK;
}

static zeroc_result_t cuda_event_create(zeroc_device_t *dev, zeroc_event_t **out) {
  cuda_event_t *e = calloc(1, sizeof *e);
  if (!e) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "event struct");
  cudaError_t ce = cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming);
  if (ce != cudaSuccess) {
    free(e);
    return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaEventCreateWithFlags: %s", cudaGetErrorString(ce));
  }
  e->base.dev = dev;
  *out = &e->base;
  return ZEROC_OK;
}

static void cuda_event_destroy(zeroc_event_t *be) {
  cuda_event_t *e = (cuda_event_t *)be;
  cudaEventDestroy(e->e);
  free(e);
}

static zeroc_result_t cuda_event_record(zeroc_event_t *be, zeroc_stream_t *bs) {
  cuda_event_t *e = (cuda_event_t *)be;
  e->s = (cuda_stream_t *)bs;
  CUDA_TRY(cudaEventRecord(e->e, e->s->s));
  return ZEROC_OK;
}

static zeroc_result_t cuda_stream_wait_event(zeroc_stream_t *bs, zeroc_event_t *be) {
  cuda_event_t *e = (cuda_event_t *)be;
  CUDA_TRY(cudaStreamWaitEvent(((cuda_stream_t *)bs)->s, e->e, 0));
  return ZEROC_OK;
}

static zeroc_result_t cuda_event_sync(zeroc_event_t *be) {
  cuda_event_t *e = (cuda_event_t *)be;
  ZEROC_CHECK(poll_wait(be->dev, e->e, NULL, "cuda event synchronisation"));
  return e->s ? sticky(e->s) : ZEROC_OK;
}

static zeroc_result_t cuda_event_query(zeroc_event_t *be, int *done) {
  cuda_event_t *e = (cuda_event_t *)be;
  cudaError_t ce = cudaEventQuery(e->e);
  if (ce == cudaErrorNotReady) {
    *done = 0;
    return ZEROC_OK;
  }
  if (ce != cudaSuccess) return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaEventQuery: %s", cudaGetErrorString(ce));
  *done = 1;
  return ZEROC_OK;
}

/* ---- host signals (the staged comm backend) ----------------------------------- */

/* cudaLaunchHostFunc directly, not through run_host_op: it must run even after
 * an earlier operation of the stream failed. */
static zeroc_result_t cuda_notify(zeroc_stream_t *bs, void (*fn)(void *), void *arg) {
  CUDA_TRY(cudaLaunchHostFunc(((cuda_stream_t *)bs)->s, fn, arg));
  return ZEROC_OK;
}

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_value32_fn wait_value32;
static pthread_once_t wait_value32_once = PTHREAD_ONCE_INIT;
static cudaError_t wait_value32_err;
static enum cudaDriverEntryPointQueryResult wait_value32_q;

static void find_wait_value32(void) {
  void *p = NULL;
  wait_value32_err =
      cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &p, 12000, cudaEnableDefault,
                                       &wait_value32_q);
  if (wait_value32_err == cudaSuccess && wait_value32_q == cudaDriverEntryPointSuccess)
    wait_value32 = (wait_value32_fn)p;
}

/* A stream memory wait: the GPU's front end polls the pinned flag, so neither
 * a host thread nor an SM is held while the staged collective runs. */
static zeroc_result_t cuda_wait_value(zeroc_stream_t *bs, const uint32_t *flag, uint32_t v) {
  pthread_once(&wait_value32_once, find_wait_value32);
  if (!wait_value32)
    return ZEROC_FAIL(ZEROC_ERR_CUDA,
                      "cudaGetDriverEntryPointByVersion(cuStreamWaitValue32): %s, query result "
                      "%d (the staged comm backend needs the driver's stream memory operations)",
                      cudaGetErrorString(wait_value32_err), (int)wait_value32_q);
  /* with unified addressing a pinned allocation's host address is its device
   * address too; ask first, in case the platform says otherwise */
  void *d = NULL;
  if (cudaHostGetDevicePointer(&d, (void *)flag, 0) != cudaSuccess) {
    cudaGetLastError();
    d = (void *)flag;
  }
  CUresult r = wait_value32((CUstream)((cuda_stream_t *)bs)->s, (CUdeviceptr)(uintptr_t)d, v,
                            CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS)
    return ZEROC_FAIL(ZEROC_ERR_CUDA,
                      "cuStreamWaitValue32 on pinned flag %p (value %u): CUresult %d",
                      (const void *)flag, v, (int)r);
  return ZEROC_OK;
}

const zeroc_device_ops_t zeroc__cuda_device_ops = {
    .name = "cuda",
    .host_memory = 0,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .enqueue = cuda_enqueue,
    .memcpy_async = cuda_memcpy_async,
    .memset_async = cuda_memset_async,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .notify = cuda_notify,
    .wait_value = cuda_wait_value,
};
