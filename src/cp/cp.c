/*
 * cp/cp.c - the cp object (group, streams, events, buffers), the sequence-split
 * checks and the buffer sizes; the attention itself is in ring.c and ulysses.c.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "cp/cp.h"
#include "cp/cp_internal.h"

size_t zeroc__cp_buffer_bytes(zeroc__cp_mode_t mode, int N, int B, int T, int Cl, int NHl,
                              size_t esz) {
  if (N <= 1 || B < 1 || T < 2 * N || Cl < 1 || NHl < 1) return 0;
  const size_t Tl = (size_t)T / (size_t)N, c = Tl / 2, b = (size_t)B;
  if (mode == ZEROC_CP_ULYSSES) return 14 * b * Tl * (size_t)Cl * esz;
  return (4 * b * Tl * 2 * (size_t)Cl + b * c * (size_t)Cl) * esz + b * (size_t)NHl * c * 4;
}

void zeroc__cp_comm_bytes(zeroc__cp_mode_t mode, int N, int B, int T, int Cl, size_t esz,
                          uint64_t *fwd, uint64_t *bwd) {
  *fwd = *bwd = 0;
  if (N <= 1 || B < 1 || T < 2 * N || Cl < 1) return;
  const uint64_t n = (uint64_t)N, u = (uint64_t)B * (uint64_t)(T / N) * (uint64_t)Cl * esz;
  if (mode == ZEROC_CP_ULYSSES) {
    /* per all-to-all of J*Cl columns: J*u/N to each of the N-1 others */
    *fwd = 4 * (u / n) * (n - 1); /* qkv (3) and out (1) */
    *bwd = 8 * (u / n) * (n - 1); /* qkv, out, dout and dqkv */
  } else {
    *fwd = (n - 1) * 2 * u;     /* K/V (2Cl) to the next rank, N-1 hops */
    *bwd = (2 * n - 1) * 2 * u; /* K/V again (N-1 hops) and dK/dV (N hops) */
  }
}

zeroc_result_t zeroc__cp_check_seq(int N, int T) {
  if (N < 1) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cp %d: accepted cp >= 1", N);
  if (N > 1 && (T < 2 * N || T % (2 * N)))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "sequence length T=%d does not split over cp %d: the zigzag split needs T "
                      "to be a multiple of 2*cp (%d)",
                      T, N, 2 * N);
  return ZEROC_OK;
}

zeroc_result_t zeroc__cp_check_heads(zeroc__cp_mode_t mode, int NH, int tp, int N) {
  if (mode != ZEROC_CP_ULYSSES || N <= 1) return ZEROC_OK;
  if (tp < 1 || NH % tp || (NH / tp) % N)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "cp-mode ulysses: %d heads over tp %d leave %d per rank, not divisible by cp "
                      "%d (accepted: heads a multiple of tp*cp = %d; or use --cp-mode ring)",
                      NH, tp, tp >= 1 ? NH / tp : 0, N, tp * N);
  return ZEROC_OK;
}

zeroc_result_t zeroc__cp_create(zeroc_kernels_t *k, const zeroc__devmem_t *mem, zeroc_group_t *g,
                                zeroc__cp_mode_t mode, int overlap, zeroc__cp_t **out) {
  *out = NULL;
  if (mode != ZEROC_CP_RING && mode != ZEROC_CP_ULYSSES)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cp mode %d: accepted ring (0), ulysses (1)",
                      (int)mode);
  zeroc__cp_t *cp = calloc(1, sizeof *cp);
  if (!cp) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cp object");
  cp->k = k;
  cp->mem = mem;
  cp->g = g && g->size > 1 ? g : NULL;
  cp->rank = cp->g ? g->rank : 0;
  cp->size = cp->g ? g->size : 1;
  cp->mode = mode;
  cp->overlap = overlap ? 1 : 0;
  zeroc_result_t r = ZEROC_OK;
  if (cp->g && mode == ZEROC_CP_RING) {
    if ((r = zeroc__stream_create_p2p(mem->dev, 0, 0, &cp->send)) != ZEROC_OK) goto fail;
    if ((r = zeroc__stream_create_p2p(mem->dev, 0, 0, &cp->recv)) != ZEROC_OK) goto fail;
    for (int i = 0; i < (int)(sizeof cp->ev / sizeof cp->ev[0]); i++)
      if ((r = zeroc__event_create(mem->dev, &cp->ev[i])) != ZEROC_OK) goto fail;
  }
  ZINFO(INIT, "cp: rank %d of %d, mode %s, overlap %d", cp->rank, cp->size,
        mode == ZEROC_CP_RING ? "ring" : "ulysses", cp->overlap);
  *out = cp;
  return ZEROC_OK;
fail:
  zeroc__cp_destroy(cp);
  return r;
}

void zeroc__cp_destroy(zeroc__cp_t *cp) {
  if (!cp) return;
  if (cp->send) (void)zeroc_stream_sync(cp->send);
  if (cp->recv) (void)zeroc_stream_sync(cp->recv);
  for (int i = 0; i < (int)(sizeof cp->ev / sizeof cp->ev[0]); i++)
    if (cp->ev[i]) zeroc_event_destroy(cp->ev[i]);
  zeroc_stream_destroy(cp->send);
  zeroc_stream_destroy(cp->recv);
  if (cp->buf) zeroc_i_device_free(cp->mem, cp->buf);
  free(cp);
}

zeroc_result_t zeroc__cp_reserve(zeroc__cp_t *cp, int B, int T, int Cl, int NHl) {
  if (cp->size == 1) return ZEROC_OK;
  ZEROC_CHECK(zeroc__cp_check_seq(cp->size, T));
  size_t esz = zeroc_dtype_size(cp->k->dtype);
  size_t need = zeroc__cp_buffer_bytes(cp->mode, cp->size, B, T, Cl, NHl, esz);
  if (cp->buf && need <= cp->buf_bytes) return ZEROC_OK;
  if (cp->buf) {
    /* the old buffers may still be read by transfers in flight */
    if (cp->send) ZEROC_CHECK(zeroc_stream_sync(cp->send));
    if (cp->recv) ZEROC_CHECK(zeroc_stream_sync(cp->recv));
    zeroc_i_device_free(cp->mem, cp->buf);
    cp->buf = NULL;
    cp->buf_bytes = 0;
  }
  ZEROC_CHECK(zeroc_i_device_alloc(cp->mem, ZEROC_MEM_DEVICE, ZEROC_TAG_BUFFERS, need, &cp->buf));
  cp->buf_bytes = need;
  cp->B = B;
  cp->T = T;
  cp->Cl = Cl;
  cp->NHl = NHl;
  return ZEROC_OK;
}

/* Shapes every entry point checks. */
static zeroc_result_t check_shape(const zeroc__cp_t *cp, int B, int T, int Cl, int NHl) {
  if (B < 1 || T < 1 || Cl < 1 || NHl < 1 || Cl % NHl)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "cp attention: shape B %d T %d Cl %d NHl %d (accepted: positive, Cl a "
                      "multiple of NHl)",
                      B, T, Cl, NHl);
  ZEROC_CHECK(zeroc__cp_check_seq(cp->size, T));
  if (cp->mode == ZEROC_CP_ULYSSES && NHl % cp->size)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "cp-mode ulysses: %d heads per tp rank not divisible by cp %d", NHl,
                      cp->size);
  return ZEROC_OK;
}

zeroc_result_t zeroc__cp_attention_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out,
                                           float *lse, const void *qkv, int B, int T, int Cl,
                                           int NHl, const zeroc_dropout_t *drop) {
  ZEROC_CHECK(check_shape(cp, B, T, Cl, NHl));
  if (cp->size == 1) return zeroc_k_attention_forward(cp->k, s, out, lse, qkv, B, T, Cl, NHl, drop);
  ZEROC_CHECK(zeroc__cp_reserve(cp, B, T, Cl, NHl));
  if (cp->mode == ZEROC_CP_ULYSSES)
    return zeroc__cp_ulysses_forward(cp, s, out, lse, qkv, B, T, Cl, NHl, drop);
  return zeroc__cp_ring_forward(cp, s, out, lse, qkv, B, T, Cl, NHl, drop);
}

zeroc_result_t zeroc__cp_attention_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                            const void *dout, const void *qkv, const void *out,
                                            const float *lse, int B, int T, int Cl, int NHl,
                                            const zeroc_dropout_t *drop) {
  ZEROC_CHECK(check_shape(cp, B, T, Cl, NHl));
  if (cp->size == 1)
    return zeroc_k_attention_backward(cp->k, s, dqkv, dout, qkv, out, lse, B, T, Cl, NHl, drop);
  ZEROC_CHECK(zeroc__cp_reserve(cp, B, T, Cl, NHl));
  if (cp->mode == ZEROC_CP_ULYSSES)
    return zeroc__cp_ulysses_backward(cp, s, dqkv, dout, qkv, out, lse, B, T, Cl, NHl, drop);
  return zeroc__cp_ring_backward(cp, s, dqkv, dout, qkv, out, lse, B, T, Cl, NHl, drop);
}
