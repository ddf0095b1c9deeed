/*
 * core/sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written
 * from the specifications for the node heartbeat's message authentication
 * (comm/heartbeat.c). Checked against the published test vectors (FIPS 180-4
 * examples, RFC 4231) in tests/test_core.c.
 */
#ifndef ZEROC_CORE_SHA256_H
#define ZEROC_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define ZEROC_SHA256_BYTES 32

typedef struct zeroc__sha256 {
  uint32_t h[8];
  uint64_t bytes;    /* message length so far */
  uint8_t block[64]; /* the partial block */
  size_t fill;
} zeroc__sha256_t;

void zeroc__sha256_init(zeroc__sha256_t *s);
void zeroc__sha256_update(zeroc__sha256_t *s, const void *data, size_t n);
void zeroc__sha256_final(zeroc__sha256_t *s, uint8_t out[ZEROC_SHA256_BYTES]);
/* The digest of data[0..n) at once. */
void zeroc__sha256(const void *data, size_t n, uint8_t out[ZEROC_SHA256_BYTES]);

/* HMAC-SHA256 of msg[0..n) under key[0..klen) (any length; longer than a
 * block is hashed first, as RFC 2104 says). */
void zeroc__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
                        uint8_t out[ZEROC_SHA256_BYTES]);

/* Compares a and b (n bytes) in time independent of where they differ: 1 equal. */
int zeroc__ct_equal(const void *a, const void *b, size_t n);

#endif
