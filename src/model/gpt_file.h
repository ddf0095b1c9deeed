/*
 * model/gpt_file.h - reading decoder weights as Hugging Face writes them, for
 * zeroc_gpt_import and the sampler alike: one safetensors file or a
 * save_pretrained directory (model.safetensors, or shards with their index:
 * io/st_set.h); both name layouts (GPT-2: bare `wte.weight`, `h.0....`, or
 * `transformer.`-prefixed as GPT2LMHeadModel.save_pretrained writes; Llama:
 * `embed_tokens.weight`, ... bare or `model.`-prefixed, `lm_head.weight` never
 * prefixed); an `lm_head.weight` that must equal the embedding when the model
 * ties them, a position table longer than the run's context, and F32, BF16 or
 * F16 values (converted to fp32). And the consolidated weights of a sharded
 * model, collected on rank 0 (export and the sampler of a trainer).
 */
#ifndef ZEROC_MODEL_GPT_FILE_H
#define ZEROC_MODEL_GPT_FILE_H

#include <stdint.h>

#include "io/st_set.h"
#include "zeroc/gpt.h"
#include "zeroc/shard.h"

typedef struct zeroc__gpt_file {
  zeroc__st_set_t *st;
  const char *path;
  const char *prefix; /* "", "transformer." (GPT-2) or "model." (Llama) */
  const char *kind;   /* "GPT-2" or "Llama", for messages */
} zeroc__gpt_file_t;

/* Opens `path` (a file, a directory or an index: zeroc__st_set_open) as GPT-2
 * weights, finds its name layout (by where wte.weight is) and, when it has an
 * lm_head.weight, checks it equals wte bitwise after conversion to fp32.
 * Returns ZEROC_ERR_IO, ZEROC_ERR_CORRUPT, ZEROC_ERR_INVALID_ARG (no wte, an
 * untied head), ZEROC_ERR_NOMEM. Close with zeroc__gpt_file_close. */
zeroc_result_t zeroc__gpt_file_open(const char *path, zeroc__gpt_file_t *f);
/* The same for a decoder of shape `cfg`: GPT-2's as above; the Llama family's by
 * where embed_tokens.weight is, and a tied model's lm_head.weight (if any) equal
 * to it (an untied one's is read as a parameter). */
zeroc_result_t zeroc__gpt_file_open_cfg(const char *path, const zeroc_gpt_config_t *cfg,
                                        zeroc__gpt_file_t *f);
void zeroc__gpt_file_close(zeroc__gpt_file_t *f);
/* A file's blocks beyond the model's: a tensor of block `layers` or above (GPT-2's
 * `h.N.`, Llama's `layers.N.`, any prefix) is ZEROC_ERR_INVALID_ARG naming it (issue 37:
 * they were ignored). zeroc__gpt_file_open_cfg runs it; the Llama sampler's reader too. */
zeroc_result_t zeroc__gpt_check_layers(const zeroc__st_set_t *st, const char *path, int layers);

/*
 * Reads tensor `name` (the bare name; the file's prefix is added, except to
 * lm_head.weight, which is outside the base model) into `out`
 * (shape[0] x shape[1] floats, or shape[0] when nd is 1) in zeroc's layout:
 * transposed from the file's (in, out) when `tr`. `shape` is the file's shape
 * (before the transpose). The file's tensor must have that shape, except that
 * with `tail` non-NULL it may have more rows than shape[0] (nd 2, no
 * transpose): the first shape[0] go to `out`, the rest to *tail (malloc'ed,
 * *tail_rows rows; NULL, 0 when there are none). Values must be finite.
 * Errors name the file, the tensor and what was expected.
 */
zeroc_result_t zeroc__gpt_file_read(zeroc__gpt_file_t *f, const char *name, int nd,
                                    const uint64_t *shape, int tr, float *out, float **tail,
                                    uint64_t *tail_rows);

/*
 * The model's consolidated weights, every tensor of the whole model in zeroc's
 * layout, handed to `fn` on rank 0 only: src[gu * 12 + p] is parameter p of
 * global unit gu (embedding 0, blocks 1..L, head L+1; the parameters of
 * zeroc_gpt_unit_params), unsplit (wte with its padded rows); maxp is the
 * largest tensor's element count. Collective over the model's world; the
 * result (fn's included) is agreed on by every rank.
 */
typedef zeroc_result_t (*zeroc__gpt_visit_fn)(void *user, const float *const *src, uint64_t maxp);
zeroc_result_t zeroc__gpt_collect(zeroc_model_t *m, const zeroc_gpt_t *g, zeroc__gpt_visit_fn fn,
                                  void *user);

#endif
