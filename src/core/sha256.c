/*
 * core/sha256.c - SHA-256 and HMAC-SHA256 (what and why: core/sha256.h).
 */
#include <string.h>

#include "core/sha256.h"

/* the first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4, 4.2.2) */
static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 |
           p[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void zeroc__sha256_init(zeroc__sha256_t *s) {
  /* the fractional parts of the square roots of the first 8 primes (5.3.3) */
  static const uint32_t H0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  memcpy(s->h, H0, sizeof H0);
  s->bytes = 0;
  s->fill = 0;
}

void zeroc__sha256_update(zeroc__sha256_t *s, const void *data, size_t n) {
  const uint8_t *p = data;
  s->bytes += n;
  while (n) {
    size_t take = 64 - s->fill < n ? 64 - s->fill : n;
    memcpy(s->block + s->fill, p, take);
    s->fill += take, p += take, n -= take;
    if (s->fill == 64) {
      compress(s->h, s->block);
      s->fill = 0;
    }
  }
}

void zeroc__sha256_final(zeroc__sha256_t *s, uint8_t out[ZEROC_SHA256_BYTES]) {
  /* a 1 bit, zeros to 56 mod 64 bytes, then the length in bits, big-endian (5.1.1) */
  uint64_t bits = s->bytes * 8;
  uint8_t pad[72] = {0x80};
  size_t npad = (s->fill < 56 ? 56 : 120) - s->fill;
  for (int i = 0; i < 8; i++) pad[npad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
  zeroc__sha256_update(s, pad, npad + 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(s->h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
    out[4 * i + 3] = (uint8_t)s->h[i];
  }
}

void zeroc__sha256(const void *data, size_t n, uint8_t out[ZEROC_SHA256_BYTES]) {
  zeroc__sha256_t s;
  zeroc__sha256_init(&s);
  zeroc__sha256_update(&s, data, n);
  zeroc__sha256_final(&s, out);
}

void zeroc__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
                        uint8_t out[ZEROC_SHA256_BYTES]) {
  uint8_t k0[64] = {0}, ipad[64], opad[64], inner[ZEROC_SHA256_BYTES];
  if (klen > 64)
    zeroc__sha256(key, klen, k0);
  else if (klen)
    memcpy(k0, key, klen);
  for (int i = 0; i < 64; i++) ipad[i] = k0[i] ^ 0x36, opad[i] = k0[i] ^ 0x5c;
  zeroc__sha256_t s;
  zeroc__sha256_init(&s);
  zeroc__sha256_update(&s, ipad, 64);
  zeroc__sha256_update(&s, msg, n);
  zeroc__sha256_final(&s, inner);
  zeroc__sha256_init(&s);
  zeroc__sha256_update(&s, opad, 64);
  zeroc__sha256_update(&s, inner, sizeof inner);
  zeroc__sha256_final(&s, out);
}

int zeroc__ct_equal(const void *a, const void *b, size_t n) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t d = 0;
  for (size_t i = 0; i < n; i++) d |= x[i] ^ y[i];
  return d == 0;
}
