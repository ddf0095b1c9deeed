/*
 * model/gpt_run.c - the GPT behind the model interface (zeroc/arch.h): the
 * config's shape (a preset with overrides) and rules, and a run: the token
 * data, the GPT (this rank's chunks with a pipeline), its shards and pipeline,
 * the token buffers, one step's micro-batches (context parallelism keeps this
 * rank's zigzag tokens), checkpoints' app object, import, export and sampling.
 * The held-out evaluation is gpt_eval.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_batch.h"
#include "model/gpt_eval.h"
#include "model/gpt_file.h"
#include "model/gpt_hf.h"
#include "model/gpt_internal.h"
#include "model/gpt_price.h"
#include "model/gpt_run.h"
#include "model/lm_rules.h"
#include "model/sample.h"
#include "runtime/runtime.h"
#include "shard/engine.h"
#include "zeroc/arch.h"
#include "zeroc/device.h"

/* ---- the configuration ----------------------------------------------------------------- */

static zeroc_result_t resolve(zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                              zeroc_train_info_t *info) {
  zeroc_gpt_config_t *g = &info->model;
  (void)mesh;
  const char *llama = zeroc__lm_llama_field_set(c);
  if (llama)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "%s is a setting of the Llama family; model %s is GPT-2 (accepted there: "
                      "llama-tiny, qwen-tiny, llama3.2-1b, llama3.1-8b, qwen2.5-0.5b, qwen2.5-7b)",
                      llama, c->model ? c->model : "tiny");
  if (c->model && !strcmp(c->model, "custom")) {
    /* every size given (by flags, or a transformers config.json: gpt_hf.c) */
    if (c->layers == ZEROC_UNSET || c->hidden == ZEROC_UNSET || c->heads == ZEROC_UNSET ||
        c->vocab == ZEROC_UNSET || c->seq == ZEROC_UNSET)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "model custom needs layers, hidden, heads, vocab and seq");
    ZEROC_CHECK(zeroc_gpt_preset("tiny", g)); /* the micro-batch */
  } else {
    ZEROC_CHECK(zeroc_gpt_preset(c->model, g));
  }
  if (c->layers != ZEROC_UNSET) g->layers = c->layers;
  if (c->hidden != ZEROC_UNSET) g->hidden = c->hidden;
  if (c->heads != ZEROC_UNSET) g->heads = c->heads;
  if (c->vocab != ZEROC_UNSET) g->vocab = c->vocab;
  if (c->seq != ZEROC_UNSET) g->seq = c->seq;
  if (c->batch != ZEROC_UNSET) g->batch = c->batch;
  c->layers = g->layers, c->hidden = g->hidden, c->heads = g->heads;
  c->vocab = g->vocab, c->seq = g->seq, c->batch = g->batch;
  return ZEROC_OK; /* the shape itself is checked where the GPT is built */
}

static zeroc_result_t check(const zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                            const zeroc_train_info_t *info, int names) {
  const zeroc_gpt_config_t *g = &info->model;
  const zeroc__train_names_t *n = zeroc__lm_names(names);
  ZEROC_CHECK(zeroc__lm_check_shape(c, g, mesh->tp, n));
  ZEROC_CHECK(zeroc__lm_check_cp(c->cp_mode, g, mesh->tp, mesh->cp, n));
  ZEROC_CHECK(zeroc__lm_check_pipeline(c, g, mesh->pp, n));
  return zeroc__lm_check_outputs(c, n);
}

/* ---- the pipeline ---------------------------------------------------------------------- */

zeroc_pipeline_config_t zeroc__gpt_pipe_config(const zeroc_train_config_t *c, int tp, int cp,
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

zeroc_result_t zeroc__gpt_partition(const zeroc_gpt_config_t *g, int stages, int *bounds) {
  int nu = zeroc_gpt_num_units(g);
  double *cost = malloc(sizeof(double) * (size_t)nu);
  if (!cost) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline partition (%d units)", nu);
  zeroc_gpt_unit_costs(g, cost);
  zeroc_result_t r = zeroc_pipeline_partition(cost, nu, stages, bounds);
  free(cost);
  return r;
}

/* ---- a run ----------------------------------------------------------------------------- */

/* The GPT (this rank's chunks with a pipeline), its shards and the pipeline. */
static zeroc_result_t build_model(zeroc__gpt_run_t *run, const zeroc_shard_config_t *sc,
                                  int weights_only) {
  const zeroc_train_config_t *c = &run->info->config;
  const zeroc_gpt_config_t *g = &run->info->model;
  zeroc_ctx_t *ctx = run->ctx;
  zeroc_dtype_t dtype = run->info->dtype;
  /* the model computes in the kernels' dtype: fp32 on cpu (bf16 parameters are
   * converted for compute by the engine), the parameter dtype on cuda */
  zeroc_dtype_t act_dtype = run->info->device == ZEROC_DEVICE_CPU ? ZEROC_FP32 : dtype;
  zeroc_pipeline_config_t pcfg = zeroc__gpt_pipe_config(c, run->tp, run->cp, act_dtype);
  zeroc_gpt_options_t go = ZEROC_GPT_OPTIONS_INIT;
  go.batch = g->batch;
  go.recompute = c->recompute;
  go.dtype = act_dtype;
  go.sequence_parallel = c->sequence_parallel;
  go.dropout = (float)c->dropout;
  go.dropout_seed = (uint64_t)c->seed;
  go.cp_mode = c->cp_mode;
  go.deterministic = c->deterministic;
  int first[64], count[64];
  zeroc_gpt_stage_t st = {c->vpp, first, count, 1};
  zeroc_result_t r = ZEROC_OK;
  if (run->pp > 1) {
    /* this rank's chunks: stage c*pp + pp_rank of the balanced cut */
    int S = run->pp * c->vpp;
    run->bounds = malloc(sizeof(int) * (size_t)(S + 1));
    r = run->bounds ? zeroc__gpt_partition(g, S, run->bounds)
                    : ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline partition (%d stages)", S);
    for (int k = 0; !r && k < c->vpp; k++) {
      first[k] = run->bounds[k * run->pp + run->pp_rank];
      count[k] = run->bounds[k * run->pp + run->pp_rank + 1] - first[k];
    }
    if (!r) r = zeroc_pipeline_slots(&pcfg, run->pp, run->pp_rank, &st.slots);
    go.stage = &st;
  }
  if (!r) r = zeroc_gpt_create_ex(ctx, g, &go, &run->gpt);
  r = zeroc_ctx_agree(ctx, r);
  if (r != ZEROC_OK) return r;
  int nunits;
  const zeroc_layer_t *layers = zeroc_gpt_layers(run->gpt, &nunits);
  ZEROC_CHECK(zeroc_shard(ctx, layers, nunits, sc, &run->model));
  if (run->pp > 1 && !weights_only) {
    int cf[64], cn[64];
    for (int k = 0; k < c->vpp; k++) zeroc_gpt_chunk_units(run->gpt, k, &cf[k], &cn[k]);
    ZEROC_CHECK(zeroc_pipeline_create(run->model, cf, cn, &pcfg, &run->pipe));
  }
  return ZEROC_OK;
}

/* The token ids (inputs or targets) the step holds at once: a pipeline holds the whole
 * step's micro-batches; with cp, of this rank's tokens, split from one whole micro-batch
 * at a time. On cuda a device copy of each (tag buffers), which the prediction adds
 * (zeroc__plan_train). */
static zeroc_result_t alloc_buffers(zeroc__gpt_run_t *run) {
  const zeroc_train_config_t *c = &run->info->config;
  size_t full = (size_t)c->batch * (size_t)c->seq;
  size_t nmb = run->pp > 1 ? (size_t)c->grad_accum : 1;
  size_t ntok = full / (size_t)run->cp;
  run->ntok = ntok;
  if (run->cp > 1) {
    run->full_in = malloc(full * 4);
    run->full_tg = malloc(full * 4);
    if (!run->full_in || !run->full_tg)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "out of host memory for the token buffers (2 x %zu bytes)",
                        full * 4);
  }
  run->inputs = malloc(ntok * nmb * 4);
  run->targets = malloc(ntok * nmb * 4);
  run->mbs = calloc(nmb, sizeof *run->mbs);
  run->mbp = calloc(nmb, sizeof *run->mbp);
  if (!run->inputs || !run->targets || !run->mbs || !run->mbp)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "out of host memory for the token buffers (2 x %zu bytes)",
                      ntok * nmb * 4);
  if (run->info->device == ZEROC_DEVICE_CUDA) {
    ZEROC_CHECK(zeroc_mem_alloc(run->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4,
                                (void **)&run->dev_in));
    ZEROC_CHECK(zeroc_mem_alloc(run->ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, ntok * nmb * 4,
                                (void **)&run->dev_tg));
  }
  return ZEROC_OK;
}

void zeroc__gpt_run_destroy(void *self) {
  zeroc__gpt_run_t *run = self;
  if (!run) return;
  zeroc_mem_free(run->ctx, run->dev_in);
  zeroc_mem_free(run->ctx, run->dev_tg);
  free(run->inputs);
  free(run->targets);
  free(run->full_in);
  free(run->full_tg);
  free(run->mbs);
  free(run->mbp);
  free(run->bounds);
  zeroc_pipeline_destroy(run->pipe);
  zeroc_model_destroy(run->model);
  zeroc_gpt_destroy(run->gpt);
  zeroc_data_destroy(run->data);
  zeroc_data_destroy(run->val);
  free(run);
}

/* The data, the held-out data, the model and the buffers, each agreed on by every rank. */
zeroc_result_t zeroc__gpt_run_create(const zeroc_arch_run_t *a, void **self) {
  zeroc__gpt_run_t *run = calloc(1, sizeof *run);
  *self = run;
  ZEROC_CHECK(zeroc_ctx_agree(a->ctx, run ? ZEROC_OK : ZEROC_FAIL(ZEROC_ERR_NOMEM, "gpt run")));
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(a->ctx);
  run->ctx = a->ctx;
  run->info = a->info;
  run->dp = mesh->dp, run->dp_rank = mesh->dp_rank;
  run->pp = mesh->pp, run->pp_rank = mesh->pp_rank, run->tp = mesh->tp;
  run->cp = mesh->cp, run->cp_rank = mesh->cp_rank;
  const zeroc_train_config_t *c = &a->info->config;
  if (a->weights_only) { /* a checkpoint's weights to sample from: no data, no buffers */
    *a->phase = "model";
    return build_model(run, &a->shard, 1);
  }
  *a->phase = "data";
  zeroc_data_config_t dcfg = zeroc__gpt_data_config(run, c->data, c->shuffle);
  ZEROC_CHECK(zeroc_ctx_agree(a->ctx, zeroc_data_create(&dcfg, &run->data)));
  zeroc_data_info(run->data, &a->info->data);
  ZEROC_CHECK(zeroc_ctx_agree(a->ctx, zeroc__gpt_val_open(run)));
  *a->phase = "model";
  ZEROC_CHECK(build_model(run, &a->shard, 0));
  /* a failure here is one rank's: the agreement carries its message to rank 0 */
  return zeroc_ctx_agree(a->ctx, alloc_buffers(run));
}

/* ---- a step ---------------------------------------------------------------------------- */

/* Every micro-batch of step `s`: forward and backward, or (with a pipeline)
 * the whole step's micro-batches through the schedule at once. */
zeroc_result_t zeroc__gpt_run_step(void *self, int s, float lr, zeroc_pipeline_stats_t *pst) {
  zeroc__gpt_run_t *run = self;
  const zeroc_train_config_t *c = &run->info->config;
  (void)lr; /* everything the GPT updates is in the shards */
  for (int u = 0; u < c->grad_accum; u++) {
    zeroc_gpt_batch_t b;
    ZEROC_CHECK(zeroc__gpt_load(run, run->data, (uint64_t)s, u, &b));
    if (run->pipe) {
      run->mbs[u] = b;
      run->mbp[u] = &run->mbs[u];
      continue;
    }
    ZEROC_CHECK(zeroc_model_forward(run->model, &b));
    ZEROC_CHECK(zeroc_model_backward(run->model));
  }
  if (run->pipe) ZEROC_CHECK(zeroc_pipeline_run(run->pipe, run->mbp, pst));
  return ZEROC_OK;
}

zeroc_model_t *zeroc__gpt_run_model(void *self) { return ((zeroc__gpt_run_t *)self)->model; }

zeroc_pipeline_t *zeroc__gpt_run_pipeline(void *self) { return ((zeroc__gpt_run_t *)self)->pipe; }

double zeroc__gpt_run_comm_wait_s(void *self) {
  return zeroc__gpt_cp_wait_s(((zeroc__gpt_run_t *)self)->gpt);
}

/* ---- checkpoints ----------------------------------------------------------------------- */

/* What a resumed run must share with its checkpoint's app object: the model's
 * whole shape and the data stream (the step is checked against steps). */
static const char *const RESUME_FIELDS[] = {
    "model.layers",      "model.hidden",       "model.heads",      "model.vocab",
    "model.seq",         "data.seed",          "data.shuffle",     "data.seq",
    "data.global_batch", "data.num_sequences", "data.fingerprint", NULL};

void zeroc__gpt_run_app_json(void *self, uint64_t step, char *buf, size_t n) {
  const zeroc__gpt_run_t *run = self;
  const zeroc_train_config_t *c = &run->info->config;
  const zeroc_gpt_config_t *g = &run->info->model;
  int dtype_given = run->info->dtype_given;
  int k = snprintf(buf, n,
                   "{\"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"vocab\": %d, "
                   "\"seq\": %d}",
                   g->layers, g->hidden, g->heads, g->vocab, g->seq);
  if (k < 0 || (size_t)k >= n) return;
  if (g->family == ZEROC_GPT_FAMILY_LLAMA) { /* inside "model", before its closing brace */
    k--;
    int m = snprintf(buf + k, n - (size_t)k,
                     ", \"family\": \"llama\", \"kv_heads\": %d, \"ffn\": %d, \"qkv_bias\": %d, "
                     "\"untied\": %d, \"norm_eps\": %.17g, \"rope_theta\": %.17g, "
                     "\"rope_factor\": %.17g, \"rope_low\": %.17g, \"rope_high\": %.17g, "
                     "\"rope_original\": %.17g}",
                     g->kv_heads, g->ffn, g->qkv_bias, g->untied, g->norm_eps, g->rope_theta,
                     g->rope_factor, g->rope_low, g->rope_high, g->rope_original);
    if (m < 0 || (size_t)(k + m) >= n) return;
    k += m;
  }
  if (!run->data) { /* a weights-only run: the shape is all it knows */
    snprintf(buf + k, n - (size_t)k, "}");
    return;
  }
  zeroc_data_position_t pos;
  zeroc_data_position(run->data, step, &pos);
  snprintf(buf + k, n - (size_t)k,
           ", \"train\": {\"lr\": %.9g, \"steps\": %d, \"warmup\": %d, \"schedule\": \"%s\", "
           "\"seed\": %lld, \"zero\": %d, \"dtype\": \"%s\"}, "
           "\"data\": {\"step\": %llu, \"epoch\": %llu, \"seed\": %llu, \"shuffle\": %d, "
           "\"seq\": %d, \"global_batch\": %d, \"num_sequences\": %llu, \"fingerprint\": %llu}}",
           c->lr, c->steps, c->warmup,
           c->schedule == ZEROC_LR_CONSTANT ? "constant"
           : c->schedule == ZEROC_LR_LINEAR ? "linear"
                                            : "cosine",
           (long long)c->seed, c->zero,
           dtype_given < 0 ? "auto" : zeroc_dtype_name((zeroc_dtype_t)dtype_given),
           (unsigned long long)pos.step, (unsigned long long)pos.epoch,
           (unsigned long long)pos.seed, pos.shuffle, pos.seq, pos.global_batch,
           (unsigned long long)pos.num_sequences, (unsigned long long)pos.fingerprint);
}

/* ---- weights in and out, sampling ------------------------------------------------------ */

zeroc_result_t zeroc__gpt_run_import_weights(void *self, const char *path) {
  zeroc__gpt_run_t *run = self;
  return zeroc_gpt_import(run->model, run->gpt, path);
}

zeroc_result_t zeroc__gpt_run_export_weights(void *self, const char *path) {
  zeroc__gpt_run_t *run = self;
  return zeroc_gpt_export(run->model, run->gpt, path);
}

/* Rank 0: copies the consolidated tensors into the sampler (wte and an untied lm_head
 * without their padding rows: they come last, so the real rows are a prefix). */
static zeroc_result_t sampler_fill(void *user, const float *const *src, uint64_t maxp) {
  zeroc_sampler_t *s = user;
  int L = zeroc_sampler_config(s)->layers;
  (void)maxp;
  for (int gu = 0; gu < L + 2; gu++) {
    int np = zeroc__sampler_unit_params(s, gu);
    for (int p = 0; p < np; p++) {
      uint64_t rows, cols;
      float *dst = zeroc__sampler_param(s, gu, p, &rows, &cols);
      if (!dst || !src[gu * 12 + p])
        return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "sampler: no parameter %d of unit %d", p, gu);
      memcpy(dst, src[gu * 12 + p], rows * (cols ? cols : 1) * sizeof(float));
    }
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_sampler(zeroc_model_t *m, const zeroc_gpt_t *g, zeroc_sampler_t **out) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  zeroc_sampler_t *s = NULL;
  *out = NULL;
  int root = zeroc_ctx_mesh(ctx)->rank == 0;
  zeroc_result_t r = root ? zeroc__sampler_create(zeroc_gpt_config(g), &s) : ZEROC_OK;
  r = zeroc_ctx_agree(ctx, r);
  if (!r) r = zeroc__gpt_collect(m, g, sampler_fill, s);
  if (r) {
    zeroc_sampler_destroy(s);
    return r;
  }
  *out = s;
  return ZEROC_OK;
}

/* The trainer's weights gathered to rank 0 (the export's consolidation) into a
 * sampler there. */
zeroc_result_t zeroc__gpt_run_sampler(void *self, zeroc_sampler_t **out) {
  zeroc__gpt_run_t *run = self;
  /* the gathers are not the next step's: out of its comm_bytes and exposed time */
  zeroc__eval_mark_t mark;
  zeroc__model_eval_mark(run->model, &mark);
  zeroc_result_t r = zeroc__gpt_sampler(run->model, run->gpt, out);
  zeroc__model_eval_unmark(run->model, &mark);
  return r;
}

/* The first half (at most) of the training data's first sequence. */
zeroc_result_t zeroc__gpt_run_sample_prompt(void *self, int max, int32_t *ids, int *n) {
  zeroc__gpt_run_t *run = self;
  int T = run->info->model.seq, k = max < T / 2 ? max : T / 2 > 0 ? T / 2 : 1;
  int32_t *seq = malloc(sizeof(int32_t) * ((size_t)T + 1));
  if (!seq) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "sample prompt (%d tokens)", T + 1);
  zeroc_result_t r = zeroc_data_read_sequence(run->data, 0, seq);
  if (!r) memcpy(ids, seq, sizeof(int32_t) * (size_t)k), *n = k;
  free(seq);
  return r;
}

/* The run's config.json: the shape, and the position table's rows as exported
 * (an imported table longer than seq goes back whole). */
static zeroc_result_t hf_config_write(void *self, char **json) {
  const zeroc__gpt_run_t *run = self;
  int tail = 0;
  zeroc__gpt_wpe_tail(run->gpt, &tail);
  return zeroc__gpt_hf_config_write(&run->info->model, run->info->model.seq + tail,
                                    run->info->config.dropout, json);
}

int zeroc__gpt_run_num_units(const zeroc_train_info_t *info) {
  return zeroc_gpt_num_units(&info->model);
}

void zeroc__gpt_run_unit_costs(const zeroc_train_info_t *info, double *cost) {
  zeroc_gpt_unit_costs(&info->model, cost);
}

void zeroc__gpt_run_unit_name(const zeroc_train_info_t *info, int u, char *buf, size_t n) {
  zeroc__gpt_unit_name(&info->model, u, buf, n);
}

static const char *const PRESETS[] = {"tiny",      "small",      "gpt2-124m", "gpt2-350m",
                                      "gpt2-774m", "gpt2-1558m", "custom",    NULL};

const zeroc_arch_t zeroc__arch_gpt2 = {
    .name = "gpt2",
    .presets = PRESETS,
    .resolve = resolve,
    .check = check,
    .num_units = zeroc__gpt_run_num_units,
    .unit_costs = zeroc__gpt_run_unit_costs,
    .unit_name = zeroc__gpt_run_unit_name,
    .print_schedule = zeroc__gpt_print_schedule,
    .create = zeroc__gpt_run_create,
    .destroy = zeroc__gpt_run_destroy,
    .model = zeroc__gpt_run_model,
    .pipeline = zeroc__gpt_run_pipeline,
    .run_step = zeroc__gpt_run_step,
    .evaluate = zeroc__gpt_evaluate,
    .comm_wait_s = zeroc__gpt_run_comm_wait_s,
    .app_json = zeroc__gpt_run_app_json,
    .resume_fields = RESUME_FIELDS,
    .import_weights = zeroc__gpt_run_import_weights,
    .export_weights = zeroc__gpt_run_export_weights,
    .sampler = zeroc__gpt_run_sampler,
    .sample_prompt = zeroc__gpt_run_sample_prompt,
    .hf_architectures = zeroc__gpt_hf_architectures,
    .hf_config_write = hf_config_write,
    .hf_config_read = zeroc__gpt_hf_config_read,
    .price_check = zeroc__gpt_price_check,
    .price_unit = zeroc__gpt_price_unit,
    .price_stage = zeroc__gpt_price_stage,
    .figures = zeroc__gpt_figures,
};
