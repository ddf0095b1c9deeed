/*
 * cp/ulysses.c - Ulysses attention over the cp group (the method is described in
 * cp/cp.h): all-to-alls between the sequence split (B,Tl,J*Cl) and the head split
 * (B,T,J*Wh), Wh = Cl/N (this rank's NHl/N heads), around the unchanged causal
 * kernel. J = 3 for qkv and dqkv (q | k | v), 1 for out and dout.
 *
 * Buffers (one allocation, zeroc__cp_buffer_bytes): send and receive staging of
 * B*Tl*3Cl elements each, then head-split qkv (B,T,3Wh), out (B,T,Wh), dout
 * (B,T,Wh), dqkv (B,T,3Wh). The all-to-alls run on the compute stream (its own
 * channel of the cp group), in its order.
 */
#include "core/clock.h"
#include "core/error.h"
#include "cp/cp_internal.h"

typedef struct uly {
  zeroc__cp_t *cp;
  zeroc_stream_t *s;
  int B, T, Tl, c, Cl, Wh, NHh;
  size_t esz;
  void *snd, *rcv, *qkvh, *outh, *douth, *dqkvh;
} uly_t;

static void *at(const void *p, size_t elems, size_t esz) { return (char *)p + elems * esz; }

/* The all-to-all of `blk` elements per peer from the send to the receive staging. */
static zeroc_result_t a2a(uly_t *U, size_t blk) {
  const double t0 = zeroc__now_s();
  zeroc_result_t r = zeroc__alltoall(U->cp->g, U->s, U->snd, U->rcv, blk, U->cp->k->dtype);
  U->cp->wait_s += zeroc__now_s() - t0;
  return r;
}

static void uly_setup(uly_t *U, zeroc__cp_t *cp, zeroc_stream_t *s, int B, int T, int Cl, int NHl) {
  U->cp = cp;
  U->s = s;
  U->B = B;
  U->T = T;
  U->Tl = T / cp->size;
  U->c = U->Tl / 2;
  U->Cl = Cl;
  U->Wh = Cl / cp->size;
  U->NHh = NHl / cp->size;
  U->esz = zeroc_dtype_size(cp->k->dtype);
  const size_t u = (size_t)B * U->Tl * Cl; /* B*Tl*Cl = B*T*Wh */
  U->snd = cp->buf;
  U->rcv = at(U->snd, 3 * u, U->esz);
  U->qkvh = at(U->rcv, 3 * u, U->esz);
  U->outh = at(U->qkvh, 3 * u, U->esz);
  U->douth = at(U->outh, u, U->esz);
  U->dqkvh = at(U->douth, u, U->esz);
}

/* src (B,Tl,J*Cl) -> dst (B,T,J*Wh): this rank's heads of every rank's tokens, in
 * natural order. */
static zeroc_result_t to_heads(uly_t *U, void *dst, const void *src, int J) {
  zeroc__cp_t *cp = U->cp;
  const int N = cp->size;
  const size_t e = U->esz, JW = (size_t)J * U->Wh, rows = (size_t)U->B * U->Tl;
  const size_t blk = rows * JW; /* elements to or from one peer */
  /* block p of the send buffer: peer p's heads of this rank's tokens, (B,Tl,J*Wh) */
  for (int p = 0; p < N; p++)
    for (int j = 0; j < J; j++)
      ZEROC_CHECK(zeroc_k_copy_rows(cp->k, U->s, at(U->snd, p * blk + (size_t)j * U->Wh, e), JW,
                                    at(src, (size_t)j * U->Cl + (size_t)p * U->Wh, e),
                                    (size_t)J * U->Cl, rows, (size_t)U->Wh, 0));
  ZEROC_CHECK(a2a(U, blk));
  /* block q of the receive buffer: rank q's tokens (chunks q, 2N-1-q) of this rank's heads */
  for (int q = 0; q < N; q++)
    for (int b = 0; b < U->B; b++)
      for (int h = 0; h < 2; h++) {
        const int ch = h == 0 ? q : 2 * N - 1 - q;
        const size_t so = q * blk + ((size_t)b * U->Tl + (size_t)h * U->c) * JW;
        const size_t d0 = ((size_t)b * U->T + (size_t)ch * U->c) * JW;
        ZEROC_CHECK(zeroc_k_copy_rows(cp->k, U->s, at(dst, d0, e), 0, at(U->rcv, so, e), 0, 1,
                                      (size_t)U->c * JW, 0));
      }
  return ZEROC_OK;
}

/* The way back: src (B,T,J*Wh) -> dst (B,Tl,J*Cl), assigned or (add) accumulated. */
static zeroc_result_t to_seq(uly_t *U, void *dst, const void *src, int J, int add) {
  zeroc__cp_t *cp = U->cp;
  const int N = cp->size;
  const size_t e = U->esz, JW = (size_t)J * U->Wh, rows = (size_t)U->B * U->Tl;
  const size_t blk = rows * JW;
  for (int q = 0; q < N; q++)
    for (int b = 0; b < U->B; b++)
      for (int h = 0; h < 2; h++) {
        const int ch = h == 0 ? q : 2 * N - 1 - q;
        const size_t so = ((size_t)b * U->T + (size_t)ch * U->c) * JW;
        const size_t d0 = q * blk + ((size_t)b * U->Tl + (size_t)h * U->c) * JW;
        ZEROC_CHECK(zeroc_k_copy_rows(cp->k, U->s, at(U->snd, d0, e), 0, at(src, so, e), 0, 1,
                                      (size_t)U->c * JW, 0));
      }
  ZEROC_CHECK(a2a(U, blk));
  for (int p = 0; p < N; p++)
    for (int j = 0; j < J; j++)
      ZEROC_CHECK(zeroc_k_copy_rows(cp->k, U->s, at(dst, (size_t)j * U->Cl + (size_t)p * U->Wh, e),
                                    (size_t)J * U->Cl, at(U->rcv, p * blk + (size_t)j * U->Wh, e),
                                    JW, rows, (size_t)U->Wh, add));
  return ZEROC_OK;
}

/* This rank's heads are global heads first + rank*NHh.. of the caller's. */
static const zeroc_dropout_t *heads_drop(const uly_t *U, const zeroc_dropout_t *drop,
                                         zeroc_dropout_t *tmp) {
  if (!drop) return NULL;
  *tmp = *drop;
  tmp->first += U->cp->rank * U->NHh;
  return tmp;
}

zeroc_result_t zeroc__cp_ulysses_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out, float *lse,
                                         const void *qkv, int B, int T, int Cl, int NHl,
                                         const zeroc_dropout_t *drop) {
  uly_t U;
  zeroc_dropout_t dh;
  uly_setup(&U, cp, s, B, T, Cl, NHl);
  ZEROC_CHECK(to_heads(&U, U.qkvh, qkv, 3));
  ZEROC_CHECK(zeroc_k_attention_forward(cp->k, s, U.outh, lse, U.qkvh, B, T, U.Wh, U.NHh,
                                        heads_drop(&U, drop, &dh)));
  return to_seq(&U, out, U.outh, 1, 0);
}

zeroc_result_t zeroc__cp_ulysses_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                          const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int Cl, int NHl,
                                          const zeroc_dropout_t *drop) {
  uly_t U;
  zeroc_dropout_t dh;
  uly_setup(&U, cp, s, B, T, Cl, NHl);
  const size_t u = (size_t)B * U.Tl * Cl;
  /* nothing head-split outlives the forward: qkv, out and dout are moved again */
  ZEROC_CHECK(to_heads(&U, U.qkvh, qkv, 3));
  ZEROC_CHECK(to_heads(&U, U.outh, out, 1));
  ZEROC_CHECK(to_heads(&U, U.douth, dout, 1));
  ZEROC_CHECK(zeroc_memset_async(s, U.dqkvh, 0, 3 * u * U.esz));
  ZEROC_CHECK(zeroc_k_attention_backward(cp->k, s, U.dqkvh, U.douth, U.qkvh, U.outh, lse, B, T,
                                         U.Wh, U.NHh, heads_drop(&U, drop, &dh)));
  return to_seq(&U, dqkv, U.dqkvh, 3, 1);
}
