/*
 * text/prepare_internal.h - the parts of zeroc_text_prepare shared by
 * prepare.c (config, inputs, split, output directory) and prepare_run.c
 * (the reader that cuts documents into pieces, the tokenizing pool, and the
 * shard streams written in order).
 */
#ifndef ZEROC_TEXT_PREPARE_INTERNAL_H
#define ZEROC_TEXT_PREPARE_INTERNAL_H

#include <stdint.h>

#include "io/files.h"
#include "zeroc/prepare.h"
#include "zeroc/tokenizer.h"

/* One input file: a document. Its train part is bytes [0, val_cut), its val
 * part [val_cut, size): val_cut = size sends it all to train, 0 all to val. */
typedef struct zeroc__doc {
  char *path;
  uint64_t size;
  uint64_t val_cut;
} zeroc__doc_t;

/* The two token streams. */
enum { ZEROC__TRAIN = 0, ZEROC__VAL = 1 };

/* Everything one run needs; filled by prepare.c, consumed by prepare_run.c. */
typedef struct zeroc__prepare {
  zeroc_prepare_config_t cfg; /* defaults resolved */
  const zeroc_tokenizer_t *tok;
  int32_t eot;
  int width;     /* bytes per token in the shards: 2 (uint16), or 4 (uint32) for a vocabulary
                    above 65536 (zeroc_shard_token_bytes) */
  int space_cut; /* 1: the tokenizer adds a space before a text that does not start with one
                    (add_prefix_space), so a piece may only start with a space */
  zeroc__doc_t *docs;
  int ndocs;
  /* the shards written so far, under temporary names until the run commits */
  zeroc__afile_t *shards[2];
  int nshards[2], cap_shards[2];
  uint64_t in_shard[2]; /* tokens in the stream's current (last) shard */
  zeroc_prepare_stats_t stats;
  /* the document being written: its bytes and its tokens (without the end-of-text id),
   * so a document that encodes to nothing is refused (issue 37, item 10) */
  uint64_t doc_bytes, doc_tokens;
  /* bytes the tokenizer had no token for (left out): of the document being written, of
   * all, in how many documents, the first of them (warned once at the end) */
  uint64_t doc_dropped, dropped_bytes;
  int dropped_docs, first_dropped;
  zeroc_prepare_progress_fn progress;
  void *user;
  double t0, last_report;
} zeroc__prepare_t;

/* After a run that wrote nshards[ZEROC__TRAIN] train and nshards[ZEROC__VAL]
 * val shards: is directory entry `name` a shard of an earlier run, to remove?
 * A shard of this run is exactly the name prepare_run.c wrote ("train_" and
 * the index in at least six digits); any other shard-like name is stale. */
int zeroc__prepare_is_stale(const char *name, const int nshards[2]);

/* Reads every document, tokenizes it on cfg.threads threads and appends the
 * tokens, in document order, to the train and val shards (left open under
 * temporary names: the caller commits or aborts them). */
zeroc_result_t zeroc__prepare_run(zeroc__prepare_t *p);

/* Where a chunk of `len` bytes (more text follows it) may be cut so that the
 * tokens of the two sides, encoded apart, equal those of the whole: before
 * the last character of a run of ASCII white space that lies between two
 * printable ASCII characters. GPT-2's pre-tokenizer splits there whatever
 * comes before or after (a run followed by a non-space splits before its last
 * character; a space joins the word after it). need_newline: only runs
 * holding a '\n' (line boundaries). need_space: only runs whose last
 * character is a space (add_prefix_space then adds nothing to the second
 * side). Searched backward from the end; 0 when there is none. */
size_t zeroc__prepare_safe_cut(const char *text, size_t len, int need_newline, int need_space);

#endif
