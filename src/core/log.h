/*
 * core/log.h - logging, silent by default.
 *
 * ZEROC_DEBUG=WARN|INFO|TRACE sets the level, ZEROC_DEBUG_SUBSYS=INIT,COMM,...
 * (or ALL, or ^COMM to exclude) the subsystems. Lines are prefixed with
 * "host:pid rank R". Warnings are printed even without ZEROC_DEBUG.
 */
#ifndef ZEROC_CORE_LOG_H
#define ZEROC_CORE_LOG_H

enum {
  ZEROC_LOG_NONE = 0,
  ZEROC_LOG_WARN = 1,
  ZEROC_LOG_INFO = 2,
  ZEROC_LOG_TRACE = 3,
};

enum {
  ZEROC_SUB_INIT = 1 << 0,
  ZEROC_SUB_COMM = 1 << 1,
  ZEROC_SUB_SHARD = 1 << 2,
  ZEROC_SUB_IO = 1 << 3,
  ZEROC_SUB_MEM = 1 << 4,
  ZEROC_SUB_DEVICE = 1 << 5,
  ZEROC_SUB_TOPO = 1 << 6,
  ZEROC_SUB_OFFLOAD = 1 << 7,
  ZEROC_SUB_TP = 1 << 8,
  ZEROC_SUB_PP = 1 << 9,
  ZEROC_SUB_MODEL = 1 << 10,
  ZEROC_SUB_ENV = 1 << 11,
  ZEROC_SUB_ERROR = 1 << 12, /* every recorded failure, with its file:line (TRACE) */
  ZEROC_SUB_ALL = 0x7fffffff,
};

extern int zeroc__log_level;
extern int zeroc__log_subsys;

void zeroc__log_init(void);
void zeroc__log_set_rank(int rank);
void zeroc__log(int level, int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define ZLOG(level, sub, ...)                                                                     \
  do {                                                                                            \
    if (zeroc__log_level >= (level) && (zeroc__log_subsys & ZEROC_SUB_##sub))                     \
      zeroc__log((level), ZEROC_SUB_##sub, __FILE__, __LINE__, __VA_ARGS__);                      \
  } while (0)
/* ZLOG with the origin given (a helper logging for its caller's line). */
#define ZLOG_AT(level, sub, file, line, ...)                                                       \
  do {                                                                                             \
    if (zeroc__log_level >= (level) && (zeroc__log_subsys & ZEROC_SUB_##sub))                      \
      zeroc__log((level), ZEROC_SUB_##sub, (file), (line), __VA_ARGS__);                           \
  } while (0)
#define ZWARN(sub, ...) ZLOG(ZEROC_LOG_WARN, sub, __VA_ARGS__)
#define ZINFO(sub, ...) ZLOG(ZEROC_LOG_INFO, sub, __VA_ARGS__)
#define ZTRACE(sub, ...) ZLOG(ZEROC_LOG_TRACE, sub, __VA_ARGS__)

#endif
