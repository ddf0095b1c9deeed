/*
 * io/crc32c.c - CRC-32C: slicing-by-8 tables built once at first use, and the
 * SSE4.2 instruction path on x86-64 CPUs that have it.
 */
#include "io/crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/files.h"

/* The reflected Castagnoli polynomial 0x1EDC6F41. */
#define CRC32C_POLY 0x82f63b78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int use_hw;

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n) {
  uint64_t c64 = c;
  while (n && ((uintptr_t)p & 7)) {
    c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
    n--;
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = __builtin_ia32_crc32di(c64, w);
  }
  uint32_t c32 = (uint32_t)c64;
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#endif

static void build_tables(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
    table[0][i] = c;
  }
  /* table[k][i]: the CRC of byte i followed by k zero bytes, so eight bytes
   * can be folded with eight independent lookups */
  for (int k = 1; k < 8; k++)
    for (int i = 0; i < 256; i++)
      table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
#if defined(__x86_64__)
  __builtin_cpu_init();
  use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* The working register is the complemented CRC (pre- and post-inversion of
 * the standard definition), so callers chain plain CRC values. */
static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    n--;
  }
  for (; n >= 8; n -= 8, p += 8) {
    /* little-endian byte order regardless of the host */
    uint32_t lo =
        c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint32_t hi =
        (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
        table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
        table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
  }
  while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
  return c;
}

uint32_t zeroc__crc32c_sw(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&table_once, build_tables);
  return ~crc_sw(~crc, (const uint8_t *)buf, n);
}

uint32_t zeroc__crc32c(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&table_once, build_tables);
#if defined(__x86_64__)
  if (use_hw) return ~crc_hw(~crc, (const uint8_t *)buf, n);
#endif
  return ~crc_sw(~crc, (const uint8_t *)buf, n);
}

int zeroc__crc32c_hw(void) {
  pthread_once(&table_once, build_tables);
  return use_hw;
}

zeroc_result_t zeroc__crc32c_file(const char *path, uint32_t *crc, uint64_t *bytes) {
  enum { CHUNK = 1 << 20 };
  zeroc_result_t res = ZEROC_OK;
  uint8_t *buf = NULL;
  uint32_t c = 0;
  uint64_t off = 0;
  struct stat st;
  int fd = -1;
  ZEROC_TRY(zeroc__open_regular(path, "file", &fd, &st));
  buf = malloc(CHUNK);
  if (!buf) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "crc32c: malloc(%d) for reading '%s' failed", CHUNK, path);
    goto fail;
  }
  for (;;) {
    ssize_t got = pread(fd, buf, CHUNK, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "crc32c: pread('%s', offset %llu): %s", path,
                       (unsigned long long)off, strerror(errno));
      goto fail;
    }
    if (got == 0) break;
    c = zeroc__crc32c(c, buf, (size_t)got);
    off += (uint64_t)got;
  }
  *crc = c;
  if (bytes) *bytes = off;
fail:
  free(buf);
  if (fd >= 0) close(fd);
  return res;
}
