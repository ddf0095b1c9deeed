/*
 * apps/train_flags.h - the flags of `zeroc train`: the table, what can be
 * checked before MPI starts (one line, exit 2, nothing written), and the
 * trainer's config made from them. Shared by train, bench and the flag fuzzer.
 */
#ifndef ZEROC_APPS_TRAIN_FLAGS_H
#define ZEROC_APPS_TRAIN_FLAGS_H

#include <stdint.h>

#include "zeroc/gpt.h"
#include "zeroc/train.h"

extern const char *const ztrain_schedules[];    /* constant, cosine */
extern const char *const ztrain_pp_schedules[]; /* 1f1b, interleaved */
extern const char *const ztrain_cp_modes[];     /* ring, ulysses */

/* The flags as given: choices are indices into their name tables (apps/args.h). */
typedef struct ztrain_opts {
  int device, model, schedule, dtype, recompute, off_opt, off_par, pp_schedule;
  int layers, hidden, heads, vocab, seq, batch, grad_accum, steps, warmup, zero, hsdp, tp, pp;
  int vpp, microbatches, prefetch, save_every, shuffle, quiet, print_topology, print_schedule;
  int sequence_parallel, max_skipped, spike_window, val_every, save_limit;
  int cp, cp_mode; /* --cp (1), --cp-mode: 0 ring, 1 ulysses */
  int deterministic; /* --deterministic */
  int grad_reduce;   /* --grad-reduce-dtype: 0 fp32 (the default), 1 bf16 */
  int64_t seed, val_tokens;
  double lr, weight_decay, clip, beta1, beta2, eps, comm_timeout, spike_z, dropout;
  const char *data, *save, *resume, *export_path, *init, *metrics, *nvme_dir, *val_data;
  int sample_every, sample_tokens; /* --sample-every (0 off), --sample-tokens */
  const char *sample_prompt;       /* --sample-prompt, or NULL: the built-in choice */
  const char *tokenizer;
  int set_model, set_layers, set_hidden, set_heads, set_vocab, set_seq, set_batch, set_microbatches;
  int set_zero, set_grad_accum, set_vpp, set_pp_schedule, set_schedule, set_val_every;
  int set_sample_tokens, set_cp_mode;
  int kv_heads, ffn, set_kv_heads, set_ffn; /* --kv-heads, --ffn: the Llama family's */
} ztrain_opts_t;

/* The values before parsing: "unset" where the trainer picks the default; the
 * layout flags' defaults, which the checks before MPI need. */
void ztrain_opts_init(ztrain_opts_t *o);

/* `zeroc train --help`. */
void ztrain_usage(void);

/* Parses argv into `o` (from ztrain_opts_init). Returns 0, or 2 after the
 * one-line error. */
int ztrain_parse(int argc, char **argv, ztrain_opts_t *o);

/* What can be checked before MPI starts: the library's resolution of the
 * config (zeroc_train_config_resolve, with the flags' names) on the flags'
 * layout, and the files. Fills the model's shape *gc and the trainer's config
 * *tc (unresolved: the trainer resolves it on the real mesh). Runs
 * --print-schedule. Returns -1 to go on and train, else the exit status (2
 * after the one-line error). */
int ztrain_check(ztrain_opts_t *o, zeroc_gpt_config_t *gc, zeroc_train_config_t *tc);

/* The trainer's config from the checked flags; what was not given stays unset. */
void ztrain_config(const ztrain_opts_t *o, const zeroc_gpt_config_t *gc, zeroc_train_config_t *c);

#endif
