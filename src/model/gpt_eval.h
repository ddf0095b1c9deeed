/*
 * model/gpt_eval.h - the GPT run's held-out evaluation (gpt_eval.c).
 */
#ifndef ZEROC_MODEL_GPT_EVAL_H
#define ZEROC_MODEL_GPT_EVAL_H

#include "model/gpt_state.h"

/* Opens val_data (when configured) at create: its shape checked
 * against the model's, the global batches of one evaluation resolved
 * (info->val_batches), and the tokens of those batches read once, so a token
 * outside the vocabulary stops the run before it trains. Local; the caller
 * agrees. And the held-out loss (the interface's evaluate). */
zeroc_result_t zeroc__gpt_val_open(zeroc__gpt_run_t *run);
zeroc_result_t zeroc__gpt_evaluate(void *self, double *loss, double *auc, double *logloss);

#endif
