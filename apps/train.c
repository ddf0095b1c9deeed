/*
 * apps/train.c - `zeroc train`: the built-in GPT on synthetic or llm.c data,
 * under any layout the mesh allows, with a live progress line, JSON metrics,
 * sharded checkpoints, and safetensors export/import. The contract is
 * shared/CLI.md: flag names and the metrics fields are stable.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/metrics.h"
#include "apps/spike.h"
#include "core/env.h"
#include "core/error.h"
#include "io/files.h"
#include "zeroc/ckpt.h"
#include "zeroc/data.h"
#include "zeroc/plan.h"
#include "zeroc/zeroc.h"

/* shared with zeroc plan and bench (apps/args.c) */
#define DEVICES    zarg_devices
#define MODELS     zarg_models
#define DTYPES     zarg_dtypes
#define RECOMPUTES zarg_recomputes
#define OFFLOADS   zarg_offloads
static const char *const SCHEDULES[] = {"constant", "cosine", NULL};
static const char *const PP_SCHEDULES[] = {"1f1b", "interleaved", NULL};

typedef struct {
  int device, model, schedule, dtype, recompute, off_opt, off_par, pp_schedule;
  int layers, hidden, heads, vocab, seq, batch, grad_accum, steps, warmup, zero, hsdp, tp, pp;
  int vpp, microbatches, prefetch, save_every, shuffle, quiet, print_topology, print_schedule;
  int sequence_parallel, max_skipped, spike_window;
  int64_t seed;
  double lr, weight_decay, clip, beta1, beta2, eps, comm_timeout, spike_z;
  const char *data, *save, *resume, *export_path, *init, *metrics, *nvme_dir;
  int set_layers, set_hidden, set_heads, set_vocab, set_seq, set_batch, set_microbatches;
  int set_zero, set_grad_accum, set_vpp, set_pp_schedule;
} opts_t;

static void usage(void) {
  printf("usage: mpirun -np N zeroc train [flags]   (a plain `zeroc train` is one rank)\n"
         "model:   --model tiny|small|gpt2-124m|gpt2-350m|gpt2-774m|gpt2-1558m|custom (tiny)\n"
         "         --layers --hidden --heads --vocab --seq  override the model's shape\n"
         "batch:   --batch B (micro-batch per dp rank), --grad-accum A; global batch B x A x dp\n"
         "optim:   --steps (100) --lr (3e-4) --warmup (0) --schedule constant|cosine (cosine)\n"
         "         --weight-decay (0) --clip (1, 0 = off) --beta1 (0.9) --beta2 (0.95) --eps (1e-8)\n"
         "layout:  --zero 0|1|2|3 (3; 1 with --pp) --hsdp R (1) --tp (1) --prefetch K (2)\n"
         "         --recompute none|full --dtype fp32|bf16 --device cpu|cuda\n"
         "         --offload-optimizer none|cpu|nvme --offload-params none|cpu|nvme --nvme-dir DIR\n"
         "pipeline: --pp P (1) --pp-schedule 1f1b|interleaved (1f1b) --vpp V (1, chunks per rank)\n"
         "         --microbatches M (P; replaces --grad-accum) --print-schedule (print, then exit)\n"
         "data:    --data synthetic|PATH|GLOB (synthetic) --shuffle --seed S (1)\n"
         "state:   --save DIR --save-every N --resume DIR --export F.safetensors --init F.safetensors\n"
         "output:  --metrics FILE (JSON lines) --quiet --print-topology\n"
         "other:   --comm-timeout SECONDS (ZEROC_COMM_TIMEOUT or 300) --max-skipped N (5)\n"
         "         --spike-window N (50) --spike-z Z (6): report loss / grad-norm spikes\n"
         "See shared/CLI.md for the contract.\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  const zarg_t args[] = {
      {"--device", ARG_CHOICE, &o->device, 0, 0, 0, DEVICES, NULL},
      {"--model", ARG_CHOICE, &o->model, 0, 0, 0, MODELS, NULL},
      {"--layers", ARG_INT, &o->layers, ZARG_LIM_LAYERS, 0, NULL, &o->set_layers},
      {"--hidden", ARG_INT, &o->hidden, ZARG_LIM_HIDDEN, 0, NULL, &o->set_hidden},
      {"--heads", ARG_INT, &o->heads, ZARG_LIM_HEADS, 0, NULL, &o->set_heads},
      {"--vocab", ARG_INT, &o->vocab, ZARG_LIM_VOCAB, 0, NULL, &o->set_vocab},
      {"--seq", ARG_INT, &o->seq, ZARG_LIM_SEQ, 0, NULL, &o->set_seq},
      {"--batch", ARG_INT, &o->batch, ZARG_LIM_BATCH, 0, NULL, &o->set_batch},
      {"--grad-accum", ARG_INT, &o->grad_accum, 1, 1 << 16, 0, NULL, &o->set_grad_accum},
      {"--steps", ARG_INT, &o->steps, 0, 1e9, 0, NULL, NULL},
      {"--lr", ARG_DOUBLE, &o->lr, 0, 10, 0, NULL, NULL},
      {"--warmup", ARG_INT, &o->warmup, 0, 1e9, 0, NULL, NULL},
      {"--weight-decay", ARG_DOUBLE, &o->weight_decay, 0, 10, 0, NULL, NULL},
      {"--clip", ARG_DOUBLE, &o->clip, 0, 1e9, 0, NULL, NULL},
      {"--beta1", ARG_DOUBLE, &o->beta1, 0, 0.999999, 0, NULL, NULL},
      {"--beta2", ARG_DOUBLE, &o->beta2, 0, 0.999999, 0, NULL, NULL},
      {"--eps", ARG_DOUBLE, &o->eps, 0, 1, 1, NULL, NULL},
      {"--schedule", ARG_CHOICE, &o->schedule, 0, 0, 0, SCHEDULES, NULL},
      {"--seed", ARG_I64, &o->seed, 0, 9e18, 0, NULL, NULL},
      {"--zero", ARG_INT, &o->zero, ZARG_LIM_ZERO, 0, NULL, &o->set_zero},
      {"--hsdp", ARG_INT, &o->hsdp, ZARG_LIM_HSDP, 0, NULL, NULL},
      {"--tp", ARG_INT, &o->tp, ZARG_LIM_TP, 0, NULL, NULL},
      {"--pp", ARG_INT, &o->pp, ZARG_LIM_PP, 0, NULL, NULL},
      {"--pp-schedule", ARG_CHOICE, &o->pp_schedule, 0, 0, 0, PP_SCHEDULES, &o->set_pp_schedule},
      {"--vpp", ARG_INT, &o->vpp, ZARG_LIM_VPP, 0, NULL, &o->set_vpp},
      {"--microbatches", ARG_INT, &o->microbatches, ZARG_LIM_MICROBATCHES, 0, NULL,
       &o->set_microbatches},
      {"--dtype", ARG_CHOICE, &o->dtype, 0, 0, 0, DTYPES, NULL},
      {"--recompute", ARG_CHOICE, &o->recompute, 0, 0, 0, RECOMPUTES, NULL},
      {"--prefetch", ARG_INT, &o->prefetch, ZARG_LIM_PREFETCH, 0, NULL, NULL},
      {"--offload-optimizer", ARG_CHOICE, &o->off_opt, 0, 0, 0, OFFLOADS, NULL},
      {"--offload-params", ARG_CHOICE, &o->off_par, 0, 0, 0, OFFLOADS, NULL},
      {"--nvme-dir", ARG_STRING, &o->nvme_dir, 0, 0, 0, NULL, NULL},
      {"--data", ARG_STRING, &o->data, 0, 0, 0, NULL, NULL},
      {"--shuffle", ARG_SWITCH, &o->shuffle, 0, 0, 0, NULL, NULL},
      {"--save", ARG_STRING, &o->save, 0, 0, 0, NULL, NULL},
      {"--save-every", ARG_INT, &o->save_every, 1, 1e9, 0, NULL, NULL},
      {"--resume", ARG_STRING, &o->resume, 0, 0, 0, NULL, NULL},
      {"--export", ARG_STRING, &o->export_path, 0, 0, 0, NULL, NULL},
      {"--init", ARG_STRING, &o->init, 0, 0, 0, NULL, NULL},
      {"--metrics", ARG_STRING, &o->metrics, 0, 0, 0, NULL, NULL},
      {"--comm-timeout", ARG_DOUBLE, &o->comm_timeout, 0, 1e7, 1, NULL, NULL},
      {"--max-skipped", ARG_INT, &o->max_skipped, 0, 1e6, 0, NULL, NULL},
      {"--spike-window", ARG_INT, &o->spike_window, 2, ZSPIKE_MAX_WINDOW, 0, NULL, NULL},
      {"--spike-z", ARG_DOUBLE, &o->spike_z, 0, 1e6, 1, NULL, NULL},
      {"--quiet", ARG_SWITCH, &o->quiet, 0, 0, 0, NULL, NULL},
      {"--print-topology", ARG_SWITCH, &o->print_topology, 0, 0, 0, NULL, NULL},
      {"--print-schedule", ARG_SWITCH, &o->print_schedule, 0, 0, 0, NULL, NULL},
      {"--sequence-parallel", ARG_SWITCH, &o->sequence_parallel, 0, 0, 0, NULL, NULL},
  };
  return zarg_parse("train", argc, argv, args, (int)(sizeof args / sizeof args[0]));
}

int zeroc_train_check_flags(int argc, char **argv) {
  opts_t o = {0};
  return parse(argc, argv, &o);
}

/* ---- the learning-rate schedule -------------------------------------------------------- */

/* Linear warm-up over `warmup` steps, then constant or cosine down to 10% of
 * lr at the last step. `s` is the 0-based step. */
static float lr_at(const opts_t *o, int s) {
  double lr = o->lr;
  if (o->warmup > 0 && s < o->warmup) return (float)(lr * (s + 1) / o->warmup);
  if (o->schedule == 0) return (float)lr;
  int span = o->steps - 1 - o->warmup;
  double p = span > 0 ? (double)(s - o->warmup) / span : 1.0;
  if (p > 1) p = 1;
  double lo = 0.1 * lr;
  return (float)(lo + 0.5 * (lr - lo) * (1.0 + cos(M_PI * p)));
}

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

/* The app's part of the checkpoint manifest: what must match on resume. */
static void app_json(const opts_t *o, const zeroc_gpt_config_t *g, const zeroc_data_position_t *pos,
                     char *buf, size_t n) {
  snprintf(buf, n,
           "{\"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"vocab\": %d, \"seq\": %d}, "
           "\"train\": {\"lr\": %.9g, \"steps\": %d, \"warmup\": %d, \"schedule\": \"%s\", "
           "\"seed\": %lld, \"zero\": %d, \"dtype\": \"%s\"}, "
           "\"data\": {\"step\": %llu, \"epoch\": %llu, \"seed\": %llu, \"shuffle\": %d, "
           "\"seq\": %d, \"global_batch\": %d, \"num_sequences\": %llu, \"fingerprint\": %llu}}",
           g->layers, g->hidden, g->heads, g->vocab, g->seq, o->lr, o->steps, o->warmup,
           SCHEDULES[o->schedule], (long long)o->seed, o->zero, DTYPES[o->dtype],
           (unsigned long long)pos->step, (unsigned long long)pos->epoch,
           (unsigned long long)pos->seed, pos->shuffle, pos->seq, pos->global_batch,
           (unsigned long long)pos->num_sequences, (unsigned long long)pos->fingerprint);
}

/* What a resumed run must share with its checkpoint's app object: the model's
 * whole shape and the data stream (the step is checked against --steps). */
static const char *const RESUME_FIELDS[] = {
    "model.layers", "model.hidden", "model.heads", "model.vocab", "model.seq", "data.seed",
    "data.shuffle", "data.seq", "data.global_batch", "data.num_sequences", "data.fingerprint", NULL};

/* ---- pipeline parallelism ----------------------------------------------------------------- */

static zeroc_pipeline_config_t pipe_config(const opts_t *o, const zeroc_gpt_config_t *g,
                                           zeroc_dtype_t dt) {
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  pc.schedule = o->pp_schedule == 1 ? ZEROC_PIPELINE_INTERLEAVED : ZEROC_PIPELINE_1F1B;
  pc.microbatches = o->grad_accum;
  pc.chunks = o->vpp;
  /* the residual stream between stages: (B*T, C), or this tp rank's B*T/tp rows
   * of it with sequence parallelism */
  size_t rows = (size_t)g->batch * (size_t)g->seq / (size_t)(o->sequence_parallel ? o->tp : 1);
  pc.act_numel = rows * (size_t)g->hidden;
  pc.act_dtype = dt;
  return pc;
}

/* The cut of the unit list into pp x vpp stages: bounds[s] .. bounds[s+1]. */
static int pipe_partition(const opts_t *o, const zeroc_gpt_config_t *g, int *bounds) {
  int nu = zeroc_gpt_num_units(g);
  double *cost = malloc(sizeof(double) * (size_t)nu);
  if (!cost) return -1;
  zeroc_gpt_unit_costs(g, cost);
  zeroc_result_t r = zeroc_pipeline_partition(cost, nu, o->pp * o->vpp, bounds);
  free(cost);
  return r == ZEROC_OK ? 0 : -1;
}

static void unit_name(const zeroc_gpt_config_t *g, int u, char *buf, size_t n) {
  if (u == 0)
    snprintf(buf, n, "embedding");
  else if (u == g->layers + 1)
    snprintf(buf, n, "head");
  else
    snprintf(buf, n, "block %d", u - 1);
}

/* --print-schedule: the stages and every rank's actions; no MPI, nothing trained. */
static int print_schedule(const opts_t *o, const zeroc_gpt_config_t *g, zeroc_dtype_t dt) {
  if (!zarg_launch_rank0()) return 0;
  int S = o->pp * o->vpp, *bounds = malloc(sizeof(int) * (size_t)(S + 1));
  double *cost = malloc(sizeof(double) * (size_t)zeroc_gpt_num_units(g));
  if (!bounds || !cost || pipe_partition(o, g, bounds)) {
    fprintf(stderr, "zeroc train: %s\n", zeroc_last_error(NULL));
    free(bounds);
    free(cost);
    return 1;
  }
  zeroc_gpt_unit_costs(g, cost);
  zeroc_pipeline_config_t pc = pipe_config(o, g, dt);
  printf("pipeline: %s, %d ranks x %d chunks = %d stages, %d micro-batches of %d sequences\n",
         PP_SCHEDULES[o->pp_schedule], o->pp, o->vpp, S, o->grad_accum, g->batch);
  for (int st = 0; st < S; st++) {
    char a[32], b[32];
    double c = 0;
    for (int u = bounds[st]; u < bounds[st + 1]; u++) c += cost[u];
    unit_name(g, bounds[st], a, sizeof a);
    unit_name(g, bounds[st + 1] - 1, b, sizeof b);
    printf("  stage %d (rank %d, chunk %d): units %d..%d (%s%s%s), cost %.1f%% (FLOPs and "
           "parameters)%s\n",
           st, st % o->pp, st / o->pp, bounds[st], bounds[st + 1] - 1, a,
           bounds[st + 1] - 1 > bounds[st] ? " .. " : "", bounds[st + 1] - 1 > bounds[st] ? b : "",
           100 * c, st == S - 1 && S > 1 ? " + a tied copy of wte" : "");
  }
  zeroc_result_t r = zeroc_pipeline_print_schedule(stdout, &pc, o->pp, 1);
  if (r) fprintf(stderr, "zeroc train: %s\n", zeroc_last_error(NULL));
  free(bounds);
  free(cost);
  return r ? 1 : 0;
}

/* --export failed at the end (disk full, the directory gone, permissions
 * changed): the trained weights go to a second place rather than being lost,
 * and rank 0 says where. Collective, like the export itself. */
static void export_fallback(zeroc_model_t *model, zeroc_gpt_t *gpt, const opts_t *o, int root) {
  char alt[4200];
  const char *tmp = getenv("TMPDIR");
  if (o->save)
    snprintf(alt, sizeof alt, "%s/zeroc-export-%ld.safetensors", o->save, (long)getpid());
  else
    snprintf(alt, sizeof alt, "%s/zeroc-export-%ld.safetensors", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
  zeroc_result_t r = zeroc_gpt_export(model, gpt, alt);
  if (root && r == ZEROC_OK)
    fprintf(stderr, "zeroc train: --export '%s' failed; the weights were written to '%s' instead\n",
            o->export_path, alt);
  else if (root)
    fprintf(stderr,
            "zeroc train: --export '%s' failed, and so did writing the weights to '%s': %s\n",
            o->export_path, alt, zeroc_last_error(zeroc_model_ctx(model)));
}

/* ---- the command ------------------------------------------------------------------------ */

int zeroc_cmd_train(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
  opts_t o = {0};
  o.steps = 100;
  o.lr = 3e-4;
  o.clip = 1.0;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.schedule = 1;
  o.seed = 1;
  o.zero = 3;
  o.hsdp = 1;
  o.tp = 1;
  o.pp = 1;
  o.vpp = 1;
  o.grad_accum = 1;
  o.prefetch = 2;
  o.comm_timeout = 0; /* unset: the context takes ZEROC_COMM_TIMEOUT, else 300 */
  o.max_skipped = 5;
  o.spike_window = 50;
  o.spike_z = 6.0;
  o.data = "synthetic";
  if (parse(argc, argv, &o)) return 2;

  /* ---- what can be checked before MPI starts: one line, exit 2, nothing written ---- */
  zeroc_gpt_config_t gc;
  zeroc_gpt_preset(o.model == 6 ? "tiny" : MODELS[o.model], &gc);
  if (o.model == 6 && !(o.set_layers && o.set_hidden && o.set_heads && o.set_vocab && o.set_seq))
    return zarg_fail("train", "--model custom needs --layers, --hidden, --heads, --vocab and --seq");
  if (o.set_layers) gc.layers = o.layers;
  if (o.set_hidden) gc.hidden = o.hidden;
  if (o.set_heads) gc.heads = o.heads;
  if (o.set_vocab) gc.vocab = o.vocab;
  if (o.set_seq) gc.seq = o.seq;
  if (o.set_batch) gc.batch = o.batch;
  if (gc.hidden % gc.heads)
    return zarg_fail("train", "--heads %d must divide --hidden %d", gc.heads, gc.hidden);
  if (gc.heads % o.tp)
    return zarg_fail("train", "--tp %d must divide the %d attention heads (--heads)", o.tp, gc.heads);
  if (o.sequence_parallel && o.tp < 2)
    return zarg_fail("train", "--sequence-parallel needs --tp > 1 (it splits the tensor-parallel "
                              "ranks' LayerNorm regions)");
  if (o.sequence_parallel && ((int64_t)gc.batch * gc.seq) % o.tp)
    return zarg_fail("train", "--sequence-parallel with --tp %d needs --batch x --seq (%d x %d) to be "
                              "a multiple of %d",
                     o.tp, gc.batch, gc.seq, o.tp);
  if (o.pp == 1) {
    if (o.print_schedule) return zarg_fail("train", "--print-schedule needs --pp > 1");
    if (o.set_microbatches)
      return zarg_fail("train", "--microbatches is for --pp > 1; use --grad-accum");
    if (o.set_vpp || o.set_pp_schedule)
      return zarg_fail("train", "--%s is for --pp > 1", o.set_vpp ? "vpp" : "pp-schedule");
  } else {
    /* with a pipeline the micro-batches play the role of gradient accumulation */
    if (o.set_grad_accum)
      return zarg_fail("train",
                       "--grad-accum with --pp %d: use --microbatches (micro-batches per "
                       "step through the pipeline)",
                       o.pp);
    if (o.set_zero && o.zero > 1)
      return zarg_fail("train",
                       "--zero %d with --pp %d: pipeline parallelism keeps every "
                       "micro-batch's gradients on its stage and reduces them once per "
                       "step; accepted --zero 0 or 1 (default 1 with --pp)",
                       o.zero, o.pp);
    if (!o.set_zero) o.zero = 1;
    o.grad_accum = o.set_microbatches ? o.microbatches : o.pp;
    int interleaved = o.pp_schedule == 1;
    if (interleaved && o.vpp < 2)
      return zarg_fail("train", "--pp-schedule interleaved needs --vpp >= 2 (model chunks per "
                                "pipeline rank)");
    if (!interleaved && o.vpp > 1)
      return zarg_fail("train", "--vpp %d needs --pp-schedule interleaved", o.vpp);
    if (interleaved && o.grad_accum % o.pp)
      return zarg_fail("train",
                       "--microbatches %d with --pp-schedule interleaved: accepted a "
                       "multiple of --pp %d",
                       o.grad_accum, o.pp);
    int nu = zeroc_gpt_num_units(&gc);
    if (nu < o.pp * o.vpp)
      return zarg_fail("train",
                       "--pp %d x --vpp %d = %d pipeline stages need as many units; the "
                       "model has %d (embedding, %d layers, head): use more --layers",
                       o.pp, o.vpp, o.pp * o.vpp, nu, gc.layers);
    if (o.print_schedule) {
      zeroc_dtype_t pdt = o.dtype == 2 ? ZEROC_BF16 : ZEROC_FP32;
      return print_schedule(&o, &gc, pdt);
    }
  }
  if (o.off_par != 0 && o.zero != 3)
    return zarg_fail("train", "--offload-params %s needs --zero 3 (got --zero %d)", OFFLOADS[o.off_par], o.zero);
  if ((o.off_opt == 2 || o.off_par == 2) && !o.nvme_dir)
    return zarg_fail("train", "--nvme-dir is required with nvme offload");
  if (o.nvme_dir) {
    struct stat sb;
    if (stat(o.nvme_dir, &sb))
      return zarg_fail("train", "--nvme-dir '%s': no such directory", o.nvme_dir);
    if (!S_ISDIR(sb.st_mode))
      return zarg_fail("train", "--nvme-dir '%s' is a %s, not a directory", o.nvme_dir,
                       S_ISREG(sb.st_mode) ? "file" : zeroc__file_kind(sb.st_mode));
    if (access(o.nvme_dir, W_OK))
      return zarg_fail("train", "--nvme-dir '%s': directory not writable", o.nvme_dir);
  }
  if (o.save_every && !o.save) return zarg_fail("train", "--save-every needs --save DIR");
  if (o.resume && o.init) return zarg_fail("train", "--resume and --init exclude each other");
  if (o.init && access(o.init, R_OK))
    return zarg_fail("train", "--init '%s': file not readable", o.init);
  if (o.resume && access(o.resume, R_OK))
    return zarg_fail("train", "--resume '%s': no such checkpoint directory", o.resume);

  /* ---- the context -------------------------------------------------------------- */
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = (zeroc_device_kind_t)o.device;
  cc.tp = o.tp;
  cc.pp = o.pp;
  cc.hsdp = o.hsdp;
  cc.comm_timeout_s = o.comm_timeout;
  zeroc_ctx_t *ctx = NULL;
  zeroc_result_t r = zeroc_ctx_create(&ctx, &cc);
  if (r != ZEROC_OK) {
    if (r == ZEROC_ERR_INVALID_ARG || r == ZEROC_ERR_NODEVICE) {
      const char *e = zeroc_last_error(NULL), *colon = strstr(e, ": ");
      return zarg_fail("train", "%s", colon ? colon + 2 : e);
    }
    fprintf(stderr, "zeroc train: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int root = mesh->rank == 0, dp = mesh->dp;
  zeroc_device_kind_t dev = zeroc_ctx_device(ctx);
  zeroc_dtype_t dtype = o.dtype == 0 ? (dev == ZEROC_DEVICE_CUDA ? ZEROC_BF16 : ZEROC_FP32)
                                     : (o.dtype == 1 ? ZEROC_FP32 : ZEROC_BF16);
  if (o.print_topology) zeroc_ctx_print_topology(ctx, stdout);

  zeroc_data_t *data = NULL;
  zeroc_gpt_t *gpt = NULL;
  zeroc_model_t *model = NULL;
  zeroc_pipeline_t *pipe = NULL;
  /* activations (and what crosses pipeline stages) are in the kernels' dtype:
   * fp32 on cpu, the parameter dtype on cuda */
  zeroc_dtype_t act_dtype = dev == ZEROC_DEVICE_CPU ? ZEROC_FP32 : dtype;
  zeroc_pipeline_config_t pcfg = pipe_config(&o, &gc, act_dtype);
  zeroc_gpt_batch_t *mbs = NULL; /* with a pipeline: the step's micro-batches */
  const void **mbp = NULL;
  int *bounds = NULL;
  FILE *metrics = NULL;
  int32_t *inputs = NULL, *targets = NULL, *dev_in = NULL, *dev_tg = NULL;
  double *times = NULL;
  int rc = 1, start = 0, agreed = 1; /* agreed: every rank knows about a failure */
  const char *stage_msg = "data";

  /* ---- outputs, before hours of training depend on them ---------------------------- */
  stage_msg = "outputs";
  r = o.save ? zeroc__dir_check_writable(o.save, "--save") : ZEROC_OK;
  if (!r && root && o.export_path) r = zeroc__file_check_writable(o.export_path, "--export");
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;

  /* ---- data --------------------------------------------------------------------- */
  stage_msg = "data";
  zeroc_data_config_t dcfg = ZEROC_DATA_CONFIG_INIT;
  dcfg.source = o.data;
  dcfg.vocab = gc.vocab;
  dcfg.seq = gc.seq;
  dcfg.global_batch = gc.batch * o.grad_accum * dp;
  dcfg.seed = (uint64_t)o.seed;
  dcfg.shuffle = o.shuffle;
  r = zeroc_data_create(&dcfg, &data);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;
  zeroc_data_info_t di;
  zeroc_data_info(data, &di);

  /* ---- model and shards --------------------------------------------------------- */
  stage_msg = "model";
  zeroc_gpt_options_t go = ZEROC_GPT_OPTIONS_INIT;
  go.batch = gc.batch;
  go.recompute = o.recompute;
  /* the model computes in the kernels' dtype: fp32 on cpu (bf16 parameters are
   * converted for compute by the engine), the parameter dtype on cuda */
  go.dtype = act_dtype;
  go.sequence_parallel = o.sequence_parallel;
  int first[64], count[64];
  zeroc_gpt_stage_t st = {o.vpp, first, count, 1};
  r = ZEROC_OK;
  if (o.pp > 1) {
    /* this rank's chunks: stage c*pp + pp_rank of the balanced cut */
    int S = o.pp * o.vpp;
    bounds = malloc(sizeof(int) * (size_t)(S + 1));
    r = bounds && !pipe_partition(&o, &gc, bounds) ? ZEROC_OK : ZEROC_ERR_INVALID_ARG;
    for (int c = 0; !r && c < o.vpp; c++) {
      first[c] = bounds[c * o.pp + mesh->pp_rank];
      count[c] = bounds[c * o.pp + mesh->pp_rank + 1] - first[c];
    }
    if (!r) r = zeroc_pipeline_slots(&pcfg, o.pp, mesh->pp_rank, &st.slots);
    go.stage = &st;
  }
  if (!r) r = zeroc_gpt_create_ex(ctx, &gc, &go, &gpt);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;
  int nunits;
  const zeroc_layer_t *layers = zeroc_gpt_layers(gpt, &nunits);
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = o.zero;
  sc.param_dtype = dtype;
  sc.reduce_dtype = dtype;
  sc.prefetch = o.prefetch;
  sc.recompute = o.recompute;
  sc.grad_accum = o.grad_accum;
  sc.offload_optimizer = (zeroc_offload_t)o.off_opt;
  sc.offload_params = (zeroc_offload_t)o.off_par;
  sc.nvme_dir = o.nvme_dir;
  sc.beta1 = (float)o.beta1;
  sc.beta2 = (float)o.beta2;
  sc.eps = (float)o.eps;
  sc.weight_decay = (float)o.weight_decay;
  sc.clip = (float)o.clip;
  sc.seed = (uint64_t)o.seed;
  sc.max_skipped = o.max_skipped;
  r = zeroc_shard(ctx, layers, nunits, &sc, &model);
  if (r != ZEROC_OK) goto fail;
  if (o.pp > 1) {
    int cf[64], cn[64];
    for (int c = 0; c < o.vpp; c++) zeroc_gpt_chunk_units(gpt, c, &cf[c], &cn[c]);
    r = zeroc_pipeline_create(model, cf, cn, &pcfg, &pipe);
    if (r != ZEROC_OK) goto fail;
  }

  /* ---- starting point ------------------------------------------------------------ */
  stage_msg = "start";
  if (o.init) {
    r = zeroc_gpt_import(model, gpt, o.init);
    if (r != ZEROC_OK) goto fail;
  }
  if (o.resume) {
    uint64_t k = 0;
    char *app = NULL;
    r = zeroc_ckpt_load(model, o.resume, &k, &app);
    agreed = 1; /* the load agrees internally; every rank checks the same manifest below */
    if (r == ZEROC_OK) {
      /* the same model and data stream, at the same place; nothing written yet */
      char cur[1024];
      zeroc_data_position_t pos;
      zeroc_data_position(data, k, &pos);
      app_json(&o, &gc, &pos, cur, sizeof cur);
      r = zeroc_ckpt_check_resume(ctx, o.resume, k, (uint64_t)o.steps, app, cur, RESUME_FIELDS);
    }
    free(app);
    if (r != ZEROC_OK) goto fail;
    start = (int)k; /* <= --steps, checked above */
    /* steps after the checkpoint that a crashed run recorded come again */
    r = root && o.metrics && zmetrics_truncate(o.metrics, k) ? ZEROC_ERR_IO : ZEROC_OK;
    r = zeroc_ctx_agree(ctx, r);
    if (r != ZEROC_OK) goto fail;
    if (root && !o.quiet) printf("resumed from %s at step %d\n", o.resume, start);
  }

  /* ---- buffers -------------------------------------------------------------------- */
  /* a pipeline holds the whole step's micro-batches at once */
  size_t ntok = (size_t)gc.batch * (size_t)gc.seq, nmb = pipe ? (size_t)o.grad_accum : 1;
  inputs = malloc(ntok * nmb * 4);
  targets = malloc(ntok * nmb * 4);
  times = calloc((size_t)o.steps + 1, sizeof(double));
  mbs = calloc(nmb, sizeof *mbs);
  mbp = calloc(nmb, sizeof *mbp);
  /* a failure here is one rank's: it falls through to the agreement below, with a
   * message (ZEROC_FAIL) that the agreement carries to rank 0 */
  r = ZEROC_OK;
  if (!inputs || !targets || !times || !mbs || !mbp)
    r = ZEROC_FAIL(ZEROC_ERR_NOMEM,
                   "out of host memory for the token buffers (2 x %zu bytes) and %d step times",
                   ntok * nmb * 4, o.steps + 1);
  if (!r && dev == ZEROC_DEVICE_CUDA) {
    r = zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4, (void **)&dev_in);
    if (!r)
      r = zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4,
                          (void **)&dev_tg);
  }
  if (!r && root && o.metrics) {
    metrics = fopen(o.metrics, start ? "a" : "w");
    if (!metrics)
      r = ZEROC_FAIL(ZEROC_ERR_IO, "--metrics '%s': cannot open for writing: %s", o.metrics,
                     strerror(errno));
  }
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;

  /* ---- the plan's prediction for this layout ---------------------------------------- */
  zeroc_plan_config_t pc = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t pr;
  memset(&pr, 0, sizeof pr);
  pc.model = gc;
  pc.gpus = mesh->world;
  pc.zero = o.zero;
  pc.tp = o.tp;
  pc.pp = o.pp;
  pc.hsdp = o.hsdp;
  pc.microbatches = o.grad_accum;
  pc.vpp = o.vpp;
  pc.param_bytes = (int)zeroc_dtype_size(dtype);
  pc.recompute = o.recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  pc.sequence_parallel = o.sequence_parallel;
  pc.offload_optimizer = (zeroc_offload_t)o.off_opt;
  pc.offload_params = (zeroc_offload_t)o.off_par;
  pc.prefetch = o.prefetch;
  pc.gpu_mem_gib = 0;
  if (dev == ZEROC_DEVICE_CPU) pc.workspace_mib = 0; /* no GEMM library workspace on cpu */
  double predicted = 0, predicted_host = 0;
  char plan_err[256] = "";
  if (zeroc_plan_compute(&pc, &pr) == ZEROC_OK) {
    predicted = pr.device.total;
    predicted_host = pr.host_bytes;
  } else {
    snprintf(plan_err, sizeof plan_err, "%s", zeroc_last_error(NULL));
  }

  uint64_t params = zeroc_gpt_num_params(&gc);
  double tokens_per_step = (double)dcfg.global_batch * gc.seq;
  double flops_per_step = 6.0 * (double)params * tokens_per_step +
                          12.0 * gc.layers * gc.hidden * (double)gc.seq * tokens_per_step;
  double peak_flops = 0;
  if (dev == ZEROC_DEVICE_CUDA) {
    double tf = zeroc_ctx_peak_tflops(ctx); /* ZEROC_PEAK_TFLOPS: checked by zeroc_ctx_create */
    zeroc__env_f64("ZEROC_PEAK_TFLOPS", tf, &tf);
    peak_flops = tf * 1e12 * mesh->world;
  }
  if (root && !o.quiet) {
    char b1[32];
    printf("zeroc train: %s (%d layers, hidden %d, %d heads, vocab %d, seq %d), %.2fM parameters\n",
           MODELS[o.model], gc.layers, gc.hidden, gc.heads, gc.vocab, gc.seq, params / 1e6);
    char ppdesc[64] = "";
    if (o.vpp > 1) snprintf(ppdesc, sizeof ppdesc, ", %d chunks per rank", o.vpp);
    if (o.pp > 1)
      printf("  %d ranks on %s: pp %d (%s%s), ZeRO-%d, dp %d (%d x %d), tp %d%s, batch %d x %d "
             "micro-batches x dp %d = %d sequences (%.0f tokens) per step, %s%s\n",
             mesh->world, dev == ZEROC_DEVICE_CUDA ? "cuda" : "cpu", o.pp,
             PP_SCHEDULES[o.pp_schedule], ppdesc, o.zero, dp, mesh->dp_replicate, mesh->dp_shard,
             mesh->tp, o.sequence_parallel ? " (sequence parallel)" : "", gc.batch, o.grad_accum,
             dp, dcfg.global_batch, tokens_per_step, zeroc_dtype_name(dtype),
             o.recompute ? ", recompute" : "");
    else
      printf("  %d ranks on %s: ZeRO-%d, dp %d (%d x %d), tp %d%s, batch %d x accum %d x dp %d = %d "
           "sequences (%.0f tokens) per step, %s, prefetch %d%s\n",
           mesh->world, dev == ZEROC_DEVICE_CUDA ? "cuda" : "cpu", o.zero, dp, mesh->dp_replicate,
           mesh->dp_shard, mesh->tp, o.sequence_parallel ? " (sequence parallel)" : "", gc.batch,
           o.grad_accum, dp, dcfg.global_batch, tokens_per_step, zeroc_dtype_name(dtype),
           o.prefetch, o.recompute ? ", recompute" : "");
    if (di.kind == ZEROC_DATA_SYNTHETIC)
      printf("  data: synthetic Markov source, loss floor %.4f nats/token (its entropy rate)\n", di.loss_floor);
    else
      printf("  data: %s, %d files, %llu tokens, %llu steps per epoch%s\n", o.data, di.num_files,
             (unsigned long long)di.num_tokens, (unsigned long long)di.steps_per_epoch,
             o.shuffle ? ", shuffled" : "");
    if (predicted > 0)
      printf("  predicted peak device memory per rank %s\n", fmt_bytes(predicted, b1, sizeof b1));
    else
      printf("  no predicted peak device memory: the planner refused this layout (%s)\n", plan_err);
    fflush(stdout);
  }

  /* ---- the loop --------------------------------------------------------------------- */
  stage_msg = "train";
  agreed = 0; /* from here a failure may be one rank's alone */
  zeroc_data_layout_t lay = {dp, mesh->dp_rank, gc.batch, o.grad_accum};
  /* Open MPI hands ranks a pty even when mpirun's own output is a pipe, so an
   * in-place (\r) progress line is used only outside a launcher, or when
   * ZEROC_PROGRESS=tty asks for it; otherwise one line every 5% of the run. */
  const char *pmode = getenv("ZEROC_PROGRESS");
  int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("SLURM_NTASKS");
  int tty = pmode ? !strcmp(pmode, "tty") : (!launched && isatty(STDOUT_FILENO));
  int every = o.steps >= 20 ? o.steps / 20 : 1;
  float first_loss = NAN, last_loss = NAN, last_norm = 0;
  /* spikes: z-scores of the loss and the gradient norm against trailing windows */
  static zspike_t spike_loss, spike_norm;
  zspike_init(&spike_loss, o.spike_window, o.spike_z);
  zspike_init(&spike_norm, o.spike_window, o.spike_z);
  int skipped_total = 0, spikes_total = 0;
  uint64_t peak_dev = 0, peak_host = 0;
  double t_run = now_s();
  zeroc_ctx_memory_reset_peak(ctx);
  for (int s = start; s < o.steps; s++) {
    double t0 = now_s();
    zeroc_pipeline_stats_t pst = {0};
    for (int u = 0; u < o.grad_accum; u++) {
      /* a pipeline takes the whole step's micro-batches at once, one slot each */
      size_t at = pipe ? (size_t)u * ntok : 0;
      r = zeroc_data_batch(data, &lay, (uint64_t)s, u, inputs + at, targets + at);
      if (r) goto fail;
      zeroc_gpt_batch_t b = {gc.batch, gc.seq, inputs + at, targets + at};
      if (dev_in) {
        zeroc_stream_t *cs = zeroc_ctx_compute_stream(ctx);
        r = zeroc_memcpy_async(cs, dev_in + at, inputs + at, ntok * 4);
        if (!r) r = zeroc_memcpy_async(cs, dev_tg + at, targets + at, ntok * 4);
        if (r) goto fail;
        b.inputs = dev_in + at;
        b.targets = dev_tg + at;
      }
      if (pipe) {
        mbs[u] = b;
        mbp[u] = &mbs[u];
        continue;
      }
      r = zeroc_model_forward(model, &b);
      if (!r) r = zeroc_model_backward(model);
      if (r) goto fail;
    }
    if (pipe) {
      r = zeroc_pipeline_run(pipe, mbp, &pst);
      if (r) goto fail;
    }
    zeroc_step_info_t info;
    r = zeroc_model_step(model, lr_at(&o, s), &info);
    /* too many skipped steps: this step's figures are still reported, then stop */
    int numeric_stop = r == ZEROC_ERR_NUMERIC;
    if (r && !numeric_stop) goto fail;
    double dt = now_s() - t0;
    times[s] = dt;
    zeroc_mem_stats_t ms;
    zeroc_ctx_memory(ctx, &ms);
    peak_dev = ms.peak_total[ZEROC_MEM_DEVICE];
    peak_host = ms.peak_total[ZEROC_MEM_PINNED] + ms.peak_total[ZEROC_MEM_HOST];
    if (s == start) first_loss = info.loss;
    last_loss = info.loss;
    last_norm = info.grad_norm;
    /* a skipped step's figures are not finite and never enter the windows */
    double z_loss = NAN, z_norm = NAN;
    int spike = 0;
    if (info.skipped) {
      skipped_total++;
    } else {
      spike |= zspike_push(&spike_loss, info.loss, &z_loss);
      spike |= zspike_push(&spike_norm, info.grad_norm, &z_norm) << 1;
    }
    static const char *const SPIKE_NAMES[] = {"none", "loss", "grad_norm", "loss+grad_norm"};
    if (spike) spikes_total++;
    char zl[32] = "null", zn[32] = "null";
    if (isfinite(z_loss)) snprintf(zl, sizeof zl, "%.3f", z_loss);
    if (isfinite(z_norm)) snprintf(zn, sizeof zn, "%.3f", z_norm);
    double tps = tokens_per_step / dt, mfu = peak_flops > 0 ? flops_per_step / dt / peak_flops : 0;
    /* with metrics, the peak over ranks too (pipeline stages and TP ranks differ),
     * and the slowest pipeline stage's compute (what the other stages wait for) */
    int64_t peak_max = (int64_t)peak_dev, compute_max_us = (int64_t)(pst.compute_ms * 1e3);
    if (o.metrics) {
      r = zeroc_ctx_max_i64(ctx, &peak_max);
      if (!r && pipe) r = zeroc_ctx_max_i64(ctx, &compute_max_us);
      if (r) goto fail;
    }
    if (root && metrics) {
      char jl[32], jn[32]; /* a skipped step's figures are not finite: JSON null */
      fprintf(metrics,
              "{\"step\": %d, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"tokens\": %.0f, "
              "\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"mfu\": %.4f, \"comm_bytes\": %llu, "
              "\"exposed_comm_ms\": %.3f, \"peak_bytes\": {\"device\": %llu, \"host\": %llu}, "
              "\"predicted_bytes\": {\"device\": %.0f, \"host\": %.0f}, \"skipped\": %d, "
              "\"skipped_total\": %d, \"loss_z\": %s, \"grad_norm_z\": %s, \"spike\": \"%s\", "
              "\"peak_device_max\": %lld",
              s + 1, zmetrics_num(info.loss, jl, sizeof jl), lr_at(&o, s),
              zmetrics_num(info.grad_norm, jn, sizeof jn), tokens_per_step, dt * 1e3, tps, mfu,
              (unsigned long long)info.comm_bytes, info.exposed_comm_ms,
              (unsigned long long)peak_dev, (unsigned long long)peak_host, predicted, predicted_host,
              info.skipped, skipped_total, zl, zn, SPIKE_NAMES[spike], (long long)peak_max);
      /* rank 0's device memory by tag: the accountant's peaks beside the plan's parts */
      double pred_tag[ZEROC_TAG_COUNT] = {pr.device.params, pr.device.grads, pr.device.optimizer,
                                          pr.device.activations, pr.device.buffers,
                                          pr.device.workspace};
      for (int k = 0; k < 2; k++) {
        fprintf(metrics, ", \"%s\": {", k ? "predicted_by_tag" : "peak_by_tag");
        for (int t = 0; t < ZEROC_TAG_COUNT; t++)
          fprintf(metrics, "%s\"%s\": %.0f", t ? ", " : "", zeroc_memtag_name((zeroc_memtag_t)t),
                  k ? (predicted ? pred_tag[t] : 0) : (double)ms.peak[ZEROC_MEM_DEVICE][t]);
        fprintf(metrics, "}");
      }
      /* rank 0 is the first stage: its idle share of the forward/backward part */
      if (pipe)
        fprintf(metrics,
                ", \"pp_bubble\": %.4f, \"pp_compute_ms\": %.3f, \"pp_run_ms\": %.3f, "
                "\"pp_compute_max_ms\": %.3f",
                pst.bubble, pst.compute_ms, pst.run_ms, compute_max_us * 1e-3);
      fprintf(metrics, "}\n");
      fflush(metrics);
    }
    if (root && spike && o.quiet)
      fprintf(stderr, "zeroc train: step %d: %s spike (loss %.4f z %s, grad norm %.3f z %s, window %d)\n",
              s + 1, SPIKE_NAMES[spike], info.loss, zl, info.grad_norm, zn, o.spike_window);
    if (root && !o.quiet &&
        (tty || s == start || s == o.steps - 1 || (s + 1) % every == 0 || info.skipped || spike)) {
      char b1[32], b2[32];
      printf("%sstep %5d/%d | loss %.4f | norm %.3f | %8.0f tok/s | %7.1f ms | comm %6.1f ms "
             "exposed | "
             "mem %s (pred %s)%s%s%s%s",
             tty ? "\r" : "", s + 1, o.steps, info.loss, info.grad_norm, tps, dt * 1e3,
             info.exposed_comm_ms, fmt_bytes((double)peak_dev, b1, sizeof b1),
             fmt_pred(predicted, b2, sizeof b2), info.skipped ? " | SKIPPED (non-finite)" : "",
             spike ? " | SPIKE " : "", spike ? SPIKE_NAMES[spike] : "",
             pipe  ? ""
             : tty ? "   "
                   : "\n");
      if (pipe) printf(" | bubble %4.1f%%%s", 100 * pst.bubble, tty ? "   " : "\n");
      if (peak_flops > 0) printf(" | MFU %.1f%%", mfu * 100);
      fflush(stdout);
    }
    if (numeric_stop) {
      r = ZEROC_ERR_NUMERIC; /* kept through the metrics' all-reduce above */
      goto fail;
    }
    if (o.save && o.save_every && (s + 1) % o.save_every == 0 && s + 1 < o.steps) {
      char app[1024];
      zeroc_data_position_t pos;
      zeroc_data_position(data, (uint64_t)s + 1, &pos);
      app_json(&o, &gc, &pos, app, sizeof app);
      r = zeroc_ckpt_save(model, o.save, (uint64_t)s + 1, app);
      if (r) goto fail;
    }
  }
  double t_total = now_s() - t_run;
  if (root && tty && !o.quiet) printf("\n");

  /* ---- the end ------------------------------------------------------------------------ */
  if (o.save) {
    char app[1024];
    zeroc_data_position_t pos;
    zeroc_data_position(data, (uint64_t)o.steps, &pos);
    app_json(&o, &gc, &pos, app, sizeof app);
    r = zeroc_ckpt_save(model, o.save, (uint64_t)o.steps, app);
    if (r) goto fail;
  }
  if (o.export_path) {
    r = zeroc_gpt_export(model, gpt, o.export_path);
    if (r) {
      agreed = 1; /* the export agrees internally */
      export_fallback(model, gpt, &o, root);
      goto fail;
    }
  }
  if (root && !o.quiet && o.steps > start) {
    int n = o.steps - start, skip = n > 3 ? 1 : 0; /* the first step warms up */
    double *sorted = malloc(sizeof(double) * (size_t)n);
    memcpy(sorted, times + start, sizeof(double) * (size_t)n);
    qsort(sorted + skip, (size_t)(n - skip), sizeof(double), cmp_double);
    double med = sorted[skip + (n - skip) / 2];
    free(sorted);
    char b1[32], b2[32];
    printf("done: %d steps in %.1f s; loss %.4f -> %.4f", n, t_total, first_loss, last_loss);
    if (di.kind == ZEROC_DATA_SYNTHETIC) printf(" (floor %.4f, gap %.4f)", di.loss_floor, last_loss - di.loss_floor);
    printf("; grad norm %.3f\n", last_norm);
    if (skipped_total || spikes_total)
      printf("      %d step(s) skipped (non-finite gradients), %d spike(s) reported (z > %g over %d steps)\n",
             skipped_total, spikes_total, o.spike_z, o.spike_window);
    printf(
        "      median step %.1f ms, %.0f tokens/s; peak device memory %s per rank (predicted %s)\n",
        med * 1e3, tokens_per_step / med, fmt_bytes((double)peak_dev, b1, sizeof b1),
        fmt_pred(predicted, b2, sizeof b2));
    zeroc_mem_stats_t ms;
    zeroc_ctx_memory(ctx, &ms);
    double meas[6], pred[6] = {pr.device.params, pr.device.grads, pr.device.optimizer,
                               pr.device.activations, pr.device.buffers, pr.device.workspace};
    for (int t = 0; t < 6; t++) meas[t] = (double)ms.peak[ZEROC_MEM_DEVICE][t];
    printf("      device memory by kind, measured peak / predicted:");
    for (int t = 0; t < 6; t++)
      printf(" %s %s/%s", zeroc_memtag_name((zeroc_memtag_t)t), fmt_bytes(meas[t], b1, sizeof b1),
             fmt_pred(predicted ? pred[t] : 0, b2, sizeof b2));
    printf("\n");
    if (o.save) printf("      checkpoint: %s/latest\n", o.save);
    if (o.export_path) printf("      exported: %s\n", o.export_path);
  }
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
  zeroc_mem_free(ctx, dev_in);
  zeroc_mem_free(ctx, dev_tg);
  free(inputs);
  free(targets);
  free(times);
  free(mbs);
  free(mbp);
  free(bounds);
  zeroc_pipeline_destroy(pipe);
  zeroc_model_destroy(model);
  zeroc_gpt_destroy(gpt);
  zeroc_data_destroy(data);
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
  return rc;
}
