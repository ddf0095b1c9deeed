/*
 * model/gpt_batch.h - the GPT run's token data (gpt_batch.c).
 */
#ifndef ZEROC_MODEL_GPT_BATCH_H
#define ZEROC_MODEL_GPT_BATCH_H

#include "model/gpt_state.h"

/* The data stream of the run's shape and order (vocab, seq, global batch,
 * seed) over `source`: the training and the held-out data differ only in
 * source and shuffle. */
zeroc_data_config_t zeroc__gpt_data_config(const zeroc__gpt_run_t *run, const char *source,
                                           int shuffle);

/* Micro-batch u of step `step` of `d` (the training or the held-out data) into
 * the token buffers (with a pipeline, micro-batch u's own), copied to the
 * device where there is one; *b describes it for the model. */
zeroc_result_t zeroc__gpt_load(zeroc__gpt_run_t *run, zeroc_data_t *d, uint64_t step, int u,
                               zeroc_gpt_batch_t *b);

#endif
