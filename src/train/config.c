/*
 * train/config.c - zeroc_train_config_resolve: a training config's defaults and
 * rules, applied once, in one place, for the trainer, `zeroc train` before MPI
 * starts, `zeroc plan` and `zeroc bench`. Every numeric field's "unset" is
 * ZEROC_UNSET; strings are NULL; the enums have their _DEFAULT. The model's own
 * shape, defaults and layout rules are its architecture's (zeroc/arch.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"
#include "model/arch_registry.h"
#include "shard/rules.h"
#include "train/config.h"

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)
#define UNSET    ZEROC_UNSET

/* Copies a caller's versioned config over the "unset" initializer: an older,
 * smaller struct keeps the sentinels for the fields it lacks; a struct that
 * was not initialised with ZEROC_TRAIN_CONFIG_INIT is rejected. */
static zeroc_result_t read_config(const zeroc_train_config_t *in, zeroc_train_config_t *out) {
  const zeroc_train_config_t dflt = ZEROC_TRAIN_CONFIG_INIT;
  *out = dflt;
  if (!in || in->magic != ZEROC_CONFIG_MAGIC ||
      in->size < offsetof(zeroc_train_config_t, model) + sizeof(const char *) || in->size > 65536)
    return BAD("zeroc_train_config_t was not initialised with ZEROC_TRAIN_CONFIG_INIT "
               "(size %zu, magic 0x%x)",
               in ? in->size : 0, in ? in->magic : 0);
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  return ZEROC_OK;
}

/* A field that is either unset or at least `lo`. */
#define MIN_OR_UNSET(f, lo, what)                                                                  \
  do {                                                                                             \
    if (c->f != UNSET && c->f < (lo))                                                              \
      return BAD("%s %lld: accepted %s (or ZEROC_UNSET: %s)", #f, (long long)c->f, what,           \
                 "the default");                                                                   \
  } while (0)
#define REAL_OR_UNSET(f, ok, what)                                                                 \
  do {                                                                                             \
    if (c->f != UNSET && !(ok))                                                                    \
      return BAD("%s %g: accepted %s (or ZEROC_UNSET: the default)", #f, c->f, what);              \
  } while (0)

/* What a field allows on its own, before any default replaces ZEROC_UNSET. */
static zeroc_result_t check_fields(const zeroc_train_config_t *c) {
  MIN_OR_UNSET(layers, 1, ">= 1");
  MIN_OR_UNSET(hidden, 1, ">= 1");
  MIN_OR_UNSET(heads, 1, ">= 1");
  MIN_OR_UNSET(vocab, 1, ">= 1");
  MIN_OR_UNSET(seq, 1, ">= 1");
  MIN_OR_UNSET(batch, 1, ">= 1");
  MIN_OR_UNSET(grad_accum, 1, ">= 1");
  MIN_OR_UNSET(steps, 0, ">= 0");
  MIN_OR_UNSET(warmup, 0, ">= 0");
  MIN_OR_UNSET(seed, 0, ">= 0");
  MIN_OR_UNSET(max_skipped, 0, ">= 0");
  MIN_OR_UNSET(prefetch, 0, ">= 0");
  MIN_OR_UNSET(vpp, 1, "1..64");
  MIN_OR_UNSET(save_every, 0, ">= 0");
  MIN_OR_UNSET(save_limit, 0, ">= 0 (0: keep every checkpoint)");
  MIN_OR_UNSET(spike_window, 2, "2..1024");
  MIN_OR_UNSET(val_tokens, 1, "1..1e12");
  MIN_OR_UNSET(val_every, 0, ">= 0 (0: never)");
  MIN_OR_UNSET(tables, 1, ">= 1");
  MIN_OR_UNSET(dim, 1, ">= 1");
  MIN_OR_UNSET(dense, 1, ">= 1");
  MIN_OR_UNSET(embedding_sharding, 0, "0 auto, 1 table, 2 column, 3 row, 4 data");
  MIN_OR_UNSET(kv_heads, 1, ">= 1, dividing heads");
  MIN_OR_UNSET(ffn, 1, ">= 1");
  MIN_OR_UNSET(qkv_bias, 0, "0 or 1");
  MIN_OR_UNSET(untied, 0, "0 or 1");
  MIN_OR_UNSET(max_positions, 1, ">= seq");
  REAL_OR_UNSET(norm_eps, c->norm_eps > 0 && c->norm_eps < 1, "0 < norm_eps < 1");
  REAL_OR_UNSET(rope_theta, c->rope_theta > 1 && c->rope_theta < 1e12, "1 < rope_theta < 1e12");
  REAL_OR_UNSET(rope_factor, c->rope_factor >= 0 && c->rope_factor < 1e6,
                "0 (no scaling) or 1 <= factor < 1e6");
  REAL_OR_UNSET(rope_low, c->rope_low >= 0 && c->rope_low < 1e6, "0 <= rope_low < 1e6");
  REAL_OR_UNSET(rope_high, c->rope_high >= 0 && c->rope_high < 1e6, "0 <= rope_high < 1e6");
  REAL_OR_UNSET(rope_original, c->rope_original >= 0 && c->rope_original < 1e9,
                "0 <= rope_original < 1e9");
  REAL_OR_UNSET(lr, c->lr >= 0 && isfinite(c->lr), ">= 0");
  REAL_OR_UNSET(weight_decay, c->weight_decay >= 0 && isfinite(c->weight_decay), ">= 0");
  REAL_OR_UNSET(clip, c->clip >= 0, ">= 0 (0: off)");
  REAL_OR_UNSET(beta1, c->beta1 >= 0 && c->beta1 < 1, "0 <= beta1 < 1");
  REAL_OR_UNSET(beta2, c->beta2 >= 0 && c->beta2 < 1, "0 <= beta2 < 1");
  REAL_OR_UNSET(eps, c->eps > 0 && c->eps < 1, "0 < eps < 1");
  REAL_OR_UNSET(spike_z, c->spike_z > 0, "> 0");
  REAL_OR_UNSET(dropout, c->dropout >= 0 && c->dropout < 1, "0 <= dropout < 1");
  const int flags[] = {c->recompute, c->sequence_parallel, c->shuffle, c->reduce_maxima,
                       c->deterministic};
  const char *const fnames[] = {"recompute", "sequence_parallel", "shuffle", "reduce_maxima",
                                "deterministic"};
  for (int k = 0; k < 5; k++)
    if (flags[k] != UNSET && flags[k] != 0 && flags[k] != 1)
      return BAD("%s %d: accepted 0 or 1 (or ZEROC_UNSET: 0)", fnames[k], flags[k]);
  return ZEROC_OK;
}

/* The library's defaults for every field the model's resolve left unset. */
static void defaults(zeroc_train_config_t *c, const zeroc_mesh_info_t *mesh,
                     zeroc_device_kind_t device) {
#define DFLT(f, v)                                                                                 \
  if (c->f == UNSET) c->f = (v)
  DFLT(steps, 100);
  DFLT(lr, 3e-4);
  DFLT(warmup, 0);
  if (c->schedule == ZEROC_LR_DEFAULT) c->schedule = ZEROC_LR_COSINE;
  DFLT(weight_decay, 0.0);
  DFLT(clip, 1.0);
  DFLT(beta1, 0.9);
  DFLT(beta2, 0.95);
  DFLT(eps, 1e-8);
  DFLT(seed, 1);
  DFLT(max_skipped, 5);
  DFLT(zero, zeroc__shard_default_stage(mesh->pp)); /* shard/rules.c */
  DFLT(param_dtype, device == ZEROC_DEVICE_CUDA ? ZEROC_BF16 : ZEROC_FP32);
  DFLT(grad_reduce_dtype, ZEROC_FP32);
  DFLT(recompute, 0);
  DFLT(prefetch, 2);
  DFLT(sequence_parallel, 0);
  DFLT(vpp, 1);
  if (c->pp_schedule == ZEROC_PIPELINE_DEFAULT) c->pp_schedule = ZEROC_PIPELINE_1F1B;
  DFLT(grad_accum, mesh->pp > 1 ? mesh->pp : 1); /* a pipeline's micro-batches */
  if (!c->data) c->data = "synthetic";
  DFLT(shuffle, 0);
  DFLT(save_every, 0);
  DFLT(save_limit, 0);
  DFLT(spike_window, 50);
  DFLT(spike_z, 6.0);
  DFLT(reduce_maxima, 0);
  DFLT(deterministic, 0);
  DFLT(val_every, 0);
  DFLT(dropout, 0.0);
  DFLT(embedding_sharding, 0);
  if (c->val_data) DFLT(val_tokens, 65536);
#undef DFLT
}

/* What the resolved fields allow together, then what the mesh and the model
 * allow (the architecture's check). */
static zeroc_result_t check_config(const zeroc_arch_t *arch, const zeroc_train_config_t *c,
                                   const zeroc_mesh_info_t *mesh, zeroc_names_t names,
                                   const zeroc_train_info_t *info) {
  int pp = mesh->pp, il = c->pp_schedule == ZEROC_PIPELINE_INTERLEAVED;
  if (c->spike_window > ZEROC_SPIKE_MAX_WINDOW)
    return BAD("spike_window %d: accepted 2..%d", c->spike_window, ZEROC_SPIKE_MAX_WINDOW);
  if (c->param_dtype != ZEROC_FP32 && c->param_dtype != ZEROC_BF16)
    return BAD("param_dtype %d: accepted ZEROC_FP32, ZEROC_BF16", c->param_dtype);
  if (c->grad_reduce_dtype != ZEROC_FP32 && c->grad_reduce_dtype != ZEROC_BF16)
    return BAD("%s %d: accepted ZEROC_FP32, ZEROC_BF16",
               names == ZEROC_NAMES_FLAGS ? "--grad-reduce-dtype" : "grad_reduce_dtype",
               c->grad_reduce_dtype);
  ZEROC_CHECK(zeroc__shard_check_stage(c->zero, "zero"));
  if (c->vpp > 64) return BAD("vpp %d: accepted 1..64", c->vpp);
  if (pp == 1 && c->vpp > 1) return BAD("vpp %d is for a pipeline (pp > 1)", c->vpp);
  if ((unsigned)c->cp_mode > ZEROC_CP_MODE_ULYSSES)
    return BAD("cp_mode %d: accepted ZEROC_CP_MODE_RING, ZEROC_CP_MODE_ULYSSES", (int)c->cp_mode);
  if ((unsigned)c->schedule > ZEROC_LR_LINEAR)
    return BAD("schedule %d: accepted ZEROC_LR_CONSTANT, ZEROC_LR_COSINE, ZEROC_LR_LINEAR",
               (int)c->schedule);
  if ((unsigned)c->offload_optimizer > ZEROC_OFFLOAD_NVME ||
      (unsigned)c->offload_params > ZEROC_OFFLOAD_NVME)
    return BAD("offload_optimizer %d, offload_params %d: accepted ZEROC_OFFLOAD_NONE, _CPU, _NVME",
               (int)c->offload_optimizer, (int)c->offload_params);
  if (c->save_limit > 0 && !c->save)
    return BAD("%s %d needs %s", names == ZEROC_NAMES_FLAGS ? "--save-limit" : "save_limit",
               c->save_limit, names == ZEROC_NAMES_FLAGS ? "--save DIR" : "save");
  if (pp > 1 && !il && c->pp_schedule != ZEROC_PIPELINE_1F1B)
    return BAD("pp_schedule %d: accepted 1F1B, INTERLEAVED", (int)c->pp_schedule);
  return arch->check(c, mesh, info, names);
}

/* The architecture a config.json's "architectures" names (the first one a
 * registered model reads). */
static zeroc_result_t hf_arch(const char *json, size_t n, const char *path,
                              const zeroc_arch_t **out) {
  zeroc__json_doc_t *doc = NULL;
  ZEROC_CHECK(zeroc__json_parse(json, n, path, &doc));
  const zeroc__json_t *a = zeroc__json_get(zeroc__json_root(doc), "architectures");
  *out = NULL;
  for (size_t i = 0; a && a->type == ZEROC_JSON_ARRAY && i < a->u.arr.n && !*out; i++)
    if (a->u.arr.items[i].type == ZEROC_JSON_STRING)
      *out = zeroc_arch_find_hf(a->u.arr.items[i].u.str.s);
  zeroc__json_free(doc);
  if (*out) return ZEROC_OK;
  char list[256];
  zeroc__arch_hf_list(list, sizeof list);
  return BAD("init '%s': its \"architectures\" names no model zeroc has (accepted: %s)", path,
             list);
}

/* init naming a directory (transformers' save_pretrained: config.json and
 * model.safetensors, or its shards and index): the model and its shape come from config.json,
 * through the architecture that reads its class; a model or size given beside it must agree (the
 * architecture's hf_config_read says which). */
static zeroc_result_t init_dir(zeroc_train_config_t *c, zeroc_names_t names) {
  struct stat st;
  if (!c->init || stat(c->init, &st) || !S_ISDIR(st.st_mode)) return ZEROC_OK;
  char path[4200], *json = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/config.json", c->init);
  ZEROC_CHECK(zeroc__file_read(path, 1 << 20, &json, &n));
  const zeroc_arch_t *a = NULL;
  zeroc_result_t r = hf_arch(json, n, path, &a);
  if (!r && c->model && zeroc_arch_find(c->model) != a)
    r = BAD("%s %s contradicts '%s', a %s model", names == ZEROC_NAMES_FLAGS ? "--model" : "model",
            c->model, path, a->name);
  if (!r) r = a->hf_config_read(json, n, c, names);
  free(json);
  return r;
}

zeroc_result_t zeroc_train_config_resolve(const zeroc_train_config_t *cfg,
                                          const zeroc_mesh_info_t *mesh, zeroc_device_kind_t device,
                                          zeroc_names_t names, zeroc_train_info_t *out) {
  if (!mesh || !out) return BAD("zeroc_train_config_resolve: NULL %s", mesh ? "out" : "mesh");
  if ((unsigned)names > ZEROC_NAMES_FLAGS)
    return BAD("names %d: accepted ZEROC_NAMES_CONFIG, ZEROC_NAMES_FLAGS", (int)names);
  if (device != ZEROC_DEVICE_CPU && device != ZEROC_DEVICE_CUDA)
    return BAD("device %d: accepted ZEROC_DEVICE_CPU, ZEROC_DEVICE_CUDA", (int)device);
  memset(out, 0, sizeof *out);
  out->device = device;
  zeroc_train_config_t *c = &out->config;
  ZEROC_CHECK(read_config(cfg, c));
  out->dtype_given = c->param_dtype; /* checkpoints record what was asked for */
  /* an evaluation of no tokens means nothing: callers before ZEROC_UNSET wrote 0 for "unset" */
  if (c->val_tokens == 0) c->val_tokens = ZEROC_UNSET;
  ZEROC_CHECK(check_fields(c));
  ZEROC_CHECK(init_dir(c, names)); /* --init DIR: the shape from its config.json */
  if (!c->model) c->model = "tiny";
  const zeroc_arch_t *arch = out->arch = zeroc_arch_find(c->model);
  if (!arch) {
    char list[512];
    zeroc__arch_preset_list(list, sizeof list);
    return BAD("model '%s' unknown; accepted: %s", c->model, list);
  }
  ZEROC_CHECK(arch->resolve(c, mesh, out)); /* the shape, and the model's own defaults */
  defaults(c, mesh, device);
  ZEROC_CHECK(check_config(arch, c, mesh, names, out));
  out->dtype = (zeroc_dtype_t)c->param_dtype;
  out->global_batch = c->batch * c->grad_accum * mesh->dp;
  return ZEROC_OK;
}

/* The shard engine's settings of a resolved config, parameters in `dtype`. */
zeroc_shard_config_t zeroc__train_shard_config(const zeroc_train_config_t *c, zeroc_dtype_t dtype) {
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.stage = c->zero;
  sc.param_dtype = dtype;
  sc.reduce_dtype = (zeroc_dtype_t)c->grad_reduce_dtype; /* fp32 unless bf16 was asked */
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

zeroc_result_t zeroc_train_print_schedule(FILE *f, const zeroc_train_info_t *info, int pp, int tp,
                                          zeroc_dtype_t act_dtype) {
  if (!f || !info || !info->arch)
    return BAD("zeroc_train_print_schedule: NULL file or an unresolved info");
  if (!info->arch->print_schedule)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "model %s has no pipeline schedule",
                      info->config.model);
  return info->arch->print_schedule(f, info, pp, tp, act_dtype);
}
