/*
 * apps/args.c - the flag parser shared by the zeroc subcommands.
 */
#include "apps/args.h"
#include "zeroc/arch.h"

#include "zeroc/gpt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

const char *const zarg_devices[] = {"auto", "cpu", "cuda", NULL};
const char *const *zarg_arch_models(const char *arch) {
  for (const zeroc_arch_t *const *a = zeroc_arch_list(); *a; a++)
    if (!strcmp((*a)->name, arch)) return (*a)->presets;
  return NULL;
}

const char *const *zarg_lm_models(void) {
  static const char *list[64];
  if (list[0]) return list;
  int n = 0;
  const char *const archs[] = {"gpt2", "llama"};
  for (int a = 0; a < 2; a++)
    for (const char *const *p = zarg_arch_models(archs[a]); p && *p && n < 63; p++)
      if (strcmp(*p, "llama-custom")) list[n++] = *p; /* --init DIR's, not a flag's */
  list[n] = NULL;
  return list;
}

int zarg_model_is_custom(int model) { return !strcmp(zarg_models[model], "custom"); }

const char *zarg_model_arch(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--model") && i + 1 < argc)
      v = argv[i + 1];
    else if (!strncmp(argv[i], "--model=", 8))
      v = argv[i] + 8;
    const zeroc_arch_t *a = v ? zeroc_arch_find(v) : NULL;
    if (a) return a->name;
  }
  return "gpt2";
}

int zarg_check_model(const char *cmd, int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--model") && i + 1 < argc)
      v = argv[i + 1];
    else if (!strncmp(argv[i], "--model=", 8))
      v = argv[i] + 8;
    if (!v || zeroc_arch_find(v)) continue;
    char list[512];
    size_t at = 0;
    list[0] = 0;
    for (const zeroc_arch_t *const *a = zeroc_arch_list(); *a; a++)
      for (const char *const *p = (*a)->presets; *p && at < sizeof list; p++) {
        int k = snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", *p);
        if (k < 0) break;
        at += (size_t)k;
      }
    return zarg_fail(cmd, "--model '%s': accepted %s", v, list);
  }
  return 0;
}
const char *const zarg_dtypes[] = {"auto", "fp32", "bf16", NULL};
const char *const zarg_grad_reduce_dtypes[] = {"fp32", "bf16", NULL};
const char *const zarg_recomputes[] = {"none", "full", NULL};
const char *const zarg_offloads[] = {"none", "cpu", "nvme", NULL};

int zarg_launch_rank0(void) {
  static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) {
      /* a launcher's value; one that is not a rank number counts as rank 0, so
       * that a message is printed rather than lost */
      char *end;
      errno = 0;
      long x = strtol(v, &end, 10);
      return errno || *end || x < 0 || x == 0;
    }
  }
  return 1;
}

/* A usage error every rank sees alike is printed by rank 0 only. A rank other
 * than 0 that exited at once could make the launcher (mpirun, srun) tear the job
 * down before rank 0 had written its line, and the user would see no reason at
 * all (seen under load: 1 run in ~10 on 2 busy cores). So it waits, bounded, for
 * rank 0 to exit first: the launcher then ends it straight away, and if it does
 * not (srun without --kill-on-bad-exit), the rank exits 2 on its own after
 * ZARG_LINGER_S. */
#define ZARG_LINGER_S 5
static void linger_for_rank0(void) {
  struct timespec t = {ZARG_LINGER_S, 0};
  while (nanosleep(&t, &t) == -1 && errno == EINTR) {
  }
}

int zarg_fail(const char *cmd, const char *fmt, ...) {
  if (!zarg_launch_rank0()) {
    linger_for_rank0();
    return 2;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* a value may hold control characters: the message stays one printable line */
  for (char *p = msg; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  fprintf(stderr, "zeroc %s: %s\n", cmd, msg);
  return 2;
}

static void choices_text(const char *const *c, char *buf, size_t n) {
  buf[0] = 0;
  for (int k = 0; c[k]; k++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", k ? ", " : "", c[k]);
}

static int set_value(const char *cmd, const zarg_t *a, const char *v) {
  char *end;
  errno = 0;
  switch (a->kind) {
  case ARG_INT:
  case ARG_I64: {
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || (a->lo_open ? x <= a->lo : x < a->lo) || x > a->hi)
      return zarg_fail(cmd, "%s '%s': accepted an integer %s%.0f..%.0f", a->name, v,
                       a->lo_open ? "> " : "", a->lo, a->hi);
    if (a->kind == ARG_INT)
      *(int *)a->dst = (int)x;
    else
      *(int64_t *)a->dst = x;
    return 0;
  }
  case ARG_DOUBLE: {
    double x = strtod(v, &end);
    /* an underflow (1e-320: a denormal or 0) is still that small number, in range
     * wherever its neighbours are; only an overflow is out of every range */
    if (errno == ERANGE && fabs(x) < 1) errno = 0;
    if (errno || end == v || *end || !isfinite(x) || (a->lo_open ? x <= a->lo : x < a->lo) ||
        x > a->hi)
      return zarg_fail(cmd, "%s '%s': accepted a number %s%g..%g", a->name, v,
                       a->lo_open ? "> " : "", a->lo, a->hi);
    *(double *)a->dst = x;
    return 0;
  }
  case ARG_CHOICE:
    for (int k = 0; a->choices[k]; k++)
      if (!strcmp(v, a->choices[k])) {
        *(int *)a->dst = k;
        return 0;
      }
    {
      char acc[256];
      choices_text(a->choices, acc, sizeof acc);
      return zarg_fail(cmd, "%s '%s': accepted %s", a->name, v, acc);
    }
  case ARG_STRING:
    if (!*v) return zarg_fail(cmd, "%s: needs a non-empty value", a->name);
    *(const char **)a->dst = v;
    return 0;
  case ARG_SWITCH:
    *(int *)a->dst = 1;
    return 0;
  }
  return 2;
}

int zarg_parse(const char *cmd, int argc, char **argv, const zarg_t *args, int nargs) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const zarg_t *f = NULL;
    for (int k = 0; k < nargs; k++)
      if (strlen(args[k].name) == len && !strncmp(args[k].name, a, len)) f = &args[k];
    if (!f)
      return zarg_fail(cmd, "unknown flag '%.*s' (zeroc %s --help lists the flags)", (int)len, a,
                       cmd);
    const char *v = NULL;
    if (f->kind == ARG_SWITCH) {
      if (eq) return zarg_fail(cmd, "%s takes no value", f->name);
    } else if (eq) {
      v = eq + 1;
    } else {
      if (i + 1 >= argc) return zarg_fail(cmd, "%s needs a value", f->name);
      v = argv[++i];
    }
    if (set_value(cmd, f, v)) return 2;
    if (f->set) *f->set = 1;
  }
  return 0;
}

/* The library's message without the "file.c:LINE: " origins in it (one per
 * layer that wrapped it), which name our sources, not the user's input. */
const char *zarg_file_kind(unsigned mode) {
  return S_ISREG(mode)    ? "file"
         : S_ISDIR(mode)  ? "directory"
         : S_ISFIFO(mode) ? "fifo"
                          : "special file";
}

const char *zarg_user_msg(const char *e) {
  static char buf[2048];
  size_t k = 0;
  while (*e && k + 1 < sizeof buf) {
    const char *p = e;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
    if (p > e && !strncmp(p, ".c:", 3)) {
      const char *d = p + 3;
      while (*d >= '0' && *d <= '9') d++;
      if (d > p + 3 && d[0] == ':' && d[1] == ' ') {
        e = d + 2; /* an origin: skipped */
        continue;
      }
    }
    do buf[k++] = *e++;
    while (k + 1 < sizeof buf && e < p); /* the word, or one character */
  }
  buf[k] = 0;
  return buf;
}

int zarg_model_shape(const char *cmd, int model, const int size[5], const int set[5],
                     zeroc_gpt_config_t *gc) {
  int custom = zarg_model_is_custom(model);
  zeroc_gpt_preset(custom ? "tiny" : zarg_models[model], gc);
  if (custom && !(set[0] && set[1] && set[2] && set[3] && set[4]))
    return zarg_fail(cmd, "--model custom needs --layers, --hidden, --heads, --vocab and --seq");
  int *field[5] = {&gc->layers, &gc->hidden, &gc->heads, &gc->vocab, &gc->seq};
  for (int i = 0; i < 5; i++)
    if (set[i]) *field[i] = size[i];
  return 0;
}
