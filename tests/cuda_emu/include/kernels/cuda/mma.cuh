/*
 * tests/cuda_emu/include/kernels/cuda/mma.cuh - the CPU emulation of
 * src/kernels/cuda/mma.cuh (found first on the emulation's include path): the same
 * functions with the same per-lane fragment semantics. The warp's lanes are fibers; each
 * instruction is a warp-wide exchange between two warp barriers, as the emulated
 * shuffles are, so every lane of the warp must call it (as the kernels do). bf16 products
 * are exact in fp32; the sum over k runs in order (the tensor cores' order is their own).
 */
#ifndef ZEROC_CUDA_EMU_MMA_CUH
#define ZEROC_CUDA_EMU_MMA_CUH
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace emu {
struct MmaSlot {
  uint32_t a[4], b[2];
  const void *p;
};
inline MmaSlot *mma_slots(unsigned n) {
  static thread_local std::vector<MmaSlot> v;
  if (v.size() < n) v.resize(n);
  return v.data();
}
inline float bf_lo(uint32_t r) { return __uint_as_float(r << 16); }
inline float bf_hi(uint32_t r) { return __uint_as_float(r & 0xffff0000u); }
/* A warp barrier; the fiber's thread indices are restored after it. */
inline void warp_barrier() {
  Block *blk = cur;
  const unsigned t = blk->current;
  wait(blk->warp[t / 32]);
  set_indices(blk, t);
}
} // namespace emu

inline void zc_mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  const unsigned t = emu::cur->current, lane = t & 31, base = t - lane;
  emu::MmaSlot *S = emu::mma_slots(emu::cur->nt);
  memcpy(S[t].a, a, sizeof S[t].a);
  S[t].b[0] = b0;
  S[t].b[1] = b1;
  emu::warp_barrier();
  float A[16][16], B[16][8];
  for (unsigned l = 0; l < 32; l++) {
    const unsigned g = l >> 2, q = l & 3;
    const emu::MmaSlot &s = S[base + l];
    A[g][2 * q] = emu::bf_lo(s.a[0]), A[g][2 * q + 1] = emu::bf_hi(s.a[0]);
    A[g + 8][2 * q] = emu::bf_lo(s.a[1]), A[g + 8][2 * q + 1] = emu::bf_hi(s.a[1]);
    A[g][2 * q + 8] = emu::bf_lo(s.a[2]), A[g][2 * q + 9] = emu::bf_hi(s.a[2]);
    A[g + 8][2 * q + 8] = emu::bf_lo(s.a[3]), A[g + 8][2 * q + 9] = emu::bf_hi(s.a[3]);
    B[2 * q][g] = emu::bf_lo(s.b[0]), B[2 * q + 1][g] = emu::bf_hi(s.b[0]);
    B[2 * q + 8][g] = emu::bf_lo(s.b[1]), B[2 * q + 9][g] = emu::bf_hi(s.b[1]);
  }
  const unsigned g = lane >> 2, q = lane & 3;
  for (int e = 0; e < 4; e++) {
    const unsigned row = g + (e >> 1) * 8, col = 2 * q + (e & 1);
    float acc = c[e];
    for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
    c[e] = acc;
  }
  emu::warp_barrier(); /* nobody overwrites a slot before every lane has read */
}

inline void zc_ldsm_x4(uint32_t r[4], const void *row) {
  const unsigned t = emu::cur->current, lane = t & 31, base = t - lane;
  emu::MmaSlot *S = emu::mma_slots(emu::cur->nt);
  S[t].p = row;
  emu::warp_barrier();
  const unsigned g = lane >> 2, q = lane & 3;
  for (int m = 0; m < 4; m++) {
    const uint16_t *rp = static_cast<const uint16_t *>(S[base + 8 * m + g].p);
    r[m] = (uint32_t)rp[2 * q] | (uint32_t)rp[2 * q + 1] << 16;
  }
  emu::warp_barrier();
}

inline void zc_ldsm_x4_t(uint32_t r[4], const void *row) {
  const unsigned t = emu::cur->current, lane = t & 31, base = t - lane;
  emu::MmaSlot *S = emu::mma_slots(emu::cur->nt);
  S[t].p = row;
  emu::warp_barrier();
  const unsigned g = lane >> 2, q = lane & 3;
  for (int m = 0; m < 4; m++) {
    uint16_t v[2];
    for (int i = 0; i < 2; i++)
      v[i] = static_cast<const uint16_t *>(S[base + 8 * m + 2 * q + i].p)[g];
    r[m] = (uint32_t)v[0] | (uint32_t)v[1] << 16;
  }
  emu::warp_barrier();
}

inline void zc_cp_async16(void *dst, const void *src, bool pred) {
  if (pred)
    memcpy(dst, src, 16);
  else
    memset(dst, 0, 16);
}
inline void zc_cp_async4(void *dst, const void *src, bool pred) {
  if (pred)
    memcpy(dst, src, 4);
  else
    memset(dst, 0, 4);
}
inline void zc_cp_commit() {}
template <int N> inline void zc_cp_wait() {}

/* round to nearest even, as cvt.rn.bf16x2.f32 */
inline uint32_t zc_pack_bf16(float lo, float hi) {
  auto r = [](float f) {
    uint32_t u = __float_as_uint(f);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  };
  return r(lo) | r(hi) << 16;
}
#endif
