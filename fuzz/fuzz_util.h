/*
 * fuzz/fuzz_util.h - what every fuzz harness checks besides "no crash": a
 * rejected input comes with a one-line message that names the input. A
 * violated property aborts, which libFuzzer (and the replay tests) report.
 */
#ifndef ZEROC_FUZZ_UTIL_H
#define ZEROC_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zeroc/result.h"

#define FUZZ_REQUIRE(cond, ...)                                                                    \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz property violated at %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* 1 when `s` has no control characters (messages show those escaped). */
static inline int fuzz_printable(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
  return 1;
}

/* A failure `r` must be one of the documented codes for malformed input and
 * carry a message of one line that contains `names` (e.g. the file name) when
 * that is printable. */
static inline void fuzz_check_rejection(zeroc_result_t r, const char *msg, const char *names) {
  FUZZ_REQUIRE(r == ZEROC_ERR_CORRUPT || r == ZEROC_ERR_INVALID_ARG || r == ZEROC_ERR_IO ||
                   r == ZEROC_ERR_NOMEM,
               "unexpected code %s: %s", zeroc_result_name(r), msg);
  FUZZ_REQUIRE(msg && msg[0], "empty message for %s", zeroc_result_name(r));
  FUZZ_REQUIRE(!strchr(msg, '\n'), "message of several lines: %s", msg);
  FUZZ_REQUIRE(!names || !fuzz_printable(names) || strstr(msg, names),
               "message does not name '%s': %s", names, msg);
  for (const char *p = msg; *p; p++)
    FUZZ_REQUIRE((unsigned char)*p >= 0x20 && *p != 0x7f, "control character in the message: %s",
                 msg);
}

#endif
