/*
 * core/rng.c - the seeded random-access permutation behind --shuffle: a Feistel
 * network made to fit [0, n) by cycle walking (see core/rng.h).
 */
#include "core/rng.h"

#define FEISTEL_ROUNDS 6

/* One pass of the Feistel network over [0, 2^(2*half)). A Feistel network is
 * a bijection whatever its round function, so the round function only needs
 * to mix well, not to be invertible. */
static uint64_t feistel(uint64_t x, int half, const uint64_t *round_keys) {
  uint64_t mask = (half >= 64) ? ~0ULL : ((1ULL << half) - 1);
  uint64_t left = x >> half, right = x & mask;
  for (int r = 0; r < FEISTEL_ROUNDS; r++) {
    uint64_t s = right ^ round_keys[r];
    uint64_t f = zeroc__splitmix64(&s) & mask;
    uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half) | right;
}

uint64_t zeroc__permute(uint64_t x, uint64_t n, uint64_t key) {
  if (n <= 1 || x >= n) return x;
  int bits = 64 - __builtin_clzll(n - 1); /* smallest b with 2^b >= n */
  if (bits & 1) bits++;
  int half = bits / 2; /* <= 32, so the halves never overflow */
  uint64_t round_keys[FEISTEL_ROUNDS];
  for (int r = 0; r < FEISTEL_ROUNDS; r++) round_keys[r] = zeroc__hash2(key, (uint64_t)r + 1);
  /* Cycle walking: x's orbit under the domain permutation returns to x, which
   * is < n, so this loop ends; the values it skips are >= n. */
  uint64_t y = x;
  do {
    y = feistel(y, half, round_keys);
  } while (y >= n);
  return y;
}
