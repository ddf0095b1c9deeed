/*
 * kernels/cpu/gemm.h - zeroc's own single-precision matrix product for CPUs with
 * AVX-512 (gemm.c), used by the cpu matmul in place of OpenBLAS's sgemm where the
 * CPU has it and ZEROC_CPU_GEMM is not 0.
 *
 * Why a product of its own: on an AVX-512 CPU (AMD Zen 4) OpenBLAS 0.3.21 runs the
 * GPT's products (K 256..4096, one dimension 256..1024) at 80-90% of the
 * multiply-add peak, and its callers clear c or copy the bias into it first (a
 * pass over c). This one stores the first K block's sums, with the bias added,
 * instead of reading c, and its 12 x 32 micro-kernel holds 24 of the 32 vector
 * registers: a GPT step on two ranks ran 5-7% faster (benchmarks/RESULTS.md).
 *
 * Matrices are given by a pointer and two strides, element (i, j) of x at
 * x[i * rs + j * cs], so a transposed operand is just other strides.
 */
#ifndef ZEROC_KERNELS_CPU_GEMM_H
#define ZEROC_KERNELS_CPU_GEMM_H

#include <stddef.h>

/* what c starts from: c += a b; c = a b (c is not read); c = bias (N, per column) + a b */
typedef enum { ZEROC_GEMM_ADD, ZEROC_GEMM_SET, ZEROC_GEMM_BIAS } zeroc_gemm_mode_t;

/* 1 when zeroc__gemm can run here: the CPU has AVX-512F and ZEROC_CPU_GEMM is not 0 */
int zeroc__gemm_available(void);

/* c (M x N, rows ldc apart, row-major) per mode with a (M x K: strides ars, acs) times
 * b (K x N: strides brs, bcs). Any strides; the fast paths are a with acs or ars 1 and
 * b with bcs or brs 1 (every product of the cpu matmul). Runs on up to omp_get_max_threads() threads; every element of c gets
 * its sums in the same order whatever the thread count. Only where
 * zeroc__gemm_available(). 0, or -1 with c untouched when a thread's scratch (365 KiB)
 * could not be allocated. */
int zeroc__gemm(zeroc_gemm_mode_t mode, int M, int N, int K, const float *a, size_t ars,
                size_t acs, const float *b, size_t brs, size_t bcs, const float *bias, float *c,
                size_t ldc);

#endif
