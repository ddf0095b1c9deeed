/*
 * model/gpt_io.c - the built-in decoder's weights as safetensors with Hugging
 * Face names and layouts (GPT2LMHeadModel's, or LlamaForCausalLM's and
 * Qwen2ForCausalLM's: gpt_hfmap.c says which tensors hold each parameter), so
 * a trained model opens in the Python ecosystem and published weights can be
 * fine-tuned here: one file, or a save_pretrained directory's model.safetensors
 * (sharded with an index above ZEROC_EXPORT_SHARD_BYTES, io/st_set.h).
 * Tensors are always the consolidated (unsplit) ones: with tensor
 * parallelism, export rebuilds each tensor from the tp ranks' slices
 * (tp/split.h) and import cuts each rank's slice from the file's tensor.
 * With pipeline parallelism every stage holds other units: rank 0 receives the
 * other stages' consolidated tensors from the first rank of each stage and
 * writes the file, and on import each rank reads its own units' tensors; the
 * last stage's tied copy of the embedding is the embedding in the file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "comm/comm.h"
#include "core/env.h"
#include "core/error.h"
#include "io/st_set.h"
#include "model/gpt_file.h"
#include "model/gpt_hfmap.h"
#include "model/gpt_internal.h"
#include "runtime/runtime.h"
#include "tp/split.h"
#include "zeroc/gpt.h"

/* Tags of the export transfer on the pipeline group (blocking, after every
 * pipeline message of the step has landed). */
enum { TAG_HEADER = 32001, TAG_DATA = 32002 };
/* A unit's parameter slots in the tables (GPT-2's block has the most: twelve). */
enum { BLOCK_PARAMS_MAX = 12 };

/* A copy of the embedding's wte held by another unit (the last stage's head). */
static int is_tied_copy(const zeroc_param_desc_t *pd, int g) {
  return g != 0 && (pd->flags & ZEROC_PARAM_TIED);
}

static zeroc_result_t mpi_check(int e, const char *what, int peer) {
  if (e == MPI_SUCCESS) return ZEROC_OK;
  return ZEROC_FAIL(ZEROC_ERR_MPI, "export: %s with pipeline rank %d: MPI error %d", what, peer, e);
}

/* Blocking transfer of `count` floats in parts that fit MPI's int count. */
static zeroc_result_t send_floats(const float *buf, uint64_t count, int peer, MPI_Comm c) {
  for (uint64_t off = 0; off < count; off += 1u << 30) {
    int part = (int)(count - off < (1u << 30) ? count - off : (1u << 30));
    CHK(mpi_check(MPI_Send(buf + off, part, MPI_FLOAT, peer, TAG_DATA, c), "sending values", peer));
  }
  return ZEROC_OK;
}

static zeroc_result_t recv_floats(float *buf, uint64_t count, int peer, MPI_Comm c) {
  for (uint64_t off = 0; off < count; off += 1u << 30) {
    int part = (int)(count - off < (1u << 30) ? count - off : (1u << 30));
    CHK(mpi_check(MPI_Recv(buf + off, part, MPI_FLOAT, peer, TAG_DATA, c, MPI_STATUS_IGNORE),
                  "receiving values", peer));
  }
  return ZEROC_OK;
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

/* ---- export: consolidate, collect on rank 0, write -------------------------------------- */

/* What an export holds on its way to the file. */
typedef struct {
  zeroc_model_t *m;
  const zeroc_gpt_t *g;
  zeroc_ctx_t *ctx;
  const zeroc_mesh_info_t *mesh;
  int n, L, NU; /* this stage's units; layers; units of the whole model */
  MPI_Comm ppc; /* the pipeline group's transfer channel */
  float **full; /* per unit of this stage: its flat values, then its consolidated tensors */
  float **recv; /* rank 0: what each other pipeline stage sent */
  /* src[gu*12 + p]: the consolidated values of parameter p of global unit gu */
  const float **src;
  uint64_t maxp, count; /* the largest tensor; this stage's consolidated floats */
} export_t;

/* Every rank takes part in the gathers and the tp sums of its stage's units,
 * each parameter consolidated in place of its unit's flat values (a tied copy
 * of wte is the embedding's and is left out). */
static zeroc_result_t consolidate_units(export_t *E) {
  zeroc_model_t *m = E->m;
  for (int u = 0; u < E->n; u++) {
    zeroc_unit_info_t ui;
    CHK(zeroc_model_unit_info(m, u, &ui));
    uint64_t cons = 0;
    for (int p = 0; p < ui.nparams; p++) {
      zeroc__split_t sp;
      zeroc__split_of(zeroc_model_param_desc(m, u, p), &sp);
      cons += zeroc__split_full_numel(&sp);
      if (zeroc__split_full_numel(&sp) > E->maxp) E->maxp = zeroc__split_full_numel(&sp);
    }
    E->full[u] = malloc((ui.flat_numel + cons) * 4 + 4);
    if (!E->full[u]) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "export buffer of unit %d", u);
    CHK(zeroc_model_gather_unit(m, u, E->full[u]));
    int gu = zeroc_gpt_global_unit(E->g, u);
    float *at = E->full[u] + ui.flat_numel;
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      if (is_tied_copy(pd, gu)) continue;
      zeroc__split_t sp;
      zeroc__split_of(pd, &sp);
      CHK(consolidate(E->ctx, pd, &sp, E->full[u] + zeroc_model_param_offset(m, u, p), at));
      E->src[gu * BLOCK_PARAMS_MAX + p] = at;
      at += zeroc__split_full_numel(&sp);
      E->count += zeroc__split_full_numel(&sp);
    }
  }
  return ZEROC_OK;
}

/* The first rank of a later pipeline stage sends its tensors to rank 0:
 * [units, floats, global unit of each] then the consolidated values, unit
 * after unit. */
static zeroc_result_t send_stage(export_t *E) {
  zeroc_result_t res = ZEROC_OK;
  int n = E->n;
  int64_t *hdr = malloc(sizeof(int64_t) * (size_t)(n + 2));
  float *packed = malloc(E->count * 4 + 4);
  if (!hdr || !packed) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export transfer of %" PRIu64 " floats", E->count);
    goto fail;
  }
  hdr[0] = n, hdr[1] = (int64_t)E->count;
  uint64_t at = 0;
  for (int u = 0; u < n; u++) {
    int gu = zeroc_gpt_global_unit(E->g, u), np;
    const zeroc_param_desc_t *pds = zeroc_gpt_unit_params(E->g, gu, &np);
    hdr[2 + u] = gu;
    for (int p = 0; p < np; p++) {
      zeroc__split_t sp;
      zeroc__split_of(&pds[p], &sp);
      memcpy(packed + at, E->src[gu * BLOCK_PARAMS_MAX + p], zeroc__split_full_numel(&sp) * 4);
      at += zeroc__split_full_numel(&sp);
    }
  }
  ZEROC_TRY(mpi_check(MPI_Send(hdr, n + 2, MPI_INT64_T, 0, TAG_HEADER, E->ppc),
                      "sending the unit list", 0));
  ZEROC_TRY(send_floats(packed, E->count, 0, E->ppc));
fail:
  free(packed);
  free(hdr);
  return res;
}

/* Rank 0: every other pipeline stage's tensors. */
static zeroc_result_t receive_stages(export_t *E) {
  zeroc_result_t res = ZEROC_OK;
  int NU = E->NU;
  int64_t *hdr = malloc(sizeof(int64_t) * (size_t)(NU + 2));
  if (!hdr) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "export unit list");
  for (int s = 1; s < E->mesh->pp; s++) {
    MPI_Status st;
    int got = 0;
    ZEROC_TRY(mpi_check(MPI_Recv(hdr, NU + 2, MPI_INT64_T, s, TAG_HEADER, E->ppc, &st),
                        "receiving the unit list", s));
    MPI_Get_count(&st, MPI_INT64_T, &got);
    if (got < 2 || hdr[0] != got - 2 || hdr[1] < 0) {
      res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "export: pipeline rank %d sent a bad unit list", s);
      goto fail;
    }
    uint64_t total = (uint64_t)hdr[1];
    float *vals = E->recv[s] = malloc(total * 4 + 4);
    if (!vals) {
      res =
          ZEROC_FAIL(ZEROC_ERR_NOMEM, "export: %" PRIu64 " floats from pipeline rank %d", total, s);
      goto fail;
    }
    ZEROC_TRY(recv_floats(vals, total, s, E->ppc));
    uint64_t at = 0;
    for (int64_t k = 0; k < hdr[0]; k++) {
      int gu = (int)hdr[2 + k], np;
      const zeroc_param_desc_t *pds = zeroc_gpt_unit_params(E->g, gu, &np);
      for (int p = 0; p < np && pds; p++) {
        zeroc__split_t sp;
        zeroc__split_of(&pds[p], &sp);
        uint64_t ne = zeroc__split_full_numel(&sp);
        if (at + ne > total) break;
        E->src[gu * BLOCK_PARAMS_MAX + p] = vals + at;
        if (ne > E->maxp) E->maxp = ne;
        at += ne;
      }
    }
  }
fail:
  free(hdr);
  return res;
}

/* Rank 0: every parameter of every unit has its values. */
static zeroc_result_t check_complete(const export_t *E) {
  for (int gu = 0; gu < E->NU; gu++) {
    int np;
    zeroc_gpt_unit_params(E->g, gu, &np);
    for (int p = 0; p < np; p++)
      if (!E->src[gu * BLOCK_PARAMS_MAX + p])
        return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "export: no values for parameter %d of unit %d", p,
                          gu);
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_collect(zeroc_model_t *m, const zeroc_gpt_t *g, zeroc__gpt_visit_fn fn,
                                  void *user) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
  int L = zeroc_gpt_config(g)->layers;
  export_t E = {.m = m,
                .g = g,
                .ctx = ctx,
                .mesh = mesh,
                .n = zeroc_model_num_units(m),
                .L = L,
                .NU = L + 2,
                .ppc = zeroc__ctx_group(ctx, ZEROC_GROUP_PP)->mpi[ZEROC_P2P_CHANNEL]};
  /* speaks for its pipeline stage */
  int rep = mesh->dp_rank == 0 && mesh->cp_rank == 0 && mesh->tp_rank == 0;
  zeroc_result_t res = ZEROC_OK;
  E.full = calloc((size_t)E.n, sizeof *E.full);
  E.recv = calloc((size_t)mesh->pp, sizeof *E.recv);
  E.src = calloc((size_t)E.NU * BLOCK_PARAMS_MAX, sizeof *E.src);
  if (!E.full || !E.src || !E.recv) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export tables");
  if (!res) res = consolidate_units(&E);
  if (!res && mesh->pp > 1 && rep && mesh->pp_rank > 0) res = send_stage(&E);
  /* only rank 0 goes on; the others wait in the agreement below */
  if (!res && mesh->rank == 0) res = receive_stages(&E);
  if (!res && mesh->rank == 0) res = check_complete(&E);
  if (!res && mesh->rank == 0) res = fn(user, E.src, E.maxp);
  for (int s = 0; E.recv && s < mesh->pp; s++) free(E.recv[s]);
  free(E.recv);
  for (int u = 0; E.full && u < E.n; u++) free(E.full[u]);
  free(E.full);
  free(E.src);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}

/* What export's visitor writes: the model's tensors to `path`, a file or a
 * save_pretrained directory (dir). */
typedef struct {
  const zeroc_gpt_t *g;
  const char *path;
  int dir;
  uint64_t shard_bytes;
  const float *const *src;   /* the consolidated parameters (zeroc__gpt_collect) */
  zeroc__hf_piece_t *pieces; /* per file tensor: its piece */
  int *param;                /* per file tensor: gu * BLOCK_PARAMS_MAX + p of its parameter */
  const float *tail;         /* GPT-2: wpe's rows beyond seq, written after them */
  int tail_rows;
} export_file_t;

/* zeroc__st_fill_fn: file tensor i from its parameter's consolidated values. */
static zeroc_result_t fill(void *user, size_t i, float *out) {
  const export_file_t *X = user;
  const zeroc__hf_piece_t *pc = &X->pieces[i];
  zeroc__hf_piece_get(pc, X->src[X->param[i]], out);
  if (X->tail_rows && X->param[i] == 1) /* GPT-2's wpe, with the imported rows beyond seq */
    memcpy(out + pc->shape[0] * pc->shape[1], X->tail, (size_t)X->tail_rows * pc->shape[1] * 4);
  return ZEROC_OK;
}

/* Rank 0: the file(s), every tensor of the model in global order. */
static zeroc_result_t write_file(void *user, const float *const *src, uint64_t maxp) {
  export_file_t *X = user;
  const zeroc_gpt_t *g = X->g;
  const zeroc_gpt_config_t *cfg = zeroc_gpt_config(g);
  static const char *const meta[] = {"format", "pt", "producer", "zeroc", NULL};
  int L = cfg->layers, llama = cfg->family == ZEROC_GPT_FAMILY_LLAMA;
  size_t cap = (size_t)(L + 2) * BLOCK_PARAMS_MAX * ZEROC_HF_MAX_PIECES, n = 0;
  zeroc_result_t res = ZEROC_OK;
  (void)maxp;
  X->src = src;
  X->tail = zeroc__gpt_wpe_tail(g, &X->tail_rows);
  zeroc__st_entry_t *e = calloc(cap, sizeof *e);
  X->pieces = calloc(cap, sizeof *X->pieces);
  X->param = calloc(cap, sizeof *X->param);
  if (!e || !X->pieces || !X->param) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "export table of %zu tensors", cap);
    goto fail;
  }
  for (int gu = 0; gu < L + 2; gu++) {
    int np;
    const zeroc_param_desc_t *pds = zeroc_gpt_unit_params(g, gu, &np);
    for (int p = 0; p < np; p++) {
      int k = zeroc__hf_pieces(cfg, &pds[p], gu, &X->pieces[n]);
      for (int j = 0; j < k; j++, n++) {
        const zeroc__hf_piece_t *pc = &X->pieces[n];
        /* transformers' Llama classes keep the base model under "model." */
        int outer = llama && strcmp(pc->name, "lm_head.weight");
        snprintf(e[n].name, sizeof e[n].name, "%s%s", outer ? "model." : "", pc->name);
        e[n].ndim = pc->nd;
        e[n].shape[0] = pc->shape[0], e[n].shape[1] = pc->shape[1];
        X->param[n] = gu * BLOCK_PARAMS_MAX + p;
        /* an imported position table longer than seq goes back whole */
        if (X->param[n] == 1 && !llama) e[n].shape[0] += (uint64_t)X->tail_rows;
      }
    }
  }
  res = zeroc__st_set_write(X->path, X->dir, e, n, X->shard_bytes, meta, fill, X);
fail:
  free(X->param);
  free(X->pieces);
  free(e);
  return res;
}

zeroc_result_t zeroc_gpt_export(zeroc_model_t *m, const zeroc_gpt_t *g, const char *path) {
  struct stat st;
  export_file_t X = {.g = g,
                     .path = path,
                     .dir = !stat(path, &st) && S_ISDIR(st.st_mode),
                     .shard_bytes = ZEROC_ST_SHARD_BYTES};
  int64_t bytes;
  zeroc_result_t r = zeroc__env_i64("ZEROC_EXPORT_SHARD_BYTES", (int64_t)X.shard_bytes, &bytes);
  if (r) return zeroc__ctx_ret(zeroc_model_ctx(m), r);
  X.shard_bytes = (uint64_t)bytes;
  return zeroc__gpt_collect(m, g, write_file, &X);
}

/* The unsplit parameter `pd` of global unit gu into gl (its full shape, zeroed
 * first: padded vocabulary rows stay 0), from the file's pieces of it. GPT-2's
 * wpe may have more rows than seq: those go to *tail. */
static zeroc_result_t read_param(zeroc__gpt_file_t *f, const zeroc_gpt_config_t *cfg,
                                 const zeroc_param_desc_t *pd, int gu, float *gl, uint64_t full,
                                 float **tail, uint64_t *tail_rows) {
  zeroc__hf_piece_t pcs[ZEROC_HF_MAX_PIECES];
  int k = zeroc__hf_pieces(cfg, pd, gu, pcs);
  zeroc_result_t res = ZEROC_OK;
  memset(gl, 0, full * 4);
  for (int j = 0; j < k && !res; j++) {
    const zeroc__hf_piece_t *pc = &pcs[j];
    float *buf = malloc(pc->shape[0] * pc->shape[1] * 4 + 4);
    if (!buf) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffer of '%s'", pc->name);
    int wpe = gu == 0 && cfg->family != ZEROC_GPT_FAMILY_LLAMA && !strcmp(pd->name, "wpe.weight");
    res =
        zeroc__gpt_file_read(f, pc->name, pc->nd, pc->shape, 0, buf, wpe ? tail : NULL, tail_rows);
    if (!res) zeroc__hf_piece_put(pc, buf, gl);
    free(buf);
  }
  return res;
}

zeroc_result_t zeroc_gpt_import(zeroc_model_t *m, zeroc_gpt_t *g, const char *path) {
  zeroc_ctx_t *ctx = zeroc_model_ctx(m);
  const zeroc_gpt_config_t *cfg = zeroc_gpt_config(g);
  int n = zeroc_model_num_units(m);
  zeroc_result_t res = ZEROC_OK;
  zeroc__gpt_file_t f = {0};
  float **shards = calloc((size_t)n, sizeof *shards);
  float *gl = NULL, *flat = NULL, *tail = NULL;
  uint64_t tail_rows = 0;
  if (!shards) return zeroc__ctx_ret(ctx, ZEROC_FAIL(ZEROC_ERR_NOMEM, "import tables"));
  ZEROC_TRY(zeroc__gpt_file_open_cfg(path, cfg, &f));
  /* every rank reads each whole tensor of its own units and keeps its own shard
   * of its slice */
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
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(m, u, p);
      int gu = zeroc_gpt_global_unit(g, u);
      zeroc__split_t sp;
      zeroc__split_of(pd, &sp);
      uint64_t full = zeroc__split_full_numel(&sp);
      free(gl);
      gl = malloc(full * 4 + 4);
      if (!gl) {
        res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffer of '%s'", pd->name);
        goto fail;
      }
      /* a tied copy of the embedding reads the embedding */
      ZEROC_TRY(
          read_param(&f, cfg, pd, is_tied_copy(pd, gu) ? 0 : gu, gl, full, &tail, &tail_rows));
      float *dst = flat + zeroc_model_param_offset(m, u, p);
      uint64_t ne = zeroc_param_numel(pd);
      for (uint64_t j = 0; j < ne; j++) dst[j] = gl[zeroc__split_to_global(&sp, pd->tp_rank, j)];
    }
    memcpy(shards[u], flat + ui.shard_offset, ui.shard_numel * 4);
    free(flat);
    flat = NULL;
  }
fail:
  free(flat);
  free(gl);
  zeroc__gpt_file_close(&f);
  /* nothing changes unless every rank read everything */
  res = zeroc_ctx_agree(ctx, res);
  for (int u = 0; u < n && !res; u++)
    res = zeroc_model_set_shard(m, u, ZEROC_STATE_MASTER, shards[u]);
  if (!res) res = zeroc_model_sync_params(m);
  /* the positions beyond seq (or none: a file of this context drops an older tail) */
  if (!res) zeroc__gpt_set_wpe_tail(g, tail, (int)tail_rows), tail = NULL;
  free(tail);
  for (int u = 0; u < n; u++) free(shards[u]);
  free(shards);
  return zeroc__ctx_ret(ctx, zeroc_ctx_agree(ctx, res));
}
