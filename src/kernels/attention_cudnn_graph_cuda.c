/*
 * kernels/attention_cudnn_graph_cuda.c - builds cuDNN backend graphs for causal attention
 * (forward with softmax stats; backward, fast or deterministic) and finalizes an execution plan for
 * them. One helper per descriptor kind: tensors, pointwise, matmul, reduction, reshape;
 * every call is checked and the first failure is kept with cuDNN's own message, so a run
 * on a new cuDNN says exactly which step it refused. See attention_cudnn_cuda.c for the
 * layout and how the plans are used.
 */
#if defined(__has_include)
#if __has_include(<cudnn_graph.h>)
#define ZC_HAVE_CUDNN_H 1
#endif
#endif

#ifdef ZC_HAVE_CUDNN_H
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/attention_cudnn_impl.h"

/* ---- the builder: every descriptor made, the ops in order, the first failure -------- */

typedef struct {
  const zc_dnn_api_t *api;
  zc_dnn_plan_t *p; /* owns the descriptors */
  cudnnBackendDescriptor_t ops[48];
  int nops;
  int64_t next_uid;
  cudnnStatus_t st;
  char *why;
  size_t nwhy;
} gb_t;

/* Records the first failure: the step, the status (name and number), cuDNN's last error. */
static void gb_fail(gb_t *g, const char *step, cudnnStatus_t s) {
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  g->st = s;
  char last[512] = "";
  if (g->api->GetLastErrorString) g->api->GetLastErrorString(last, sizeof last);
  snprintf(g->why, g->nwhy, "%s: %s (%d)%s%s", step, g->api->GetErrorString(s), (int)s,
           last[0] ? ": " : "", last);
}

#define GB(g, step, call)                                                                          \
  do {                                                                                             \
    if ((g)->st == CUDNN_STATUS_SUCCESS) {                                                         \
      cudnnStatus_t gb_s_ = (call);                                                                \
      if (gb_s_ != CUDNN_STATUS_SUCCESS) gb_fail((g), (step), gb_s_);                              \
    }                                                                                              \
  } while (0)

/* A new descriptor of `type`, owned by the plan (NULL after a failure). */
static cudnnBackendDescriptor_t gb_new(gb_t *g, cudnnBackendDescriptorType_t type, const char *what) {
  cudnnBackendDescriptor_t d = NULL;
  if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
  if (g->p->ndesc >= ZC_DNN_MAX_DESC) {
    gb_fail(g, "zeroc: too many descriptors (raise ZC_DNN_MAX_DESC)", CUDNN_STATUS_INTERNAL_ERROR);
    return NULL;
  }
  GB(g, what, g->api->CreateDescriptor(type, &d));
  if (g->st == CUDNN_STATUS_SUCCESS) g->p->desc[g->p->ndesc++] = d;
  return d;
}

static void gb_set(gb_t *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *step) {
  if (d) GB(g, step, g->api->SetAttribute(d, name, type, n, v));
}

static void gb_finalize(gb_t *g, cudnnBackendDescriptor_t d, const char *step) {
  if (d) GB(g, step, g->api->Finalize(d));
}

static void gb_op(gb_t *g, cudnnBackendDescriptor_t op) {
  if (!op || g->st != CUDNN_STATUS_SUCCESS) return;
  if (g->nops >= (int)(sizeof g->ops / sizeof g->ops[0])) {
    gb_fail(g, "zeroc: too many operations", CUDNN_STATUS_INTERNAL_ERROR);
    return;
  }
  g->ops[g->nops++] = op;
}

/* ---- one helper per descriptor kind ------------------------------------------------- */

/* A 4-d tensor: uid 0 makes a virtual one with the next free id. */
static cudnnBackendDescriptor_t gb_tensor(gb_t *g, cudnnDataType_t dt, const int64_t dim[4],
                                          const int64_t stride[4], int64_t uid, bool by_value) {
  cudnnBackendDescriptor_t t = gb_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "create tensor");
  const bool virt = uid == 0;
  const int64_t align = 16, id = virt ? g->next_uid++ : uid;
  gb_set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
  gb_set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dims");
  gb_set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
  gb_set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id, "tensor uid");
  gb_set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  gb_set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
  if (by_value)
    gb_set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
  gb_finalize(g, t, "finalize tensor");
  return t;
}

/* A by-value fp32 scalar [1,1,1,1] (attention scale, mask value, one). */
static cudnnBackendDescriptor_t gb_scalar(gb_t *g, int64_t uid) {
  static const int64_t one[4] = {1, 1, 1, 1};
  return gb_tensor(g, CUDNN_DATA_FLOAT, one, one, uid, true);
}

/* y = mode(x[, b[, t]]); axis >= 0 for GEN_INDEX. */
static void gb_pointwise(gb_t *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
                         cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                         cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, const char *what) {
  cudnnBackendDescriptor_t pw = gb_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  gb_set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
  gb_set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
  if (axis >= 0) gb_set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
  gb_finalize(g, pw, what);
  cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
  const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, D, 1, &pw, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, D, 1, &x, what);
  if (b) gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, D, 1, &b, what);
  if (t) gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, D, 1, &t, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, D, 1, &y, what);
  gb_finalize(g, op, what);
  gb_op(g, op);
}

/* c = a b (batched over the first two dimensions), fp32 accumulation. */
static void gb_matmul(gb_t *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                      cudnnBackendDescriptor_t c, const char *what) {
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  cudnnBackendDescriptor_t mm = gb_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
  gb_set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
  gb_finalize(g, mm, what);
  cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, D, 1, &a, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, D, 1, &b, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, D, 1, &c, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, D, 1, &mm, what);
  gb_finalize(g, op, what);
  gb_op(g, op);
}

/* y = reduce(x) over the dimensions where y has extent 1. */
static void gb_reduce(gb_t *g, cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x,
                      cudnnBackendDescriptor_t y, const char *what) {
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  cudnnBackendDescriptor_t rd = gb_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
  gb_set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red, what);
  gb_set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
  gb_finalize(g, rd, what);
  cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, D, 1, &x, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, D, 1, &y, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, D, 1, &rd, what);
  gb_finalize(g, op, what);
  gb_op(g, op);
}

/* y = x seen with y's dims and strides (the transposes of the backward). */
static void gb_reshape(gb_t *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                       const char *what) {
  const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  cudnnBackendDescriptor_t op = gb_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, D, 1, &x, what);
  gb_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, D, 1, &y, what);
  gb_finalize(g, op, what);
  gb_op(g, op);
}

/* ---- the pieces both graphs share --------------------------------------------------- */

/* Shapes and strides of one (B,NH,...) graph. */
typedef struct {
  int64_t qkv[4], qkv_t[4]; /* Q/K/V [B,NH,T,HS] strides; K^T/V^T [B,NH,HS,T] strides */
  int64_t bthd[4], bhdt[4]; /* dims [B,NH,T,HS], [B,NH,HS,T] */
  int64_t o[4];             /* out, dout strides */
  int64_t s[4], s_st[4];    /* scores [B,NH,T,T] dims, packed strides */
  int64_t st_t[4];          /* scores transposed [B,NH,Tk,Tq] strides over the same memory */
  int64_t row[4], row_st[4]; /* per-row [B,NH,T,1] dims and strides (lse) */
  int64_t packed[4];        /* packed [B,NH,T,HS] strides (dO*O) */
} dims_t;

static void dims_of(const zc_dnn_shape_t *sh, dims_t *d) {
  const int64_t B = sh->B, T = sh->T, C = sh->C, NH = sh->NH, HS = C / NH;
  const int64_t qkv[4] = {T * 3 * C, HS, 3 * C, 1}, qkv_t[4] = {T * 3 * C, HS, 1, 3 * C};
  const int64_t bthd[4] = {B, NH, T, HS}, bhdt[4] = {B, NH, HS, T};
  const int64_t o[4] = {T * C, HS, C, 1};
  const int64_t s[4] = {B, NH, T, T}, s_st[4] = {NH * T * T, T * T, T, 1};
  const int64_t st_t[4] = {NH * T * T, T * T, 1, T};
  const int64_t row[4] = {B, NH, T, 1}, row_st[4] = {NH * T, T, 1, 1};
  const int64_t packed[4] = {NH * T * HS, T * HS, HS, 1};
  memcpy(d->qkv, qkv, sizeof qkv), memcpy(d->qkv_t, qkv_t, sizeof qkv_t);
  memcpy(d->bthd, bthd, sizeof bthd), memcpy(d->bhdt, bhdt, sizeof bhdt);
  memcpy(d->o, o, sizeof o), memcpy(d->s, s, sizeof s), memcpy(d->s_st, s_st, sizeof s_st);
  memcpy(d->st_t, st_t, sizeof st_t), memcpy(d->row, row, sizeof row);
  memcpy(d->row_st, row_st, sizeof row_st), memcpy(d->packed, packed, sizeof packed);
}

/* A virtual fp32 [B,NH,T,T] scores tensor. */
static cudnnBackendDescriptor_t gb_scores(gb_t *g, const dims_t *d) {
  return gb_tensor(g, CUDNN_DATA_FLOAT, d->s, d->s_st, 0, false);
}

/* Causal mask: keys after the query (column > row) become the mask value. */
static cudnnBackendDescriptor_t gb_causal(gb_t *g, const dims_t *d, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t neg) {
  cudnnBackendDescriptor_t row = gb_tensor(g, CUDNN_DATA_INT32, d->s, d->s_st, 0, false);
  cudnnBackendDescriptor_t col = gb_tensor(g, CUDNN_DATA_INT32, d->s, d->s_st, 0, false);
  cudnnBackendDescriptor_t keep = gb_tensor(g, CUDNN_DATA_BOOLEAN, d->s, d->s_st, 0, false);
  cudnnBackendDescriptor_t y = gb_scores(g, d);
  gb_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 2, x, NULL, NULL, row, "gen_index row");
  gb_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 3, x, NULL, NULL, col, "gen_index col");
  gb_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep, "row >= col");
  /* binary select: y = keep ? x : neg */
  gb_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, neg, keep, y, "mask select");
  return y;
}

/* S = (Q K^T) * scale, fp32 [B,NH,T,T]. */
static cudnnBackendDescriptor_t gb_scaled_scores(gb_t *g, const dims_t *d,
                                                 cudnnBackendDescriptor_t q,
                                                 cudnnBackendDescriptor_t kt,
                                                 cudnnBackendDescriptor_t scale) {
  cudnnBackendDescriptor_t s = gb_scores(g, d), ss = gb_scores(g, d);
  gb_matmul(g, q, kt, s, "matmul Q K^T");
  gb_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s, scale, NULL, ss, "mul scale");
  return ss;
}

/* ---- forward: out (B,T,C), stats = lse (B,NH,T) ------------------------------------- */

static void build_forward(gb_t *g, const dims_t *d) {
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t q = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_Q, false);
  cudnnBackendDescriptor_t kt = gb_tensor(g, bf, d->bhdt, d->qkv_t, ZC_UID_K, false);
  cudnnBackendDescriptor_t v = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_V, false);
  cudnnBackendDescriptor_t o = gb_tensor(g, bf, d->bthd, d->o, ZC_UID_O, false);
  cudnnBackendDescriptor_t stats = gb_tensor(g, f32, d->row, d->row_st, ZC_UID_STATS, false);
  cudnnBackendDescriptor_t scale = gb_scalar(g, ZC_UID_SCALE), neg = gb_scalar(g, ZC_UID_NEGINF);

  cudnnBackendDescriptor_t s = gb_scaled_scores(g, d, q, kt, scale);
  s = gb_causal(g, d, s, neg);
  /* softmax with stats: m = max, e = exp(s - m), l = sum e, stats = m + log l, P = e / l */
  cudnnBackendDescriptor_t m = gb_tensor(g, f32, d->row, d->row_st, 0, false);
  cudnnBackendDescriptor_t sub = gb_scores(g, d), e = gb_scores(g, d);
  /* P in the io type (bf16), not fp32: cuDNN's SDPA engines take the second matmul's A
   * operand in the io type, and refuse the whole graph otherwise ("the matmul should either be
   * an entrance node or occur after the softmax"; seen on an H200 with cuDNN 9.19) */
  cudnnBackendDescriptor_t p = gb_tensor(g, bf, d->s, d->s_st, 0, false);
  cudnnBackendDescriptor_t l = gb_tensor(g, f32, d->row, d->row_st, 0, false);
  cudnnBackendDescriptor_t logl = gb_tensor(g, f32, d->row, d->row_st, 0, false);
  gb_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, m, "reduce max");
  gb_pointwise(g, CUDNN_POINTWISE_SUB, f32, -1, s, m, NULL, sub, "sub max");
  gb_pointwise(g, CUDNN_POINTWISE_EXP, f32, -1, sub, NULL, NULL, e, "exp");
  gb_reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, l, "reduce sum");
  gb_pointwise(g, CUDNN_POINTWISE_LOG, f32, -1, l, NULL, NULL, logl, "log sum");
  gb_pointwise(g, CUDNN_POINTWISE_ADD, f32, -1, m, logl, NULL, stats, "stats = max + log sum");
  gb_pointwise(g, CUDNN_POINTWISE_DIV, f32, -1, e, l, NULL, p, "div sum");
  gb_matmul(g, p, v, o, "matmul P V");
}

/* ---- backward: dq, dk, dv into dqkv (B,T,3C) ---------------------------------------- */

static void build_backward(gb_t *g, const dims_t *d, int mask_after_stats, int fast) {
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t q = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_Q, false);
  cudnnBackendDescriptor_t kt = gb_tensor(g, bf, d->bhdt, d->qkv_t, ZC_UID_K, false);
  cudnnBackendDescriptor_t vt = gb_tensor(g, bf, d->bhdt, d->qkv_t, ZC_UID_V, false);
  cudnnBackendDescriptor_t o = gb_tensor(g, bf, d->bthd, d->o, ZC_UID_O, false);
  cudnnBackendDescriptor_t dout = gb_tensor(g, bf, d->bthd, d->o, ZC_UID_DO, false);
  cudnnBackendDescriptor_t stats = gb_tensor(g, f32, d->row, d->row_st, ZC_UID_STATS, false);
  cudnnBackendDescriptor_t dq = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_DQ, false);
  cudnnBackendDescriptor_t dk = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_DK, false);
  cudnnBackendDescriptor_t dv = gb_tensor(g, bf, d->bthd, d->qkv, ZC_UID_DV, false);
  cudnnBackendDescriptor_t scale = gb_scalar(g, ZC_UID_SCALE), neg = gb_scalar(g, ZC_UID_NEGINF);
  cudnnBackendDescriptor_t one = gb_scalar(g, ZC_UID_ONE);

  /* dsum = sum over the head of dO * O, per row: fp32 in the workspace */
  cudnnBackendDescriptor_t doo = gb_tensor(g, f32, d->bthd, d->packed, 0, false);
  cudnnBackendDescriptor_t red = gb_tensor(g, f32, d->row, d->row_st, 0, false);
  cudnnBackendDescriptor_t dsum = gb_tensor(g, f32, d->row, d->row_st, ZC_UID_DSUM, false);
  gb_pointwise(g, CUDNN_POINTWISE_MUL, f32, -1, dout, o, NULL, doo, "mul dO O");
  gb_reduce(g, CUDNN_REDUCE_TENSOR_ADD, doo, red, "reduce dO O");
  gb_pointwise(g, CUDNN_POINTWISE_MUL, f32, -1, red, one, NULL, dsum, "dsum");

  /* P = exp(mask(S) - stats) (or exp(mask(S - stats)), the order newer frontends use) */
  cudnnBackendDescriptor_t s = gb_scaled_scores(g, d, q, kt, scale);
  cudnnBackendDescriptor_t sub = gb_scores(g, d), p = gb_scores(g, d);
  if (mask_after_stats) {
    gb_pointwise(g, CUDNN_POINTWISE_SUB, f32, -1, s, stats, NULL, sub, "sub stats");
    sub = gb_causal(g, d, sub, neg);
  } else {
    s = gb_causal(g, d, s, neg);
    gb_pointwise(g, CUDNN_POINTWISE_SUB, f32, -1, s, stats, NULL, sub, "sub stats");
  }
  gb_pointwise(g, CUDNN_POINTWISE_EXP, f32, -1, sub, NULL, NULL, p, "exp");

  /* dV = P^T dO */
  cudnnBackendDescriptor_t pt = gb_tensor(g, bf, d->s, d->st_t, 0, false);
  gb_reshape(g, p, pt, "reshape P^T");
  gb_matmul(g, pt, dout, dv, "matmul P^T dO");

  /* dS = P (dO V^T - dsum) * scale */
  cudnnBackendDescriptor_t dp = gb_scores(g, d), dps = gb_scores(g, d), ds0 = gb_scores(g, d),
                           ds = gb_scores(g, d);
  gb_matmul(g, dout, vt, dp, "matmul dO V^T");
  gb_pointwise(g, CUDNN_POINTWISE_SUB, f32, -1, dp, dsum, NULL, dps, "sub dsum");
  gb_pointwise(g, CUDNN_POINTWISE_MUL, f32, -1, dps, p, NULL, ds0, "mul P");
  gb_pointwise(g, CUDNN_POINTWISE_MUL, f32, -1, ds0, scale, NULL, ds, "mul scale dS");

  /* dK = dS^T Q */
  cudnnBackendDescriptor_t dst = gb_tensor(g, bf, d->s, d->st_t, 0, false);
  gb_reshape(g, ds, dst, "reshape dS^T");
  gb_matmul(g, dst, q, dk, "matmul dS^T Q");

  cudnnBackendDescriptor_t kk = gb_tensor(g, bf, d->bthd, d->qkv, 0, false);
  gb_reshape(g, kt, kk, "reshape K");
  if (!fast) {
    /* dQ = dS K, straight into dq: no fp32 accumulator, the deterministic algorithm */
    gb_matmul(g, ds, kk, dq, "matmul dS K");
    return;
  }
  /* dQ = dS K into an fp32 accumulator in the workspace (zeroed before each run; the
   * engine adds into it with atomics: faster, not bitwise repeatable), then cast to dq.
   * The accumulator's layout is the F16x16 reordering cuDNN's engines expect of it. */
  cudnnBackendDescriptor_t acc =
      gb_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "create dQ accumulator");
  const int64_t align = 16, uid = ZC_UID_DQ_ACCUM;
  const bool no = false;
  const cudnnBackendTensorReordering_t reorder = CUDNN_TENSOR_REORDERING_F16x16;
  gb_set(g, acc, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "dQ accumulator type");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d->bthd, "dQ accumulator dims");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, d->packed,
         "dQ accumulator strides");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "dQ accumulator uid");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align,
         "dQ accumulator alignment");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &no,
         "dQ accumulator virtual");
  gb_set(g, acc, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &reorder,
         "dQ accumulator reordering");
  gb_finalize(g, acc, "finalize dQ accumulator");
  gb_matmul(g, ds, kk, acc, "matmul dS K (fp32 accumulator)");
  gb_pointwise(g, CUDNN_POINTWISE_IDENTITY, f32, -1, acc, NULL, NULL, dq, "cast dQ");
}

/* ---- graph -> heuristics -> plan ----------------------------------------------------- */

/* Whether engine config `cfg` carries the NONDETERMINISTIC numerical note. */
static bool cfg_nondeterministic(gb_t *g, cudnnBackendDescriptor_t cfg) {
  cudnnBackendDescriptor_t eng = NULL;
  bool nondet = false;
  if (g->api->CreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
    return false;
  int64_t n = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT + 8];
  if (g->api->GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                           &eng) == CUDNN_STATUS_SUCCESS &&
      g->api->GetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                           (int64_t)(sizeof notes / sizeof notes[0]), &n,
                           notes) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; i++) nondet |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  g->api->DestroyDescriptor(eng);
  return nondet;
}

/* The first engine config of `mode`'s heuristics that finalizes into a plan. */
static void plan_from_heuristics(gb_t *g, cudnnHandle_t h, cudnnBackendDescriptor_t graph,
                                 cudnnBackendHeurMode_t mode, bool deterministic) {
  const zc_dnn_api_t *api = g->api;
  cudnnBackendDescriptor_t heur = gb_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "create heuristics");
  gb_set(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
         "heuristics graph");
  gb_set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
  gb_finalize(g, heur, "finalize heuristics");
  int64_t count = 0;
  GB(g, "heuristics result count",
     api->GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                       &count, NULL));
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  if (count <= 0) {
    gb_fail(g, "heuristics: no engine config for this graph", CUDNN_STATUS_NOT_SUPPORTED);
    return;
  }
  if (count > 16) count = 16;
  cudnnBackendDescriptor_t cfgs[16];
  for (int64_t i = 0; i < count; i++) cfgs[i] = gb_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "create engine config");
  GB(g, "heuristics results",
     api->GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                       &count, cfgs));
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  char step[96] = "every engine config refused by the deterministic filter";
  for (int64_t i = 0; i < count && g->st == CUDNN_STATUS_SUCCESS; i++) {
    if (deterministic && cfg_nondeterministic(g, cfgs[i])) continue;
    cudnnBackendDescriptor_t plan = NULL;
    cudnnStatus_t s = api->CreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    if (s == CUDNN_STATUS_SUCCESS)
      s = api->SetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
      s = api->SetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
    if (s == CUDNN_STATUS_SUCCESS) s = api->Finalize(plan);
    if (s == CUDNN_STATUS_SUCCESS) {
      int64_t n = 0;
      g->p->plan = plan;
      GB(g, "plan workspace size",
         api->GetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                           &g->p->ws_bytes));
      cudnnBackendDescriptor_t eng = NULL;
      g->p->engine = -1;
      if (api->CreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) == CUDNN_STATUS_SUCCESS) {
        if (api->GetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                              1, &n, &eng) == CUDNN_STATUS_SUCCESS)
          api->GetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                            &g->p->engine);
        api->DestroyDescriptor(eng);
      }
      return;
    }
    if (plan) api->DestroyDescriptor(plan);
    last = s;
    snprintf(step, sizeof step, "finalize plan (engine config %lld of %lld)", (long long)i + 1,
             (long long)count);
  }
  gb_fail(g, step, last);
}

cudnnStatus_t zc_dnn_build(const zc_dnn_api_t *api, cudnnHandle_t h, const zc_dnn_shape_t *sh,
                           int backward, zc_dnn_plan_t *p, char *why, size_t n) {
  memset(p, 0, sizeof *p);
  gb_t g = {.api = api, .p = p, .next_uid = ZC_UID_VIRTUAL, .st = CUDNN_STATUS_SUCCESS, .why = why,
            .nwhy = n};
  why[0] = 0;
  dims_t d;
  dims_of(sh, &d);
  if (backward)
    build_backward(&g, &d, sh->mask_after_stats, sh->fast);
  else build_forward(&g, &d);
  cudnnBackendDescriptor_t graph = gb_new(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "create graph");
  gb_set(&g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.nops, g.ops,
         "graph ops");
  gb_set(&g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
  gb_finalize(&g, graph, "finalize graph");
  const bool graph_ok = g.st == CUDNN_STATUS_SUCCESS;
  if (graph_ok) plan_from_heuristics(&g, h, graph, CUDNN_HEUR_MODE_A, backward && !sh->fast);
  if (graph_ok && g.st != CUDNN_STATUS_SUCCESS) {
    /* mode A found nothing that finalizes: the fallback list before giving up */
    char first[512];
    snprintf(first, sizeof first, "%s", why);
    g.st = CUDNN_STATUS_SUCCESS;
    plan_from_heuristics(&g, h, graph, CUDNN_HEUR_MODE_FALLBACK, backward && !sh->fast);
    if (g.st != CUDNN_STATUS_SUCCESS) {
      char second[512];
      snprintf(second, sizeof second, "%s", why);
      snprintf(why, n, "heuristics mode A: %.400s; fallback: %.400s", first, second);
    }
  }
  if (g.st != CUDNN_STATUS_SUCCESS) zc_dnn_plan_free(api, p);
  return g.st;
}

void zc_dnn_plan_free(const zc_dnn_api_t *api, zc_dnn_plan_t *p) {
  if (p->plan) api->DestroyDescriptor(p->plan);
  for (int i = p->ndesc - 1; i >= 0; i--) api->DestroyDescriptor(p->desc[i]);
  memset(p, 0, sizeof *p);
}

#else
typedef int zc_dnn_graph_unused_t; /* ISO C: a translation unit is not empty */
#endif
