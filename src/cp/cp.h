/*
 * cp/cp.h - context parallelism: the sequence split over the cp group and the
 * attention that needs the whole sequence (ring and Ulysses).
 *
 * Zigzag split (causal load balance): the global sequence of T tokens is cut
 * into 2N chunks of c = T/(2N) tokens; cp rank r holds chunks r and 2N-1-r, in
 * that order, as its Tl = T/N local tokens. Local token i sits at global
 * position zeroc__cp_position(N, r, T, i). Everything but attention (embedding,
 * LayerNorm, MLP, loss) runs on the local tokens unchanged.
 *
 * Ring: K/V of one rank's two chunks travel around the group (rank r sends to
 * r+1, receives from r-1), N-1 hops; each rank attends its two query chunks to
 * the chunk pair in hand. All chunks are c tokens long and positions are zigzag,
 * so a (query chunk, key chunk) pair is either fully visible (key chunk before),
 * diagonal (same chunk: causal) or fully masked (skipped): every hop costs each
 * rank exactly two c x c blocks (the first, own, hop: two diagonals and one full
 * block). Partial outputs are merged with their log-sum-exp. The transfers run on
 * two p2p streams of the cp object (send, receive) into a double buffer, so the
 * next K/V arrives while this one is computed (overlap on; off: wait for the
 * transfer before computing, to measure what overlap hides).
 * Backward: the flash backward per pair with the final out and lse (D =
 * rowsum(dout*out)); dQ accumulates locally; dK/dV of the travelling chunk pair
 * travel with it and arrive back at their owner after N hops. Passing them round
 * the ring rather than reduce-scattering a (B,T,2Cl) gradient keeps every cp
 * buffer O(Tl) and each hop's transfer next to the compute it follows.
 *
 * Ulysses: an all-to-all turns sequence-split qkv (B,Tl,3Cl) into head-split
 * (B,T,3Cl/N) (this rank's NHl/N heads, zigzag chunks put back in natural
 * order), the unchanged causal kernel runs on NHl/N heads, and an all-to-all
 * turns out (B,T,Cl/N) back into (B,Tl,Cl). Backward all-to-alls qkv, out and
 * dout again (nothing head-split is kept between forward and backward), runs the
 * kernel's backward and all-to-alls dqkv back.
 *
 * Communication per rank for one forward + backward of one attention layer,
 * counted as the comm layer does (bytes this rank sends to other ranks), e the
 * element size, Tl = T/N:
 *   ring:    (N-1) hops of K/V forward, (N-1) of K/V and N of dK/dV backward:
 *            send bytes = (3N-2) * B*Tl*2Cl*e   (counters ZEROC_COLL_SEND)
 *   ulysses: all-to-alls of qkv and out forward, qkv, out, dout and dqkv backward:
 *            bus bytes = 12 * B*Tl*Cl*e * (N-1)/N   (counters ZEROC_COLL_ALLTOALL)
 * With N == 1 nothing is communicated and the calls are the plain kernels, bit
 * for bit.
 *
 * Shapes: B sequences, T the global sequence length, Tl = T/N local tokens,
 * Cl channels of this rank (C/tp), NHl heads of this rank (NH/tp), HS = Cl/NHl.
 */
#ifndef ZEROC_CP_CP_H
#define ZEROC_CP_CP_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "cp/cp_types.h"
#include "kernels/kernels.h"

/* Creates the cp object on group `g` (NULL or size 1: no cp) with the kernels
 * `k` and the memory `mem` its buffers come from; overlap: see above. Buffers
 * are allocated on first use (or by zeroc__cp_reserve). */
zeroc_result_t zeroc__cp_create(zeroc_kernels_t *k, const zeroc__devmem_t *mem, zeroc_group_t *g,
                                zeroc__cp_mode_t mode, int overlap, zeroc__cp_t **out);
/* Frees the buffers, streams and events (after the streams are drained). NULL: nothing. */
void zeroc__cp_destroy(zeroc__cp_t *cp);

/* Allocates the buffers for shape (B, T, Cl, NHl) now (tag ZEROC_TAG_BUFFERS), so
 * the peak is reached before training; a later call with a larger shape grows them. */
zeroc_result_t zeroc__cp_reserve(zeroc__cp_t *cp, int B, int T, int Cl, int NHl);

/* Bytes of cp buffers for (mode, N, B, T, Cl, NHl) and element size esz: the one
 * source of truth for the planner and the allocation. 0 when N == 1.
 *   ring:    (4*B*Tl*2Cl + B*c*Cl) * esz + B*NHl*c*4   (K/V and dK/dV double
 *            buffers, one block's partial out and lse)
 *   ulysses: 14 * B*Tl*Cl * esz   (send and receive staging of qkv, head-split
 *            qkv, out, dout and dqkv) */
size_t zeroc__cp_buffer_bytes(zeroc__cp_mode_t mode, int N, int B, int T, int Cl, int NHl,
                              size_t esz);

/* Bytes this rank sends to other cp ranks for one attention layer's forward
 * (*fwd) and backward (*bwd), as the comm counters count them (ring: send bytes;
 * ulysses: all-to-all bus bytes): the formulas above, for the planner. 0 when
 * N == 1. Ulysses needs Cl divisible by N (as its head check does). */
void zeroc__cp_comm_bytes(zeroc__cp_mode_t mode, int N, int B, int T, int Cl, size_t esz,
                          uint64_t *fwd, uint64_t *bwd);

/* ZEROC_OK when a global sequence of T tokens splits over N cp ranks (T a
 * multiple of 2N); otherwise ZEROC_ERR_INVALID_ARG with a one-line message. */
zeroc_result_t zeroc__cp_check_seq(int N, int T);
/* Ulysses: ZEROC_OK when the NH/tp heads of a rank split over N cp ranks;
 * otherwise ZEROC_ERR_INVALID_ARG naming heads, tp and cp. Ring: always OK. */
zeroc_result_t zeroc__cp_check_heads(zeroc__cp_mode_t mode, int NH, int tp, int N);

/* Global position of local token i (0 <= i < T/N) of cp rank r of N. */
static inline int64_t zeroc__cp_position(int N, int r, int T, int i) {
  const int c = T / (2 * N);
  return i < c ? (int64_t)r * c + i : (int64_t)(2 * N - 1 - r) * c + (i - c);
}

/*
 * Causal attention of this rank's local queries against the whole sequence:
 * qkv (B,Tl,3Cl) act, packed q | k | v as zeroc_k_attention_forward expects,
 * -> out (B,Tl,Cl) act = the rows of the single-rank attention at this rank's
 * positions; lse: B*NHl*Tl fp32 kept for backward (ring: (B,NHl,Tl) of the local
 * rows; ulysses: (B,NHl/N,T) of this rank's heads in natural order).
 * drop: NULL, or the layer's attention dropout with global coordinates
 * (drop->first the global index of this rank's first head, positions numbered
 * on the whole sequence: drop->Tmax >= T): masks equal the single-rank run's.
 * Everything is enqueued on `s` (the compute stream). Nothing is kept in the cp
 * object between calls (every transfer has completed, in `s`'s order, when a
 * call returns), so all layers and micro-batches can share one cp object.
 */
zeroc_result_t zeroc__cp_attention_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out,
                                           float *lse, const void *qkv, int B, int T, int Cl,
                                           int NHl, const zeroc_dropout_t *drop);
/* dqkv (B,Tl,3Cl) += the gradient w.r.t. qkv, from dout (B,Tl,Cl) and the
 * forward's qkv, out and lse. */
zeroc_result_t zeroc__cp_attention_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                            const void *dout, const void *qkv, const void *out,
                                            const float *lse, int B, int T, int Cl, int NHl,
                                            const zeroc_dropout_t *drop);

#endif
