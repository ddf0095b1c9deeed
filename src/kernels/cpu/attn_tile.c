/*
 * kernels/cpu/attn_tile.c - attention of one head in tiles of BQ queries x BK
 * keys (attn_tile.h). Each tile is a handful of small matrix products (q k^T,
 * p v, and in the backward dout v^T, p^T dout, ds k, ds^T q), done by one
 * register-blocked micro-kernel, plus row-wise softmax work with the vector exp
 * of vmath.h. Before this the kernels took one dot product per (query, key)
 * pair and a libm expf per score, and ran at a small fraction of the
 * multiply-add rate of the machine.
 *
 * Causal: key tiles wholly above the diagonal are skipped; only the tiles that
 * cross it mask their scores. Every sum runs in a fixed order that depends on
 * the shapes only, never on the thread that runs the head.
 */
#include "kernels/cpu/attn_tile.h"

/* The products fuse a * b + c into FMAs in the x86-64-v3 clone because the cpu
 * kernels are built with -ffp-contract=fast (CMakeLists.txt). */

#include <math.h>
#include <string.h>

#include "kernels/cpu/vmath.h"

#ifndef BQ
#define BQ 64 /* query rows of a tile */
#endif
#ifndef BK_MAX
#define BK_MAX 64 /* key rows of a tile (fewer for big heads, see tile_keys) */
#endif
#define PACK   8192 /* floats of a packed tile: k^T or v^T (HS x BK), or rows copied (pack_rows) */
#define QCHUNK 2048 /* query rows whose D the backward keeps at once (a multiple of BQ) */

/* The tiles are on the stack (the backward's are the most: 2 x 16 KiB of scores, 5 x
 * 32 KiB of packs, 8 KiB of D): per-thread, no allocation, and small beside a thread's
 * default stack (8 MiB for the main thread, OpenMP's and zeroc's). Key tiles shrink so that
 * k^T fits one pack down to 8 keys (HS <= 1024); past that see scores(). */
static int tile_keys(int HS) {
  const int bk = PACK / HS;
  return bk >= BK_MAX ? BK_MAX : (bk >= 8 ? bk / 8 * 8 : 8);
}

#define ZEROC_INL static inline __attribute__((always_inline))

/* A vectorised max: GCC does it; Clang cannot, and -Werror turns its remark
 * that a forced loop stayed scalar into an error. */
#if defined(__clang__)
#define SIMD_MAX_MX
#else
#define SIMD_MAX_MX _Pragma("omp simd reduction(max : mx)")
#endif

/* What the causal mask lets a product of a diagonal tile skip. `off` is the
 * query tile's start minus the key tile's (query row i of the tile sees key
 * column j iff j <= i + off; off >= the tile's size: no mask):
 * MM_COLS: c's rows are queries, its columns keys (q k^T, dout v^T): columns past
 *   the last row's view are left as they are (the softmax masks them anyway);
 * MM_KEND: c's rows are queries, the sum runs over keys (p v, ds k): stop there;
 * MM_KBEG: c's rows are keys, the sum runs over queries (p^T dout, ds^T q): start
 *   at the first query that sees the row.
 * MM_SET, or'ed to a role: c = a b instead of +=, for a tile of scores, so that it
 * needs no clearing first (with MM_COLS the columns left as they are hold whatever
 * was there: the row passes write every column past what the row sees). */
enum { MM_COLS, MM_KEND, MM_KBEG, MM_ROLE = 3, MM_SET = 4 };
enum { MR = 6 }; /* rows of c a micro-kernel step holds: 12 of the 16 vector registers */

/* c (M x N, rows ldc apart) += a (M x K; element (i, k) at a[i*ars + k*acs], so a
 * may be read transposed) b (K x N, rows ldb apart), b and c row-major. 6 rows x
 * 16 columns of c are held in 12 vector registers over the whole K loop: per k,
 * 2 loads of b and 6 broadcasts of a feed 12 fused multiply-adds. A short last
 * row group recomputes its last row (the pointers are clamped) and stores only
 * the real ones. */
ZEROC_INL void mm_acc(float *restrict c, size_t ldc, const float *restrict a, size_t ars,
                      size_t acs, const float *restrict b, size_t ldb, int M, int N, int K,
                      int role, int off) {
  const int set = role & MM_SET;
  role &= MM_ROLE;
  for (int i = 0; i < M; i += MR) {
    const int mr = M - i < MR ? M - i : MR;
    const float *ar[MR]; /* row pointers, the last real row repeated past M */
    for (int r = 0; r < MR; r++) ar[r] = a + (size_t)(i + (r < mr ? r : mr - 1)) * ars;
    const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5];
    float *c0 = c + (size_t)i * ldc;
    const int last = i + mr - 1 + off + 1; /* columns / keys the group's last row sees */
    int n = N, k0 = 0, k1 = K;
    if (role == MM_COLS && last < N) n = (last + 15) / 16 * 16 < N ? (last + 15) / 16 * 16 : N;
    if (role == MM_KEND && last < K) k1 = last;
    if (role == MM_KBEG && i - off > 0) k0 = i - off;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
      v8 x00 = {0}, x01 = {0}, x10 = {0}, x11 = {0}, x20 = {0}, x21 = {0}, x30 = {0}, x31 = {0};
      v8 x40 = {0}, x41 = {0}, x50 = {0}, x51 = {0};
      for (int k = k0; k < k1; k++) {
        const float *bk = b + (size_t)k * ldb + j;
        const v8 b0 = LD8(bk), b1 = LD8(bk + 8);
        const size_t ka = (size_t)k * acs;
        x00 += a0[ka] * b0, x01 += a0[ka] * b1, x10 += a1[ka] * b0, x11 += a1[ka] * b1;
        x20 += a2[ka] * b0, x21 += a2[ka] * b1, x30 += a3[ka] * b0, x31 += a3[ka] * b1;
        x40 += a4[ka] * b0, x41 += a4[ka] * b1, x50 += a5[ka] * b0, x51 += a5[ka] * b1;
      }
      const v8 acc[MR][2] = {{x00, x01}, {x10, x11}, {x20, x21},
                             {x30, x31}, {x40, x41}, {x50, x51}};
      for (int r = 0; r < mr; r++) {
        float *cr = c0 + (size_t)r * ldc + j;
        ST8(cr, set ? acc[r][0] : LD8(cr) + acc[r][0]);
        ST8(cr + 8, set ? acc[r][1] : LD8(cr + 8) + acc[r][1]);
      }
    }
    for (; j + 8 <= n; j += 8) {
      v8 x0 = {0}, x1 = {0}, x2 = {0}, x3 = {0}, x4 = {0}, x5 = {0};
      for (int k = k0; k < k1; k++) {
        const v8 b0 = LD8(b + (size_t)k * ldb + j);
        const size_t ka = (size_t)k * acs;
        x0 += a0[ka] * b0, x1 += a1[ka] * b0, x2 += a2[ka] * b0, x3 += a3[ka] * b0;
        x4 += a4[ka] * b0, x5 += a5[ka] * b0;
      }
      const v8 acc[MR] = {x0, x1, x2, x3, x4, x5};
      for (int r = 0; r < mr; r++) {
        float *cr = c0 + (size_t)r * ldc + j;
        ST8(cr, set ? acc[r] : LD8(cr) + acc[r]);
      }
    }
    for (; j < n; j++) /* head sizes and key counts that are not multiples of 8 */
      for (int r = 0; r < mr; r++) {
        float sum = 0;
        for (int k = k0; k < k1; k++) sum += ar[r][(size_t)k * acs] * b[(size_t)k * ldb + j];
        c0[(size_t)r * ldc + j] = set ? sum : c0[(size_t)r * ldc + j] + sum;
      }
  }
}

typedef int v8i __attribute__((vector_size(32)));
#ifdef __clang__
#define SHUF(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
#define SHUF(x, y, ...) __builtin_shuffle(x, y, (v8i){__VA_ARGS__})
#endif

/* t (HS x n, row-major) = the n rows x (HS each, rows ld apart) transposed: makes
 * k^T and v^T tiles the micro-kernel reads along rows. In 8 x 8 blocks by
 * shuffles (unpack, shuffle, lane swap: 24 for 64 floats), as an element-wise
 * copy took a fifth of the forward's time. */
ZEROC_INL void pack_t(float *restrict t, const float *restrict x, size_t ld, int n, int HS) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    int d = 0;
    for (; d + 8 <= HS; d += 8) {
      const float *xr = x + (size_t)j * ld + d;
      const v8 r0 = LD8(xr), r1 = LD8(xr + ld), r2 = LD8(xr + 2 * ld), r3 = LD8(xr + 3 * ld);
      const v8 r4 = LD8(xr + 4 * ld), r5 = LD8(xr + 5 * ld), r6 = LD8(xr + 6 * ld),
               r7 = LD8(xr + 7 * ld);
      const v8 t0 = SHUF(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13),
               t1 = SHUF(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
      const v8 t2 = SHUF(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13),
               t3 = SHUF(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
      const v8 t4 = SHUF(r4, r5, 0, 8, 1, 9, 4, 12, 5, 13),
               t5 = SHUF(r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);
      const v8 t6 = SHUF(r6, r7, 0, 8, 1, 9, 4, 12, 5, 13),
               t7 = SHUF(r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);
      /* u0: rows 0-3 of columns 0 and 4; u1: 1 and 5; u2: 2 and 6; u3: 3 and 7; u4-u7: rows 4-7 */
      const v8 u0 = SHUF(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13),
               u1 = SHUF(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
      const v8 u2 = SHUF(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13),
               u3 = SHUF(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
      const v8 u4 = SHUF(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13),
               u5 = SHUF(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
      const v8 u6 = SHUF(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13),
               u7 = SHUF(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
      float *tc = t + (size_t)d * n + j;
      ST8(tc, SHUF(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11));
      ST8(tc + n, SHUF(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11));
      ST8(tc + 2 * (size_t)n, SHUF(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11));
      ST8(tc + 3 * (size_t)n, SHUF(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11));
      ST8(tc + 4 * (size_t)n, SHUF(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15));
      ST8(tc + 5 * (size_t)n, SHUF(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15));
      ST8(tc + 6 * (size_t)n, SHUF(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15));
      ST8(tc + 7 * (size_t)n, SHUF(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15));
    }
    for (; d < HS; d++) /* head sizes that are not multiples of 8 */
      for (int k = j; k < j + 8; k++) t[(size_t)d * n + k] = x[(size_t)k * ld + d];
  }
  for (; j < n; j++)
    for (int d = 0; d < HS; d++) t[(size_t)d * n + j] = x[(size_t)j * ld + d];
}

/* The n rows (HS floats each, ld apart) of x, copied into t (n x HS, rows HS apart)
 * when they fit one pack; *x and *ld are moved to the copy. A micro-kernel reads
 * its b operand one row per step over every row group of c: rows 3C (q, k, v) or
 * C (dout) floats apart fall into a few of the L1 cache's sets (a stride of 48 or
 * 16 lines reaches 4 of its 64), and a tile of them does not stay in it. */
ZEROC_INL void pack_rows(float *restrict t, const float **x, size_t *ld, int n, int HS) {
  if ((size_t)n * (size_t)HS > PACK) return;
  for (int j = 0; j < n; j++)
    memcpy(t + (size_t)j * HS, *x + (size_t)j * *ld, (size_t)HS * sizeof *t);
  *x = t;
  *ld = (size_t)HS;
}

/* s (ni x nj) = x (ni rows xs apart) y^T, y the nj rows (ys apart) of a key tile,
 * in the columns MM_COLS computes (the rest of s is left as it was): y^T is packed
 * into t first, unless `packed` (t holds it already). A head too big for one pack
 * (HS nj > PACK) goes in slices of its width, each packed and multiplied in turn,
 * the first one setting s and the others adding to it. */
ZEROC_INL void scores(float *restrict s, const float *x, size_t xs, const float *y, size_t ys,
                      float *restrict t, int packed, int ni, int nj, int HS, int off) {
  const int dc = HS * nj <= PACK ? HS : PACK / nj;
  for (int d0 = 0; d0 < HS; d0 += dc) {
    const int dn = HS - d0 < dc ? HS - d0 : dc;
    if (!packed) pack_t(t, y + d0, ys, nj, dn);
    mm_acc(s, nj, x + d0, xs, 1, t, nj, ni, nj, dn, d0 ? MM_COLS : MM_COLS | MM_SET, off);
  }
}

ZEROC_INL float dotf(const float *a, const float *b, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* keys of the tile at j0 (nj of them) that query row i sees */
ZEROC_INL int visible(const zeroc__attn_head_t *a, int i, int j0, int nj) {
  if (!a->causal) return nj;
  const int n = i - j0 + 1;
  return n < 0 ? 0 : (n > nj ? nj : n);
}

ZEROC_INL uint64_t row_key(const zeroc__attn_head_t *a, int i) {
  return zeroc_i_dropout_row_key(a->drop->key,
                                 zeroc_i_dropout_row_att(a->drop, a->b, a->h, a->q_pos + i));
}

/* p (nj) <- dropout's multiplier of (row key rk, keys j0..): 1/(1-p) kept, 0 dropped,
 * times p */
ZEROC_INL void drop_row(float *restrict p, const zeroc__attn_head_t *a, uint64_t rk, int j0,
                        int nj) {
  const uint32_t thr = zeroc_i_dropout_threshold(a->drop->p);
  const float dsc = zeroc_i_dropout_scale(a->drop->p);
  const uint32_t c0 = (uint32_t)(a->k_pos + j0);
#pragma omp simd
  for (int c = 0; c < nj; c++)
    p[c] = zeroc_i_dropout_bits(rk, c0 + (uint32_t)c) >= thr ? p[c] * dsc : 0.0f;
}

/* One row of a forward tile: s (nj scores q.k) -> the row's probabilities against
 * the new running max (dropped if dropout is on); rescales o (HS) and l to it. */
ZEROC_INL void fwd_row(float *restrict s, float *restrict o, float *m, float *l,
                       const zeroc__attn_head_t *a, float scale, int i, int j0, int nj) {
  const int vis = visible(a, i, j0, nj);
  float mx = *m;
  SIMD_MAX_MX
  for (int c = 0; c < vis; c++) mx = s[c] * scale > mx ? s[c] * scale : mx;
  float sum = 0; /* exp only where seen: half of a diagonal tile is masked */
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < vis; c++) {
    const float p = zeroc__expf_nonpos(s[c] * scale - mx);
    s[c] = p;
    sum += p;
  }
  for (int c = vis; c < nj; c++) s[c] = 0;
  if (mx != *m) { /* rescale what was summed against the old max (0 on the first tile) */
    const float alpha = zeroc__expf(*m - mx);
    *l *= alpha;
#pragma omp simd
    for (int d = 0; d < a->HS; d++) o[d] *= alpha;
    *m = mx;
  }
  *l += sum;
  if (a->drop && a->drop->p > 0) drop_row(s, a, row_key(a, i), j0, nj);
}

// q, k, v of one head -> o (Tq rows o_t apart) = attention, lse (Tq)
ZEROC_CPU_HOT void zeroc__attn_head_forward(const zeroc__attn_head_t *a, float *o, float *lse) {
  const int HS = a->HS, BK = tile_keys(HS);
  const float scale = 1.0f / sqrtf((float)HS);
  float kt[PACK], vc[PACK], s[BQ * BK_MAX], m[BQ], l[BQ];
  for (int i0 = 0; i0 < a->Tq; i0 += BQ) {
    const int ni = a->Tq - i0 < BQ ? a->Tq - i0 : BQ;
    float *oi = o + (size_t)i0 * a->o_t;
    for (int r = 0; r < ni; r++) {
      memset(oi + (size_t)r * a->o_t, 0, (size_t)HS * sizeof *o);
      m[r] = -INFINITY, l[r] = 0;
    }
    const int jend = a->causal ? i0 + ni : a->Tk; /* tiles above the diagonal: skipped */
    for (int j0 = 0; j0 < jend; j0 += BK) {
      const int nj = jend - j0 < BK ? jend - j0 : BK;
      const int off = a->causal ? i0 - j0 : BQ + BK_MAX; /* see MM_COLS */
      scores(s, a->q + (size_t)i0 * a->q_t, a->q_t, a->k + (size_t)j0 * a->kv_t, a->kv_t, kt, 0, ni,
             nj, HS, off); /* (ni,nj) q k^T */
      for (int r = 0; r < ni; r++)
        fwd_row(s + (size_t)r * nj, oi + (size_t)r * a->o_t, &m[r], &l[r], a, scale, i0 + r, j0,
                nj);
      const float *vj = a->v + (size_t)j0 * a->kv_t;
      size_t vld = a->kv_t;
      pack_rows(vc, &vj, &vld, nj, HS);
      mm_acc(oi, a->o_t, s, nj, 1, vj, vld, ni, HS, nj, MM_KEND, off);
    }
    for (int r = 0; r < ni; r++) {
      float *restrict orow = oi + (size_t)r * a->o_t;
      const float il = 1.0f / l[r];
#pragma omp simd
      for (int d = 0; d < HS; d++) orow[d] *= il;
      lse[i0 + r] = m[r] + logf(l[r]);
    }
  }
}

/* One row of a backward tile: p (nj scores q.k), dp (nj, dout.v) -> p = ds, the
 * gradient of the scores times scale, dp = the (dropped) probabilities that met v.
 * With p_j = softmax row i and dp_j = dout . v_j, ds_j = p_j (dp_j - sum_k p_k dp_k),
 * and the sum is D = dout . out_i. With dropout's multiplier m_j v meets m_j p_j and
 * dp_j is m_j dout . v_j; D is still the sum. */
ZEROC_INL void bwd_row(float *restrict p, float *restrict dp, const zeroc__attn_head_t *a,
                       float scale, float L, float D, int i, int j0, int nj) {
  const int vis = visible(a, i, j0, nj);
#pragma omp simd
  for (int c = 0; c < vis; c++) p[c] = zeroc__expf_nonpos(p[c] * scale - L);
  for (int c = vis; c < nj; c++) p[c] = dp[c] = 0; /* masked: not computed (see MM_SET) */
  if (a->drop && a->drop->p > 0) {
    const uint32_t thr = zeroc_i_dropout_threshold(a->drop->p);
    const float dsc = zeroc_i_dropout_scale(a->drop->p);
    const uint64_t rk = row_key(a, i);
    const uint32_t c0 = (uint32_t)(a->k_pos + j0);
#pragma omp simd
    for (int c = 0; c < vis; c++) {
      const float mk = zeroc_i_dropout_bits(rk, c0 + (uint32_t)c) >= thr ? dsc : 0.0f;
      const float ds = p[c] * (dp[c] * mk - D) * scale;
      dp[c] = p[c] * mk;
      p[c] = ds;
    }
  } else {
#pragma omp simd
    for (int c = 0; c < vis; c++) {
      const float ds = p[c] * (dp[c] - D) * scale;
      dp[c] = p[c];
      p[c] = ds;
    }
  }
}

/* One (query tile, key tile) pair of the backward: recompute p, then dv, dk, dq.
 * kt, vt: k^T and v^T of the key tile if `packed`, else scratch (see scores).
 * set_kv, set_q: the pair is the first to reach the key tile's dk, dv rows / the query
 * tile's dq rows, and stores into them (MM_SET) instead of adding. */
ZEROC_INL void bwd_tile(const zeroc__attn_head_t *a, float *dq, float *dkj, float *dvj,
                        const float *dout, const float *lse, const float *D, float *kt, float *vt,
                        int packed, const float *kj, size_t kld, float *qc, float *dyc,
                        float *restrict p, float *restrict dp, int i0, int ni, int j0, int nj,
                        int set_kv, int set_q) {
  const int HS = a->HS;
  const float scale = 1.0f / sqrtf((float)HS);
  const float *qi = a->q + (size_t)i0 * a->q_t, *dyi = dout + (size_t)i0 * a->o_t;
  const float *vj = a->v + (size_t)j0 * a->kv_t;
  size_t qld = a->q_t, dyld = a->o_t;
  pack_rows(qc, &qi, &qld, ni, HS);
  pack_rows(dyc, &dyi, &dyld, ni, HS);
  const int off = a->causal ? i0 - j0 : BQ + BK_MAX;               /* see MM_COLS */
  scores(p, qi, qld, kj, kld, kt, packed, ni, nj, HS, off);        /* (ni,nj) q k^T */
  scores(dp, dyi, dyld, vj, a->kv_t, vt, packed, ni, nj, HS, off); /* (ni,nj) dout v^T */
  for (int r = 0; r < ni; r++)
    bwd_row(p + (size_t)r * nj, dp + (size_t)r * nj, a, scale, lse[i0 + r], D[r], i0 + r, j0, nj);
  /* p (ni,nj) holds ds, dp the dropped probabilities: read transposed for dk, dv */
  const int kv_role = set_kv ? MM_KBEG | MM_SET : MM_KBEG;
  mm_acc(dvj, a->kv_t, dp, 1, nj, dyi, dyld, nj, HS, ni, kv_role, off); /* += p^T dout */
  mm_acc(dkj, a->kv_t, p, 1, nj, qi, qld, nj, HS, ni, kv_role, off);    /* += ds^T q */
  mm_acc(dq + (size_t)i0 * a->q_t, a->q_t, p, nj, 1, kj, kld, ni, HS, nj,
         set_q ? MM_KEND | MM_SET : MM_KEND, off); /* dq += ds k */
}

// dout, out (o_t), lse of one head -> dq (q_t) +=, dk, dv (kv_t) += (= with set)
ZEROC_CPU_HOT void zeroc__attn_head_backward(const zeroc__attn_head_t *a, float *dq, float *dk,
                                             float *dv, const float *dout, const float *out,
                                             const float *lse, int set) {
  const int HS = a->HS, BK = tile_keys(HS);
  float kt[PACK], vt[PACK], kc[PACK], qc[PACK], dyc[PACK], p[BQ * BK_MAX], dp[BQ * BK_MAX],
      D[QCHUNK];
  /* Queries in chunks of QCHUNK rows (all of them below that), whose D = dout . out
   * is computed once; inside, key tiles outside: dk and dv of a tile sum over the
   * query tiles, dq over the key tiles, each in a fixed order. */
  for (int c0 = 0; c0 < a->Tq; c0 += QCHUNK) {
    const int cn = a->Tq - c0 < QCHUNK ? a->Tq - c0 : QCHUNK;
    for (int r = 0; r < cn; r++)
      D[r] = dotf(dout + (size_t)(c0 + r) * a->o_t, out + (size_t)(c0 + r) * a->o_t, HS);
    const int jend = a->causal ? c0 + cn : a->Tk; /* key tiles past the chunk: unseen */
    if (set && a->causal && c0 > 0) /* keys the chunks before did not reach (T > QCHUNK) */
      for (int j = c0; j < jend; j++) {
        memset(dk + (size_t)j * a->kv_t, 0, (size_t)HS * sizeof *dk);
        memset(dv + (size_t)j * a->kv_t, 0, (size_t)HS * sizeof *dv);
      }
    for (int j0 = 0; j0 < jend; j0 += BK) {
      const int nj = jend - j0 < BK ? jend - j0 : BK;
      const int packed = HS * nj <= PACK; /* k^T, v^T packed once for all query tiles */
      if (packed) {
        pack_t(kt, a->k + (size_t)j0 * a->kv_t, a->kv_t, nj, HS);
        pack_t(vt, a->v + (size_t)j0 * a->kv_t, a->kv_t, nj, HS);
      }
      const float *kj = a->k + (size_t)j0 * a->kv_t; /* for dq += ds k, rows copied */
      size_t kld = a->kv_t;
      pack_rows(kc, &kj, &kld, nj, HS);
      const int istart = a->causal && j0 / BQ * BQ > c0 ? j0 / BQ * BQ : c0;
      /* a key tile's first pair is in the first chunk (later chunks clear the keys
       * they add, above); a query tile's first pair is with key tile 0 */
      const int first_kv = set && c0 == 0;
      for (int i0 = istart; i0 < c0 + cn; i0 += BQ)
        bwd_tile(a, dq, dk + (size_t)j0 * a->kv_t, dv + (size_t)j0 * a->kv_t, dout, lse,
                 D + (i0 - c0), kt, vt, packed, kj, kld, qc, dyc, p, dp, i0,
                 c0 + cn - i0 < BQ ? c0 + cn - i0 : BQ, j0, nj, first_kv && i0 == istart,
                 set && j0 == 0);
    }
  }
}
