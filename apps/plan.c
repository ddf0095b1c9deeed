/*
 * apps/plan.c - `zeroc plan`: what fits. Parses the flags (every bad value is
 * one line on stderr naming the flag, exit 2, nothing on stdout), asks the
 * planner (zeroc/plan.h) and prints a table or one JSON object.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "zeroc/plan.h"

#define GIB 1073741824.0

typedef struct opts {
  zeroc_plan_config_t cfg;
  const char *model;
  int layers, hidden, heads, vocab, seq, batch; /* -1: the model's */
  int zero_set, tp_set, pp_set, hsdp_set, mb_set, vpp_set, cp_set, cp_mode_set;
  int all, json, top;
  int64_t global_batch; /* --all: 0 is batch x gpus */
} opts_t;

static const char *recompute_name(zeroc_recompute_t r) {
  return r == ZEROC_RECOMPUTE_FULL ? "full" : "none";
}
static const char *offload_name(zeroc_offload_t o) {
  return o == ZEROC_OFFLOAD_CPU ? "cpu" : o == ZEROC_OFFLOAD_NVME ? "nvme" : "none";
}
static const char *dtype_name(int bytes) { return bytes == 4 ? "fp32" : "bf16"; }
static const char *cp_mode_name(zeroc_cp_mode_t m) {
  return m == ZEROC_CP_MODE_ULYSSES ? "ulysses" : "ring";
}
static const char *act_model_name(zeroc_act_model_t a) {
  return a == ZEROC_ACT_MEGATRON ? "megatron" : "zeroc";
}

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: zeroc plan [flags]\n"
      "  Parameters, FLOPs per step and per token (Megatron's formula), per-rank memory\n"
      "  (parameters, gradients, optimizer, activations, buffers, workspace) and an estimated\n"
      "  step time for one layout, or every layout that fits with --all. No MPI, no GPU.\n"
      "model (as zeroc train):\n"
      "  --model NAME          tiny, small, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m, custom\n"
      "                        (custom starts from gpt2-124m's shape; default tiny)\n"
      "  --layers --hidden --heads --vocab --seq N   override the model's shape\n"
      "  --batch N             micro-batch per data-parallel rank (default: the model's)\n"
      "layout:\n"
      "  --gpus N              world size (default 1); dp = gpus / (tp x pp x cp)\n"
      "  --zero 0|1|2|3        ZeRO stage (default 3; 1 with --pp > 1)\n"
      "  --tp N, --pp N        tensor- and pipeline-parallel sizes (default 1)\n"
      "  --hsdp R              replicas; shards span dp / R x cp ranks (default 1)\n"
      "  --cp N                context-parallel size: each rank holds T / N tokens of every\n"
      "                        sequence (default 1; with --all: the largest tried, default gpus)\n"
      "  --cp-mode ring|ulysses  K/V passed around a ring, or all-to-all to head-split\n"
      "                        (default ring; --all tries both unless given)\n"
      "  --microbatches M      micro-batches per step (default pp)\n"
      "  --vpp V               model chunks per pipeline rank: interleaved schedule when > 1\n"
      "                        (default 1: 1F1B; --all plans 1F1B)\n"
      "  --dtype auto|fp32|bf16  parameter, gradient and activation type (default auto:\n"
      "                        bf16, what zeroc train picks on cuda)\n"
      "  --grad-reduce-dtype fp32|bf16  the dtype gradients are reduced in (default fp32,\n"
      "                        zeroc train's default; bf16 halves the reduce-scatter bytes)\n"
      "  --recompute none|full activation recompute (default none)\n"
      "  --sequence-parallel   split LayerNorm/residual activations over tp too\n"
      "  --offload-optimizer none|cpu|nvme   master + Adam state off the GPU\n"
      "  --offload-params none|cpu|nvme      the parameter shard off the GPU (ZeRO-3)\n"
      "  --prefetch K          ZeRO-3 gathers in flight (default 2)\n"
      "  --act-model zeroc|megatron   activation estimate (default zeroc)\n"
      "  --attention cudnn|flash|naive  cudnn (default, what zeroc train runs where\n"
      "                        libcudnn.so.9 loads): cuDNN's flash attention and its workspace;\n"
      "                        flash: zeroc's own kernels; both keep no (B,NH,T,T) scores\n"
      "  --deterministic       bitwise-repeatable kernels, as zeroc train's: cuDNN's\n"
      "                        deterministic attention backward and its B x NH x T x T x 2 bytes\n"
      "cluster:\n"
      "  --gpu-mem GIB         memory per GPU (default 80)\n"
      "  --gpus-per-node N     (default 8)\n"
      "  --peak-tflops X       bf16 dense peak per GPU (default 989)\n"
      "  --mfu X               achieved fraction of peak (default 0.5)\n"
      "  --bw-intra GBS, --bw-inter GBS   per-GPU link bandwidth (default 300, 25)\n"
      "  --lat-intra US, --lat-inter US   latency per ring step (default 10, 20)\n"
      "  --bw-pcie GBS, --bw-nvme GBS     offload bandwidth per GPU (default 25, 3)\n"
      "  --workspace-mib M     fixed per-rank workspace (default: zeroc's cuda kernels, 192 MiB)\n"
      "output:\n"
      "  --all                 every layout of --gpus that fits, fastest first\n"
      "  --global-batch G      --all: sequences per step (default batch x gpus)\n"
      "  --top K               --all: rows shown (default 20, 0 all)\n"
      "  --json                one JSON object on stdout\n");
}

/* ---- parsing ------------------------------------------------------------------- */

static int bad(const char *flag, const char *v, const char *accepted) {
  fprintf(stderr, "zeroc plan: %s '%s': accepted %s\n", flag, v, accepted);
  return 2;
}

static int get_int(const char *flag, const char *v, long lo, long hi, int *out) {
  char *end, acc[96];
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    snprintf(acc, sizeof acc, "an integer %ld..%ld", lo, hi);
    return bad(flag, v, acc);
  }
  *out = (int)x;
  return 0;
}

static int get_int64(const char *flag, const char *v, long long lo, long long hi, int64_t *out) {
  char *end, acc[96];
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    snprintf(acc, sizeof acc, "an integer %lld..%lld", lo, hi);
    return bad(flag, v, acc);
  }
  *out = x;
  return 0;
}

/* A number in (lo, hi] when lo_open, else [lo, hi]. */
static int get_double(const char *flag, const char *v, double lo, int lo_open, double hi,
                      double *out) {
  char *end, acc[96];
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
    snprintf(acc, sizeof acc, "a number %s%g..%g", lo_open ? "> " : "", lo, hi);
    return bad(flag, v, acc);
  }
  *out = x;
  return 0;
}

/* Flags that take no value. */
static int is_switch(const char *f) {
  return !strcmp(f, "--all") || !strcmp(f, "--json") || !strcmp(f, "--sequence-parallel") ||
         !strcmp(f, "--deterministic");
}

/* Names of the choice flags' values, in the order of their enums; those
 * zeroc train has too are train's (apps/args.c). */
static const char *const act_models[] = {"zeroc", "megatron", NULL};
static const char *const attentions[] = {"naive", "flash", "cudnn", NULL}; /* zeroc_attention_t */
static const char *const cp_modes[] = {"ring", "ulysses",
                                       NULL}; /* ZEROC_CP_MODE_RING, ZEROC_CP_MODE_ULYSSES */

/* "a, b, c" */
static const char *choices_text(const char *const *names, char *buf, size_t n) {
  buf[0] = 0;
  for (int k = 0; names[k]; k++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", k ? ", " : "", names[k]);
  return buf;
}

static int parse(int argc, char **argv, opts_t *o) {
  zeroc_plan_config_t *c = &o->cfg;
  int model = 0, dtype = 0, grad_reduce = 0, recompute = 0, off_opt = 0, off_par = 0, act_model = 0,
      attention = ZEROC_ATTENTION_CUDNN, cp_mode = 0;
  /* Numeric flags: int (i), int64 (l) or number (d) in [lo, hi], (lo, hi] when lo_open;
   * those zeroc train has too take train's limits (ZARG_LIM_*). */
  const struct num {
    const char *name;
    int *i;
    int64_t *l;
    double *d;
    double lo, hi;
    int lo_open;
    int *set;
  } nums[] = {
      {"--layers", &o->layers, NULL, NULL, ZARG_LIM_LAYERS, 0, NULL},
      {"--hidden", &o->hidden, NULL, NULL, ZARG_LIM_HIDDEN, 0, NULL},
      {"--heads", &o->heads, NULL, NULL, ZARG_LIM_HEADS, 0, NULL},
      {"--vocab", &o->vocab, NULL, NULL, ZARG_LIM_VOCAB, 0, NULL},
      {"--seq", &o->seq, NULL, NULL, ZARG_LIM_SEQ, 0, NULL},
      {"--batch", &o->batch, NULL, NULL, ZARG_LIM_BATCH, 0, NULL},
      {"--gpus", &c->gpus, NULL, NULL, 1, 1 << 24, 0, NULL},
      {"--zero", &c->zero, NULL, NULL, ZARG_LIM_ZERO, 0, &o->zero_set},
      {"--tp", &c->tp, NULL, NULL, ZARG_LIM_TP, 0, &o->tp_set},
      {"--pp", &c->pp, NULL, NULL, ZARG_LIM_PP, 0, &o->pp_set},
      {"--hsdp", &c->hsdp, NULL, NULL, ZARG_LIM_HSDP, 0, &o->hsdp_set},
      {"--microbatches", &c->microbatches, NULL, NULL, ZARG_LIM_MICROBATCHES, 0, &o->mb_set},
      {"--vpp", &c->vpp, NULL, NULL, ZARG_LIM_VPP, 0, &o->vpp_set},
      {"--cp", &c->cp, NULL, NULL, 1, 4096, 0, &o->cp_set},
      {"--prefetch", &c->prefetch, NULL, NULL, ZARG_LIM_PREFETCH, 0, NULL},
      {"--gpus-per-node", &c->gpus_per_node, NULL, NULL, 1, 1 << 16, 0, NULL},
      {"--top", &o->top, NULL, NULL, 0, 1 << 20, 0, NULL},
      {"--global-batch", NULL, &o->global_batch, NULL, 1, 1 << 24, 0, NULL},
      {"--gpu-mem", NULL, NULL, &c->gpu_mem_gib, 0, 1e6, 1, NULL},
      {"--workspace-mib", NULL, NULL, &c->workspace_mib, 0, 1e7, 0, NULL},
      {"--peak-tflops", NULL, NULL, &c->peak_tflops, 0, 1e6, 1, NULL},
      {"--mfu", NULL, NULL, &c->mfu, 0, 1, 1, NULL},
      {"--bw-intra", NULL, NULL, &c->bw_intra_gbs, 0, 1e6, 1, NULL},
      {"--bw-inter", NULL, NULL, &c->bw_inter_gbs, 0, 1e6, 1, NULL},
      {"--lat-intra", NULL, NULL, &c->lat_intra_us, 0, 1e6, 0, NULL},
      {"--lat-inter", NULL, NULL, &c->lat_inter_us, 0, 1e6, 0, NULL},
      {"--bw-pcie", NULL, NULL, &c->bw_pcie_gbs, 0, 1e6, 1, NULL},
      {"--bw-nvme", NULL, NULL, &c->bw_nvme_gbs, 0, 1e6, 1, NULL},
  };
  const struct choice {
    const char *name;
    const char *const *names;
    int *index;
  } choices[] = {
      {"--model", zarg_models, &model},
      {"--dtype", zarg_dtypes, &dtype},
      {"--grad-reduce-dtype", zarg_grad_reduce_dtypes, &grad_reduce},
      {"--recompute", zarg_recomputes, &recompute},
      {"--offload-optimizer", zarg_offloads, &off_opt},
      {"--offload-params", zarg_offloads, &off_par},
      {"--act-model", act_models, &act_model},
      {"--attention", attentions, &attention},
      {"--cp-mode", cp_modes, &cp_mode},
  };
  for (int i = 0; i < argc; i++) {
    char flag[64], acc[160];
    const char *a = argv[i], *v = NULL, *eq = strchr(a, '=');
    if (strncmp(a, "--", 2) || strlen(a) >= sizeof flag) {
      fprintf(stderr, "zeroc plan: unexpected argument '%s'; zeroc plan --help lists the flags\n",
              a);
      return 2;
    }
    snprintf(flag, sizeof flag, "%s", a);
    if (eq) { /* --flag=value */
      flag[eq - a] = 0;
      v = eq + 1;
    }
    const char *f = flag;
    if (is_switch(f)) {
      if (v) return bad(f, v, "no value");
      if (!strcmp(f, "--all"))
        o->all = 1;
      else if (!strcmp(f, "--json"))
        o->json = 1;
      else if (!strcmp(f, "--deterministic"))
        c->deterministic = 1;
      else
        c->sequence_parallel = 1;
      continue;
    }
    if (!v) {
      if (i + 1 >= argc) {
        fprintf(stderr, "zeroc plan: %s needs a value; zeroc plan --help lists the flags\n", f);
        return 2;
      }
      v = argv[++i];
    }
    int done = 0, rc = 0;
    for (size_t k = 0; !done && k < sizeof nums / sizeof nums[0]; k++) {
      const struct num *n = &nums[k];
      if (strcmp(f, n->name)) continue;
      if (n->i)
        rc = get_int(f, v, (long)n->lo, (long)n->hi, n->i);
      else if (n->l)
        rc = get_int64(f, v, (long long)n->lo, (long long)n->hi, n->l);
      else
        rc = get_double(f, v, n->lo, n->lo_open, n->hi, n->d);
      if (n->set) *n->set = 1;
      done = 1;
    }
    for (size_t k = 0; !done && k < sizeof choices / sizeof choices[0]; k++) {
      const struct choice *ch = &choices[k];
      if (strcmp(f, ch->name)) continue;
      int found = -1;
      for (int j = 0; ch->names[j]; j++)
        if (!strcmp(v, ch->names[j])) found = j;
      if (found < 0) return bad(f, v, choices_text(ch->names, acc, sizeof acc));
      *ch->index = found;
      if (ch->index == &cp_mode) o->cp_mode_set = 1;
      done = 1;
    }
    if (!done) {
      fprintf(stderr, "zeroc plan: unknown flag '%s'; zeroc plan --help lists the flags\n", f);
      return 2;
    }
    if (rc) return rc;
  }
  o->model = zarg_models[model];
  c->param_bytes = !strcmp(zarg_dtypes[dtype], "fp32") ? 4 : 2; /* auto: bf16, as on cuda */
  c->grad_bytes = grad_reduce ? 2 : 4;
  c->recompute = recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  c->offload_optimizer = (zeroc_offload_t)off_opt;
  c->offload_params = (zeroc_offload_t)off_par;
  c->act_model = act_model ? ZEROC_ACT_MEGATRON : ZEROC_ACT_ZEROC;
  c->flash_attention = attention;
  c->cp_mode = cp_mode ? ZEROC_CP_MODE_ULYSSES : ZEROC_CP_MODE_RING;
  return 0;
}

/* The model shape and the layout, checked with the flags' names. */
static int resolve(opts_t *o) {
  zeroc_plan_config_t *c = &o->cfg;
  zeroc_gpt_config_t *m = &c->model;
  zeroc_gpt_preset(strcmp(o->model, "custom") ? o->model : "gpt2-124m", m);
  if (o->layers > 0) m->layers = o->layers;
  if (o->hidden > 0) m->hidden = o->hidden;
  if (o->heads > 0) m->heads = o->heads;
  if (o->vocab > 0) m->vocab = o->vocab;
  if (o->seq > 0) m->seq = o->seq;
  if (o->batch > 0) m->batch = o->batch;
  if (o->all) {
    const char *chosen = o->zero_set   ? "--zero"
                         : o->tp_set   ? "--tp"
                         : o->pp_set   ? "--pp"
                         : o->hsdp_set ? "--hsdp"
                         : o->mb_set   ? "--microbatches"
                                       : NULL;
    if (chosen) {
      fprintf(stderr,
              "zeroc plan: %s is chosen by --all; accepted with --all: the model, --gpus, "
              "--global-batch and the cluster flags\n",
              chosen);
      return 2;
    }
    if (o->vpp_set) {
      fprintf(stderr, "zeroc plan: --vpp is not searched by --all (it plans 1F1B pipelines); "
                      "give --vpp with one layout (--pp, --microbatches)\n");
      return 2;
    }
    /* the search tries cp = 1, 2, 4, ... up to --cp (all the gpus when not
     * given), both modes unless --cp-mode names one */
    if (!o->cp_set) c->cp = c->gpus < 4096 ? c->gpus : 4096;
    if (!o->cp_mode_set) c->cp_mode = ZEROC_CP_MODE_DEFAULT;
    int64_t g = o->global_batch ? o->global_batch : (int64_t)m->batch * c->gpus;
    if (g > (1 << 24)) {
      fprintf(stderr,
              "zeroc plan: --batch %d x --gpus %d = %lld sequences per step: accepted up to "
              "2^24; set --global-batch\n",
              m->batch, c->gpus, (long long)g);
      return 2;
    }
    return 0;
  }
  if (o->global_batch) {
    fprintf(stderr, "zeroc plan: --global-batch needs --all (one layout's global batch is "
                    "--batch x --microbatches x dp)\n");
    return 2;
  }
  /* the library's defaults (ZeRO-1 with a pipeline, pp micro-batches) and
   * its rules, which zeroc train applies too, named by this command's flags */
  if (!o->zero_set) c->zero = ZEROC_UNSET;
  if (!o->mb_set) c->microbatches = 0;
  zeroc_plan_config_t resolved;
  if (zeroc_plan_config_check(c, ZEROC_NAMES_FLAGS, &resolved) != ZEROC_OK) {
    fprintf(stderr, "zeroc plan: %s\n", zarg_user_msg(zeroc_last_error(NULL)));
    return 2;
  }
  *c = resolved;
  int dp = c->gpus / (c->tp * c->pp * c->cp);
  int64_t g = (int64_t)m->batch * c->microbatches * dp;
  if (g > (1 << 24)) {
    fprintf(stderr,
            "zeroc plan: --batch %d x --microbatches %d x dp %d = %lld sequences: accepted up "
            "to 2^24\n",
            m->batch, c->microbatches, dp, (long long)g);
    return 2;
  }
  return 0;
}

/* ---- text output --------------------------------------------------------------- */

/* 124.4M, 6.74B, 1.01T */
static const char *count_str(double x, char *buf, size_t n) {
  if (x >= 1e12)
    snprintf(buf, n, "%.2fT", x / 1e12);
  else if (x >= 1e9)
    snprintf(buf, n, "%.2fB", x / 1e9);
  else if (x >= 1e6)
    snprintf(buf, n, "%.1fM", x / 1e6);
  else if (x >= 1e3)
    snprintf(buf, n, "%.1fK", x / 1e3);
  else
    snprintf(buf, n, "%.0f", x);
  return buf;
}

/* The shape line: the family, the parameters and the sizes. */
static void model_line(const zeroc_gpt_config_t *m, double params) {
  char p[32];
  if (m->family == ZEROC_GPT_FAMILY_LLAMA)
    printf("model      Llama %s parameters (layers %d, hidden %d, heads %d, kv heads %d, ffn %d, "
           "vocab %d, seq %d)\n",
           count_str(params, p, sizeof p), m->layers, m->hidden, m->heads, m->kv_heads, m->ffn,
           m->vocab, m->seq);
  else
    printf("model      GPT %s parameters (layers %d, hidden %d, heads %d, vocab %d, seq %d)\n",
           count_str(params, p, sizeof p), m->layers, m->hidden, m->heads, m->vocab, m->seq);
}

static void print_model(const zeroc_plan_result_t *r) {
  model_line(&r->cfg.model, (double)r->params);
}

/* What attention runs on, and what that assumes. */
static void attention_line(const zeroc_plan_config_t *c) {
  const char *det = c->deterministic ? "deterministic backward (--deterministic)"
                                     : "fast backward (not bitwise repeatable)";
  /* --all's config is not resolved: act_bytes 0 follows the compute, then the parameters */
  int e = c->act_bytes ? c->act_bytes : c->compute_bytes ? c->compute_bytes : c->param_bytes;
  if (c->flash_attention == ZEROC_ATTENTION_CUDNN && e == 2)
    printf("attention  cuDNN's flash attention, %s, its workspace counted: assumed (zeroc train "
           "uses it where libcudnn.so.9 loads; --attention flash for zeroc's own kernels)\n",
           det);
  else if (c->flash_attention == ZEROC_ATTENTION_CUDNN)
    printf("attention  zeroc's own kernels (cuDNN's flash attention is bf16 only)\n");
  else
    printf("attention  zeroc's own %s kernels (--attention %s)\n",
           c->flash_attention ? "flash" : "naive", attentions[c->flash_attention]);
}

/* sp: whether to mention sequence parallelism (it acts only with tp > 1). */
static void print_options(const zeroc_plan_config_t *c, int sp) {
  printf("options    %s, gradients reduced in %s, recompute %s%s, offload optimizer %s, params "
         "%s; activations: %s model%s\n",
         dtype_name(c->param_bytes), dtype_name(c->grad_bytes), recompute_name(c->recompute),
         sp ? ", sequence parallel" : "", offload_name(c->offload_optimizer),
         offload_name(c->offload_params), act_model_name(c->act_model),
         c->act_model == ZEROC_ACT_ZEROC
             ? (c->flash_attention ? ", flash attention" : ", naive attention")
             : " (Korthikanti et al.)");
  attention_line(c);
}

static void print_single(const zeroc_plan_result_t *r) {
  const zeroc_plan_config_t *c = &r->cfg;
  const zeroc_plan_memory_t *d = &r->device;
  char p[32];
  print_model(r);
  if (c->cp > 1)
    printf("layout     %d GPU%s = tp %d x pp %d x cp %d x dp %d; ZeRO-%d", c->gpus,
           c->gpus > 1 ? "s" : "", c->tp, c->pp, c->cp, r->dp, c->zero);
  else
    printf("layout     %d GPU%s = tp %d x pp %d x dp %d; ZeRO-%d", c->gpus, c->gpus > 1 ? "s" : "",
           c->tp, c->pp, r->dp, c->zero);
  if (c->zero > 0) printf(", shards over %d rank%s", r->shard, r->shard > 1 ? "s" : "");
  if (c->hsdp > 1) printf(" (HSDP: %d replicas)", c->hsdp);
  if (c->vpp > 1) printf("; interleaved pipeline, %d chunks per rank", c->vpp);
  printf("\n");
  print_options(c, c->sequence_parallel && c->tp > 1);
  if (c->cp > 1)
    printf("context    cp %d, %s: each rank holds chunks r and %d-r of %d, %d tokens per sequence; "
           "sends %.4g MiB per step in its cp group (per block and micro-batch %.4g MiB "
           "forward, %.4g backward)\n",
           c->cp, cp_mode_name(c->cp_mode), 2 * c->cp - 1, 2 * c->cp, c->model.seq / c->cp,
           r->comm.cp / 1048576.0, r->comm.cp_forward / 1048576.0, r->comm.cp_backward / 1048576.0);
  printf("batch      micro-batch %d x %d micro-batches x dp %d = %lld sequences = %.0f tokens per "
         "step\n",
         c->model.batch, c->microbatches, r->dp, (long long)r->global_batch, r->tokens_per_step);
  printf("FLOPs      %.4g per step, %.4g per token; Megatron %s\n", r->flops_per_step,
         r->flops_per_token,
         c->model.family == ZEROC_GPT_FAMILY_LLAMA
             ? "with the Llama block's matrices (q|k|v, o, gate|up, down)"
             : zeroc_plan_flops_formula(c->recompute));
  if (c->pp == 1)
    printf("memory     per rank (%s parameters before ZeRO), GiB:\n",
           count_str(r->params_rank, p, sizeof p));
  else
    printf("memory     per rank of pipeline stage %d of 0..%d (the stage needing the most; %s "
           "parameters before ZeRO), GiB:\n",
           r->stage, c->pp - 1, count_str(r->params_rank, p, sizeof p));
  printf("  parameters   %9.2f\n", d->params / GIB);
  printf("  gradients    %9.2f\n", d->grads / GIB);
  printf("  optimizer    %9.2f\n", d->optimizer / GIB);
  printf("  activations  %9.2f\n", d->activations / GIB);
  printf("  buffers      %9.2f\n", d->buffers / GIB);
  printf("  workspace    %9.2f\n", d->workspace / GIB);
  printf("  total        %9.2f of %g GiB: %s\n", d->total / GIB, c->gpu_mem_gib,
         r->fits ? "fits" : "does NOT fit");
  if (r->nccl_bytes > 0)
    printf("  nccl         %9.2f (NCCL's own buffers on a GPU: an estimate, not in total)\n",
           r->nccl_bytes / GIB);
  if (r->host_bytes > 0)
    printf("  host         %9.2f (offloaded, per rank)\n", r->host_bytes / GIB);
  if (r->nvme_bytes > 0)
    printf("  nvme         %9.2f (offloaded, per rank)\n", r->nvme_bytes / GIB);
  const zeroc_plan_time_t *t = &r->time;
  char cpt[48] = "";
  if (c->cp > 1) snprintf(cpt, sizeof cpt, ", cp %.4g", t->cp);
  printf("step time  %.4g s estimated (compute %.4g, bubble %.4g, tp %.4g, pp %.4g, dp %.4g, "
         "offload %.4g%s); %s tokens/s\n",
         t->total, t->compute, t->bubble, t->tp, t->pp, t->dp, t->offload, cpt,
         count_str(r->tokens_per_step / t->total, p, sizeof p));
}

static void print_all(const opts_t *o, const zeroc_plan_result_t *v, size_t n, int64_t G) {
  const zeroc_plan_config_t *c = &o->cfg;
  model_line(&c->model, (double)zeroc_gpt_num_params(&c->model));
  printf("cluster    %d GPUs, %d per node, %g GiB each; %g TFLOP/s at MFU %g\n", c->gpus,
         c->gpus_per_node, c->gpu_mem_gib, c->peak_tflops, c->mfu);
  print_options(c, c->sequence_parallel);
  double flops = zeroc_plan_flops_megatron(&c->model, (double)G, c->recompute);
  printf("batch      %lld sequences = %.0f tokens per step; FLOPs %.4g per step, %.4g per token; "
         "Megatron %s\n",
         (long long)G, (double)G * c->model.seq, flops, flops / ((double)G * c->model.seq),
         c->model.family == ZEROC_GPT_FAMILY_LLAMA
             ? "with the Llama block's matrices (q|k|v, o, gate|up, down)"
             : zeroc_plan_flops_formula(c->recompute));
  if (!n) {
    printf("no layout fits in %g GiB per GPU; try --recompute full, --offload-optimizer cpu, a "
           "smaller --global-batch or more --gpus\n",
           c->gpu_mem_gib);
    return;
  }
  size_t shown_n = o->top && (size_t)o->top < n ? (size_t)o->top : n;
  printf("%zu layouts fit; the %zu fastest (memory per rank in GiB, time per step in s):\n", n,
         shown_n);
  printf("%4s %3s %3s %3s %4s %5s %4s %4s %5s %5s | %7s %6s %6s %6s %6s %5s | %7s | %8s %8s "
         "%8s\n",
         "#", "tp", "pp", "cp", "mode", "dp", "hsdp", "zero", "mbs", "m", "params", "grads",
         "optim", "act", "buf", "work", "total", "step", "compute", "overhead");
  for (size_t i = 0; i < shown_n; i++) {
    const zeroc_plan_result_t *r = &v[i];
    const zeroc_plan_memory_t *d = &r->device;
    printf("%4zu %3d %3d %3d %4s %5d %4d %4d %5d %5d | %7.2f %6.2f %6.2f %6.2f %6.2f %5.2f | "
           "%7.2f | %8.4g %8.4g %8.4g\n",
           i + 1, r->cfg.tp, r->cfg.pp, r->cfg.cp,
           r->cfg.cp == 1                         ? "-"
           : r->cfg.cp_mode == ZEROC_CP_MODE_RING ? "ring"
                                                  : "uly",
           r->dp, r->cfg.hsdp, r->cfg.zero, r->cfg.model.batch, r->cfg.microbatches,
           d->params / GIB, d->grads / GIB, d->optimizer / GIB, d->activations / GIB,
           d->buffers / GIB, d->workspace / GIB, d->total / GIB, r->time.total, r->time.compute,
           r->time.total - r->time.compute);
  }
  printf("cp: context-parallel size (mode ring or uly(sses)); mbs: micro-batch per dp rank, m: "
         "micro-batches per step; overhead: pipeline bubble plus communication and offload not "
         "hidden by compute\n");
}

/* ---- JSON output --------------------------------------------------------------- */

static void json_model(const zeroc_gpt_config_t *m) {
  printf("\"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"vocab\": %d, \"seq\": %d, "
         "\"params\": %llu}",
         m->layers, m->hidden, m->heads, m->vocab, m->seq,
         (unsigned long long)zeroc_gpt_num_params(m));
}

static void json_layout(const zeroc_plan_result_t *r) {
  const zeroc_plan_config_t *c = &r->cfg;
  const zeroc_plan_memory_t *d = &r->device;
  const zeroc_plan_time_t *t = &r->time;
  printf(
      "{\"gpus\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": %d, \"cp\": %d, \"cp_mode\": \"%s\", "
      "\"dp\": %d, \"hsdp\": %d, "
      "\"shard\": %d, \"zero\": %d, \"batch\": %d, \"microbatches\": %d, \"global_batch\": %lld, "
      "\"tokens_per_step\": %.0f, \"flops_per_step\": %.6e, \"flops_per_token\": %.6e,\n",
      c->gpus, c->tp, c->pp, c->vpp, c->cp, cp_mode_name(c->cp_mode), r->dp, c->hsdp, r->shard,
      c->zero, c->model.batch, c->microbatches, (long long)r->global_batch, r->tokens_per_step,
      r->flops_per_step, r->flops_per_token);
  printf("   \"memory\": {\"stage\": %d, \"params_rank\": %.0f, \"params\": %.0f, \"grads\": %.0f, "
         "\"optimizer\": %.0f, \"activations\": %.0f, \"buffers\": %.0f, \"workspace\": %.0f, "
         "\"total\": %.0f, \"host\": %.0f, \"nvme\": %.0f, \"gpu_mem\": %.0f, \"fits\": %s},\n",
         r->stage, r->params_rank, d->params, d->grads, d->optimizer, d->activations, d->buffers,
         d->workspace, d->total, r->host_bytes, r->nvme_bytes, r->gpu_mem_bytes,
         r->fits ? "true" : "false");
  printf("   \"comm\": {\"cp_forward\": %.0f, \"cp_backward\": %.0f, \"cp\": %.0f},\n",
         r->comm.cp_forward, r->comm.cp_backward, r->comm.cp);
  printf("   \"time\": {\"compute\": %.6g, \"bubble\": %.6g, \"tp\": %.6g, \"pp\": %.6g, \"dp\": "
         "%.6g, \"offload\": %.6g, \"cp\": %.6g, \"total\": %.6g, \"tokens_per_s\": %.6g}}",
         t->compute, t->bubble, t->tp, t->pp, t->dp, t->offload, t->cp, t->total,
         r->tokens_per_step / t->total);
}

static void json_options(const zeroc_plan_config_t *c) {
  printf("\"dtype\": \"%s\", \"grad_reduce_dtype\": \"%s\", \"recompute\": \"%s\", "
         "\"sequence_parallel\": %s, "
         "\"offload_optimizer\": \"%s\", \"offload_params\": \"%s\", \"prefetch\": %d, "
         "\"activation_model\": \"%s\", \"flash_attention\": %s, \"attention\": \"%s\", "
         "\"deterministic\": %s, \"flops_formula\": \"%s\",\n",
         dtype_name(c->param_bytes), dtype_name(c->grad_bytes), recompute_name(c->recompute),
         c->sequence_parallel ? "true" : "false", offload_name(c->offload_optimizer),
         offload_name(c->offload_params), c->prefetch, act_model_name(c->act_model),
         c->flash_attention ? "true" : "false", attentions[c->flash_attention],
         c->deterministic ? "true" : "false", zeroc_plan_flops_formula(c->recompute));
  printf(" \"cluster\": {\"gpu_mem_gib\": %g, \"gpus_per_node\": %d, \"peak_tflops\": %g, "
         "\"mfu\": %g, \"bw_intra_gbs\": %g, \"bw_inter_gbs\": %g, \"lat_intra_us\": %g, "
         "\"lat_inter_us\": %g, \"bw_pcie_gbs\": %g, \"bw_nvme_gbs\": %g},\n",
         c->gpu_mem_gib, c->gpus_per_node, c->peak_tflops, c->mfu, c->bw_intra_gbs, c->bw_inter_gbs,
         c->lat_intra_us, c->lat_inter_us, c->bw_pcie_gbs, c->bw_nvme_gbs);
}

static void json_single(const zeroc_plan_result_t *r) {
  printf("{");
  json_model(&r->cfg.model);
  printf(",\n ");
  json_options(&r->cfg);
  printf(" \"layout\": ");
  json_layout(r);
  printf("}\n");
}

static void json_all(const opts_t *o, const zeroc_plan_result_t *v, size_t n, int64_t G) {
  size_t shown_n = o->top && (size_t)o->top < n ? (size_t)o->top : n;
  printf("{");
  json_model(&o->cfg.model);
  printf(",\n ");
  json_options(&o->cfg);
  printf(" \"gpus\": %d, \"global_batch\": %lld, \"fitting\": %zu, \"layouts\": [", o->cfg.gpus,
         (long long)G, n);
  for (size_t i = 0; i < shown_n; i++) {
    printf(i ? ",\n  " : "\n  ");
    json_layout(&v[i]);
  }
  printf("]}\n");
}

/* ---- the command ----------------------------------------------------------------- */

int zeroc_cmd_plan(int argc, char **argv) {
  opts_t o;
  const zeroc_plan_config_t dflt = ZEROC_PLAN_CONFIG_INIT;
  memset(&o, 0, sizeof o);
  /* the library's defaults, resolved: the checks below read them */
  if (zeroc_plan_config_resolve(&dflt, &o.cfg) != ZEROC_OK) return 1;
  o.cfg.act_bytes = o.cfg.compute_bytes = 0; /* follow param_bytes, which --dtype sets */
  o.model = "tiny";
  o.layers = o.hidden = o.heads = o.vocab = o.seq = o.batch = -1;
  o.top = 20;
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  int rc = parse(argc, argv, &o);
  if (!rc) rc = resolve(&o);
  if (rc) return rc;

  if (!o.all) {
    zeroc_plan_result_t r;
    zeroc_result_t res = zeroc_plan_compute(&o.cfg, &r);
    if (res != ZEROC_OK) {
      fprintf(stderr, "zeroc plan: %s\n", zarg_user_msg(zeroc_last_error(NULL)));
      return res == ZEROC_ERR_INVALID_ARG ? 2 : 1;
    }
    if (o.json)
      json_single(&r);
    else
      print_single(&r);
    return 0;
  }
  zeroc_plan_result_t *v = NULL;
  size_t n = 0;
  int64_t G = o.global_batch ? o.global_batch : (int64_t)o.cfg.model.batch * o.cfg.gpus;
  zeroc_result_t res = zeroc_plan_search(&o.cfg, G, &v, &n);
  if (res != ZEROC_OK) {
    fprintf(stderr, "zeroc plan: %s\n", zarg_user_msg(zeroc_last_error(NULL)));
    return res == ZEROC_ERR_INVALID_ARG ? 2 : 1;
  }
  if (o.json)
    json_all(&o, v, n, G);
  else
    print_all(&o, v, n, G);
  zeroc_plan_free(v);
  return 0;
}
