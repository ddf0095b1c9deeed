/*
 * kernels/attention_cudnn_cuda.c - causal attention on cuDNN's fused flash attention
 * (SDPA) through the cuDNN 9 backend graph API, in C: libcudnn.so.9 is dlopen'ed on first
 * use (no link-time dependency), one forward and one backward plan are built per shape
 * (B, T, C, NH) and cached, and zeroc's own kernels stay the fallback and the reference.
 *
 * The graphs are the composed pattern cuDNN's SDPA engines recognise (as NVIDIA's
 * cudnn-frontend lowers its SDPA node): matmul Q K^T, scale, causal mask (gen_index row,
 * gen_index column, row >= column, binary select), softmax with stats, matmul with V; the
 * backward recomputes P = exp(S - stats) and forms dV = P^T dO, dS = P (dO V^T - sum(dO*O))
 * * scale, dK = dS^T Q, dQ = dS K. The backward writes dQ straight from its matmul (no
 * fp32 dQ accumulator, whose atomics would make it non-deterministic): cuDNN then uses its
 * deterministic dP-workspace algorithm, and engines noted NONDETERMINISTIC are skipped.
 *
 * Layout (no copies): qkv (B,T,3C) is Q, K, V as [B,NH,T,HS] with strides [T*3C, HS, 3C, 1]
 * at +0, +C, +2C; out, dout (B,T,C) strides [T*C, HS, C, 1]; dqkv like qkv; lse (B,NH,T)
 * fp32 = cuDNN's stats [B,NH,T,1] = max + log(sum exp) of the scaled scores, the natural
 * log-sum-exp zeroc's kernels store, so either path's forward feeds the other's backward.
 * Workspace: zeroc__cudnn_ws's formula for the shape (attention_cudnn_ws.c, what the
 * planner predicts), carved from the kernels' reduction scratch when it fits there (same
 * stream: the ordering that makes every scratch user safe), else from a buffer of the
 * kernels object's own (tagged workspace), grown to the largest shape's. A plan asking
 * more than the formula runs anyway under auto, with a warning naming the shortfall
 * (the workspace grown to the plan's), and is refused under cudnn.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/attention_cudnn.h"
#include "kernels/cuda/cuda_kernels.h"

/* ---- what attention runs on, for zeroc_k_attention_backend ------------------------- */

/* The last finding of any bf16 cuda kernels object of the process (one GPU per process):
 * at create, at each new shape, at a failed run. */
static pthread_mutex_t g_status_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_status[320];

__attribute__((format(printf, 1, 2))) static void status_set(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&g_status_mu);
  vsnprintf(g_status, sizeof g_status, fmt, ap);
  pthread_mutex_unlock(&g_status_mu);
  va_end(ap);
}

void zeroc__cudnn_attention_describe(char *buf, size_t n) {
  if (!n) return;
  pthread_mutex_lock(&g_status_mu);
  snprintf(buf, n, "%s", g_status[0] ? g_status : "zeroc's own cuda kernels (no bf16 model yet)");
  pthread_mutex_unlock(&g_status_mu);
}

/* "disabled by the environment", saying whether that is the default. */
static void status_mode_off(void) {
  const char *v = getenv("ZEROC_CUDA_ATTENTION");
  status_set("zeroc's own cuda kernels: cuDNN disabled by ZEROC_CUDA_ATTENTION=zeroc%s",
             v && *v ? "" : " (the default)");
}

#if defined(__has_include)
#if __has_include(<cudnn_graph.h>)
#define ZC_HAVE_CUDNN_H 1
#endif
#endif

#ifndef ZC_HAVE_CUDNN_H
/* ---- built without the cuDNN headers: zeroc's kernels only --------------------------- */

typedef struct {
  zeroc__cudnn_mode_t mode;
} zc_dnn_t;

zeroc_result_t zeroc__cudnn_attention_create(zeroc_kernels_t *k) {
  zeroc__cudnn_mode_t mode;
  ZEROC_CHECK(zeroc__cudnn_mode_parse(
      zeroc__env_str("ZEROC_CUDA_ATTENTION", ZEROC_CUDA_ATTENTION_DEFAULT), &mode));
  int det = 0;
  ZEROC_CHECK(zeroc__cudnn_deterministic_knob(&det));
  zc_dnn_t *d = calloc(1, sizeof *d);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cuDNN attention state");
  d->mode = mode;
  k->cudnn = d;
  k->deterministic = det;
  if (k->dtype == ZEROC_BF16) {
    if (mode == ZEROC__CUDNN_OFF)
      status_mode_off();
    else
      status_set("zeroc's own cuda kernels: cuDNN missing (this zeroc was built without "
                 "cuDNN's headers, cudnn_graph.h)");
  }
  return ZEROC_OK;
}
void zeroc__cudnn_attention_destroy(zeroc_kernels_t *k) {
  free(k->cudnn);
  k->cudnn = NULL;
}
void zeroc__cudnn_attention_set_mode(zeroc_kernels_t *k, zeroc__cudnn_mode_t mode) {
  if (k->cudnn) ((zc_dnn_t *)k->cudnn)->mode = mode;
}
void zeroc__cudnn_attention_set_deterministic(zeroc_kernels_t *k, int on) {
  (void)k, (void)on; /* zeroc's own kernels are deterministic */
}
static zeroc_result_t no_headers(zeroc_kernels_t *k, int *done) {
  *done = 0;
  if (k->cudnn && ((zc_dnn_t *)k->cudnn)->mode == ZEROC__CUDNN_REQUIRED && k->dtype == ZEROC_BF16)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "ZEROC_CUDA_ATTENTION=cudnn: this zeroc was built "
                                             "without the cuDNN headers (cudnn_graph.h)");
  return ZEROC_OK;
}
zeroc_result_t zeroc__cudnn_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                              float *lse, const void *qkv, int B, int T, int C,
                                              int NH, const zeroc_dropout_t *drop, int *done) {
  (void)s, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH, (void)drop;
  return no_headers(k, done);
}
zeroc_result_t zeroc__cudnn_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                               const void *dout, const void *qkv, const void *out,
                                               const float *lse, int B, int T, int C, int NH,
                                               const zeroc_dropout_t *drop, unsigned flags,
                                               int *done) {
  (void)s, (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse, (void)B, (void)T, (void)C;
  (void)NH, (void)drop, (void)flags;
  return no_headers(k, done);
}
int zeroc__cudnn_attention_loaded(void) { return 0; }
size_t zeroc__cudnn_attention_ws_bytes(const zeroc_kernels_t *k) {
  (void)k;
  return 0;
}
zeroc_result_t zeroc__cudnn_probe(char *path, size_t n, long *version) {
  (void)path, (void)n;
  *version = 0;
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "built without the cuDNN headers (cudnn_graph.h)");
}

#else
/* ---- the cuDNN path ------------------------------------------------------------------ */
#include <cuda_runtime.h>

#include "kernels/attention_cudnn_impl.h"

#define ZC_DNN_SHAPES 16 /* shapes cached per kernels object (train and eval batches) */

/* The plans of one shape; each direction is decided once (built, workspace fits) and then
 * kept, so a shape always takes the same path. */
typedef struct {
  zc_dnn_shape_t sh;
  int deterministic;    /* what was asked (sh.fast may still be 0 after a fallback) */
  zeroc__cudnn_ws_t ws; /* the formula's workspace for sh and what was asked */
  int fwd_ok, bwd_ok;
  zc_dnn_plan_t fwd, bwd;
  char why_fwd[1024], why_bwd[1024]; /* why a direction is not on cuDNN */
} zc_dnn_entry_t;

/* k->cudnn. Used from the thread that launches k's kernels, like the cuBLASLt cache. */
typedef struct {
  zeroc__cudnn_mode_t mode;
  int deterministic; /* 1: the deterministic backward for shapes built from now on */
  int noted_na;      /* a call cuDNN does not take was recorded (status_set) */
  int load_tried, loaded;
  char why_load[640];
  void *ws;        /* workspace of its own when a shape needs more than the kernel scratch */
  size_t ws_bytes; /* (zeroc__cudnn_ws_own; WORKSPACE-tagged, what the planner predicts) */
  zc_dnn_api_t api;
  cudnnHandle_t handle;
  zc_dnn_entry_t *shapes[ZC_DNN_SHAPES];
  int nshapes;
} zc_dnn_t;

/* "cuDNN is not used at all" is logged once per process, not per kernels object. */
static int g_unavailable_logged;
/* A kernels object loaded cuDNN (zeroc__cudnn_attention_loaded, for train's prediction). */
static int g_loaded;

int zeroc__cudnn_attention_loaded(void) { return __atomic_load_n(&g_loaded, __ATOMIC_RELAXED); }

/* ---- loading --------------------------------------------------------------------------- */

/* Resolves `name` into *fn; required ones missing make the load fail. */
static int dnn_sym(void *lib, const char *name, void *fn, int required, char *why, size_t n) {
  void *f = dlsym(lib, name);
  memcpy(fn, &f, sizeof f); /* object -> function pointer without the ISO C warning */
  if (!f && required) {
    snprintf(why, n, "libcudnn.so.9 lacks %s (a cuDNN 9 with the backend graph API is needed)",
             name);
    return -1;
  }
  return 0;
}

/* dlopen libcudnn.so.9 and resolve the functions zeroc calls; 0 or -1 with `why`. */
static int dnn_load(zc_dnn_api_t *a, char *why, size_t n) {
  memset(a, 0, sizeof *a);
  a->lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!a->lib) {
    snprintf(why, n,
             "dlopen(libcudnn.so.9) failed: %s (put cuDNN 9's lib directory on LD_LIBRARY_PATH, "
             "e.g. /usr/local/cuda/lib64 or PyTorch's site-packages/nvidia/cudnn/lib)",
             dlerror());
    return -1;
  }
  if (dnn_sym(a->lib, "cudnnGetVersion", &a->GetVersion, 1, why, n) ||
      dnn_sym(a->lib, "cudnnGetErrorString", &a->GetErrorString, 1, why, n) ||
      dnn_sym(a->lib, "cudnnGetLastErrorString", &a->GetLastErrorString, 0, why, n) ||
      dnn_sym(a->lib, "cudnnCreate", &a->Create, 1, why, n) ||
      dnn_sym(a->lib, "cudnnDestroy", &a->Destroy, 1, why, n) ||
      dnn_sym(a->lib, "cudnnSetStream", &a->SetStream, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendCreateDescriptor", &a->CreateDescriptor, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendDestroyDescriptor", &a->DestroyDescriptor, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendFinalize", &a->Finalize, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendSetAttribute", &a->SetAttribute, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendGetAttribute", &a->GetAttribute, 1, why, n) ||
      dnn_sym(a->lib, "cudnnBackendExecute", &a->Execute, 1, why, n))
    goto fail;
  a->version = (long)a->GetVersion();
  Dl_info info;
  void *gv;
  memcpy(&gv, &a->GetVersion, sizeof gv);
  snprintf(a->path, sizeof a->path, "%s",
           dladdr(gv, &info) && info.dli_fname ? info.dli_fname : "libcudnn.so.9");
  /* the enums and attribute names compiled in are cuDNN 9's */
  if (a->version / 10000 != 9) {
    snprintf(why, n, "%s is cuDNN %ld; zeroc needs cuDNN 9.x", a->path, a->version);
    goto fail;
  }
  if (a->version == 91000 || a->version == 91001) {
    snprintf(why, n, "%s is cuDNN 9.10.%ld, whose bf16 SDPA has known bugs; use 9.10.2 or newer",
             a->path, a->version % 100);
    goto fail;
  }
  return 0;
fail:
  dlclose(a->lib);
  a->lib = NULL;
  return -1;
}

zeroc_result_t zeroc__cudnn_probe(char *path, size_t n, long *version) {
  zc_dnn_api_t a;
  char why[640];
  *version = 0;
  if (n) path[0] = 0;
  if (dnn_load(&a, why, sizeof why)) return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s", why);
  *version = a.version;
  if (n) snprintf(path, n, "%s", a.path);
  dlclose(a.lib);
  return ZEROC_OK;
}

/* Loads the library and creates the handle on first use; 0 when cuDNN can be used. */
static int dnn_ready(zc_dnn_t *d) {
  if (d->load_tried) return d->loaded ? 0 : -1;
  d->load_tried = 1;
  if (dnn_load(&d->api, d->why_load, sizeof d->why_load)) goto unavailable;
  cudnnStatus_t s = d->api.Create(&d->handle);
  if (s != CUDNN_STATUS_SUCCESS) {
    char last[384] = "";
    if (d->api.GetLastErrorString) d->api.GetLastErrorString(last, sizeof last);
    snprintf(d->why_load, sizeof d->why_load, "cudnnCreate (cuDNN %ld, %s): %s (%d)%s%s",
             d->api.version, d->api.path, d->api.GetErrorString(s), (int)s, last[0] ? ": " : "",
             last);
    d->handle = NULL;
    dlclose(d->api.lib);
    d->api.lib = NULL;
    goto unavailable;
  }
  d->loaded = 1;
  if (d->mode != ZEROC__CUDNN_OFF) __atomic_store_n(&g_loaded, 1, __ATOMIC_RELAXED);
  ZINFO(DEVICE, "attention: cuDNN %ld loaded from %s", d->api.version, d->api.path);
  status_set("cuDNN SDPA (cuDNN %ld, %.160s), %s backward; each shape's plans are built at its "
             "first step",
             d->api.version, d->api.path, d->deterministic ? "deterministic" : "fast");
  return 0;
unavailable:
  status_set("zeroc's own cuda kernels: cuDNN missing: %.260s", d->why_load);
  /* loud, once per process: training runs, but attention is the slow part of the step */
  if (!__atomic_exchange_n(&g_unavailable_logged, 1, __ATOMIC_RELAXED)) {
    if (d->mode == ZEROC__CUDNN_AUTO)
      ZWARN(DEVICE, "attention: cuDNN missing, zeroc's own (slower) kernels run attention: %s",
            d->why_load);
  }
  return -1;
}

/* ---- state --------------------------------------------------------------------------- */

zeroc_result_t zeroc__cudnn_attention_create(zeroc_kernels_t *k) {
  zeroc__cudnn_mode_t mode;
  ZEROC_CHECK(zeroc__cudnn_mode_parse(
      zeroc__env_str("ZEROC_CUDA_ATTENTION", ZEROC_CUDA_ATTENTION_DEFAULT), &mode));
  int det = 0;
  ZEROC_CHECK(zeroc__cudnn_deterministic_knob(&det));
  zc_dnn_t *d = calloc(1, sizeof *d);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cuDNN attention state (%zu bytes)", sizeof *d);
  d->mode = mode;
  d->deterministic = det;
  k->cudnn = d;
  k->deterministic = det;
  if (k->dtype == ZEROC_BF16) {
    /* loaded now, not at the first step: the progress header says what attention runs on,
     * and a missing cuDNN is reported before training starts */
    if (mode == ZEROC__CUDNN_OFF)
      status_mode_off();
    else
      (void)dnn_ready(d);
  }
  return ZEROC_OK;
}

void zeroc__cudnn_attention_destroy(zeroc_kernels_t *k) {
  zc_dnn_t *d = k->cudnn;
  if (!d) return;
  for (int i = 0; i < d->nshapes; i++) {
    zc_dnn_plan_free(&d->api, &d->shapes[i]->fwd);
    zc_dnn_plan_free(&d->api, &d->shapes[i]->bwd);
    free(d->shapes[i]);
  }
  if (d->ws) {
    cudaDeviceSynchronize(); /* no plan still runs on it */
    zeroc_i_device_free(k->mem, d->ws);
  }
  if (d->handle) d->api.Destroy(d->handle);
  if (d->api.lib) dlclose(d->api.lib);
  free(d);
  k->cudnn = NULL;
}

void zeroc__cudnn_attention_set_mode(zeroc_kernels_t *k, zeroc__cudnn_mode_t mode) {
  if (k->cudnn) ((zc_dnn_t *)k->cudnn)->mode = mode;
}

size_t zeroc__cudnn_attention_ws_bytes(const zeroc_kernels_t *k) {
  const zc_dnn_t *d = k->cudnn;
  return d && d->ws ? d->ws_bytes : 0;
}

void zeroc__cudnn_attention_set_deterministic(zeroc_kernels_t *k, int on) {
  zc_dnn_t *d = k->cudnn;
  if (!d) return;
  d->deterministic = on != 0;
  if (d->loaded && k->dtype == ZEROC_BF16)
    status_set("cuDNN SDPA (cuDNN %ld, %.160s), %s backward; each shape's plans are built at "
               "its first step",
               d->api.version, d->api.path, on ? "deterministic" : "fast");
}

/* ---- plans per shape ------------------------------------------------------------------ */

/* The workspace plans run with: the kernel scratch, or d's own buffer when it is larger. */
static void dnn_workspace(zeroc_kernels_t *k, zc_dnn_t *d, void **ws, size_t *have) {
  zeroc_i_cuda_scratch(k, ws, have);
  if (d->ws && d->ws_bytes > *have) *ws = d->ws, *have = d->ws_bytes;
}

/* Makes the workspace at least `need` bytes (the formula's, zeroc__cudnn_ws): the kernel
 * scratch when it is enough, else a buffer of d's own of exactly zeroc__cudnn_ws_own bytes,
 * grown (the old one freed once the device is idle) and counted as WORKSPACE. 0, or -1
 * with `why` when the device has no room. */
static int dnn_workspace_fit(zeroc_kernels_t *k, zc_dnn_t *d, size_t need, char *why, size_t n) {
  void *ws;
  size_t have, scratch;
  dnn_workspace(k, d, &ws, &have);
  if (need <= have) return 0;
  zeroc_i_cuda_scratch(k, &ws, &scratch);
  const size_t bytes = zeroc__cudnn_ws_own(need, scratch);
  if (d->ws) {
    cudaDeviceSynchronize(); /* plans queued on the old buffer finish first */
    zeroc_i_device_free(k->mem, d->ws);
    d->ws = NULL, d->ws_bytes = 0;
  }
  if (zeroc_i_device_alloc(k->mem, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, bytes, &d->ws)) {
    d->ws = NULL;
    snprintf(why, n,
             "needs %zu bytes of workspace, the kernel scratch has %zu and allocating "
             "them failed: %.200s",
             need, scratch, zeroc__tls_error());
    return -1;
  }
  d->ws_bytes = bytes;
  ZINFO(DEVICE, "attention: cuDNN's workspace sized to %zu bytes (the kernel scratch has %zu)",
        bytes, scratch);
  return 0;
}

/* 0 when plan p's own workspace, with the formula's tensors before it (`tensors` bytes), is
 * within the formula's `budget`; else -1 with `why` naming both: the formula is wrong for
 * this cuDNN, and running the plan would break the planner's prediction. */
static int dnn_check_formula(const zc_dnn_t *d, const zc_dnn_plan_t *p, const char *dir,
                             size_t tensors, size_t budget, char *why, size_t n) {
  const size_t asks = tensors + (size_t)p->ws_bytes;
  if (asks <= budget) return 0;
  snprintf(why, n,
           "cuDNN %ld's %s plan (engine %lld) asks for %lld bytes of workspace (%zu with the "
           "formula's tensors), zeroc's formula (zeroc__cudnn_ws, what the planner predicts) "
           "gives %zu: the formula needs updating for this cuDNN",
           d->api.version, dir, (long long)p->engine, (long long)p->ws_bytes, asks, budget);
  return -1;
}

/* Builds the backward of e->sh (both orders of mask and stats); `why` on failure. */
static cudnnStatus_t build_bwd(zc_dnn_t *d, zc_dnn_entry_t *e, char *why, size_t nwhy) {
  e->sh.mask_after_stats = 0;
  cudnnStatus_t s = zc_dnn_build(&d->api, d->handle, &e->sh, 1, &e->bwd, why, nwhy);
  if (s == CUDNN_STATUS_SUCCESS) return s;
  /* the other order of mask and stats, as newer frontends build it */
  char first[1024];
  snprintf(first, sizeof first, "%s", why);
  e->sh.mask_after_stats = 1;
  s = zc_dnn_build(&d->api, d->handle, &e->sh, 1, &e->bwd, why, nwhy);
  if (s != CUDNN_STATUS_SUCCESS) {
    char second[1024];
    snprintf(second, sizeof second, "%s", why);
    snprintf(why, nwhy, "mask before stats: %.480s | mask after stats: %.480s", first, second);
  }
  return s;
}

/* Builds one direction of `e`; *ok and e's why say the outcome. The backward is the fast
 * one (fp32 dQ atomics) unless d is deterministic or the fast graph does not build (the
 * deterministic one then runs only if it fits the fast one's formula). */
static void build_dir(zc_dnn_t *d, zc_dnn_entry_t *e, int backward) {
  zc_dnn_plan_t *p = backward ? &e->bwd : &e->fwd;
  char *why = backward ? e->why_bwd : e->why_fwd;
  const size_t nwhy = sizeof e->why_fwd;
  int *ok = backward ? &e->bwd_ok : &e->fwd_ok;
  const char *dir = backward ? "backward" : "forward";
  cudnnStatus_t s;
  if (!backward) {
    s = zc_dnn_build(&d->api, d->handle, &e->sh, 0, p, why, nwhy);
  } else {
    e->sh.fast = !d->deterministic;
    s = build_bwd(d, e, why, nwhy);
    if (s != CUDNN_STATUS_SUCCESS && e->sh.fast) {
      ZINFO(DEVICE,
            "attention backward B %d T %d C %d NH %d: cuDNN's fast backward not built "
            "(%s); trying its deterministic one",
            e->sh.B, e->sh.T, e->sh.C, e->sh.NH, why);
      e->sh.fast = 0;
      s = build_bwd(d, e, why, nwhy);
    }
  }
  /* the plan's request against the formula: the backward's tensors (sum(dO*O), the fast
   * one's dQ accumulator) come first, then the plan's own */
  const size_t tensors = backward ? e->ws.dsum + (e->sh.fast ? e->ws.dqacc : 0) : 0;
  const size_t budget = backward ? e->ws.bwd : e->ws.fwd;
  if (s == CUDNN_STATUS_SUCCESS && dnn_check_formula(d, p, dir, tensors, budget, why, nwhy)) {
    if (d->mode == ZEROC__CUDNN_AUTO) {
      /* By default the fast kernel with the prediction short (said, with both sizes) rather
       * than zeroc's slower one (about 25% of the 1.3B GPT's step) with it whole; cudnn
       * mode refuses, so a test on a GPU catches a formula that has fallen behind. */
      const size_t asks = tensors + (size_t)p->ws_bytes;
      ZWARN(DEVICE,
            "attention %s B %d T %d C %d NH %d: %s; it runs with the plan's workspace, "
            "%zu bytes above the planner's prediction",
            dir, e->sh.B, e->sh.T, e->sh.C, e->sh.NH, why, asks - budget);
      if (backward)
        e->ws.bwd_plan += asks - budget, e->ws.bwd = asks;
      else
        e->ws.fwd = asks;
      e->ws.total = e->ws.bwd > e->ws.fwd ? e->ws.bwd : e->ws.fwd;
    } else {
      zc_dnn_plan_free(&d->api, p);
      s = CUDNN_STATUS_NOT_SUPPORTED;
    }
  }
  *ok = s == CUDNN_STATUS_SUCCESS;
  if (*ok)
    ZINFO(DEVICE,
          "attention %s B %d T %d C %d NH %d: cuDNN %ld engine %lld, plan workspace %lld bytes "
          "(the formula allows %zu)%s",
          dir, e->sh.B, e->sh.T, e->sh.C, e->sh.NH, d->api.version, (long long)p->engine,
          (long long)p->ws_bytes, backward ? e->ws.bwd_plan : e->ws.fwd,
          backward ? (e->sh.fast ? ", fast (fp32 dQ atomics)" : ", deterministic") : "");
  else if (d->mode == ZEROC__CUDNN_AUTO)
    ZWARN(DEVICE, "attention %s B %d T %d C %d NH %d: cuDNN %ld (%s) not used, zeroc's kernel runs "
                  "it: %s",
          dir, e->sh.B, e->sh.T, e->sh.C, e->sh.NH, d->api.version, d->api.path, why);
}

/* Records what shape e runs on (zeroc_k_attention_backend). */
static void status_entry(const zc_dnn_t *d, const zc_dnn_entry_t *e) {
  const zc_dnn_shape_t *h = &e->sh;
  const char *bwd = h->fast ? "fast" : "deterministic";
  if (e->fwd_ok && e->bwd_ok)
    status_set("cuDNN SDPA forward and %s backward (cuDNN %ld, %.120s), B %d T %d C %d NH %d", bwd,
               d->api.version, d->api.path, h->B, h->T, h->C, h->NH);
  else if (e->fwd_ok)
    status_set("cuDNN SDPA forward, zeroc's own backward: cuDNN refused the backward of B %d T %d "
               "C %d NH %d: %.160s",
               h->B, h->T, h->C, h->NH, e->why_bwd);
  else if (e->bwd_ok)
    status_set("zeroc's own forward (cuDNN refused B %d T %d C %d NH %d: %.160s), cuDNN SDPA %s "
               "backward",
               h->B, h->T, h->C, h->NH, e->why_fwd, bwd);
  else
    status_set("zeroc's own cuda kernels: cuDNN %ld refused the shape B %d T %d C %d NH %d: %.180s",
               d->api.version, h->B, h->T, h->C, h->NH, e->why_fwd);
}

/* The entry of (B, T, C, NH) and d's determinism, built on first use; NULL when the cache
 * is full. */
static zc_dnn_entry_t *dnn_entry(zc_dnn_t *d, zeroc_kernels_t *k, int B, int T, int C, int NH) {
  for (int i = 0; i < d->nshapes; i++) {
    zc_dnn_entry_t *e = d->shapes[i];
    if (e->sh.B == B && e->sh.T == T && e->sh.C == C && e->sh.NH == NH &&
        e->deterministic == d->deterministic)
      return e;
  }
  if (d->nshapes == ZC_DNN_SHAPES) return NULL;
  zc_dnn_entry_t *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->sh = (zc_dnn_shape_t){.B = B, .T = T, .C = C, .NH = NH};
  e->deterministic = d->deterministic;
  zeroc__cudnn_ws(B, T, C, NH, e->deterministic, &e->ws);
  build_dir(d, e, 0);
  build_dir(d, e, 1);
  /* the formula's workspace for what runs on cuDNN (as the planner predicts it) */
  const size_t need = e->bwd_ok ? e->ws.total : e->fwd_ok ? e->ws.fwd : 0;
  char why[640];
  if (need && dnn_workspace_fit(k, d, need, why, sizeof why)) {
    for (int dir = 0; dir < 2; dir++) {
      if (!(dir ? e->bwd_ok : e->fwd_ok)) continue;
      zc_dnn_plan_free(&d->api, dir ? &e->bwd : &e->fwd);
      snprintf(dir ? e->why_bwd : e->why_fwd, sizeof e->why_fwd, "%s", why);
    }
    e->fwd_ok = e->bwd_ok = 0;
    if (d->mode == ZEROC__CUDNN_AUTO)
      ZWARN(DEVICE, "attention B %d T %d C %d NH %d: cuDNN not used, zeroc's kernels run it: %s", B,
            T, C, NH, why);
  }
  d->shapes[d->nshapes++] = e;
  if (k->dtype == ZEROC_BF16) status_entry(d, e);
  return e;
}

/* Runs plan p with the variant pack (uids, ptrs) on `cs`; ZEROC_OK or `why` filled. */
static cudnnStatus_t dnn_execute(zc_dnn_t *d, zc_dnn_plan_t *p, cudaStream_t cs,
                                 const int64_t *uids, void *const *ptrs, int64_t n, void *ws,
                                 char *why, size_t nwhy) {
  const zc_dnn_api_t *a = &d->api;
  cudnnBackendDescriptor_t vp = NULL;
  const char *step = "create variant pack";
  cudnnStatus_t s = a->CreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
  if (s == CUDNN_STATUS_SUCCESS) {
    step = "variant pack uids";
    s = a->SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    step = "variant pack pointers";
    s = a->SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    step = "variant pack workspace";
    s = a->SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  }
  if (s == CUDNN_STATUS_SUCCESS) step = "finalize variant pack", s = a->Finalize(vp);
  if (s == CUDNN_STATUS_SUCCESS) step = "cudnnSetStream", s = a->SetStream(d->handle, cs);
  if (s == CUDNN_STATUS_SUCCESS) step = "cudnnBackendExecute", s = a->Execute(d->handle, p->plan, vp);
  if (vp) a->DestroyDescriptor(vp);
  if (s != CUDNN_STATUS_SUCCESS) {
    char last[512] = "";
    if (a->GetLastErrorString) a->GetLastErrorString(last, sizeof last);
    snprintf(why, nwhy, "%s: %s (%d)%s%s", step, a->GetErrorString(s), (int)s, last[0] ? ": " : "",
             last);
  }
  return s;
}

/* ---- the entry points ----------------------------------------------------------------- */

/* Whether a call is one cuDNN takes: bf16, no dropout, head size a multiple of 8 up to
 * 128, every tensor 16-byte aligned. */
static int dnn_applies(zeroc_kernels_t *k, int C, int NH, const zeroc_dropout_t *drop,
                       const void *const *ptrs, int n) {
  if (k->dtype != ZEROC_BF16 || (drop && drop->p > 0) || NH < 1 || C % NH) return 0;
  const int HS = C / NH;
  if (HS % 8 || HS > 128) return 0;
  for (int i = 0; i < n; i++)
    if (!ptrs[i] || ((uintptr_t)ptrs[i] & 15u)) return 0;
  return 1;
}

/* The common part: the entry to run, or *done = 0 / an error (mode cudnn) when none. */
static zeroc_result_t dnn_select(zeroc_kernels_t *k, int B, int T, int C, int NH, int backward,
                                 zc_dnn_entry_t **out) {
  zc_dnn_t *d = k->cudnn;
  *out = NULL;
  const char *dir = backward ? "attention_backward" : "attention_forward";
  if (dnn_ready(d)) {
    if (d->mode == ZEROC__CUDNN_REQUIRED)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "ZEROC_CUDA_ATTENTION=cudnn: %s: %s", dir,
                        d->why_load);
    return ZEROC_OK;
  }
  zc_dnn_entry_t *e = dnn_entry(d, k, B, T, C, NH);
  if (!e) {
    if (d->mode == ZEROC__CUDNN_REQUIRED)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "ZEROC_CUDA_ATTENTION=cudnn: %s B %d T %d C %d NH %d: more than %d shapes "
                        "(or no memory) for the plan cache",
                        dir, B, T, C, NH, ZC_DNN_SHAPES);
    return ZEROC_OK;
  }
  if (!(backward ? e->bwd_ok : e->fwd_ok)) {
    if (d->mode == ZEROC__CUDNN_REQUIRED)
      return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                        "ZEROC_CUDA_ATTENTION=cudnn: %s B %d T %d C %d NH %d on cuDNN %ld (%s): %s",
                        dir, B, T, C, NH, d->api.version, d->api.path,
                        backward ? e->why_bwd : e->why_fwd);
    return ZEROC_OK;
  }
  *out = e;
  return ZEROC_OK;
}

/* After a failed execute: mode cudnn fails, auto turns the direction off for the shape. */
static zeroc_result_t dnn_exec_failed(zc_dnn_t *d, zc_dnn_entry_t *e, int backward,
                                      const char *why) {
  const char *dir = backward ? "attention_backward" : "attention_forward";
  if (d->mode == ZEROC__CUDNN_REQUIRED)
    return ZEROC_FAIL(ZEROC_ERR_CUDA, "%s B %d T %d C %d NH %d on cuDNN %ld (%s): %s", dir,
                      e->sh.B, e->sh.T, e->sh.C, e->sh.NH, d->api.version, d->api.path, why);
  ZWARN(DEVICE, "%s B %d T %d C %d NH %d on cuDNN %ld (%s): %s; zeroc's kernel runs it from now on",
        dir, e->sh.B, e->sh.T, e->sh.C, e->sh.NH, d->api.version, d->api.path, why);
  status_set("zeroc's own cuda kernels for the %s of B %d T %d C %d NH %d: cuDNN %ld failed at run "
             "time: %.160s",
             backward ? "backward" : "forward", e->sh.B, e->sh.T, e->sh.C, e->sh.NH, d->api.version,
             why);
  snprintf(backward ? e->why_bwd : e->why_fwd, sizeof e->why_fwd, "execute failed: %s", why);
  if (backward) e->bwd_ok = 0;
  else e->fwd_ok = 0;
  return ZEROC_OK;
}

zeroc_result_t zeroc__cudnn_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s, void *out,
                                              float *lse, const void *qkv, int B, int T, int C,
                                              int NH, const zeroc_dropout_t *drop, int *done) {
  zc_dnn_t *d = k->cudnn;
  *done = 0;
  const void *ptrs[] = {out, lse, qkv};
  if (!d || d->mode == ZEROC__CUDNN_OFF) return ZEROC_OK;
  if (!dnn_applies(k, C, NH, drop, ptrs, 3)) {
    if (!d->noted_na && k->dtype == ZEROC_BF16) {
      d->noted_na = 1;
      status_set("zeroc's own cuda kernels: cuDNN does not take this call (dropout %g, head size "
                 "%d: it needs no dropout, a head size a multiple of 8 up to 128, 16-byte "
                 "aligned tensors)",
                 drop ? (double)drop->p : 0.0, NH > 0 ? C / NH : 0);
    }
    return ZEROC_OK;
  }
  zc_dnn_entry_t *e;
  ZEROC_CHECK(dnn_select(k, B, T, C, NH, 0, &e));
  if (!e) return ZEROC_OK;
  // qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T)
  const char *q = qkv;
  float scale = 1.0f / sqrtf((float)(C / NH)), neg = zc_dnn_neg_inf(&d->api);
  const size_t c2 = (size_t)C * 2; /* bf16 bytes of one third of a qkv row */
  const int64_t uids[] = {ZC_UID_Q, ZC_UID_K, ZC_UID_V, ZC_UID_O, ZC_UID_STATS, ZC_UID_SCALE,
                          ZC_UID_NEGINF};
  void *const vals[] = {(void *)q, (void *)(q + c2), (void *)(q + 2 * c2), out, lse, &scale, &neg};
  void *ws = NULL;
  size_t have = 0;
  dnn_workspace(k, d, &ws, &have);
  char why[640];
  cudaStream_t cs = (cudaStream_t)zeroc_stream_native(s ? s : k->compute);
  if (dnn_execute(d, &e->fwd, cs, uids, vals, 7, ws, why, sizeof why) != CUDNN_STATUS_SUCCESS)
    return dnn_exec_failed(d, e, 0, why);
  *done = 1;
  return ZEROC_OK;
}

zeroc_result_t zeroc__cudnn_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s, void *dqkv,
                                               const void *dout, const void *qkv, const void *out,
                                               const float *lse, int B, int T, int C, int NH,
                                               const zeroc_dropout_t *drop, unsigned flags,
                                               int *done) {
  zc_dnn_t *d = k->cudnn;
  *done = 0;
  const void *ptrs[] = {dqkv, dout, qkv, out, lse};
  if (!d || d->mode == ZEROC__CUDNN_OFF || !(flags & ZEROC_K_DQKV_SET) ||
      !dnn_applies(k, C, NH, drop, ptrs, 5))
    return ZEROC_OK;
  zc_dnn_entry_t *e;
  ZEROC_CHECK(dnn_select(k, B, T, C, NH, 1, &e));
  if (!e) return ZEROC_OK;
  // dout (B,T,C), qkv (B,T,3C), out (B,T,C), lse (B,NH,T) -> dqkv (B,T,3C) =
  const char *q = qkv;
  char *g = dqkv;
  float scale = 1.0f / sqrtf((float)(C / NH)), neg = zc_dnn_neg_inf(&d->api), one = 1.0f;
  const size_t c2 = (size_t)C * 2;
  char *ws = NULL;
  size_t have = 0;
  dnn_workspace(k, d, (void **)&ws, &have);
  /* workspace: sum(dO*O) (B,NH,T) fp32, the fast backward's fp32 dQ accumulator (zeroed
   * here: the engine adds into it), then the plan's own */
  const size_t acc = e->sh.fast ? e->ws.dqacc : 0, plan_ws = e->ws.dsum + acc;
  const int64_t uids[] = {ZC_UID_Q,      ZC_UID_K,   ZC_UID_V,    ZC_UID_O,       ZC_UID_DO,
                          ZC_UID_STATS,  ZC_UID_DQ,  ZC_UID_DK,   ZC_UID_DV,      ZC_UID_SCALE,
                          ZC_UID_NEGINF, ZC_UID_ONE, ZC_UID_DSUM, ZC_UID_DQ_ACCUM};
  void *const vals[] = {
      (void *)q, (void *)(q + c2), (void *)(q + 2 * c2), (void *)out, (void *)dout, (void *)lse,
      g,         g + c2,           g + 2 * c2,           &scale,      &neg,         &one,
      ws,        ws + e->ws.dsum};
  char why[640];
  cudaStream_t cs = (cudaStream_t)zeroc_stream_native(s ? s : k->compute);
  if (acc) {
    cudaError_t ce = cudaMemsetAsync(ws + e->ws.dsum, 0, acc, cs);
    if (ce != cudaSuccess) {
      snprintf(why, sizeof why, "zeroing the dQ accumulator (%zu bytes): %s", acc,
               cudaGetErrorString(ce));
      return dnn_exec_failed(d, e, 1, why);
    }
  }
  if (dnn_execute(d, &e->bwd, cs, uids, vals, acc ? 14 : 13, ws + plan_ws, why, sizeof why) !=
      CUDNN_STATUS_SUCCESS)
    return dnn_exec_failed(d, e, 1, why);
  *done = 1;
  return ZEROC_OK;
}
#endif
