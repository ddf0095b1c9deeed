/*
 * core/rng.h - the small random number generators of the data path: splitmix64
 * (seeding and hashing), xoshiro256** (streams), and a seeded random-access
 * permutation of [0, n) (the per-epoch sequence shuffle).
 *
 * Everything here is a pure function of its inputs, so any rank can compute
 * any sequence or any position of a shuffled epoch without talking to others.
 */
#ifndef ZEROC_CORE_RNG_H
#define ZEROC_CORE_RNG_H

#include <stdint.h>

/* splitmix64 (Steele, Lea, Flood 2014): advances *s and returns a well-mixed word.
 * Used to seed xoshiro and to hash seeds with indices. */
static inline uint64_t zeroc__splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A 64-bit hash of two words: distinct (a, b) give unrelated outputs. */
static inline uint64_t zeroc__hash2(uint64_t a, uint64_t b) {
  uint64_t s = a;
  uint64_t h = zeroc__splitmix64(&s);
  s = h ^ b;
  return zeroc__splitmix64(&s);
}

/* xoshiro256** (Blackman, Vigna 2018): 256 bits of state, period 2^256 - 1. */
typedef struct zeroc__rng {
  uint64_t s[4];
} zeroc__rng_t;

static inline void zeroc__rng_seed(zeroc__rng_t *r, uint64_t seed) {
  uint64_t sm = seed;
  for (int i = 0; i < 4; i++) r->s[i] = zeroc__splitmix64(&sm);
  /* an all-zero state would be a fixed point; splitmix64 cannot produce four
   * zeros in a row, but keep the guard so the invariant is visible */
  if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1;
}

static inline uint64_t zeroc__rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t zeroc__rng_next(zeroc__rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = zeroc__rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = zeroc__rotl64(s[3], 45);
  return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double zeroc__rng_double(zeroc__rng_t *r) {
  return (double)(zeroc__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n >= 1, exactly unbiased: draws below 2^64 mod n
 * are rejected so every residue has the same number of preimages. */
static inline uint64_t zeroc__rng_below(zeroc__rng_t *r, uint64_t n) {
  uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
  for (;;) {
    uint64_t x = zeroc__rng_next(r);
    if (x >= threshold) return x % n;
  }
}

/*
 * A bijection of [0, n) chosen by `key`, evaluated at one point in O(1) time
 * and memory: a 6-round balanced Feistel network on the smallest even-bit
 * domain 2^(2h) >= n, with cycle walking (re-apply until the value lands
 * below n; the domain is < 4n, so fewer than 4 rounds trips on average).
 * n = 0 or x >= n returns x unchanged.
 */
uint64_t zeroc__permute(uint64_t x, uint64_t n, uint64_t key);

#endif
