/*
 * kernels/cuda/matmul.cu - linear layers through cuBLASLt, fp32 accumulation: the
 * forward with the BIAS epilogue (GELU_AUX_BIAS for a linear layer followed by GELU),
 * the backward's dinp and dweight as GEMMs that accumulate (beta 1) or overwrite
 * (beta 0), the GELU's backward in dinp's epilogue (DGELU, DGELU_BGRAD) and dbias in
 * dweight's (BGRADB); where cuBLASLt offers no algorithm for an epilogue (or with
 * ZEROC_CUDA_LT_EPILOGUE=0, or GELU in fp32: see gelu_epilogue) the plain GEMM, the GELU
 * kernels of elementwise.cu and the deterministic two-pass column sum below do the same
 * work. cuBLASLt's GELU is GPT-2's tanh form (its documentation names no formula;
 * test_kernels_cuda checks it against the cpu's tanh GELU).
 *
 * Row-major X (r,c) is column-major X^T (c,r) with leading dimension c, so every
 * product below is the transpose of the one in the comment, as cuBLASLt sees it.
 * fp32 data is multiplied in exact fp32 (CUBLAS_COMPUTE_32F) unless ZEROC_CUDA_TF32=1.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.cuh"

/* Largest power of two (<= 256) dividing the address: cuBLASLt's heuristics assume
 * 256-byte aligned matrices unless told otherwise, and views into flat parameter
 * buffers are only 16-byte aligned. */
static uint32_t alignment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

/* ---- the GEMM cache ------------------------------------------------------------------
 * Creating a descriptor, three layouts and a preference and asking the heuristic costs
 * tens of microseconds of host time per GEMM, as much as a small GEMM runs on an H100.
 * Everything that decides the algorithm (shape, transposes, dtype, compute type,
 * epilogue, leading dimensions, the alignment of every pointer) is the key; the
 * pointers themselves are set on the cached descriptor at each call.
 *
 * Size: a GPT step has about 15 distinct GEMMs (5 forward, 10 backward) per micro-batch
 * shape, each in up to 5 alignment classes (parameter and gradient views into flat
 * buffers are 16- to 256-byte aligned), a second batch shape for the last or an eval
 * micro-batch: ~150 at worst, 256 slots keep them all with room for tensor parallelism's
 * and the head's shapes. Open addressing with a short probe; a full probe evicts its
 * first slot (an extra heuristic query later, never a wrong result). */

#define LT_SLOTS 256
#define LT_PROBE 8

typedef struct lt_key {
  int32_t m, n, k, lda, ldb, ldd;
  int32_t ta, tb, dt, ct;
  uint32_t epi;
  int32_t bias_type;
  int64_t aux_ld;
  uint32_t al_a, al_b, al_d, al_bias, al_aux;
} lt_key_t;

typedef struct lt_entry {
  int used;
  int found; /* 0: cuBLASLt has no algorithm for this key (remembered too) */
  lt_key_t key;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulAlgo_t algo;
} lt_entry_t;

struct zc_lt_cache {
  lt_entry_t e[LT_SLOTS];
};

static void lt_entry_clear(lt_entry_t *e) {
  if (e->ld) cublasLtMatrixLayoutDestroy(e->ld);
  if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
  if (e->la) cublasLtMatrixLayoutDestroy(e->la);
  if (e->op) cublasLtMatmulDescDestroy(e->op);
  memset(e, 0, sizeof *e);
}

void zc_lt_cache_free(struct zc_lt_cache *c) {
  if (!c) return;
  for (int i = 0; i < LT_SLOTS; i++)
    if (c->e[i].used) lt_entry_clear(&c->e[i]);
  free(c);
}

static uint32_t lt_hash(const lt_key_t *key) {
  const unsigned char *b = (const unsigned char *)key;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < sizeof *key; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* What an epilogue needs besides the plain product. */
typedef struct lt_epi {
  uint32_t epi;      /* CUBLASLT_EPILOGUE_* */
  void *bias;        /* BIAS: the bias (read); BGRAD*: the bias gradient (written) */
  int32_t bias_type; /* its cudaDataType */
  void *aux;         /* GELU_AUX_BIAS: the GELU input (written); DGELU*: (read) */
  int64_t aux_ld;
} lt_epi_t;

/* Sets the epilogue's pointers on a (cached or new) descriptor. */
static cublasStatus_t lt_set_pointers(cublasLtMatmulDesc_t op, const lt_epi_t *x) {
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (x->bias)
    s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x->bias,
                                       sizeof x->bias);
  if (s == CUBLAS_STATUS_SUCCESS && x->aux)
    s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x->aux,
                                       sizeof x->aux);
  return s;
}

#define LT(call)                                                                                   \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      res = ZEROC_FAIL(ZEROC_ERR_CUDA, "%s: %s failed: %s (m %d, n %d, k %d, %s, epilogue %u)",    \
                       what, #call, cublasLtGetStatusString(s_), key->m, key->n, key->k,           \
                       key->dt == CUDA_R_16BF ? "bf16" : "fp32", key->epi);                        \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

/* Fills entry e for `key`: descriptor, layouts and the heuristic's first algorithm
 * (e->found 0 when there is none). */
static zeroc_result_t lt_entry_build(zc_state_t *st, const char *what, const lt_key_t *key,
                                     const lt_epi_t *x, lt_entry_t *e) {
  zeroc_result_t res = ZEROC_OK;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  const uint64_t ws = st->lt_ws_bytes;
  const cudaDataType_t dt = (cudaDataType_t)key->dt;
  memset(&heur, 0, sizeof heur);
  e->used = 1;
  e->key = *key;
  LT(cublasLtMatmulDescCreate(&e->op, (cublasComputeType_t)key->ct, CUDA_R_32F));
  LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &key->ta, sizeof key->ta));
  LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &key->tb, sizeof key->tb));
  if (key->epi != CUBLASLT_EPILOGUE_DEFAULT)
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &key->epi,
                                      sizeof key->epi));
  if (x->bias)
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &key->bias_type,
                                      sizeof key->bias_type));
  if (x->aux)
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &key->aux_ld,
                                      sizeof key->aux_ld));
  LT(lt_set_pointers(e->op, x)); /* the heuristic reads their alignment */
  LT(cublasLtMatrixLayoutCreate(&e->la, dt, key->ta ? key->k : key->m, key->ta ? key->m : key->k,
                                key->lda));
  LT(cublasLtMatrixLayoutCreate(&e->lb, dt, key->tb ? key->n : key->k, key->tb ? key->k : key->n,
                                key->ldb));
  LT(cublasLtMatrixLayoutCreate(&e->ld, dt, key->m, key->n, key->ldd));
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                          sizeof ws));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                          &key->al_a, sizeof key->al_a));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                          &key->al_b, sizeof key->al_b));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                          &key->al_d, sizeof key->al_d));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                          &key->al_d, sizeof key->al_d));
  {
    /* "no algorithm" may come back as a status (an epilogue this build lacks): the
     * caller then takes the plain path, so only the plain GEMM's failure is an error */
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(st->lt, e->op, e->la, e->lb, e->ld, e->ld,
                                                      pref, 1, &heur, &found);
    if (s != CUBLAS_STATUS_SUCCESS && key->epi == CUBLASLT_EPILOGUE_DEFAULT) LT(s);
    if (s != CUBLAS_STATUS_SUCCESS) found = 0;
  }
  e->found = found > 0;
  if (e->found) e->algo = heur.algo;
  cublasLtMatmulPreferenceDestroy(pref);
  return ZEROC_OK;
fail:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  lt_entry_clear(e);
  return res;
}

/* The cache entry of `key`, built on a miss. */
static zeroc_result_t lt_lookup(zc_state_t *st, const char *what, const lt_key_t *key,
                                const lt_epi_t *x, lt_entry_t **out) {
  if (!st->lt_cache) {
    st->lt_cache = (struct zc_lt_cache *)calloc(1, sizeof *st->lt_cache);
    if (!st->lt_cache)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cuBLASLt cache (%zu bytes)", sizeof *st->lt_cache);
  }
  lt_entry_t *slots = st->lt_cache->e, *free_slot = NULL;
  const uint32_t h = lt_hash(key);
  for (int p = 0; p < LT_PROBE; p++) {
    lt_entry_t *e = &slots[(h + (uint32_t)p) % LT_SLOTS];
    if (!e->used) {
      if (!free_slot) free_slot = e;
      continue;
    }
    if (!memcmp(&e->key, key, sizeof *key)) {
      *out = e;
      return ZEROC_OK;
    }
  }
  if (!free_slot) { /* all probed slots hold other keys: the first one makes way */
    free_slot = &slots[h % LT_SLOTS];
    lt_entry_clear(free_slot);
  }
  ZEROC_CHECK(lt_entry_build(st, what, key, x, free_slot));
  *out = free_slot;
  return ZEROC_OK;
}

/*
 * D (m,n) = op(A) (m,kk) @ op(B) (kk,n) + beta D, column-major, with the epilogue x
 * (NULL: none), compute fp32, storage k->dtype. ta / tb: A is stored (kk,m) / B is
 * stored (n,kk). With an epilogue and `no_algo` given, a shape cuBLASLt has no
 * algorithm for sets *no_algo and runs nothing (the caller falls back); otherwise it
 * is an error.
 */
static zeroc_result_t lt_gemm(zeroc_kernels_t *k, cudaStream_t stream, const char *what, bool ta,
                              bool tb, int m, int n, int kk, const void *A, int lda, const void *B,
                              int ldb, void *D, int ldd, float beta, const lt_epi_t *x,
                              bool *no_algo) {
  zc_state_t *st = zc_state(k);
  zeroc_result_t res = ZEROC_OK;
  const lt_epi_t none = {CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, NULL, 0};
  const float alpha = 1.0f;
  lt_key_t kb, *key = &kb;
  lt_entry_t *e = NULL;
  if (!x) x = &none;
  memset(&kb, 0, sizeof kb); /* padding too: keys are compared as bytes */
  kb.m = m, kb.n = n, kb.k = kk, kb.lda = lda, kb.ldb = ldb, kb.ldd = ldd;
  kb.ta = ta ? CUBLAS_OP_T : CUBLAS_OP_N, kb.tb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  kb.dt = k->dtype == ZEROC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  kb.ct = k->dtype == ZEROC_FP32 && st->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  kb.epi = x->epi;
  kb.bias_type = x->bias ? x->bias_type : 0;
  kb.aux_ld = x->aux ? x->aux_ld : 0;
  kb.al_a = alignment_of(A), kb.al_b = alignment_of(B), kb.al_d = alignment_of(D);
  kb.al_bias = x->bias ? alignment_of(x->bias) : 0;
  kb.al_aux = x->aux ? alignment_of(x->aux) : 0;
  ZEROC_CHECK(lt_lookup(st, what, key, x, &e));
  if (!e->found) {
    if (no_algo && x->epi != CUBLASLT_EPILOGUE_DEFAULT) {
      *no_algo = true;
      return ZEROC_OK;
    }
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s: cuBLASLt has no algorithm for m %d, n %d, k %d, %s, epilogue %u, "
                      "alignments A %u B %u D %u bytes",
                      what, m, n, kk, zeroc_dtype_name(k->dtype), x->epi, kb.al_a, kb.al_b,
                      kb.al_d);
  }
  if (no_algo) *no_algo = false;
  LT(lt_set_pointers(e->op, x));
  {
    cublasStatus_t s = cublasLtMatmul(st->lt, e->op, &alpha, A, e->la, B, e->lb, &beta, D, e->ld,
                                      D, e->ld, &e->algo, st->lt_ws, st->lt_ws_bytes, stream);
    /* an epilogue the heuristic offered but the launch refuses: remembered as having no
     * algorithm, and the caller falls back (nothing was launched) */
    if (s == CUBLAS_STATUS_NOT_SUPPORTED && no_algo && x->epi != CUBLASLT_EPILOGUE_DEFAULT) {
      e->found = 0;
      *no_algo = true;
      return ZEROC_OK;
    }
    LT(s);
  }
  return ZEROC_OK;
fail:
  return res;
}
#undef LT

static int32_t lt_dtype(const zeroc_kernels_t *k) {
  return k->dtype == ZEROC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Whether GELU goes into the epilogue: bf16 by default. fp32 stays on the kernels of
 * elementwise.cu (tanhf, the reference the GPU-vs-CPU runs compare to) unless
 * ZEROC_CUDA_LT_EPILOGUE=2, which lets test_kernels_cuda measure the epilogue's GELU
 * against the cpu at fp32 precision. The bias gradients (plain sums) go into the
 * epilogue in both dtypes. */
static bool gelu_epilogue(const zeroc_kernels_t *k) {
  const int e = zc_state((zeroc_kernels_t *)k)->lt_epilogues;
  return e >= 2 || (e == 1 && k->dtype == ZEROC_BF16);
}

// inp (N,C), weight (OC,C), bias (OC) -> out (N,OC)
extern "C" zeroc_result_t zeroc_i_cuda_matmul_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                      void *out, const void *inp,
                                                      const void *weight, const void *bias, int N,
                                                      int C, int OC) {
  ZC_NONNULL("matmul_forward", out);
  ZC_NONNULL("matmul_forward", inp);
  ZC_NONNULL("matmul_forward", weight);
  const lt_epi_t x = {CUBLASLT_EPILOGUE_BIAS, (void *)bias, lt_dtype(k), NULL, 0};
  /* out^T (OC,N) = weight (OC,C) @ inp^T (C,N) + bias */
  return lt_gemm(k, zc_stream(k, s), "matmul_forward", true, false, OC, N, C, weight, C, inp, C,
                 out, OC, 0.0f, bias ? &x : NULL, NULL);
}

// inp (N,C), weight (OC,C), bias (OC) -> pre (N,OC) = inp @ weight^T + bias, out = gelu(pre)
extern "C" zeroc_result_t zeroc_i_cuda_matmul_forward_gelu(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                           void *pre, void *out, const void *inp,
                                                           const void *weight, const void *bias,
                                                           int N, int C, int OC) {
  ZC_NONNULL("matmul_forward_gelu", pre);
  ZC_NONNULL("matmul_forward_gelu", out);
  ZC_NONNULL("matmul_forward_gelu", inp);
  ZC_NONNULL("matmul_forward_gelu", weight);
  bool no_algo = true;
  /* the GELU input goes out as the epilogue's aux matrix: ld a multiple of 8 */
  if (gelu_epilogue(k) && OC % 8 == 0 && zc_aligned16(pre)) {
    const lt_epi_t x = {bias ? (uint32_t)CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                             : (uint32_t)CUBLASLT_EPILOGUE_GELU_AUX,
                        (void *)bias, lt_dtype(k), pre, OC};
    ZEROC_CHECK(lt_gemm(k, zc_stream(k, s), "matmul_forward_gelu", true, false, OC, N, C, weight,
                        C, inp, C, out, OC, 0.0f, &x, &no_algo));
  }
  if (!no_algo) return ZEROC_OK;
  ZEROC_CHECK(zeroc_i_cuda_matmul_forward(k, s, pre, inp, weight, bias, N, C, OC));
  return zeroc_i_cuda_gelu_forward(k, s, out, pre, (size_t)N * OC);
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
  __shared__ float sh[ZC_COLSUM_Y][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const float sum = zc_column_sum(part, groups, (size_t)OC, c, c < OC, sh);
  if (threadIdx.y == 0 && c < OC) dbias[c] = zc_to<T>(zc_f(dbias[c]) + sum);
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
  dim3 grid2((OC + 31) / 32), block2(32, ZC_COLSUM_Y);
  colsum_final_kernel<T><<<grid2, block2, 0, stream>>>(dbias, part, groups, OC);
  ZC_LAUNCHED("colsum_final_kernel", grid2, block2, 0);
  return ZEROC_OK;
}

// dout (N,OC) -> dbias (OC) += column sums
static zeroc_result_t dbias_colsum(zeroc_kernels_t *k, cudaStream_t stream, void *dbias,
                                   const void *dout, int N, int OC) {
  if (k->dtype == ZEROC_BF16)
    return dbias_launch(k, stream, (bf16 *)dbias, (const bf16 *)dout, N, OC);
  return dbias_launch(k, stream, (float *)dbias, (const float *)dout, N, OC);
}

/* ---- the GELU backward and its bias gradient in one pass ----------------------------- */

#define GC_COLS (32 * 8) /* a block's columns: 32 threads x 8 (one 16-byte access each) */

// d (N,C) = gelu'(pre) * d in place; part (groups, C) = each group's column sums of d as
// rounded and stored. Thread (x, y) sums rows r0+y, r0+y+8, ... of its 8 columns, then
// the 8 y's are added in order: the order of colsum_partial_kernel, so the sums are its
// bits, for one read of d less (1.3B GPT on an H200: 200 us a layer in two kernels).
template <typename T>
__global__ void gelu_scale_colsum_kernel(T *d, const T *pre, float *part, int N, int C,
                                         int rows_per_group) {
  __shared__ float sh[CS_ROWS][GC_COLS + 1];
  const int c0 = (blockIdx.x * 32 + threadIdx.x) * 8, g = blockIdx.y;
  const int r0 = g * rows_per_group, r1 = min(N, r0 + rows_per_group);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c0 < C) /* C % 8 == 0: a thread's 8 columns are all in or all out */
    for (int r = r0 + threadIdx.y; r < r1; r += CS_ROWS) {
      const size_t i = (size_t)r * C + c0;
      float x[8], v[8];
      zc_ld8(pre + i, x);
      zc_ld8(d + i, v);
#pragma unroll
      for (int e = 0; e < 8; e++) v[e] = zc_f(zc_to<T>(gelu_grad(x[e]) * v[e]));
      zc_st8(d + i, v);
#pragma unroll
      for (int e = 0; e < 8; e++) acc[e] += v[e];
    }
#pragma unroll
  for (int e = 0; e < 8; e++) sh[threadIdx.y][threadIdx.x * 8 + e] = acc[e];
  __syncthreads();
  const int t = threadIdx.y * 32 + threadIdx.x, c = blockIdx.x * GC_COLS + t;
  if (c < C) {
    float sum = 0.0f;
#pragma unroll
    for (int y = 0; y < CS_ROWS; y++) sum += sh[y][t];
    part[(size_t)g * C + c] = sum;
  }
}

template <typename T>
static zeroc_result_t gelu_scale_colsum_launch(zeroc_kernels_t *k, cudaStream_t stream, T *d,
                                               const T *pre, T *dbias, int N, int C) {
  int rpg = 0, groups = 0;
  ZEROC_CHECK(zc_row_groups(k, "matmul_backward (dgelu, dbias)", N, (size_t)C, &rpg, &groups));
  float *part = (float *)zc_state(k)->scratch;
  dim3 grid1((C + GC_COLS - 1) / GC_COLS, groups), block1(32, CS_ROWS);
  gelu_scale_colsum_kernel<T><<<grid1, block1, 0, stream>>>(d, pre, part, N, C, rpg);
  ZC_LAUNCHED("gelu_scale_colsum_kernel", grid1, block1, 0);
  dim3 grid2((C + 31) / 32), block2(32, ZC_COLSUM_Y);
  colsum_final_kernel<T><<<grid2, block2, 0, stream>>>(dbias, part, groups, C);
  ZC_LAUNCHED("colsum_final_kernel", grid2, block2, 0);
  return ZEROC_OK;
}

/* d (N,C) = gelu'(pre) * d, dbias (C) += its column sums: one pass where the rows are
 * whole 16-byte vectors, else gelu_scale and the two-pass column sum. */
static zeroc_result_t gelu_scale_dbias(zeroc_kernels_t *k, zeroc_stream_t *s, void *d,
                                       const void *pre, void *dbias, int N, int C) {
  cudaStream_t stream = zc_stream(k, s);
  if (C % 8 == 0 && zc_aligned16(d) && zc_aligned16(pre)) {
    if (k->dtype == ZEROC_BF16)
      return gelu_scale_colsum_launch(k, stream, (bf16 *)d, (const bf16 *)pre, (bf16 *)dbias, N, C);
    return gelu_scale_colsum_launch(k, stream, (float *)d, (const float *)pre, (float *)dbias, N,
                                    C);
  }
  ZEROC_CHECK(zeroc_i_cuda_gelu_scale(k, s, d, pre, (size_t)N * C));
  return dbias_colsum(k, stream, dbias, d, N, C);
}

/* Where a bias-gradient epilogue writes (cuBLASLt writes it, in D's dtype, rather than
 * adding to it): the reduction scratch, then added to the gradient. NULL when the scratch
 * is too small or the epilogues are off. */
static void *bgrad_buffer(zeroc_kernels_t *k, int len) {
  zc_state_t *st = zc_state(k);
  size_t bytes = (size_t)len * zeroc_dtype_size(k->dtype);
  return st->lt_epilogues && bytes <= st->scratch_bytes ? st->scratch : NULL;
}

/* dinp (N,C) = gelu'(pre) * (dout @ weight), dpre_bias (C) += its column sums (may be NULL) */
static zeroc_result_t dinp_gelu(zeroc_kernels_t *k, zeroc_stream_t *s, void *dinp, void *dpre_bias,
                                const void *dout, const void *weight, const void *pre, int N,
                                int C, int OC) {
  cudaStream_t stream = zc_stream(k, s);
  bool no_algo = true;
  void *bg = dpre_bias ? bgrad_buffer(k, C) : NULL;
  /* The DGELU(_BGRAD) epilogue only at ZEROC_CUDA_LT_EPILOGUE=2: on an H100 it took 0.325 ms
   * for GPT-2's MLP down-projection (N 8192, C 3072, OC 768, bf16) against 0.242 ms for
   * the plain GEMM, gelu_scale and the column sum (zeroc_kernels_bench, 2026-11-24). */
  if (zc_state(k)->lt_epilogues >= 2 && C % 8 == 0 && zc_aligned16(pre) && (bg || !dpre_bias)) {
    const lt_epi_t x = {dpre_bias ? (uint32_t)CUBLASLT_EPILOGUE_DGELU_BGRAD
                                  : (uint32_t)CUBLASLT_EPILOGUE_DGELU,
                        bg, lt_dtype(k), (void *)pre, C};
    /* dinp^T (C,N) = gelu'(pre^T) * (weight^T (C,OC) @ dout^T (OC,N)); the bias gradient
     * sums each of its C rows over the N columns */
    ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dinp, dgelu)", false, false, C, N, OC, weight,
                        C, dout, OC, dinp, C, 0.0f, &x, &no_algo));
    if (!no_algo && dpre_bias) return zeroc_i_cuda_add(k, s, dpre_bias, bg, (size_t)C);
  }
  if (!no_algo) return ZEROC_OK;
  ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dinp)", false, false, C, N, OC, weight, C, dout,
                      OC, dinp, C, 0.0f, NULL, NULL));
  if (dpre_bias) return gelu_scale_dbias(k, s, dinp, pre, dpre_bias, N, C);
  return zeroc_i_cuda_gelu_scale(k, s, dinp, pre, (size_t)N * C);
}

// dout (N,OC), inp (N,C), weight (OC,C) -> dinp (N,C) += (or =), dweight (OC,C) +=,
// dbias (OC) +=; with pre: dinp = gelu'(pre) * (dout @ weight), dpre_bias (C) += its column sums
extern "C" zeroc_result_t zeroc_i_cuda_matmul_backward_ex(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                          void *dinp, void *dweight, void *dbias,
                                                          const void *dout, const void *inp,
                                                          const void *weight, int N, int C, int OC,
                                                          const void *pre, void *dpre_bias,
                                                          unsigned flags) {
  cudaStream_t stream = zc_stream(k, s);
  const float beta_in = (flags & ZEROC_K_DINP_SET) ? 0.0f : 1.0f;
  ZC_NONNULL("matmul_backward", dout);
  if (dinp) {
    ZC_NONNULL("matmul_backward", weight);
    /* dinp^T (C,N) (+)= weight^T (C,OC) @ dout^T (OC,N) */
    if (pre)
      ZEROC_CHECK(dinp_gelu(k, s, dinp, dpre_bias, dout, weight, pre, N, C, OC));
    else
      ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dinp)", false, false, C, N, OC, weight, C,
                          dout, OC, dinp, C, beta_in, NULL, NULL));
  }
  bool bias_done = !dbias;
  if (dweight) {
    ZC_NONNULL("matmul_backward", inp);
    bool no_algo = true;
    void *bg = dbias ? bgrad_buffer(k, OC) : NULL;
    if (bg) {
      /* dbias from B = dout in the epilogue: the sums over the GEMM's k (the N rows) */
      const lt_epi_t x = {CUBLASLT_EPILOGUE_BGRADB, bg, lt_dtype(k), NULL, 0};
      ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dweight, dbias)", false, true, C, OC, N, inp,
                          C, dout, OC, dweight, C, 1.0f, &x, &no_algo));
      if (!no_algo) ZEROC_CHECK(zeroc_i_cuda_add(k, s, dbias, bg, (size_t)OC));
      bias_done = !no_algo;
    }
    /* dweight^T (C,OC) += inp^T (C,N) @ dout (N,OC) */
    if (no_algo)
      ZEROC_CHECK(lt_gemm(k, stream, "matmul_backward (dweight)", false, true, C, OC, N, inp, C,
                          dout, OC, dweight, C, 1.0f, NULL, NULL));
  }
  return bias_done ? ZEROC_OK : dbias_colsum(k, stream, dbias, dout, N, OC);
}

extern "C" zeroc_result_t zeroc_i_cuda_matmul_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                       void *dinp, void *dweight, void *dbias,
                                                       const void *dout, const void *inp,
                                                       const void *weight, int N, int C, int OC) {
  return zeroc_i_cuda_matmul_backward_ex(k, s, dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                                         NULL, NULL, 0);
}
