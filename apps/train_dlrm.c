/*
 * apps/train_dlrm.c - `zeroc train --model dlrm|dlrm-tiny|dlrm-mlperf`: the
 * DLRM's flags and its view (header, progress line, --metrics lines, summary).
 * The loop is apps/train.c's, the same for every model; the run is the
 * library's trainer (zeroc/train.h, the DLRM in src/model/dlrm_*.c). A flag of
 * the GPT only (--layers, --tp, --export, ...) is refused here with one line,
 * as any unknown flag.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/dlrm_cli.h"
#include "apps/metrics.h"
#include "apps/train_dlrm.h"
#include "apps/train_view.h"
#include "zeroc/train.h"
#include "zeroc/zeroc.h"

const char *const zdlrm_models[] = {"dlrm-tiny", "dlrm", "dlrm-mlperf", NULL};
const char *const zdlrm_shardings[] = {"auto", "table", "column", "row", "data", NULL};

void zdlrm_shape_apply(const zdlrm_shape_t *sh, zeroc_train_config_t *c) {
  c->model = zdlrm_models[sh->model];
  /* a flag not given (0) leaves the field unset: the preset's */
  c->tables = sh->tables ? sh->tables : ZEROC_UNSET, c->rows = sh->rows;
  c->dim = sh->dim ? sh->dim : ZEROC_UNSET, c->dense = sh->dense ? sh->dense : ZEROC_UNSET;
  c->bottom = sh->bottom, c->top = sh->top, c->batch = sh->batch ? sh->batch : ZEROC_UNSET;
}
static const char *const SCHEDULES[] = {"constant", "cosine", "linear", NULL};

typedef struct {
  zdlrm_shape_t sh;
  int device, dtype, zero, hsdp, prefetch, recompute, schedule, set_schedule, sharding;
  int steps, warmup, val_every, max_skipped, quiet, off_opt;
  int64_t seed, val_samples;
  double lr, clip, beta1, beta2, eps, weight_decay, comm_timeout;
  const char *data, *val_data, *metrics, *save, *resume;
  int save_every, save_limit;
} dlrm_opts_t;

/* 1 when argv asks for a DLRM model (--model NAME or --model=NAME): the
 * registry's architecture of that name is "dlrm". */
int ztrain_is_dlrm(int argc, char **argv) { return !strcmp(zarg_model_arch(argc, argv), "dlrm"); }

void ztrain_dlrm_usage(void) {
  printf(
      "usage: mpirun -np N zeroc train --model dlrm|dlrm-tiny|dlrm-mlperf [flags]\n"
      "model:   --tables T --rows N|N1,..,NT --dim D --dense F --bottom W1,..,D --top W1,..,1\n"
      "         --embedding-sharding auto|table|column|row|data (auto)\n"
      "batch:   --batch B (samples per dp rank); global batch B x dp\n"
      "optim:   --steps (100) --lr (3e-4; also the tables' AdaGrad step) --warmup (0)\n"
      "         --schedule constant|cosine|linear --weight-decay --clip --beta1 --beta2 --eps\n"
      "layout:  --zero 0|1|2|3 (3) --hsdp R --prefetch K --recompute none|full --device cpu|cuda\n"
      "         --offload-optimizer none|cpu\n"
      "data:    --data synthetic|FILE.tsv (Criteo TSV) --seed S\n"
      "eval:    --val-data synthetic|FILE.tsv --val-every N (not given: after the last step)\n"
      "         --val-tokens SAMPLES (4096): val_loss, auc and logloss on held-out samples\n"
      "state:   --save DIR --save-every N (0: at the end only) --resume DIR|DIR/step_K\n"
      "         --save-limit N (all): keep the newest N checkpoints in --save DIR\n"
      "output:  --metrics FILE (JSON lines) --quiet\n");
}

static int parse(int argc, char **argv, dlrm_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->steps = o->max_skipped = ZEROC_UNSET;
  o->lr = o->clip = o->beta1 = o->beta2 = o->eps = ZEROC_UNSET;
  o->seed = ZEROC_UNSET;
  o->zero = o->prefetch = ZEROC_UNSET, o->val_samples = ZEROC_UNSET; /* the library's defaults */
  o->hsdp = 1, o->schedule = 1;
  const zarg_t args[] = {
      {"--device", ARG_CHOICE, &o->device, 0, 0, 0, zarg_devices, NULL},
      ZDLRM_SHAPE_ARGS(&o->sh),
      {"--embedding-sharding", ARG_CHOICE, &o->sharding, 0, 0, 0, zdlrm_shardings, NULL},
      {"--steps", ARG_INT, &o->steps, 0, 1e9, 0, NULL, NULL},
      {"--lr", ARG_DOUBLE, &o->lr, 0, 10, 0, NULL, NULL},
      {"--warmup", ARG_INT, &o->warmup, 0, 1e9, 0, NULL, NULL},
      {"--schedule", ARG_CHOICE, &o->schedule, 0, 0, 0, SCHEDULES, &o->set_schedule},
      {"--weight-decay", ARG_DOUBLE, &o->weight_decay, 0, 10, 0, NULL, NULL},
      {"--clip", ARG_DOUBLE, &o->clip, 0, 1e9, 0, NULL, NULL},
      {"--beta1", ARG_DOUBLE, &o->beta1, 0, 0.999999, 0, NULL, NULL},
      {"--beta2", ARG_DOUBLE, &o->beta2, 0, 0.999999, 0, NULL, NULL},
      {"--eps", ARG_DOUBLE, &o->eps, 0, 1, 1, NULL, NULL},
      {"--seed", ARG_I64, &o->seed, 0, 9e18, 0, NULL, NULL},
      {"--zero", ARG_INT, &o->zero, ZARG_LIM_ZERO, 0, NULL, NULL},
      {"--hsdp", ARG_INT, &o->hsdp, ZARG_LIM_HSDP, 0, NULL, NULL},
      {"--prefetch", ARG_INT, &o->prefetch, ZARG_LIM_PREFETCH, 0, NULL, NULL},
      {"--recompute", ARG_CHOICE, &o->recompute, 0, 0, 0, zarg_recomputes, NULL},
      {"--dtype", ARG_CHOICE, &o->dtype, 0, 0, 0, zarg_dtypes, NULL},
      {"--offload-optimizer", ARG_CHOICE, &o->off_opt, 0, 0, 0, zarg_offloads, NULL},
      {"--data", ARG_STRING, &o->data, 0, 0, 0, NULL, NULL},
      {"--val-data", ARG_STRING, &o->val_data, 0, 0, 0, NULL, NULL},
      {"--val-every", ARG_INT, &o->val_every, 0, 1e9, 0, NULL, NULL},
      {"--val-tokens", ARG_I64, &o->val_samples, 1, 1e8, 0, NULL, NULL},
      {"--metrics", ARG_STRING, &o->metrics, 0, 0, 0, NULL, NULL},
      {"--save", ARG_STRING, &o->save, 0, 0, 0, NULL, NULL},
      {"--save-every", ARG_INT, &o->save_every, 1, 1e9, 0, NULL, NULL},
      {"--save-limit", ARG_INT, &o->save_limit, 1, 1e9, 0, NULL, NULL},
      {"--resume", ARG_STRING, &o->resume, 0, 0, 0, NULL, NULL},
      {"--comm-timeout", ARG_DOUBLE, &o->comm_timeout, 0, 1e7, 1, NULL, NULL},
      {"--max-skipped", ARG_INT, &o->max_skipped, 0, 1e6, 0, NULL, NULL},
      {"--quiet", ARG_SWITCH, &o->quiet, 0, 0, 0, NULL, NULL},
  };
  /* the GPT's flags: named as such, rather than as unknown */
  static const char *const GPT_ONLY[] = {"--layers",
                                         "--hidden",
                                         "--heads",
                                         "--vocab",
                                         "--seq",
                                         "--tp",
                                         "--pp",
                                         "--vpp",
                                         "--pp-schedule",
                                         "--microbatches",
                                         "--grad-accum",
                                         "--sequence-parallel",
                                         "--cp",
                                         "--cp-mode",
                                         "--dropout",
                                         "--export",
                                         "--init",
                                         "--offload-params",
                                         "--nvme-dir",
                                         "--shuffle",
                                         "--sample-every",
                                         "--tokenizer",
                                         NULL};
  for (int i = 0; i < argc; i++)
    for (int k = 0; GPT_ONLY[k]; k++) {
      size_t n = strlen(GPT_ONLY[k]);
      if (!strncmp(argv[i], GPT_ONLY[k], n) && (!argv[i][n] || argv[i][n] == '='))
        return zarg_fail("train",
                         "%s is for the GPT models, not --model %s (zeroc train --model "
                         "dlrm --help lists the DLRM's flags)",
                         GPT_ONLY[k], "dlrm");
    }
  if (zarg_parse("train", argc, argv, args, (int)(sizeof args / sizeof args[0]))) return 2;
  if (o->off_opt == 2)
    return zarg_fail("train",
                     "--offload-optimizer nvme: not with --model dlrm; accepted none, cpu");
  if (o->dtype == 2)
    return zarg_fail("train", "--dtype bf16: --model dlrm computes in fp32; accepted fp32");
  /* a data file that is not there is the user's value, refused before MPI starts */
  const char *files[2][2] = {{"--data", o->data}, {"--val-data", o->val_data}};
  for (int i = 0; i < 2; i++)
    if (files[i][1] && strcmp(files[i][1], "synthetic") && access(files[i][1], R_OK))
      return zarg_fail("train",
                       "%s '%s': file not readable; accepted synthetic or a Criteo TSV file",
                       files[i][0], files[i][1]);
  if (o->save_every && !o->save) return zarg_fail("train", "--save-every needs --save DIR");
  if (o->save_limit && !o->save) return zarg_fail("train", "--save-limit needs --save DIR");
  if (o->resume && access(o->resume, R_OK))
    return zarg_fail("train", "--resume '%s': no such checkpoint directory", o->resume);
  return 0;
}

static void to_config(const dlrm_opts_t *o, zeroc_train_config_t *c) {
  zdlrm_shape_apply(&o->sh, c);
  c->embedding_sharding = o->sharding;
  c->steps = o->steps, c->lr = o->lr, c->warmup = o->warmup;
  /* the choices' order: constant, cosine, linear */
  c->schedule = !o->set_schedule   ? ZEROC_LR_DEFAULT
                : o->schedule == 2 ? ZEROC_LR_LINEAR
                : o->schedule      ? ZEROC_LR_COSINE
                                   : ZEROC_LR_CONSTANT;
  c->weight_decay = o->weight_decay, c->clip = o->clip;
  c->beta1 = o->beta1, c->beta2 = o->beta2, c->eps = o->eps, c->seed = o->seed;
  c->max_skipped = o->max_skipped, c->zero = o->zero, c->prefetch = o->prefetch;
  c->recompute = o->recompute;
  c->param_dtype = ZEROC_FP32;
  c->offload_optimizer = (zeroc_offload_t)o->off_opt;
  c->data = o->data, c->val_data = o->val_data;
  /* without --val-every: one evaluation, after the last step (a cadence no run reaches) */
  c->val_every = o->val_every ? o->val_every : INT_MAX;
  c->val_tokens = o->val_samples;
  c->save = o->save, c->save_every = o->save_every, c->resume = o->resume;
  c->save_limit = o->save_limit;
}

static void print_header(const ztrain_job_t *j, const zeroc_train_info_t *in,
                         const zeroc_mesh_info_t *mesh, double startup_s) {
  (void)j, (void)startup_s;
  const zeroc_dlrm_config_t *m = &in->dlrm_model;
  const zeroc_train_config_t *c = &in->config;
  char bot[96] = "", top[96] = "";
  for (int i = 0; i < m->nbottom; i++)
    snprintf(bot + strlen(bot), sizeof bot - strlen(bot), "%s%d", i ? "-" : "", m->bottom[i]);
  for (int i = 0; i < m->ntop; i++)
    snprintf(top + strlen(top), sizeof top - strlen(top), "%s%d", i ? "-" : "", m->top[i]);
  printf("zeroc train: %s (%d tables, dim %d, %d dense, bottom %s, top %s), %.2fM parameters "
         "(%.2fM in the MLPs)\n",
         c->model, m->tables, m->dim, m->dense, bot, top, in->params / 1e6,
         zeroc_dlrm_mlp_params(m) / 1e6);
  /* how many tables each sharding got (auto resolves per table) */
  char tabs[128] = "";
  int count[6] = {0};
  for (int t = 0; t < m->tables; t++) count[in->dlrm_sharding[t] + 1]++;
  for (int k = 0; k < 6; k++)
    if (count[k])
      snprintf(tabs + strlen(tabs), sizeof tabs - strlen(tabs), "%s%d %s", tabs[0] ? ", " : "",
               count[k], k ? zdlrm_shardings[k - 1] : "replicated");
  printf("  %d ranks on %s: ZeRO-%d on the MLPs, dp %d (%d x %d), tables %s (%s), batch %d x dp "
         "%d = %d samples per step\n",
         mesh->world, in->device == ZEROC_DEVICE_CUDA ? "cuda" : "cpu", c->zero, mesh->dp,
         mesh->dp_replicate, mesh->dp_shard, tabs, zdlrm_shardings[c->embedding_sharding], c->batch,
         mesh->dp, in->global_batch);
  if (isfinite(in->auc_ceiling))
    printf("  data: synthetic clicks from a hidden model; on the %d held-out samples the best "
           "achievable log-loss is %.4f and AUC %.4f\n",
           in->val_batches * in->global_batch, in->logloss_floor, in->auc_ceiling);
  else
    printf("  data: %s (Criteo TSV), %d held-out samples from %s\n", c->data,
           in->val_batches * in->global_batch, c->val_data ? c->val_data : c->data);
  fflush(stdout);
}

static void write_metrics(FILE *f, const zeroc_train_metrics_t *m, const zeroc_train_info_t *in) {
  (void)in;
  char a[32], b[32], e[32], g[32];
  fprintf(f,
          "{\"step\": %d, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"tokens\": %.0f, "
          "\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"comm_bytes\": %llu, "
          "\"exposed_comm_ms\": %.3f, \"peak_bytes\": {\"device\": %llu, \"host\": %llu}, "
          "\"skipped\": %d",
          m->step, zmetrics_num(m->loss, a, sizeof a), m->lr,
          zmetrics_num(m->grad_norm, b, sizeof b), m->tokens, m->step_ms, m->tokens_per_s,
          (unsigned long long)m->comm_bytes, m->exposed_comm_ms, (unsigned long long)m->peak_device,
          (unsigned long long)m->peak_host, m->skipped);
  if (m->evaluated)
    fprintf(f, ", \"val_loss\": %s, \"auc\": %s, \"logloss\": %s, \"val_ms\": %.3f",
            zmetrics_num(m->val_loss, a, sizeof a), zmetrics_num(m->auc, e, sizeof e),
            zmetrics_num(m->logloss, g, sizeof g), m->val_ms);
  fprintf(f, "}\n");
  fflush(f);
}

static void print_progress(const zeroc_train_metrics_t *m, const zeroc_train_info_t *in, int tty) {
  printf("%sstep %5d/%d | loss %.4f | norm %.3f | %8.0f samples/s | %7.1f ms", tty ? "\r" : "",
         m->step, in->config.steps, m->loss, m->grad_norm, m->tokens_per_s, m->step_ms);
  if (m->evaluated) printf(" | val %.4f auc %.4f logloss %.4f", m->val_loss, m->auc, m->logloss);
  printf("%s", tty ? "   " : "\n");
  fflush(stdout);
}

static void print_summary(const ztrain_job_t *j, const zeroc_train_info_t *in, zeroc_ctx_t *ctx,
                          const double *ms, double t_total, double first_loss,
                          const zeroc_train_metrics_t *last) {
  (void)ctx, (void)ms, (void)t_total;
  printf("done: loss %.4f -> %.4f%s\n", first_loss, last->loss,
         isfinite(in->auc_ceiling) ? " (see auc against the ceiling above)" : "");
  if (j->save) printf("      checkpoint: %s/latest\n", j->save);
}

static const ztrain_view_t DLRM_VIEW = {print_header, print_progress, write_metrics, print_summary};

int ztrain_dlrm_job(int argc, char **argv, ztrain_job_t *job) {
  static dlrm_opts_t o; /* the flags outlive the parse: the view reads them */
  if (parse(argc, argv, &o)) return 2;
  job->cc.device = (zeroc_device_kind_t)o.device;
  job->cc.hsdp = o.hsdp;
  job->cc.comm_timeout_s = o.comm_timeout;
  to_config(&o, &job->tc);
  job->metrics = o.metrics, job->save = o.save, job->resume = o.resume, job->quiet = o.quiet;
  job->view = &DLRM_VIEW;
  job->opts = &o;
  return 0;
}
