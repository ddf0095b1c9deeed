/*
 * model/lm_rules.h - a language model's config rules (lm_rules.c), shared with
 * `zeroc train`'s checks before MPI starts: the messages name each setting
 * by the config's field names or by the command's flags.
 */
#ifndef ZEROC_MODEL_LM_RULES_H
#define ZEROC_MODEL_LM_RULES_H

#include <stdio.h>

#include "zeroc/gpt.h"
#include "zeroc/train.h"

/* What a rule's message calls each setting: the config's field names or the
 * command's flags (zeroc__lm_names). */
typedef struct zeroc__train_names {
  const char *tp, *pp, *cp, *cp_ulysses, *heads, *hidden, *batch, *seq, *layers, *zero, *vpp;
  const char *vocab, *model;
  const char *kv_heads, *ffn; /* the Llama family's (zeroc_gpt_config_t) */
  const char *microbatches; /* grad_accum: the micro-batches with a pipeline */
  const char *interleaved;  /* the interleaved pipeline schedule */
  const char *sequence_parallel, *offload_params, *nvme_dir, *save_every, *save, *resume, *init;
  const char *val_data, *val_every, *val_tokens;
} zeroc__train_names_t;
/* The names of zeroc_names_t `names`: the config's fields or `zeroc train`'s flags. */
const zeroc__train_names_t *zeroc__lm_names(int names);

/* Each returns ZEROC_ERR_INVALID_ARG with one message naming the settings
 * by `n`, for the first rule the resolved config `c` breaks. */
/* The sizes: each >= 1 (vocab >= 2), and the heads' rule. */
zeroc_result_t zeroc__lm_check_sizes(const zeroc_gpt_config_t *g, const zeroc__train_names_t *n);
/* The first of c's Llama-family fields (kv_heads, ffn, ...) that is set, by its name, or
 * NULL: the other models refuse them. */
const char *zeroc__lm_llama_field_set(const zeroc_train_config_t *c);
/* The family's own fields (zeroc_gpt_config_check says which). */
zeroc_result_t zeroc__lm_check_family(const zeroc_gpt_config_t *g, const zeroc__train_names_t *n);
/* The heads: heads | hidden, and tp | heads (tp 0: not checked); Llama: tp | kv_heads. */
zeroc_result_t zeroc__lm_check_heads(const zeroc_gpt_config_t *g, int tp,
                                     const zeroc__train_names_t *n);
/* The shape `g` and tensor parallelism: the heads' rules, sequence
 * parallelism needs tp > 1 and tp | batch x seq. */
zeroc_result_t zeroc__lm_check_shape(const zeroc_train_config_t *c, const zeroc_gpt_config_t *g,
                                     int tp, const zeroc__train_names_t *n);
/* Context parallelism over `cp` ranks in `mode` (nothing to check when cp is
 * 1): seq divisible by 2 x cp (the zigzag chunks); Ulysses needs cp to divide
 * the heads of a tp rank. */
zeroc_result_t zeroc__lm_check_cp(zeroc_cp_mode_t mode, const zeroc_gpt_config_t *g, int tp, int cp,
                                  const zeroc__train_names_t *n);
/* A pipeline of `pp` ranks (nothing to check when pp is 1): zero 0 or 1, vpp
 * with the interleaved schedule only and >= 2 there, micro-batches (grad_accum)
 * a multiple of pp there, at least pp x vpp units in `g`. */
zeroc_result_t zeroc__lm_check_pipeline(const zeroc_train_config_t *c, const zeroc_gpt_config_t *g,
                                        int pp, const zeroc__train_names_t *n);
/* The rules of the state and outputs: offload_params needs zero 3, nvme
 * offload needs nvme_dir, save_every needs save, resume excludes init;
 * val_every and val_tokens need val_data, val_every >= 0, val_tokens in
 * 1..ZEROC_VAL_TOKENS_MAX (or ZEROC_UNSET). */
zeroc_result_t zeroc__lm_check_outputs(const zeroc_train_config_t *c,
                                       const zeroc__train_names_t *n);

/* The GPT's print_schedule of the model interface (gpt_schedule.c): the cut of
 * the resolved run into pp x vpp stages with each stage's units and share of
 * the cost, then every rank's actions (zeroc_pipeline_print_schedule with
 * communication); tp and act_dtype as zeroc__gpt_pipe_config takes them.
 * Errors: the partition's and the schedule's, ZEROC_ERR_NOMEM, ZEROC_ERR_IO. */
zeroc_result_t zeroc__gpt_print_schedule(FILE *f, const zeroc_train_info_t *info, int pp, int tp,
                                         zeroc_dtype_t act_dtype);

#endif
