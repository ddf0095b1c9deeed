/*
 * io/gpt_io.c - the built-in GPT's weights as a safetensors file with Hugging
 * Face GPT-2 names and layouts, so a trained model opens in the Python
 * ecosystem and GPT-2 weights can be fine-tuned here. Our linear weights are
 * (out, in); GPT-2's Conv1D stores (in, out), so 2-D block weights are
 * transposed both ways. wte is exported without its padding rows.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "zeroc/gpt.h"

#define CHK(call) ZEROC_CHECK(call)

/* Hugging Face name and stored shape of parameter p of unit u; *transpose is
 * set for the Conv1D weights. Units: 0 embedding, 1..L blocks, L+1 head. */
static void hf_name(const zeroc_model_t *m, int u, int p, int nunits, int vocab, char *name,
                    size_t n, int *ndim, uint64_t shape[2], int *transpose) {
  const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
  int block = u > 0 && u < nunits - 1;
  if (block) snprintf(name, n, "h.%d.%s", u - 1, pd->name);
  else snprintf(name, n, "%s", pd->name);
  *ndim = pd->ndim;
  *transpose = block && pd->ndim == 2;
  if (pd->ndim == 2) {
    shape[0] = (uint64_t)(*transpose ? pd->shape[1] : pd->shape[0]);
    shape[1] = (uint64_t)(*transpose ? pd->shape[0] : pd->shape[1]);
    if (u == 0 && p == 0) shape[0] = (uint64_t)vocab; /* wte without padding rows */
  } else {
    shape[0] = (uint64_t)pd->shape[0];
    shape[1] = 1;
  }
}

/* dst (c, r) = src (r, c)^T */
static void transpose(float *dst, const float *src, uint64_t r, uint64_t c) {
  for (uint64_t i = 0; i < r; i++)
    for (uint64_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}

zeroc_result_t zeroc_gpt_export(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  int root = zeroc_ctx_mesh(ctx)->rank == 0, n = zeroc_model_num_units(m), vocab;
  int Vp = zeroc_gpt_padded_vocab(g);
  zeroc_result_t res = ZEROC_OK;
  float **full = calloc((size_t)n, sizeof *full);
  float *tmp = NULL;
  zeroc__st_writer_t *w = NULL;
  if (!full) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "export tables"));
  vocab = zeroc_gpt_config(g)->vocab;
  (void)Vp;
  /* every rank takes part in the gathers; rank 0 writes */
  uint64_t maxp = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    full[u] = malloc(ui.flat_numel * 4);
    if (!full[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export buffer of unit %d", u);
      goto fail;
    }
    ZEROC_TRY(zeroc_model_gather_unit(m, u, full[u]));
    for (int p = 0; p < ui.nparams; p++) {
      uint64_t ne = zeroc_param_numel(zeroc_model_param_desc(m, u, p));
      if (ne > maxp) maxp = ne;
    }
  }
  if (root) {
    tmp = malloc(maxp * 4 + 4);
    if (!tmp) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export transpose buffer");
      goto fail;
    }
    ZEROC_TRY(zeroc__st_writer_create(path, &w));
    ZEROC_TRY(zeroc__st_writer_metadata(w, "format", "pt"));
    ZEROC_TRY(zeroc__st_writer_metadata(w, "producer", "zeroc"));
    for (int u = 0; u < n; u++) {
      zeroc_unit_info_t ui;
      zeroc_model_unit_info(m, u, &ui);
      for (int p = 0; p < ui.nparams; p++) {
        char name[128];
        int nd, tr;
        uint64_t shape[2];
        hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr);
        ZEROC_TRY(zeroc__st_writer_add(w, name, ZEROC_ST_F32, nd, shape));
      }
    }
    for (int u = 0; u < n; u++) {
      zeroc_unit_info_t ui;
      zeroc_model_unit_info(m, u, &ui);
      for (int p = 0; p < ui.nparams; p++) {
        char name[128];
        int nd, tr;
        uint64_t shape[2];
        hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr);
        const float *src = full[u] + zeroc_model_param_offset(m, u, p);
        uint64_t count = nd == 2 ? shape[0] * shape[1] : shape[0];
        if (tr) {
          transpose(tmp, src, shape[1], shape[0]);
          src = tmp;
        }
        ZEROC_TRY(zeroc__st_writer_write_f32(w, src, count));
      }
    }
    ZEROC_TRY(zeroc__st_writer_finish(w));
  }
fail:
  zeroc__st_writer_destroy(w);
  free(tmp);
  for (int u = 0; u < n; u++) free(full[u]);
  free(full);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}

zeroc_result_t zeroc_gpt_import(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  int n = zeroc_model_num_units(m), vocab;
  zeroc_result_t res = ZEROC_OK;
  zeroc__st_t *st = NULL;
  float **shards = calloc((size_t)n, sizeof *shards);
  float *tmp = NULL, *flat = NULL;
  if (!shards) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "import tables"));
  vocab = zeroc_gpt_config(g)->vocab;
  ZEROC_TRY(zeroc__st_open(path, &st));
  /* every rank reads the whole file and keeps its own shard of each unit */
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    flat = calloc(ui.flat_numel, sizeof(float));
    shards[u] = malloc(ui.shard_numel * 4 + 4);
    if (!flat || !shards[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffer of unit %d", u);
      goto fail;
    }
    for (int p = 0; p < ui.nparams; p++) {
      char name[128];
      int nd, tr;
      uint64_t shape[2];
      hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr);
      const zeroc__st_tensor_t *t = zeroc__st_find(st, name);
      if (!t) {
        res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "'%s' has no tensor '%s' (a GPT-2 file of this shape has)",
                         path, name);
        goto fail;
      }
      uint64_t count = nd == 2 ? shape[0] * shape[1] : shape[0];
      int same = t->ndim == nd && t->shape[0] == shape[0] && (nd == 1 || t->shape[1] == shape[1]);
      if (!same) {
        res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                         "'%s': tensor '%s' has shape (%" PRIu64 ", %" PRIu64 "), this model needs (%" PRIu64
                         ", %" PRIu64 ")",
                         path, name, t->shape[0], t->ndim > 1 ? t->shape[1] : 1, shape[0], nd == 2 ? shape[1] : 1);
        goto fail;
      }
      float *dst = flat + zeroc_model_param_offset(m, u, p);
      if (tr) {
        free(tmp);
        tmp = malloc(count * 4 + 4);
        if (!tmp) {
          res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "import transpose buffer");
          goto fail;
        }
        ZEROC_TRY(zeroc__st_read_f32(t, tmp, count));
        transpose(dst, tmp, shape[0], shape[1]);
      } else {
        ZEROC_TRY(zeroc__st_read_f32(t, dst, count));
      }
    }
    memcpy(shards[u], flat + ui.shard_offset, ui.shard_numel * 4);
    free(flat);
    flat = NULL;
  }
fail:
  free(flat);
  free(tmp);
  zeroc__st_close(st);
  /* nothing changes unless every rank read everything */
  res = zeroc_ctx_agree(ctx, res);
  for (int u = 0; u < n && !res; u++) res = zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, shards[u]);
  if (!res) res = zeroc_model_sync_params(m);
  for (int u = 0; u < n; u++) free(shards[u]);
  free(shards);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}
