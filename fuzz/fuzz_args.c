/*
 * fuzz/fuzz_args.c - the command-line flag parser (apps/args.c) with the real
 * flag table of `zeroc train` (apps/train_flags.c, linked into this harness). The input is split at NUL bytes into
 * argv. Properties: the parser returns 0 or 2, and an accepted command line
 * leaves every flag inside its documented range.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/train_flags.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  char *argv[65];
  int argc = 0;
  FUZZ_REQUIRE(buf != NULL, "allocation");
  memcpy(buf, data, size);
  buf[size] = 0;
  for (size_t i = 0; i < size && argc < 64;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;
  ztrain_opts_t o;
  memset(&o, 0, sizeof o);
  o.eps = 1e-8; /* the values the trainer resolves unset ones to: the ranges below assume them */
  o.comm_timeout = 300;
  o.spike_window = 50;
  o.spike_z = 6;
  o.hsdp = o.tp = o.pp = o.vpp = 1;
  int rc = ztrain_parse(argc, argv, &o);
  FUZZ_REQUIRE(rc == 0 || rc == 2, "parse returned %d", rc);
  if (rc == 0) {
    FUZZ_REQUIRE(o.device >= 0 && o.device <= 2 && o.model >= 0 && o.model <= 6,
                 "choice out of range");
    FUZZ_REQUIRE(o.schedule >= 0 && o.schedule <= 1 && o.dtype >= 0 && o.dtype <= 2,
                 "choice out of range");
    FUZZ_REQUIRE(o.zero >= 0 && o.zero <= 3, "--zero %d", o.zero);
    FUZZ_REQUIRE(o.steps >= 0 && o.seed >= 0 && o.hsdp >= 1 && o.tp >= 1 && o.pp >= 1,
                 "an integer flag out of range");
    FUZZ_REQUIRE(isfinite(o.lr) && o.lr >= 0 && o.lr <= 10, "--lr %g", o.lr);
    FUZZ_REQUIRE(isfinite(o.eps) && o.eps > 0 && o.eps <= 1, "--eps %g", o.eps);
    FUZZ_REQUIRE(isfinite(o.comm_timeout) && o.comm_timeout > 0, "--comm-timeout %g",
                 o.comm_timeout);
    FUZZ_REQUIRE(o.spike_window >= 2 && o.spike_window <= ZEROC_SPIKE_MAX_WINDOW && o.spike_z > 0,
                 "spike flags");
    FUZZ_REQUIRE(!o.data || o.data[0], "an empty --data was accepted");
  }
  free(buf);
  return 0;
}
