/*
 * kernels/dropout.h - the one rule every dropout mask comes from, shared by the
 * cpu kernels, their cuda twins and the model.
 *
 * A mask is never drawn from a stateful generator: each element's keep/drop
 * decision is a hash of a key naming the tensor (seed, optimizer step, layer,
 * site) and the element's coordinates in the unsplit global batch (the
 * sequence's slot in the step's global batch, its token position, the global
 * channel, or the global head, query and key positions): element (row, col) is
 * kept when zeroc_i_dropout_bits(zeroc_i_dropout_row_key(key, row), col) >=
 * zeroc_i_dropout_threshold(p). Whatever rank
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
  uint64_t key;  /* zeroc_i_dropout_key(seed, step, layer, site) */
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
ZEROC_HD uint64_t zeroc_i_dropout_hash(uint64_t key, uint64_t id) {
  uint64_t z = key + (id + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The key of one tensor's masks. */
ZEROC_HD uint64_t zeroc_i_dropout_key(uint64_t seed, uint64_t step, int layer, int site) {
  uint64_t k = zeroc_i_dropout_hash(0x5a17c0ffee0dd5ULL, seed);
  k = zeroc_i_dropout_hash(k, step);
  return zeroc_i_dropout_hash(k, (uint64_t)layer * 8 + (uint64_t)site);
}

/* Elements whose bits fall below this are dropped: a fraction p of them (to 2^-32). */
ZEROC_HD uint32_t zeroc_i_dropout_threshold(float p) {
  double t = (double)p * 4294967296.0;
  return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

/* murmur3's 32-bit finaliser: a bijection with full avalanche. */
ZEROC_HD uint32_t zeroc_i_dropout_fmix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  return x ^ (x >> 16);
}

/* A mask is drawn row by row: a 64-bit hash names the row (a token, or an attention
 * query row of one head), then 32-bit arithmetic (cheap on a GPU, vectorised on a
 * CPU) gives each column (channel, or key position) its 32 random bits. */
ZEROC_HD uint64_t zeroc_i_dropout_row_key(uint64_t key, uint64_t row) {
  return zeroc_i_dropout_hash(key, row);
}
ZEROC_HD uint32_t zeroc_i_dropout_bits(uint64_t row_key, uint32_t col) {
  /* splitmix32 in effect: a Weyl sequence over the columns, offset by the row key's low
   * half and flipped by its high half, through one finaliser */
  return zeroc_i_dropout_fmix32(((uint32_t)row_key + col * 0x9e3779b9u) ^
                                (uint32_t)(row_key >> 32));
}

/* What a kept element is multiplied by. */
ZEROC_HD float zeroc_i_dropout_scale(float p) { return 1.0f / (1.0f - p); }

/* The global row of local row `row` at an elementwise site: (sequence slot, position). */
ZEROC_HD uint64_t zeroc_i_dropout_row_rc(const zeroc_dropout_t *d, int64_t row) {
  int64_t g = d->row0 + row, b = g / d->T, t = g % d->T;
  return (d->seq0 + (uint64_t)b) * (uint64_t)d->Tmax + (uint64_t)t;
}

/* The global row of attention's (b, local head h, query i): its columns are the keys. */
ZEROC_HD uint64_t zeroc_i_dropout_row_att(const zeroc_dropout_t *d, int64_t b, int64_t h,
                                          int64_t i) {
  uint64_t bh = (d->seq0 + (uint64_t)b) * (uint64_t)d->width + (uint64_t)(d->first + h);
  return bh * (uint64_t)d->Tmax + (uint64_t)i;
}

#endif
