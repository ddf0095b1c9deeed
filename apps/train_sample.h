/*
 * apps/train_sample.h - `zeroc train --sample-every N`: every N steps rank 0
 * prints a sample of the model's text as llm.c does. The library generates
 * (zeroc_trainer_sample); this prints.
 */
#ifndef ZEROC_APPS_TRAIN_SAMPLE_H
#define ZEROC_APPS_TRAIN_SAMPLE_H

#include "apps/train_flags.h"
#include "zeroc/sample.h"
#include "zeroc/tokenizer.h"

/* The longest --sample-prompt, in tokens (a longer one keeps its last tokens). */
#define ZTRAIN_SAMPLE_PROMPT_MAX 256

typedef struct ztrain_sample {
  zeroc_tokenizer_t *tok; /* NULL: no sampling */
  int every, tokens;
  uint64_t seed;
  int32_t prompt[ZTRAIN_SAMPLE_PROMPT_MAX];
  int n;           /* prompt tokens, chosen at the first sample */
  const char *text; /* --sample-prompt, or NULL */
  const char *spec; /* --tokenizer, or NULL: the data set's */
} ztrain_sample_t;

/* Loads --tokenizer when --sample-every asks for samples (before MPI starts,
 * on every rank alike). Returns 0, or 2 after the one-line error. */
int ztrain_sample_open(const ztrain_opts_t *o, const zeroc_gpt_config_t *gc, ztrain_sample_t *s);

/* Without --tokenizer: the tokenizer the data set records (info->data.tokenizer),
 * or a refusal naming --tokenizer when it has none. With it: a refusal naming
 * both when the data set records another tokenizer (its ids would decode to
 * other text, or not at all, at the first sample). Collective (agreed). */
zeroc_result_t ztrain_sample_from_data(ztrain_sample_t *s, const zeroc_train_info_t *info,
                                       zeroc_ctx_t *ctx);

/* After step `step` (1-based): when due, every rank takes part in the
 * sample and rank 0 prints it. Collective. */
zeroc_result_t ztrain_sample_step(ztrain_sample_t *s, zeroc_trainer_t *tr, int step, int root);

void ztrain_sample_close(ztrain_sample_t *s);

#endif
