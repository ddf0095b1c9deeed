/*
 * io/safetensors.h - reading and writing safetensors files (Hugging Face's
 * weight format): an 8-byte little-endian header length N, N bytes of JSON
 * header ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * optional "__metadata__": {string: string}}), then the tensor bytes.
 *
 * The reader trusts nothing: it takes (buffer, length) so it can be fuzzed,
 * and rejects a header that is too long, malformed JSON, unknown dtypes or
 * fields, sizes that disagree with shape x dtype, and byte ranges that fall
 * outside the data, overlap, or leave holes (the ranges must tile the data
 * section exactly, as the format requires).
 */
#ifndef ZEROC_IO_SAFETENSORS_H
#define ZEROC_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/result.h"

#define ZEROC_ST_MAX_DIMS 8
/* The largest header accepted, the same limit as the reference implementation. */
#define ZEROC_ST_MAX_HEADER 100000000ULL

typedef enum zeroc__st_dtype {
  ZEROC_ST_BOOL = 0,
  ZEROC_ST_U8,
  ZEROC_ST_I8,
  ZEROC_ST_F8_E4M3,
  ZEROC_ST_F8_E5M2,
  ZEROC_ST_I16,
  ZEROC_ST_U16,
  ZEROC_ST_F16,
  ZEROC_ST_BF16,
  ZEROC_ST_I32,
  ZEROC_ST_U32,
  ZEROC_ST_F32,
  ZEROC_ST_I64,
  ZEROC_ST_U64,
  ZEROC_ST_F64,
  ZEROC_ST_DTYPE_COUNT
} zeroc__st_dtype_t;

/* "F32", "BF16", ... as the format spells them; "?" when unknown. */
const char *zeroc__st_dtype_name(zeroc__st_dtype_t dt);
/* Bytes per element (0 when unknown). */
size_t zeroc__st_dtype_size(zeroc__st_dtype_t dt);

typedef struct zeroc__st_tensor {
  const char *name;
  zeroc__st_dtype_t dtype;
  int ndim; /* 0 for a scalar */
  uint64_t shape[ZEROC_ST_MAX_DIMS];
  uint64_t numel;      /* product of the shape (1 for a scalar) */
  uint64_t begin, end; /* byte range in the data section */
  const void *data;    /* the bytes (not necessarily aligned; use memcpy) */
} zeroc__st_tensor_t;

typedef struct zeroc__st zeroc__st_t;

/*
 * Parses a safetensors image held in memory; `buf` is not copied and must
 * outlive the result. `what` names the input in messages.
 * Returns ZEROC_ERR_CORRUPT with the reason, ZEROC_ERR_NOMEM.
 */
zeroc_result_t zeroc__st_parse(const void *buf, size_t len, const char *what, zeroc__st_t **st);
/* Maps `path` read-only and parses it. Adds ZEROC_ERR_IO (open, mmap). */
zeroc_result_t zeroc__st_open(const char *path, zeroc__st_t **st);
/* Frees the parse (and unmaps a file). close(NULL) does nothing. */
void zeroc__st_close(zeroc__st_t *st);

/* Number of tensors, and tensor i in the order of their data (by begin). */
size_t zeroc__st_count(const zeroc__st_t *st);
const zeroc__st_tensor_t *zeroc__st_tensor(const zeroc__st_t *st, size_t i);
/* The tensor called `name`, or NULL. */
const zeroc__st_tensor_t *zeroc__st_find(const zeroc__st_t *st, const char *name);
/* The "__metadata__" value for `key`, or NULL. */
const char *zeroc__st_metadata(const zeroc__st_t *st, const char *key);

/*
 * Converts a F32, BF16 or F16 tensor to fp32 into `out`, which holds `n`
 * elements (n must equal its numel). Returns ZEROC_ERR_INVALID_ARG naming the
 * tensor when n differs or the dtype is another one.
 */
zeroc_result_t zeroc__st_read_f32(const zeroc__st_tensor_t *t, float *out, size_t n);

/* ---- writer ------------------------------------------------------------------- */

typedef struct zeroc__st_writer zeroc__st_writer_t;

/*
 * Starts writing `path` (through a temporary name; nothing appears at `path`
 * until zeroc__st_writer_finish succeeds). Declare every tensor with _add (and
 * metadata with _metadata), then stream the bytes of the tensors in the order
 * they were added with _write / _write_f32; the header is written before the
 * first bytes. Tensors are laid out back to back (the format allows no gaps),
 * so add larger element types first to keep every tensor aligned.
 */
zeroc_result_t zeroc__st_writer_create(const char *path, zeroc__st_writer_t **w);
/* Adds a "__metadata__" string pair. Must come before the first write. */
zeroc_result_t zeroc__st_writer_metadata(zeroc__st_writer_t *w, const char *key, const char *value);
/* Declares a tensor. Rejects duplicate names, "__metadata__", unknown dtypes,
 * ndim > ZEROC_ST_MAX_DIMS, and calls after the first write. */
zeroc_result_t zeroc__st_writer_add(zeroc__st_writer_t *w, const char *name,
                                    zeroc__st_dtype_t dtype, int ndim, const uint64_t *shape);
/* Appends raw little-endian bytes; may cross tensor boundaries. Writing more
 * than the declared tensors hold is ZEROC_ERR_INVALID_ARG. */
zeroc_result_t zeroc__st_writer_write(zeroc__st_writer_t *w, const void *bytes, size_t n);
/* Appends `n` fp32 values converted to the dtype of the tensor being written
 * (F32, or BF16 rounded to nearest even); `n` may not cross a tensor boundary. */
zeroc_result_t zeroc__st_writer_write_f32(zeroc__st_writer_t *w, const float *x, size_t n);
/* Checks every declared byte was written, then fsyncs and renames the file
 * into place. Returns ZEROC_ERR_INVALID_ARG naming the first short tensor. */
zeroc_result_t zeroc__st_writer_finish(zeroc__st_writer_t *w);
/* Frees the writer; an unfinished file is removed. destroy(NULL) does nothing. */
void zeroc__st_writer_destroy(zeroc__st_writer_t *w);

#endif
