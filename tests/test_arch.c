/*
 * test_arch.c - the model interface (zeroc/arch.h) and its registry: every
 * preset name finds its architecture and no other; every architecture
 * fills the functions the trainer calls unconditionally; the trainer builds,
 * steps, checkpoints and refuses through it for both built-in models (an
 * unknown model is refused naming every registered preset; a model without an
 * export is refused by name, not crashed on).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zeroc/zeroc.h"

static void test_registry(void) {
  const zeroc_arch_t *const *all = zeroc_arch_list();
  int n = 0, presets = 0;
  for (; all[n]; n++) {
    const zeroc_arch_t *a = all[n];
    ZT_ASSERT_MSG(a->name && a->presets && a->presets[0], "architecture %d has no name or presets",
                  n);
    /* what the trainer calls without asking */
    CU_ASSERT(a->resolve && a->check && a->create && a->destroy && a->model && a->pipeline &&
              a->run_step && a->evaluate && a->comm_wait_s && a->app_json && a->resume_fields);
    /* what the planner and the pipeline cutter call */
    CU_ASSERT(a->num_units && a->unit_costs && a->price_check && a->price_unit && a->price_stage &&
              a->figures);
    for (int p = 0; a->presets[p]; p++, presets++)
      ZT_ASSERT_MSG(zeroc_arch_find(a->presets[p]) == a, "preset %s finds another architecture",
                    a->presets[p]);
  }
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT(presets >= 17);
  CU_ASSERT_PTR_NULL(zeroc_arch_find(NULL));
  CU_ASSERT_PTR_NULL(zeroc_arch_find("llama"));
  CU_ASSERT_PTR_NULL(zeroc_arch_find(""));
  const zeroc_arch_t *g = zeroc_arch_find("tiny"), *d = zeroc_arch_find("dlrm-tiny");
  CU_ASSERT_FATAL(g && d && g != d);
  CU_ASSERT_STRING_EQUAL(g->name, "gpt2");
  CU_ASSERT_STRING_EQUAL(d->name, "dlrm");
  CU_ASSERT(g->import_weights && g->export_weights && g->sampler && g->sample_prompt);
  CU_ASSERT(!d->import_weights && !d->export_weights && !d->sampler && d->save_extra &&
            d->load_extra);
  /* the Llama family: its own table and presets, the decoder run's functions */
  const zeroc_arch_t *l = zeroc_arch_find("llama-tiny");
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_STRING_EQUAL(l->name, "llama");
  CU_ASSERT(zeroc_arch_find("qwen2.5-7b") == l && zeroc_arch_find("llama3.2-1b") == l);
  CU_ASSERT(l->create == g->create && l->run_step == g->run_step && l->resolve != g->resolve);
}

/* Resolve and check need no context: the shapes they give. */
static void test_resolve(void) {
  zeroc_mesh_info_t mesh;
  memset(&mesh, 0, sizeof mesh);
  mesh.world = mesh.dp = mesh.dp_shard = mesh.dp_replicate = mesh.tp = mesh.pp = mesh.cp = 1;
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  zeroc_train_info_t info;
  memset(&info, 0, sizeof info);
  c.model = "tiny";
  c.layers = 3;
  ZT_OK(zeroc_arch_find("tiny")->resolve(&c, &mesh, &info));
  CU_ASSERT_EQUAL(info.model.layers, 3);
  CU_ASSERT_EQUAL(c.seq, info.model.seq); /* written back */
  CU_ASSERT(c.seq > 0 && c.batch > 0);
  zeroc_train_config_t d = ZEROC_TRAIN_CONFIG_INIT;
  memset(&info, 0, sizeof info);
  d.model = "dlrm-tiny";
  d.rows = "10,20";
  CU_ASSERT_EQUAL(zeroc_arch_find("dlrm-tiny")->resolve(&d, &mesh, &info), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "rows '10,20'") != NULL, "message: %s",
                zeroc_last_error(NULL));
}

/* zeroc_train_config_resolve: the defaults, ZEROC_UNSET against real values, the
 * layout's defaults (zero and micro-batches with a pipeline) and the two namings. */
static void test_config_resolve(void) {
  zeroc_mesh_info_t one, pipe;
  ZT_OK(zeroc_mesh_layout_cp(1, 1, 1, 1, 1, 0, &one));
  ZT_OK(zeroc_mesh_layout_cp(4, 1, 1, 2, 1, 0, &pipe)); /* pp 2 x dp 2 */
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  zeroc_train_info_t in;
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_STRING_EQUAL(in.config.model, "tiny");
  CU_ASSERT(in.arch == zeroc_arch_find("tiny"));
  CU_ASSERT_EQUAL(in.config.steps, 100);
  CU_ASSERT_EQUAL(in.config.zero, 3);
  CU_ASSERT_EQUAL(in.config.grad_accum, 1);
  CU_ASSERT_EQUAL(in.config.prefetch, 2);
  CU_ASSERT_EQUAL(in.config.warmup, 0);
  CU_ASSERT_EQUAL(in.config.val_tokens, ZEROC_UNSET); /* no val_data: nothing to size */
  CU_ASSERT_DOUBLE_EQUAL(in.config.lr, 3e-4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(in.config.clip, 1.0, 0);
  CU_ASSERT_EQUAL(in.config.param_dtype, ZEROC_FP32);
  CU_ASSERT_EQUAL(in.dtype_given, ZEROC_UNSET);
  CU_ASSERT_EQUAL(in.global_batch, in.config.batch);
  CU_ASSERT_EQUAL(in.config.deterministic, 0); /* cuDNN's fast attention backward */
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CUDA, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_EQUAL(in.config.param_dtype, ZEROC_BF16);
  /* with a pipeline: ZeRO-1 and pp micro-batches, over dp 2 */
  ZT_OK(zeroc_train_config_resolve(&c, &pipe, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_EQUAL(in.config.zero, 1);
  CU_ASSERT_EQUAL(in.config.grad_accum, 2);
  CU_ASSERT_EQUAL(in.global_batch, in.config.batch * 2 * 2);
  /* a value is a value: 0 and negatives where they mean nothing are refused */
  c.steps = -1;
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "steps -1") != NULL, "message: %s",
                zeroc_last_error(NULL));
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.deterministic = 2;
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "deterministic 2: accepted 0 or 1") != NULL,
                "message: %s", zeroc_last_error(NULL));
  c.deterministic = 1;
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_EQUAL(in.config.deterministic, 1);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.eps = 0;
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.layers = 0;
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.val_data = "synthetic";
  c.val_tokens = 0; /* read as unset, as callers before ZEROC_UNSET wrote it */
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT_EQUAL(in.config.val_tokens, 65536);
  /* the model's rules, named by field or by flag */
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.heads = 3; /* tiny's hidden is not a multiple of 3 */
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "heads 3 must divide hidden") &&
                    !strstr(zeroc_last_error(NULL), "--heads"),
                "message: %s", zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_FLAGS, &in),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "--heads 3 must divide --hidden") != NULL,
                "message: %s", zeroc_last_error(NULL));
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.zero = 3; /* with a pipeline */
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &pipe, ZEROC_DEVICE_CPU, ZEROC_NAMES_FLAGS, &in),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "--zero 3 with --pp 2") != NULL, "message: %s",
                zeroc_last_error(NULL));
  /* DLRM: every rank data-parallel */
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.model = "dlrm-tiny";
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT(in.dlrm && in.config.val_tokens == 4096 && in.config.param_dtype == ZEROC_FP32);
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &pipe, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  /* not from the initializer */
  zeroc_train_config_t raw;
  memset(&raw, 0, sizeof raw);
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&raw, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, NULL, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in),
                  ZEROC_ERR_INVALID_ARG);
}

static int run_trainer(zeroc_ctx_t *ctx, const char *model, const char *save, const char *resume,
                       double *loss) {
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = model;
  c.steps = 4;
  c.lr = 1e-2;
  c.save = save;
  c.resume = resume;
  zeroc_trainer_t *tr = NULL;
  zeroc_result_t r = zeroc_trainer_create(ctx, &c, &tr);
  ZT_ASSERT_MSG(r == ZEROC_OK, "%s: %s", model, zeroc_last_error(ctx));
  if (r) return -1;
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  CU_ASSERT(in.arch == zeroc_arch_find(model));
  zeroc_train_metrics_t m;
  int steps = 0;
  while (zeroc_trainer_step(tr, &m) == ZEROC_OK && m.step) steps++, *loss = m.loss;
  if (steps) CU_ASSERT(isfinite(*loss));
  if (save) ZT_OK(zeroc_trainer_save(tr, save));
  if (in.dlrm) { /* no export: refused by name */
    CU_ASSERT_EQUAL(zeroc_trainer_export(tr, "/tmp/never.safetensors"), ZEROC_ERR_UNSUPPORTED);
    zeroc_sampler_t *s = NULL;
    CU_ASSERT_EQUAL(zeroc_sampler_from_trainer(tr, &s), ZEROC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(s);
  }
  zeroc_trainer_destroy(tr);
  return steps;
}

/* Both models through the interface: steps, a checkpoint, a resume of it
 * that does no step (its losses were all taken) and the refusals. */
/* The planner asks the model through the interface: the GPT's units and FLOPs
 * as zeroc_plan_compute reports them, and a rule written once (shard/rules.c,
 * lm_rules.c) gives the same message to zeroc train's config and to the plan. */
static void test_planner_interface(void) {
  const zeroc_arch_t *g = zeroc_arch_find("gpt2-124m");
  zeroc_train_info_t info;
  memset(&info, 0, sizeof info);
  ZT_OK(zeroc_gpt_preset("gpt2-124m", &info.model));
  info.model.batch = 4;
  CU_ASSERT_EQUAL(g->num_units(&info), info.model.layers + 2);
  zeroc_arch_layout_t L = {.tp = 1,
                           .pp = 1,
                           .vpp = 1,
                           .cp = 1,
                           .shard = 1,
                           .batch = 4,
                           .microbatches = 1,
                           .act_bytes = 2,
                           .flash_attention = 1,
                           .device = ZEROC_DEVICE_AUTO,
                           .ranks = 1};
  double sum = 0;
  int blocks = 0, outputs = 0, pinned = 0;
  for (int u = 0; u < g->num_units(&info); u++) {
    zeroc_arch_unit_price_t up;
    g->price_unit(&info, &L, u, &up);
    sum += up.params;
    blocks += up.block, outputs += up.output, pinned += up.pinned;
  }
  /* the units' parameters are the model's (the head shares the embedding on one
   * stage), wte with its vocabulary padded to a multiple of 64 rows */
  double pad = (double)((info.model.vocab + 63) / 64 * 64 - info.model.vocab) * info.model.hidden;
  CU_ASSERT_DOUBLE_EQUAL(sum, (double)zeroc_gpt_num_params(&info.model) + pad, 0.5);
  CU_ASSERT_EQUAL(blocks, 12);
  CU_ASSERT_EQUAL(outputs, 1);
  CU_ASSERT_EQUAL(pinned, 1);
  zeroc_arch_figures_t f;
  g->figures(&info, 8, 0, &f);
  CU_ASSERT_DOUBLE_EQUAL(f.flops_executed,
                         zeroc_plan_flops_megatron(&info.model, 8, ZEROC_RECOMPUTE_NONE), 1);
  CU_ASSERT_DOUBLE_EQUAL(f.tokens, 8.0 * info.model.seq, 0);
  zeroc_plan_config_t pc = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t r;
  pc.model = info.model;
  pc.gpus = 1;
  ZT_OK(zeroc_plan_compute(&pc, &r));
  CU_ASSERT_EQUAL(r.params, f.params);
  /* the same rule, the same words: a pipeline allows ZeRO 0 or 1 */
  pc.gpus = 2;
  pc.pp = 2;
  pc.zero = 3;
  char plan_msg[512], train_msg[512];
  CU_ASSERT_EQUAL(zeroc_plan_config_check(&pc, ZEROC_NAMES_FLAGS, NULL), ZEROC_ERR_INVALID_ARG);
  snprintf(plan_msg, sizeof plan_msg, "%s", zeroc_last_error(NULL));
  zeroc_mesh_info_t pipe;
  ZT_OK(zeroc_mesh_layout_cp(2, 1, 1, 2, 1, 0, &pipe));
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  zeroc_train_info_t in;
  c.zero = 3;
  CU_ASSERT_EQUAL(zeroc_train_config_resolve(&c, &pipe, ZEROC_DEVICE_CPU, ZEROC_NAMES_FLAGS, &in),
                  ZEROC_ERR_INVALID_ARG);
  snprintf(train_msg, sizeof train_msg, "%s", zeroc_last_error(NULL));
  const char *want = "--zero 3 with --pp 2: pipeline parallelism keeps";
  ZT_ASSERT_MSG(strstr(plan_msg, want) && strstr(train_msg, want), "plan: %s; train: %s", plan_msg,
                train_msg);
  /* the same default: ZeRO-1 and pp micro-batches with a pipeline */
  pc.zero = ZEROC_UNSET;
  zeroc_plan_config_t res;
  ZT_OK(zeroc_plan_config_check(&pc, ZEROC_NAMES_CONFIG, &res));
  CU_ASSERT_EQUAL(res.zero, 1);
  CU_ASSERT_EQUAL(res.microbatches, 2);
  /* the model's rule, by field or by flag */
  pc.pp = 1;
  pc.tp = 2;
  pc.model.heads = 3;
  pc.model.hidden = 768;
  CU_ASSERT_EQUAL(zeroc_plan_config_check(&pc, ZEROC_NAMES_CONFIG, NULL), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "tp 2 must divide the 3 attention heads (heads)") &&
                    !strstr(zeroc_last_error(NULL), "--"),
                "message: %s", zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc_plan_config_check(&pc, ZEROC_NAMES_FLAGS, NULL), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(
      strstr(zeroc_last_error(NULL), "--tp 2 must divide the 3 attention heads (--heads)"),
      "message: %s", zeroc_last_error(NULL));
  CU_ASSERT_EQUAL(zeroc_plan_config_check(&pc, 7, NULL), ZEROC_ERR_INVALID_ARG);
}

/* A transformers config.json both ways (the GPT's hf hooks): transformers' own
 * (tests/fixtures/hf_gpt2, saved by transformers) gives its shape; a setting
 * that contradicts it, a key the GPT cannot honour and a seq beyond the
 * positions are refused naming them; what the GPT writes reads back. */
static void test_hf_config(void) {
  const zeroc_arch_t *g = zeroc_arch_find_hf("GPT2LMHeadModel");
  CU_ASSERT_FATAL(g != NULL);
  CU_ASSERT(g == zeroc_arch_find("gpt2-124m"));
  CU_ASSERT_PTR_NULL(zeroc_arch_find_hf("BertModel"));
  CU_ASSERT_PTR_NULL(zeroc_arch_find_hf(NULL));
  CU_ASSERT(g->hf_config_write && g->hf_config_read);
  char buf[8192];
  FILE *f = fopen(ZT_FIXTURES "/hf_gpt2/config.json", "rb");
  CU_ASSERT_FATAL(f != NULL);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  ZT_OK(g->hf_config_read(buf, n, &c, ZEROC_NAMES_CONFIG));
  CU_ASSERT_STRING_EQUAL(c.model, "custom");
  CU_ASSERT(c.layers == 2 && c.hidden == 32 && c.heads == 4 && c.vocab == 256 && c.seq == 32);
  /* the shape resolves as any custom model */
  zeroc_mesh_info_t one;
  zeroc_train_info_t in;
  ZT_OK(zeroc_mesh_layout_cp(1, 1, 1, 1, 1, 0, &one));
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT(in.model.layers == 2 && in.model.hidden == 32 && in.model.seq == 32);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.layers = 3;
  CU_ASSERT_EQUAL(g->hf_config_read(buf, n, &c, ZEROC_NAMES_FLAGS), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "--layers 3 contradicts config.json \"n_layer\" 2"),
                "message: %s", zeroc_last_error(NULL));
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.seq = 64;
  CU_ASSERT_EQUAL(g->hf_config_read(buf, n, &c, ZEROC_NAMES_FLAGS), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "--seq 64: accepted up to config.json"),
                "message: %s", zeroc_last_error(NULL));
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.model = "gpt2-124m"; /* a preset of another shape */
  CU_ASSERT_EQUAL(g->hf_config_read(buf, n, &c, ZEROC_NAMES_FLAGS), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "--model gpt2-124m"), "message: %s",
                zeroc_last_error(NULL));
  /* keys the GPT cannot honour */
  const char *bad[] = {"\"activation_function\": \"relu\"", "\"tie_word_embeddings\": false",
                       "\"n_inner\": 100", "\"layer_norm_epsilon\": 1e-6"};
  const char *key[] = {"activation_function", "tie_word_embeddings", "n_inner",
                       "layer_norm_epsilon"};
  for (int k = 0; k < 4; k++) {
    char j[512];
    snprintf(j, sizeof j,
             "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_layer\": 2, \"n_embd\": 32, "
             "\"n_head\": 4, \"vocab_size\": 256, \"n_positions\": 32, %s}",
             bad[k]);
    c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
    CU_ASSERT_EQUAL(g->hf_config_read(j, strlen(j), &c, ZEROC_NAMES_CONFIG), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), key[k]), "%s: %s", key[k], zeroc_last_error(NULL));
  }
  const char *other = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\"}";
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  CU_ASSERT_EQUAL(g->hf_config_read(other, strlen(other), &c, ZEROC_NAMES_CONFIG),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "not a GPT2LMHeadModel"), "message: %s",
                zeroc_last_error(NULL));
}

/* The Llama family's config.json (llama_arch.c's hf hooks): transformers 5's own
 * (tests/fixtures/hf_llama: rope_parameters) and the spelling of earlier files
 * (rope_theta and rope_scaling, as published Llama 3 configs have it) give the same
 * shape; Qwen2's class gives q/k/v biases; a contradicting setting and the keys zeroc
 * cannot honour are refused naming them. */
static void read_fixture(const char *path, char *buf, size_t cap, size_t *n) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_FATAL(f != NULL);
  *n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[*n] = 0;
}

static void test_hf_config_llama(void) {
  const zeroc_arch_t *a = zeroc_arch_find_hf("LlamaForCausalLM");
  CU_ASSERT_FATAL(a != NULL);
  CU_ASSERT(a == zeroc_arch_find("llama-tiny") && a == zeroc_arch_find_hf("Qwen2ForCausalLM"));
  CU_ASSERT(a->hf_config_write && a->hf_config_read);
  char buf[8192];
  size_t n;
  read_fixture(ZT_FIXTURES "/hf_llama/config.json", buf, sizeof buf, &n);
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  ZT_OK(a->hf_config_read(buf, n, &c, ZEROC_NAMES_CONFIG));
  CU_ASSERT_STRING_EQUAL(c.model, "llama-custom");
  CU_ASSERT(c.layers == 2 && c.hidden == 32 && c.heads == 4 && c.kv_heads == 2 && c.ffn == 64 &&
            c.vocab == 256 && c.seq == 64 && c.max_positions == 64);
  CU_ASSERT(c.qkv_bias == 0 && c.untied == 1 && c.norm_eps == 1e-5 && c.rope_theta == 5e5);
  CU_ASSERT(c.rope_factor == 8 && c.rope_low == 1 && c.rope_high == 4 && c.rope_original == 32);
  zeroc_mesh_info_t one;
  zeroc_train_info_t in;
  ZT_OK(zeroc_mesh_layout_cp(1, 1, 1, 1, 1, 0, &one));
  ZT_OK(zeroc_train_config_resolve(&c, &one, ZEROC_DEVICE_CPU, ZEROC_NAMES_CONFIG, &in));
  CU_ASSERT(in.model.family == ZEROC_GPT_FAMILY_LLAMA && in.model.kv_heads == 2 &&
            in.model.untied == 1 && in.model.rope_original == 32);
  /* the same model as earlier transformers wrote it */
  const char *legacy =
      "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32, \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 64, "
      "\"vocab_size\": 256, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, "
      "\"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, "
      "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 32, \"rope_type\": "
      "\"llama3\"}, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\"}";
  zeroc_train_config_t l = ZEROC_TRAIN_CONFIG_INIT;
  ZT_OK(a->hf_config_read(legacy, strlen(legacy), &l, ZEROC_NAMES_CONFIG));
  CU_ASSERT(l.layers == c.layers && l.kv_heads == c.kv_heads && l.ffn == c.ffn &&
            l.untied == c.untied && l.rope_theta == c.rope_theta &&
            l.rope_factor == c.rope_factor && l.rope_original == c.rope_original);
  read_fixture(ZT_FIXTURES "/hf_qwen2/config.json", buf, sizeof buf, &n);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  ZT_OK(a->hf_config_read(buf, n, &c, ZEROC_NAMES_CONFIG));
  CU_ASSERT(c.qkv_bias == 1 && c.untied == 0 && c.rope_theta == 1e6 && c.rope_factor == 0);
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.kv_heads = 4;
  CU_ASSERT_EQUAL(a->hf_config_read(buf, n, &c, ZEROC_NAMES_FLAGS), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL),
                       "--kv-heads 4 contradicts config.json \"num_key_value_heads\" 2"),
                "message: %s", zeroc_last_error(NULL));
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  c.rope_theta = 1e4;
  CU_ASSERT_EQUAL(a->hf_config_read(buf, n, &c, ZEROC_NAMES_CONFIG), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "rope_theta 10000 contradicts"), "message: %s",
                zeroc_last_error(NULL));
  /* keys zeroc's Llama cannot honour, each refused by name */
  const char *bad[] = {"\"hidden_act\": \"gelu\"", "\"attention_bias\": true", "\"mlp_bias\": true",
                       "\"head_dim\": 16",
                       "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}"};
  const char *key[] = {"hidden_act", "attention_bias", "mlp_bias", "head_dim", "linear"};
  for (int k = 0; k < 5; k++) {
    char j[512];
    snprintf(j, sizeof j,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 64, "
             "\"vocab_size\": 256, \"max_position_embeddings\": 64, %s}",
             bad[k]);
    c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
    CU_ASSERT_EQUAL(a->hf_config_read(j, strlen(j), &c, ZEROC_NAMES_CONFIG), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), key[k]), "%s: %s", key[k], zeroc_last_error(NULL));
  }
  const char *swa = "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 32, "
                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": "
                    "64, \"vocab_size\": 256, \"max_position_embeddings\": 64, "
                    "\"use_sliding_window\": true}";
  c = (zeroc_train_config_t)ZEROC_TRAIN_CONFIG_INIT;
  CU_ASSERT_EQUAL(a->hf_config_read(swa, strlen(swa), &c, ZEROC_NAMES_CONFIG),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "use_sliding_window"), "message: %s",
                zeroc_last_error(NULL));
}

static void test_trainer_both(void) {
  zeroc_ctx_t *ctx = zt_ctx(1, 1, 1);
  if (!ctx) return;
  const char *models[] = {"tiny", "dlrm-tiny"};
  for (int k = 0; k < 2; k++) {
    char dir[256] = ""; /* rank 0's temporary directory, the same on every rank */
    if (zt_rank() == 0) {
      char *d = zt_tempdir("zeroc-arch");
      snprintf(dir, sizeof dir, "%s", d ? d : "");
      free(d);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    CU_ASSERT_FATAL(dir[0] != 0);
    double loss = NAN, again = NAN;
    CU_ASSERT_EQUAL(run_trainer(ctx, models[k], dir, NULL, &loss), 4);
    CU_ASSERT_EQUAL(run_trainer(ctx, models[k], NULL, dir, &again), 0); /* resumed at its end */
    MPI_Barrier(MPI_COMM_WORLD);
    if (zt_rank() == 0) zt_rmtree(dir);
  }
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.model = "llama3-1b";
  zeroc_trainer_t *tr = NULL;
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  const char *e = zeroc_last_error(ctx);
  ZT_ASSERT_MSG(strstr(e, "model 'llama3-1b' unknown") && strstr(e, "gpt2-124m") &&
                    strstr(e, "dlrm-mlperf"),
                "message: %s", e);
  c.model = "dlrm-tiny";
  c.init = "/nonexistent.safetensors";
  CU_ASSERT_EQUAL(zeroc_trainer_create(ctx, &c, &tr), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(ctx), "--init") != NULL, "message: %s",
                zeroc_last_error(ctx));
  zeroc_ctx_finalize(ctx);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"every preset finds its architecture; the tables are complete", test_registry},
      {"resolve: a preset with overrides, without a context", test_resolve},
      {"zeroc_train_config_resolve: defaults, ZEROC_UNSET, layout, names", test_config_resolve},
      {"the planner through the interface: units, FLOPs, one rule, one default",
       test_planner_interface},
      {"a transformers config.json: the fixture's shape, contradictions, refusals", test_hf_config},
      {"Llama and Qwen2 config.json: both rope spellings, contradictions, refusals",
       test_hf_config_llama},
      {"the trainer through the interface: GPT and DLRM, checkpoints, refusals", test_trainer_both},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "arch", tests, 1, 0);
}
