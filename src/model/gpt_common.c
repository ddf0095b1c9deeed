/*
 * model/gpt_common.c - what the decoder's two families share below their
 * blocks (gpt.c builds the model and runs GPT-2's units, llama_block.c the
 * Llama blocks): the buffers' allocation, the micro-batch check, where a block
 * keeps its activations, the norm of either family and its gradients under
 * sequence parallelism.
 */
#include <stdlib.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/llama_kernels.h"
#include "model/gpt_impl.h"
#include "runtime/runtime.h"
#include "tp/split.h"
#include "tp/tp.h"

zeroc_result_t zeroc__gpt_alloc(zeroc_gpt_t *g, zeroc_memtag_t tag, size_t bytes, void **p) {
  void **na = realloc(g->allocs, sizeof(void *) * (size_t)(g->nallocs + 1));
  if (!na) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "activation table");
  g->allocs = na;
  CHK(zeroc_mem_alloc(g->ctx, ZEROC_MEM_DEVICE, tag, bytes, p));
  g->allocs[g->nallocs++] = *p;
  g->act_bytes += bytes;
  return ZEROC_OK;
}

/* The micro-batch every unit reads its shape (and the head its targets) from:
 * with a pipeline the embedding that receives it may be on another rank. */
zeroc_result_t zeroc__gpt_io_batch(zeroc_gpt_t *g, const zeroc_layer_io_t *io,
                                   const zeroc_gpt_batch_t **out) {
  const zeroc_gpt_batch_t *b = io->batch;
  int Tmax = g->cfg.seq / g->cp.n; /* with cp, T counts this rank's tokens: an even number */
  if (!b || b->B < 1 || b->B > g->Bmax || b->T < 1 || b->T > Tmax || (g->cp.n > 1 && b->T % 2))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "gpt batch B %d T %d: accepted 1 <= B <= %d, 1 <= T <= %d%s", b ? b->B : 0,
                      b ? b->T : 0, g->Bmax, Tmax, g->cp.n > 1 ? ", T even (cp)" : "");
  if (io->slot < 0 || io->slot >= g->slots)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "gpt activation slot %d: accepted 0..%d", io->slot,
                      g->slots - 1);
  *out = b;
  return ZEROC_OK;
}

saved_t *zeroc__gpt_block_saved(zeroc_gpt_t *g, int slot, int lb) {
  return g->recompute ? &g->shared_saved : &g->act[slot].saved[lb];
}

/* Where the LayerNorm parameter gradients go: straight into the gradients, or,
 * with sequence parallelism (each rank saw only its rows), into lngrad first,
 * to be summed over the tp ranks. */
void *zeroc__gpt_norm_grad(zeroc_gpt_t *g, void *const *d, int idx, int slot) {
  return g->tp.sp ? (char *)g->lngrad + (size_t)slot * g->cfg.hidden * g->es : d[idx];
}

/* Sequence parallelism: sums the n LayerNorm gradient vectors in lngrad over the
 * tp ranks and adds them to their gradients. */
zeroc_result_t zeroc__gpt_norm_grads_reduce(zeroc_gpt_t *g, zeroc_stream_t *s, void *const *dst,
                                            int n) {
  size_t C = (size_t)g->cfg.hidden;
  if (!g->tp.sp) return ZEROC_OK;
  CHK(zeroc__tp_allreduce(&g->tp, s, g->lngrad, (size_t)n * C, g->tp.dt, ZEROC_SUM));
  for (int i = 0; i < n; i++)
    CHK(zeroc_k_add(g->k, s, dst[i], (char *)g->lngrad + i * C * g->es, C));
  return ZEROC_OK;
}

/* ---- the norms of both families ------------------------------------------------------ */

zeroc_result_t zeroc__gpt_norm_forward(zeroc_gpt_t *g, zeroc_stream_t *s, void *out, float *mean,
                                       float *rstd, const void *in, const void *w, const void *b,
                                       int N) {
  if (g->llama)
    return zeroc_k_rmsnorm_forward(g->k, s, out, rstd, in, w, (float)g->cfg.norm_eps, N,
                                   g->cfg.hidden);
  return zeroc_k_layernorm_forward(g->k, s, out, mean, rstd, in, w, b, N, g->cfg.hidden);
}

zeroc_result_t zeroc__gpt_norm_backward(zeroc_gpt_t *g, zeroc_stream_t *s, void *dinp, void *dw,
                                        void *db, const void *dout, const void *in, const void *w,
                                        const float *mean, const float *rstd, int N,
                                        const void *dres, unsigned flags) {
  if (g->llama)
    return zeroc_k_rmsnorm_backward(g->k, s, dinp, dw, dout, in, w, rstd, N, g->cfg.hidden, dres,
                                    flags);
  return zeroc_k_layernorm_backward_ex(g->k, s, dinp, dw, db, dout, in, w, mean, rstd, N,
                                       g->cfg.hidden, dres, flags);
}

/* ---- parameter descriptors ---- */

zeroc_param_desc_t zeroc__gpt_pdesc(const char *name, int64_t d0, int64_t d1,
                                    zeroc_init_kind_t init, float scale, uint32_t flags,
                                    uint64_t stream) {
  zeroc_param_desc_t p = {.name = name,
                          .ndim = d1 ? 2 : 1,
                          .shape = {d0, d1},
                          .init = init,
                          .init_scale = scale,
                          .flags = flags,
                          .init_stream = stream};
  return p;
}

/* Declares p (given with its unsplit shape) split over the tp ranks along
 * `dim` in `groups` equal groups: its shape becomes this rank's share, and a
 * normal initialisation draws at the unsplit indices. Recorded even with one
 * tp rank, so a checkpoint of any tp size can be re-split for another. */
void zeroc__gpt_tp_split(zeroc_param_desc_t *p, const zeroc__tp_t *tp, int dim, int groups) {
  p->tp_groups = groups;
  p->tp_dim = dim;
  p->tp_rank = tp->rank;
  p->tp_size = tp->size;
  for (int d = 0; d < p->ndim; d++) p->tp_full[d] = p->shape[d];
  p->shape[dim] /= tp->size;
  if (p->init == ZEROC_INIT_NORMAL) {
    p->init = ZEROC_INIT_CUSTOM;
    p->init_fn = zeroc__split_init_normal;
  }
}
