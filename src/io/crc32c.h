/*
 * io/crc32c.h - CRC-32C (Castagnoli), the checksum of checkpoint files.
 *
 * Software slicing-by-8, or the SSE4.2 crc32 instruction when the CPU has it
 * (detected at run time). Both give the same value; crc32c(0, "123456789", 9)
 * is 0xE3069283.
 */
#ifndef ZEROC_IO_CRC32C_H
#define ZEROC_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/result.h"

/* Extends `crc` (0 to start) over `n` bytes of `buf`; chaining is exact:
 * crc32c(crc32c(0, a), b) == crc32c(0, a || b). */
uint32_t zeroc__crc32c(uint32_t crc, const void *buf, size_t n);
/* The same through the portable table path only (for tests and benchmarks). */
uint32_t zeroc__crc32c_sw(uint32_t crc, const void *buf, size_t n);
/* 1 when zeroc__crc32c uses the CPU instruction. */
int zeroc__crc32c_hw(void);

/*
 * CRC-32C of a whole file, read in 1 MiB pieces with pread.
 *   crc: receives the checksum; bytes: receives the file size (may be NULL).
 * Returns ZEROC_ERR_IO naming the file and errno.
 */
zeroc_result_t zeroc__crc32c_file(const char *path, uint32_t *crc, uint64_t *bytes);

#endif
