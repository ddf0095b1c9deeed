/*
 * kernels/cuda/attention_mma.cu - causal attention on the tensor cores: bf16 operands,
 * fp32 accumulation (mma.sync m16n8k16, kernels/cuda/mma.cuh), flash style (no T x T
 * matrix in memory, online softmax in the forward, probabilities recomputed from lse in
 * the backward). It takes the bf16 calls of attention_forward/backward with head size 64
 * or 128, 16-byte aligned tensors and no dropout; everything else stays on the fp32 SIMT
 * kernels of attention.cu, which are also its reference (ZEROC_CUDA_FLASH=0 picks them).
 *
 * Blocks of 4 warps. Each warp owns 16 rows of the block's tile (queries in the forward
 * and in dq, keys in dk/dv) and walks the other side in tiles staged in shared memory by
 * cp.async, two buffers deep so the next tile loads while this one is multiplied.
 * Shared rows are HS + 8 bf16 long: the 16 bytes of padding put the 8 rows a fragment
 * load touches in 8 different bank quads.
 *
 * The backward is deterministic (no atomics): D = rowsum(dO * O) first, then one kernel
 * per 64-key tile owns its dk, dv rows and walks the query tiles, and one per 64-query
 * tile owns its dq rows and walks the key tiles; both recompute P = exp(S - lse). Like
 * the SIMT kernels they add into dqkv. The probabilities and dS meet the tensor cores
 * rounded to bf16 (as in every flash attention): errors near 1e-3 relative, against
 * ~1e-6 for the SIMT kernels' fp32 products.
 */
#include <math.h>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

#define AM_THREADS 128 /* 4 warps of 16 rows */
#define AM_ROWS    64  /* rows a block owns: queries (forward, dq) or keys (dk, dv) */
#define AM_LOG2E   1.4426950408889634f
#define AM_LN2     0.6931471805599453f

/* Tiles walked against the block's rows: 64 in the forward; in the backward 64 for head
 * size 64, 32 for 128 (the dk and dv accumulators then hold 128 registers a thread). */
template <int HS> struct am_shape {
  static constexpr int LDS = HS + 8;                 /* bf16 per shared row */
  static constexpr int SUB = HS <= 64 ? 64 : 32;     /* backward inner tile */
  static constexpr int KS = HS / 16, NT = HS / 8;    /* k-steps, n-tiles over the head */
  /* dk/dv blocks per multiprocessor the registers must allow: 3 for head 64 (168 a
   * thread, no spills, against 183 and 2 blocks unbounded; the shared memory allows 3),
   * 2 for 128 (the dk and dv accumulators take 128 a thread; 3 would spill). The other
   * kernels fit 3 or more unbounded. */
  static constexpr int MINB = HS <= 64 ? 3 : 2;
};

/* ---- staging and fragments -------------------------------------------------------- */

/* Rows r0 .. r0+R-1 of a (Tn, stride) bf16 matrix (src at this head's column 0, HS
 * columns) into dst [R][HS+8] by cp.async; rows >= Tn become 0. */
template <int HS, int R>
__device__ __forceinline__ void am_stage(bf16 *dst, const bf16 *src, int r0, int Tn,
                                         size_t stride) {
  constexpr int LDS = HS + 8, CH = HS / 8;
  for (int e = threadIdx.x; e < R * CH; e += AM_THREADS) {
    const int r = e / CH, c = (e % CH) * 8;
    const bool ok = r0 + r < Tn;
    zc_cp_async16(dst + r * LDS + c, src + (size_t)(ok ? r0 + r : 0) * stride + c, ok);
  }
}
/* R floats src[r0 ..] into dst; entries >= Tn become 0. */
template <int R>
__device__ __forceinline__ void am_stage_f(float *dst, const float *src, int r0, int Tn) {
  for (int r = threadIdx.x; r < R; r += AM_THREADS)
    zc_cp_async4(dst + r, src + (r0 + r < Tn ? r0 + r : 0), r0 + r < Tn);
}

__device__ __forceinline__ uint32_t am_ld32(const bf16 *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

/* The A fragment (16 rows from rb, k-step kk) of a row-major [rows][LDS] tile: one
 * ldmatrix of its four 8x8 quarters (rows +0/+8 by lane bit 3, columns +0/+8 by bit 4). */
template <int LDS>
__device__ __forceinline__ void am_frag_a(uint32_t a[4], const bf16 *s, int rb, int kk, int lane) {
  zc_ldsm_x4(a, s + (rb + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDS + kk * 16 + (lane >> 4) * 8);
}
/* B fragments of B = X^T for a row-major X [n][LDS] (the pairs along k adjacent in X's
 * rows), n-tiles nb and nb + 8, k-step kk: {r[0], r[1]} and {r[2], r[3]}, one ldmatrix. */
template <int LDS>
__device__ __forceinline__ void am_frag_bt2(uint32_t r[4], const bf16 *s, int nb, int kk,
                                            int lane) {
  zc_ldsm_x4(r, s + (nb + (lane >> 4) * 8 + (lane & 7)) * LDS + kk * 16 + ((lane >> 3) & 1) * 8);
}
/* B fragments of B = X for a row-major X [k][LDS], k-step at row k0, n-tiles n0 and
 * n0 + 8: {r[0], r[1]} and {r[2], r[3]}, by ldmatrix .trans. */
template <int LDS>
__device__ __forceinline__ void am_frag_b2(uint32_t r[4], const bf16 *s, int k0, int n0,
                                           int lane) {
  zc_ldsm_x4_t(r, s + (k0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDS + n0 + (lane >> 4) * 8);
}
/* The A fragment of k-step j (columns 16j .. 16j+15) of a 16 x N accumulator. */
__device__ __forceinline__ void am_pack_a(uint32_t a[4], const float (*c)[4], int j) {
  a[0] = zc_pack_bf16(c[2 * j][0], c[2 * j][1]);
  a[1] = zc_pack_bf16(c[2 * j][2], c[2 * j][3]);
  a[2] = zc_pack_bf16(c[2 * j + 1][0], c[2 * j + 1][1]);
  a[3] = zc_pack_bf16(c[2 * j + 1][2], c[2 * j + 1][3]);
}
/* p[0..1] += (x, y), rounded to bf16 as zc_to does. */
__device__ __forceinline__ void am_add2(bf16 *p, float x, float y) {
  const uint32_t u = am_ld32(p);
  const float a = __uint_as_float(u << 16) + x, b = __uint_as_float(u & 0xffff0000u) + y;
  *reinterpret_cast<uint32_t *>(p) = zc_pack_bf16(a, b);
}
__device__ __forceinline__ float am_quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float am_quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* ---- forward ---------------------------------------------------------------------- */

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T); block (query tile, head, batch).
// sl2 = log2(e) / sqrt(HS): scores in base 2, so exp2f does the exponentials.
template <int HS>
__global__ void __launch_bounds__(AM_THREADS)
    am_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int Tn, int C, int NH, float sl2) {
  using S = am_shape<HS>;
  constexpr int LDS = S::LDS, TILE = AM_ROWS * LDS;
  extern __shared__ float smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem), *sK = sQ + TILE, *sV = sK + 2 * TILE;
  /* the longest (last) query tiles start first */
  const int qt = gridDim.x - 1 - blockIdx.x, q0 = qt * AM_ROWS, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const bf16 *Q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *K = Q + C, *V = Q + 2 * C;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int r0 = q0 + 16 * w + g; /* this lane's rows: r0 and r0 + 8 */

  am_stage<HS, AM_ROWS>(sQ, Q, q0, Tn, stride);
  am_stage<HS, AM_ROWS>(sK, K, 0, Tn, stride);
  am_stage<HS, AM_ROWS>(sV, V, 0, Tn, stride);
  zc_cp_commit();

  float o[S::NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < S::NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  uint32_t qf[S::KS][4];

  for (int kt = 0; kt <= qt; kt++) { /* causal: key tiles up to the diagonal one */
    if (kt < qt) {
      am_stage<HS, AM_ROWS>(sK + ((kt + 1) & 1) * TILE, K, (kt + 1) * AM_ROWS, Tn, stride);
      am_stage<HS, AM_ROWS>(sV + ((kt + 1) & 1) * TILE, V, (kt + 1) * AM_ROWS, Tn, stride);
      zc_cp_commit();
      zc_cp_wait<1>();
    } else {
      zc_cp_wait<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < S::KS; kk++) am_frag_a<LDS>(qf[kk], sQ, 16 * w, kk, lane);
    }
    const bf16 *cK = sK + (kt & 1) * TILE, *cV = sV + (kt & 1) * TILE;

    float s[AM_ROWS / 8][4]; /* scores: 16 queries x 64 keys */
#pragma unroll
    for (int n = 0; n < AM_ROWS / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < S::KS; kk++)
#pragma unroll
      for (int n = 0; n < AM_ROWS / 8; n += 2) {
        uint32_t r[4];
        am_frag_bt2<LDS>(r, cK, 8 * n, kk, lane);
        zc_mma_bf16(s[n], qf[kk], r[0], r[1]);
        zc_mma_bf16(s[n + 1], qf[kk], r[2], r[3]);
      }

    /* online softmax over this tile (in base 2); keys past the query are masked */
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < AM_ROWS / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = kt * AM_ROWS + 8 * n + 2 * t + (e & 1), r = r0 + (e >> 1) * 8;
        const float v = kt == qt && c > r ? -INFINITY : s[n][e] * sl2;
        s[n][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
    float alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; i++) {
      /* key 0 is visible to every row, so the maximum is finite from the first tile on */
      const float mn = fmaxf(m[i], am_quad_max(mx[i]));
      alpha[i] = exp2f(m[i] - mn);
      m[i] = mn;
    }
#pragma unroll
    for (int n = 0; n < AM_ROWS / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float p = exp2f(s[n][e] - m[e >> 1]);
        s[n][e] = p;
        rs[e >> 1] += p;
      }
#pragma unroll
    for (int i = 0; i < 2; i++) l[i] = l[i] * alpha[i] + rs[i]; /* this lane's part of the row */
#pragma unroll
    for (int n = 0; n < S::NT; n++) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    /* o += P V */
#pragma unroll
    for (int j = 0; j < AM_ROWS / 16; j++) {
      uint32_t pa[4];
      am_pack_a(pa, s, j);
#pragma unroll
      for (int p = 0; p < S::KS; p++) {
        uint32_t r[4];
        am_frag_b2<LDS>(r, cV, 16 * j, 16 * p, lane);
        zc_mma_bf16(o[2 * p], pa, r[0], r[1]);
        zc_mma_bf16(o[2 * p + 1], pa, r[2], r[3]);
      }
    }
    __syncthreads(); /* this tile's buffers may be refilled */
  }

#pragma unroll
  for (int i = 0; i < 2; i++) {
    const float li = am_quad_sum(l[i]);
    const int r = r0 + 8 * i;
    if (r >= Tn) continue;
    const float inv = 1.0f / li;
    bf16 *y = out + ((size_t)b * Tn + r) * C + (size_t)h * HS + 2 * t;
#pragma unroll
    for (int n = 0; n < S::NT; n++)
      *reinterpret_cast<uint32_t *>(y + 8 * n) =
          zc_pack_bf16(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    if (t == 0) lse[((size_t)b * NH + h) * Tn + r] = m[i] * AM_LN2 + logf(li);
  }
}

/* ---- backward --------------------------------------------------------------------- */

// D (B,NH,T) = rowsum(dout * out) per head; one warp per (token, head)
template <int HS>
__global__ void am_rowdot_kernel(float *D, const bf16 *dout, const bf16 *out, int Tn, int C,
                                 int NH, size_t rows) {
  const size_t wid = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (wid >= rows) return; /* the whole warp */
  const int h = (int)(wid % NH);
  const size_t bt = wid / NH;
  const bf16 *a = dout + bt * C + (size_t)h * HS, *o = out + bt * C + (size_t)h * HS;
  float acc = 0.0f;
#pragma unroll
  for (int d = 2 * lane; d < HS; d += 64) {
    const uint32_t u = am_ld32(a + d), v = am_ld32(o + d);
    acc += __uint_as_float(u << 16) * __uint_as_float(v << 16) +
           __uint_as_float(u & 0xffff0000u) * __uint_as_float(v & 0xffff0000u);
  }
  acc = zc_warp_sum(acc);
  if (lane == 0) D[((size_t)(bt / Tn) * NH + h) * Tn + bt % Tn] = acc;
}

// -> dqkv k and v parts +=; block (key tile, head, batch); walks query tiles of SUB
template <int HS>
__global__ void __launch_bounds__(AM_THREADS, am_shape<HS>::MINB)
    am_dkdv_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                   const float *Dd, int Tn, int C, int NH, float sl2, float scale) {
  using S = am_shape<HS>;
  constexpr int LDS = S::LDS, BQ = S::SUB, QT = BQ * LDS;
  extern __shared__ float smem[];
  bf16 *sK = reinterpret_cast<bf16 *>(smem), *sV = sK + AM_ROWS * LDS, *sQ = sV + AM_ROWS * LDS,
       *sO = sQ + 2 * QT; /* sQ, sO (dout): two buffers each */
  float *sL = reinterpret_cast<float *>(sO + 2 * QT), *sD = sL + 2 * BQ;
  const int k0 = blockIdx.x * AM_ROWS, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const bf16 *Q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *K = Q + C, *V = Q + 2 * C;
  const bf16 *dO = dout + (size_t)b * Tn * C + (size_t)h * HS;
  const float *L = lse + ((size_t)b * NH + h) * Tn, *Dr = Dd + ((size_t)b * NH + h) * Tn;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int kr0 = k0 + 16 * w + g; /* this lane's keys: kr0 and kr0 + 8 */
  const int qs = k0 / BQ, nqt = (Tn + BQ - 1) / BQ; /* causal: queries from k0 on */

  am_stage<HS, AM_ROWS>(sK, K, k0, Tn, stride);
  am_stage<HS, AM_ROWS>(sV, V, k0, Tn, stride);
  am_stage<HS, BQ>(sQ, Q, qs * BQ, Tn, stride);
  am_stage<HS, BQ>(sO, dO, qs * BQ, Tn, C);
  am_stage_f<BQ>(sL, L, qs * BQ, Tn);
  am_stage_f<BQ>(sD, Dr, qs * BQ, Tn);
  zc_cp_commit();

  float dk[S::NT][4], dv[S::NT][4];
#pragma unroll
  for (int n = 0; n < S::NT; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

  for (int it = qs; it < nqt; it++) {
    const int buf = (it - qs) & 1, q0 = it * BQ;
    if (it + 1 < nqt) {
      const int nb = buf ^ 1;
      am_stage<HS, BQ>(sQ + nb * QT, Q, q0 + BQ, Tn, stride);
      am_stage<HS, BQ>(sO + nb * QT, dO, q0 + BQ, Tn, C);
      am_stage_f<BQ>(sL + nb * BQ, L, q0 + BQ, Tn);
      am_stage_f<BQ>(sD + nb * BQ, Dr, q0 + BQ, Tn);
      zc_cp_commit();
      zc_cp_wait<1>();
    } else {
      zc_cp_wait<0>();
    }
    __syncthreads();
    const bf16 *cQ = sQ + buf * QT, *cO = sO + buf * QT;
    const float *cL = sL + buf * BQ, *cD = sD + buf * BQ;

    /* S^T = K Q^T and dP^T = V dO^T: 16 keys x BQ queries */
    float st[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
    for (int n = 0; n < BQ / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < S::KS; kk++) {
      uint32_t ka[4], va[4];
      am_frag_a<LDS>(ka, sK, 16 * w, kk, lane);
      am_frag_a<LDS>(va, sV, 16 * w, kk, lane);
#pragma unroll
      for (int n = 0; n < BQ / 8; n += 2) {
        uint32_t r[4];
        am_frag_bt2<LDS>(r, cQ, 8 * n, kk, lane);
        zc_mma_bf16(st[n], ka, r[0], r[1]);
        zc_mma_bf16(st[n + 1], ka, r[2], r[3]);
        am_frag_bt2<LDS>(r, cO, 8 * n, kk, lane);
        zc_mma_bf16(dpt[n], va, r[0], r[1]);
        zc_mma_bf16(dpt[n + 1], va, r[2], r[3]);
      }
    }
    /* P^T = exp(S^T scale - lse) where the key is visible, dS^T = P^T (dP^T - D) */
#pragma unroll
    for (int n = 0; n < BQ / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int qi = 8 * n + 2 * t + (e & 1), q = q0 + qi, kr = kr0 + (e >> 1) * 8;
        const float p = kr <= q && q < Tn ? exp2f(st[n][e] * sl2 - cL[qi] * AM_LOG2E) : 0.0f;
        st[n][e] = p;
        dpt[n][e] = p * (dpt[n][e] - cD[qi]);
      }
    /* dV += P^T dO, dK += dS^T Q */
#pragma unroll
    for (int j = 0; j < BQ / 16; j++) {
      uint32_t pa[4], da[4];
      am_pack_a(pa, st, j);
      am_pack_a(da, dpt, j);
#pragma unroll
      for (int p = 0; p < S::KS; p++) {
        uint32_t r[4];
        am_frag_b2<LDS>(r, cO, 16 * j, 16 * p, lane);
        zc_mma_bf16(dv[2 * p], pa, r[0], r[1]);
        zc_mma_bf16(dv[2 * p + 1], pa, r[2], r[3]);
        am_frag_b2<LDS>(r, cQ, 16 * j, 16 * p, lane);
        zc_mma_bf16(dk[2 * p], da, r[0], r[1]);
        zc_mma_bf16(dk[2 * p + 1], da, r[2], r[3]);
      }
    }
    __syncthreads(); /* this tile's buffers may be refilled */
  }

#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int kr = kr0 + 8 * i;
    if (kr >= Tn) continue;
    bf16 *gk = dqkv + ((size_t)b * Tn + kr) * stride + C + (size_t)h * HS + 2 * t, *gv = gk + C;
#pragma unroll
    for (int n = 0; n < S::NT; n++) {
      am_add2(gk + 8 * n, scale * dk[n][2 * i], scale * dk[n][2 * i + 1]);
      am_add2(gv + 8 * n, dv[n][2 * i], dv[n][2 * i + 1]);
    }
  }
}

// -> dqkv q part +=; block (query tile, head, batch); walks key tiles of SUB
template <int HS>
__global__ void __launch_bounds__(AM_THREADS)
    am_dq_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                 const float *Dd, int Tn, int C, int NH, float sl2, float scale) {
  using S = am_shape<HS>;
  constexpr int LDS = S::LDS, BK = S::SUB, KT = BK * LDS;
  extern __shared__ float smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem), *sO = sQ + AM_ROWS * LDS, *sK = sO + AM_ROWS * LDS,
       *sV = sK + 2 * KT; /* sK, sV: two buffers each */
  const int qt = gridDim.x - 1 - blockIdx.x, q0 = qt * AM_ROWS, h = blockIdx.y, b = blockIdx.z;
  const size_t stride = 3 * (size_t)C;
  const bf16 *Q = qkv + (size_t)b * Tn * stride + (size_t)h * HS, *K = Q + C, *V = Q + 2 * C;
  const bf16 *dO = dout + (size_t)b * Tn * C + (size_t)h * HS;
  const float *L = lse + ((size_t)b * NH + h) * Tn, *Dr = Dd + ((size_t)b * NH + h) * Tn;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int r0 = q0 + 16 * w + g; /* this lane's queries: r0 and r0 + 8 */
  const int nkt = (min(Tn, q0 + AM_ROWS) + BK - 1) / BK;

  am_stage<HS, AM_ROWS>(sQ, Q, q0, Tn, stride);
  am_stage<HS, AM_ROWS>(sO, dO, q0, Tn, C);
  am_stage<HS, BK>(sK, K, 0, Tn, stride);
  am_stage<HS, BK>(sV, V, 0, Tn, stride);
  zc_cp_commit();
  float lr[2], dr[2];
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int r = r0 + 8 * i;
    lr[i] = r < Tn ? L[r] * AM_LOG2E : 0.0f;
    dr[i] = r < Tn ? Dr[r] : 0.0f;
  }
  float dq[S::NT][4];
#pragma unroll
  for (int n = 0; n < S::NT; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  /* this warp's Q and dO fragments: kept in registers for head 64, read from shared memory
   * at every key tile for 128 (in registers they would cost 64 more a thread) */
  constexpr bool KEEP = HS <= 64;
  uint32_t qa[KEEP ? S::KS : 1][4], oa[KEEP ? S::KS : 1][4];

  for (int kt = 0; kt < nkt; kt++) {
    if (kt + 1 < nkt) {
      am_stage<HS, BK>(sK + ((kt + 1) & 1) * KT, K, (kt + 1) * BK, Tn, stride);
      am_stage<HS, BK>(sV + ((kt + 1) & 1) * KT, V, (kt + 1) * BK, Tn, stride);
      zc_cp_commit();
      zc_cp_wait<1>();
    } else {
      zc_cp_wait<0>();
    }
    __syncthreads();
    if (KEEP && kt == 0) {
#pragma unroll
      for (int kk = 0; kk < S::KS; kk++) {
        am_frag_a<LDS>(qa[KEEP ? kk : 0], sQ, 16 * w, kk, lane);
        am_frag_a<LDS>(oa[KEEP ? kk : 0], sO, 16 * w, kk, lane);
      }
    }
    const bf16 *cK = sK + (kt & 1) * KT, *cV = sV + (kt & 1) * KT;

    /* S = Q K^T and dP = dO V^T: 16 queries x BK keys */
    float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
    for (int n = 0; n < BK / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < S::KS; kk++) {
      const int f = KEEP ? kk : 0;
      if (!KEEP) {
        am_frag_a<LDS>(qa[0], sQ, 16 * w, kk, lane);
        am_frag_a<LDS>(oa[0], sO, 16 * w, kk, lane);
      }
#pragma unroll
      for (int n = 0; n < BK / 8; n += 2) {
        uint32_t r[4];
        am_frag_bt2<LDS>(r, cK, 8 * n, kk, lane);
        zc_mma_bf16(s[n], qa[f], r[0], r[1]);
        zc_mma_bf16(s[n + 1], qa[f], r[2], r[3]);
        am_frag_bt2<LDS>(r, cV, 8 * n, kk, lane);
        zc_mma_bf16(dp[n], oa[f], r[0], r[1]);
        zc_mma_bf16(dp[n + 1], oa[f], r[2], r[3]);
      }
    }
    /* dS = P (dP - D), P = exp(S scale - lse) where the key is visible */
#pragma unroll
    for (int n = 0; n < BK / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = kt * BK + 8 * n + 2 * t + (e & 1), i = e >> 1, r = r0 + 8 * i;
        const float p = c <= r && r < Tn ? exp2f(s[n][e] * sl2 - lr[i]) : 0.0f;
        s[n][e] = p * (dp[n][e] - dr[i]);
      }
    /* dQ += dS K */
#pragma unroll
    for (int j = 0; j < BK / 16; j++) {
      uint32_t da[4];
      am_pack_a(da, s, j);
#pragma unroll
      for (int p = 0; p < S::KS; p++) {
        uint32_t r[4];
        am_frag_b2<LDS>(r, cK, 16 * j, 16 * p, lane);
        zc_mma_bf16(dq[2 * p], da, r[0], r[1]);
        zc_mma_bf16(dq[2 * p + 1], da, r[2], r[3]);
      }
    }
    __syncthreads(); /* this tile's buffers may be refilled */
  }

#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int r = r0 + 8 * i;
    if (r >= Tn) continue;
    bf16 *gq = dqkv + ((size_t)b * Tn + r) * stride + (size_t)h * HS + 2 * t;
#pragma unroll
    for (int n = 0; n < S::NT; n++) am_add2(gq + 8 * n, scale * dq[n][2 * i], scale * dq[n][2 * i + 1]);
  }
}

/* ---- launchers -------------------------------------------------------------------- */

template <int HS> static constexpr size_t am_fwd_smem() {
  return sizeof(bf16) * 5 * AM_ROWS * (HS + 8); /* Q, 2 x K, 2 x V */
}
template <int HS> static constexpr size_t am_bwd_smem() {
  /* dkdv: K, V, 2 x Q, 2 x dO (+ 2 x lse, D); dq: Q, dO, 2 x K, 2 x V: the larger */
  return sizeof(bf16) * (2 * AM_ROWS + 4 * am_shape<HS>::SUB) * (HS + 8) +
         sizeof(float) * 4 * am_shape<HS>::SUB;
}

bool zc_attention_mma_takes(zeroc_kernels_t *k, int C, int NH, const zeroc_dropout_t *drop,
                            const void *a, const void *b, const void *c, const void *d) {
  if (k->dtype != ZEROC_BF16 || !zc_state(k)->flash || (drop && drop->p > 0) || NH <= 0 ||
      C % NH)
    return false;
  const int HS = C / NH;
  if (HS != 64 && HS != 128) return false;
  if (!zc_aligned16(a) || !zc_aligned16(b) || (c && !zc_aligned16(c)) || (d && !zc_aligned16(d)))
    return false;
  const size_t need = HS == 64 ? am_bwd_smem<64>() : am_bwd_smem<128>();
  const size_t fwd = HS == 64 ? am_fwd_smem<64>() : am_fwd_smem<128>();
  return (need > fwd ? need : fwd) <= zc_state(k)->smem_optin;
}

template <int HS>
static zeroc_result_t am_forward(cudaStream_t st, bf16 *out, float *lse, const bf16 *qkv, int B,
                                 int Tn, int C, int NH) {
  const size_t smem = am_fwd_smem<HS>();
  ZC_CUDA(cudaFuncSetAttribute(am_forward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem));
  dim3 grid((Tn + AM_ROWS - 1) / AM_ROWS, NH, B), block(AM_THREADS);
  am_forward_kernel<HS><<<grid, block, smem, st>>>(out, lse, qkv, Tn, C, NH,
                                                    AM_LOG2E / sqrtf((float)HS));
  ZC_LAUNCHED("am_forward_kernel", grid, block, smem);
  return ZEROC_OK;
}

template <int HS>
static zeroc_result_t am_backward(zeroc_kernels_t *k, cudaStream_t st, bf16 *dqkv,
                                  const bf16 *dout, const bf16 *qkv, const bf16 *out,
                                  const float *lse, int B, int Tn, int C, int NH) {
  const size_t rows = (size_t)B * Tn * NH;
  if (rows * sizeof(float) > zc_state(k)->scratch_bytes)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "attention_backward: %zu row sums need %zu bytes of scratch, %zu there; "
                      "raise ZEROC_CUDA_SCRATCH_MB",
                      rows, rows * sizeof(float), zc_state(k)->scratch_bytes);
  float *D = (float *)zc_state(k)->scratch;
  {
    dim3 grid((unsigned)((rows + 7) / 8)), block(256); /* 8 warps of one row each */
    am_rowdot_kernel<HS><<<grid, block, 0, st>>>(D, dout, out, Tn, C, NH, rows);
    ZC_LAUNCHED("am_rowdot_kernel", grid, block, 0);
  }
  const size_t smem = am_bwd_smem<HS>();
  const float scale = 1.0f / sqrtf((float)HS), sl2 = AM_LOG2E * scale;
  dim3 grid((Tn + AM_ROWS - 1) / AM_ROWS, NH, B), block(AM_THREADS);
  ZC_CUDA(cudaFuncSetAttribute(am_dkdv_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem));
  am_dkdv_kernel<HS><<<grid, block, smem, st>>>(dqkv, dout, qkv, lse, D, Tn, C, NH, sl2, scale);
  ZC_LAUNCHED("am_dkdv_kernel", grid, block, smem);
  ZC_CUDA(cudaFuncSetAttribute(am_dq_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem));
  am_dq_kernel<HS><<<grid, block, smem, st>>>(dqkv, dout, qkv, lse, D, Tn, C, NH, sl2, scale);
  ZC_LAUNCHED("am_dq_kernel", grid, block, smem);
  return ZEROC_OK;
}

zeroc_result_t zc_attention_mma_forward(zeroc_kernels_t *k, cudaStream_t st, void *out,
                                        float *lse, const void *qkv, int B, int T, int C,
                                        int NH) {
  (void)k;
  if (C / NH == 64) return am_forward<64>(st, (bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH);
  return am_forward<128>(st, (bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH);
}

zeroc_result_t zc_attention_mma_backward(zeroc_kernels_t *k, cudaStream_t st, void *dqkv,
                                         const void *dout, const void *qkv, const void *out,
                                         const float *lse, int B, int T, int C, int NH) {
  if (C / NH == 64)
    return am_backward<64>(k, st, (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv,
                           (const bf16 *)out, lse, B, T, C, NH);
  return am_backward<128>(k, st, (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv,
                          (const bf16 *)out, lse, B, T, C, NH);
}
