/*
 * io/st_set.h - the weights of a transformers save_pretrained directory as one
 * set of tensors: one model.safetensors, or shards model-0000k-of-0000n.safetensors
 * listed by model.safetensors.index.json ({"metadata": {"total_size": bytes},
 * "weight_map": {tensor: shard file}}), read and written (st_set.c). The
 * tensors themselves are io/safetensors.h's.
 */
#ifndef ZEROC_IO_ST_SET_H
#define ZEROC_IO_ST_SET_H

#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"

/* transformers' default max_shard_size ("5GB": decimal gigabytes) */
#define ZEROC_ST_SHARD_BYTES 5000000000ULL

typedef struct zeroc__st_set zeroc__st_set_t;

/*
 * Opens the tensors of `path`: a safetensors file; a directory (its
 * model.safetensors, else its model.safetensors.index.json); or an index file
 * ("*.index.json": every shard it names, beside it). An index's shard names must
 * be plain file names, and every tensor it maps must be in its shard.
 * Returns ZEROC_ERR_IO, ZEROC_ERR_CORRUPT (a shard or index that is not what it
 * says), ZEROC_ERR_INVALID_ARG (a directory with neither file), ZEROC_ERR_NOMEM,
 * each naming the file. Close with zeroc__st_set_close.
 */
zeroc_result_t zeroc__st_set_open(const char *path, zeroc__st_set_t **out);
void zeroc__st_set_close(zeroc__st_set_t *s);
/* The tensor called `name` (in the shard the index names), or NULL. */
const zeroc__st_tensor_t *zeroc__st_set_find(const zeroc__st_set_t *s, const char *name);
/* The number of files (1 without an index). */
int zeroc__st_set_files(const zeroc__st_set_t *s);
/* Every tensor of every file: their count, and tensor i of them (NULL past the end). */
size_t zeroc__st_set_count(const zeroc__st_set_t *s);
const zeroc__st_tensor_t *zeroc__st_set_tensor(const zeroc__st_set_t *s, size_t i);

/* One F32 tensor to write: its name and shape (ndim 1 or 2). */
typedef struct zeroc__st_entry {
  char name[160];
  int ndim;
  uint64_t shape[2];
} zeroc__st_entry_t;

/* Fills `out` with entry i's values (its numel floats, row-major). */
typedef zeroc_result_t (*zeroc__st_fill_fn)(void *user, size_t i, float *out);

/*
 * Writes the n entries as F32 tensors in their order, each one's values from
 * fill(user, i, buffer), with metadata `meta` (key, value pairs, NULL-ended):
 * dir 0: one safetensors file `path`; dir 1: into the existing directory `path`
 * as save_pretrained does, model.safetensors when the tensors' bytes are at most
 * `max_bytes`, else shards of at most max_bytes each (a larger tensor alone in
 * its own) and model.safetensors.index.json. Each file is published atomically.
 * Returns the writer's errors (ZEROC_ERR_IO naming the file), fill's, and
 * ZEROC_ERR_NOMEM.
 */
zeroc_result_t zeroc__st_set_write(const char *path, int dir, const zeroc__st_entry_t *e, size_t n,
                                   uint64_t max_bytes, const char *const *meta,
                                   zeroc__st_fill_fn fill, void *user);

#endif
