/*
 * apps/train_flags.c - the flags of `zeroc train`: the table, the checks that
 * run before MPI starts (one line, exit 2, nothing written), --print-schedule,
 * and the trainer's config made from the flags (see train_flags.h). The rules
 * are the library's, checked by its zeroc_train_config_resolve with the flags'
 * names, and so is the schedule printed (zeroc_train_print_schedule): the
 * command links the public API only.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/train_flags.h"
#include "zeroc/zeroc.h"

/* shared with zeroc plan and bench (apps/args.c) */
#define DEVICES         zarg_devices
#define MODELS          zarg_models
#define DTYPES          zarg_dtypes
#define RECOMPUTES      zarg_recomputes
#define OFFLOADS        zarg_offloads
#define SCHEDULES       ztrain_schedules
#define PP_SCHEDULES    ztrain_pp_schedules
#define ZTRAIN_CP_MODES ztrain_cp_modes

const char *const ztrain_schedules[] = {"constant", "cosine", "linear", NULL};
const char *const ztrain_pp_schedules[] = {"1f1b", "interleaved", NULL};
const char *const ztrain_cp_modes[] = {"ring", "ulysses", NULL};

void ztrain_opts_init(ztrain_opts_t *o) {
  /* ZEROC_UNSET (or 0 where 0 is the default): the library's default; the mesh's
   * sizes, which the checks before MPI starts lay out */
  memset(o, 0, sizeof *o);
  o->steps = o->max_skipped = ZEROC_UNSET;
  o->lr = o->clip = o->beta1 = o->beta2 = o->eps = o->spike_z = ZEROC_UNSET;
  o->seed = ZEROC_UNSET;
  o->schedule = 1;
  /* the library's defaults (zeroc_train_config_resolve), unless given */
  o->zero = o->prefetch = o->vpp = o->grad_accum = o->spike_window = ZEROC_UNSET;
  o->val_tokens = ZEROC_UNSET;
  o->hsdp = o->tp = o->pp = o->cp = 1;
  o->sample_tokens = 64;
  o->comm_timeout = 0; /* unset: the context takes ZEROC_COMM_TIMEOUT, else 300 */
}

void ztrain_usage(void) {
  printf(
      "usage: mpirun -np N zeroc train [flags]   (a plain `zeroc train` is one rank)\n"
      "model:   --model tiny|small|gpt2-124m|gpt2-350m|gpt2-774m|gpt2-1558m|custom (tiny)\n"
      "         --layers --hidden --heads --vocab --seq  override the model's shape\n"
      "         --model llama-tiny|qwen-tiny|llama3.2-1b|llama3.1-8b|qwen2.5-0.5b|qwen2.5-7b:\n"
      "         the Llama family (RMSNorm, RoPE, SwiGLU, grouped-query attention), and\n"
      "         --kv-heads N --ffn F  override its kv heads and MLP width\n"
      "         --model dlrm|dlrm-tiny|dlrm-mlperf: DLRM (zeroc train --model dlrm --help)\n"
      "batch:   --batch B (micro-batch per dp rank), --grad-accum A; global batch B x A x dp\n"
      "optim:   --steps (100) --lr (3e-4) --warmup (0) --schedule constant|cosine|linear (cosine)\n"
      "         --weight-decay (0) --clip (1, 0 = off) --beta1 (0.9) --beta2 (0.95) --eps (1e-8)\n"
      "         --dropout P (0): attention, residual and embedding dropout, seeded by --seed\n"
      "layout:  --zero 0|1|2|3 (3; 1 with --pp) --hsdp R (1) --tp (1) --prefetch K (2)\n"
      "         --cp N (1): context parallelism, each sequence split over N ranks\n"
      "         --cp-mode ring|ulysses (ring); the world is tp x cp x pp x dp\n"
      "         --recompute none|full --dtype fp32|bf16 --device cpu|cuda\n"
      "         --grad-reduce-dtype fp32|bf16 (fp32): the dtype gradients are summed over\n"
      "         data-parallel ranks in (bf16 halves that traffic; its error grows with ranks)\n"
      "         --deterministic: bitwise-repeatable kernels (cuda: cuDNN attention's\n"
      "         deterministic backward, workspace sized automatically; default the fast one)\n"
      "         --offload-optimizer none|cpu|nvme --offload-params none|cpu|nvme --nvme-dir DIR\n"
      "pipeline: --pp P (1) --pp-schedule 1f1b|interleaved (1f1b) --vpp V (1, chunks per rank)\n"
      "         --microbatches M (P; replaces --grad-accum) --print-schedule (print, then exit)\n"
      "data:    --data synthetic|PATH|GLOB (synthetic) --shuffle --seed S (1)\n"
      "eval:    --val-data synthetic|PATH|GLOB --val-every N (0 = off; not given: after\n"
      "         the last step only) --val-tokens T (65536, rounded up to whole global batches)\n"
      "state:   --save DIR --save-every N --resume DIR --export F.safetensors --init "
      "F.safetensors\n"
      "         --export DIR, --init DIR: a transformers save_pretrained directory (config.json\n"
      "         + model.safetensors, or shards + index; GPT-2, Llama, Qwen2; --init DIR takes\n"
      "         the model and shape from it)\n"
      "         --save-limit N (all): keep the newest N checkpoints in --save DIR\n"
      "output:  --metrics FILE (JSON lines) --quiet --print-topology\n"
      "sample:  --sample-every N (0 = off) --sample-tokens M (64) --tokenizer bytes|FILE (the "
      "data's)\n"
      "         --sample-prompt TEXT (the end-of-text token, else the data's first tokens)\n"
      "other:   --comm-timeout SECONDS (ZEROC_COMM_TIMEOUT or 300) --max-skipped N (5)\n"
      "         --spike-window N (50) --spike-z Z (6): report loss / grad-norm spikes\n"
      "docs/cli.md says which flags, outputs and exit codes are stable.\n");
}

int ztrain_parse(int argc, char **argv, ztrain_opts_t *o) {
  const zarg_t args[] = {
      {"--device", ARG_CHOICE, &o->device, 0, 0, 0, DEVICES, NULL},
      {"--model", ARG_CHOICE, &o->model, 0, 0, 0, MODELS, &o->set_model},
      {"--layers", ARG_INT, &o->layers, ZARG_LIM_LAYERS, 0, NULL, &o->set_layers},
      {"--hidden", ARG_INT, &o->hidden, ZARG_LIM_HIDDEN, 0, NULL, &o->set_hidden},
      {"--heads", ARG_INT, &o->heads, ZARG_LIM_HEADS, 0, NULL, &o->set_heads},
      {"--kv-heads", ARG_INT, &o->kv_heads, ZARG_LIM_KV_HEADS, 0, NULL, &o->set_kv_heads},
      {"--ffn", ARG_INT, &o->ffn, ZARG_LIM_FFN, 0, NULL, &o->set_ffn},
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
      {"--dropout", ARG_DOUBLE, &o->dropout, 0, 0.999999, 0, NULL, NULL},
      {"--zero", ARG_INT, &o->zero, ZARG_LIM_ZERO, 0, NULL, &o->set_zero},
      {"--hsdp", ARG_INT, &o->hsdp, ZARG_LIM_HSDP, 0, NULL, NULL},
      {"--tp", ARG_INT, &o->tp, ZARG_LIM_TP, 0, NULL, NULL},
      {"--cp", ARG_INT, &o->cp, ZARG_LIM_TP, 0, NULL, NULL},
      {"--cp-mode", ARG_CHOICE, &o->cp_mode, 0, 0, 0, ZTRAIN_CP_MODES, &o->set_cp_mode},
      {"--pp", ARG_INT, &o->pp, ZARG_LIM_PP, 0, NULL, NULL},
      {"--pp-schedule", ARG_CHOICE, &o->pp_schedule, 0, 0, 0, PP_SCHEDULES, &o->set_pp_schedule},
      {"--vpp", ARG_INT, &o->vpp, ZARG_LIM_VPP, 0, NULL, &o->set_vpp},
      {"--microbatches", ARG_INT, &o->microbatches, ZARG_LIM_MICROBATCHES, 0, NULL,
       &o->set_microbatches},
      {"--dtype", ARG_CHOICE, &o->dtype, 0, 0, 0, DTYPES, NULL},
      {"--grad-reduce-dtype", ARG_CHOICE, &o->grad_reduce, 0, 0, 0, zarg_grad_reduce_dtypes, NULL},
      {"--recompute", ARG_CHOICE, &o->recompute, 0, 0, 0, RECOMPUTES, NULL},
      {"--prefetch", ARG_INT, &o->prefetch, ZARG_LIM_PREFETCH, 0, NULL, NULL},
      {"--offload-optimizer", ARG_CHOICE, &o->off_opt, 0, 0, 0, OFFLOADS, NULL},
      {"--offload-params", ARG_CHOICE, &o->off_par, 0, 0, 0, OFFLOADS, NULL},
      {"--nvme-dir", ARG_STRING, &o->nvme_dir, 0, 0, 0, NULL, NULL},
      {"--data", ARG_STRING, &o->data, 0, 0, 0, NULL, NULL},
      {"--shuffle", ARG_SWITCH, &o->shuffle, 0, 0, 0, NULL, NULL},
      {"--deterministic", ARG_SWITCH, &o->deterministic, 0, 0, 0, NULL, NULL},
      {"--val-data", ARG_STRING, &o->val_data, 0, 0, 0, NULL, NULL},
      {"--val-every", ARG_INT, &o->val_every, 0, 1e9, 0, NULL, &o->set_val_every},
      {"--val-tokens", ARG_I64, &o->val_tokens, 1, ZEROC_VAL_TOKENS_MAX, 0, NULL, NULL},
      {"--save", ARG_STRING, &o->save, 0, 0, 0, NULL, NULL},
      {"--save-every", ARG_INT, &o->save_every, 1, 1e9, 0, NULL, NULL},
      {"--save-limit", ARG_INT, &o->save_limit, 1, 1e9, 0, NULL, NULL},
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
      {"--sample-every", ARG_INT, &o->sample_every, 0, 1e9, 0, NULL, NULL},
      {"--sample-tokens", ARG_INT, &o->sample_tokens, 1, 1 << 20, 0, NULL, &o->set_sample_tokens},
      {"--tokenizer", ARG_STRING, &o->tokenizer, 0, 0, 0, NULL, NULL},
      {"--sample-prompt", ARG_STRING, &o->sample_prompt, 0, 0, 0, NULL, NULL},
  };
  return zarg_parse("train", argc, argv, args, (int)(sizeof args / sizeof args[0]));
}

int zeroc_train_check_flags(int argc, char **argv) {
  ztrain_opts_t o;
  ztrain_opts_init(&o);
  return ztrain_parse(argc, argv, &o);
}

/* ---- the flags: what can be checked before MPI starts ------------------------------------ */

/* A broken rule's message. */
static int rule_fail(void) {
  return zarg_fail("train", "%s", zarg_user_msg(zeroc_last_error(NULL)));
}

/* The flags that only make sense with (or without) a pipeline. */
static int check_pipeline_flags(ztrain_opts_t *o) {
  if (o->pp == 1) {
    if (o->print_schedule) return zarg_fail("train", "--print-schedule needs --pp > 1");
    if (o->set_microbatches)
      return zarg_fail("train", "--microbatches is for --pp > 1; use --grad-accum");
    if (o->set_vpp || o->set_pp_schedule)
      return zarg_fail("train", "--%s is for --pp > 1", o->set_vpp ? "vpp" : "pp-schedule");
    return 0;
  }
  /* with a pipeline the micro-batches play the role of gradient accumulation */
  if (o->set_grad_accum)
    return zarg_fail("train",
                     "--grad-accum with --pp %d: use --microbatches (micro-batches per "
                     "step through the pipeline)",
                     o->pp);
  o->grad_accum = o->set_microbatches ? o->microbatches : ZEROC_UNSET; /* unset: pp */
  return 0;
}

/* What the library cannot check for the command: the files and the sampling flags. */
static int check_files(const ztrain_opts_t *o) {
  if (o->nvme_dir) {
    struct stat sb;
    if (stat(o->nvme_dir, &sb))
      return zarg_fail("train", "--nvme-dir '%s': no such directory", o->nvme_dir);
    if (!S_ISDIR(sb.st_mode))
      return zarg_fail("train", "--nvme-dir '%s' is a %s, not a directory", o->nvme_dir,
                       S_ISREG(sb.st_mode) ? "file" : zarg_file_kind(sb.st_mode));
    if (access(o->nvme_dir, W_OK))
      return zarg_fail("train", "--nvme-dir '%s': directory not writable", o->nvme_dir);
  }
  /* without --tokenizer the data set's (zeroc data records one) is taken once it is open */
  if (o->sample_prompt && !o->sample_every)
    return zarg_fail("train", "--sample-prompt needs --sample-every N (N >= 1)");
  if (o->set_sample_tokens && !o->sample_every)
    return zarg_fail("train", "--sample-tokens needs --sample-every N (N >= 1)");
  if (o->set_cp_mode && o->cp < 2)
    return zarg_fail("train",
                     "--cp-mode needs --cp N (N >= 2): with --cp %d there is no context "
                     "parallelism to run in that mode",
                     o->cp);
  if (o->sample_every && !o->tokenizer && (!o->data || !strcmp(o->data, "synthetic")))
    return zarg_fail("train",
                     "--sample-every needs a tokenizer to print text: --tokenizer bytes|FILE");
  if (o->init && access(o->init, R_OK))
    return zarg_fail("train", "--init '%s': file not readable", o->init);
  if (o->resume && access(o->resume, R_OK))
    return zarg_fail("train", "--resume '%s': no such checkpoint directory", o->resume);
  return 0;
}

/* One line and exit 2, nothing written; or --print-schedule's output. Returns
 * -1 to go on training, else the exit status. The library's own resolution
 * (zeroc_train_config_resolve, with the flags' names) on the layout the flags
 * ask for: every rule the trainer checks, checked here once before MPI starts. */
int ztrain_check(ztrain_opts_t *o, zeroc_gpt_config_t *gc, zeroc_train_config_t *tc) {
  const int size[5] = {o->layers, o->hidden, o->heads, o->vocab, o->seq};
  const int set[5] = {o->set_layers, o->set_hidden, o->set_heads, o->set_vocab, o->set_seq};
  if (zarg_model_shape("train", o->model, size, set, gc)) return 2;
  if (o->set_batch) gc->batch = o->batch;
  if (check_pipeline_flags(o)) return 2;
  ztrain_config(o, gc, tc);
  /* the smallest world of this layout: one data-parallel shard per replica */
  zeroc_mesh_info_t mesh;
  if (zeroc_mesh_layout_cp(o->tp * o->cp * o->pp * o->hsdp, o->tp, o->cp, o->pp, o->hsdp, 0, &mesh))
    return rule_fail();
  zeroc_train_info_t info;
  zeroc_device_kind_t dev = o->device == 2 ? ZEROC_DEVICE_CUDA : ZEROC_DEVICE_CPU;
  if (zeroc_train_config_resolve(tc, &mesh, dev, ZEROC_NAMES_FLAGS, &info)) return rule_fail();
  if (o->print_schedule) {
    if (!zarg_launch_rank0()) return 0;
    zeroc_dtype_t dt = o->dtype == 2 ? ZEROC_BF16 : ZEROC_FP32;
    zeroc_result_t r = zeroc_train_print_schedule(stdout, &info, o->pp, o->tp, dt);
    if (r) fprintf(stderr, "zeroc train: %s\n", zeroc_last_error(NULL));
    return r ? 1 : 0;
  }
  return check_files(o) ? 2 : -1;
}

/* The trainer's config from the flags; what was not given stays "unset" and
 * the library picks its default. */
void ztrain_config(const ztrain_opts_t *o, const zeroc_gpt_config_t *gc, zeroc_train_config_t *c) {
  c->model = MODELS[o->model]; /* custom: every size is given (zarg_model_shape) */
  c->layers = gc->layers, c->hidden = gc->hidden, c->heads = gc->heads;
  c->vocab = gc->vocab, c->seq = gc->seq, c->batch = gc->batch;
  struct stat st;
  if (o->init && !stat(o->init, &st) && S_ISDIR(st.st_mode)) {
    /* a transformers directory: its config.json gives the model and the shape;
     * only what was given by flag goes with it (and must agree) */
    c->model = o->set_model ? MODELS[o->model] : NULL;
    c->layers = o->set_layers ? o->layers : ZEROC_UNSET;
    c->hidden = o->set_hidden ? o->hidden : ZEROC_UNSET;
    c->heads = o->set_heads ? o->heads : ZEROC_UNSET;
    c->vocab = o->set_vocab ? o->vocab : ZEROC_UNSET;
    c->seq = o->set_seq ? o->seq : ZEROC_UNSET;
    c->batch = o->set_batch ? o->batch : ZEROC_UNSET;
  }
  c->kv_heads = o->set_kv_heads ? o->kv_heads : ZEROC_UNSET;
  c->ffn = o->set_ffn ? o->ffn : ZEROC_UNSET;
  c->grad_accum = o->grad_accum;
  c->steps = o->steps;
  c->lr = o->lr;
  c->warmup = o->warmup;
  /* the choices' order: constant, cosine, linear */
  c->schedule = !o->set_schedule   ? ZEROC_LR_DEFAULT
                : o->schedule == 2 ? ZEROC_LR_LINEAR
                : o->schedule      ? ZEROC_LR_COSINE
                                   : ZEROC_LR_CONSTANT;
  c->weight_decay = o->weight_decay;
  c->clip = o->clip;
  c->beta1 = o->beta1, c->beta2 = o->beta2, c->eps = o->eps;
  c->seed = o->seed;
  c->max_skipped = o->max_skipped;
  c->zero = o->zero;
  c->param_dtype = o->dtype == 0 ? ZEROC_UNSET : o->dtype == 1 ? ZEROC_FP32 : ZEROC_BF16;
  c->grad_reduce_dtype = o->grad_reduce ? ZEROC_BF16 : ZEROC_FP32;
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
  c->deterministic = o->deterministic;
  c->val_data = o->val_data;
  /* --val-data alone: one evaluation, after the last step (a cadence no run reaches) */
  c->val_every = o->set_val_every || !o->val_data ? o->val_every : INT_MAX;
  c->val_tokens = o->val_tokens;
  c->init = o->init;
  c->resume = o->resume;
  c->save = o->save;
  c->save_every = o->save_every;
  c->save_limit = o->save_limit; /* 0 (not given): ZEROC's default, keep all */
  c->export_path = o->export_path;
  c->spike_window = o->spike_window;
  c->spike_z = o->spike_z;
  c->dropout = o->dropout;
  c->cp_mode = o->cp_mode == 1 ? ZEROC_CP_MODE_ULYSSES : ZEROC_CP_MODE_RING;
  c->reduce_maxima = o->metrics != NULL;
}
