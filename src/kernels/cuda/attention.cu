/*
 * kernels/cuda/attention.cu - causal multi-head attention, flash style: no T x T
 * matrix in memory. Tiles of 64 queries meet tiles of 64 keys/values in shared
 * memory (fp32), with an online softmax; the forward saves lse (B,NH,T).
 *
 * The backward recomputes the probabilities from q, k and lse and is deterministic
 * without float atomics: one kernel per key tile walks the query tiles and owns its
 * dk, dv rows; a second kernel per query tile walks the key tiles and owns its dq
 * rows. Each recomputes the scores (about 1.4x the arithmetic of an atomic dq), and
 * D = rowsum(dout * out) is computed on the fly from the tiles.
 *
 * 256 threads as 16 x 16: thread (ty, tx) holds rows ty + 16 i (i < 4) and columns
 * tx + 16 j of every 64 x 64 score tile, and columns tx + 16 j of the head dimension,
 * so the 16 threads of a row sit in one half-warp and reduce with shuffles. Scalar
 * fp32 arithmetic (no tensor cores): exact enough for 1e-5 checks in fp32.
 *
 * bf16 calls with head size 64 or 128 and no dropout go to the tensor-core kernels of
 * attention_mma.cu instead (ZEROC_CUDA_FLASH=0 keeps them here); these SIMT kernels are
 * the fp32 path, the fallback, and the reference the tensor-core ones are tested against.
 *
 * Dropout on the probabilities (dr): the row sums and lse are the undropped ones; what
 * meets v (forward, dv) and what multiplies dO V (dp) carries the mask, drawn from
 * kernels/dropout.h's hash of (sequence, global head, query, key) in every kernel alike.
 */
#include <math.h>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/common.cuh"

#define AT_TILE    64 /* queries (and keys) per tile */
#define AT_THREADS 256
#define AT_HS_MAX  128 /* largest head size */

/* Rows r0 .. r0+63 of a matrix with `stride` elements per row (src at this head's
 * column 0), HS columns, into dst [64][HSMAX+1] as fp32; rows >= Tn and columns >= HS
 * are 0. vec: HS % 8 == 0 and 16-byte aligned rows. */
template <typename T, int HSMAX>
__device__ __forceinline__ void load_tile(float *dst, const T *src, int r0, int Tn, size_t stride,
                                          int HS, bool vec) {
  constexpr int LD = HSMAX + 1;
  if (vec) {
    constexpr int PACKS = HSMAX / 8;
    for (int e = threadIdx.x; e < AT_TILE * PACKS; e += AT_THREADS) {
      const int r = e / PACKS, c = (e % PACKS) * 8;
      float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (r0 + r < Tn && c < HS) zc_ld8(src + (size_t)(r0 + r) * stride + c, v);
#pragma unroll
      for (int q = 0; q < 8; q++) dst[r * LD + c + q] = v[q];
    }
  } else {
    for (int e = threadIdx.x; e < AT_TILE * HSMAX; e += AT_THREADS) {
      const int r = e / HSMAX, c = e % HSMAX;
      dst[r * LD + c] = r0 + r < Tn && c < HS ? zc_f(src[(size_t)(r0 + r) * stride + c]) : 0.0f;
    }
  }
}

/* Sum over the 16 threads of a row (one half-warp). */
__device__ __forceinline__ float row_sum16(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float row_max16(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

/* ---- forward ------------------------------------------------------------------------ */

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T); block (query tile, head, batch)
template <typename T, int HSMAX>
__global__ void __launch_bounds__(AT_THREADS)
    attention_forward_kernel(T *out, float *lse, const T *qkv, int Tn, int C, int NH, int HS,
                             float scale, bool vec, zeroc_dropout_t dp, bool dr) {
  constexpr int LD = HSMAX + 1, LP = AT_TILE + 1, DPT = HSMAX / 16;
  extern __shared__ float smem[];
  float *sQ = smem, *sK = sQ + AT_TILE * LD, *sV = sK + AT_TILE * LD, *sP = sV + AT_TILE * LD;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  /* the longest (last) query tiles start first */
  const int q0 = (gridDim.x - 1 - blockIdx.x) * AT_TILE, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const T *q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *kp = q + C, *vp = q + 2 * C;

  load_tile<T, HSMAX>(sQ, q, q0, Tn, stride, HS, vec);
  /* dropout: the mask rows of this thread's 4 queries */
  uint64_t rk[4];
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(dp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(dp.p) : 1.0f;
#pragma unroll
  for (int i = 0; i < 4; i++)
    rk[i] =
        dr ? zeroc_i_dropout_row_key(dp.key, zeroc_i_dropout_row_att(&dp, b, h, q0 + ty + 16 * i))
           : 0;
  float m[4], l[4], o[4][DPT];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int d = 0; d < DPT; d++) o[i][d] = 0.0f;
  }

  const int kv_end = min(Tn, q0 + AT_TILE); /* causal: keys up to the tile's last query */
  for (int k0 = 0; k0 < kv_end; k0 += AT_TILE) {
    __syncthreads(); /* the previous tile's sK, sV, sP are no longer read */
    load_tile<T, HSMAX>(sK, kp, k0, Tn, stride, HS, vec);
    load_tile<T, HSMAX>(sV, vp, k0, Tn, stride, HS, vec);
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
    for (int d = 0; d < HS; d++) {
      float qv[4], kv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) qv[i] = sQ[(ty + 16 * i) * LD + d];
#pragma unroll
      for (int j = 0; j < 4; j++) kv[j] = sK[(tx + 16 * j) * LD + d];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) s[i][j] += qv[i] * kv[j];
    }

    /* online softmax: rescale what the row has so far to the new maximum */
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = q0 + ty + 16 * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int c = k0 + tx + 16 * j;
        s[i][j] = c <= r && c < Tn ? s[i][j] * scale : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float mnew = fmaxf(m[i], row_max16(mx));
      const float alpha = mnew == -INFINITY ? 1.0f : expf(m[i] - mnew);
      float rs = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mnew);
        float pv = p;
        if (dr && p != 0.0f)
          pv = zeroc_i_dropout_bits(rk[i], (uint32_t)(k0 + tx + 16 * j)) >= thr ? p * dsc : 0.0f;
        sP[(ty + 16 * i) * LP + tx + 16 * j] = pv;
        rs += p;
      }
      l[i] = l[i] * alpha + row_sum16(rs);
      m[i] = mnew;
#pragma unroll
      for (int d = 0; d < DPT; d++) o[i][d] *= alpha;
    }
    __syncthreads();

    /* o += P V */
    const int jn = min(AT_TILE, kv_end - k0);
    for (int j = 0; j < jn; j++) {
      float vv[DPT];
#pragma unroll
      for (int d = 0; d < DPT; d++) vv[d] = sV[j * LD + tx + 16 * d];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const float p = sP[(ty + 16 * i) * LP + j];
#pragma unroll
        for (int d = 0; d < DPT; d++) o[i][d] += p * vv[d];
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = q0 + ty + 16 * i;
    if (r >= Tn) continue;
    const float inv = 1.0f / l[i];
    T *y = out + ((size_t)b * Tn + r) * C + (size_t)h * HS;
#pragma unroll
    for (int d = 0; d < DPT; d++)
      if (tx + 16 * d < HS) y[tx + 16 * d] = zc_to<T>(o[i][d] * inv);
    if (tx == 0) lse[((size_t)b * NH + h) * Tn + r] = m[i] + logf(l[i]);
  }
}

/* ---- backward ----------------------------------------------------------------------- */

/* sD[r] = sum_d dO[r][d] * out[r][d] for the rows of a query tile (dO from shared
 * memory, out from global); the caller synchronises before using sD. */
template <typename T, int HSMAX>
__device__ __forceinline__ void tile_rowdot(float *sD, const float *sdO, const T *outp, int q0,
                                            int Tn, int C, int HS) {
  constexpr int LD = HSMAX + 1, DPT = HSMAX / 16;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = ty + 16 * i;
    float acc = 0.0f;
    if (q0 + r < Tn) {
      const T *y = outp + (size_t)(q0 + r) * C;
#pragma unroll
      for (int d = 0; d < DPT; d++)
        if (tx + 16 * d < HS) acc += sdO[r * LD + tx + 16 * d] * zc_f(y[tx + 16 * d]);
    }
    acc = row_sum16(acc);
    if (tx == 0) sD[r] = acc;
  }
}

// -> dqkv k and v parts (B,T,C each) +=; block (key tile, head, batch)
template <typename T, int HSMAX>
__global__ void __launch_bounds__(AT_THREADS)
    attention_backward_dkdv_kernel(T *dqkv, const T *dout, const T *qkv, const T *out,
                                   const float *lse, int Tn, int C, int NH, int HS, float scale,
                                   bool vec, bool vec_do, zeroc_dropout_t drp, bool dr) {
  constexpr int LD = HSMAX + 1, LP = AT_TILE + 1, DPT = HSMAX / 16;
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(drp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(drp.p) : 1.0f;
  extern __shared__ float smem[];
  float *sK = smem, *sV = sK + AT_TILE * LD, *sQ = sV + AT_TILE * LD, *sdO = sQ + AT_TILE * LD;
  float *sPt = sdO + AT_TILE * LD, *sdSt = sPt + AT_TILE * LP, *sL = sdSt + AT_TILE * LP,
        *sD = sL + AT_TILE;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  /* the first key tiles see the most queries: start them first */
  const int k0 = blockIdx.x * AT_TILE, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const T *q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *kp = q + C, *vp = q + 2 * C;
  const T *dop = dout + (size_t)b * Tn * C + (size_t)h * HS;
  const T *outp = out + (size_t)b * Tn * C + (size_t)h * HS;
  const float *lsep = lse + ((size_t)b * NH + h) * Tn;

  load_tile<T, HSMAX>(sK, kp, k0, Tn, stride, HS, vec);
  load_tile<T, HSMAX>(sV, vp, k0, Tn, stride, HS, vec);
  float dk[4][DPT], dv[4][DPT];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int d = 0; d < DPT; d++) dk[a][d] = dv[a][d] = 0.0f;

  for (int q0 = k0; q0 < Tn; q0 += AT_TILE) { /* causal: queries from the key tile on */
    __syncthreads();
    load_tile<T, HSMAX>(sQ, q, q0, Tn, stride, HS, vec);
    load_tile<T, HSMAX>(sdO, dop, q0, Tn, C, HS, vec_do);
    for (int r = threadIdx.x; r < AT_TILE; r += AT_THREADS)
      sL[r] = q0 + r < Tn ? lsep[q0 + r] : 0.0f;
    __syncthreads();
    tile_rowdot<T, HSMAX>(sD, sdO, outp, q0, Tn, C, HS);
    __syncthreads();
    uint64_t rk[4]; /* dropout: the mask rows of this thread's 4 queries */
#pragma unroll
    for (int c = 0; c < 4; c++)
      rk[c] = dr ? zeroc_i_dropout_row_key(drp.key,
                                           zeroc_i_dropout_row_att(&drp, b, h, q0 + tx + 16 * c))
                 : 0;

    /* transposed tiles: key rows ty + 16 a, query columns tx + 16 c */
    float s[4][4], dp[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = dp[a][c] = 0.0f;
    for (int d = 0; d < HS; d++) {
      float kk[4], vv[4], qq[4], oo[4];
#pragma unroll
      for (int a = 0; a < 4; a++) {
        kk[a] = sK[(ty + 16 * a) * LD + d];
        vv[a] = sV[(ty + 16 * a) * LD + d];
      }
#pragma unroll
      for (int c = 0; c < 4; c++) {
        qq[c] = sQ[(tx + 16 * c) * LD + d];
        oo[c] = sdO[(tx + 16 * c) * LD + d];
      }
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          s[a][c] += kk[a] * qq[c];
          dp[a][c] += vv[a] * oo[c];
        }
    }
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int j = k0 + ty + 16 * a, i = q0 + tx + 16 * c;
        const float p = j <= i && i < Tn ? expf(s[a][c] * scale - sL[tx + 16 * c]) : 0.0f;
        float pv = p, dpv = dp[a][c];
        if (dr && p != 0.0f) {
          const float m = zeroc_i_dropout_bits(rk[c], (uint32_t)j) >= thr ? dsc : 0.0f;
          pv *= m;
          dpv *= m;
        }
        sPt[(ty + 16 * a) * LP + tx + 16 * c] = pv;
        sdSt[(ty + 16 * a) * LP + tx + 16 * c] = p * (dpv - sD[tx + 16 * c]);
      }
    __syncthreads();

    /* dv += P^T dO, dk += dS^T Q (scale applied at the end) */
    const int rn = min(AT_TILE, Tn - q0);
    for (int r = 0; r < rn; r++) {
      float od[DPT], qd[DPT];
#pragma unroll
      for (int d = 0; d < DPT; d++) {
        od[d] = sdO[r * LD + tx + 16 * d];
        qd[d] = sQ[r * LD + tx + 16 * d];
      }
#pragma unroll
      for (int a = 0; a < 4; a++) {
        const float p = sPt[(ty + 16 * a) * LP + r], ds = sdSt[(ty + 16 * a) * LP + r];
#pragma unroll
        for (int d = 0; d < DPT; d++) {
          dv[a][d] += p * od[d];
          dk[a][d] += ds * qd[d];
        }
      }
    }
  }

#pragma unroll
  for (int a = 0; a < 4; a++) {
    const int j = k0 + ty + 16 * a;
    if (j >= Tn) continue;
    T *g = dqkv + ((size_t)b * Tn + j) * stride + (size_t)h * HS;
#pragma unroll
    for (int d = 0; d < DPT; d++) {
      const int col = tx + 16 * d;
      if (col >= HS) continue;
      g[C + col] = zc_to<T>(zc_f(g[C + col]) + scale * dk[a][d]);
      g[2 * C + col] = zc_to<T>(zc_f(g[2 * C + col]) + dv[a][d]);
    }
  }
}

// -> dqkv q part (B,T,C) +=; block (query tile, head, batch)
template <typename T, int HSMAX>
__global__ void __launch_bounds__(AT_THREADS)
    attention_backward_dq_kernel(T *dqkv, const T *dout, const T *qkv, const T *out,
                                 const float *lse, int Tn, int C, int NH, int HS, float scale,
                                 bool vec, bool vec_do, zeroc_dropout_t drp, bool dr) {
  constexpr int LD = HSMAX + 1, LP = AT_TILE + 1, DPT = HSMAX / 16;
  extern __shared__ float smem[];
  float *sQ = smem, *sdO = sQ + AT_TILE * LD, *sK = sdO + AT_TILE * LD, *sV = sK + AT_TILE * LD;
  float *sdS = sV + AT_TILE * LD, *sL = sdS + AT_TILE * LP, *sD = sL + AT_TILE;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * AT_TILE, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const T *q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *kp = q + C, *vp = q + 2 * C;
  const T *dop = dout + (size_t)b * Tn * C + (size_t)h * HS;
  const T *outp = out + (size_t)b * Tn * C + (size_t)h * HS;
  const float *lsep = lse + ((size_t)b * NH + h) * Tn;

  load_tile<T, HSMAX>(sQ, q, q0, Tn, stride, HS, vec);
  load_tile<T, HSMAX>(sdO, dop, q0, Tn, C, HS, vec_do);
  for (int r = threadIdx.x; r < AT_TILE; r += AT_THREADS) sL[r] = q0 + r < Tn ? lsep[q0 + r] : 0.0f;
  __syncthreads();
  tile_rowdot<T, HSMAX>(sD, sdO, outp, q0, Tn, C, HS);
  /* dropout: the mask rows of this thread's 4 queries */
  uint64_t rk[4];
  const uint32_t thr = dr ? zeroc_i_dropout_threshold(drp.p) : 0;
  const float dsc = dr ? zeroc_i_dropout_scale(drp.p) : 1.0f;
#pragma unroll
  for (int i = 0; i < 4; i++)
    rk[i] =
        dr ? zeroc_i_dropout_row_key(drp.key, zeroc_i_dropout_row_att(&drp, b, h, q0 + ty + 16 * i))
           : 0;
  float dq[4][DPT];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int d = 0; d < DPT; d++) dq[i][d] = 0.0f;

  const int kv_end = min(Tn, q0 + AT_TILE);
  for (int k0 = 0; k0 < kv_end; k0 += AT_TILE) {
    __syncthreads(); /* also publishes sD on the first pass */
    load_tile<T, HSMAX>(sK, kp, k0, Tn, stride, HS, vec);
    load_tile<T, HSMAX>(sV, vp, k0, Tn, stride, HS, vec);
    __syncthreads();

    float s[4][4], dp[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) s[i][j] = dp[i][j] = 0.0f;
    for (int d = 0; d < HS; d++) {
      float qq[4], oo[4], kk[4], vv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        qq[i] = sQ[(ty + 16 * i) * LD + d];
        oo[i] = sdO[(ty + 16 * i) * LD + d];
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        kk[j] = sK[(tx + 16 * j) * LD + d];
        vv[j] = sV[(tx + 16 * j) * LD + d];
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          s[i][j] += qq[i] * kk[j];
          dp[i][j] += oo[i] * vv[j];
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int r = q0 + ty + 16 * i, c = k0 + tx + 16 * j;
        const float p = c <= r && r < Tn ? expf(s[i][j] * scale - sL[ty + 16 * i]) : 0.0f;
        float dpv = dp[i][j];
        if (dr && p != 0.0f)
          dpv = zeroc_i_dropout_bits(rk[i], (uint32_t)c) >= thr ? dpv * dsc : 0.0f;
        sdS[(ty + 16 * i) * LP + tx + 16 * j] = p * (dpv - sD[ty + 16 * i]);
      }
    __syncthreads();

    /* dq += dS K (scale applied at the end) */
    const int cn = min(AT_TILE, kv_end - k0);
    for (int c = 0; c < cn; c++) {
      float kd[DPT];
#pragma unroll
      for (int d = 0; d < DPT; d++) kd[d] = sK[c * LD + tx + 16 * d];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const float ds = sdS[(ty + 16 * i) * LP + c];
#pragma unroll
        for (int d = 0; d < DPT; d++) dq[i][d] += ds * kd[d];
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = q0 + ty + 16 * i;
    if (r >= Tn) continue;
    T *g = dqkv + ((size_t)b * Tn + r) * stride + (size_t)h * HS;
#pragma unroll
    for (int d = 0; d < DPT; d++) {
      const int col = tx + 16 * d;
      if (col < HS) g[col] = zc_to<T>(zc_f(g[col]) + scale * dq[i][d]);
    }
  }
}

/* ---- launchers ---------------------------------------------------------------------- */

template <int HSMAX> static constexpr size_t fwd_smem() {
  return sizeof(float) * (3 * AT_TILE * (HSMAX + 1) + AT_TILE * (AT_TILE + 1));
}
template <int HSMAX> static constexpr size_t dkdv_smem() {
  return sizeof(float) * (4 * AT_TILE * (HSMAX + 1) + 2 * AT_TILE * (AT_TILE + 1) + 2 * AT_TILE);
}
template <int HSMAX> static constexpr size_t dq_smem() {
  return sizeof(float) * (4 * AT_TILE * (HSMAX + 1) + AT_TILE * (AT_TILE + 1) + 2 * AT_TILE);
}

/* Head size check shared by both directions. */
static zeroc_result_t check_heads(zeroc_kernels_t *k, const char *fn, int C, int NH, size_t smem) {
  const int HS = C / NH;
  if (HS > AT_HS_MAX)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s: head size %d (C %d / NH %d): accepted 1 to %d",
                      fn, HS, C, NH, AT_HS_MAX);
  if (smem > zc_state(k)->smem_optin)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "%s: head size %d needs %zu bytes of shared memory per block, the device "
                      "allows %zu",
                      fn, HS, smem, zc_state(k)->smem_optin);
  return ZEROC_OK;
}

template <typename T, int HSMAX>
static zeroc_result_t attention_forward(zeroc_kernels_t *k, cudaStream_t st, T *out, float *lse,
                                        const T *qkv, int B, int Tn, int C, int NH,
                                        const zeroc_dropout_t *drop) {
  const int HS = C / NH;
  const size_t smem = fwd_smem<HSMAX>();
  ZEROC_CHECK(check_heads(k, "attention_forward", C, NH, smem));
  const bool vec = HS % 8 == 0 && zc_aligned16(qkv);
  ZC_CUDA(cudaFuncSetAttribute(attention_forward_kernel<T, HSMAX>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  dim3 grid((Tn + AT_TILE - 1) / AT_TILE, NH, B), block(AT_THREADS);
  attention_forward_kernel<T, HSMAX>
      <<<grid, block, smem, st>>>(out, lse, qkv, Tn, C, NH, HS, 1.0f / sqrtf((float)HS), vec,
                                  drop ? *drop : zeroc_dropout_t{}, drop && drop->p > 0);
  ZC_LAUNCHED("attention_forward_kernel", grid, block, smem);
  return ZEROC_OK;
}

template <typename T, int HSMAX>
static zeroc_result_t attention_backward(zeroc_kernels_t *k, cudaStream_t st, T *dqkv,
                                         const T *dout, const T *qkv, const T *out,
                                         const float *lse, int B, int Tn, int C, int NH,
                                         const zeroc_dropout_t *drop) {
  const int HS = C / NH;
  const zeroc_dropout_t dp = drop ? *drop : zeroc_dropout_t{};
  const bool dr = drop && drop->p > 0;
  const size_t smem1 = dkdv_smem<HSMAX>(), smem2 = dq_smem<HSMAX>();
  ZEROC_CHECK(check_heads(k, "attention_backward", C, NH, smem1 > smem2 ? smem1 : smem2));
  const bool vec = HS % 8 == 0 && zc_aligned16(qkv), vec_do = HS % 8 == 0 && zc_aligned16(dout);
  const float scale = 1.0f / sqrtf((float)HS);
  dim3 grid((Tn + AT_TILE - 1) / AT_TILE, NH, B), block(AT_THREADS);
  ZC_CUDA(cudaFuncSetAttribute(attention_backward_dkdv_kernel<T, HSMAX>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
  attention_backward_dkdv_kernel<T, HSMAX><<<grid, block, smem1, st>>>(
      dqkv, dout, qkv, out, lse, Tn, C, NH, HS, scale, vec, vec_do, dp, dr);
  ZC_LAUNCHED("attention_backward_dkdv_kernel", grid, block, smem1);
  ZC_CUDA(cudaFuncSetAttribute(attention_backward_dq_kernel<T, HSMAX>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem2));
  attention_backward_dq_kernel<T, HSMAX><<<grid, block, smem2, st>>>(
      dqkv, dout, qkv, out, lse, Tn, C, NH, HS, scale, vec, vec_do, dp, dr);
  ZC_LAUNCHED("attention_backward_dq_kernel", grid, block, smem2);
  return ZEROC_OK;
}

/* The smallest instantiation whose HSMAX holds the head. */
#define AT_DISPATCH(T, fn, HS, ...)                                                                \
  ((HS) <= 32   ? fn<T, 32>(__VA_ARGS__)                                                           \
   : (HS) <= 64 ? fn<T, 64>(__VA_ARGS__)                                                           \
                : fn<T, 128>(__VA_ARGS__))

extern "C" zeroc_result_t zeroc_i_cuda_attention_forward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                         void *out, float *lse, const void *qkv,
                                                         int B, int T, int C, int NH,
                                                         const zeroc_dropout_t *drop) {
  ZC_NONNULL("attention_forward", out);
  ZC_NONNULL("attention_forward", lse);
  ZC_NONNULL("attention_forward", qkv);
  const int HS = C / NH;
  if (HS > AT_HS_MAX) return check_heads(k, "attention_forward", C, NH, 0);
  cudaStream_t st = zc_stream(k, s);
  if (zc_attention_mma_takes(k, C, NH, drop, out, qkv, NULL, NULL))
    return zc_attention_mma_forward(k, st, out, lse, qkv, B, T, C, NH);
  if (k->dtype == ZEROC_BF16)
    return AT_DISPATCH(bf16, attention_forward, HS, k, st, (bf16 *)out, lse, (const bf16 *)qkv, B,
                       T, C, NH, drop);
  return AT_DISPATCH(float, attention_forward, HS, k, st, (float *)out, lse, (const float *)qkv, B,
                     T, C, NH, drop);
}

extern "C" zeroc_result_t zeroc_i_cuda_attention_backward(zeroc_kernels_t *k, zeroc_stream_t *s,
                                                          void *dqkv, const void *dout,
                                                          const void *qkv, const void *out,
                                                          const float *lse, int B, int T, int C,
                                                          int NH, const zeroc_dropout_t *drop) {
  ZC_NONNULL("attention_backward", dqkv);
  ZC_NONNULL("attention_backward", dout);
  ZC_NONNULL("attention_backward", qkv);
  ZC_NONNULL("attention_backward", out);
  ZC_NONNULL("attention_backward", lse);
  const int HS = C / NH;
  if (HS > AT_HS_MAX) return check_heads(k, "attention_backward", C, NH, 0);
  cudaStream_t st = zc_stream(k, s);
  if (zc_attention_mma_takes(k, C, NH, drop, dqkv, dout, qkv, out))
    return zc_attention_mma_backward(k, st, dqkv, dout, qkv, out, lse, B, T, C, NH);
  if (k->dtype == ZEROC_BF16)
    return AT_DISPATCH(bf16, attention_backward, HS, k, st, (bf16 *)dqkv, (const bf16 *)dout,
                       (const bf16 *)qkv, (const bf16 *)out, lse, B, T, C, NH, drop);
  return AT_DISPATCH(float, attention_backward, HS, k, st, (float *)dqkv, (const float *)dout,
                     (const float *)qkv, (const float *)out, lse, B, T, C, NH, drop);
}
