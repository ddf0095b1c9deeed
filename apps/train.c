/*
 * apps/train.c - `zeroc train`: the built-in GPT on synthetic or llm.c data,
 * under any layout the mesh allows, with a live progress line, JSON metrics,
 * sharded checkpoints, and safetensors export/import. The flags are
 * apps/train_flags.c; the run is the library's trainer (zeroc/train.h); this
 * file prints. The contract is docs/cli.md: flag names and the metrics
 * fields are stable.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/metrics.h"
#include "apps/train_dlrm.h"
#include "apps/train_flags.h"
#include "apps/train_sample.h"
#include "apps/train_stop.h"
#include "apps/train_view.h"
#include "zeroc/train.h"
#include "zeroc/zeroc.h"

/* the flags' names (apps/args.c, apps/train_flags.c) */
#define MODELS       zarg_models
#define PP_SCHEDULES ztrain_pp_schedules

/* ---- output helpers ------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *fmt_bytes(double b, char *buf, size_t n) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, i++;
  snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
  return buf;
}

/* The planner's figure, or "n/a" where it gave none: a prediction is never shown as 0 B. */
static const char *fmt_pred(double b, char *buf, size_t n) {
  if (b > 0) return fmt_bytes(b, buf, n);
  snprintf(buf, n, "n/a");
  return buf;
}

/* --export failed at the end (disk full, the directory gone, permissions
 * changed): the trained weights go to a second place rather than being lost,
 * and rank 0 says where. Collective, like the export itself (rank 0 writes
 * the file, so only its name counts). The name cannot be guessed: $TMPDIR is
 * usually /tmp, shared with every user of the machine, and the library writes
 * through an exclusive temporary renamed over it. */
static void export_fallback(zeroc_trainer_t *tr, zeroc_ctx_t *ctx, const ztrain_job_t *o,
                            int root) {
  char alt[4200];
  const char *tmp = getenv("TMPDIR");
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
    rnd = (uint64_t)now_s() * 1000003u ^ (uint64_t)getpid() << 32;
  snprintf(alt, sizeof alt, "%s/zeroc-export-%ld-%016llx.safetensors",
           o->save       ? o->save
           : tmp && *tmp ? tmp
                         : "/tmp",
           (long)getpid(), (unsigned long long)rnd);
  zeroc_result_t r = zeroc_trainer_export(tr, alt);
  if (root && r == ZEROC_OK)
    fprintf(stderr, "zeroc train: --export '%s' failed; the weights were written to '%s' instead\n",
            o->export_path, alt);
  else if (root)
    fprintf(stderr,
            "zeroc train: --export '%s' failed, and so did writing the weights to '%s': %s\n",
            o->export_path, alt, zeroc_last_error(ctx));
}

/* ---- printing ----------------------------------------------------------------------------- */

static void print_header(const ztrain_job_t *j, const zeroc_train_info_t *in,
                         const zeroc_mesh_info_t *mesh, double startup_s) {
  const ztrain_opts_t *o = j->opts;
  const zeroc_gpt_config_t *g = &in->model;
  const zeroc_train_config_t *c = &in->config;
  const char *dev = in->device == ZEROC_DEVICE_CUDA ? "cuda" : "cpu";
  char b1[32];
  char llama[64] = ""; /* the Llama family's own sizes */
  if (g->family == ZEROC_GPT_FAMILY_LLAMA)
    snprintf(llama, sizeof llama, ", %d kv heads, ffn %d", g->kv_heads, g->ffn);
  printf("zeroc train: %s (%d layers, hidden %d, %d heads%s, vocab %d, seq %d), %.2fM parameters\n",
         c->model, g->layers, g->hidden, g->heads, llama, g->vocab, g->seq, in->params / 1e6);
  char ppdesc[64] = "", cpdesc[64] = "";
  if (mesh->cp > 1) /* context parallelism: shown only when asked for */
    snprintf(cpdesc, sizeof cpdesc, ", cp %d (%s)", mesh->cp, zeroc_cp_mode_name(c->cp_mode));
  if (c->vpp > 1) snprintf(ppdesc, sizeof ppdesc, ", %d chunks per rank", c->vpp);
  /* the parameters' dtype, and the gradients' reduction where it differs (bf16 params
   * reduce in fp32 by default; --grad-reduce-dtype) and anything is summed */
  char dtdesc[64];
  snprintf(dtdesc, sizeof dtdesc, "%s", zeroc_dtype_name(in->dtype));
  if (c->grad_reduce_dtype != (int)in->dtype && (mesh->world > 1 || c->grad_accum > 1))
    snprintf(dtdesc, sizeof dtdesc, "%s (gradients reduced in %s)", zeroc_dtype_name(in->dtype),
             zeroc_dtype_name((zeroc_dtype_t)c->grad_reduce_dtype));
  if (mesh->pp > 1)
    printf("  %d ranks on %s: pp %d (%s%s), ZeRO-%d, dp %d (%d x %d), tp %d%s%s, batch %d x %d "
           "micro-batches x dp %d = %d sequences (%.0f tokens) per step, %s%s\n",
           mesh->world, dev, mesh->pp, PP_SCHEDULES[o->pp_schedule], ppdesc, c->zero, mesh->dp,
           mesh->dp_replicate, mesh->dp_shard, mesh->tp,
           c->sequence_parallel ? " (sequence parallel)" : "", cpdesc, g->batch, c->grad_accum,
           mesh->dp, in->global_batch, in->tokens_per_step, dtdesc,
           c->recompute ? ", recompute" : "");
  else
    printf(
        "  %d ranks on %s: ZeRO-%d, dp %d (%d x %d), tp %d%s%s, batch %d x accum %d x dp %d = %d "
        "sequences (%.0f tokens) per step, %s, prefetch %d%s\n",
        mesh->world, dev, c->zero, mesh->dp, mesh->dp_replicate, mesh->dp_shard, mesh->tp,
        c->sequence_parallel ? " (sequence parallel)" : "", cpdesc, g->batch, c->grad_accum,
        mesh->dp, in->global_batch, in->tokens_per_step, dtdesc, c->prefetch,
        c->recompute ? ", recompute" : "");
  if (c->zero >= 2 && mesh->dp_shard == 1)
    /* a shard group of one: the stage's buffers hold whole units, and the reduce-scatter
     * (and ZeRO-3's gather) become a copy per unit and step */
    printf("  note: ZeRO-%d over a shard group of one rank (dp_shard 1) shards nothing and "
           "copies each unit's gradients%s in every step; --zero 0 or 1 skips those copies\n",
           c->zero, c->zero == 3 ? " and parameters" : "");
  if (in->data.kind == ZEROC_DATA_SYNTHETIC)
    printf("  data: synthetic Markov source, loss floor %.4f nats/token (its entropy rate)\n",
           in->data.loss_floor);
  else
    printf("  data: %s, %d files, %llu tokens, %llu steps per epoch%s\n", c->data,
           in->data.num_files, (unsigned long long)in->data.num_tokens,
           (unsigned long long)in->data.steps_per_epoch, c->shuffle ? ", shuffled" : "");
  if (in->data.tokenizer[0])
    printf("  data tokenizer: %s (vocab %d)\n", in->data.tokenizer, in->data.tokenizer_vocab);
  if (c->val_data && c->val_every < c->steps)
    printf("  validation: %s, %d global batches (%.0f tokens) every %d steps and after the last\n",
           c->val_data, in->val_batches, in->val_batches * in->tokens_per_step, c->val_every);
  else if (c->val_data)
    printf("  validation: %s, %d global batches (%.0f tokens) after the last step\n", c->val_data,
           in->val_batches, in->val_batches * in->tokens_per_step);
  if (in->predicted_device > 0)
    printf("  predicted peak device memory per rank %s\n",
           fmt_bytes(in->predicted_device, b1, sizeof b1));
  else
    printf("  no predicted peak device memory: the planner refused this layout (%s)\n",
           in->plan_error);
  /* what start-up found; a shape cuDNN refuses shows at the first step (the loop) */
  printf("  attention: %s\n", in->attention);
  /* the context, the data, the model with its initial values (or a checkpoint) */
  printf("  start-up %.1f s\n", startup_s);
  fflush(stdout);
}

/* One --metrics line: the fields docs/cli.md lists. */
static void write_metrics(FILE *f, const zeroc_train_metrics_t *m, const zeroc_train_info_t *in) {
  char jl[32], jn[32], zl[32] = "null", zn[32] = "null";
  if (isfinite(m->loss_z)) snprintf(zl, sizeof zl, "%.3f", m->loss_z);
  if (isfinite(m->grad_norm_z)) snprintf(zn, sizeof zn, "%.3f", m->grad_norm_z);
  /* a skipped step's figures are not finite: JSON null */
  fprintf(f,
          "{\"step\": %d, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"tokens\": %.0f, "
          "\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"mfu\": %.4f, \"comm_bytes\": %llu, "
          "\"exposed_comm_ms\": %.3f, \"peak_bytes\": {\"device\": %llu, \"host\": %llu}, "
          "\"predicted_bytes\": {\"device\": %.0f, \"host\": %.0f}, \"skipped\": %d, "
          "\"skipped_total\": %d, \"loss_z\": %s, \"grad_norm_z\": %s, \"spike\": \"%s\", "
          "\"peak_device_max\": %lld",
          m->step, zmetrics_num(m->loss, jl, sizeof jl), m->lr,
          zmetrics_num(m->grad_norm, jn, sizeof jn), m->tokens, m->step_ms, m->tokens_per_s, m->mfu,
          (unsigned long long)m->comm_bytes, m->exposed_comm_ms, (unsigned long long)m->peak_device,
          (unsigned long long)m->peak_host, in->predicted_device, in->predicted_host, m->skipped,
          m->skipped_total, zl, zn, zeroc_spike_name(m->spike), (long long)m->peak_device_max);
  /* rank 0's device memory by tag: the accountant's peaks beside the plan's parts */
  for (int k = 0; k < 2; k++) {
    fprintf(f, ", \"%s\": {", k ? "predicted_by_tag" : "peak_by_tag");
    for (int t = 0; t < ZEROC_TAG_COUNT; t++)
      fprintf(f, "%s\"%s\": %.0f", t ? ", " : "", zeroc_memtag_name((zeroc_memtag_t)t),
              k ? (in->predicted_device ? in->predicted_by_tag[t] : 0) : (double)m->peak_by_tag[t]);
    fprintf(f, "}");
  }
  /* rank 0 is the first stage: its idle share of the forward/backward part */
  if (m->pipeline)
    fprintf(f,
            ", \"pp_bubble\": %.4f, \"pp_compute_ms\": %.3f, \"pp_run_ms\": %.3f, "
            "\"pp_compute_max_ms\": %.3f",
            m->pp_bubble, m->pp_compute_ms, m->pp_run_ms, m->pp_compute_max_ms);
  if (m->evaluated)
    fprintf(f, ", \"val_loss\": %s, \"val_ms\": %.3f", zmetrics_num(m->val_loss, jl, sizeof jl),
            m->val_ms);
  fprintf(f, "}\n");
  fflush(f);
}

/* The progress line; `tty`: rewritten in place (\r). */
static void print_progress(const zeroc_train_metrics_t *m, const zeroc_train_info_t *in, int tty) {
  char b1[32], b2[32], val[32] = "";
  int pipe = m->pipeline, spike = m->spike;
  if (m->evaluated) snprintf(val, sizeof val, " | val %.4f", m->val_loss);
  printf("%sstep %5d/%d | loss %.4f%s | norm %.3f | %8.0f tok/s | %7.1f ms | comm %6.1f ms "
         "exposed | mem %s (pred %s)%s%s%s",
         tty ? "\r" : "", m->step, in->config.steps, m->loss, val, m->grad_norm, m->tokens_per_s,
         m->step_ms, m->exposed_comm_ms, fmt_bytes((double)m->peak_device, b1, sizeof b1),
         fmt_pred(in->predicted_device, b2, sizeof b2), m->skipped ? " | SKIPPED (non-finite)" : "",
         spike ? " | SPIKE " : "", spike ? zeroc_spike_name(m->spike) : "");
  if (pipe) printf(" | bubble %4.1f%%", 100 * m->pp_bubble);
  if (in->peak_flops > 0) printf(" | MFU %.1f%%", m->mfu * 100);
  /* the line ends after every part: a tty line is rewritten in place, padded over the last */
  printf("%s", tty ? "   " : "\n");
  fflush(stdout);
}

/* The summary after the run; `ms`: step times (ms) of steps start..steps-1. */
static void print_summary(const ztrain_job_t *o, const zeroc_train_info_t *in, zeroc_ctx_t *ctx,
                          const double *ms, double t_total, double first_loss,
                          const zeroc_train_metrics_t *last) {
  const zeroc_train_config_t *c = &in->config;
  double last_loss = last->loss, last_norm = last->grad_norm;
  int n = c->steps - in->start_step, skip = n > 3 ? 1 : 0; /* the first step warms up */
  double *sorted = malloc(sizeof(double) * (size_t)n);
  if (!sorted) return;
  memcpy(sorted, ms, sizeof(double) * (size_t)n);
  qsort(sorted + skip, (size_t)(n - skip), sizeof(double), cmp_double);
  double med = sorted[skip + (n - skip) / 2] * 1e-3;
  free(sorted);
  char b1[32], b2[32];
  printf("done: %d steps in %.1f s; loss %.4f -> %.4f", n, t_total, first_loss, last_loss);
  if (in->data.kind == ZEROC_DATA_SYNTHETIC)
    printf(" (floor %.4f, gap %.4f)", in->data.loss_floor, last_loss - in->data.loss_floor);
  if (last->evaluated) printf("; val loss %.4f", last->val_loss);
  printf("; grad norm %.3f\n", last_norm);
  if (last->skipped_total || last->spikes_total)
    printf("      %d step(s) skipped (non-finite gradients), %d spike(s) reported (z > %g over %d "
           "steps)\n",
           last->skipped_total, last->spikes_total, c->spike_z, c->spike_window);
  printf(
      "      median step %.1f ms, %.0f tokens/s; peak device memory %s per rank (predicted %s)\n",
      med * 1e3, in->tokens_per_step / med, fmt_bytes((double)last->peak_device, b1, sizeof b1),
      fmt_pred(in->predicted_device, b2, sizeof b2));
  zeroc_mem_stats_t mst;
  zeroc_ctx_memory(ctx, &mst);
  printf("      device memory by kind, measured peak / predicted:");
  for (int t = 0; t < 6; t++)
    printf(" %s %s/%s", zeroc_memtag_name((zeroc_memtag_t)t),
           fmt_bytes((double)mst.peak[ZEROC_MEM_DEVICE][t], b1, sizeof b1),
           fmt_pred(in->predicted_device ? in->predicted_by_tag[t] : 0, b2, sizeof b2));
  printf("\n");
  if (o->save) printf("      checkpoint: %s/latest\n", o->save);
  if (o->export_path) printf("      exported: %s\n", o->export_path);
}

/* ---- the command ------------------------------------------------------------------------ */

/* Open MPI hands ranks a pty even when mpirun's own output is a pipe, so an
 * in-place (\r) progress line is used only outside a launcher, or when
 * ZEROC_PROGRESS=tty asks for it; otherwise one line every 5% of the run. */
static int progress_tty(void) {
  const char *pmode = getenv("ZEROC_PROGRESS");
  int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("SLURM_NTASKS");
  return pmode ? !strcmp(pmode, "tty") : (!launched && isatty(STDOUT_FILENO));
}

/* After the trainer is built: --resume's metrics cut and --metrics opened (rank 0). */
static zeroc_result_t open_metrics(const ztrain_job_t *o, zeroc_ctx_t *ctx, int root, int start,
                                   FILE **metrics) {
  zeroc_result_t r;
  if (o->resume) {
    /* steps after the checkpoint that a crashed run recorded come again */
    r = root && o->metrics && zmetrics_truncate(o->metrics, (uint64_t)start) ? ZEROC_ERR_IO
                                                                             : ZEROC_OK;
    r = zeroc_ctx_agree(ctx, r);
    if (r != ZEROC_OK) return r;
    if (root && !o->quiet) printf("resumed from %s at step %d\n", o->resume, start);
  }
  r = ZEROC_OK;
  if (root && o->metrics) {
    *metrics = fopen(o->metrics, start ? "a" : "w");
    if (!*metrics)
      r = zeroc_error_set(ZEROC_ERR_IO, "--metrics '%s': cannot open for writing: %s", o->metrics,
                          strerror(errno));
  }
  return zeroc_ctx_agree(ctx, r);
}

/* At the boundary before 0-based step `s`: has any rank been signalled
 * (collective)? If so, saves there (when --save is given and a step was
 * trained since the start), rank 0 prints the line, and 1 is returned with
 * the save's result in *r; else 0 with the agreement's result in *r. */
static int stop_check(const ztrain_job_t *j, zeroc_trainer_t *tr, zeroc_ctx_t *ctx, int s,
                      int start, int tty, zeroc_result_t *r) {
  int who = 0, sig = ztrain_stop_agree(ctx, &who, r);
  if (*r != ZEROC_OK || !sig) return 0;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int saved = j->save && s > start;
  if (saved) *r = zeroc_trainer_save(tr, j->save);
  if (*r != ZEROC_OK) return 1;
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  if (mesh->rank == 0) {
    if (tty && !j->quiet) printf("\n");
    fflush(stdout);
    ztrain_stop_report(sig, who, s, in.config.steps, j->save, saved, j->resume, j->argc, j->argv,
                       mesh->world);
  }
  return 1;
}

static const ztrain_view_t GPT_VIEW = {print_header, print_progress, write_metrics, print_summary};

/* The GPT's command line into *job (what can be checked before MPI starts is);
 * -1 to go on, else the exit status. */
static int gpt_job(int argc, char **argv, ztrain_opts_t *o, ztrain_sample_t *smp,
                   ztrain_job_t *job) {
  ztrain_opts_init(o);
  if (ztrain_parse(argc, argv, o)) return 2;
  zeroc_gpt_config_t gc;
  int rc = ztrain_check(o, &gc, &job->tc);
  if (rc >= 0) return rc;
  if (ztrain_sample_open(o, &gc, smp)) return 2;
  job->cc.device = (zeroc_device_kind_t)o->device;
  job->cc.tp = o->tp;
  job->cc.pp = o->pp;
  job->cc.hsdp = o->hsdp;
  job->cc.cp = o->cp;
  job->cc.comm_timeout_s = o->comm_timeout;
  job->metrics = o->metrics, job->save = o->save, job->export_path = o->export_path;
  job->resume = o->resume, job->quiet = o->quiet, job->print_topology = o->print_topology;
  job->view = &GPT_VIEW;
  job->opts = o;
  job->smp = smp;
  return -1;
}

static int run_job(const ztrain_job_t *j, zeroc_train_step_fn on_step, void *user);
static int train_main(int argc, char **argv, zeroc_train_step_fn on_step, void *user,
                      int stop_on_signal);

/* the command stops at a step boundary on a signal; bench's runs (zeroc_train_run) do not */
int zeroc_cmd_train(int argc, char **argv) { return train_main(argc, argv, NULL, NULL, 1); }

int zeroc_train_run(int argc, char **argv, zeroc_train_step_fn on_step, void *user) {
  return train_main(argc, argv, on_step, user, 0);
}

static int train_main(int argc, char **argv, zeroc_train_step_fn on_step, void *user,
                      int stop_on_signal) {
  int dlrm = ztrain_is_dlrm(argc, argv); /* its own flags and view: apps/train_dlrm.c */
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      dlrm ? ztrain_dlrm_usage() : ztrain_usage();
      return 0;
    }
  ztrain_job_t job = {.cc = ZEROC_CTX_CONFIG_INIT, .tc = ZEROC_TRAIN_CONFIG_INIT};
  ztrain_opts_t o;
  ztrain_sample_t smp;
  memset(&smp, 0, sizeof smp);
  int rc =
      dlrm ? (ztrain_dlrm_job(argc, argv, &job) ? 2 : -1) : gpt_job(argc, argv, &o, &smp, &job);
  job.argc = argc, job.argv = argv, job.stop_on_signal = stop_on_signal;
  if (rc < 0) rc = run_job(&job, on_step, user);
  if (!dlrm) ztrain_sample_close(&smp);
  return rc;
}

/* One training run of any model: the context, the trainer, the loop, the end. */
static int run_job(const ztrain_job_t *j, zeroc_train_step_fn on_step, void *user) {
  const ztrain_view_t *view = j->view;
  /* ---- the context -------------------------------------------------------------- */
  zeroc_ctx_t *ctx = NULL;
  double t_start = now_s();
  zeroc_result_t r = zeroc_ctx_create(&ctx, &j->cc);
  if (r != ZEROC_OK) {
    if (r == ZEROC_ERR_INVALID_ARG || r == ZEROC_ERR_NODEVICE) {
      return zarg_fail("train", "%s", zarg_user_msg(zeroc_last_error(NULL)));
    }
    fprintf(stderr, "zeroc train: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int root = mesh->rank == 0;
  if (j->print_topology) zeroc_ctx_print_topology(ctx, stdout);

  /* ---- the trainer: outputs, data, model, starting point ------------------------------- */
  zeroc_trainer_t *tr = NULL;
  zeroc_train_info_t in;
  FILE *metrics = NULL;
  double *times = NULL;
  int rc = 1;
  int agreed = 1; /* agreed: every rank knows about a failure */
  const char *stage_msg = "config";
  r = zeroc_trainer_create(ctx, &j->tc, &tr);
  stage_msg = zeroc_trainer_create_phase();
  if (r != ZEROC_OK) goto fail;
  stage_msg = "start";
  zeroc_trainer_info(tr, &in);
  if (j->smp && (r = ztrain_sample_from_data(j->smp, &in, ctx))) goto fail;
  int start = in.start_step, steps = in.config.steps;
  r = open_metrics(j, ctx, root, start, &metrics);
  if (r != ZEROC_OK) goto fail;
  times = calloc((size_t)steps + 1, sizeof(double));
  r = times ? ZEROC_OK
            : zeroc_error_set(ZEROC_ERR_NOMEM, "out of host memory for %d step times", steps + 1);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;
  if (root && !j->quiet) view->header(j, &in, mesh, now_s() - t_start);

  /* ---- the loop --------------------------------------------------------------------- */
  stage_msg = "train";
  agreed = 0; /* from here a failure may be one rank's alone */
  int tty = progress_tty(), every = steps >= 20 ? steps / 20 : 1;
  double first_loss = NAN;
  zeroc_train_metrics_t m;
  memset(&m, 0, sizeof m);
  double t_run = now_s();
  if (j->stop_on_signal) ztrain_stop_arm();
  for (int s = start; s < steps; s++) {
    int stop = j->stop_on_signal && stop_check(j, tr, ctx, s, start, tty, &r);
    if (stop && r == ZEROC_OK) rc = ZTRAIN_EXIT_STOPPED;
    if (stop || r) goto fail;
    r = zeroc_trainer_step(tr, &m);
    /* too many skipped steps: this step's figures are still reported, then stop */
    int numeric_stop = r == ZEROC_ERR_NUMERIC;
    if (r && !numeric_stop) goto fail;
    times[s] = m.step_ms;
    if (s == start) first_loss = m.loss;
    if (s == start && root && !j->quiet && !in.dlrm) {
      /* the kernels chose per shape in this step: say so where it differs from the header */
      zeroc_train_info_t now;
      zeroc_trainer_info(tr, &now);
      if (strcmp(now.attention, in.attention))
        printf("  attention (step %d): %s\n", m.step, now.attention);
      snprintf(in.attention, sizeof in.attention, "%s", now.attention);
    }
    if (root && metrics) view->metrics(metrics, &m, &in);
    if (root && m.spike && j->quiet) {
      char zl[32] = "null", zn[32] = "null";
      if (isfinite(m.loss_z)) snprintf(zl, sizeof zl, "%.3f", m.loss_z);
      if (isfinite(m.grad_norm_z)) snprintf(zn, sizeof zn, "%.3f", m.grad_norm_z);
      fprintf(stderr,
              "zeroc train: step %d: %s spike (loss %.4f z %s, grad norm %.3f z %s, window %d)\n",
              s + 1, zeroc_spike_name(m.spike), m.loss, zl, m.grad_norm, zn,
              in.config.spike_window);
    }
    if (root && !j->quiet &&
        (tty || s == start || s == steps - 1 || (s + 1) % every == 0 || m.skipped || m.spike ||
         m.evaluated))
      view->progress(&m, &in, tty);
    if (on_step) on_step(user, &m);
    if (numeric_stop) goto fail; /* r kept: ZEROC_ERR_NUMERIC */
    if (j->smp && (r = ztrain_sample_step(j->smp, tr, s + 1, root))) goto fail;
  }
  double t_total = now_s() - t_run;
  if (root && tty && !j->quiet) printf("\n");

  /* ---- the end ------------------------------------------------------------------------ */
  if (j->save) {
    r = zeroc_trainer_save(tr, j->save);
    if (r) goto fail;
  }
  if (j->export_path) {
    r = zeroc_trainer_export(tr, j->export_path);
    if (r) {
      agreed = 1; /* the export agrees internally */
      export_fallback(tr, ctx, j, root);
      goto fail;
    }
  }
  if (root && !j->quiet && steps > start)
    view->summary(j, &in, ctx, times + start, t_total, first_loss, &m);
  rc = 0;
  r = ZEROC_OK;
fail:
  if (r == ZEROC_ERR_NUMERIC) agreed = 1; /* the step's verdict comes from an all-reduced norm */
  if (r != ZEROC_OK) {
    /* every rank reports its own failure; a failure every rank learnt through an
     * agreement (or the all-reduced norm) is reported once, by rank 0; a peer
     * lost mid-step is reported by every rank that noticed it */
    if (root || !agreed)
      fprintf(stderr, "zeroc train: rank %d (%s): %s: %s\n", mesh->rank, stage_msg,
              zeroc_result_name(r), zeroc_last_error(ctx));
    rc = r == ZEROC_ERR_INVALID_ARG && agreed ? 2 : 1;
  }
  if (metrics) fclose(metrics);
  free(times);
  zeroc_trainer_destroy(tr);
  if (r == ZEROC_OK || agreed) {
    int me = mesh->rank; /* the mesh goes with the context */
    /* a run whose last collective failed did not end cleanly on every rank */
    if (zeroc_ctx_finalize(ctx) != ZEROC_OK) {
      fprintf(stderr, "zeroc train: rank %d (finalize): %s\n", me, zeroc_last_error(NULL));
      rc = rc ? rc : 1;
    }
  } else {
    /* a failure other ranks may not know about: stop the whole job */
    zeroc_ctx_abort(ctx, rc, "training failed (see the message above)");
  }
  if (j->stop_on_signal) ztrain_stop_disarm();
  return rc;
}
