/*
 * plan/plan.c - the planner's arithmetic: the config and its checks, a model's
 * units cut over the pipeline as the runtime cuts them, each stage's ZeRO
 * model states, engine pools, offload and pipeline buffers, and the step-time
 * estimate of one layout. What the model itself holds and moves (its units'
 * parameters, activations, scratch, traffic per block, FLOPs) it answers
 * through the model interface (zeroc/arch.h, "pricing"). docs/plan.md gives
 * the reasoning.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/arch_registry.h"
#include "plan/plan_internal.h"
#include "pp/schedule.h"
#include "pp/sizes.h"
#include "shard/rules.h"
#include "shard/sizes.h"
#include "zeroc/pipeline.h"
#include "zeroc/plan.h"

#define GIB 1073741824.0
#define MIB 1048576.0

/* ---- model states ------------------------------------------------------------------ */

/* The model states of psi parameters whose optimizer keeps (master 1) or does not
 * keep an fp32 master copy: the engine's buffers of one unit (shard/sizes.c). */
static void model_states(double psi, int zero, int shard, int pb, int rb, int master,
                         zeroc_plan_memory_t *out) {
  memset(out, 0, sizeof *out);
  zeroc__unit_bytes_t u;
  zeroc__shard_unit_bytes(zero, psi, shard, 0, pb, rb, rb, pb, master, 0, &u);
  out->params = u.params;
  out->grads = u.grads;
  out->optimizer = u.optimizer;
  out->total = out->params + out->grads + out->optimizer;
}

zeroc_result_t zeroc_plan_model_states(double psi, int zero, int shard, int pb,
                                       zeroc_plan_memory_t *out) {
  if (!out || !(psi >= 0) || zero < 0 || zero > 3 || shard < 1 || (pb != 2 && pb != 4))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_plan_model_states(psi %g, zero %d, shard %d, param_bytes %d, out %p): "
                      "accepted psi >= 0, zero 0..3, shard >= 1, param_bytes 2 or 4, out not NULL",
                      psi, zero, shard, pb, (void *)out);
  model_states(psi, zero, shard, pb, pb, zeroc__shard_keeps_master(pb, 0, 0), out);
  return ZEROC_OK;
}

/* ---- the config ---------------------------------------------------------------- */

/* The defaults of every field ZEROC_PLAN_CONFIG_INIT leaves unset (plan.h
 * says them in words). */
static const zeroc_plan_config_t DEFAULTS = {
    .size = sizeof(zeroc_plan_config_t),
    .magic = ZEROC_CONFIG_MAGIC,
    .model = {12, 768, 12, 50257, 1024, 4}, /* gpt2-124m, micro-batch 4 */
    .gpus = 1,
    .zero = 3, /* with pp > 1: 1 (zeroc__shard_default_stage) */
    .tp = 1,
    .pp = 1,
    .hsdp = 1,
    .microbatches = 0, /* pp (or 1) */
    .param_bytes = 2,
    .act_bytes = 0, /* param_bytes */
    .recompute = ZEROC_RECOMPUTE_NONE,
    .sequence_parallel = 0,
    .offload_optimizer = ZEROC_OFFLOAD_NONE,
    .offload_params = ZEROC_OFFLOAD_NONE,
    .prefetch = 2,
    .act_model = ZEROC_ACT_ZEROC,
    .flash_attention = ZEROC_ATTENTION_CUDNN, /* zeroc train's default where cuDNN loads */
    .gpu_mem_gib = 80.0,
    .workspace_mib = (double)ZEROC_UNSET, /* resolved by gpt_kernels_workspace_mib() */
    .gpus_per_node = 8,
    .peak_tflops = 989.0,
    .mfu = 0.5,
    .bw_intra_gbs = 300.0,
    .bw_inter_gbs = 25.0,
    .lat_intra_us = 10.0,
    .lat_inter_us = 20.0,
    .bw_pcie_gbs = 25.0,
    .bw_nvme_gbs = 3.0,
    .vpp = 1,
    .compute_bytes = 0, /* param_bytes */
    .cp = 1,
    .cp_mode = ZEROC_CP_MODE_RING,
    .grad_bytes = 4,
    .deterministic = 0,
};

#define UNSET_D ((double)ZEROC_UNSET)

/* The fixed workspace of a GPT rank on a GPU: zeroc's own cuda kernels, two of them (the
 * model's, model/gpt.c, and the optimizer engine's, shard/engine.c), each its cuBLASLt
 * workspace, reduction scratch and sumsq partials (kernels/kernels.h, what they allocate). */
#define GPT_KERNELS_OBJECTS 2
static double gpt_kernels_workspace_mib(void) {
  return GPT_KERNELS_OBJECTS * (double)zeroc__kernels_device_bytes(ZEROC_DEVICE_CUDA) /
         (1024.0 * 1024.0);
}
#define RESOLVE(f)   (out->f = out->f == ZEROC_UNSET ? DEFAULTS.f : out->f)
#define RESOLVE_D(f) (out->f = out->f == UNSET_D ? DEFAULTS.f : out->f)

static void resolve_unset(zeroc_plan_config_t *out) {
  RESOLVE(model.layers), RESOLVE(model.hidden), RESOLVE(model.heads);
  RESOLVE(model.vocab), RESOLVE(model.seq), RESOLVE(model.batch);
  RESOLVE(gpus), RESOLVE(tp), RESOLVE(pp), RESOLVE(hsdp), RESOLVE(microbatches);
  if (out->zero == ZEROC_UNSET) out->zero = zeroc__shard_default_stage(out->pp);
  RESOLVE(param_bytes), RESOLVE(act_bytes), RESOLVE(sequence_parallel), RESOLVE(prefetch);
  RESOLVE(flash_attention), RESOLVE(gpus_per_node), RESOLVE(vpp), RESOLVE(compute_bytes);
  RESOLVE(cp), RESOLVE(grad_bytes), RESOLVE(deterministic);
  if (out->cp_mode == ZEROC_CP_MODE_DEFAULT) out->cp_mode = ZEROC_CP_MODE_RING;
  RESOLVE_D(gpu_mem_gib), RESOLVE_D(peak_tflops), RESOLVE_D(mfu);
  if (out->workspace_mib == UNSET_D) out->workspace_mib = gpt_kernels_workspace_mib();
  RESOLVE_D(bw_intra_gbs), RESOLVE_D(bw_inter_gbs), RESOLVE_D(lat_intra_us);
  RESOLVE_D(lat_inter_us), RESOLVE_D(bw_pcie_gbs), RESOLVE_D(bw_nvme_gbs);
}

zeroc_result_t zeroc_plan_config_resolve(const zeroc_plan_config_t *in, zeroc_plan_config_t *out) {
  *out = DEFAULTS;
  if (!in || in->magic != ZEROC_CONFIG_MAGIC || in->size < offsetof(zeroc_plan_config_t, gpus) ||
      in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_plan_config_t was not initialised with ZEROC_PLAN_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in ? in->size : 0, in ? in->magic : 0);
  /* An older, smaller struct keeps the defaults for the fields it lacks. */
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  resolve_unset(out);
  if (out->compute_bytes == 0) out->compute_bytes = out->param_bytes;
  if (out->act_bytes == 0) out->act_bytes = out->compute_bytes;
  if (out->microbatches == 0) out->microbatches = out->pp;
  return ZEROC_OK;
}

/* ---- the model, through its interface ---------------------------------------------- */

/* What the layout rules' messages call each setting (zeroc_names_t): the
 * config's fields or `zeroc plan`'s flags. */
typedef struct plan_names {
  const char *gpus, *zero, *tp, *pp, *cp, *hsdp, *vpp, *microbatches;
  zeroc__rule_names_t rules;
} plan_names_t;
static const plan_names_t FIELDS = {"gpus", "zero",         "tp",
                                    "pp",   "cp",           "hsdp",
                                    "vpp",  "microbatches", {"zero", "pp", "offload_params"}};
static const plan_names_t FLAGS = {
    "--gpus", "--zero",         "--tp",
    "--pp",   "--cp",           "--hsdp",
    "--vpp",  "--microbatches", {"--zero", "--pp", "--offload-params"}};

/* The decoder the public config describes: the built-in GPT of shape c->model
 * (zeroc_plan_config_t names no other model yet). */
static void decoder_of(const zeroc_plan_config_t *c, zeroc_train_info_t *info,
                       zeroc__plan_model_t *pm) {
  memset(info, 0, sizeof *info);
  info->model = c->model;
  info->arch = &zeroc__arch_gpt2;
  memset(pm, 0, sizeof *pm);
  pm->arch = info->arch;
  pm->info = info;
  pm->device = ZEROC_DEVICE_AUTO;
  pm->ranks = 1;
}

/* The layout the model prices, for pipeline rank r's view of `c`. */
static zeroc_arch_layout_t layout_of(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c) {
  int dp = c->gpus / (c->tp * c->pp * c->cp);
  zeroc_arch_layout_t L = {
      .tp = c->tp,
      .pp = c->pp,
      .vpp = c->vpp,
      .cp = c->cp,
      .cp_mode = c->cp_mode,
      .sequence_parallel = c->sequence_parallel && c->tp > 1,
      /* ZeRO shards over dp_shard x cp: cp ranks compute with the same weights */
      .shard = c->zero == 0 ? 1 : dp / c->hsdp * c->cp,
      .batch = c->model.batch,
      .microbatches = c->microbatches,
      .act_bytes = c->act_bytes,
      .recompute = c->recompute == ZEROC_RECOMPUTE_FULL,
      .flash_attention = c->flash_attention,
      .deterministic = c->deterministic,
      .act_model = (int)c->act_model,
      .device = pm->device,
      .ranks = pm->ranks,
      .rank = pm->rank,
      .embedding_sharding = pm->embedding_sharding,
      .host_threshold = pm->host_threshold,
  };
  return L;
}

/* The shape and the cluster: everything a search keeps fixed. */
static zeroc_result_t check_common(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c,
                                   int names) {
  if (!pm->arch->price_check || !pm->arch->price_unit || !pm->arch->price_stage ||
      !pm->arch->figures || !pm->arch->num_units || !pm->arch->unit_costs)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "the planner cannot price model %s: it has no pricing",
                      pm->arch->name);
  ZEROC_CHECK(pm->arch->price_check(pm->info, NULL, names));
  if (c->gpus < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpus %d: accepted >= 1", c->gpus);
  if (c->param_bytes != 2 && c->param_bytes != 4)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "param_bytes %d: accepted 2 (bf16) or 4 (fp32)",
                      c->param_bytes);
  if (c->compute_bytes != 2 && c->compute_bytes != 4)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "compute_bytes %d: accepted 0 (= param_bytes), 2 (bf16) or 4 (fp32)",
                      c->compute_bytes);
  if (c->grad_bytes != 2 && c->grad_bytes != 4)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "grad_bytes %d: accepted 4 (fp32 reduction, the default) or 2 (bf16)",
                      c->grad_bytes);
  if (c->act_bytes != 2 && c->act_bytes != 4)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "act_bytes %d: accepted 0 (= param_bytes), 2 or 4",
                      c->act_bytes);
  if ((unsigned)c->recompute > ZEROC_RECOMPUTE_FULL)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "recompute %d: accepted 0 (none) or 1 (full)",
                      (int)c->recompute);
  if ((unsigned)c->offload_optimizer > ZEROC_OFFLOAD_NVME ||
      (unsigned)c->offload_params > ZEROC_OFFLOAD_NVME)
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "offload_optimizer %d, offload_params %d: accepted 0 (none), 1 (cpu), 2 (nvme)",
        (int)c->offload_optimizer, (int)c->offload_params);
  if ((unsigned)c->act_model > ZEROC_ACT_MEGATRON)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "act_model %d: accepted 0 (zeroc) or 1 (megatron)",
                      (int)c->act_model);
  if ((unsigned)c->flash_attention > ZEROC_ATTENTION_CUDNN || (unsigned)c->deterministic > 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "flash_attention %d, deterministic %d: accepted 0 (naive), 1 (flash: "
                      "zeroc's kernels) or 2 (cudnn), and 0 or 1",
                      c->flash_attention, c->deterministic);
  if (c->prefetch < 0 || c->prefetch > 64)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "prefetch %d: accepted 0..64", c->prefetch);
  if (!(c->gpu_mem_gib >= 0) || !(c->workspace_mib >= 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpu_mem_gib %g, workspace_mib %g: accepted >= 0",
                      c->gpu_mem_gib, c->workspace_mib);
  if (c->gpus_per_node < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpus_per_node %d: accepted >= 1", c->gpus_per_node);
  if (!(c->mfu > 0 && c->mfu <= 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "mfu %g: accepted 0 < mfu <= 1", c->mfu);
  if (!(c->peak_tflops > 0) || !(c->bw_intra_gbs > 0) || !(c->bw_inter_gbs > 0) ||
      !(c->bw_pcie_gbs > 0) || !(c->bw_nvme_gbs > 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "peak_tflops %g, bw_intra_gbs %g, bw_inter_gbs %g, bw_pcie_gbs %g, "
                      "bw_nvme_gbs %g: each must be > 0",
                      c->peak_tflops, c->bw_intra_gbs, c->bw_inter_gbs, c->bw_pcie_gbs,
                      c->bw_nvme_gbs);
  if (!(c->lat_intra_us >= 0) || !(c->lat_inter_us >= 0))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "lat_intra_us %g, lat_inter_us %g: accepted >= 0",
                      c->lat_intra_us, c->lat_inter_us);
  return ZEROC_OK;
}

zeroc_result_t zeroc__plan_check_common(const zeroc_plan_config_t *c) {
  zeroc_train_info_t info;
  zeroc__plan_model_t pm;
  decoder_of(c, &info, &pm);
  return check_common(&pm, c, ZEROC_NAMES_CONFIG);
}

/* The layout: what a search varies. */
static zeroc_result_t check_layout(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c,
                                   int names) {
  const plan_names_t *n = names == ZEROC_NAMES_FLAGS ? &FLAGS : &FIELDS;
  ZEROC_CHECK(zeroc__shard_check_stage(c->zero, n->zero));
  if (c->tp < 1 || c->pp < 1 || c->hsdp < 1 || c->microbatches < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d, %s %d, %s %d, %s %d: each must be >= 1", n->tp,
                      c->tp, n->pp, c->pp, n->hsdp, c->hsdp, n->microbatches, c->microbatches);
  ZEROC_CHECK(zeroc__plan_check_cp(c));
  if (c->gpus % ((int64_t)c->tp * c->pp * c->cp)) {
    if (c->cp == 1)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d x %s %d must divide %s %d", n->tp, c->tp,
                        n->pp, c->pp, n->gpus, c->gpus);
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d x %s %d x %s %d must divide %s %d", n->tp,
                      c->tp, n->pp, c->pp, n->cp, c->cp, n->gpus, c->gpus);
  }
  /* the model's own rules (tp dividing the heads, the cp split of a sequence) */
  zeroc_arch_layout_t L = layout_of(pm, c);
  ZEROC_CHECK(pm->arch->price_check(pm->info, &L, names));
  /* Stages may be uneven: the runtime cuts the units by cost
   * (zeroc_pipeline_partition) and needs one per stage, no more. */
  int nu = pm->arch->num_units(pm->info);
  if (nu < (int64_t)c->pp * c->vpp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s %d x %s %d = %lld pipeline stages need as many units; the model has %d",
                      n->pp, c->pp, n->vpp, c->vpp, (long long)c->pp * c->vpp, nu);
  int dp = c->gpus / (c->tp * c->pp * c->cp);
  if (dp % c->hsdp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d must divide dp %d (= %s / (%s x %s%s%s))",
                      n->hsdp, c->hsdp, dp, n->gpus, n->tp, n->pp, c->cp > 1 ? " x " : "",
                      c->cp > 1 ? n->cp : "");
  if (c->vpp < 1 || (c->vpp > 1 && c->pp == 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s %d with %s %d: accepted %s 1, or %s > 1 (interleaved) with %s > 1",
                      n->vpp, c->vpp, n->pp, c->pp, n->vpp, n->vpp, n->pp);
  if (c->pp > 1)
    ZEROC_CHECK(zeroc__pp_validate(c->vpp > 1 ? ZEROC_PP_INTERLEAVED : ZEROC_PP_1F1B, c->pp,
                                   c->microbatches, c->vpp));
  if (c->hsdp > 1 && c->zero == 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "%s %d with %s 0: hsdp needs %s 1, 2 or 3", n->hsdp,
                      c->hsdp, n->zero, n->zero);
  /* the engine's rules, as the trainer's config applies them (shard/rules.c) */
  return zeroc__shard_check_rules(c->zero, c->pp, (int)c->offload_params, &n->rules);
}

zeroc_result_t zeroc__plan_check_layout(const zeroc_plan_config_t *c) {
  zeroc_train_info_t info;
  zeroc__plan_model_t pm;
  decoder_of(c, &info, &pm);
  return check_layout(&pm, c, ZEROC_NAMES_CONFIG);
}

/* ---- one layout ------------------------------------------------------------------ */

/* What one pipeline rank holds on one TP rank. */
typedef struct stage {
  double params;   /* parameters before ZeRO sharding */
  double unit_max; /* the largest unit not pinned (flat parameter), for the buffer pools */
  double pinned;   /* units that stay gathered (the embedding tied to the head), or 0 */
  zeroc_arch_stage_t m; /* units, blocks, output, activation slots, as the model prices them */
  int chunks_in;   /* its chunks that receive their input from another rank */
  int chunks_out;  /* its chunks that send their output to another rank */
} stage_t;

/* Pipeline rank r's share of the model: the units of its chunks (stage
 * ch * pp + r of the cut `bounds`, the runtime's balanced partition) and its
 * activation slots per chunk (src/pp/pipeline.c): the most micro-batches of
 * one chunk alive at once, min(m, p - r) under 1F1B, from the schedule `sch`
 * otherwise. */
static zeroc_result_t stage_of(const zeroc__plan_model_t *pm, const zeroc_arch_layout_t *L,
                               const zeroc_plan_config_t *c, const int *bounds,
                               const zeroc_pp_schedule_t *sch, int r, stage_t *st) {
  int p = c->pp, S = c->pp * c->vpp;
  memset(st, 0, sizeof *st);
  for (int ch = 0; ch < c->vpp; ch++) {
    int s = ch * p + r;
    st->chunks_in += s > 0;
    st->chunks_out += s < S - 1;
    for (int u = bounds[s]; u < bounds[s + 1]; u++) {
      zeroc_arch_unit_price_t up;
      pm->arch->price_unit(pm->info, L, u, &up);
      st->params += up.params;
      st->m.units += 1;
      st->m.blocks += up.block;
      st->m.output |= up.output;
      if (up.pinned)
        st->pinned += up.params;
      else
        st->unit_max = fmax(st->unit_max, up.params);
    }
  }
  st->m.inflight = 1;
  if (p > 1 && c->vpp == 1) st->m.inflight = c->microbatches < p - r ? c->microbatches : p - r;
  if (p > 1 && c->vpp > 1) {
    int cont;
    ZEROC_CHECK(zeroc__pp_alive_width(sch, r, &st->m.inflight, &cont));
  }
  return ZEROC_OK;
}

/* The gradients' bytes as the engine keeps them (shard/sizes.c): grad_bytes, or the
 * parameters' where nothing is summed. */
static int grad_bytes(const zeroc_plan_config_t *c) {
  return zeroc__shard_grad_bytes(c->gpus, c->microbatches, c->param_bytes, c->grad_bytes,
                                 c->compute_bytes);
}

/* The ZeRO model states of the stage's parameters on a shard group of nd and
 * where offload puts them (host and NVMe bytes). */
static void stage_states(const zeroc_plan_config_t *c, int nd, const stage_t *st,
                         zeroc_plan_memory_t *mem, double *host, double *nvme) {
  int pb = c->param_bytes, rb = grad_bytes(c);
  model_states(st->params, c->zero, nd, pb, rb,
               zeroc__shard_keeps_master(pb, c->offload_optimizer, c->offload_params), mem);
  /* micro-steps accumulate in fp32 (shard/sizes.c, as the engine allocates):
   * with 16-bit reduction ZeRO-2/3 keep the gradient shard in fp32, ZeRO-0/1 a
   * running sum of the full grads beside them */
  if (c->microbatches > 1 && rb != 4) {
    zeroc__unit_bytes_t g;
    zeroc__shard_unit_bytes(c->zero, st->params, nd, 0, pb, rb, 4, c->compute_bytes, 1, 0, &g);
    mem->grads = g.grads + g.accum;
  }
  *host = *nvme = 0;
  double opt = mem->optimizer;
  if (c->offload_optimizer == ZEROC_OFFLOAD_CPU) *host += opt;
  if (c->offload_optimizer == ZEROC_OFFLOAD_NVME) *nvme += opt;
  if (c->offload_optimizer != ZEROC_OFFLOAD_NONE) mem->optimizer = 0;
  if (c->offload_params == ZEROC_OFFLOAD_CPU) *host += mem->params;
  if (c->offload_params == ZEROC_OFFLOAD_NVME) *nvme += mem->params;
  if (c->offload_params != ZEROC_OFFLOAD_NONE) mem->params = 0;
}

/* Device bytes of one stage; host and NVMe bytes of its offloaded state; the
 * model's price of it in *mp. */
static zeroc_result_t stage_memory(const zeroc__plan_model_t *pm, const zeroc_arch_layout_t *L,
                                   const zeroc_plan_config_t *c, const stage_t *st,
                                   zeroc_plan_memory_t *mem, double *host, double *nvme,
                                   zeroc_arch_stage_price_t *mp) {
  int e = c->act_bytes, pb = c->param_bytes, rb = grad_bytes(c), cb = c->compute_bytes;
  int nd = L->shard;
  stage_states(c, nd, st, mem, host, nvme);

  /* The engine's buffers (src/shard/sizes.c): units used by a later unit
   * (the embedding tied to the head) are pinned and keep dedicated gather
   * and full-gradient buffers; the others share pools sized for the largest
   * of them. Gradients are reduced in grad_bytes (fp32 unless bf16 was asked). */
  zeroc__pool_bytes_t pool;
  zeroc__unit_bytes_t pin;
  const int alias = zeroc__shard_alias(c->zero, nd, (int)c->offload_params, c->microbatches);
  zeroc__shard_pool_bytes(c->zero, c->prefetch, st->m.units, c->microbatches, st->unit_max,
                          fmax(st->unit_max, st->pinned), nd, pb, rb, cb, alias, &pool);
  zeroc__shard_unit_bytes(c->zero, st->pinned, nd, 1, pb, rb, rb, cb, 1, alias, &pin);
  mem->buffers = pool.gather_n * pool.gather + pin.own_gather + pool.fgrad_n * pool.fgrad +
                 pin.own_fgrad + pool.rs_n * pool.rs;

  /* what the model keeps and allocates on this stage (its size functions) */
  ZEROC_CHECK(pm->arch->price_stage(pm->info, L, &st->m, mp));
  double act = mp->activations;
  mem->buffers += mp->buffers;
  /* The pipeline's boundary tensors (src/pp/pipeline.c), one residual stream
   * per activation slot: a chunk that sends its output keeps it
   * (activations) and receives its gradient into a buffer; a chunk that
   * receives its input (the first layer's input, counted by the model) sends
   * back the gradient from another buffer. */
  if (c->pp > 1) {
    double x = zeroc__pp_boundary_bytes(mp->boundary, e);
    act += (double)st->m.inflight * st->chunks_out * x;
    mem->buffers += zeroc__pp_grad_buffer_bytes(st->m.inflight, st->chunks_in, st->chunks_out, x);
  }
  mem->activations = act;
  /* The model's backward scratch, the engine's step accumulator
   * (shard/sizes.c), plus the fixed workspace. */
  mem->workspace = mp->workspace + zeroc__shard_step_bytes() + c->workspace_mib * MIB;
  /* The engine's side buffers (shard/sizes.c): where the kernels compute in
   * another dtype than the parameters (cpu, bf16) a compute copy of the
   * gathered parameters, and where they compute in another dtype than the
   * reduction (cpu with bf16 reduction, cuda bf16 with fp32) one of the
   * gradients, shared by the unpinned units and owned by each pinned one;
   * with 16-bit reduced gradients, AdamW's fp32 copy of the largest shard. */
  int copies = zeroc__shard_compute_copies(pb, rb, cb);
  mem->workspace += copies * ((st->unit_max > 0 ? pool.compute_copy : 0) + pin.compute_copy);
  if (rb != 4) mem->workspace += pool.fp32_shard;
  /* state the model keeps outside the flat shards (embedding tables) */
  mem->params += mp->outside[ZEROC_TAG_PARAMS];
  mem->grads += mp->outside[ZEROC_TAG_GRADS];
  mem->optimizer += mp->outside[ZEROC_TAG_OPTIMIZER];
  mem->activations += mp->outside[ZEROC_TAG_ACTIVATIONS];
  mem->buffers += mp->outside[ZEROC_TAG_BUFFERS];
  mem->workspace += mp->outside[ZEROC_TAG_WORKSPACE];
  *host += mp->outside_host;
  mem->total =
      mem->params + mem->grads + mem->optimizer + mem->activations + mem->buffers + mem->workspace;
  return ZEROC_OK;
}

/* Bandwidth (B/s) and per-step latency (s) of a group of ranks spread over
 * `span` consecutive world ranks: inside a node when it fits in one. */
static void link_of(const zeroc_plan_config_t *c, int64_t span, double *bw, double *lat) {
  int intra = span <= c->gpus_per_node;
  *bw = (intra ? c->bw_intra_gbs : c->bw_inter_gbs) * 1e9;
  *lat = (intra ? c->lat_intra_us : c->lat_inter_us) * 1e-6;
}

/* A ring all-gather or reduce-scatter whose full buffer is `bytes`, over n ranks:
 * n-1 steps, each rank sending (n-1)/n of the buffer. */
static double ring(double bytes, int n, double bw, double lat) {
  if (n <= 1) return 0;
  return (n - 1) * lat + (double)(n - 1) / n * bytes / bw;
}

/* Context parallelism's exposed time per step (docs/cp.md): the ring hides
 * each K/V step behind the attention of the chunk in hand, so only the part
 * of a step longer than that attention shows (and dK/dV's last step home);
 * Ulysses' all-to-alls sit between the projections and the attention and
 * hide behind nothing. `blocks`: the blocks of the stage that sets the pace;
 * `k`: the model's traffic and attention per block and micro-batch. */
static double cp_time(const zeroc_plan_config_t *c, double blocks,
                      const zeroc_arch_stage_price_t *k) {
  int N = c->cp, t = c->tp;
  if (N <= 1) return 0;
  double bw, lat;
  link_of(c, (int64_t)t * N, &bw, &lat);
  double rc = c->recompute == ZEROC_RECOMPUTE_FULL ? 2.0 : 1.0, fwd, bwd;
  if (c->cp_mode == ZEROC_CP_MODE_RING) {
    /* one forward step: K, V sent (forward / (N-1) bytes) against 1/N of the
     * rank's attention, twice that backward */
    double attn = k->attn_flops / (c->mfu * c->peak_tflops * 1e12) / N;
    double step = k->cp_forward / (N - 1), tx = lat + step / bw, tb = lat + 2.0 * step / bw;
    fwd = (N - 1) * fmax(0.0, tx - attn);
    bwd = (N - 1) * fmax(0.0, tb - 2.0 * attn) + tx;
  } else {
    /* two all-to-alls each way, N-1 exchanges apiece */
    fwd = 2.0 * (N - 1) * lat + k->cp_forward / bw;
    bwd = 2.0 * (N - 1) * lat + k->cp_backward / bw;
  }
  return c->microbatches * blocks * (rc * fwd + bwd);
}

/* `layers`: the model's blocks; `blocks`: those of the stage that sets the
 * pace; `k`: the model's traffic per block and micro-batch. */
static void step_time(const zeroc_plan_config_t *c, int dp, double psi, double flops, int layers,
                      double blocks, const zeroc_arch_stage_price_t *k, zeroc_plan_time_t *tm) {
  /* with cp, ZeRO shards and reduces over dp_shard x cp (x replicas) */
  int t = c->tp, p = c->pp, mb = c->microbatches, R = c->hsdp, nd = dp / R * c->cp;
  double e = c->act_bytes, pb = c->param_bytes, rb = c->grad_bytes, bw, lat;
  memset(tm, 0, sizeof *tm);
  tm->compute = flops / ((double)c->gpus * c->mfu * c->peak_tflops * 1e12);
  if (p > 1) tm->bubble = tm->compute * (p - 1) / ((double)mb * c->vpp);
  double x = k->tp_bytes; /* one (B,T/cp,C) activation */
  if (t > 1) {
    /* 2 all-reduces forward, 2 backward per layer (Megatron), 2 more for the
     * recomputed forward; sequence parallelism swaps each for an all-gather
     * plus a reduce-scatter of the same volume. */
    link_of(c, t, &bw, &lat);
    double n = c->recompute == ZEROC_RECOMPUTE_FULL ? 6 : 4;
    tm->tp = (double)mb * (layers / p) * n * 2.0 * ring(x, t, bw, lat);
  }
  if (p > 1) {
    /* Activation forward and gradient backward per micro-batch per stage; the
     * slowest boundary sets the pace, across nodes if the mesh spans nodes. */
    link_of(c, c->gpus, &bw, &lat);
    double xb = zeroc__pp_boundary_bytes(k->boundary, (int)e); /* one message (pp/sizes.c) */
    tm->pp = 2.0 * mb * (lat + xb / bw);
  }
  if (dp * c->cp > 1) {
    /* parameters move in their dtype, gradients in the reduction's */
    double full = psi * pb, gfull = psi * rb, hide = 0, ovl = 0, post = 0, bw_r, lat_r, hs = 0;
    link_of(c, (int64_t)t * nd, &bw, &lat);
    link_of(c, (int64_t)t * dp * c->cp, &bw_r, &lat_r);
    double rs = ring(gfull, nd, bw, lat), ag = ring(full, nd, bw, lat);
    if (R > 1) hs = 2.0 * ring(gfull / nd, R, bw_r, lat_r); /* all-reduce of the grad shard */
    switch (c->zero) {
    case 0: /* all-reduce of the full grads during the last micro-step's backward */
      ovl = 2.0 * ring(gfull, dp * c->cp, bw_r, lat_r);
      hide = tm->compute * 2.0 / 3.0 / mb;
      break;
    case 1: /* full grads persist: one reduce-scatter at the end, gather after the step */
      ovl = rs + hs;
      hide = tm->compute * 2.0 / 3.0 / mb;
      post = ag;
      break;
    case 2: /* a reduce-scatter per unit in every micro-step's backward */
      ovl = mb * rs + hs;
      hide = tm->compute * 2.0 / 3.0;
      post = ag;
      break;
    default: /* gathers forward and backward, reduce-scatter, per micro-step */
      ovl = mb * (2.0 * ag + rs) + hs;
      hide = tm->compute;
      break;
    }
    tm->dp = fmax(0.0, ovl - hide) + post;
  }
  double shard = psi / (c->zero == 0 ? 1 : nd), pcie = c->bw_pcie_gbs * 1e9,
         nvme = c->bw_nvme_gbs * 1e9;
  if (c->offload_optimizer != ZEROC_OFFLOAD_NONE) {
    tm->offload += 2.0 * pb * shard / pcie; /* grad shard down, updated params up */
    if (c->offload_optimizer == ZEROC_OFFLOAD_NVME) tm->offload += 24.0 * shard / nvme;
  }
  if (c->offload_params != ZEROC_OFFLOAD_NONE) {
    tm->offload += 2.0 * mb * pb * shard / pcie; /* each gather reads the shard from host */
    if (c->offload_params == ZEROC_OFFLOAD_NVME)
      tm->offload += (2.0 * mb + 1.0) * pb * shard / nvme;
  }
  tm->cp = cp_time(c, blocks, k);
  tm->total = tm->compute + tm->bubble + tm->tp + tm->pp + tm->dp + tm->offload + tm->cp;
}

/* Every pipeline rank's share, cut as the runtime cuts it; the one needing the
 * most device memory is reported in out (its model price in *mp); the largest
 * stage's parameters (collectives move them: it sets the pace) and blocks. */
static zeroc_result_t plan_stages(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c,
                                  zeroc_plan_result_t *out, zeroc_arch_stage_price_t *mp,
                                  double *psi, double *blocks) {
  zeroc_arch_layout_t L = layout_of(pm, c);
  int nu = pm->arch->num_units(pm->info), S = c->pp * c->vpp;
  double *cost = malloc(sizeof(double) * (size_t)nu);
  int *bounds = malloc(sizeof(int) * (size_t)(S + 1));
  zeroc_pp_schedule_t *sch = NULL;
  zeroc_result_t res =
      cost && bounds ? ZEROC_OK : ZEROC_FAIL(ZEROC_ERR_NOMEM, "plan: stage tables");
  if (!res) {
    pm->arch->unit_costs(pm->info, cost);
    res = zeroc_pipeline_partition(cost, nu, S, bounds);
  }
  if (!res && c->vpp > 1)
    res = zeroc__pp_schedule_create(ZEROC_PP_INTERLEAVED, c->pp, c->microbatches, c->vpp, &sch);
  *psi = *blocks = 0;
  for (int r = 0; r < c->pp && !res; r++) {
    stage_t st;
    zeroc_plan_memory_t mem;
    zeroc_arch_stage_price_t price;
    double host, nvme;
    res = stage_of(pm, &L, c, bounds, sch, r, &st);
    if (!res) res = stage_memory(pm, &L, c, &st, &mem, &host, &nvme, &price);
    if (res) break;
    if (r == 0 || mem.total > out->device.total) {
      out->stage = r;
      out->params_rank = st.params;
      out->device = mem;
      out->host_bytes = host;
      out->nvme_bytes = nvme;
      out->comm.cp = st.m.blocks; /* the reported stage's blocks, for the bytes below */
      *mp = price;
    }
    *blocks = fmax(*blocks, st.m.blocks);
    *psi = fmax(*psi, st.params);
  }
  zeroc__pp_schedule_destroy(sch);
  free(cost);
  free(bounds);
  return res;
}

/* NCCL's own device buffers per rank, an estimate (NCCL sizes them at run time
 * from the topology, and allocates them when a communicator first connects a
 * peer): NCCL_BUFFSIZE's default (4 MiB, the simple protocol; LL and LL128
 * buffers and tree connections not counted) x an assumed 16 channels x the
 * peers of each communicator a step uses (comm/comm_nccl_cuda.c): a ring
 * collective reads from 2 peers (tp on the compute stream; the shard group's
 * gather and reduce streams, or dp's reduce at ZeRO-0; dp_replicate's reduce),
 * the cp ring 2, and each of the pipeline's four directed streams 1. */
#define NCCL_EST_BUFF     (4.0 * 1024 * 1024)
#define NCCL_EST_CHANNELS 16
static double nccl_estimate(const zeroc_plan_config_t *c, const zeroc_plan_result_t *r) {
  int peers = 0;
  if (c->tp > 1) peers += 2;
  if (r->shard > 1)
    peers += 2 * 2;
  else if (c->zero == 0 && r->dp > 1)
    peers += 2;
  if (c->zero != 0 && c->hsdp > 1) peers += 2;
  if (c->cp > 1) peers += 2;
  if (c->pp > 1) peers += 4;
  return NCCL_EST_BUFF * NCCL_EST_CHANNELS * peers;
}

zeroc_result_t zeroc__plan_model(const zeroc__plan_model_t *pm, const zeroc_plan_config_t *c,
                                 zeroc_plan_result_t *out, zeroc_arch_stage_price_t *mp) {
  memset(out, 0, sizeof *out);
  out->cfg = *c;
  out->dp = c->gpus / (c->tp * c->pp * c->cp);
  out->shard = c->zero == 0 ? 1 : out->dp / c->hsdp * c->cp;
  out->global_batch = (int64_t)c->model.batch * c->microbatches * out->dp;
  zeroc_arch_figures_t f;
  pm->arch->figures(pm->info, (double)out->global_batch, c->recompute == ZEROC_RECOMPUTE_FULL, &f);
  out->params = f.params;
  out->tokens_per_step = f.tokens;
  out->flops_per_step = f.flops_executed;
  out->flops_per_token = out->flops_per_step / out->tokens_per_step;

  double psi, blocks;
  ZEROC_CHECK(plan_stages(pm, c, out, mp, &psi, &blocks));
  out->gpu_mem_bytes = c->gpu_mem_gib * GIB;
  out->fits = c->gpu_mem_gib == 0 || out->device.total <= out->gpu_mem_bytes;
  out->nccl_bytes = nccl_estimate(c, out);
  /* the model's blocks in all (tensor-parallel traffic is per block) */
  zeroc_arch_layout_t L = layout_of(pm, c);
  int nu = pm->arch->num_units(pm->info), layers = 0;
  for (int u = 0; u < nu; u++) {
    zeroc_arch_unit_price_t up;
    pm->arch->price_unit(pm->info, &L, u, &up);
    layers += up.block;
  }
  step_time(c, out->dp, psi, out->flops_per_step, layers, blocks, mp, &out->time);
  /* the reported stage's context-parallel bytes per step (src/cp's counts) */
  double rblocks = out->comm.cp;
  out->comm.cp_forward = mp->cp_forward;
  out->comm.cp_backward = mp->cp_backward;
  out->comm.cp =
      c->microbatches * rblocks *
      ((c->recompute == ZEROC_RECOMPUTE_FULL ? 2.0 : 1.0) * mp->cp_forward + mp->cp_backward);
  return ZEROC_OK;
}

zeroc_result_t zeroc__plan_layout(const zeroc_plan_config_t *c, zeroc_plan_result_t *out) {
  zeroc_train_info_t info;
  zeroc__plan_model_t pm;
  zeroc_arch_stage_price_t mp;
  decoder_of(c, &info, &pm);
  return zeroc__plan_model(&pm, c, out, &mp);
}

zeroc_result_t zeroc__plan_check_model(const zeroc__plan_model_t *pm,
                                       const zeroc_plan_config_t *c) {
  ZEROC_CHECK(check_common(pm, c, ZEROC_NAMES_CONFIG));
  return check_layout(pm, c, ZEROC_NAMES_CONFIG);
}

zeroc_result_t zeroc_plan_config_check(const zeroc_plan_config_t *cfg, int names,
                                       zeroc_plan_config_t *resolved) {
  zeroc_plan_config_t c;
  ZEROC_CHECK(zeroc_plan_config_resolve(cfg, &c));
  if ((unsigned)names > ZEROC_NAMES_FLAGS)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_plan_config_check: names %d: accepted ZEROC_NAMES_CONFIG (0) or "
                      "ZEROC_NAMES_FLAGS (1)",
                      names);
  zeroc_train_info_t info;
  zeroc__plan_model_t pm;
  decoder_of(&c, &info, &pm);
  ZEROC_CHECK(check_common(&pm, &c, names));
  ZEROC_CHECK(check_layout(&pm, &c, names));
  if (resolved) *resolved = c;
  return ZEROC_OK;
}

zeroc_result_t zeroc_plan_compute(const zeroc_plan_config_t *cfg, zeroc_plan_result_t *out) {
  zeroc_plan_config_t c;
  if (!out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_plan_compute: out is NULL");
  ZEROC_CHECK(zeroc_plan_config_check(cfg, ZEROC_NAMES_CONFIG, &c));
  return zeroc__plan_layout(&c, out);
}
