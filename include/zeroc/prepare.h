/*
 * zeroc/prepare.h - text files to llm.c token shards (`zeroc data`): the
 * files are tokenized by a pool of threads, in order, into
 * <out>/train_NNNNNN.bin and <out>/val_NNNNNN.bin, and the tokenizer used is
 * saved beside them as <out>/tokenizer.json, so that `train` can check it
 * against the model and find it for sampling.
 *
 *   zeroc_prepare_config_t c = ZEROC_PREPARE_CONFIG_INIT;
 *   const char *in[] = {"book1.txt", "more/book?.txt"};
 *   c.tokenizer = "bytes"; c.out_dir = "data"; c.inputs = in; c.num_inputs = 1;
 *   zeroc_prepare_stats_t s;
 *   if (zeroc_text_prepare(&c, NULL, NULL, &s) != ZEROC_OK) puts(zeroc_last_error(NULL));
 *
 * The rules (docs/data.md): every input file is one document, preceded by the
 * tokenizer's end-of-text token when it has one. The train/validation split
 * is deterministic: with at least 1/F documents each goes to val whole, by a
 * hash of its index and path; with fewer, the last F of each document's text
 * (from a line start) goes to val. The shards are the same whatever the
 * thread count. Nothing is left half-written: shards are written under
 * temporary names and renamed into place only when every one is complete.
 */
#ifndef ZEROC_PREPARE_H
#define ZEROC_PREPARE_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/ctx.h" /* ZEROC_CONFIG_MAGIC */
#include "zeroc/export.h"
#include "zeroc/result.h"
#include "zeroc/types.h" /* ZEROC_UNSET */

#ifdef __cplusplus
extern "C" {
#endif

/* Initialise with ZEROC_PREPARE_CONFIG_INIT; the value in brackets is what an
 * unset field becomes. */
typedef struct zeroc_prepare_config {
  size_t size;               /* sizeof(zeroc_prepare_config_t), set by the initializer */
  uint32_t magic;            /* ZEROC_CONFIG_MAGIC */
  const char *tokenizer;     /* "bytes", a Hugging Face tokenizer.json or a GPT-2 vocab.json
                                (zeroc_tokenizer_load's spec); required */
  const char *out_dir;       /* the shard directory, created with its parents; required */
  const char *const *inputs; /* num_inputs text files or globs (expanded with glob(3),
                                each glob's matches in byte order) */
  int num_inputs;
  double val_fraction;  /* F, 0 <= F < 1, 0: no val shards; unset ((double)ZEROC_UNSET): 0.05 */
  int64_t shard_tokens; /* tokens per shard, 1..2^31-1; unset: 100,000,000 (llm.c's) */
  int threads;          /* tokenizing threads, 1..1024; unset: the cores online */
  int force;            /* 1: replace the shards an earlier run left in out_dir */
  int64_t chunk_bytes;  /* a document longer than this is read and tokenized in pieces of
                           about this many bytes, cut at a safe line boundary; 4096..2^30;
                           unset: 1 MiB */
} zeroc_prepare_config_t;

#define ZEROC_PREPARE_CONFIG_INIT                                                                  \
  {                                                                                                \
    sizeof(zeroc_prepare_config_t), ZEROC_CONFIG_MAGIC, NULL, NULL, NULL, 0, (double)ZEROC_UNSET,  \
        (int64_t)ZEROC_UNSET, ZEROC_UNSET, 0, (int64_t)ZEROC_UNSET                                 \
  }

/* How the validation text was chosen. */
typedef enum zeroc_split {
  ZEROC_SPLIT_NONE = 0,      /* val_fraction 0: no val shards */
  ZEROC_SPLIT_DOCUMENTS = 1, /* whole documents, by a hash of index and path */
  ZEROC_SPLIT_TAIL = 2,      /* fewer than 1/F documents: the last F of each one's text */
} zeroc_split_t;

/* Where a run stands (the progress callback) or how it ended (the result). */
typedef struct zeroc_prepare_stats {
  int documents;        /* input files after glob expansion */
  int documents_done;   /* documents fully tokenized and written */
  int val_documents;    /* documents sent to val whole (ZEROC_SPLIT_DOCUMENTS) */
  zeroc_split_t split;  /* the rule used */
  uint64_t bytes_total; /* text bytes of all documents */
  uint64_t bytes_done;  /* text bytes tokenized and written */
  uint64_t train_tokens, val_tokens;
  int train_shards, val_shards; /* shards started so far; at the end, written */
  int threads;                  /* tokenizing threads used */
  int vocab;                    /* the tokenizer's vocabulary */
  int32_t eot;                  /* its end-of-text id, or -1 (none: "bytes") */
  char tokenizer_kind[16];      /* "bytes" or "bpe" */
  double seconds;               /* since the start */
  int done;                     /* 1 in the last call: everything is in place */
} zeroc_prepare_stats_t;

/* Called from the calling thread about every 0.2 s while tokens are written,
 * and once more with done = 1 at the end. Returning nonzero stops the run (a
 * program's SIGINT handler can ask so): it then ends as a failure does, with
 * nothing written, and zeroc_text_prepare returns ZEROC_ERR_IO. */
typedef int (*zeroc_prepare_progress_fn)(void *user, const zeroc_prepare_stats_t *s);

/*
 * Tokenizes the inputs into shards in cfg->out_dir, plus tokenizer.json.
 *   cfg: from ZEROC_PREPARE_CONFIG_INIT; progress (may be NULL) and user: the
 *   progress callback; stats (may be NULL): the figures at the end (or as far
 *   as a failed run got).
 * Returns ZEROC_ERR_INVALID_ARG (a bad config value, a missing input, a glob
 * matching nothing, an input that is not a regular file, a tokenizer that
 * cannot be loaded or has more than 65536 ids, an out_dir that is not a
 * directory or already holds shards without force, no text at all),
 * ZEROC_ERR_IO (reading an input, writing a shard, stopped by the progress
 * callback), ZEROC_ERR_NOMEM. The
 * message (zeroc_last_error(NULL)) names the value and what is accepted. On
 * any failure no new file is left in out_dir and shards already there are
 * untouched.
 */
ZEROC_API zeroc_result_t zeroc_text_prepare(const zeroc_prepare_config_t *cfg,
                                            zeroc_prepare_progress_fn progress, void *user,
                                            zeroc_prepare_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
