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
#include "core/error.h"
#include "io/files.h"
#include "zeroc/train.h"
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
  int set_zero, set_grad_accum, set_vpp, set_pp_schedule, set_schedule;
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
      {"--schedule", ARG_CHOICE, &o->schedule, 0, 0, 0, SCHEDULES, &o->set_schedule},
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
      {"--spike-window", ARG_INT, &o->spike_window, 2, ZEROC_SPIKE_MAX_WINDOW, 0, NULL, NULL},
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

/* ---- pipeline parallelism: --print-schedule ----------------------------------------------- */

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
static void export_fallback(zeroc_trainer_t *tr, zeroc_ctx_t *ctx, const opts_t *o, int root) {
  char alt[4200];
  const char *tmp = getenv("TMPDIR");
  if (o->save)
    snprintf(alt, sizeof alt, "%s/zeroc-export-%ld.safetensors", o->save, (long)getpid());
  else
    snprintf(alt, sizeof alt, "%s/zeroc-export-%ld.safetensors", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
  zeroc_result_t r = zeroc_trainer_export(tr, alt);
  if (root && r == ZEROC_OK)
    fprintf(stderr, "zeroc train: --export '%s' failed; the weights were written to '%s' instead\n",
            o->export_path, alt);
  else if (root)
    fprintf(stderr,
            "zeroc train: --export '%s' failed, and so did writing the weights to '%s': %s\n",
            o->export_path, alt, zeroc_last_error(ctx));
}

/* ---- the flags: what can be checked before MPI starts ------------------------------------ */

/* One line and exit 2, nothing written; or --print-schedule's output. Returns
 * -1 to go on training, else the exit status. Resolves the model's shape and,
 * with --pp, --zero and the micro-batches. */
static int check_flags(opts_t *o, zeroc_gpt_config_t *gc) {
  zeroc_gpt_preset(o->model == 6 ? "tiny" : MODELS[o->model], gc);
  if (o->model == 6 && !(o->set_layers && o->set_hidden && o->set_heads && o->set_vocab && o->set_seq))
    return zarg_fail("train", "--model custom needs --layers, --hidden, --heads, --vocab and --seq");
  if (o->set_layers) gc->layers = o->layers;
  if (o->set_hidden) gc->hidden = o->hidden;
  if (o->set_heads) gc->heads = o->heads;
  if (o->set_vocab) gc->vocab = o->vocab;
  if (o->set_seq) gc->seq = o->seq;
  if (o->set_batch) gc->batch = o->batch;
  if (gc->hidden % gc->heads)
    return zarg_fail("train", "--heads %d must divide --hidden %d", gc->heads, gc->hidden);
  if (gc->heads % o->tp)
    return zarg_fail("train", "--tp %d must divide the %d attention heads (--heads)", o->tp, gc->heads);
  if (o->sequence_parallel && o->tp < 2)
    return zarg_fail("train", "--sequence-parallel needs --tp > 1 (it splits the tensor-parallel "
                              "ranks' LayerNorm regions)");
  if (o->sequence_parallel && ((int64_t)gc->batch * gc->seq) % o->tp)
    return zarg_fail("train", "--sequence-parallel with --tp %d needs --batch x --seq (%d x %d) to be "
                              "a multiple of %d",
                     o->tp, gc->batch, gc->seq, o->tp);
  if (o->pp == 1) {
    if (o->print_schedule) return zarg_fail("train", "--print-schedule needs --pp > 1");
    if (o->set_microbatches)
      return zarg_fail("train", "--microbatches is for --pp > 1; use --grad-accum");
    if (o->set_vpp || o->set_pp_schedule)
      return zarg_fail("train", "--%s is for --pp > 1", o->set_vpp ? "vpp" : "pp-schedule");
  } else {
    /* with a pipeline the micro-batches play the role of gradient accumulation */
    if (o->set_grad_accum)
      return zarg_fail("train",
                       "--grad-accum with --pp %d: use --microbatches (micro-batches per "
                       "step through the pipeline)",
                       o->pp);
    if (o->set_zero && o->zero > 1)
      return zarg_fail("train",
                       "--zero %d with --pp %d: pipeline parallelism keeps every "
                       "micro-batch's gradients on its stage and reduces them once per "
                       "step; accepted --zero 0 or 1 (default 1 with --pp)",
                       o->zero, o->pp);
    if (!o->set_zero) o->zero = 1;
    o->grad_accum = o->set_microbatches ? o->microbatches : o->pp;
    int interleaved = o->pp_schedule == 1;
    if (interleaved && o->vpp < 2)
      return zarg_fail("train", "--pp-schedule interleaved needs --vpp >= 2 (model chunks per "
                                "pipeline rank)");
    if (!interleaved && o->vpp > 1)
      return zarg_fail("train", "--vpp %d needs --pp-schedule interleaved", o->vpp);
    if (interleaved && o->grad_accum % o->pp)
      return zarg_fail("train",
                       "--microbatches %d with --pp-schedule interleaved: accepted a "
                       "multiple of --pp %d",
                       o->grad_accum, o->pp);
    int nu = zeroc_gpt_num_units(gc);
    if (nu < o->pp * o->vpp)
      return zarg_fail("train",
                       "--pp %d x --vpp %d = %d pipeline stages need as many units; the "
                       "model has %d (embedding, %d layers, head): use more --layers",
                       o->pp, o->vpp, o->pp * o->vpp, nu, gc->layers);
    if (o->print_schedule) return print_schedule(o, gc, o->dtype == 2 ? ZEROC_BF16 : ZEROC_FP32);
  }
  if (o->off_par != 0 && o->zero != 3)
    return zarg_fail("train", "--offload-params %s needs --zero 3 (got --zero %d)", OFFLOADS[o->off_par], o->zero);
  if ((o->off_opt == 2 || o->off_par == 2) && !o->nvme_dir)
    return zarg_fail("train", "--nvme-dir is required with nvme offload");
  if (o->nvme_dir) {
    struct stat sb;
    if (stat(o->nvme_dir, &sb))
      return zarg_fail("train", "--nvme-dir '%s': no such directory", o->nvme_dir);
    if (!S_ISDIR(sb.st_mode))
      return zarg_fail("train", "--nvme-dir '%s' is a %s, not a directory", o->nvme_dir,
                       S_ISREG(sb.st_mode) ? "file" : zeroc__file_kind(sb.st_mode));
    if (access(o->nvme_dir, W_OK))
      return zarg_fail("train", "--nvme-dir '%s': directory not writable", o->nvme_dir);
  }
  if (o->save_every && !o->save) return zarg_fail("train", "--save-every needs --save DIR");
  if (o->resume && o->init) return zarg_fail("train", "--resume and --init exclude each other");
  if (o->init && access(o->init, R_OK))
    return zarg_fail("train", "--init '%s': file not readable", o->init);
  if (o->resume && access(o->resume, R_OK))
    return zarg_fail("train", "--resume '%s': no such checkpoint directory", o->resume);
  return -1;
}

/* The trainer's config from the flags; what was not given stays "unset" and
 * the library picks its default. */
static void to_config(const opts_t *o, const zeroc_gpt_config_t *gc, zeroc_train_config_t *c) {
  c->model = o->model == 6 ? "tiny" : MODELS[o->model]; /* custom: every size is given */
  c->layers = gc->layers, c->hidden = gc->hidden, c->heads = gc->heads;
  c->vocab = gc->vocab, c->seq = gc->seq, c->batch = gc->batch;
  c->grad_accum = o->grad_accum;
  c->steps = o->steps;
  c->lr = o->lr;
  c->warmup = o->warmup;
  c->schedule = !o->set_schedule ? ZEROC_LR_DEFAULT : o->schedule ? ZEROC_LR_COSINE : ZEROC_LR_CONSTANT;
  c->weight_decay = o->weight_decay;
  c->clip = o->clip;
  c->beta1 = o->beta1, c->beta2 = o->beta2, c->eps = o->eps;
  c->seed = o->seed;
  c->max_skipped = o->max_skipped;
  c->zero = o->zero;
  c->param_dtype = o->dtype == 0 ? -1 : o->dtype == 1 ? ZEROC_FP32 : ZEROC_BF16;
  c->recompute = o->recompute;
  c->prefetch = o->prefetch;
  c->sequence_parallel = o->sequence_parallel;
  c->offload_optimizer = (zeroc_offload_t)o->off_opt;
  c->offload_params = (zeroc_offload_t)o->off_par;
  c->nvme_dir = o->nvme_dir;
  c->pp_schedule = o->pp_schedule == 1 ? ZEROC_PIPELINE_INTERLEAVED : ZEROC_PIPELINE_1F1B;
  c->vpp = o->vpp;
  c->data = o->data;
  c->shuffle = o->shuffle;
  c->init = o->init;
  c->resume = o->resume;
  c->save = o->save;
  c->save_every = o->save_every;
  c->export_path = o->export_path;
  c->spike_window = o->spike_window;
  c->spike_z = o->spike_z;
  c->reduce_maxima = o->metrics != NULL;
}

/* ---- printing ----------------------------------------------------------------------------- */

static void print_header(const opts_t *o, const zeroc_train_info_t *in, const zeroc_mesh_info_t *mesh) {
  const zeroc_gpt_config_t *g = &in->model;
  const zeroc_train_config_t *c = &in->config;
  const char *dev = in->device == ZEROC_DEVICE_CUDA ? "cuda" : "cpu";
  char b1[32];
  printf("zeroc train: %s (%d layers, hidden %d, %d heads, vocab %d, seq %d), %.2fM parameters\n",
         MODELS[o->model], g->layers, g->hidden, g->heads, g->vocab, g->seq, in->params / 1e6);
  char ppdesc[64] = "";
  if (c->vpp > 1) snprintf(ppdesc, sizeof ppdesc, ", %d chunks per rank", c->vpp);
  if (mesh->pp > 1)
    printf("  %d ranks on %s: pp %d (%s%s), ZeRO-%d, dp %d (%d x %d), tp %d%s, batch %d x %d "
           "micro-batches x dp %d = %d sequences (%.0f tokens) per step, %s%s\n",
           mesh->world, dev, mesh->pp, PP_SCHEDULES[o->pp_schedule], ppdesc, c->zero, mesh->dp,
           mesh->dp_replicate, mesh->dp_shard, mesh->tp,
           c->sequence_parallel ? " (sequence parallel)" : "", g->batch, c->grad_accum, mesh->dp,
           in->global_batch, in->tokens_per_step, zeroc_dtype_name(in->dtype),
           c->recompute ? ", recompute" : "");
  else
    printf("  %d ranks on %s: ZeRO-%d, dp %d (%d x %d), tp %d%s, batch %d x accum %d x dp %d = %d "
           "sequences (%.0f tokens) per step, %s, prefetch %d%s\n",
           mesh->world, dev, c->zero, mesh->dp, mesh->dp_replicate, mesh->dp_shard, mesh->tp,
           c->sequence_parallel ? " (sequence parallel)" : "", g->batch, c->grad_accum, mesh->dp,
           in->global_batch, in->tokens_per_step, zeroc_dtype_name(in->dtype), c->prefetch,
           c->recompute ? ", recompute" : "");
  if (in->data.kind == ZEROC_DATA_SYNTHETIC)
    printf("  data: synthetic Markov source, loss floor %.4f nats/token (its entropy rate)\n",
           in->data.loss_floor);
  else
    printf("  data: %s, %d files, %llu tokens, %llu steps per epoch%s\n", c->data,
           in->data.num_files, (unsigned long long)in->data.num_tokens,
           (unsigned long long)in->data.steps_per_epoch, c->shuffle ? ", shuffled" : "");
  if (in->predicted_device > 0)
    printf("  predicted peak device memory per rank %s\n",
           fmt_bytes(in->predicted_device, b1, sizeof b1));
  else
    printf("  no predicted peak device memory: the planner refused this layout (%s)\n",
           in->plan_error);
  fflush(stdout);
}

/* One --metrics line: the fields of shared/CLI.md and those added since. */
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
          zmetrics_num(m->grad_norm, jn, sizeof jn), m->tokens, m->step_ms, m->tokens_per_s,
          m->mfu, (unsigned long long)m->comm_bytes, m->exposed_comm_ms,
          (unsigned long long)m->peak_device, (unsigned long long)m->peak_host,
          in->predicted_device, in->predicted_host, m->skipped, m->skipped_total, zl, zn,
          zeroc_spike_name(m->spike), (long long)m->peak_device_max);
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
  fprintf(f, "}\n");
  fflush(f);
}

/* The progress line; `tty`: rewritten in place (\r). */
static void print_progress(const zeroc_train_metrics_t *m, const zeroc_train_info_t *in, int tty) {
  char b1[32], b2[32];
  int pipe = m->pipeline, spike = m->spike;
  printf("%sstep %5d/%d | loss %.4f | norm %.3f | %8.0f tok/s | %7.1f ms | comm %6.1f ms "
         "exposed | "
         "mem %s (pred %s)%s%s%s%s",
         tty ? "\r" : "", m->step, in->config.steps, m->loss, m->grad_norm, m->tokens_per_s,
         m->step_ms, m->exposed_comm_ms, fmt_bytes((double)m->peak_device, b1, sizeof b1),
         fmt_pred(in->predicted_device, b2, sizeof b2), m->skipped ? " | SKIPPED (non-finite)" : "",
         spike ? " | SPIKE " : "", spike ? zeroc_spike_name(m->spike) : "",
         pipe  ? ""
         : tty ? "   "
               : "\n");
  if (pipe) printf(" | bubble %4.1f%%%s", 100 * m->pp_bubble, tty ? "   " : "\n");
  if (in->peak_flops > 0) printf(" | MFU %.1f%%", m->mfu * 100);
  fflush(stdout);
}

/* The summary after the run; `ms`: step times (ms) of steps start..steps-1. */
static void print_summary(const opts_t *o, const zeroc_train_info_t *in, zeroc_ctx_t *ctx,
                          const double *ms, double t_total, double first_loss, double last_loss,
                          double last_norm, const zeroc_train_metrics_t *last) {
  const zeroc_train_config_t *c = &in->config;
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
  printf("; grad norm %.3f\n", last_norm);
  if (last->skipped_total || last->spikes_total)
    printf("      %d step(s) skipped (non-finite gradients), %d spike(s) reported (z > %g over %d steps)\n",
           last->skipped_total, last->spikes_total, c->spike_z, c->spike_window);
  printf("      median step %.1f ms, %.0f tokens/s; peak device memory %s per rank (predicted %s)\n",
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
static zeroc_result_t open_metrics(const opts_t *o, zeroc_ctx_t *ctx, int root, int start,
                                   FILE **metrics) {
  zeroc_result_t r;
  if (o->resume) {
    /* steps after the checkpoint that a crashed run recorded come again */
    r = root && o->metrics && zmetrics_truncate(o->metrics, (uint64_t)start) ? ZEROC_ERR_IO : ZEROC_OK;
    r = zeroc_ctx_agree(ctx, r);
    if (r != ZEROC_OK) return r;
    if (root && !o->quiet) printf("resumed from %s at step %d\n", o->resume, start);
  }
  r = ZEROC_OK;
  if (root && o->metrics) {
    *metrics = fopen(o->metrics, start ? "a" : "w");
    if (!*metrics)
      r = ZEROC_FAIL(ZEROC_ERR_IO, "--metrics '%s': cannot open for writing: %s", o->metrics,
                     strerror(errno));
  }
  return zeroc_ctx_agree(ctx, r);
}

int zeroc_cmd_train(int argc, char **argv) { return zeroc_train_run(argc, argv, NULL, NULL); }

int zeroc_train_run(int argc, char **argv, zeroc_train_step_fn on_step, void *user) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
  /* -1 / 0: unset, the trainer's default; the layout flags' defaults are needed
   * by the checks that run before MPI starts */
  opts_t o = {0};
  o.steps = o.max_skipped = -1;
  o.lr = o.clip = o.beta1 = o.beta2 = o.eps = o.spike_z = -1;
  o.seed = -1;
  o.schedule = 1;
  o.zero = 3;
  o.hsdp = o.tp = o.pp = o.vpp = o.grad_accum = 1;
  o.prefetch = 2;
  o.comm_timeout = 0; /* unset: the context takes ZEROC_COMM_TIMEOUT, else 300 */
  if (parse(argc, argv, &o)) return 2;
  zeroc_gpt_config_t gc;
  int rc = check_flags(&o, &gc);
  if (rc >= 0) return rc;

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
  int root = mesh->rank == 0;
  if (o.print_topology) zeroc_ctx_print_topology(ctx, stdout);

  /* ---- the trainer: outputs, data, model, starting point ------------------------------- */
  zeroc_train_config_t tc = ZEROC_TRAIN_CONFIG_INIT;
  to_config(&o, &gc, &tc);
  zeroc_trainer_t *tr = NULL;
  zeroc_train_info_t in;
  FILE *metrics = NULL;
  double *times = NULL;
  rc = 1;
  int agreed = 1; /* agreed: every rank knows about a failure */
  const char *stage_msg = "config";
  r = zeroc_trainer_create(ctx, &tc, &tr);
  stage_msg = zeroc_trainer_create_phase();
  if (r != ZEROC_OK) goto fail;
  stage_msg = "start";
  zeroc_trainer_info(tr, &in);
  int start = in.start_step, steps = in.config.steps;
  r = open_metrics(&o, ctx, root, start, &metrics);
  if (r != ZEROC_OK) goto fail;
  times = calloc((size_t)steps + 1, sizeof(double));
  r = times ? ZEROC_OK : ZEROC_FAIL(ZEROC_ERR_NOMEM, "out of host memory for %d step times", steps + 1);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) goto fail;
  if (root && !o.quiet) print_header(&o, &in, mesh);

  /* ---- the loop --------------------------------------------------------------------- */
  stage_msg = "train";
  agreed = 0; /* from here a failure may be one rank's alone */
  int tty = progress_tty(), every = steps >= 20 ? steps / 20 : 1;
  double first_loss = NAN, last_loss = NAN, last_norm = 0;
  zeroc_train_metrics_t m;
  memset(&m, 0, sizeof m);
  double t_run = now_s();
  for (int s = start; s < steps; s++) {
    r = zeroc_trainer_step(tr, &m);
    /* too many skipped steps: this step's figures are still reported, then stop */
    int numeric_stop = r == ZEROC_ERR_NUMERIC;
    if (r && !numeric_stop) goto fail;
    times[s] = m.step_ms;
    if (s == start) first_loss = m.loss;
    last_loss = m.loss;
    last_norm = m.grad_norm;
    if (root && metrics) write_metrics(metrics, &m, &in);
    if (root && m.spike && o.quiet) {
      char zl[32] = "null", zn[32] = "null";
      if (isfinite(m.loss_z)) snprintf(zl, sizeof zl, "%.3f", m.loss_z);
      if (isfinite(m.grad_norm_z)) snprintf(zn, sizeof zn, "%.3f", m.grad_norm_z);
      fprintf(stderr, "zeroc train: step %d: %s spike (loss %.4f z %s, grad norm %.3f z %s, window %d)\n",
              s + 1, zeroc_spike_name(m.spike), m.loss, zl, m.grad_norm, zn, in.config.spike_window);
    }
    if (root && !o.quiet &&
        (tty || s == start || s == steps - 1 || (s + 1) % every == 0 || m.skipped || m.spike))
      print_progress(&m, &in, tty);
    if (on_step) on_step(user, &m);
    if (numeric_stop) goto fail; /* r kept: ZEROC_ERR_NUMERIC */
  }
  double t_total = now_s() - t_run;
  if (root && tty && !o.quiet) printf("\n");

  /* ---- the end ------------------------------------------------------------------------ */
  if (o.save) {
    r = zeroc_trainer_save(tr, o.save);
    if (r) goto fail;
  }
  if (o.export_path) {
    r = zeroc_trainer_export(tr, o.export_path);
    if (r) {
      agreed = 1; /* the export agrees internally */
      export_fallback(tr, ctx, &o, root);
      goto fail;
    }
  }
  if (root && !o.quiet && steps > start)
    print_summary(&o, &in, ctx, times + start, t_total, first_loss, last_loss, last_norm, &m);
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
  return rc;
}
