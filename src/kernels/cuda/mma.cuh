/*
 * kernels/cuda/mma.cuh - the warp-level tensor-core and asynchronous-copy instructions
 * the flash attention kernels (attention_mma.cu) use, as inline PTX (sm_80 and later):
 *
 *   zc_mma_bf16   D (16x8 fp32) += A (16x16 bf16, row) B (16x8 bf16, col), mma.sync m16n8k16
 *   zc_ldsm_x4    four 8x8 bf16 matrices from shared memory (ldmatrix)
 *   zc_ldsm_x4_t  the same, each transposed (ldmatrix .trans)
 *   zc_cp_async16 / zc_cp_async4  global -> shared copies that bypass registers (cp.async),
 *                 zero-filling when `pred` is false; zc_cp_commit / zc_cp_wait<N> group them
 *   zc_pack_bf16  two floats -> one register of two bf16 (round to nearest even)
 *
 * Fragment layout of m16n8k16 (lane = 4 g + t, g = lane / 4, t = lane % 4):
 *   A regs: a[0] = (row g,   cols 2t, 2t+1)   a[1] = (row g+8, cols 2t, 2t+1)
 *           a[2] = (row g,   cols 2t+8, +9)   a[3] = (row g+8, cols 2t+8, +9)
 *   B regs: b[0] = (rows k 2t, 2t+1, col n g)  b[1] = (rows k 2t+8, 2t+9, col n g)
 *   C/D:    c[0], c[1] = (row g, cols 2t, 2t+1)  c[2], c[3] = (row g+8, cols 2t, 2t+1)
 * the lower-indexed element of a pair in the low 16 bits.
 *
 * tests/cuda_emu/include/kernels/cuda/mma.cuh is this file's CPU emulation (same names,
 * the same per-lane semantics, computed with warp barriers), so the kernels' fragment
 * and tile logic is checked without a GPU.
 */
#ifndef ZEROC_KERNELS_CUDA_MMA_CUH
#define ZEROC_KERNELS_CUDA_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

__device__ __forceinline__ void zc_mma_bf16(float c[4], const uint32_t a[4], uint32_t b0,
                                            uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Lane l gives the address of row l % 8 of matrix l / 8 (16-byte aligned rows of 8
 * bf16); r[m] receives matrix m: lane 4g + t holds elements (g, 2t), (g, 2t+1). */
__device__ __forceinline__ void zc_ldsm_x4(uint32_t r[4], const void *row) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
/* As zc_ldsm_x4, each matrix transposed: lane 4g + t holds elements (2t, g), (2t+1, g). */
__device__ __forceinline__ void zc_ldsm_x4_t(uint32_t r[4], const void *row) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

/* 16 bytes global -> shared (both 16-byte aligned); zeros when !pred (src is not read). */
__device__ __forceinline__ void zc_cp_async16(void *dst, const void *src, bool pred) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
/* 4 bytes global -> shared; zeros when !pred. */
__device__ __forceinline__ void zc_cp_async4(void *dst, const void *src, bool pred) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  const int n = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void zc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ __forceinline__ void zc_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint32_t zc_pack_bf16(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); /* .x = lo: the low half */
  return *reinterpret_cast<uint32_t *>(&h);
}

#endif
