/*
 * kernels/cuda/matmul.cu - linear layers through cuBLASLt, fp32 accumulation: the
 * forward with the BIAS epilogue, the backward's dinp and dweight as GEMMs with
 * beta = 1 (accumulating), and dbias as a deterministic two-pass column sum.
 *
 * Row-major X (r,c) is column-major X^T (c,r) with leading dimension c, so every
 * product below is the transpose of the one in the comment, as cuBLASLt sees it.
 * fp32 data is multiplied in exact fp32 (CUBLAS_COMPUTE_32F) unless ZEROC_CUDA_TF32=1.
 */
#include <string.h>

#include "kernels/cuda/common.cuh"

/* Largest power of two (<= 256) dividing the address: cuBLASLt's heuristics assume
 * 256-byte aligned matrices unless told otherwise, and views into flat parameter
 * buffers are only 16-byte aligned. */
static uint32_t alignment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

/*
 * D (m,n) = op(A) (m,kk) @ op(B) (kk,n) [+ bias (m) per row] + beta D, column-major,
 * compute fp32, storage k->dtype. ta / tb: A is stored (kk,m) / B is stored (n,kk).
 */
static zeroc_result_t lt_gemm(zeroc_kernels_t *k, cudaStream_t stream, const char *what, bool ta,
                              bool tb, int m, int n, int kk, const void *A, int lda, const void *B,
                              int ldb, void *D, int ldd, float beta, const void *bias) {
  zc_state_t *st = zc_state(k);
  zeroc_result_t res = ZEROC_OK;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  const float alpha = 1.0f;
  const cudaDataType_t dt = k->dtype == ZEROC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t ct =
      k->dtype == ZEROC_FP32 && st->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint32_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const int32_t bias_type = dt;
  const uint64_t ws = st->lt_ws_bytes;
  const uint32_t al_a = alignment_of(A), al_b = alignment_of(B), al_d = alignment_of(D);
  memset(&heur, 0, sizeof heur);

#define LT(call)                                                                                   \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      res = ZEROC_FAIL(ZEROC_ERR_CUDA, "%s: %s failed: %s (m %d, n %d, k %d, %s)", what, #call,    \
                       cublasLtGetStatusString(s_), m, n, kk, zeroc_dtype_name(k->dtype));         \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

  LT(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  if (bias) {
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                      sizeof epilogue));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                      sizeof bias_type));
  }
  LT(cublasLtMatrixLayoutCreate(&la, dt, ta ? kk : m, ta ? m : kk, lda));
  LT(cublasLtMatrixLayoutCreate(&lb, dt, tb ? n : kk, tb ? kk : n, ldb));
  LT(cublasLtMatrixLayoutCreate(&ld, dt, m, n, ldd));
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                          sizeof ws));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                          sizeof al_a));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                          sizeof al_b));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d,
                                          sizeof al_d));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                          sizeof al_d));
  LT(cublasLtMatmulAlgoGetHeuristic(st->lt, op, la, lb, ld, ld, pref, 1, &heur, &found));
  if (found < 1) {
    res = ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                     "%s: cuBLASLt has no algorithm for m %d, n %d, k %d, %s, alignments "
                     "A %u B %u D %u bytes",
                     what, m, n, kk, zeroc_dtype_name(k->dtype), al_a, al_b, al_d);
    goto fail;
  }
  LT(cublasLtMatmul(st->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, st->lt_ws,
                    st->lt_ws_bytes, stream));
#undef LT
fail:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return res;
}

// inp (N,C), weight (OC,C), bias (OC) -> out (N,OC)
extern "C" zeroc_result_t zeroc__cuda_matmul_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                     void *out, const void *inp, const void *weight,
                                                     const void *bias, int N, int C, int OC) {
  ZC_NONNULL("matmul_forward", out);
  ZC_NONNULL("matmul_forward", inp);
  ZC_NONNULL("matmul_forward", weight);
  /* out^T (OC,N) = weight (OC,C) @ inp^T (C,N) + bias */
  return lt_gemm(k, zc_stream(k, s), "matmul_forward", true, false, OC, N, C, weight, C, inp, C,
                 out, OC, 0.0f, bias);
}

/* ---- dbias: column sums of dout, two passes in a fixed order ------------------------ */

#define CS_COLS 32
#define CS_ROWS 8

// dout (N,OC) -> part (groups, OC): sums over each group of rows_per_group rows
template <typename T>
__global__ void colsum_partial_kernel(float *part, const T *dout, int N, int OC,
                                      int rows_per_group) {
  __shared__ float sh[CS_ROWS][CS_COLS + 1];
  const int c = blockIdx.x * CS_COLS + threadIdx.x, g = blockIdx.y;
  const int r0 = g * rows_per_group, r1 = min(N, r0 + rows_per_group);
  float acc = 0.0f;
  if (c < OC)
    for (int r = r0 + threadIdx.y; r < r1; r += CS_ROWS) acc += zc_f(dout[(size_t)r * OC + c]);
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < OC) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < CS_ROWS; y++) sum += sh[y][threadIdx.x];
    part[(size_t)g * OC + c] = sum;
  }
}

// part (groups, OC) -> dbias (OC) +=
template <typename T>
__global__ void colsum_final_kernel(T *dbias, const float *part, int groups, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float sum = 0.0f;
  for (int g = 0; g < groups; g++) sum += part[(size_t)g * OC + c];
  dbias[c] = zc_to<T>(zc_f(dbias[c]) + sum);
}

template <typename T>
static zeroc_result_t dbias_launch(zeroc_kernels_t *k, cudaStream_t stream, T *dbias, const T *dout,
                                   int N, int OC) {
  int rpg = 0, groups = 0;
  ZEROC_CHECK(zc_row_groups(k, "matmul_backward (dbias)", N, (size_t)OC, &rpg, &groups));
  float *part = (float *)zc_state(k)->scratch;
  dim3 grid1((OC + CS_COLS - 1) / CS_COLS, groups), block1(CS_COLS, CS_ROWS);
  colsum_partial_kernel<T><<<grid1, block1, 0, stream>>>(part, dout, N, OC, rpg);
  ZC_LAUNCHED("colsum_partial_kernel", grid1, block1, 0);
  dim3 grid2((OC + 255) / 256), block2(256);
  colsum_final_kernel<T><<<grid2, block2, 0, stream>>>(dbias, part, groups, OC);
  ZC_LAUNCHED("colsum_final_kernel", grid2, block2, 0);
  return ZEROC_OK;
}

// dout (N,OC), inp (N,C), weight (OC,C) -> dinp (N,C) +=, dweight (OC,C) +=, dbias (OC) +=
extern "C" zeroc_result_t zeroc__cuda_matmul_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                      void *dinp, void *dweight, void *dbias,
                                                      const void *dout, const void *inp,
                                                      const void *weight, int N, int C, int OC) {
  cudaStream_t stream = zc_stream(k, s);
  ZC_NONNULL("matmul_backward", dout);
  if (dinp) {
    ZC_NONNULL("matmul_backward", weight);
    /* dinp^T (C,N) += weight^T (C,OC) @ dout^T (OC,N) */
    ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dinp)", false, false, C, N, OC, weight, C,
                        dout, OC, dinp, C, 1.0f, NULL));
  }
  if (dweight) {
    ZC_NONNULL("matmul_backward", inp);
    /* dweight^T (C,OC) += inp^T (C,N) @ dout (N,OC) */
    ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dweight)", false, true, C, OC, N, inp, C, dout,
                        OC, dweight, C, 1.0f, NULL));
  }
  if (dbias) {
    if (k->dtype == ZEROC_BF16)
      return dbias_launch(k, stream, (bf16 *)dbias, (const bf16 *)dout, N, OC);
    return dbias_launch(k, stream, (float *)dbias, (const float *)dout, N, OC);
  }
  return ZEROC_OK;
}
