/*
 * kernels/cpu/encoder.c - GPT-2's input embedding: token row plus position row,
 * forward and a deterministic backward (no atomics; see the backward's note).
 */
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"

#define PAR_MIN 16384 /* elements below which threading costs more than it saves */

/* Channels per backward work item: 16 floats = one 64-byte cache line, so no two
 * threads ever write the same line of dwte. */
#define CH_BLOCK 16

// inp (B,T) int32, wte (V,C), wpe (>=T,C) -> out (B,T,C)
ZEROC_CPU_HOT void zeroc__cpu_encoder_forward(float *out, const int32_t *inp, const float *wte,
                                              const float *wpe, int B, int T, int C) {
  const size_t BT = (size_t)B * T;
#pragma omp parallel for if (BT * (size_t)C > PAR_MIN) schedule(static)
  for (size_t bt = 0; bt < BT; bt++) {
    const float *te = wte + (size_t)inp[bt] * C;
    const float *pe = wpe + (bt % (size_t)T) * C;
    float *o = out + bt * C;
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
  }
}

// dout (B,T,C), inp (B,T) -> dwte (V,C) +=, dwpe (T,C) +=
//
// Parallelising over tokens would make two threads add into the same dwte row
// whenever a token repeats. Instead each work item owns a block of channels and
// walks all tokens in (b,t) order: every element of dwte receives its additions
// in the same order whatever the thread count, so the result is bitwise
// reproducible and needs no atomics.
ZEROC_CPU_HOT void zeroc__cpu_encoder_backward(float *dwte, float *dwpe, const float *dout,
                                               const int32_t *inp, int B, int T, int C) {
  const size_t BT = (size_t)B * T;
  const int nblocks = (C + CH_BLOCK - 1) / CH_BLOCK;
#pragma omp parallel for if (BT * (size_t)C > PAR_MIN) schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    const int c0 = blk * CH_BLOCK;
    const int c1 = c0 + CH_BLOCK < C ? c0 + CH_BLOCK : C;
    for (size_t bt = 0; bt < BT; bt++) {
      const float *d = dout + bt * C;
      float *te = dwte + (size_t)inp[bt] * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) te[c] += d[c];
    }
    /* dwpe[t] sums over the batch in b order. */
    for (int t = 0; t < T; t++) {
      float *pe = dwpe + (size_t)t * C;
      for (int b = 0; b < B; b++) {
        const float *d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
        for (int c = c0; c < c1; c++) pe[c] += d[c];
      }
    }
  }
}
