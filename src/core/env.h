/*
 * core/env.h - ZEROC_* environment knobs, read once where they are used and
 * logged under INFO (ENV). Config struct values take precedence over these.
 * Every numeric knob has one accepted range, kept in env.c's table, so that a
 * value is judged the same wherever it is read and a bad one is an error, not
 * a silent default or a wrapped number.
 */
#ifndef ZEROC_CORE_ENV_H
#define ZEROC_CORE_ENV_H

#include <stdint.h>

#include "zeroc/result.h"

/* The integer knob `name` (one of env.c's table) into *out: `dflt` when unset
 * or empty. A value that is not an integer, or lies outside the knob's range,
 * is ZEROC_ERR_INVALID_ARG naming the variable, the value and what is
 * accepted; *out is then `dflt`. An unknown name is ZEROC_ERR_INTERNAL. */
zeroc_result_t zeroc__env_i64(const char *name, int64_t dflt, int64_t *out);
/* The same for a number (finite, within the knob's range). */
zeroc_result_t zeroc__env_f64(const char *name, double dflt, double *out);
/* The string value or `dflt` (may be NULL). */
const char *zeroc__env_str(const char *name, const char *dflt);
/* Checks every numeric knob of the table that is set, so that a bad value
 * stops zeroc_ctx_create on every rank instead of surfacing later, when (or
 * if) the module that reads it runs. Returns the first bad one's error. */
zeroc_result_t zeroc__env_check_all(void);

#endif
