/*
 * kernels/dropout.h - the one rule every dropout mask comes from, shared by the
 * cpu kernels, their cuda twins and the model.
 *
 * A mask is never drawn from a stateful generator: each element's keep/drop
 * decision is a hash of a key naming the tensor (seed, optimizer step, layer,
 * site) and the element's coordinates in the unsplit global batch (the
 * sequence's slot in the step's global batch, its token position, the global
 * channel, or the global head, query and key positions). Whatever rank
 * computes an element (data, tensor, sequence or pipeline parallel), and
 * whether it is computed again (backward, recompute), it gets the same
 * decision, so every layout trains with the same masks and nothing is stored.
 *
 * Inverted dropout: kept values are scaled by 1/(1-p), so evaluation runs the
 * plain model. Plain C (and C++), with the qualifiers nvcc needs.
 */
#ifndef ZEROC_KERNELS_DROPOUT_H
#define ZEROC_KERNELS_DROPOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define ZEROC_HD __host__ __device__ __forceinline__
#else
#define ZEROC_HD static inline
#endif

/* Where a dropout mask sits. Attention's elements are (b, head, query i, key j)
 * of the probabilities; the elementwise sites' are (row, channel) of an
 * (N,C) tensor whose rows are the micro-batch's (b, t) tokens. */
typedef struct zeroc_dropout {
  float p;       /* drop probability, 0 <= p < 1; 0 (or a NULL descriptor): off */
  uint64_t key;  /* zeroc__dropout_key(seed, step, layer, site) */
  uint64_t seq0; /* slot in the step's global batch of the micro-batch's sequence 0 */
  int64_t row0;  /* elementwise: the (b*T + t) row of the first row given (sequence split) */
  int T;         /* tokens per sequence of the micro-batch */
  int Tmax;      /* the model's context: positions are numbered on it, whatever T */
  int width;     /* elementwise: the channels C; attention: the model's heads NH */
  int first;     /* attention: the global index of the first head given (tensor split) */
} zeroc_dropout_t;

/* The sites of one layer (the key's last word). */
enum {
  ZEROC_DROP_EMBED = 0,
  ZEROC_DROP_ATTN = 1,
  ZEROC_DROP_ATTN_RESID = 2,
  ZEROC_DROP_MLP_RESID = 3
};

/* splitmix64's finaliser over key + id * golden ratio: a well-mixed word per
 * (key, id), the same on host and device. */
ZEROC_HD uint64_t zeroc__dropout_hash(uint64_t key, uint64_t id) {
  uint64_t z = key + (id + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The key of one tensor's masks. */
ZEROC_HD uint64_t zeroc__dropout_key(uint64_t seed, uint64_t step, int layer, int site) {
  uint64_t k = zeroc__dropout_hash(0x5a17c0ffee0dd5ULL, seed);
  k = zeroc__dropout_hash(k, step);
  return zeroc__dropout_hash(k, (uint64_t)layer * 8 + (uint64_t)site);
}

/* Elements whose hash's high 32 bits fall below this are dropped: a fraction
 * p of them (to 2^-32). */
ZEROC_HD uint32_t zeroc__dropout_threshold(float p) {
  double t = (double)p * 4294967296.0;
  return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

ZEROC_HD int zeroc__dropout_keep(uint64_t key, uint64_t id, uint32_t threshold) {
  return (uint32_t)(zeroc__dropout_hash(key, id) >> 32) >= threshold;
}

/* What a kept element is multiplied by. */
ZEROC_HD float zeroc__dropout_scale(float p) { return 1.0f / (1.0f - p); }

/* The element id of (row, channel c) at an elementwise site; `row` local. */
ZEROC_HD uint64_t zeroc__dropout_id_rc(const zeroc_dropout_t *d, int64_t row, int64_t c) {
  int64_t g = d->row0 + row, b = g / d->T, t = g % d->T;
  return ((d->seq0 + (uint64_t)b) * (uint64_t)d->Tmax + (uint64_t)t) * (uint64_t)d->width +
         (uint64_t)c;
}

/* The element id of attention probability (b, local head h, query i, key j). */
ZEROC_HD uint64_t zeroc__dropout_id_att(const zeroc_dropout_t *d, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  uint64_t bh = (d->seq0 + (uint64_t)b) * (uint64_t)d->width + (uint64_t)(d->first + h);
  return (bh * (uint64_t)d->Tmax + (uint64_t)i) * (uint64_t)d->Tmax + (uint64_t)j;
}

#endif
