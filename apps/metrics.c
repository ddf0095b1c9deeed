/*
 * apps/metrics.c - the --metrics file of `zeroc train`: JSON numbers, and
 * the cut that keeps one line per step when a run resumes.
 */
#include "apps/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *zmetrics_num(double v, char *buf, size_t n) {
  if (isfinite(v)) snprintf(buf, n, "%.9g", v);
  else snprintf(buf, n, "null");
  return buf;
}

/* The step of a metrics line, which starts {"step": N; -1 when it does not. */
static int64_t line_step(const char *line) {
  static const char pre[] = "{\"step\": ";
  if (strncmp(line, pre, sizeof pre - 1)) return -1;
  const char *p = line + sizeof pre - 1;
  int64_t v = 0;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

int zmetrics_truncate(const char *path, uint64_t step) {
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return 0; /* nothing recorded yet */
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    close(fd);
    return 0;
  }
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    fprintf(stderr, "zeroc train: --metrics '%s': cannot open to cut it at the checkpoint's step %llu: %s\n",
            path, (unsigned long long)step, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  /* cut: the offset of the first line to drop (the file's length if none) */
  char *line = NULL;
  size_t cap = 0;
  off_t at = 0, cut = -1;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) > 0) {
    int64_t s = line_step(line);
    if (line[n - 1] != '\n' || (s >= 0 && (uint64_t)s > step)) {
      cut = at;
      break;
    }
    at += n;
  }
  free(line);
  int rc = 0;
  if (cut >= 0 && (ftruncate(fd, cut) != 0 || fsync(fd) != 0)) {
    fprintf(stderr, "zeroc train: --metrics '%s': cannot cut it at byte %lld (the checkpoint's step %llu): %s\n",
            path, (long long)cut, (unsigned long long)step, strerror(errno));
    rc = -1;
  }
  fclose(f);
  return rc;
}
