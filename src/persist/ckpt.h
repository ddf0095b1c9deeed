/*
 * persist/ckpt.h - what the checkpoint files share (internal): the bounds a
 * manifest's numbers must keep, the manifest's own checksum, its integer
 * reader, and finding a checkpoint directory. ckpt_save.c writes a
 * checkpoint, ckpt_load.c reads one back, ckpt_manifest.c holds what both
 * sides and the resume check use.
 */
#ifndef ZEROC_PERSIST_CKPT_H
#define ZEROC_PERSIST_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "io/json.h"
#include "zeroc/result.h"

#define MANIFEST_MAX (64u << 20)
#define STATES       3 /* master, m, v */
/* Bounds on what a manifest may claim: far beyond any real run, low enough
 * that no product or sum of them below overflows 64 bits or wraps an int. */
#define MAX_STEP  (1ull << 48) /* steps */
#define MAX_MESH  65536ull     /* tp, pp and dp sizes, shards per checkpoint */
#define MAX_NUMEL (1ull << 40) /* elements of one unit or parameter (4 TiB of fp32) */
#define MAX_BYTES (MAX_NUMEL * 4 * STATES)

/* Reads integer field `key` of `o` into *v; it must lie in 0..max. Every
 * integer of a manifest goes through here: a value that would wrap an int or
 * overflow a size computed from it is refused by name, never cast. `what`
 * names the manifest in the message. */
zeroc_result_t zeroc__ckpt_get_u64(const zeroc__json_t *o, const char *key, const char *what,
                                   uint64_t max, uint64_t *v);

/* `text` (a JSON object) with the checksum field appended: *out malloc'd. */
zeroc_result_t zeroc__ckpt_seal_manifest(const char *text, size_t len, char **out, size_t *out_len);

/* Checks the manifest's checksum field when it has one (root: its parsed
 * `text`); manifests written before the field existed load without it. */
zeroc_result_t zeroc__ckpt_check_manifest_crc(const char *text, size_t len,
                                              const zeroc__json_t *root, const char *what);

/* Checkpoint retention, after a save into `dir` completed (DIR/latest written):
 * keeps the newest `keep` (>= 1) complete checkpoints step_<k> and removes the
 * older ones, with what a model saved beside each (DIR/<name>_step_<k>, as
 * DLRM's tables_step_<k>); never the one DIR/latest names. Staging
 * directories (step_<k>.tmp) are not checkpoints. Rank 0 only, as the save's
 * publishing is; a failure to remove is logged, the new checkpoint stands. */
void zeroc__ckpt_prune(const char *dir, int keep);

/* DIR/latest -> DIR/<name> in `out`, or `path` itself when it holds a manifest. */
zeroc_result_t zeroc__ckpt_resolve(const char *path, char *out, size_t n);

#endif
