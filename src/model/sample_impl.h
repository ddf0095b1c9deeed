/*
 * model/sample_impl.h - the sampler's state, shared by the files of the
 * sampler (sample.c: GPT-2's forward and the drawing; sample_llama.c: the
 * Llama family's forward); never seen outside them.
 */
#ifndef ZEROC_MODEL_SAMPLE_IMPL_H
#define ZEROC_MODEL_SAMPLE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/sample.h"

/* the most parameters of a block (GPT-2's twelve; Llama's six, seven with q/k/v biases) */
enum { SAMPLER_BLOCK_MAX = 12 };

struct zeroc_sampler {
  zeroc_gpt_config_t cfg;
  int cache;      /* 1: keep the KV cache between tokens */
  int draw_vocab; /* ids drawn from: the first draw_vocab (a tokenizer's vocabulary) */
  int llama;      /* cfg.family is ZEROC_GPT_FAMILY_LLAMA */
  int nbp;        /* parameters per block */
  /* head size, kv channels (NKV HS; C for GPT-2), q|k|v width (C + 2 KV), the MLP's
   * up-projection width (4C; Llama's gate|up 2F) and its down-projection input (4C; F) */
  int HS, KV, QKV, up, down;
  /* weights: one allocation; wte (V,C), GPT-2's wpe (T,C), per block its nbp, the final
   * norm (lnfw, GPT-2's lnfb), the LM head (V,C): wte, or Llama's own when untied */
  float *w, *wte, *wpe, *lnfw, *lnfb, *lm_head;
  float *blk[SAMPLER_BLOCK_MAX]; /* block 0's; block l's at + l * bsize[p] */
  uint64_t brows[SAMPLER_BLOCK_MAX], bcols[SAMPLER_BLOCK_MAX], bsize[SAMPLER_BLOCK_MAX];
  float *inv_freq; /* Llama: RoPE's (HS/2) inverse frequencies, those training turns by */
  int32_t *posv;   /* Llama: the (T) positions of the rows being fed */
  /* the cache: per block (T, 2 KV) rows of k | v (Llama's k turned); pos of them are filled */
  float *kv;
  int pos;
  /* scratch for up to T rows */
  float *x, *ln, *qkv, *atty, *res, *fch, *fchg, *mean, *rstd, *logits;
  double *prob;
  int *idx;
};

/* The Llama family's forward (sample_llama.c): ids (n) at positions pos..pos+n-1 -> the
 * cache extended by n rows; the logits (V) of the last row in s->logits. */
void zeroc__sampler_llama_forward(zeroc_sampler_t *s, const int32_t *ids, int n);

#endif
