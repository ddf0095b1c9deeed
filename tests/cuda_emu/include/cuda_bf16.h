/*
 * tests/cuda_emu/include/cuda_bf16.h - the bf16 storage type of the CPU emulation: the
 * kernels only move its bits (their conversions are their own).
 */
#ifndef ZEROC_CUDA_EMU_BF16_H
#define ZEROC_CUDA_EMU_BF16_H
#include <cstdint>
struct __nv_bfloat16 {
  uint16_t x;
};
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }
#endif
