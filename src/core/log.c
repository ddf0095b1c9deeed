/*
 * core/log.c - the logger: level and subsystems from the environment, read
 * once; one line per call, prefixed "host:pid rank R", written atomically.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

int zeroc__log_level = ZEROC_LOG_WARN;
int zeroc__log_subsys = ZEROC_SUB_ALL;
static int log_rank = -1;
static char log_host[64];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const struct {
  const char *name;
  int bit;
} subsys_names[] = {
    {"INIT", ZEROC_SUB_INIT},   {"COMM", ZEROC_SUB_COMM},       {"SHARD", ZEROC_SUB_SHARD},
    {"IO", ZEROC_SUB_IO},       {"MEM", ZEROC_SUB_MEM},         {"DEVICE", ZEROC_SUB_DEVICE},
    {"TOPO", ZEROC_SUB_TOPO},   {"OFFLOAD", ZEROC_SUB_OFFLOAD}, {"TP", ZEROC_SUB_TP},
    {"PP", ZEROC_SUB_PP},       {"MODEL", ZEROC_SUB_MODEL},     {"ENV", ZEROC_SUB_ENV},
    {"ERROR", ZEROC_SUB_ERROR}, {"ALL", ZEROC_SUB_ALL},
};

static int subsys_bit(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
    if (strlen(subsys_names[i].name) == n && strncasecmp(subsys_names[i].name, s, n) == 0)
      return subsys_names[i].bit;
  return 0;
}

static void log_init_once(void) {
  gethostname(log_host, sizeof log_host - 1);
  char *dot = strchr(log_host, '.');
  if (dot) *dot = 0;
  const char *lvl = getenv("ZEROC_DEBUG");
  if (lvl) {
    if (!strcasecmp(lvl, "NONE")) zeroc__log_level = ZEROC_LOG_NONE;
    else if (!strcasecmp(lvl, "WARN")) zeroc__log_level = ZEROC_LOG_WARN;
    else if (!strcasecmp(lvl, "INFO")) zeroc__log_level = ZEROC_LOG_INFO;
    else if (!strcasecmp(lvl, "TRACE")) zeroc__log_level = ZEROC_LOG_TRACE;
    else
      fprintf(stderr, "zeroc: ZEROC_DEBUG='%s' not understood; accepted: NONE, WARN, INFO, TRACE\n",
              lvl);
  }
  const char *sub = getenv("ZEROC_DEBUG_SUBSYS");
  if (sub && *sub) {
    int exclude = sub[0] == '^';
    int mask = 0;
    const char *p = sub + exclude;
    while (*p) {
      size_t n = strcspn(p, ",");
      int bit = subsys_bit(p, n);
      if (!bit)
        fprintf(stderr, "zeroc: ZEROC_DEBUG_SUBSYS has unknown subsystem '%.*s'\n", (int)n, p);
      mask |= bit;
      p += n;
      if (*p == ',') p++;
    }
    zeroc__log_subsys = exclude ? (ZEROC_SUB_ALL & ~mask) : mask;
  }
}

void zeroc__log_init(void) { pthread_once(&log_once, log_init_once); }

void zeroc__log_set_rank(int rank) {
  zeroc__log_init();
  log_rank = rank;
}

void zeroc__log(int level, int subsys, const char *file, int line, const char *fmt, ...) {
  zeroc__log_init();
  static const char *lvl[] = {"", "WARN", "INFO", "TRACE"};
  const char *sub = "?";
  for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
    if (subsys_names[i].bit == subsys) sub = subsys_names[i].name;
  char buf[2048];
  int n;
  if (level >= ZEROC_LOG_TRACE) {
    const char *base = strrchr(file, '/');
    n = snprintf(buf, sizeof buf, "%s:%d rank %d zeroc %s %s %s:%d ", log_host, (int)getpid(),
                 log_rank, lvl[level], sub, base ? base + 1 : file, line);
  } else {
    n = snprintf(buf, sizeof buf, "%s:%d rank %d zeroc %s %s ", log_host, (int)getpid(), log_rank,
                 lvl[level], sub);
  }
  if (n < 0 || (size_t)n >= sizeof buf) n = 0;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  /* one write() so lines from ranks and threads do not interleave */
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w;
}
