/*
 * kernels/attention_cudnn_impl.h - what the two halves of zeroc's cuDNN attention share:
 * the table of cuDNN functions resolved with dlsym (attention_cudnn_cuda.c loads them) and
 * the plans the graph builder makes from them (attention_cudnn_graph_cuda.c).
 * Only included where <cudnn_graph.h> exists (ZC_HAVE_CUDNN_H).
 */
#ifndef ZEROC_KERNELS_ATTENTION_CUDNN_IMPL_H
#define ZEROC_KERNELS_ATTENTION_CUDNN_IMPL_H

#include <cudnn_graph.h>
#include <stdint.h>

/* The cuDNN entry points zeroc calls, resolved from libcudnn.so.9 at run time. */
typedef struct zc_dnn_api {
  void *lib; /* dlopen handle */
  size_t (*GetVersion)(void);
  const char *(*GetErrorString)(cudnnStatus_t);
  void (*GetLastErrorString)(char *, size_t); /* NULL where the library lacks it */
  cudnnStatus_t (*Create)(cudnnHandle_t *);
  cudnnStatus_t (*Destroy)(cudnnHandle_t);
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
  cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
  cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, const void *);
  cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
  cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
  long version; /* GetVersion(), e.g. 91900 for 9.19.0 */
  char path[256];
} zc_dnn_api_t;

/* Tensor unique ids of the variant pack. */
enum {
  ZC_UID_Q = 1,
  ZC_UID_K,
  ZC_UID_V,
  ZC_UID_O,
  ZC_UID_STATS,
  ZC_UID_SCALE,  /* by value: 1/sqrt(HS) */
  ZC_UID_NEGINF, /* by value: what masked scores become */
  ZC_UID_ONE,    /* by value: 1 (the dropout-scale slot of sum(dO*O)) */
  ZC_UID_DO,
  ZC_UID_DQ,
  ZC_UID_DK,
  ZC_UID_DV,
  ZC_UID_DSUM,     /* sum(dO*O) per row, fp32 in the workspace */
  ZC_UID_DQ_ACCUM, /* fast backward: dQ accumulated in fp32 in the workspace (atomics) */
  ZC_UID_VIRTUAL = 100,
};

#define ZC_DNN_MAX_DESC 192

/* One finalized execution plan and every descriptor it was built from (kept alive with it). */
typedef struct zc_dnn_plan {
  cudnnBackendDescriptor_t plan;
  cudnnBackendDescriptor_t desc[ZC_DNN_MAX_DESC];
  int ndesc;
  int64_t ws_bytes; /* the plan's own workspace */
  int64_t engine;   /* global engine index, for the logs */
} zc_dnn_plan_t;

/* What a graph is built for. */
typedef struct zc_dnn_shape {
  int B, T, C, NH;
  int mask_after_stats; /* backward: mask the scores after subtracting the stats (newer order) */
  int fast; /* backward: dQ through an fp32 accumulator (cuDNN's faster, non-deterministic
               algorithm; engines noted NONDETERMINISTIC allowed); 0: the deterministic one */
} zc_dnn_shape_t;

/* Builds the forward (out, stats) or backward (dq, dk, dv) graph of `sh` and finalizes the
 * first plan the heuristics offer (mode A, then fallback), skipping non-deterministic
 * engines for the backward unless sh->fast. On failure: a cuDNN status, and `why` (n bytes) names
 * the step, the status and cuDNN's last error text. The plan is freed with zc_dnn_plan_free. */
cudnnStatus_t zc_dnn_build(const zc_dnn_api_t *api, cudnnHandle_t h, const zc_dnn_shape_t *sh,
                           int backward, zc_dnn_plan_t *p, char *why, size_t n);
void zc_dnn_plan_free(const zc_dnn_api_t *api, zc_dnn_plan_t *p);

/* The value masked scores take: cuDNN before 9.10 prefers the lowest float, later -inf
 * (as the frontend chooses). */
static inline float zc_dnn_neg_inf(const zc_dnn_api_t *api) {
  return api->version < 91000 ? -3.402823466e38f : -__builtin_inff();
}

#endif
