/*
 * zeroc/data.h - token data sets: llm.c .bin shards or the built-in synthetic
 * corpus, cut into sequences, and the rule that deals them out to steps,
 * data-parallel ranks and micro-steps.
 *
 * Sequence j is the T+1 tokens starting at token j*T of the data (inputs are
 * the first T, targets the last T). Step k uses the G = batch x grad-accum x dp
 * sequences in slots k*G .. k*G+G-1 of the epoch order; data-parallel rank d
 * takes, at micro-step u, the b slots starting at (u*dp + d)*b. Which
 * sequences step k uses depends only on (data, seed, shuffle, T, G, k), never
 * on the layout, so every layout with the same global batch computes the same
 * math, and a run resumes at step k with no state but k. docs/formats.md has
 * the whole rule, the epoch rule and the synthetic source.
 *
 * Every function is safe to call from several threads on one data set.
 */
#ifndef ZEROC_DATA_H
#define ZEROC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h"
#include "zeroc/export.h"
#include "zeroc/result.h"
#include "zeroc/types.h" /* ZEROC_UNSET */

#ifdef __cplusplus
extern "C" {
#endif

/* The llm.c shard header: 256 int32, [0] magic, [1] version, [2] token count,
 * then the tokens little-endian: uint16 (GPT-2's vocabulary) in llm.c's first
 * format, uint32 in the one llm.c writes for Llama 3 (vocabularies above 65536). */
#define ZEROC_SHARD_MAGIC        20240520 /* uint16 tokens */
#define ZEROC_SHARD_VERSION      1
#define ZEROC_SHARD_MAGIC_U32    20240801 /* uint32 tokens */
#define ZEROC_SHARD_VERSION_U32  7
#define ZEROC_SHARD_HEADER_BYTES 1024
/* The largest vocabulary a data set may have (every token id < V fits int32). */
#define ZEROC_DATA_VOCAB_MAX 2147483647

/* The longest path zeroc_data_info_t holds. */
#define ZEROC_DATA_PATH_MAX 4096

typedef struct zeroc_data zeroc_data_t;

typedef enum zeroc_data_kind {
  ZEROC_DATA_SYNTHETIC = 0, /* the built-in Markov corpus */
  ZEROC_DATA_FILES = 1,     /* llm.c .bin shards */
} zeroc_data_kind_t;

typedef struct zeroc_data_config {
  size_t size;          /* sizeof(zeroc_data_config_t), set by the initializer */
  uint32_t magic;       /* ZEROC_CONFIG_MAGIC */
  const char *source;   /* "synthetic" (or NULL), a .bin path, a glob ("data/train_*.bin"),
                           or a directory holding train_NNNNNN.bin shards (its train_*.bin) */
  int vocab;            /* V: every token must be < V (2..ZEROC_DATA_VOCAB_MAX) */
  int seq;              /* T: tokens per sequence (>= 1) */
  int global_batch;     /* G: sequences per optimizer step (>= 1) */
  uint64_t seed;        /* the shuffle order and the synthetic source; unset
                           ((uint64_t)ZEROC_UNSET, the initializer's): 1 */
  int shuffle;          /* 1: seeded permutation of the sequences in each epoch */
  int synth_successors; /* synthetic: most likely successors per token, 1..64; 0: 8 */
  double synth_noise;   /* synthetic: probability spread evenly over all V tokens, in
                           (0, 1); 0: 0.05 */
} zeroc_data_config_t;

#define ZEROC_DATA_CONFIG_INIT                                                                     \
  {                                                                                                \
    sizeof(zeroc_data_config_t), ZEROC_CONFIG_MAGIC, NULL, 0, 0, 0, (uint64_t)ZEROC_UNSET, 0, 0,   \
        0.0                                                                                        \
  }

typedef struct zeroc_data_info {
  zeroc_data_kind_t kind;
  int vocab, seq, global_batch, shuffle;
  uint64_t seed;
  int num_files;            /* shards found (0 for synthetic) */
  uint64_t num_tokens;      /* tokens in all shards (0 for synthetic: unbounded) */
  uint64_t num_sequences;   /* N = floor((tokens - 1) / T); UINT64_MAX for synthetic */
  uint64_t steps_per_epoch; /* floor(N / G); UINT64_MAX for synthetic */
  /* Synthetic only (NaN for files): the entropy rate H of the source in nats
   * per token, which is the expected loss of the best possible model at every
   * target position; and H(pi), the loss of a model that ignores context. */
  double loss_floor;
  double unigram_entropy;
  uint64_t fingerprint; /* identifies the data (shard names, sizes and CRC-32C of
                         * each header, first and last MiB; or the source) */
  /* The tokenizer the shards were made with: "<dir>/tokenizer.json" beside
   * the first shard (zeroc data writes one), or "" when there is none (or
   * synthetic data); and its vocabulary (0 when none). */
  char tokenizer[ZEROC_DATA_PATH_MAX];
  int tokenizer_vocab;
} zeroc_data_info_t;

/*
 * Opens a data set. For files, `source` is expanded as a glob (or taken as one
 * path), the matches are sorted by name and form one token stream; each
 * file's header is checked now, its tokens as they are read. A tokenizer.json
 * beside the first shard (the tokenizer `zeroc data` recorded) must not have
 * more ids than cfg->vocab.
 *   cfg: from ZEROC_DATA_CONFIG_INIT; out: receives the handle.
 * Returns ZEROC_ERR_INVALID_ARG (bad config, a glob matching nothing, a
 * directory without train_*.bin shards, fewer sequences than one global
 * batch, a recorded tokenizer larger than vocab), ZEROC_ERR_IO (a file
 * that cannot be opened or read), ZEROC_ERR_CORRUPT (truncated header, wrong
 * magic or version, negative count, a file shorter or longer than its
 * header's count), ZEROC_ERR_NUMERIC (synthetic: the stationary distribution
 * did not converge), ZEROC_ERR_NOMEM. Each message names the file.
 */
ZEROC_API zeroc_result_t zeroc_data_create(const zeroc_data_config_t *cfg, zeroc_data_t **out);
/* Closes the files and frees the data set. destroy(NULL) does nothing. */
ZEROC_API void zeroc_data_destroy(zeroc_data_t *d);
/* Fills `out` with the figures of the data set. */
ZEROC_API void zeroc_data_info(const zeroc_data_t *d, zeroc_data_info_t *out);

/*
 * The global index j of the sequence in slot `slot` (0 <= slot < G) of step
 * `step`. Files: epoch e = step / steps_per_epoch, position
 * p = (step mod steps_per_epoch) * G + slot, j = p, or pi_e(p) with --shuffle
 * (a seeded permutation of [0, N) per epoch); the N mod G sequences past the
 * last full step of an epoch are not used in it. Synthetic: j = step*G + slot.
 * Returns ZEROC_ERR_INVALID_ARG for a slot out of range.
 */
ZEROC_API zeroc_result_t zeroc_data_sequence_index(const zeroc_data_t *d, uint64_t step, int slot,
                                                   uint64_t *seq);

/*
 * Reads sequence j: tokens[0..T] (T+1 values) are tokens j*T .. j*T+T of the
 * data. Returns ZEROC_ERR_INVALID_ARG for j >= N or a token >= vocab (naming
 * the file and byte offset), ZEROC_ERR_IO / ZEROC_ERR_CORRUPT for a read that
 * fails or comes back short.
 */
ZEROC_API zeroc_result_t zeroc_data_read_sequence(const zeroc_data_t *d, uint64_t seq,
                                                  int32_t *tokens);

/* Where one data-parallel rank sits: dp x micro_batch x grad_accum must equal
 * the data set's global batch. With pipeline parallelism, grad_accum is the
 * number of micro-batches per step. Tensor- and pipeline-parallel peers of a
 * rank share its dp_rank and read the same batches. */
typedef struct zeroc_data_layout {
  int dp;          /* data-parallel size */
  int dp_rank;     /* 0 <= dp_rank < dp */
  int micro_batch; /* b: sequences per micro-step on this rank */
  int grad_accum;  /* a: micro-steps per optimizer step */
} zeroc_data_layout_t;

/* The first slot of micro-step u on the layout's rank: (u*dp + dp_rank) * b;
 * the micro-batch is slots [first, first + b). Returns ZEROC_ERR_INVALID_ARG
 * naming the numbers when dp x b x a != G or an index is out of range. */
ZEROC_API zeroc_result_t zeroc_data_first_slot(const zeroc_data_t *d, const zeroc_data_layout_t *l,
                                               int micro_step, int *first_slot);

/*
 * Fills one micro-batch: inputs (b,T) and targets (b,T) int32, row i being
 * the sequence of slot first_slot + i of step `step` (targets are the inputs
 * shifted by one token). Reads only those b sequences.
 * Returns the errors of zeroc_data_first_slot and zeroc_data_read_sequence.
 */
ZEROC_API zeroc_result_t zeroc_data_batch(const zeroc_data_t *d, const zeroc_data_layout_t *l,
                                          uint64_t step, int micro_step, int32_t *inputs,
                                          int32_t *targets);

/* What a checkpoint records to resume the data stream: resuming needs only
 * the step, the rest checks that the data and the order are the same. */
typedef struct zeroc_data_position {
  uint64_t step;          /* the next optimizer step to run */
  uint64_t epoch;         /* epoch of that step (0 for synthetic) */
  uint64_t step_in_epoch; /* step - epoch * steps_per_epoch */
  uint64_t seed;
  int shuffle;
  int seq, global_batch;
  uint64_t num_sequences;
  uint64_t fingerprint;
} zeroc_data_position_t;

/* The position of `step` in this data set (pure arithmetic). */
ZEROC_API void zeroc_data_position(const zeroc_data_t *d, uint64_t step,
                                   zeroc_data_position_t *out);
/* Checks that a recorded position can be resumed with this data set: same
 * data (fingerprint, sequence count), seed, shuffle, T and G. Returns
 * ZEROC_ERR_INVALID_ARG naming the first field that differs. */
ZEROC_API zeroc_result_t zeroc_data_check_position(const zeroc_data_t *d,
                                                   const zeroc_data_position_t *pos);

/* ---- writing shards --------------------------------------------------------- */

typedef struct zeroc_shard_writer zeroc_shard_writer_t;

/*
 * Starts an llm.c shard of uint16 tokens at `path`, written through a
 * temporary name and moved into place by zeroc_shard_writer_finish (so a crash
 * never leaves a partial shard under the final name). Returns ZEROC_ERR_IO,
 * ZEROC_ERR_NOMEM.
 */
ZEROC_API zeroc_result_t zeroc_shard_writer_create(const char *path, zeroc_shard_writer_t **w);
/* The same with `token_bytes` 2 (uint16, ZEROC_SHARD_MAGIC) or 4 (uint32,
 * ZEROC_SHARD_MAGIC_U32: a vocabulary above 65536); ZEROC_ERR_INVALID_ARG for
 * another width. zeroc_shard_token_bytes says which a vocabulary needs. */
ZEROC_API zeroc_result_t zeroc_shard_writer_create_width(const char *path, int token_bytes,
                                                         zeroc_shard_writer_t **w);
/* The token width shards of a `vocab`-id tokenizer take: 2 up to 65536 ids, else 4. */
ZEROC_API int zeroc_shard_token_bytes(int vocab);
/* Appends `n` tokens, each in [0, 65536) (uint16) or [0, 2^31) (uint32).
 * Returns ZEROC_ERR_INVALID_ARG for a token out of range (naming the uint32
 * format when it would fit there) or a shard past 2^31 - 1 tokens, ZEROC_ERR_IO. */
ZEROC_API zeroc_result_t zeroc_shard_writer_append(zeroc_shard_writer_t *w, const int32_t *tokens,
                                                   size_t n);
/* Writes the header with the final count, fsyncs, renames into place. */
ZEROC_API zeroc_result_t zeroc_shard_writer_finish(zeroc_shard_writer_t *w);
/* Frees the writer; an unfinished shard is removed. destroy(NULL) does nothing. */
ZEROC_API void zeroc_shard_writer_destroy(zeroc_shard_writer_t *w);

/*
 * Writes `tokens` tokens of the synthetic corpus of `cfg` (source, vocab and
 * synth_* fields; seq and global_batch are ignored) as one continuous Markov
 * chain into shards "<prefix>_000000.bin", "<prefix>_000001.bin", ... of at
 * most `tokens_per_shard` tokens each. `num_files` (may be NULL) receives the
 * number of shards. Returns ZEROC_ERR_INVALID_ARG for a source other than
 * synthetic, a bad vocab or synth_* value, or tokens_per_shard outside
 * 1..2^31-1; the writer's errors; ZEROC_ERR_NUMERIC as zeroc_data_create.
 */
ZEROC_API zeroc_result_t zeroc_data_write_synthetic(const zeroc_data_config_t *cfg,
                                                    const char *prefix, uint64_t tokens,
                                                    uint64_t tokens_per_shard, int *num_files);

#ifdef __cplusplus
}
#endif
#endif
