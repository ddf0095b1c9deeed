/*
 * model/gpt_hfmap.h - which transformers tensors hold each parameter of the
 * decoder, and how (gpt_hfmap.c): GPT-2's Conv1D weights transposed; Llama's
 * fused q|k|v and gate|up cut into transformers' q_proj, k_proj, v_proj, gate_proj
 * and up_proj, with the query heads (and o_proj's input columns) put back in
 * transformers' order (gpt_impl.h says why zeroc groups them by kv head).
 * Export (gpt_io.c) and import use the same pieces, so the two are inverse.
 */
#ifndef ZEROC_MODEL_GPT_HFMAP_H
#define ZEROC_MODEL_GPT_HFMAP_H

#include <stdint.h>

#include "zeroc/gpt.h"
#include "zeroc/layer.h"

/* How a piece's file values map to the parameter's unsplit tensor. */
typedef enum zeroc__hf_map {
  ZEROC_HF_COPY,      /* rows row0.. of the tensor, as they are */
  ZEROC_HF_TRANSPOSE, /* GPT-2's Conv1D: the file holds (in, out), zeroc (out, in) */
  ZEROC_HF_QROWS,     /* Llama's q rows: transformers' head h is zeroc's head perm(h) */
  ZEROC_HF_OCOLS,     /* Llama's o_proj: its input columns by head, permuted the same way */
} zeroc__hf_map_t;

/* One file tensor and the part of one parameter it holds. */
typedef struct zeroc__hf_piece {
  char name[128];    /* transformers' name inside the base model ("h.0.attn.c_attn.weight",
                        "layers.0.self_attn.q_proj.weight"); "lm_head.weight" is outside it */
  int nd;            /* 1 or 2 */
  uint64_t shape[2]; /* the file's shape (shape[1] 1 when nd is 1) */
  uint64_t row0;     /* the parameter's first row it holds */
  uint64_t cols;     /* the parameter's columns (1 for a vector) */
  zeroc__hf_map_t map;
  int hs, nkv, group; /* QROWS, OCOLS: head size, kv heads, query heads per kv head */
} zeroc__hf_piece_t;

/* The most pieces one parameter has (q, k, v). */
enum { ZEROC_HF_MAX_PIECES = 3 };

/* The pieces of parameter `pd` of global unit gu (0 embedding, 1..L blocks, L+1 head)
 * of a model of shape `cfg`, into out; returns their count. The embedding and an
 * untied head leave out the padded vocabulary rows. */
int zeroc__hf_pieces(const zeroc_gpt_config_t *cfg, const zeroc_param_desc_t *pd, int gu,
                     zeroc__hf_piece_t out[ZEROC_HF_MAX_PIECES]);

/* The piece's values in the file's layout (out: its shape's elements) from the
 * parameter's unsplit tensor `full`. */
void zeroc__hf_piece_get(const zeroc__hf_piece_t *pc, const float *full, float *out);
/* The reverse: the file's values `in` into their places of `full`. */
void zeroc__hf_piece_put(const zeroc__hf_piece_t *pc, const float *in, float *full);

#endif
