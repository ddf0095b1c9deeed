/*
 * tests/cuda_emu/include/cublasLt.h - the CPU emulation's cuBLASLt: the documented
 * column-major contract (D = alpha op(A) op(B) + beta C, layouts as rows, columns and
 * leading dimension, the BIAS epilogue adding bias[row], GELU_AUX(_BIAS) storing the
 * GELU input in the aux matrix, DGELU(_BGRAD) multiplying by gelu'(aux) and summing each
 * row into the bias gradient, BGRADB summing op(B) over k per column; GELU is the tanh
 * form) computed naively in double,
 * with the shape checks the real heuristic query makes. It checks how the kernels
 * describe their row-major products, not cuBLASLt itself.
 */
#ifndef ZEROC_CUDA_EMU_CUBLASLT_H
#define ZEROC_CUDA_EMU_CUBLASLT_H
#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_INVALID_VALUE = 7
} cublasStatus_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU_AUX = 160,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
  CUBLASLT_EPILOGUE_DGELU = 192,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 208,
  CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;
struct emu_lt_desc {
  int ct;
  int ta = 0, tb = 0;
  uint32_t epi = 1;
  const void *bias = nullptr;
  int bias_type = -1;
  void *aux = nullptr;
  int64_t aux_ld = 0;
};
struct emu_lt_layout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
};
struct emu_lt_pref {
  int dummy;
};
typedef void *cublasLtHandle_t;
typedef emu_lt_desc *cublasLtMatmulDesc_t;
typedef emu_lt_layout *cublasLtMatrixLayout_t;
typedef emu_lt_pref *cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  int id;
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
inline const char *cublasLtGetStatusString(cublasStatus_t) { return "emulated status"; }
inline const char *cublasLtGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_EMU"; }
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = (void *)1;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct,
                                               cudaDataType_t) {
  *d = new emu_lt_desc;
  (*d)->ct = ct;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                                     cublasLtMatmulDescAttributes_t a,
                                                     const void *v, size_t n) {
  switch (a) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->ta, v, 4);
    break;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->tb, v, 4);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->epi, v, 4);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    if (n != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->bias, v, n);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->bias_type, v, 4);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    if (n != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->aux, v, n);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    if (n != 8) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->aux_ld, v, 8);
    break;
  }
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t,
                                                 uint64_t r, uint64_t c, int64_t ld) {
  if (ld < (int64_t)r) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new emu_lt_layout{t, r, c, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new emu_lt_pref;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                           cublasLtMatmulPreferenceAttributes_t a,
                                                           const void *, size_t n) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && n != 8) return CUBLAS_STATUS_INVALID_VALUE;
  if (a != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && n != 4) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                               cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t, int,
                               cublasLtMatmulHeuristicResult_t *r, int *found) {
  // shape consistency as cuBLASLt would check it
  uint64_t m = dd->rows, n = dd->cols;
  uint64_t am = d->ta ? a->cols : a->rows, ak = d->ta ? a->rows : a->cols;
  uint64_t bk = d->tb ? b->cols : b->rows, bn = d->tb ? b->rows : b->cols;
  if (am != m || bn != n || ak != bk || c->rows != m || c->cols != n) {
    *found = 0;
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // the aux matrix of the GELU epilogues: ld a multiple of 8, at least the rows of D
  if ((d->epi & 128) && (!d->aux || d->aux_ld % 8 || d->aux_ld < (int64_t)m)) {
    *found = 0;
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if ((d->epi & (16 | 512)) && !d->bias) {
    *found = 0;
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  r->algo.id = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}
inline double emu_ld(const void *p, int type, size_t i) {
  if (type == CUDA_R_32F) return ((const float *)p)[i];
  uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline void emu_st(void *p, int type, size_t i, double v) {
  float f = (float)v;
  if (type == CUDA_R_32F) {
    ((float *)p)[i] = f;
    return;
  }
  uint32_t u;
  memcpy(&u, &f, 4);
  ((uint16_t *)p)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline double emu_gelu(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
inline double emu_gelu_grad(double x) {
  double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha,
                                     const void *A, cublasLtMatrixLayout_t la, const void *B,
                                     cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                                     cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                                     const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t) {
  const float al = *(const float *)alpha, be = *(const float *)beta;
  const uint64_t m = ld->rows, n = ld->cols, k = d->ta ? la->rows : la->cols;
  std::vector<double> out(m * n);
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t i = 0; i < m; i++) {
      double acc = 0;
      for (uint64_t p = 0; p < k; p++) {
        double a =
            d->ta ? emu_ld(A, la->type, p + i * la->ld) : emu_ld(A, la->type, i + p * la->ld);
        double b =
            d->tb ? emu_ld(B, lb->type, j + p * lb->ld) : emu_ld(B, lb->type, p + j * lb->ld);
        acc += a * b;
      }
      double v = al * acc;
      if (be != 0) v += be * emu_ld(C, lc->type, i + j * lc->ld);
      if (d->epi == CUBLASLT_EPILOGUE_BIAS || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        v += emu_ld(d->bias, d->bias_type, i);
      if (d->epi == CUBLASLT_EPILOGUE_GELU_AUX || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        emu_st(d->aux, ld->type, i + j * d->aux_ld, v);
        v = emu_gelu(v);
      }
      if (d->epi == CUBLASLT_EPILOGUE_DGELU || d->epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
        v *= emu_gelu_grad(emu_ld(d->aux, ld->type, i + j * d->aux_ld));
      out[i + j * m] = v;
    }
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t i = 0; i < m; i++) emu_st(D, ld->type, i + j * ld->ld, out[i + j * m]);
  // bias gradients: written (not added), in the bias data type
  if (d->epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
    for (uint64_t i = 0; i < m; i++) {
      double s = 0;
      for (uint64_t j = 0; j < n; j++) s += out[i + j * m];
      emu_st((void *)d->bias, d->bias_type, i, s);
    }
  if (d->epi == CUBLASLT_EPILOGUE_BGRADB)
    for (uint64_t j = 0; j < n; j++) {
      double s = 0;
      for (uint64_t p = 0; p < k; p++)
        s += d->tb ? emu_ld(B, lb->type, j + p * lb->ld) : emu_ld(B, lb->type, p + j * lb->ld);
      emu_st((void *)d->bias, d->bias_type, j, s);
    }
  return CUBLAS_STATUS_SUCCESS;
}
#endif
