/*
 * model/gpt_internal.h - what the layers above the model (persist, train) may
 * ask of a zeroc_gpt_t beyond the public header (never installed).
 */
#ifndef ZEROC_MODEL_GPT_INTERNAL_H
#define ZEROC_MODEL_GPT_INTERNAL_H

#include <stdint.h>

#include "zeroc/gpt.h"

/* The rows of an imported position table beyond cfg->seq (a file with more
 * positions than this run uses): the model trains the first seq rows; export
 * writes these back after them so the file keeps its n_positions. `rows`
 * (rows x C floats, host memory) is taken over by the model (freed with it, or
 * by the next call); NULL, 0 drops a held tail. */
void zeroc__gpt_set_wpe_tail(zeroc_gpt_t *g, float *rows, int nrows);
/* The held tail and its row count (NULL, 0 when none). */
const float *zeroc__gpt_wpe_tail(const zeroc_gpt_t *g, int *nrows);

/* The logits (B,T,Vl) of the last head forward of activation slot `slot`
 * without targets (device memory, the activation dtype; on a loss forward they
 * hold the logits' gradient instead); NULL on a rank without the head. */
const void *zeroc__gpt_logits(const zeroc_gpt_t *g, int slot);

/* Seconds the compute stream has waited for context-parallel transfers (ring
 * hops, Ulysses all-to-alls) since the model was built: the trainer counts the
 * growth over a step as exposed communication. 0 without cp. */
double zeroc__gpt_cp_wait_s(const zeroc_gpt_t *g);

#endif
