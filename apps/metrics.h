/*
 * apps/metrics.h - the --metrics file of `zeroc train` (JSON lines, one per
 * step): numbers as valid JSON, and a clean record across a resume.
 */
#ifndef ZEROC_APPS_METRICS_H
#define ZEROC_APPS_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* `v` as a JSON number (%.9g), or null when it is not finite (JSON has no
 * NaN or Infinity). Returns buf. */
const char *zmetrics_num(double v, char *buf, size_t n);

/* Before a run resumed at `step` appends to the metrics file `path`: cuts the
 * file at its first line for a later step (written by the run that crashed
 * after the checkpoint) or at a torn last line, so every step keeps exactly
 * one line. A missing file or one that is not a regular file is left alone.
 * Returns 0, or -1 after printing one line naming the file and the error. */
int zmetrics_truncate(const char *path, uint64_t step);

#endif
