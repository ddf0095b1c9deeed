/*
 * zeroc/gpt.h - the built-in decoder-only transformer: its shape, the named
 * presets, and the model as zeroc layers. Two families share it, as
 * Megatron-Core's GPTModel builds both from one config:
 *
 * GPT-2 (family ZEROC_GPT_FAMILY_GPT2) exactly: learned token and position
 * embeddings, pre-LayerNorm blocks, causal multi-head attention, MLP of width
 * 4C with tanh GELU, biases on every linear and LayerNorm, final LayerNorm, LM
 * head tied to the token embedding.
 *
 * Llama (ZEROC_GPT_FAMILY_LLAMA: Llama 3, Qwen2, as transformers'
 * LlamaForCausalLM and Qwen2ForCausalLM): token embedding, pre-RMSNorm blocks,
 * rotary position embeddings (rotate-half, rope_theta, Llama 3.1's llama3
 * scaling), causal grouped-query attention (kv_heads), no biases but optional
 * ones on q, k and v (Qwen2), a SwiGLU MLP of width ffn (gate, up, down), a
 * final RMSNorm, and the LM head tied to the embedding or its own (untied).
 */
#ifndef ZEROC_GPT_H
#define ZEROC_GPT_H

#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"
#include "zeroc/layer.h"
#include "zeroc/result.h"
#include "zeroc/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest vocabulary (token ids are int32). */
#define ZEROC_GPT_VOCAB_MAX (1 << 24)

/* The decoder's family (zeroc_gpt_config_t.family). */
typedef enum zeroc_gpt_family {
  ZEROC_GPT_FAMILY_GPT2 = 0,  /* GPT-2: every Llama field below is 0 */
  ZEROC_GPT_FAMILY_LLAMA = 1, /* Llama 3, Qwen2 */
} zeroc_gpt_family_t;

typedef struct zeroc_gpt_config {
  int layers; /* L */
  int hidden; /* C */
  int heads;  /* NH, divides C */
  int vocab;  /* V */
  int seq;    /* T, the context length (max sequence) */
  int batch;  /* default micro-batch per data-parallel rank */
  /* ---- the Llama family (family ZEROC_GPT_FAMILY_LLAMA); all 0 for GPT-2 ---- */
  int family;        /* zeroc_gpt_family_t */
  int kv_heads;      /* NKV key/value heads (num_key_value_heads), divides heads */
  int ffn;           /* F, the SwiGLU MLP's width (intermediate_size) */
  int qkv_bias;      /* 1: the q, k and v projections have biases (Qwen2) */
  int untied;        /* 1: the LM head has its own weight (tie_word_embeddings false) */
  double norm_eps;   /* RMSNorm's epsilon (rms_norm_eps), 0 < eps < 1 */
  double rope_theta; /* the rotary base (rope_theta), > 1 */
  /* Llama 3.1's "llama3" rope scaling (transformers' rope_scaling): factor >= 1, 0 for
   * none; low_freq_factor < high_freq_factor; original_max_position_embeddings */
  double rope_factor, rope_low, rope_high, rope_original;
} zeroc_gpt_config_t;

/*
 * Fills `out` with a named preset: GPT-2's "tiny" (trains in about a minute on
 * 2 CPU cores), "small", "gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1558m";
 * the Llama family's "llama-tiny" (grouped-query, untied head), "qwen-tiny"
 * (q/k/v biases, tied head), "llama3.2-1b", "llama3.1-8b", "qwen2.5-0.5b",
 * "qwen2.5-7b" (the published shapes; their seq is 2048, not their 128K positions).
 * Returns ZEROC_ERR_INVALID_ARG naming the accepted names.
 */
ZEROC_API zeroc_result_t zeroc_gpt_preset(const char *name, zeroc_gpt_config_t *out);

/* The preset names, NULL-terminated. */
ZEROC_API const char *const *zeroc_gpt_preset_names(void);

/* Checks a shape: every size >= 1, heads divides hidden; GPT-2: every Llama
 * field 0; Llama: kv_heads divides heads, the head size hidden / heads even and
 * at most 512, ffn >= 1, qkv_bias and untied 0 or 1, norm_eps and rope_theta in
 * range, the rope scaling off (factor 0) or factor >= 1, 0 < low < high and
 * original >= 1. ZEROC_ERR_INVALID_ARG naming the field, its value and what is
 * accepted. */
ZEROC_API zeroc_result_t zeroc_gpt_config_check(const zeroc_gpt_config_t *c);

/* Parameters of the model (tied head counted once, vocabulary unpadded).
 * GPT-2: V C + T C + L (12 C^2 + 13 C) + 2 C. Llama, with K = kv_heads C / heads:
 * V C (2 V C untied) + L (2 C^2 + 2 K C + 3 F C + 2 C (+ C + 2 K with q/k/v
 * biases)) + C. */
ZEROC_API uint64_t zeroc_gpt_num_params(const zeroc_gpt_config_t *c);

/* ---- the model as zeroc layers ------------------------------------------------- */

typedef struct zeroc_gpt zeroc_gpt_t;

/* One micro-batch: B sequences of T tokens (T <= seq), device memory.
 * targets may be NULL (forward only: no loss gradient, no dropout).
 * With the context's cp > 1 (context parallelism) the batch holds this rank's
 * tokens of each sequence of T x cp: T (even) tokens, the sequence's chunks r
 * and 2cp-1-r of T/2 tokens (zigzag, r the cp rank; zeroc_gpt_cp_tokens), and
 * the loss is this rank's share of the mean over all T x cp tokens. */
typedef struct zeroc_gpt_batch {
  int B, T;
  const int32_t *inputs;  /* (B,T) token ids < vocab */
  const int32_t *targets; /* (B,T) next tokens, or -1 for "no loss here" */
  /* Which sequences these are, for dropout's masks (a model built with dropout > 0):
   * each mask is a hash of (seed, step, the sequence's slot, position, channel or
   * head), so every layout that deals the same sequences to the same slots draws
   * the same masks. A batch written {B, T, inputs, targets} is step 0, slots 0..B-1. */
  uint64_t step;       /* the optimizer step */
  uint64_t first_slot; /* slot of row 0 in the step's global batch (zeroc_data_first_slot) */
} zeroc_gpt_batch_t;

/* Context parallelism: local (B, T/cp) <- this cp rank's zigzag tokens of full
 * (B, T) (host memory): chunks r and 2cp-1-r of T/(2cp) tokens of each sequence.
 * T must be divisible by 2 x cp. */
ZEROC_API void zeroc_gpt_cp_tokens(const int32_t *full, int32_t *local, int B, int T, int cp,
                                   int rank);

/* The part of the unit list one pipeline rank builds: `nchunks` contiguous
 * ranges of the global units in increasing order (one stage per chunk; v > 1
 * with the interleaved schedule), and activation sets for `slots`
 * micro-batches in flight at once (zeroc_pipeline_slots). The head on a rank
 * without the embedding holds its own copy of wte, and both copies are marked
 * ZEROC_PARAM_TIED (the pipeline keeps them equal); beside the embedding it
 * shares wte as in the whole model. A unit called with io->slot s uses
 * activation set s. */
typedef struct zeroc_gpt_stage {
  int nchunks;      /* v >= 1 */
  const int *first; /* (nchunks) first global unit of each chunk */
  const int *count; /* (nchunks) units in each chunk, >= 1 */
  int slots;        /* >= 1 */
} zeroc_gpt_stage_t;

/* How to build the model (beyond its shape). */
typedef struct zeroc_gpt_options {
  size_t size;         /* sizeof(zeroc_gpt_options_t), set by the initializer */
  uint32_t magic;      /* ZEROC_CONFIG_MAGIC */
  int batch;           /* micro-batch capacity in sequences of cfg->seq tokens; 0: cfg->batch */
  int recompute;       /* 1: blocks keep only their output, the rest is recomputed */
  zeroc_dtype_t dtype; /* activations and compute parameters (fp32; bf16 on cuda) */
  int sequence_parallel; /* tp > 1: LayerNorm and residual regions split over the tp
                            ranks by tokens (all-gather / reduce-scatter instead of
                            all-reduce); micro-batches need B*T divisible by tp */
  const zeroc_gpt_stage_t *stage; /* pipeline parallelism: only these chunks of the unit
                                     list; NULL: the whole model, one slot */
  float dropout;         /* GPT-2's attn_pdrop = resid_pdrop = embd_pdrop, 0 <= p < 1; 0: none.
                            Inverted dropout on the attention probabilities, on the outputs
                            of the embedding and of both projections before their residual
                            adds; only in training passes (a batch with targets, not
                            zeroc_model_eval) */
  uint64_t dropout_seed; /* the masks' seed (with the batch's step and slots) */
  zeroc_cp_mode_t cp_mode; /* with the context's cp > 1: attention's ring or ulysses; DEFAULT: ring */
  int deterministic;       /* 1: bitwise-repeatable kernels (cuda: cuDNN attention's deterministic
                              backward); 0: the faster ones, or ZEROC_CUDA_DETERMINISTIC's choice */
} zeroc_gpt_options_t;

#define ZEROC_GPT_OPTIONS_INIT                                                                     \
  {                                                                                                \
    sizeof(zeroc_gpt_options_t), ZEROC_CONFIG_MAGIC, 0, 0, ZEROC_FP32, 0, NULL, 0.0f, 0,           \
        ZEROC_CP_MODE_DEFAULT, 0                                                                   \
  }

/*
 * Builds the GPT's unit list (embedding, `layers` blocks, head tied to the
 * embedding) and allocates activations for micro-batches of up to `batch`
 * sequences of cfg->seq tokens. With `recompute`, blocks keep only their
 * output and recompute the rest inside backward.
 *   dtype: activations and compute parameters (fp32; bf16 on cuda).
 * With the context's tp > 1 the model is split Megatron-style over the tp
 * group: qkv and MLP-up column-parallel, attention-out and MLP-down
 * row-parallel, the heads split (tp must divide heads), the embedding and the
 * tied head split by vocabulary rows (padded to a multiple of 64 x tp); every
 * tp size starts from the same weights. Each rank's units hold its slices, so
 * zeroc_shard() shards them over dp like any other (TP x FSDP).
 * With the context's cp > 1 (context parallelism) every rank holds all of its
 * units' weights and runs them on its zigzag tokens of each sequence (see
 * zeroc_gpt_batch_t): positions and dropout masks follow the global tokens,
 * attention sees the whole sequence by the ring or Ulysses (options.cp_mode),
 * and the shards of zeroc_shard() span dp_shard x cp; seq must be divisible
 * by 2 x cp, and Ulysses needs cp to divide the heads of a tp rank.
 * Returns ZEROC_ERR_INVALID_ARG for a bad shape (or tp not dividing heads; a
 * stage with empty, overlapping or unordered chunks, slots outside 1..4096),
 * ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_gpt_create(zeroc_ctx_t *ctx, const zeroc_gpt_config_t *cfg,
                                          int batch, int recompute, zeroc_dtype_t dtype,
                                          zeroc_gpt_t **out);
/* As zeroc_gpt_create, with options (sequence parallelism, a pipeline stage);
 * opts NULL: defaults. */
ZEROC_API zeroc_result_t zeroc_gpt_create_ex(zeroc_ctx_t *ctx, const zeroc_gpt_config_t *cfg,
                                             const zeroc_gpt_options_t *opts, zeroc_gpt_t **out);
ZEROC_API void zeroc_gpt_destroy(zeroc_gpt_t *g);

/* ---- pipeline parallelism: a rank's part of the model -------------------------- */

/* Units of the whole model: the embedding (0), `layers` blocks (1..L) and the
 * head (L+1). */
ZEROC_API int zeroc_gpt_num_units(const zeroc_gpt_config_t *c);

/* Fills cost[0 .. L+2) with each unit's share of the work and memory, for
 * cutting the unit list into balanced pipeline stages: the mean of its share of
 * the forward FLOPs per token (blocks twice their matrices + 4 T C: 24 C^2 + 4 T C for GPT-2; head
 * 2 C Vp) and of the parameters (the head counted with the copy of wte it holds on the last stage).
 * The costs sum to 1. */
ZEROC_API void zeroc_gpt_unit_costs(const zeroc_gpt_config_t *c, double *cost);

/* The chunks this rank holds, and chunk c's range of local units (indices
 * into zeroc_gpt_layers); 0, 0 for a chunk out of range. */
ZEROC_API int zeroc_gpt_chunks(const zeroc_gpt_t *g);
ZEROC_API void zeroc_gpt_chunk_units(const zeroc_gpt_t *g, int chunk, int *first, int *count);

/* The global unit index of local unit `local` (-1 out of range). */
ZEROC_API int zeroc_gpt_global_unit(const zeroc_gpt_t *g, int local);

/* The parameters of global unit `unit` of the whole model, whichever rank
 * holds it, and their count in *n (0 and NULL out of range). GPT-2: wte and
 * wpe, a block's twelve, the head's ln_f two (a tied copy of wte is the
 * embedding's wte). Llama: embed_tokens, a block's six (seven with q/k/v
 * biases), the head's norm and, untied, its lm_head. */
ZEROC_API const zeroc_param_desc_t *zeroc_gpt_unit_params(const zeroc_gpt_t *g, int unit, int *n);

/* The unit list to pass to zeroc_shard() (valid while `g` lives): this rank's
 * units, chunk after chunk. */
ZEROC_API const zeroc_layer_t *zeroc_gpt_layers(const zeroc_gpt_t *g, int *n);

/* The model's shape. */
ZEROC_API const zeroc_gpt_config_t *zeroc_gpt_config(const zeroc_gpt_t *g);

/* Vocabulary padded to a multiple of 64 x tp (the rows of the unsplit wte;
 * padding rows are zero and never receive gradient or affect the loss). */
ZEROC_API int zeroc_gpt_padded_vocab(const zeroc_gpt_t *g);
/* Rows of wte on this tp rank: padded vocabulary / tp. */
ZEROC_API int zeroc_gpt_local_vocab(const zeroc_gpt_t *g);
/* 1 when the model runs sequence parallel (tp > 1 and asked for). */
ZEROC_API int zeroc_gpt_sequence_parallel(const zeroc_gpt_t *g);

/* Bytes of activations the model allocated (saved for backward and scratch). */
ZEROC_API uint64_t zeroc_gpt_activation_bytes(const zeroc_gpt_t *g);

/* The per-token losses of the last forward of the head (B*T fp32, device
 * memory); NULL on a pipeline rank without the head. */
ZEROC_API const float *zeroc_gpt_losses(const zeroc_gpt_t *g);

/*
 * Writes the model's fp32 master weights as safetensors with Hugging Face
 * names and layouts. GPT-2: GPT2LMHeadModel's (wte.weight (V,C) without the
 * padding rows, h.{i}.attn.c_attn.weight (C,3C) stored (in, out) as GPT-2's
 * Conv1D does, ...). The Llama family: LlamaForCausalLM's and Qwen2ForCausalLM's
 * (model.embed_tokens.weight (V,C), model.layers.{i}.self_attn.{q,k,v}_proj.weight
 * (and .bias with qkv_bias), ...o_proj.weight, ...mlp.{gate,up,down}_proj.weight,
 * the norms, model.norm.weight, and lm_head.weight when untied), (out, in) as
 * nn.Linear stores them. `path` is a file, or an existing directory: its
 * model.safetensors, or above ZEROC_EXPORT_SHARD_BYTES (default 5e9)
 * model-0000k-of-0000n.safetensors shards and model.safetensors.index.json, as
 * save_pretrained writes them. With tensor parallelism each tensor is consolidated
 * from the tp ranks' slices. Collective over the model's world; rank 0 writes
 * (each file atomically).
 */
ZEROC_API zeroc_result_t zeroc_gpt_export(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path);

/*
 * Loads weights from such a file, or a save_pretrained directory (its
 * model.safetensors, or the shards its model.safetensors.index.json names), or
 * that index (extra tensors such as h.{i}.attn.bias masks are ignored) into the
 * master weights (with tensor parallelism, each tp rank its slice) and publishes
 * them. Reads files as Hugging Face `transformers` writes them: names bare
 * (`wte.weight`, `h.0....`; `embed_tokens.weight`, `layers.0....`) or prefixed
 * `transformer.` (GPT2LMHeadModel.save_pretrained) or `model.` (the Llama
 * classes'), an `lm_head.weight` equal to the embedding or none where the model
 * ties them (a different head is refused), F32, BF16 or F16 values
 * (converted to fp32), and GPT-2's `wpe.weight` with more rows than cfg->seq (the
 * first seq rows are used; the rest are kept in host memory, and
 * zeroc_gpt_export writes the whole table back). Checks every tensor's
 * presence and shape first: nothing changes on error.
 * Collective. Returns ZEROC_ERR_IO, ZEROC_ERR_CORRUPT, ZEROC_ERR_INVALID_ARG
 * (a missing tensor or another shape, an untied head, naming it).
 */
ZEROC_API zeroc_result_t zeroc_gpt_import(zeroc_model_t *m, zeroc_gpt_t *g, const char *path);

#ifdef __cplusplus
}
#endif
#endif
