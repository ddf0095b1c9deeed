/*
 * kernels/cpu/embedbag.c - the embedding-bag kernels of embed/: sum pooling of
 * bags of table rows, its backward into a compact row gradient, and the
 * row-wise AdaGrad update. Plain C, obviously right; the cuda twins are in
 * kernels/cuda/embedbag.cu.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* The output (or gradient) row of bag b: bags come in blocks of `blk` (one
 * block per peer rank in embed's exchange buffers), `blk_stride` floats apart,
 * rows `ld` floats apart inside a block. */
static inline int64_t bag_row(int64_t b, int64_t blk, int64_t blk_stride, int64_t ld) {
  return (b / blk) * blk_stride + (b % blk) * ld;
}

void zeroc__cpu_embedbag_forward(float *out, int64_t blk, int64_t blk_stride, int64_t ldo,
                                 const float *w, int64_t ldw, const int64_t *idx,
                                 const int32_t *offs, int64_t nbags, int dc) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nbags; b++) {
    float *o = out + bag_row(b, blk, blk_stride, ldo);
    for (int j = 0; j < dc; j++) o[j] = 0.0f;
    for (int32_t i = offs[b]; i < offs[b + 1]; i++) {
      const float *row = w + idx[i] * ldw;
      for (int j = 0; j < dc; j++) o[j] += row[j];
    }
  }
}

void zeroc__cpu_embedbag_backward(float *grad, int64_t ldg, const int64_t *idx, const int32_t *offs,
                                  int64_t nbags, const float *dout, int64_t blk, int64_t blk_stride,
                                  int64_t ldo, int dc) {
  /* serial over bags: ids of different bags may share a row, and a fixed
   * order keeps the sums the same run to run */
  for (int64_t b = 0; b < nbags; b++) {
    const float *d = dout + bag_row(b, blk, blk_stride, ldo);
    for (int32_t i = offs[b]; i < offs[b + 1]; i++) {
      float *g = grad + idx[i] * ldg;
      for (int j = 0; j < dc; j++) g[j] += d[j];
    }
  }
}

void zeroc__cpu_rowwise_sumsq(float *ss, const float *g, int64_t U, int dc, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < U; u++) {
    float acc = 0.0f;
    for (int j = 0; j < dc; j++) {
      float x = scale * g[u * dc + j];
      acc += x * x;
    }
    ss[u] = acc;
  }
}

void zeroc__cpu_rowwise_adagrad(float *w, int64_t ldw, float *state, const int64_t *rows,
                                const float *g, const float *ss, int64_t U, int dc, int D,
                                float scale, float lr, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < U; u++) {
    int64_t r = rows ? rows[u] : u;
    float st = state[r] + ss[u] / (float)D;
    state[r] = st;
    float step = lr / (sqrtf(st) + eps);
    for (int j = 0; j < dc; j++) w[r * ldw + j] -= step * (scale * g[u * dc + j]);
  }
}

void zeroc__cpu_copy2d(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                       int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    memcpy(dst + i * ldd, src + i * lds, (size_t)cols * sizeof(float));
}
