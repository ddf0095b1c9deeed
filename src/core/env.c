/*
 * core/env.c - reading ZEROC_* knobs from the environment, each logged once.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/env.h"
#include "core/log.h"

int64_t zeroc__env_int(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (errno || *end) {
    ZWARN(ENV, "%s='%s' is not an integer; using %lld", name, v, (long long)dflt);
    return dflt;
  }
  ZINFO(ENV, "%s set by environment to %lld", name, x);
  return x;
}

double zeroc__env_double(const char *name, double dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || *end) {
    ZWARN(ENV, "%s='%s' is not a number; using %g", name, v, dflt);
    return dflt;
  }
  ZINFO(ENV, "%s set by environment to %g", name, x);
  return x;
}

const char *zeroc__env_str(const char *name, const char *dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  ZINFO(ENV, "%s set by environment to '%s'", name, v);
  return v;
}
