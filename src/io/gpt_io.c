/*
 * io/gpt_io.c - the built-in GPT's weights as a safetensors file with Hugging
 * Face GPT-2 names and layouts, so a trained model opens in the Python
 * ecosystem and GPT-2 weights can be fine-tuned here. Our linear weights are
 * (out, in); GPT-2's Conv1D stores (in, out), so 2-D block weights are
 * transposed both ways. wte is exported without its padding rows.
 * With pipeline parallelism every stage holds other units: rank 0 receives
 * the others' from the first rank of each stage and writes the file, and on
 * import each rank reads its own units' tensors; the last stage's tied copy
 * of wte is the embedding's wte in the file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/ctx.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "zeroc/gpt.h"

#define CHK(call) ZEROC_CHECK(call)

/* Tags of the export transfer on the pipeline group (blocking, after every
 * pipeline message of the step has landed). */
enum { TAG_HEADER = 32001, TAG_DATA = 32002 };

/* Hugging Face name and stored shape of parameter `pd` of global unit g
 * (0 embedding, 1..L blocks, L+1 head); *transpose is set for the Conv1D
 * weights. */
static void hf_name(const zeroc_param_desc_t *pd, int g, int L, int vocab, char *name, size_t n,
                    int *ndim, uint64_t shape[2], int *transpose) {
  int block = g > 0 && g < L + 1;
  if (block)
    snprintf(name, n, "h.%d.%s", g - 1, pd->name);
  else
    snprintf(name, n, "%s", pd->name);
  *ndim = pd->ndim;
  *transpose = block && pd->ndim == 2;
  if (pd->ndim == 2) {
    shape[0] = (uint64_t)(*transpose ? pd->shape[1] : pd->shape[0]);
    shape[1] = (uint64_t)(*transpose ? pd->shape[0] : pd->shape[1]);
    if (!block && !strcmp(pd->name, "wte.weight")) shape[0] = (uint64_t)vocab; /* no padding rows */
  } else {
    shape[0] = (uint64_t)pd->shape[0];
    shape[1] = 1;
  }
}

/* A copy of the embedding's wte held by another unit (the last stage's head). */
static int is_tied_copy(const zeroc_param_desc_t *pd, int g) {
  return g != 0 && (pd->flags & ZEROC_PARAM_TIED);
}

/* dst (c, r) = src (r, c)^T */
static void transpose(float *dst, const float *src, uint64_t r, uint64_t c) {
  for (uint64_t i = 0; i < r; i++)
    for (uint64_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}

static zeroc_result_t mpi_check(int e, const char *what, int peer) {
  if (e == MPI_SUCCESS) return ZEROC_OK;
  return ZEROC_FAIL(ZEROC_ERR_MPI, "export: %s with pipeline rank %d: MPI error %d", what, peer, e);
}

/* Where every exported tensor's values are, by global unit and parameter. */
typedef struct {
  const float **src; /* (units x 12): values of parameter j of global unit g at [g*12 + j] */
  float **owned;     /* (pp) buffers received from the other stages */
} table_t;

zeroc_result_t zeroc_gpt_export(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int root = mesh->rank == 0, n = zeroc_model_num_units(m);
  int L = zeroc_gpt_config(g)->layers, NU = L + 2, vocab = zeroc_gpt_config(g)->vocab;
  int rep = mesh->dp_rank == 0 && mesh->tp_rank == 0; /* speaks for its pipeline stage */
  zeroc_group_t *ppg = zeroc__ctx_group(ctx, ZEROC_GROUP_PP);
  zeroc_result_t res = ZEROC_OK;
  float **full = calloc((size_t)n, sizeof *full);
  float *tmp = NULL, *packed = NULL;
  int64_t *hdr = NULL;
  table_t t = {calloc((size_t)NU * 12, sizeof(float *)), calloc((size_t)mesh->pp, sizeof(float *))};
  zeroc__st_writer_t *w = NULL;
  if (!full || !t.src || !t.owned) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export tables");
    goto fail;
  }
  /* every rank takes part in the gathers of its stage's units */
  uint64_t maxp = 0, count = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    full[u] = malloc(ui.flat_numel * 4);
    if (!full[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export buffer of unit %d", u);
      goto fail;
    }
    ZEROC_TRY(zeroc_model_gather_unit(m, u, full[u]));
    int gu = zeroc_gpt_global_unit(g, u);
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      if (is_tied_copy(pd, gu)) continue;
      uint64_t ne = zeroc_param_numel(pd);
      if (ne > maxp) maxp = ne;
      count += ne;
      t.src[gu * 12 + p] = full[u] + zeroc_model_param_offset(m, u, p);
    }
  }
  /* the other stages' first ranks send theirs to rank 0: [units, floats, g...] then the
   * values of each unit's parameters in order, without padding or the tied copy */
  if (mesh->pp > 1 && rep && mesh->pp_rank > 0) {
    hdr = malloc(sizeof(int64_t) * (size_t)(n + 2));
    packed = malloc(count * 4 + 4);
    if (!hdr || !packed) {
      res =
          ZEROC_FAIL(ZEROC_ERR_NOMEM, "export transfer of %llu floats", (unsigned long long)count);
      goto fail;
    }
    hdr[0] = n, hdr[1] = (int64_t)count;
    uint64_t at = 0;
    for (int u = 0; u < n; u++) {
      int gu = zeroc_gpt_global_unit(g, u), np;
      hdr[2 + u] = gu;
      zeroc_gpt_unit_params(g, gu, &np);
      for (int p = 0; p < np; p++) {
        uint64_t ne = zeroc_param_numel(zeroc_model_param_desc(m, u, p));
        memcpy(packed + at, t.src[gu * 12 + p], ne * 4);
        at += ne;
      }
    }
    MPI_Comm c = ppg->mpi[ZEROC_P2P_CHANNEL];
    ZEROC_TRY(
        mpi_check(MPI_Send(hdr, n + 2, MPI_INT64_T, 0, TAG_HEADER, c), "sending the unit list", 0));
    for (uint64_t off = 0; off < count; off += 1u << 30) {
      int part = (int)(count - off < (1u << 30) ? count - off : (1u << 30));
      ZEROC_TRY(
          mpi_check(MPI_Send(packed + off, part, MPI_FLOAT, 0, TAG_DATA, c), "sending values", 0));
    }
  }
  if (root) {
    MPI_Comm c = ppg->mpi[ZEROC_P2P_CHANNEL];
    int64_t *h = hdr = malloc(sizeof(int64_t) * (size_t)(NU + 2));
    if (!h) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export unit list");
      goto fail;
    }
    for (int s = 1; s < mesh->pp; s++) {
      MPI_Status st;
      int got = 0;
      ZEROC_TRY(mpi_check(MPI_Recv(h, NU + 2, MPI_INT64_T, s, TAG_HEADER, c, &st),
                          "receiving the unit list", s));
      MPI_Get_count(&st, MPI_INT64_T, &got);
      if (got < 2 || h[0] != got - 2 || h[1] < 0) {
        res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "export: pipeline rank %d sent a bad unit list", s);
        goto fail;
      }
      uint64_t total = (uint64_t)h[1];
      t.owned[s] = malloc(total * 4 + 4);
      if (!t.owned[s]) {
        res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export: %llu floats from pipeline rank %d",
                         (unsigned long long)total, s);
        goto fail;
      }
      for (uint64_t off = 0; off < total; off += 1u << 30) {
        int part = (int)(total - off < (1u << 30) ? total - off : (1u << 30));
        ZEROC_TRY(mpi_check(
            MPI_Recv(t.owned[s] + off, part, MPI_FLOAT, s, TAG_DATA, c, MPI_STATUS_IGNORE),
            "receiving values", s));
      }
      uint64_t at = 0;
      for (int64_t k = 0; k < h[0]; k++) {
        int gu = (int)h[2 + k], np;
        const zeroc_param_desc_t *pds = zeroc_gpt_unit_params(g, gu, &np);
        for (int p = 0; p < np && pds; p++) {
          uint64_t ne = zeroc_param_numel(&pds[p]);
          if (at + ne > total) break;
          t.src[gu * 12 + p] = t.owned[s] + at;
          if (ne > maxp) maxp = ne;
          at += ne;
        }
      }
    }
    for (int gu = 0; gu < NU; gu++) {
      int np;
      zeroc_gpt_unit_params(g, gu, &np);
      for (int p = 0; p < np; p++)
        if (!t.src[gu * 12 + p]) {
          res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "export: no values for parameter %d of unit %d", p,
                           gu);
          goto fail;
        }
    }
    tmp = malloc(maxp * 4 + 4);
    if (!tmp) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export transpose buffer");
      goto fail;
    }
    ZEROC_TRY(zeroc__st_writer_create(path, &w));
    ZEROC_TRY(zeroc__st_writer_metadata(w, "format", "pt"));
    ZEROC_TRY(zeroc__st_writer_metadata(w, "producer", "zeroc"));
    for (int pass = 0; pass < 2; pass++) {
      /* the header lists every tensor first, then the values follow in the same order */
      for (int gu = 0; gu < NU; gu++) {
        int np;
        const zeroc_param_desc_t *pds = zeroc_gpt_unit_params(g, gu, &np);
        for (int p = 0; p < np; p++) {
          char name[128];
          int nd, tr;
          uint64_t shape[2];
          hf_name(&pds[p], gu, L, vocab, name, sizeof name, &nd, shape, &tr);
          if (!pass) {
            ZEROC_TRY(zeroc__st_writer_add(w, name, ZEROC_ST_F32, nd, shape));
            continue;
          }
          const float *src = t.src[gu * 12 + p];
          uint64_t cnt = nd == 2 ? shape[0] * shape[1] : shape[0];
          if (tr) {
            transpose(tmp, src, shape[1], shape[0]);
            src = tmp;
          }
          ZEROC_TRY(zeroc__st_writer_write_f32(w, src, cnt));
        }
      }
    }
    ZEROC_TRY(zeroc__st_writer_finish(w));
  }
fail:
  zeroc__st_writer_destroy(w);
  free(tmp);
  free(packed);
  free(hdr);
  for (int u = 0; full && u < n; u++) free(full[u]);
  free(full);
  for (int s = 0; t.owned && s < mesh->pp; s++) free(t.owned[s]);
  free(t.owned);
  free(t.src);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}

zeroc_result_t zeroc_gpt_import(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  int n = zeroc_model_num_units(m), vocab, L;
  zeroc_result_t res = ZEROC_OK;
  zeroc__st_t *st = NULL;
  float **shards = calloc((size_t)n, sizeof *shards);
  float *tmp = NULL, *flat = NULL;
  if (!shards) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "import tables"));
  vocab = zeroc_gpt_config(g)->vocab;
  L = zeroc_gpt_config(g)->layers;
  ZEROC_TRY(zeroc__st_open(path, &st));
  /* every rank reads its own units' tensors and keeps its shard of each */
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZEROC_TRY(zeroc_model_unit_info(m, u, &ui));
    flat = calloc(ui.flat_numel, sizeof(float));
    shards[u] = malloc(ui.shard_numel * 4 + 4);
    if (!flat || !shards[u]) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffer of unit %d", u);
      goto fail;
    }
    int gu = zeroc_gpt_global_unit(g, u);
    for (int p = 0; p < ui.nparams; p++) {
      char name[128];
      int nd, tr;
      uint64_t shape[2];
      /* a tied copy of wte reads wte */
      hf_name(zeroc_model_param_desc(m, u, p),
              is_tied_copy(zeroc_model_param_desc(m, u, p), gu) ? 0 : gu, L, vocab, name,
              sizeof name, &nd, shape, &tr);
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
  for (int u = 0; u < n && !res; u++)
    res = zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, shards[u]);
  if (!res) res = zeroc_model_sync_params(m);
  for (int u = 0; u < n; u++) free(shards[u]);
  free(shards);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}
