/*
 * apps/bench.c - `zeroc bench`: trains the same model on the same data and
 * global batch under every layout the world allows (ZeRO-0/1/2/3, HSDP
 * splits, TP, PP and their combinations; context parallelism, ring and
 * Ulysses, when --cp asks for it), a few steps each, and writes
 * bench.csv, bench.md (a table with the machine and build) and bench.png
 * (gnuplot: throughput and peak memory per layout).
 *
 * Each layout is one in-process run of `zeroc train` (with its own metrics
 * file), so bench measures exactly what users run; the figures come from the
 * trainer's per-step metrics structs through train's step hook. Warm-up steps
 * are excluded and figures are medians of the rest.
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "runtime/runtime.h"
#include "zeroc/zeroc.h"

#define MAX_LAYOUTS 64

typedef struct {
  char name[48];
  int zero, hsdp, tp, pp, vpp, micro, batch; /* micro: grad-accum, or micro-batches with pp */
  int cp;                                    /* context-parallel size, 1: none */
  const char *schedule, *cp_mode;
  /* results */
  int status; /* 0 ok, 2 unsupported/bad, 1 failed */
  double step_ms, tokens_s, exposed_ms, comm_mb, comm_bytes, peak_mib, loss_last;
  int steps_measured;
} layout_t;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* What a layout's run gave, step by step (the trainer's figures, no text). */
typedef struct {
  int warmup, seen, n;
  double ms[4096], tps[4096], ex[4096], cb[4096], peak, loss;
} figures_t;

/* train's per-step hook: the steps after warm-up (a skipped step, whose loss
 * is not finite, is never counted as warm-up) */
static void on_step(void *user, const zeroc_train_metrics_t *m) {
  figures_t *f = user;
  if (isfinite(m->loss)) {
    f->loss = m->loss;
    if (f->seen++ < f->warmup) return;
  }
  if (f->n >= 4096) return;
  f->ms[f->n] = m->step_ms;
  f->tps[f->n] = m->tokens_per_s;
  f->ex[f->n] = m->exposed_comm_ms;
  f->cb[f->n] = (double)m->comm_bytes;
  if ((double)m->peak_device_max > f->peak) f->peak = (double)m->peak_device_max;
  f->n++;
}

/* A layout's figures: medians over the steps after warm-up. */
static void summarise(figures_t *f, layout_t *l) {
  l->steps_measured = f->n;
  l->step_ms = median(f->ms, f->n);
  l->tokens_s = median(f->tps, f->n);
  l->exposed_ms = median(f->ex, f->n);
  l->comm_bytes = median(f->cb, f->n);
  l->comm_mb = l->comm_bytes / 1048576.0;
  l->peak_mib = f->peak / 1048576.0;
  l->loss_last = f->loss;
}

/* Context-parallel layouts, cp = 2, 4, ... up to cp_max dividing the world:
 * ring and Ulysses (where cp divides the heads) with ZeRO-3 over the rest,
 * and with TP 2 when the world allows it. The sequence must cut into 2 cp
 * zigzag chunks. */
static int enumerate_cp(int world, const zeroc_gpt_config_t *g, int G, int cp_max, layout_t *out,
                        int n) {
  static const char *const MODES[] = {"ring", "ulysses"};
  for (int cp = 2; cp <= cp_max && n < MAX_LAYOUTS - 4; cp *= 2) {
    if (world % cp || g->seq % (2 * cp)) continue;
    for (int t = 1; t <= 2 && t * cp <= world; t++) {
      if ((world / cp) % t || g->heads % t) continue;
      for (int k = 0; k < 2 && n < MAX_LAYOUTS - 4; k++) {
        if (k == 1 && (g->heads / t) % cp) continue; /* Ulysses splits the heads */
        int dp = world / (cp * t);
        if (G % dp) continue;
        layout_t l = {.zero = 3, .hsdp = 1, .tp = t, .pp = 1, .vpp = 1, .micro = 1,
                      .batch = G / dp, .cp = cp, .cp_mode = MODES[k]};
        snprintf(l.name, sizeof l.name, "cp-%d-%s%s", cp, MODES[k], t > 1 ? "+tp-2" : "");
        out[n++] = l;
      }
    }
  }
  return n;
}

/* Every layout of `world` ranks worth comparing: ZeRO stages, HSDP splits,
 * TP (x FSDP), PP and PTD, then CP up to cp_max (1: none). The global batch
 * G is the same in all. */
static int enumerate(int world, const zeroc_gpt_config_t *g, int G, int cp_max, layout_t *out) {
  int n = 0;
  for (int z = 0; z <= 3; z++)
    out[n++] = (layout_t){.zero = z, .hsdp = 1, .tp = 1, .pp = 1, .vpp = 1, .micro = 1,
                          .batch = G / world, .cp = 1};
  for (int z = 0; z < 4; z++) snprintf(out[z].name, sizeof out[z].name, "zero-%d", z);
  for (int r = 2; r < world; r++) {
    if (world % r) continue;
    layout_t l = {.zero = 3, .hsdp = r, .tp = 1, .pp = 1, .vpp = 1, .micro = 1, .batch = G / world,
                  .cp = 1};
    snprintf(l.name, sizeof l.name, "hsdp-%dx%d", r, world / r);
    out[n++] = l;
  }
  for (int t = 2; t <= world && n < MAX_LAYOUTS - 4; t++) {
    if (world % t || g->heads % t) continue;
    int dp = world / t;
    layout_t l = {.zero = dp > 1 ? 3 : 0, .hsdp = 1, .tp = t, .pp = 1, .vpp = 1, .micro = 1, .batch = G / dp,
                  .cp = 1};
    snprintf(l.name, sizeof l.name, "tp-%d%s", t, dp > 1 ? "+zero-3" : "");
    out[n++] = l;
  }
  for (int p = 2; p <= world && p <= g->layers && n < MAX_LAYOUTS - 4; p++) {
    if (world % p) continue;
    for (int t = 1; t * p <= world; t++) {
      if ((world / p) % t || g->heads % t) continue;
      int dp = world / (p * t), m = 2 * p;
      if (G % (dp * m)) continue;
      layout_t l = {.zero = 1, .hsdp = 1, .tp = t, .pp = p, .vpp = 1, .micro = m, .batch = G / (dp * m),
                    .schedule = "1f1b", .cp = 1};
      if (t > 1) snprintf(l.name, sizeof l.name, "pp-%d+tp-%d", p, t);
      else snprintf(l.name, sizeof l.name, "pp-%d", p);
      out[n++] = l;
      if (t == 1 && g->layers % (2 * p) == 0) {
        layout_t v = l;
        v.vpp = 2;
        v.schedule = "interleaved";
        snprintf(v.name, sizeof v.name, "pp-%d-interleaved-v2", p);
        out[n++] = v;
      }
    }
  }
  return enumerate_cp(world, g, G, cp_max, out, n);
}

static void machine_info(char *buf, size_t n, int world) {
  char host[64] = "?", cpu[128] = "?";
  gethostname(host, sizeof host - 1);
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) snprintf(cpu, sizeof cpu, "%s", c + 2);
        cpu[strcspn(cpu, "\n")] = 0;
        break;
      }
    fclose(f);
  }
  struct utsname u;
  uname(&u);
  time_t t = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
  snprintf(buf, n,
           "%s; host %s; %s, %ld cores; Linux %s; %d ranks; zeroc %s (%s)", date, host, cpu,
           sysconf(_SC_NPROCESSORS_ONLN), u.release, world, ZEROC_VERSION_STRING, ZEROC_GIT_COMMIT);
}

/* 0, or 1 when bench.csv or bench.md cannot be written (the plot is optional). */
static int write_outputs(const char *dir, const char *model, const char *device, const char *info,
                         layout_t *L, int n, int G, int T, int world) {
  char path[4200];
  snprintf(path, sizeof path, "%s/bench.csv", dir);
  FILE *c = fopen(path, "w");
  snprintf(path, sizeof path, "%s/bench.md", dir);
  FILE *m = fopen(path, "w");
  if (!c || !m) {
    fprintf(stderr, "zeroc bench: cannot write into '%s'\n", dir);
    if (c) fclose(c);
    if (m) fclose(m);
    return 1;
  }
  fprintf(c, "layout,zero,hsdp,tp,pp,vpp,microbatches,batch,status,steps,tokens_per_s,step_ms,"
             "exposed_comm_ms,comm_mib_per_step,peak_device_mib,loss_last,cp,cp_mode,"
             "comm_bytes_per_step\n");
  fprintf(m, "# zeroc bench: %s, device %s, global batch %d x %d tokens\n\n%s\n\n", model, device,
          G, T, info);
  fprintf(m, "| layout | zero | hsdp | tp | pp | cp | micro | tokens/s | step ms | exposed comm ms | "
             "comm MiB/step | comm bytes/step | peak MiB/rank | loss |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    layout_t *l = &L[i];
    const char *st = l->status == 0 ? "ok" : l->status == 2 ? "refused" : "failed";
    const char *mode = l->cp > 1 ? l->cp_mode : "-";
    fprintf(c, "%s,%d,%d,%d,%d,%d,%d,%d,%s,%d,%.1f,%.2f,%.2f,%.3f,%.2f,%.6f,%d,%s,%.0f\n", l->name,
            l->zero, l->hsdp, l->tp, l->pp, l->vpp, l->micro, l->batch, st, l->steps_measured,
            l->tokens_s, l->step_ms, l->exposed_ms, l->comm_mb, l->peak_mib, l->loss_last, l->cp,
            mode, l->comm_bytes);
    if (l->status == 0)
      fprintf(m, "| %s | %d | %d | %d | %d | %d | %d | %.0f | %.1f | %.1f | %.2f | %.0f | %.2f | %.4f |\n",
              l->name, l->zero, l->hsdp, l->tp, l->pp, l->cp, l->micro, l->tokens_s, l->step_ms,
              l->exposed_ms, l->comm_mb, l->comm_bytes, l->peak_mib, l->loss_last);
    else
      fprintf(m, "| %s | %d | %d | %d | %d | %d | %d | %s | | | | | | |\n", l->name, l->zero, l->hsdp,
              l->tp, l->pp, l->cp, l->micro, st);
  }
  fprintf(m, "\nMedians over the measured steps (warm-up excluded). `loss` is the last step's: every "
             "layout computes the same math, so they agree to rounding.\n");
  fclose(c);
  fclose(m);
  /* the plot: throughput and peak memory per layout, side by side */
  snprintf(path, sizeof path, "%s/bench.gp", dir);
  FILE *g = fopen(path, "w");
  if (!g) return 0;
  fprintf(g,
          "set terminal pngcairo size 1200,520 font ',10'\n"
          "set output '%s/bench.png'\n"
          "set datafile separator ','\n"
          "set multiplot layout 1,2 title 'zeroc bench: %s, %d ranks'\n"
          "set style fill solid 0.8\nset boxwidth 0.7\nset xtics rotate by -40 noenhanced\n"
          "set key off\nset grid ytics\nset yrange [0:*]\n"
          "set title 'throughput (tokens/s, median)'\n"
          "plot '%s/bench.csv' every ::1 using 0:(strcol(9) eq \"ok\" ? $11 : 1/0):xtic(1) with boxes lc rgb '#3a7bd5'\n"
          "set title 'peak device memory per rank (MiB)'\n"
          "plot '%s/bench.csv' every ::1 using 0:(strcol(9) eq \"ok\" ? $15 : 1/0):xtic(1) with boxes lc rgb '#d5753a'\n"
          "unset multiplot\n",
          dir, model, world, dir, dir);
  fclose(g);
  char cmd[8800];
  snprintf(cmd, sizeof cmd, "gnuplot '%s/bench.gp' 2>/dev/null", dir);
  if (system(cmd) != 0) {
    /* pngcairo may be missing: fall back to the plain png terminal */
    snprintf(cmd, sizeof cmd,
             "sed -i \"s/pngcairo size 1200,520 font ',10'/png size 1200,520/\" '%s/bench.gp' && "
             "gnuplot '%s/bench.gp'",
             dir, dir);
    if (system(cmd) != 0)
      fprintf(stderr, "zeroc bench: gnuplot failed or is missing (Debian package gnuplot-nox); "
                      "bench.csv and bench.md are written\n");
  }
  return 0;
}

/* ---- checks before anything runs ------------------------------------------------ */

/* Splits `buf` at spaces into argv (our own flags and the user's --train
 * words; no quoting). Returns the count, or -1 when there are more than max. */
static int split_words(char *buf, char **argv, int max) {
  int n = 0;
  for (char *tok = strtok(buf, " \t"); tok; tok = strtok(NULL, " \t")) {
    if (n == max) return -1;
    argv[n++] = tok;
  }
  return n;
}

#define EXTRA_MAX 1024 /* --train characters; the run's own flags take the rest of 2048 */
#define ARGV_MAX  127

/* --train's words: train's own flags, with values train accepts, and none
 * that bench sets for each run (a user's --tp would relabel every layout). */
static int check_train_flags(const char *extra) {
  static const char *const OWN[] = {
      "--model", "--steps",       "--batch",        "--zero",       "--hsdp",    "--tp",     "--pp",
      "--vpp",   "--pp-schedule", "--microbatches", "--grad-accum", "--metrics", "--device",
      "--cp",    "--cp-mode",     "--seq",          NULL};
  if (strlen(extra) > EXTRA_MAX)
    return zarg_fail("bench", "--train: %zu characters; accepted up to %d", strlen(extra),
                     EXTRA_MAX);
  char buf[EXTRA_MAX + 1], *argv[ARGV_MAX];
  snprintf(buf, sizeof buf, "%s", extra);
  int n = split_words(buf, argv, ARGV_MAX - 40);
  if (n < 0) return zarg_fail("bench", "--train: too many words; accepted up to %d", ARGV_MAX - 40);
  for (int i = 0; i < n; i++)
    for (int k = 0; OWN[k]; k++) {
      size_t len = strlen(OWN[k]);
      if (!strncmp(argv[i], OWN[k], len) && (argv[i][len] == 0 || argv[i][len] == '='))
        return zarg_fail("bench",
                         "--train '%s': bench sets %s for each run; accepted train's other flags "
                         "(bench's own --model, --seq, --steps, --batch, --device, --cp, --only)",
                         extra, OWN[k]);
    }
  return zeroc_train_check_flags(n, argv); /* train's one line on a bad flag or value */
}

/* Keeps the layouts --only names (comma-separated), in the sweep's order.
 * Returns the count left, or -1 after one line naming the unknown one. */
static int select_layouts(const char *only, layout_t *L, int n, int world) {
  char list[1024];
  if (strlen(only) >= sizeof list) {
    zarg_fail("bench", "--only: %zu characters; accepted up to %zu", strlen(only), sizeof list - 1);
    return -1;
  }
  snprintf(list, sizeof list, "%s", only);
  int keep[MAX_LAYOUTS] = {0};
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < n; i++)
      if (!strcmp(name, L[i].name)) keep[i] = found = 1;
    if (!found) {
      char acc[1024] = "";
      for (int i = 0; i < n; i++)
        snprintf(acc + strlen(acc), sizeof acc - strlen(acc), "%s%s", i ? ", " : "", L[i].name);
      zarg_fail("bench", "--only '%s': no such layout for %d ranks; accepted (comma-separated) %s",
                name, world, acc);
      return -1;
    }
  }
  int m = 0;
  for (int i = 0; i < n; i++)
    if (keep[i]) L[m++] = L[i];
  if (!m)
    zarg_fail("bench", "--only '%s': names no layout; accepted comma-separated layout names", only);
  return m ? m : -1;
}

/* --out: an existing writable directory, or one that can be created (with its
 * parents). 0, or 2 after one line. Only rank 0 writes, so only it checks. */
static int prepare_out(const char *out) {
  char path[4096];
  if (strlen(out) >= sizeof path)
    return zarg_fail("bench", "--out: %zu characters; accepted up to %zu", strlen(out),
                     sizeof path - 1);
  snprintf(path, sizeof path, "%s", out);
  struct stat sb;
  if (stat(path, &sb) == 0) {
    if (!S_ISDIR(sb.st_mode))
      return zarg_fail("bench",
                       "--out '%s': exists and is not a directory; accepted a directory "
                       "or a path that can be created",
                       out);
  } else {
    for (char *p = path + 1; *p; p++) /* mkdir -p: each parent, then the leaf */
      if (*p == '/') {
        *p = 0;
        if (mkdir(path, 0755) && errno != EEXIST) break;
        *p = '/';
      }
    if (mkdir(out, 0755) && errno != EEXIST)
      return zarg_fail("bench",
                       "--out '%s': cannot create the directory (%s); accepted a "
                       "directory or a path that can be created",
                       out, strerror(errno));
  }
  if (access(out, W_OK | X_OK))
    return zarg_fail("bench", "--out '%s': directory not writable (%s)", out, strerror(errno));
  return 0;
}

/* ---- the command ------------------------------------------------------------------- */

/* One layout, as `zeroc train` with bench's flags, the layout's and --train's.
 * Returns train's exit status, the same on every rank. */
static int run_layout(const layout_t *l, const char *model, int seq, const char *device,
                      int steps, const char *metrics, const char *extra, figures_t *fig) {
  char buf[2048], *targv[ARGV_MAX];
  int k =
      snprintf(buf, sizeof buf,
               "--device %s --model %s --steps %d --batch %d --zero %d --hsdp %d --tp %d --pp %d "
               "--lr 3e-3 --seed 1 --quiet --metrics %s",
               device, model, steps, l->batch, l->zero, l->hsdp, l->tp, l->pp, metrics);
  if (seq > 0) k += snprintf(buf + k, sizeof buf - (size_t)k, " --seq %d", seq);
  if (l->cp > 1)
    k += snprintf(buf + k, sizeof buf - (size_t)k, " --cp %d --cp-mode %s", l->cp, l->cp_mode);
  if (l->pp > 1)
    k += snprintf(buf + k, sizeof buf - (size_t)k, " --microbatches %d --pp-schedule %s --vpp %d",
                  l->micro, l->schedule, l->vpp);
  else
    k += snprintf(buf + k, sizeof buf - (size_t)k, " --grad-accum %d", l->micro);
  snprintf(buf + k, sizeof buf - (size_t)k, " %s", extra);
  int targc = split_words(buf, targv, ARGV_MAX); /* checked: --train leaves room */
  int rc = targc < 0 ? 2 : zeroc_train_run(targc, targv, on_step, fig);
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}

int zeroc_cmd_bench(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help")) {
      printf("usage: mpirun -np N zeroc bench [--out DIR] [--device auto|cpu|cuda] [--model tiny]\n"
             "                   [--seq T] [--steps 12] [--warmup-steps 3] [--batch B] [--cp C]\n"
             "                   [--only LAYOUT,...] [--train \"FLAGS\"]\n"
             "Trains the same model on the same global batch (B x N sequences) under every layout\n"
             "of N ranks (ZeRO-0/1/2/3, HSDP, TP, PP, PTD) and writes bench.csv, bench.md and\n"
             "bench.png into --out (default bench-out, created with its parents). --device is\n"
             "train's (default auto: cuda when a GPU is visible). --cp C adds context-parallel\n"
             "layouts cp-2, cp-4, ... up to C, ring and ulysses (cp-4-ring, cp-2-ulysses+tp-2);\n"
             "--seq sets the sequence length (default the model's). --only keeps the named layouts;\n"
             "--train passes further train flags to every run (not those bench sets). A layout\n"
             "that fails makes the exit status 1, one train refuses 2.\n");
      return 0;
    }
  int model = 0, device = 0, steps = 12, warmup = 3, batch = 0, set_batch = 0, cp_max = 1,
      seq = 0, set_seq = 0;
  const char *out = "bench-out", *only = NULL, *extra = "";
  /* the decoders' presets (GPT-2's and the Llama family's), not custom: bench gives no sizes */
  static const char *MODELS[64];
  if (!MODELS[0])
    for (int i = 0, n = 0; zarg_models[i] && n < 63; i++)
      if (strcmp(zarg_models[i], "custom")) MODELS[n++] = zarg_models[i];
  const zarg_t args[] = {
      {"--out", ARG_STRING, &out, 0, 0, 0, NULL, NULL},
      {"--device", ARG_CHOICE, &device, 0, 0, 0, zarg_devices, NULL},
      {"--model", ARG_CHOICE, &model, 0, 0, 0, MODELS, NULL},
      {"--steps", ARG_INT, &steps, 2, 100000, 0, NULL, NULL},
      {"--warmup-steps", ARG_INT, &warmup, 0, 100000, 0, NULL, NULL},
      {"--batch", ARG_INT, &batch, ZARG_LIM_BATCH, 0, NULL, &set_batch},
      {"--seq", ARG_INT, &seq, ZARG_LIM_SEQ, 0, NULL, &set_seq},
      {"--cp", ARG_INT, &cp_max, 1, 4096, 0, NULL, NULL},
      {"--only", ARG_STRING, &only, 0, 0, 0, NULL, NULL},
      {"--train", ARG_STRING, &extra, 0, 0, 0, NULL, NULL},
  };
  if (zarg_parse("bench", argc, argv, args, (int)(sizeof args / sizeof args[0]))) return 2;
  if (warmup >= steps) return zarg_fail("bench", "--warmup-steps %d must be below --steps %d", warmup, steps);
  if (check_train_flags(extra)) return 2;
  zeroc_gpt_config_t g;
  zeroc_gpt_preset(MODELS[model], &g);
  if (set_batch) g.batch = batch;
  if (set_seq) g.seq = seq;

  int provided, world, rank;
  /* bench starts MPI itself: the device first, as zeroc_ctx_create would */
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = (zeroc_device_kind_t)device; /* auto, cpu, cuda: zarg_devices' order */
  zeroc__ctx_select_gpu_before_mpi(&cc);
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int G = g.batch * world;
  layout_t L[MAX_LAYOUTS];
  int n = enumerate(world, &g, G, cp_max, L);
  /* every rank decides the same; only rank 0 looks at --out (it alone writes) */
  int rc = only && (n = select_layouts(only, L, n, world)) < 0 ? 2 : 0;
  if (!rc && rank == 0) rc = prepare_out(out);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc) {
    MPI_Finalize();
    return rc;
  }
  char info[512];
  machine_info(info, sizeof info, world);
  static figures_t fig[1];
  const char *dev = zarg_devices[device];
  if (rank == 0)
    printf("zeroc bench: %s on %s, %d ranks, global batch %d sequences x %d tokens, %d steps per "
           "layout (%d warm-up)\n%s\n",
           MODELS[model], dev, world, G, g.seq, steps, warmup, info);
  for (int i = 0; i < n; i++) {
    layout_t *l = &L[i];
    char metrics[4200];
    snprintf(metrics, sizeof metrics, "%s/%s.jsonl", out, l->name);
    if (rank == 0) {
      printf("  %-24s ...", l->name);
      fflush(stdout);
    }
    memset(fig, 0, sizeof *fig);
    fig->warmup = warmup;
    l->status = run_layout(l, MODELS[model], set_seq ? seq : 0, dev, steps, metrics, extra, fig);
    if (rank == 0) {
      if (l->status == 0) summarise(fig, l);
      if (l->status == 0)
        printf(" %9.0f tokens/s, %7.1f ms/step, %6.1f ms exposed comm, %7.2f MiB peak\n", l->tokens_s,
               l->step_ms, l->exposed_ms, l->peak_mib);
      else
        printf(" %s\n", l->status == 2 ? "refused by zeroc train (message above)" : "failed");
      fflush(stdout);
    }
  }
  /* a failed run (1) outranks a refused one (2): either makes the bench fail */
  int failed = 0, refused = 0;
  for (int i = 0; i < n; i++) {
    failed += L[i].status == 1;
    refused += L[i].status == 2;
  }
  rc = failed ? 1 : refused ? 2 : 0;
  if (rank == 0) {
    if (write_outputs(out, MODELS[model], dev, info, L, n, G, g.seq, world))
      rc = 1;
    else
      printf("wrote %s/bench.csv, %s/bench.md, %s/bench.png\n", out, out, out);
    if (failed || refused)
      fprintf(stderr,
              "zeroc bench: %d of %d layouts failed, %d refused by zeroc train (see above)\n",
              failed, n, refused);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
