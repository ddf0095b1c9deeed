/*
 * core/env.h - ZEROC_* environment knobs, read once where they are used and
 * logged under INFO (ENV). Config struct values take precedence over these.
 */
#ifndef ZEROC_CORE_ENV_H
#define ZEROC_CORE_ENV_H

#include <stdint.h>

/* The integer value of `name`, or `dflt` when unset. A malformed value is
 * reported with a warning and `dflt` is used. */
int64_t zeroc__env_int(const char *name, int64_t dflt);
double zeroc__env_double(const char *name, double dflt);
/* The string value or `dflt` (may be NULL). */
const char *zeroc__env_str(const char *name, const char *dflt);

#endif
