/*
 * train/trainer.c - building a training run: the config and its defaults, the
 * outputs checked before hours of training depend on them, the data stream,
 * the GPT with its shards and pipeline, the starting point (weights or a
 * checkpoint, with the resume checks) and the planner's prediction.
 * The step loop is train/step.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "io/files.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "train/trainer.h"
#include "zeroc/ckpt.h"

/* the part of zeroc_trainer_create the calling thread is (or was last) in */
static _Thread_local const char *create_phase = "config";

const char *zeroc_trainer_create_phase(void) { return create_phase; }

/* ---- the config ---------------------------------------------------------------- */

/* Copies a caller's versioned config over the "unset" initializer: an older,
 * smaller struct keeps the sentinels for the fields it lacks; a struct that
 * was not initialised with ZEROC_TRAIN_CONFIG_INIT is rejected. */
static zeroc_result_t read_config(const zeroc_train_config_t *in, zeroc_train_config_t *out) {
  const zeroc_train_config_t dflt = ZEROC_TRAIN_CONFIG_INIT;
  *out = dflt;
  if (!in || in->magic != ZEROC_CONFIG_MAGIC ||
      in->size < offsetof(zeroc_train_config_t, model) + sizeof(const char *) || in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_train_config_t was not initialised with ZEROC_TRAIN_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in ? in->size : 0, in ? in->magic : 0);
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  return ZEROC_OK;
}

/* The library's defaults for every field left unset. */
static zeroc_result_t resolve_defaults(zeroc_trainer_t *tr, zeroc_train_config_t *c,
                                       zeroc_gpt_config_t *g) {
  if (!c->model) c->model = "tiny";
  if (zeroc_dlrm_is_preset(c->model)) {
    ZEROC_CHECK(zeroc__dlrm_resolve(tr, c)); /* the DLRM's shape; the rest as below */
    if (c->param_dtype < 0) c->param_dtype = ZEROC_FP32;
  } else {
    ZEROC_CHECK(zeroc_gpt_preset(c->model, g));
    if (c->layers > 0) g->layers = c->layers;
    if (c->hidden > 0) g->hidden = c->hidden;
    if (c->heads > 0) g->heads = c->heads;
    if (c->vocab > 0) g->vocab = c->vocab;
    if (c->seq > 0) g->seq = c->seq;
    if (c->batch > 0) g->batch = c->batch;
    c->layers = g->layers, c->hidden = g->hidden, c->heads = g->heads;
    c->vocab = g->vocab, c->seq = g->seq, c->batch = g->batch;
  }
  if (c->steps < 0) c->steps = 100;
  if (c->lr < 0) c->lr = 3e-4;
  if (c->schedule == ZEROC_LR_DEFAULT) c->schedule = ZEROC_LR_COSINE;
  if (c->clip < 0) c->clip = 1.0;
  if (c->beta1 < 0) c->beta1 = 0.9;
  if (c->beta2 < 0) c->beta2 = 0.95;
  if (c->eps <= 0) c->eps = 1e-8;
  if (c->seed < 0) c->seed = 1;
  if (c->max_skipped < 0) c->max_skipped = 5;
  if (c->zero < 0) c->zero = tr->pp > 1 ? 1 : 3;
  if (c->param_dtype < 0)
    c->param_dtype = zeroc_ctx_device(tr->ctx) == ZEROC_DEVICE_CUDA ? ZEROC_BF16 : ZEROC_FP32;
  if (c->prefetch < 0) c->prefetch = 2;
  if (c->vpp <= 0) c->vpp = 1;
  if (c->grad_accum <= 0) c->grad_accum = tr->pp > 1 ? tr->pp : 1;
  if (!c->data) c->data = "synthetic";
  if (c->spike_window <= 0) c->spike_window = 50;
  if (c->spike_z <= 0) c->spike_z = 6.0;
  if (c->val_data && c->val_tokens == 0) c->val_tokens = 65536; /* < 0: refused below */
  return ZEROC_OK; /* the shape itself is checked where the GPT is built */
}

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

/* What the fields allow on their own, then what the mesh and the model allow
 * (train/check.c, the rules `zeroc train` checks before MPI starts); the
 * messages name the config's fields. */
static zeroc_result_t check_config(const zeroc_trainer_t *tr, const zeroc_train_config_t *c,
                                   const zeroc_gpt_config_t *g) {
  int pp = tr->pp, il = c->pp_schedule == ZEROC_PIPELINE_INTERLEAVED;
  if (c->steps < 0 || c->warmup < 0 || !(c->lr >= 0) || c->save_every < 0)
    return BAD("steps %d, warmup %d, lr %g, save_every %d: none may be negative", c->steps,
               c->warmup, c->lr, c->save_every);
  if (c->spike_window < 2 || c->spike_window > ZEROC_SPIKE_MAX_WINDOW)
    return BAD("spike_window %d: accepted 2..%d", c->spike_window, ZEROC_SPIKE_MAX_WINDOW);
  if (c->param_dtype != ZEROC_FP32 && c->param_dtype != ZEROC_BF16)
    return BAD("param_dtype %d: accepted ZEROC_FP32, ZEROC_BF16", c->param_dtype);
  if (c->zero < 0 || c->zero > 3) return BAD("zero %d: accepted 0..3", c->zero);
  if (c->vpp > 64) return BAD("vpp %d: accepted 1..64", c->vpp);
  if (!(c->dropout >= 0 && c->dropout < 1))
    return BAD("dropout %g: accepted 0 <= dropout < 1", c->dropout);
  if (pp == 1 && c->vpp > 1) return BAD("vpp %d is for a pipeline (pp > 1)", c->vpp);
  if ((unsigned)c->cp_mode > ZEROC_CP_MODE_ULYSSES)
    return BAD("cp_mode %d: accepted ZEROC_CP_MODE_RING, ZEROC_CP_MODE_ULYSSES", (int)c->cp_mode);
  if (tr->cp > 1 && g->seq % (2 * tr->cp))
    return BAD("seq %d is not divisible by 2 x cp = %d: context parallelism deals each sequence "
               "out in 2 x cp zigzag chunks",
               g->seq, 2 * tr->cp);
  if (pp > 1 && !il && c->pp_schedule != ZEROC_PIPELINE_1F1B)
    return BAD("pp_schedule %d: accepted 1F1B, INTERLEAVED", (int)c->pp_schedule);
  if (tr->info.dlrm) return zeroc__dlrm_check(tr, c);
  ZEROC_CHECK(zeroc__train_check_shape(c, g, tr->tp, &zeroc__train_field_names));
  ZEROC_CHECK(zeroc__train_check_pipeline(c, g, pp, &zeroc__train_field_names));
  return zeroc__train_check_outputs(c, &zeroc__train_field_names);
}

/* ---- the model and the pipeline ---------------------------------------------------- */

zeroc_data_config_t zeroc__train_data_config(const zeroc_trainer_t *tr, const char *source,
                                             int shuffle) {
  const zeroc_train_config_t *c = &tr->info.config;
  zeroc_data_config_t dcfg = ZEROC_DATA_CONFIG_INIT;
  dcfg.source = source;
  dcfg.vocab = c->vocab;
  dcfg.seq = c->seq;
  dcfg.global_batch = tr->info.global_batch;
  dcfg.seed = (uint64_t)c->seed;
  dcfg.shuffle = shuffle;
  return dcfg;
}

zeroc_pipeline_config_t zeroc__train_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
                                                 zeroc_dtype_t act_dtype) {
  zeroc_pipeline_config_t pc = ZEROC_PIPELINE_CONFIG_INIT;
  pc.schedule = c->pp_schedule;
  pc.microbatches = c->grad_accum;
  pc.chunks = c->vpp;
  /* the residual stream between stages: (B*T, C), or this tp rank's B*T/tp rows
   * of it with sequence parallelism; with cp, of this rank's T/cp tokens */
  size_t rows = (size_t)c->batch * (size_t)(c->seq / cp) / (size_t)(c->sequence_parallel ? tp : 1);
  pc.act_numel = rows * (size_t)c->hidden;
  pc.act_dtype = act_dtype;
  return pc;
}

zeroc_result_t zeroc__train_partition(const zeroc_gpt_config_t *g, int stages, int *bounds) {
  int nu = zeroc_gpt_num_units(g);
  double *cost = malloc(sizeof(double) * (size_t)nu);
  if (!cost) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline partition (%d units)", nu);
  zeroc_gpt_unit_costs(g, cost);
  zeroc_result_t r = zeroc_pipeline_partition(cost, nu, stages, bounds);
  free(cost);
  return r;
}

zeroc_shard_config_t zeroc__train_shard_config(const zeroc_train_config_t *c, zeroc_dtype_t dtype) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = c->zero;
  sc.param_dtype = dtype;
  sc.reduce_dtype = dtype;
  sc.prefetch = c->prefetch;
  sc.recompute = c->recompute;
  sc.grad_accum = c->grad_accum;
  sc.offload_optimizer = c->offload_optimizer;
  sc.offload_params = c->offload_params;
  sc.nvme_dir = c->nvme_dir;
  sc.beta1 = (float)c->beta1;
  sc.beta2 = (float)c->beta2;
  sc.eps = (float)c->eps;
  sc.weight_decay = (float)c->weight_decay;
  sc.clip = (float)c->clip;
  sc.seed = (uint64_t)c->seed;
  sc.max_skipped = c->max_skipped;
  return sc;
}

/* The GPT (this rank's chunks with a pipeline), its shards and the pipeline. */
static zeroc_result_t build_model(zeroc_trainer_t *tr) {
  const zeroc_train_config_t *c = &tr->info.config;
  const zeroc_gpt_config_t *g = &tr->info.model;
  zeroc_ctx_t *ctx = tr->ctx;
  zeroc_dtype_t dtype = tr->info.dtype;
  /* the model computes in the kernels' dtype: fp32 on cpu (bf16 parameters are
   * converted for compute by the engine), the parameter dtype on cuda */
  zeroc_dtype_t act_dtype = tr->info.device == ZEROC_DEVICE_CPU ? ZEROC_FP32 : dtype;
  zeroc_pipeline_config_t pcfg = zeroc__train_pipe_config(c, tr->tp, tr->cp, act_dtype);
  zeroc_gpt_options_t go = ZEROC_GPT_OPTIONS_INIT;
  go.batch = g->batch;
  go.recompute = c->recompute;
  go.dtype = act_dtype;
  go.sequence_parallel = c->sequence_parallel;
  go.dropout = (float)c->dropout;
  go.dropout_seed = (uint64_t)c->seed;
  go.cp_mode = c->cp_mode;
  int first[64], count[64];
  zeroc_gpt_stage_t st = {c->vpp, first, count, 1};
  zeroc_result_t r = ZEROC_OK;
  if (tr->pp > 1) {
    /* this rank's chunks: stage c*pp + pp_rank of the balanced cut */
    int S = tr->pp * c->vpp;
    tr->bounds = malloc(sizeof(int) * (size_t)(S + 1));
    r = tr->bounds ? zeroc__train_partition(g, S, tr->bounds)
                   : ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline partition (%d stages)", S);
    for (int k = 0; !r && k < c->vpp; k++) {
      first[k] = tr->bounds[k * tr->pp + tr->pp_rank];
      count[k] = tr->bounds[k * tr->pp + tr->pp_rank + 1] - first[k];
    }
    if (!r) r = zeroc_pipeline_slots(&pcfg, tr->pp, tr->pp_rank, &st.slots);
    go.stage = &st;
  }
  if (!r) r = zeroc_gpt_create_ex(ctx, g, &go, &tr->gpt);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) return r;
  int nunits;
  const zeroc_layer_t *layers = zeroc_gpt_layers(tr->gpt, &nunits);
  zeroc_shard_config_t sc = zeroc__train_shard_config(c, dtype);
  ZEROC_CHECK(zeroc_shard(ctx, layers, nunits, &sc, &tr->model));
  if (tr->pp > 1) {
    int cf[64], cn[64];
    for (int k = 0; k < c->vpp; k++) zeroc_gpt_chunk_units(tr->gpt, k, &cf[k], &cn[k]);
    ZEROC_CHECK(zeroc_pipeline_create(tr->model, cf, cn, &pcfg, &tr->pipe));
  }
  return ZEROC_OK;
}

/* ---- checkpoints --------------------------------------------------------------------- */

/* What a resumed run must share with its checkpoint's app object: the model's
 * whole shape and the data stream (the step is checked against steps). */
static const char *const RESUME_FIELDS[] = {
    "model.layers",      "model.hidden",       "model.heads",      "model.vocab",
    "model.seq",         "data.seed",          "data.shuffle",     "data.seq",
    "data.global_batch", "data.num_sequences", "data.fingerprint", NULL};

void zeroc__train_app_json(const zeroc_trainer_t *tr, uint64_t step, char *buf, size_t n) {
  const zeroc_train_config_t *c = &tr->info.config;
  const zeroc_gpt_config_t *g = &tr->info.model;
  zeroc_data_position_t pos;
  zeroc_data_position(tr->data, step, &pos);
  snprintf(
      buf, n,
      "{\"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"vocab\": %d, \"seq\": %d}, "
      "\"train\": {\"lr\": %.9g, \"steps\": %d, \"warmup\": %d, \"schedule\": \"%s\", "
      "\"seed\": %lld, \"zero\": %d, \"dtype\": \"%s\"}, "
      "\"data\": {\"step\": %llu, \"epoch\": %llu, \"seed\": %llu, \"shuffle\": %d, "
      "\"seq\": %d, \"global_batch\": %d, \"num_sequences\": %llu, \"fingerprint\": %llu}}",
      g->layers, g->hidden, g->heads, g->vocab, g->seq, c->lr, c->steps, c->warmup,
      c->schedule == ZEROC_LR_CONSTANT ? "constant" : "cosine", (long long)c->seed, c->zero,
      tr->dtype_given < 0 ? "auto" : zeroc_dtype_name((zeroc_dtype_t)tr->dtype_given),
      (unsigned long long)pos.step, (unsigned long long)pos.epoch, (unsigned long long)pos.seed,
      pos.shuffle, pos.seq, pos.global_batch, (unsigned long long)pos.num_sequences,
      (unsigned long long)pos.fingerprint);
}

zeroc_result_t zeroc__train_save(zeroc_trainer_t *tr, const char *dir, uint64_t step) {
  if (tr->dlrm) return zeroc__dlrm_save(tr, dir, step);
  char app[1024];
  zeroc__train_app_json(tr, step, app, sizeof app);
  return zeroc_ckpt_save(tr->model, dir, step, app);
}

/* --init's weights, or --resume's checkpoint with the checks that it is this run's. */
static zeroc_result_t start_point(zeroc_trainer_t *tr) {
  const zeroc_train_config_t *c = &tr->info.config;
  if (c->init) ZEROC_CHECK(zeroc_gpt_import(tr->model, tr->gpt, c->init));
  if (!c->resume) return ZEROC_OK;
  uint64_t k = 0;
  char *app = NULL;
  zeroc_result_t r = zeroc_ckpt_load(tr->model, c->resume, &k, &app);
  if (r == ZEROC_OK) {
    /* the same model and data stream, at the same place; nothing written yet */
    char cur[1024];
    zeroc__train_app_json(tr, k, cur, sizeof cur);
    r = zeroc_ckpt_check_resume(tr->ctx, c->resume, k, (uint64_t)c->steps, app, cur, RESUME_FIELDS);
  }
  free(app);
  if (r == ZEROC_OK) tr->next = tr->info.start_step = (int)k; /* <= steps, checked above */
  return r;
}

/* ---- buffers and the prediction ------------------------------------------------------- */

/* The token ids (inputs or targets) the step holds at once: a pipeline holds the whole
 * step's micro-batches; with cp, of this rank's tokens, split from one whole micro-batch
 * at a time. On cuda a device copy of each (tag buffers), which the prediction adds. */
static size_t step_tokens(const zeroc_trainer_t *tr, size_t *ntok, size_t *nmb) {
  const zeroc_train_config_t *c = &tr->info.config;
  *nmb = tr->pipe ? (size_t)c->grad_accum : 1;
  *ntok = (size_t)c->batch * (size_t)c->seq / (size_t)tr->cp;
  return *ntok * *nmb;
}

static zeroc_result_t alloc_buffers(zeroc_trainer_t *tr) {
  const zeroc_train_config_t *c = &tr->info.config;
  size_t full = (size_t)c->batch * (size_t)c->seq, ntok, nmb;
  step_tokens(tr, &ntok, &nmb);
  tr->ntok = ntok;
  if (tr->cp > 1) {
    tr->full_in = malloc(full * 4);
    tr->full_tg = malloc(full * 4);
    if (!tr->full_in || !tr->full_tg)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "out of host memory for the token buffers (2 x %zu bytes)",
                        full * 4);
  }
  tr->inputs = malloc(ntok * nmb * 4);
  tr->targets = malloc(ntok * nmb * 4);
  tr->mbs = calloc(nmb, sizeof *tr->mbs);
  tr->mbp = calloc(nmb, sizeof *tr->mbp);
  if (!tr->inputs || !tr->targets || !tr->mbs || !tr->mbp)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "out of host memory for the token buffers (2 x %zu bytes)",
                      ntok * nmb * 4);
  if (tr->info.device == ZEROC_DEVICE_CUDA) {
    ZEROC_CHECK(zeroc_mem_alloc(tr->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4,
                                (void **)&tr->dev_in));
    ZEROC_CHECK(zeroc_mem_alloc(tr->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4,
                                (void **)&tr->dev_tg));
  }
  return ZEROC_OK;
}

/* The planner's per-rank prediction for this layout (the same size functions
 * the allocators call), and the FLOPs a step does. */
static void predict(zeroc_trainer_t *tr) {
  zeroc_train_info_t *in = &tr->info;
  const zeroc_train_config_t *c = &in->config;
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(tr->ctx);
  zeroc_plan_config_t pc = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t pr;
  memset(&pr, 0, sizeof pr);
  pc.model = in->model;
  pc.gpus = mesh->world;
  pc.zero = c->zero;
  pc.tp = mesh->tp;
  pc.pp = mesh->pp;
  pc.hsdp = mesh->dp_replicate;
  pc.cp = mesh->cp; /* the planner counts T / cp tokens per rank and the cp buffers */
  pc.cp_mode = c->cp_mode;
  pc.microbatches = c->grad_accum;
  pc.vpp = c->vpp;
  pc.param_bytes = (int)zeroc_dtype_size(in->dtype);
  pc.compute_bytes = (int)zeroc_dtype_size(zeroc_kernels_compute_dtype(in->device, in->dtype));
  pc.recompute = c->recompute ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
  pc.sequence_parallel = c->sequence_parallel;
  pc.offload_optimizer = c->offload_optimizer;
  pc.offload_params = c->offload_params;
  pc.prefetch = c->prefetch;
  pc.gpu_mem_gib = 0;
  if (in->device == ZEROC_DEVICE_CPU) pc.workspace_mib = 0; /* no GEMM library workspace on cpu */
  in->plan_error[0] = 0;
  if (zeroc_plan_compute(&pc, &pr) == ZEROC_OK) {
    in->predicted_device = pr.device.total;
    in->predicted_host = pr.host_bytes;
    double t[ZEROC_TAG_COUNT] = {pr.device.params,      pr.device.grads,   pr.device.optimizer,
                                 pr.device.activations, pr.device.buffers, pr.device.workspace};
    if (in->device == ZEROC_DEVICE_CUDA) { /* alloc_buffers' device copies of the token ids */
      size_t ntok, nmb;
      double tok = 2.0 * 4.0 * (double)step_tokens(tr, &ntok, &nmb);
      t[ZEROC_TAG_BUFFERS] += tok;
      in->predicted_device += tok;
    }
    memcpy(in->predicted_by_tag, t, sizeof t);
  } else {
    snprintf(in->plan_error, sizeof in->plan_error, "%s", zeroc_last_error(NULL));
  }
  in->params = zeroc_gpt_num_params(&in->model);
  in->tokens_per_step = (double)in->global_batch * in->model.seq;
  in->flops_per_step =
      6.0 * (double)in->params * in->tokens_per_step +
      12.0 * in->model.layers * in->model.hidden * (double)in->model.seq * in->tokens_per_step;
  in->peak_flops = 0;
  if (in->device == ZEROC_DEVICE_CUDA) {
    double tf = zeroc_ctx_peak_tflops(tr->ctx); /* ZEROC_PEAK_TFLOPS: checked by zeroc_ctx_create */
    zeroc__env_f64("ZEROC_PEAK_TFLOPS", tf, &tf);
    in->peak_flops = tf * 1e12 * mesh->world;
  }
}

/* ---- create and destroy ---------------------------------------------------------------- */

/* The GPT's data, model, starting point and buffers, and the prediction. */
static zeroc_result_t build_gpt(zeroc_trainer_t *tr) {
  zeroc_ctx_t *ctx = tr->ctx;
  const zeroc_train_config_t *c = &tr->info.config;
  create_phase = "data";
  zeroc_result_t r;
  zeroc_data_config_t dcfg = zeroc__train_data_config(tr, c->data, c->shuffle);
  r = zeroc_data_create(&dcfg, &tr->data);
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  zeroc_data_info(tr->data, &tr->info.data);
  ZEROC_CHECK(zeroc_ctx_agree(ctx, zeroc__train_val_open(tr)));

  create_phase = "model";
  ZEROC_CHECK(build_model(tr));

  create_phase = "start";
  ZEROC_CHECK(start_point(tr));
  /* a failure here is one rank's: the agreement carries its message to rank 0 */
  ZEROC_CHECK(zeroc_ctx_agree(ctx, alloc_buffers(tr)));
  predict(tr);
  return ZEROC_OK;
}

/* The set-up after the config: each part agreed on by every rank. */
static zeroc_result_t build(zeroc_trainer_t *tr) {
  zeroc_ctx_t *ctx = tr->ctx;
  const zeroc_train_config_t *c = &tr->info.config;
  int root = zeroc_ctx_mesh(ctx)->rank == 0;
  create_phase = "outputs";
  zeroc_result_t r = c->save ? zeroc__dir_check_writable(c->save, "--save") : ZEROC_OK;
  if (!r && root && c->export_path) r = zeroc__file_check_writable(c->export_path, "--export");
  ZEROC_CHECK(zeroc_ctx_agree(ctx, r));
  if (tr->info.dlrm) {
    create_phase = "model";
    ZEROC_CHECK(zeroc__dlrm_build(tr));
  } else {
    ZEROC_CHECK(build_gpt(tr));
  }
  zeroc__spike_init(&tr->spike_loss, c->spike_window, c->spike_z);
  zeroc__spike_init(&tr->spike_norm, c->spike_window, c->spike_z);
  zeroc_ctx_memory_reset_peak(ctx);
  create_phase = "ready";
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_create(zeroc_ctx_t *ctx, const zeroc_train_config_t *cfg,
                                    zeroc_trainer_t **out) {
  create_phase = "config";
  if (!ctx || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_create: NULL %s", ctx ? "out" : "ctx");
  *out = NULL;
  zeroc_trainer_t *tr = calloc(1, sizeof *tr);
  if (!tr) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "trainer struct"));
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  tr->ctx = ctx;
  tr->dp = mesh->dp, tr->dp_rank = mesh->dp_rank;
  tr->pp = mesh->pp, tr->pp_rank = mesh->pp_rank, tr->tp = mesh->tp;
  tr->cp = mesh->cp, tr->cp_rank = mesh->cp_rank;
  tr->info.device = zeroc_ctx_device(ctx);
  zeroc_train_config_t *c = &tr->info.config;
  zeroc_result_t r = read_config(cfg, c);
  tr->dtype_given = c->param_dtype; /* the manifest records what was asked for */
  if (!r) r = resolve_defaults(tr, c, &tr->info.model);
  if (!r) r = check_config(tr, c, &tr->info.model);
  /* the same config on every rank gives the same verdict; agreeing costs little */
  r = zeroc_ctx_agree(ctx, r);
  if (!r) {
    tr->info.dtype = (zeroc_dtype_t)c->param_dtype;
    tr->info.global_batch = c->batch * c->grad_accum * tr->dp;
    r = build(tr);
  }
  if (r != ZEROC_OK) {
    /* the message outlives the clean-up, which may fail in its own way */
    char msg[ZEROC_ERRMSG_MAX];
    zeroc__ctx_ret(ctx, r);
    snprintf(msg, sizeof msg, "%s", zeroc_last_error(ctx));
    zeroc_trainer_destroy(tr);
    zeroc__ctx_error_set(ctx, msg);
    zeroc__tls_error_set(msg);
    return r;
  }
  *out = tr;
  return ZEROC_OK;
}

void zeroc_trainer_destroy(zeroc_trainer_t *tr) {
  if (!tr) return;
  zeroc_mem_free(tr->ctx, tr->dev_in);
  zeroc_mem_free(tr->ctx, tr->dev_tg);
  free(tr->inputs);
  free(tr->targets);
  free(tr->full_in);
  free(tr->full_tg);
  free(tr->mbs);
  free(tr->mbp);
  free(tr->bounds);
  zeroc_pipeline_destroy(tr->pipe);
  zeroc_model_destroy(tr->model);
  zeroc_gpt_destroy(tr->gpt);
  zeroc_data_destroy(tr->data);
  zeroc_data_destroy(tr->val);
  zeroc__dlrm_destroy(tr->ctx, tr->dlrm);
  free(tr);
}

void zeroc_trainer_info(const zeroc_trainer_t *tr, zeroc_train_info_t *out) { *out = tr->info; }

int zeroc_trainer_steps_done(const zeroc_trainer_t *tr) { return tr->next; }

zeroc_model_t *zeroc_trainer_model(const zeroc_trainer_t *tr) { return tr->model; }

zeroc_gpt_t *zeroc_trainer_gpt(const zeroc_trainer_t *tr) { return tr->gpt; }

zeroc_result_t zeroc_trainer_save(zeroc_trainer_t *tr, const char *dir) {
  if (!tr || !dir) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_save: NULL argument");
  return zeroc__ctx_ret(tr->ctx, zeroc__train_save(tr, dir, (uint64_t)tr->next));
}

zeroc_result_t zeroc_trainer_export(zeroc_trainer_t *tr, const char *path) {
  if (!tr || !path) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_export: NULL argument");
  if (tr->dlrm) return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "zeroc_trainer_export: not for DLRM yet");
  return zeroc__ctx_ret(tr->ctx, zeroc_gpt_export(tr->model, tr->gpt, path));
}
