/*
 * io/gpt_io.c - the built-in GPT's weights as a safetensors file with Hugging
 * Face GPT-2 names and layouts, so a trained model opens in the Python
 * ecosystem and GPT-2 weights can be fine-tuned here. Our linear weights are
 * (out, in); GPT-2's Conv1D stores (in, out), so 2-D block weights are
 * transposed both ways. wte is exported without its padding rows.
 * Tensors are always the consolidated (unsplit) ones: with tensor
 * parallelism, export rebuilds each tensor from the tp ranks' slices
 * (tp/split.h) and import cuts each rank's slice from the file's tensor.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/ctx.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "tp/split.h"
#include "zeroc/gpt.h"

#define CHK(call) ZEROC_CHECK(call)

/* Hugging Face name and stored shape of parameter p of unit u (its unsplit
 * tensor, `sp`); *transpose is set for the Conv1D weights. Units: 0 embedding,
 * 1..L blocks, L+1 head. */
static void hf_name(const zeroc_model_t *m, int u, int p, int nunits, int vocab, char *name,
                    size_t n, int *ndim, uint64_t shape[2], int *transpose, zeroc__split_t *sp) {
  const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
  int block = u > 0 && u < nunits - 1;
  zeroc__split_of(pd, sp);
  if (block)
    snprintf(name, n, "h.%d.%s", u - 1, pd->name);
  else
    snprintf(name, n, "%s", pd->name);
  *ndim = pd->ndim;
  *transpose = block && pd->ndim == 2;
  if (pd->ndim == 2) {
    shape[0] = (uint64_t)(*transpose ? sp->full[1] : sp->full[0]);
    shape[1] = (uint64_t)(*transpose ? sp->full[0] : sp->full[1]);
    if (u == 0 && p == 0) shape[0] = (uint64_t)vocab; /* wte without padding rows */
  } else {
    shape[0] = (uint64_t)sp->full[0];
    shape[1] = 1;
  }
}

/* dst (c, r) = src (r, c)^T */
static void transpose(float *dst, const float *src, uint64_t r, uint64_t c) {
  for (uint64_t i = 0; i < r; i++)
    for (uint64_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}

/* The unsplit tensor `dst` (sp's full shape) from this rank's local values
 * `src`, summed over the tp ranks: each rank writes its slice into zeros (a
 * replicated tensor only tp rank 0), so the sum is the tensor itself. */
static zeroc_result_t consolidate(zeroc_ctx_t *ctx, const zeroc_param_desc_t *pd,
                                  const zeroc__split_t *sp, const float *src, float *dst) {
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  uint64_t full = zeroc__split_full_numel(sp), n = zeroc_param_numel(pd);
  if (mesh->tp == 1) {
    memcpy(dst, src, full * 4);
    return ZEROC_OK;
  }
  if (full > (uint64_t)INT32_MAX)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "export of '%s': %" PRIu64 " elements, at most %d with tp > 1",
                      pd->name ? pd->name : "", full, INT32_MAX);
  memset(dst, 0, full * 4);
  if (sp->groups > 0)
    for (uint64_t j = 0; j < n; j++) dst[zeroc__split_to_global(sp, pd->tp_rank, j)] = src[j];
  else if (mesh->tp_rank == 0)
    memcpy(dst, src, n * 4);
  return zeroc__allreduce_host(zeroc__ctx_group(ctx, ZEROC_GROUP_TP), dst, (size_t)full, ZEROC_FP32,
                               ZEROC_SUM);
}

zeroc_result_t zeroc_gpt_export(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  int root = zeroc_ctx_mesh(ctx)->rank == 0, n = zeroc_model_num_units(m), vocab;
  zeroc_result_t res = ZEROC_OK, wres = ZEROC_OK; /* wres: rank 0's writing */
  float **full = calloc((size_t)n, sizeof *full);
  float *tmp = NULL, *gl = NULL;
  zeroc__st_writer_t *w = NULL;
  if (!full) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "export tables"));
  vocab = zeroc_gpt_config(g)->vocab;
  /* every rank takes part in the gathers (and the tp sums); rank 0 writes */
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
      zeroc__split_t sp;
      zeroc__split_of(zeroc_model_param_desc(m, u, p), &sp);
      uint64_t ne = zeroc__split_full_numel(&sp);
      if (ne > maxp) maxp = ne;
    }
  }
  tmp = malloc(maxp * 4 + 4);
  gl = malloc(maxp * 4 + 4);
  if (!tmp || !gl) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export buffers of %" PRIu64 " floats", maxp);
    goto fail;
  }
  if (root) {
    wres = zeroc__st_writer_create(path, &w);
    if (!wres) wres = zeroc__st_writer_metadata(w, "format", "pt");
    if (!wres) wres = zeroc__st_writer_metadata(w, "producer", "zeroc");
    for (int u = 0; u < n && !wres; u++) {
      zeroc_unit_info_t ui;
      zeroc_model_unit_info(m, u, &ui);
      for (int p = 0; p < ui.nparams && !wres; p++) {
        char name[128];
        int nd, tr;
        uint64_t shape[2];
        zeroc__split_t sp;
        hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr, &sp);
        wres = zeroc__st_writer_add(w, name, ZEROC_ST_F32, nd, shape);
      }
    }
  }
  /* the sums over tp ranks are collective: every rank walks every tensor, even
   * after rank 0 failed to write */
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(m, u, &ui);
    for (int p = 0; p < ui.nparams; p++) {
      char name[128];
      int nd, tr;
      uint64_t shape[2];
      zeroc__split_t sp;
      hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr, &sp);
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      ZEROC_TRY(consolidate(ctx, pd, &sp, full[u] + zeroc_model_param_offset(m, u, p), gl));
      if (!root || wres) continue;
      const float *src = gl;
      uint64_t count = nd == 2 ? shape[0] * shape[1] : shape[0];
      if (tr) {
        transpose(tmp, gl, shape[1], shape[0]);
        src = tmp;
      }
      wres = zeroc__st_writer_write_f32(w, src, count);
    }
  }
  if (root && !wres) wres = zeroc__st_writer_finish(w);
  res = wres;
fail:
  zeroc__st_writer_destroy(w);
  free(tmp);
  free(gl);
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
  float *tmp = NULL, *gl = NULL, *flat = NULL;
  if (!shards) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "import tables"));
  vocab = zeroc_gpt_config(g)->vocab;
  ZEROC_TRY(zeroc__st_open(path, &st));
  /* every rank reads each whole tensor and keeps its own shard of its slice */
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
      zeroc__split_t sp;
      hf_name(m, u, p, n, vocab, name, sizeof name, &nd, shape, &tr, &sp);
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      const zeroc__st_tensor_t *t = zeroc__st_find(st, name);
      if (!t) {
        res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                         "'%s' has no tensor '%s' (a GPT-2 file of this shape has)", path, name);
        goto fail;
      }
      uint64_t count = nd == 2 ? shape[0] * shape[1] : shape[0];
      int same = t->ndim == nd && t->shape[0] == shape[0] && (nd == 1 || t->shape[1] == shape[1]);
      if (!same) {
        res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                         "'%s': tensor '%s' has shape (%" PRIu64 ", %" PRIu64
                         "), this model needs (%" PRIu64 ", %" PRIu64 ")",
                         path, name, t->shape[0], t->ndim > 1 ? t->shape[1] : 1, shape[0],
                         nd == 2 ? shape[1] : 1);
        goto fail;
      }
      free(tmp);
      free(gl);
      tmp = malloc(count * 4 + 4);
      gl = malloc(count * 4 + 4);
      if (!tmp || !gl) {
        res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffers of '%s'", name);
        goto fail;
      }
      /* gl: the file's tensor in our (out, in) layout; wte's padding rows are
       * not in it (file_full) and stay zero */
      ZEROC_TRY(zeroc__st_read_f32(t, tr ? tmp : gl, count));
      if (tr) transpose(gl, tmp, shape[0], shape[1]);
      int64_t file_full[ZEROC_MAX_DIMS] = {(int64_t)(tr ? shape[1] : shape[0]),
                                           (int64_t)(tr ? shape[0] : shape[1])};
      float *dst = flat + zeroc_model_param_offset(m, u, p);
      uint64_t ne = zeroc_param_numel(pd);
      for (uint64_t j = 0; j < ne; j++) {
        uint64_t gi = zeroc__split_to_global(&sp, pd->tp_rank, j), fi;
        dst[j] = zeroc__split_remap(gi, sp.full, file_full, nd, &fi) ? gl[fi] : 0.0f;
      }
    }
    memcpy(shards[u], flat + ui.shard_offset, ui.shard_numel * 4);
    free(flat);
    flat = NULL;
  }
fail:
  free(flat);
  free(tmp);
  free(gl);
  zeroc__st_close(st);
  /* nothing changes unless every rank read everything */
  res = zeroc_ctx_agree(ctx, res);
  for (int u = 0; u < n && !res; u++)
    res = zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, shards[u]);
  if (!res) res = zeroc_model_sync_params(m);
  for (int u = 0; u < n; u++) free(shards[u]);
  free(shards);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}
