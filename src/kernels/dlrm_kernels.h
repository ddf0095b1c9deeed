/*
 * kernels/dlrm_kernels.h - the DLRM kernels (ReLU, the pairwise dot-product
 * interaction, binary cross-entropy with logits), cpu and cuda twins behind
 * the same dispatch as kernels.h. fp32 only: DLRM computes in fp32 on both
 * devices (the tables and the dots are precision-sensitive, the MLPs small).
 *
 * Letters: B batch, D embedding dim, T tables, F = T + 1 vectors per sample
 * (the bottom MLP's output and the T pooled embeddings), P = F (F - 1) / 2
 * pairs (the strict upper triangle), N elements.
 */
#ifndef ZEROC_KERNELS_DLRM_KERNELS_H
#define ZEROC_KERNELS_DLRM_KERNELS_H

#include <stddef.h>

#include "kernels/kernels.h"

/* out (N) = max(inp, 0); out may alias inp. */
zeroc_result_t zeroc_k_relu_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                    const float *inp, size_t N);
/* dinp (N) += (out > 0) * dout, from the forward's output (so the input need not be kept). */
zeroc_result_t zeroc_k_relu_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dinp,
                                     const float *out, const float *dout, size_t N);
/* z (B,D), emb (B,T,D) -> out (B, D + P): out[b, :D] = z[b]; then for i < j over the
 * F vectors v0 = z[b], v1..vT = emb[b, 0..T-1], in order (0,1), (0,2) .. (0,T), (1,2) ..,
 * out[b, D + pair] = <v_i, v_j>. */
zeroc_result_t zeroc_k_interact_forward(zeroc_kernels_t *k, zeroc_stream_t *s, float *out,
                                        const float *z, const float *emb, int B, int T, int D);
/* dz (B,D) += dout[:, :D] + sum over pairs of dout * partner; demb (B,T,D) += likewise. */
zeroc_result_t zeroc_k_interact_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *dz,
                                         float *demb, const float *dout, const float *z,
                                         const float *emb, int B, int T, int D);
/* Binary cross-entropy with logits, numerically stable:
 * losses (B) = max(x, 0) - x y + log(1 + exp(-|x|)), x = logits[b], y = labels[b] in [0, 1].
 * When dlogits is not NULL, dlogits (B) = dloss * (sigmoid(x) - y) (overwritten). */
zeroc_result_t zeroc_k_bce_forward_backward(zeroc_kernels_t *k, zeroc_stream_t *s, float *losses,
                                            float *dlogits, const float *logits,
                                            const float *labels, int B, float dloss);

/* The cpu twins are declared in kernels/cpu/cpu_kernels.h, the cuda twins in
 * kernels/cuda/cuda_kernels.h. */

#endif
