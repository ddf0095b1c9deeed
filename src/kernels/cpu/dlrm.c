/*
 * kernels/cpu/dlrm.c - the cpu twins of the DLRM kernels (kernels/dlrm_kernels.h):
 * plain loops, obviously right, one sample per OpenMP iteration.
 */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/cpu_kernels.h"

void zeroc__cpu_relu_forward(float *out, const float *inp, size_t N) {
  for (size_t i = 0; i < N; i++) out[i] = inp[i] > 0 ? inp[i] : 0.0f;
}

void zeroc__cpu_relu_backward(float *dinp, const float *out, const float *dout, size_t N) {
  for (size_t i = 0; i < N; i++)
    if (out[i] > 0) dinp[i] += dout[i];
}

static float dot(const float *a, const float *b, int D) {
  float s = 0;
  for (int d = 0; d < D; d++) s += a[d] * b[d];
  return s;
}

/* vector f (0 = the bottom output, 1..T the tables) of sample b */
static const float *vec(const float *z, const float *emb, int b, int f, int T, int D) {
  return f == 0 ? z + (size_t)b * D : emb + ((size_t)b * T + (size_t)(f - 1)) * D;
}

// z (B,D), emb (B,T,D) -> out (B, D + P)
void zeroc__cpu_interact_forward(float *out, const float *z, const float *emb, int B, int T,
                                 int D) {
  int F = T + 1, P = F * (F - 1) / 2;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; b++) {
    float *o = out + (size_t)b * (D + P);
    for (int d = 0; d < D; d++) o[d] = z[(size_t)b * D + d];
    int p = D;
    for (int i = 0; i < F; i++)
      for (int j = i + 1; j < F; j++)
        o[p++] = dot(vec(z, emb, b, i, T, D), vec(z, emb, b, j, T, D), D);
  }
}

// dout (B, D + P) -> dz (B,D) +=, demb (B,T,D) +=
void zeroc__cpu_interact_backward(float *dz, float *demb, const float *dout, const float *z,
                                  const float *emb, int B, int T, int D) {
  int F = T + 1, P = F * (F - 1) / 2;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; b++) {
    const float *g = dout + (size_t)b * (D + P);
    float *dzb = dz + (size_t)b * D;
    for (int d = 0; d < D; d++) dzb[d] += g[d];
    int p = D;
    for (int i = 0; i < F; i++)
      for (int j = i + 1; j < F; j++, p++) {
        const float *vi = vec(z, emb, b, i, T, D), *vj = vec(z, emb, b, j, T, D);
        float *di = i == 0 ? dzb : demb + ((size_t)b * T + (size_t)(i - 1)) * D;
        float *dj = demb + ((size_t)b * T + (size_t)(j - 1)) * D;
        for (int d = 0; d < D; d++) {
          di[d] += g[p] * vj[d];
          dj[d] += g[p] * vi[d];
        }
      }
  }
}

void zeroc__cpu_bce(float *losses, float *dlogits, const float *logits, const float *labels, int B,
                    float dloss) {
  for (int b = 0; b < B; b++) {
    float x = logits[b], y = labels[b];
    losses[b] = fmaxf(x, 0.0f) - x * y + log1pf(expf(-fabsf(x)));
    if (dlogits) {
      /* sigmoid without overflow on either side */
      float e = expf(-fabsf(x)), sig = x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
      dlogits[b] = dloss * (sig - y);
    }
  }
}
