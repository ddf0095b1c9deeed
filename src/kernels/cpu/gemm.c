/*
 * kernels/cpu/gemm.c - c = [c +] a b in fp32 with AVX-512 (gemm.h says why).
 *
 * The usual blocking (Goto, BLIS): b is packed KC rows x NC columns at a time
 * into panels of NR = 32 columns stored k-major (32 floats per k, 2 vectors), a
 * block that stays in L2; c is computed 12 rows x 32 columns at a time by a
 * micro-kernel that holds those 384 sums in 24 of the 32 vector registers over
 * the KC loop, each k loading two vectors of b and broadcasting 12 scalars of a
 * (24 multiply-adds per 14 loads). The 12 rows x KC floats of a the micro-kernel
 * broadcasts from stay in L1 while it runs along a b block: copied row by row into
 * a panel whose rows are 1088 bytes apart when a's rows are contiguous
 * (pack_a_rows), packed 12 floats per k, 96 rows at a time, when a is read
 * transposed (a column of a then lies along memory, pack_a_block).
 *
 * The first KC block of a product stores its sums (SET), or its sums plus the
 * bias (BIAS), instead of adding to c, so c is not cleared or read first; the
 * later blocks add. Every element of c therefore gets the same sums in the same
 * order for any partition of c among threads, and so any thread count.
 */
#include "kernels/cpu/gemm.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"

#define MR 12  /* rows of c a micro-kernel holds */
#define NR 32  /* columns: two 16-float vectors */
#define KC 256 /* k of a packed block: 12 x KC of a (12 KiB) stays in L1 */
#define NC 256 /* columns of a packed b block: KC x NC floats, 256 KiB, a quarter of a 1 MiB L2 */
#define AROW (KC + 16) /* floats between a's rows copied for the micro-kernel: 1088 bytes, so
                        the 12 rows fall into different L1 sets (see pack_a_rows) */
#define MCB 96 /* rows of a transposed a packed at once: 384 bytes of each of its KC rows */
#define PAR_MIN_FLOPS (1 << 21) /* products below this run on one thread */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZEROC_GEMM_X86 1
#include <immintrin.h>
#define TGT      __attribute__((target("avx512f,fma")))
#define TGT_INL  static inline __attribute__((always_inline, target("avx512f,fma")))
#endif

/* ---- which product: the CPU and ZEROC_CPU_GEMM ------------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_avail;

static void decide(void) {
  int64_t use = 1;
  /* a bad value stops zeroc_ctx_create first (zeroc__env_check_all); here it reads as unset */
  if (zeroc__env_i64("ZEROC_CPU_GEMM", 1, &use) != ZEROC_OK) use = 1;
#ifdef ZEROC_GEMM_X86
  __builtin_cpu_init();
  g_avail = use && __builtin_cpu_supports("avx512f");
#else
  (void)use;
  g_avail = 0;
#endif
}

int zeroc__gemm_available(void) {
  pthread_once(&g_once, decide);
  return g_avail;
}

#ifdef ZEROC_GEMM_X86

/* ---- per-thread scratch: a packed b block and a packed a panel ---------------- */

typedef struct {
  float *bp; /* KC x NC */
  float *ap;  /* MR x AROW: a panel, rows copied or k-major packed */
  float *apb; /* MCB x KC: a transposed a's block, MCB / MR panels of MR x KC */
} scratch_t;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
  scratch_t *s = p;
  free(s->bp);
  free(s->ap);
  free(s->apb);
  free(s);
}

static void key_make(void) { (void)pthread_key_create(&g_key, scratch_free); }

/* NULL when out of memory (zeroc__gemm then returns -1 and its caller uses OpenBLAS) */
static scratch_t *scratch_get(void) {
  pthread_once(&g_key_once, key_make);
  scratch_t *s = pthread_getspecific(g_key);
  if (s) return s;
  s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->bp = aligned_alloc(64, (size_t)KC * NC * sizeof(float));
  s->ap = aligned_alloc(64, (size_t)AROW * MR * sizeof(float));
  s->apb = aligned_alloc(64, (size_t)MCB * KC * sizeof(float));
  if (!s->bp || !s->ap || !s->apb || pthread_setspecific(g_key, s)) {
    scratch_free(s);
    return NULL;
  }
  return s;
}

/* ---- packing ------------------------------------------------------------------ */

static inline __mmask16 mask_n(int n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* r[0..15] (16 rows of 16) <- transposed, in place */
TGT_INL void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* u[4g + c]: rows 4g..4g+3 of columns 4L + c, lane L */
  for (int g = 0; g < 4; g++) {
    u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

/* bp <- b (rows pc.., kc of them; columns jc.., nc of them) as NR-column panels,
 * k-major, columns past nc zero */
TGT static void pack_b(float *restrict bp, const float *b, size_t brs, size_t bcs, int pc, int kc,
                       int jc, int nc) {
  for (int p = 0; p * NR < nc; p++) {
    float *dst = bp + (size_t)p * kc * NR;
    const int j0 = jc + p * NR, w = nc - p * NR < NR ? nc - p * NR : NR;
    if (bcs == 1) { /* rows of b contiguous: 32 floats per k */
      const __mmask16 m0 = mask_n(w), m1 = mask_n(w - 16);
      for (int k = 0; k < kc; k++) {
        const float *src = b + (size_t)(pc + k) * brs + j0;
        _mm512_store_ps(dst + (size_t)k * NR, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(dst + (size_t)k * NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
      }
    } else if (brs == 1) { /* columns of b contiguous (b = w^T): 16 x 16 transposes */
      for (int h = 0; h < 2; h++) {
        const int rows = w - 16 * h; /* columns of b in this half */
        for (int k0 = 0; k0 < kc; k0 += 16) {
          const int kk = kc - k0 < 16 ? kc - k0 : 16;
          const __mmask16 km = mask_n(kk);
          __m512 r[16];
          for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(
                                  km, b + (size_t)(pc + k0) + (size_t)(j0 + 16 * h + i) * bcs)
                            : _mm512_setzero_ps();
          transpose16(r);
          for (int t = 0; t < kk; t++) _mm512_store_ps(dst + (size_t)(k0 + t) * NR + 16 * h, r[t]);
        }
      }
    } else {
      for (int k = 0; k < kc; k++)
        for (int jj = 0; jj < NR; jj++)
          dst[(size_t)k * NR + jj] =
              jj < w ? b[(size_t)(pc + k) * brs + (size_t)(j0 + jj) * bcs] : 0.0f;
    }
  }
}

/* apb <- rows i0.. (mb of them) of a read transposed (a's column k lies along memory,
 * acs apart) over k = pc.. (kc): panels of 12 rows, 12 floats per k, rows past mb zero.
 * A block of 96 rows takes 384 bytes of each line-run it reads, where one panel at a
 * time took 48 and came back for the rest 11 more times. */
TGT static void pack_a_block(float *restrict apb, const float *a, size_t acs, int i0, int mb,
                             int pc, int kc) {
  const __mmask16 keep = mask_n(MR);
  for (int k = 0; k < kc; k++) {
    const float *src = a + (size_t)i0 + (size_t)(pc + k) * acs;
    for (int g = 0; g * MR < mb; g++)
      _mm512_mask_storeu_ps(apb + ((size_t)g * kc + k) * MR, keep,
                            _mm512_maskz_loadu_ps(mask_n(mb - g * MR), src + g * MR));
  }
}

/* ap <- the mr rows i0.. of a over k = pc.. (kc), 12 floats per k, rows past mr zero:
 * any strides (no product of the cpu matmul comes here) */
TGT static void pack_a(float *restrict ap, const float *a, size_t ars, size_t acs, int i0, int mr,
                       int pc, int kc) {
  for (int k = 0; k < kc; k++)
    for (int r = 0; r < MR; r++)
      ap[(size_t)k * MR + r] = r < mr ? a[(size_t)(i0 + r) * ars + (size_t)(pc + k) * acs] : 0.0f;
}

/* ap (12 rows AROW apart) <- rows i0.. of a over k = pc.. (kc), rows past mr repeating
 * the last. Read in place, rows whose stride is a multiple of 1 KiB (a (N, 1024) or
 * (N, 4096) gradient) all map to the same few of the L1 cache's 64 sets and evict
 * each other while the micro-kernel runs along b: the fc and head input gradients
 * ran 20-25% slower that way. */
TGT static void pack_a_rows(float *restrict ap, const float *a, size_t ars, int i0, int mr,
                            int pc, int kc) {
  for (int r = 0; r < MR; r++) {
    const float *src = a + (size_t)(i0 + (r < mr ? r : mr - 1)) * ars + pc;
    float *dst = ap + (size_t)r * AROW;
    int k = 0;
    for (; k + 16 <= kc; k += 16) _mm512_store_ps(dst + k, _mm512_loadu_ps(src + k));
    if (k < kc) _mm512_mask_storeu_ps(dst + k, mask_n(kc - k), _mm512_maskz_loadu_ps(mask_n(kc - k), src + k));
  }
}

/* ---- the micro-kernel --------------------------------------------------------- */

/* c (mr x 32, masks m0 m1 for the columns) per mode with a (12 rows ars apart, k
 * acs apart; rows past mr: the caller's pointer clamping or zero padding) times
 * bp (kc x 32, k-major). R, a constant where it is inlined: the rows computed, 4, 8
 * or 12 (>= mr), so that a last group of 1-8 rows (M = 256 is 21 groups and 4 rows)
 * does not cost a whole one. */
TGT_INL void ukr(int kc, const float *a, size_t ars, size_t acs, const float *bp, float *c,
                 size_t ldc, int mr, __mmask16 m0, __mmask16 m1, zeroc_gemm_mode_t mode,
                 const float *bias, const int R) {
  const float *ar[MR];
  for (int r = 0; r < MR; r++) ar[r] = a + (size_t)(r < mr ? r : mr - 1) * ars;
  for (int r = 0; r < mr; r++) { /* the tile of c, wanted at the end */
    _mm_prefetch((const char *)(c + (size_t)r * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + (size_t)r * ldc + 16), _MM_HINT_T0);
  }
  __m512 x00 = _mm512_setzero_ps(), x01 = x00, x10 = x00, x11 = x00, x20 = x00, x21 = x00;
  __m512 x30 = x00, x31 = x00, x40 = x00, x41 = x00, x50 = x00, x51 = x00;
  __m512 x60 = x00, x61 = x00, x70 = x00, x71 = x00, x80 = x00, x81 = x00;
  __m512 x90 = x00, x91 = x00, xa0 = x00, xa1 = x00, xb0 = x00, xb1 = x00;
  const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5];
  const float *a6 = ar[6], *a7 = ar[7], *a8 = ar[8], *a9 = ar[9], *aa = ar[10], *ab = ar[11];
  for (int k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_load_ps(bp + (size_t)k * NR), b1 = _mm512_load_ps(bp + (size_t)k * NR + 16);
    const size_t ka = (size_t)k * acs;
    __m512 s;
#define ROW(ai, y0, y1)                                                                            \
  s = _mm512_set1_ps(ai[ka]);                                                                      \
  y0 = _mm512_fmadd_ps(s, b0, y0);                                                                 \
  y1 = _mm512_fmadd_ps(s, b1, y1);
    ROW(a0, x00, x01) ROW(a1, x10, x11) ROW(a2, x20, x21) ROW(a3, x30, x31)
    if (R > 4) {
      ROW(a4, x40, x41) ROW(a5, x50, x51) ROW(a6, x60, x61) ROW(a7, x70, x71)
    }
    if (R > 8) {
      ROW(a8, x80, x81) ROW(a9, x90, x91) ROW(aa, xa0, xa1) ROW(ab, xb0, xb1)
    }
#undef ROW
  }
  const __m512 acc[MR][2] = {{x00, x01}, {x10, x11}, {x20, x21}, {x30, x31},
                             {x40, x41}, {x50, x51}, {x60, x61}, {x70, x71},
                             {x80, x81}, {x90, x91}, {xa0, xa1}, {xb0, xb1}};
  __m512 add0 = _mm512_setzero_ps(), add1 = add0;
  if (mode == ZEROC_GEMM_BIAS) {
    add0 = _mm512_maskz_loadu_ps(m0, bias);
    add1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
  for (int r = 0; r < mr; r++) {
    float *cr = c + (size_t)r * ldc;
    if (mode == ZEROC_GEMM_ADD) {
      add0 = _mm512_maskz_loadu_ps(m0, cr);
      add1 = _mm512_maskz_loadu_ps(m1, cr + 16);
    }
    /* SET adds +0: x + 0 is x for every x but -0, whose sum then reads +0, as
     * OpenBLAS's product into a cleared c gives */
    _mm512_mask_storeu_ps(cr, m0, _mm512_add_ps(acc[r][0], add0));
    _mm512_mask_storeu_ps(cr + 16, m1, _mm512_add_ps(acc[r][1], add1));
  }
}

/* the micro-kernel for a's rows copied (ars apart) and for a packed 12 floats per k,
 * each with 12, 8 or 4 rows computed */
TGT static void ukr_rows(int kc, const float *a, size_t ars, const float *bp, float *c,
                         size_t ldc, int mr, __mmask16 m0, __mmask16 m1, zeroc_gemm_mode_t mode,
                         const float *bias) {
  if (mr > 8)
    ukr(kc, a, ars, 1, bp, c, ldc, mr, m0, m1, mode, bias, 12);
  else if (mr > 4)
    ukr(kc, a, ars, 1, bp, c, ldc, mr, m0, m1, mode, bias, 8);
  else
    ukr(kc, a, ars, 1, bp, c, ldc, mr, m0, m1, mode, bias, 4);
}

TGT static void ukr_packed(int kc, const float *ap, const float *bp, float *c, size_t ldc, int mr,
                           __mmask16 m0, __mmask16 m1, zeroc_gemm_mode_t mode,
                           const float *bias) {
  if (mr > 8)
    ukr(kc, ap, 1, MR, bp, c, ldc, mr, m0, m1, mode, bias, 12);
  else if (mr > 4)
    ukr(kc, ap, 1, MR, bp, c, ldc, mr, m0, m1, mode, bias, 8);
  else
    ukr(kc, ap, 1, MR, bp, c, ldc, mr, m0, m1, mode, bias, 4);
}

/* ---- one thread's part: rows [m0, m1) x columns [n0, n1) of c ------------------- */

typedef struct {
  zeroc_gemm_mode_t mode;
  int M, N, K;
  const float *a, *b, *bias;
  size_t ars, acs, brs, bcs, ldc;
  float *c;
} gemm_args_t;

TGT static void gemm_part(const gemm_args_t *g, scratch_t *s, int m_lo, int m_hi, int n_lo,
                          int n_hi) {
  const int in_place = g->acs == 1;
  for (int jc = n_lo; jc < n_hi; jc += NC) {
    const int nc = n_hi - jc < NC ? n_hi - jc : NC;
    for (int pc = 0; pc < g->K; pc += KC) {
      const int kc = g->K - pc < KC ? g->K - pc : KC;
      const zeroc_gemm_mode_t mode = pc == 0 ? g->mode : ZEROC_GEMM_ADD;
      pack_b(s->bp, g->b, g->brs, g->bcs, pc, kc, jc, nc);
      for (int ib = m_lo; ib < m_hi; ib += MCB) {
        const int mb = m_hi - ib < MCB ? m_hi - ib : MCB;
        if (!in_place && g->ars == 1) pack_a_block(s->apb, g->a, g->acs, ib, mb, pc, kc);
        for (int i = ib; i < ib + mb; i += MR) {
          const int mr = ib + mb - i < MR ? ib + mb - i : MR;
          const float *ap = s->ap;
          if (in_place)
            pack_a_rows(s->ap, g->a, g->ars, i, mr, pc, kc);
          else if (g->ars == 1)
            ap = s->apb + (size_t)((i - ib) / MR) * kc * MR;
          else
            pack_a(s->ap, g->a, g->ars, g->acs, i, mr, pc, kc);
          for (int p = 0; p * NR < nc; p++) {
            const int j = jc + p * NR, w = nc - p * NR;
            float *ct = g->c + (size_t)i * g->ldc + j;
            const float *bt = s->bp + (size_t)p * kc * NR, *bias = g->bias ? g->bias + j : NULL;
            if (in_place)
              ukr_rows(kc, ap, AROW, bt, ct, g->ldc, mr, mask_n(w), mask_n(w - 16), mode, bias);
            else
              ukr_packed(kc, ap, bt, ct, g->ldc, mr, mask_n(w), mask_n(w - 16), mode, bias);
          }
        }
      }
    }
  }
}

/* K = 0: c = 0, c = bias, or as it is */
static void gemm_k0(const gemm_args_t *g) {
  if (g->mode == ZEROC_GEMM_ADD) return;
  for (int i = 0; i < g->M; i++) {
    float *cr = g->c + (size_t)i * g->ldc;
    if (g->mode == ZEROC_GEMM_SET)
      memset(cr, 0, (size_t)g->N * sizeof *cr);
    else
      memcpy(cr, g->bias, (size_t)g->N * sizeof *cr);
  }
}

int zeroc__gemm(zeroc_gemm_mode_t mode, int M, int N, int K, const float *a, size_t ars,
                size_t acs, const float *b, size_t brs, size_t bcs, const float *bias, float *c,
                size_t ldc) {
  const gemm_args_t g = {mode, M, N, K, a, b, bias, ars, acs, brs, bcs, ldc, c};
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0) {
    gemm_k0(&g);
    return 0;
  }
  const double flops = 2.0 * M * N * K;
  int nt = flops < PAR_MIN_FLOPS ? 1 : omp_get_max_threads();
  /* columns when each thread gets two panels or more, else rows */
  const int by_cols = (N + NR - 1) / NR >= 2 * nt;
  const int units = by_cols ? (N + NR - 1) / NR : (M + MR - 1) / MR;
  if (nt > units) nt = units;
  int failed = 0;
  /* every thread gets its scratch before any writes c, so a failure leaves c as it was */
#pragma omp parallel num_threads(nt) if (nt > 1) shared(failed)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int u0 = units * t / n, u1 = units * (t + 1) / n;
    scratch_t *s = scratch_get();
    if (!s) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp barrier
    int bad;
#pragma omp atomic read
    bad = failed;
    if (!bad && u1 > u0) {
      if (by_cols)
        gemm_part(&g, s, 0, M, u0 * NR, u1 * NR < N ? u1 * NR : N);
      else
        gemm_part(&g, s, u0 * MR, u1 * MR < M ? u1 * MR : M, 0, N);
    }
  }
  return failed ? -1 : 0;
}

#else /* not x86-64: zeroc__gemm_available() is 0 and this is never called */

int zeroc__gemm(zeroc_gemm_mode_t mode, int M, int N, int K, const float *a, size_t ars,
                size_t acs, const float *b, size_t brs, size_t bcs, const float *bias, float *c,
                size_t ldc) {
  (void)mode, (void)M, (void)N, (void)K, (void)a, (void)ars, (void)acs, (void)b, (void)brs;
  (void)bcs, (void)bias, (void)c, (void)ldc;
  return -1;
}

#endif
