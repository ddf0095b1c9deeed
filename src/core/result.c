/*
 * core/result.c - result names and sentences, the per-thread error text and a
 * context's last failure, and the small type helpers of zeroc/types.h and
 * zeroc/mem.h.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "zeroc/mem.h"
#include "zeroc/types.h"

static const struct {
  const char *name, *text;
} results[ZEROC_RESULT_COUNT] = {
    [ZEROC_OK] = {"ZEROC_OK", "success"},
    [ZEROC_ERR_INVALID_ARG] = {"ZEROC_ERR_INVALID_ARG",
                               "invalid argument: a value is out of range or inconsistent; "
                               "the detailed message names it and what is accepted"},
    [ZEROC_ERR_NOMEM] = {"ZEROC_ERR_NOMEM",
                         "out of memory: try a higher ZeRO stage, offload, activation "
                         "recompute or a smaller batch"},
    [ZEROC_ERR_CUDA] = {"ZEROC_ERR_CUDA", "a CUDA call failed; check the driver and the GPU"},
    [ZEROC_ERR_NCCL] = {"ZEROC_ERR_NCCL",
                        "an NCCL call failed; NCCL_DEBUG=WARN shows NCCL's own reason"},
    [ZEROC_ERR_MPI] = {"ZEROC_ERR_MPI", "an MPI call failed; check the launch (mpirun/srun)"},
    [ZEROC_ERR_IO] = {"ZEROC_ERR_IO",
                      "a file operation failed; check the path, permissions and free space"},
    [ZEROC_ERR_TIMEOUT] = {"ZEROC_ERR_TIMEOUT",
                           "a collective timed out: a peer rank is dead, stuck or much slower; "
                           "--comm-timeout sets the bound"},
    [ZEROC_ERR_REMOTE] = {"ZEROC_ERR_REMOTE",
                          "another rank failed; its own message names the cause"},
    [ZEROC_ERR_UNSUPPORTED] = {"ZEROC_ERR_UNSUPPORTED",
                               "this combination of options is not supported"},
    [ZEROC_ERR_NUMERIC] = {"ZEROC_ERR_NUMERIC",
                           "non-finite values (NaN/Inf): lower the learning rate or enable "
                           "clipping"},
    [ZEROC_ERR_CORRUPT] = {"ZEROC_ERR_CORRUPT",
                           "a file is malformed or fails its checksum; it was not used"},
    [ZEROC_ERR_NODEVICE] = {"ZEROC_ERR_NODEVICE",
                            "the requested device is not present; use --device cpu"},
    [ZEROC_ERR_INTERNAL] = {"ZEROC_ERR_INTERNAL",
                            "internal error in zeroc: please report it with the message"},
};

const char *zeroc_result_string(zeroc_result_t r) {
  if ((unsigned)r >= ZEROC_RESULT_COUNT) return "unknown result code";
  return results[r].text;
}

const char *zeroc_result_name(zeroc_result_t r) {
  if ((unsigned)r >= ZEROC_RESULT_COUNT) return "ZEROC_ERR_UNKNOWN";
  return results[r].name;
}

/* ---- per-thread error text ------------------------------------------------ */

static _Thread_local char tls_err[ZEROC_ERRMSG_MAX];
static _Thread_local unsigned long tls_seq;

/* The length of the well-formed UTF-8 sequence at p that is not a control
 * character (U+0080..U+009F, C1), or 0. */
static int utf8_printable(const unsigned char *p) {
  if (p[0] < 0x80) return p[0] >= 0x20 && p[0] != 0x7f;
  int len = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
            : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
  for (int i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the terminating NUL */
  /* overlong forms, surrogates and code points above U+10FFFF */
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
    return 0;
  if (p[0] == 0xc2 && p[1] <= 0x9f) return 0; /* C1 controls move terminals as C0 ones do */
  return len;
}

/* Copies `src` into `dst` (size n) with control characters (C0, DEL, C1) and
 * bytes that are not well-formed UTF-8 written as \n, \r, \t or \xNN: a
 * message quoting file contents (a tensor name, a JSON key, a path) stays one
 * printable line and cannot move the terminal. */
static void printable(char *dst, size_t n, const char *src) {
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)src; *p && k + 1 < n; p++) {
    int ok = utf8_printable(p);
    if (ok) {
      if (k + (size_t)ok + 1 > n) break;
      memcpy(dst + k, p, (size_t)ok);
      k += (size_t)ok;
      p += ok - 1;
      continue;
    }
    char esc[8];
    int e = *p == '\n' ? snprintf(esc, sizeof esc, "\\n")
            : *p == '\r' ? snprintf(esc, sizeof esc, "\\r")
            : *p == '\t' ? snprintf(esc, sizeof esc, "\\t")
                         : snprintf(esc, sizeof esc, "\\x%02x", *p);
    if (k + (size_t)e + 1 > n) break;
    memcpy(dst + k, esc, (size_t)e);
    k += (size_t)e;
  }
  dst[k] = 0;
}

/* The message names the values, not our sources: the file and line where it
 * was raised go to the debug log only (ZEROC_DEBUG=TRACE, subsystem ERROR). */
zeroc_result_t zeroc__fail(zeroc_result_t r, const char *file, int line, const char *fmt, ...) {
  /* formatted apart from tls_err: an argument may be the previous message */
  char raw[ZEROC_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  printable(tls_err, sizeof tls_err, raw);
  tls_seq++;
  zeroc__log_init(); /* once: a failure before any context is logged too */
  ZLOG_AT(ZEROC_LOG_TRACE, ERROR, file, line, "%s: %s", zeroc_result_name(r), tls_err);
  return r;
}

zeroc_result_t zeroc_error_set(zeroc_result_t r, const char *fmt, ...) {
  char raw[ZEROC_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt ? fmt : "", ap);
  va_end(ap);
  printable(tls_err, sizeof tls_err, raw);
  tls_seq++;
  return r;
}

const char *zeroc__tls_error(void) { return tls_err; }

void zeroc__tls_error_set(const char *msg) {
  if (msg != tls_err) snprintf(tls_err, sizeof tls_err, "%s", msg ? msg : "");
  tls_seq++;
}

unsigned long zeroc__tls_error_seq(void) { return tls_seq; }

void zeroc__tls_error_clear(void) { tls_err[0] = 0; }

/* ---- types ----------------------------------------------------------------- */

size_t zeroc_dtype_size(zeroc_dtype_t dt) {
  switch (dt) {
  case ZEROC_FP32: return 4;
  case ZEROC_BF16: return 2;
  case ZEROC_INT32: return 4;
  case ZEROC_FP64: return 8;
  case ZEROC_UINT8: return 1;
  case ZEROC_INT64: return 8;
  default: return 0;
  }
}

const char *zeroc_dtype_name(zeroc_dtype_t dt) {
  static const char *names[ZEROC_DTYPE_COUNT] = {"fp32", "bf16", "int32", "fp64", "uint8", "int64"};
  return (unsigned)dt < ZEROC_DTYPE_COUNT ? names[dt] : "?";
}

const char *zeroc_memkind_name(zeroc_memkind_t k) {
  static const char *names[ZEROC_MEM_KIND_COUNT] = {"device", "pinned", "host"};
  return (unsigned)k < ZEROC_MEM_KIND_COUNT ? names[k] : "?";
}

const char *zeroc_memtag_name(zeroc_memtag_t t) {
  static const char *names[ZEROC_TAG_COUNT] = {"params",      "grads",   "optimizer",
                                               "activations", "buffers", "workspace"};
  return (unsigned)t < ZEROC_TAG_COUNT ? names[t] : "?";
}
