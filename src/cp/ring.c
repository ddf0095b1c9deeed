/*
 * cp/ring.c - ring attention over the cp group (the method is described in
 * cp/cp.h): K/V of each rank's two zigzag chunks hop around the ring while the
 * chunk pair in hand is attended, partial outputs merged by log-sum-exp; the
 * backward sends dK/dV along with K/V so they arrive home after N hops.
 *
 * Buffers (one allocation, zeroc__cp_buffer_bytes): plse (B,NHl,c) fp32, then in
 * the activation dtype kv[2] and dkv[2] (B,Tl,2Cl) each (k in columns [0,Cl), v in
 * [Cl,2Cl)), and pout (B,c,Cl).
 *
 * Transfers: on mpi a send stream and a receive stream (a stream runs one
 * operation at a time, and a blocking send would wait for a receive queued behind
 * it); on nccl both go on the receive stream inside one group. Events order them
 * against the compute stream: a buffer is sent only once computed (or received),
 * and received into only once compute and the previous send are done with it.
 */
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "cp/cp_internal.h"

enum { TAG_KV = 0x6370, TAG_DKV = 0x6371 };
enum { EV_READY = 0, EV_SENT = 1, EV_RECVD = 2 }; /* + 3 for the dK/dV exchange */

typedef struct ring {
  zeroc__cp_t *cp;
  zeroc_stream_t *s;
  int B, T, Tl, c, Cl, NHl, HS;
  size_t esz;
  float *plse;
  void *kv[2], *dkv[2], *pout;
} ring_t;

static void *at(const void *p, size_t elems, size_t esz) { return (char *)p + elems * esz; }

static void ring_setup(ring_t *R, zeroc__cp_t *cp, zeroc_stream_t *s, int B, int T, int Cl,
                       int NHl) {
  memset(R, 0, sizeof *R);
  R->cp = cp;
  R->s = s;
  R->B = B;
  R->T = T;
  R->Tl = T / cp->size;
  R->c = R->Tl / 2;
  R->Cl = Cl;
  R->NHl = NHl;
  R->HS = Cl / NHl;
  R->esz = zeroc_dtype_size(cp->k->dtype);
  const size_t kvn = (size_t)B * R->Tl * 2 * Cl;
  R->plse = cp->buf;
  char *p = (char *)cp->buf + (size_t)B * NHl * R->c * sizeof(float);
  for (int i = 0; i < 2; i++) R->kv[i] = at(p, (size_t)i * kvn, R->esz);
  for (int i = 0; i < 2; i++) R->dkv[i] = at(p, (size_t)(2 + i) * kvn, R->esz);
  R->pout = at(p, 4 * kvn, R->esz);
}

/* Sends `snd` to rank r+1 and receives `rcv` from rank r-1 (count elements), once
 * the compute stream has reached this point; ev0 picks the event triple. */
static zeroc_result_t exchange(ring_t *R, const void *snd, void *rcv, size_t count, int tag,
                               int ev0) {
  zeroc__cp_t *cp = R->cp;
  zeroc_group_t *g = cp->g;
  zeroc_dtype_t dt = cp->k->dtype;
  const int to = (cp->rank + 1) % cp->size, from = (cp->rank + cp->size - 1) % cp->size;
  zeroc_event_t *ready = cp->ev[ev0 + EV_READY], *sent = cp->ev[ev0 + EV_SENT];
  zeroc_event_t *recvd = cp->ev[ev0 + EV_RECVD];
  ZEROC_CHECK(zeroc_event_record(ready, R->s));
  ZEROC_CHECK(zeroc_stream_wait_event(cp->recv, ready));
  if (g->ops->group_start) { /* nccl: one group on one stream */
    ZEROC_CHECK(zeroc__comm_group_start(g));
    zeroc_result_t r = zeroc__send(g, cp->recv, snd, count, dt, to, tag);
    if (r == ZEROC_OK) r = zeroc__recv(g, cp->recv, rcv, count, dt, from, tag);
    zeroc_result_t r2 = zeroc__comm_group_end(g);
    ZEROC_CHECK(r != ZEROC_OK ? r : r2);
  } else {
    /* `rcv` was sent in the previous exchange of this kind: that send must be done
     * (`sent` still marks it here). Never this exchange's send: it completes only
     * once rank r+1 posts its receive, which would wait on its own send, and so on
     * round the ring. */
    ZEROC_CHECK(zeroc_stream_wait_event(cp->recv, sent));
    ZEROC_CHECK(zeroc__recv(g, cp->recv, rcv, count, dt, from, tag));
    ZEROC_CHECK(zeroc_stream_wait_event(cp->send, ready));
    ZEROC_CHECK(zeroc__send(g, cp->send, snd, count, dt, to, tag));
    ZEROC_CHECK(zeroc_event_record(sent, cp->send));
  }
  return zeroc_event_record(recvd, cp->recv);
}

/* The compute stream waits for the last exchange of triple ev0 (data in place, and
 * the send done so the sent buffer may be overwritten). */
static zeroc_result_t arrived(ring_t *R, int ev0) {
  const double t0 = zeroc__now_s();
  zeroc_result_t r = zeroc_stream_wait_event(R->s, R->cp->ev[ev0 + EV_RECVD]);
  if (r == ZEROC_OK) r = zeroc_stream_wait_event(R->s, R->cp->ev[ev0 + EV_SENT]);
  R->cp->wait_s += zeroc__now_s() - t0;
  return r;
}

/* Chunk index of half h (0, 1) of rank q's tokens. */
static int chunk(const zeroc__cp_t *cp, int q, int h) { return h == 0 ? q : 2 * cp->size - 1 - q; }

/* The block of query half qh against key half kh of rank src's K/V; 0 when masked. */
static int pair(const ring_t *R, int qh, int src, int kh, zeroc_attn_block_t *b) {
  const int qc = chunk(R->cp, R->cp->rank, qh), kc = chunk(R->cp, src, kh);
  if (kc > qc) return 0;
  const size_t Cl = (size_t)R->Cl, Tl = (size_t)R->Tl;
  *b = (zeroc_attn_block_t){.B = R->B,
                            .NH = R->NHl,
                            .HS = R->HS,
                            .Tq = R->c,
                            .Tk = R->c,
                            .causal = kc == qc,
                            .q_t = 3 * Cl,
                            .q_b = Tl * 3 * Cl,
                            .kv_t = 2 * Cl,
                            .kv_b = Tl * 2 * Cl,
                            .o_t = Cl,
                            .o_b = Tl * Cl,
                            .l_h = Tl,
                            .l_b = (size_t)R->NHl * Tl,
                            .q_pos = (int64_t)qc * R->c,
                            .k_pos = (int64_t)kc * R->c};
  return 1;
}

/* With overlap off, wait for the transfer before computing, so the time it takes
 * shows as exposed communication. */
static zeroc_result_t maybe_wait(ring_t *R, int ev0) {
  if (R->cp->overlap) return ZEROC_OK;
  const double t0 = zeroc__now_s();
  zeroc_result_t r = zeroc_event_sync(R->cp->ev[ev0 + EV_RECVD]);
  if (r == ZEROC_OK) r = zeroc_event_sync(R->cp->ev[ev0 + EV_SENT]);
  R->cp->wait_s += zeroc__now_s() - t0;
  return r;
}

zeroc_result_t zeroc__cp_ring_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out, float *lse,
                                      const void *qkv, int B, int T, int Cl, int NHl,
                                      const zeroc_dropout_t *drop) {
  ring_t R;
  ring_setup(&R, cp, s, B, T, Cl, NHl);
  const int N = cp->size, r = cp->rank, c = R.c;
  const size_t kvn = (size_t)B * R.Tl * 2 * Cl, e = R.esz;
  /* own K/V: columns [Cl, 3Cl) of qkv, contiguous per token */
  ZEROC_CHECK(zeroc_k_copy_rows(cp->k, s, R.kv[0], 2 * (size_t)Cl, at(qkv, (size_t)Cl, e),
                                3 * (size_t)Cl, (size_t)B * R.Tl, 2 * (size_t)Cl, 0));
  int first[2] = {1, 1};
  for (int st = 0; st < N; st++) {
    void *cur = R.kv[st % 2];
    const int src = (r - st + N) % N;
    if (st < N - 1) {
      ZEROC_CHECK(exchange(&R, cur, R.kv[(st + 1) % 2], kvn, TAG_KV, 0));
      ZEROC_CHECK(maybe_wait(&R, 0));
    }
    for (int qh = 0; qh < 2; qh++)
      for (int kh = 0; kh < 2; kh++) {
        zeroc_attn_block_t b;
        if (!pair(&R, qh, src, kh, &b)) continue;
        const void *q = at(qkv, (size_t)qh * c * 3 * Cl, e);
        const void *kk = at(cur, (size_t)kh * c * 2 * Cl, e), *v = at(kk, (size_t)Cl, e);
        ZEROC_CHECK(zeroc_k_attention_block_forward(cp->k, s, R.pout, R.plse, q, kk, v, &b, drop));
        ZEROC_CHECK(zeroc_k_attention_merge(cp->k, s, at(out, (size_t)qh * c * Cl, e),
                                            lse + (size_t)qh * c, R.pout, R.plse, &b, first[qh]));
        first[qh] = 0;
      }
    if (st < N - 1) ZEROC_CHECK(arrived(&R, 0));
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__cp_ring_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                       const void *dout, const void *qkv, const void *out,
                                       const float *lse, int B, int T, int Cl, int NHl,
                                       const zeroc_dropout_t *drop) {
  ring_t R;
  ring_setup(&R, cp, s, B, T, Cl, NHl);
  const int N = cp->size, r = cp->rank, c = R.c;
  const size_t kvn = (size_t)B * R.Tl * 2 * Cl, e = R.esz;
  ZEROC_CHECK(zeroc_k_copy_rows(cp->k, s, R.kv[0], 2 * (size_t)Cl, at(qkv, (size_t)Cl, e),
                                3 * (size_t)Cl, (size_t)B * R.Tl, 2 * (size_t)Cl, 0));
  ZEROC_CHECK(zeroc_memset_async(s, R.dkv[0], 0, kvn * e));
  for (int st = 0; st < N; st++) {
    void *cur = R.kv[st % 2], *dcur = R.dkv[st % 2];
    const int src = (r - st + N) % N;
    if (st < N - 1) {
      ZEROC_CHECK(exchange(&R, cur, R.kv[(st + 1) % 2], kvn, TAG_KV, 0));
      ZEROC_CHECK(maybe_wait(&R, 0));
    }
    for (int qh = 0; qh < 2; qh++)
      for (int kh = 0; kh < 2; kh++) {
        zeroc_attn_block_t b;
        if (!pair(&R, qh, src, kh, &b)) continue;
        const size_t qo = (size_t)qh * c * 3 * Cl, oo = (size_t)qh * c * Cl;
        const size_t ko = (size_t)kh * c * 2 * Cl;
        ZEROC_CHECK(zeroc_k_attention_block_backward(
            cp->k, s, at(dqkv, qo, e), at(dcur, ko, e), at(dcur, ko + (size_t)Cl, e),
            at(dout, oo, e), at(qkv, qo, e), at(cur, ko, e), at(cur, ko + (size_t)Cl, e),
            at(out, oo, e), lse + (size_t)qh * c, &b, drop));
      }
    /* this rank's share of dK/dV of rank src's chunks goes on towards src; the last
     * hop (st == N-1) hands them to src itself, and brings this rank's own home */
    ZEROC_CHECK(exchange(&R, dcur, R.dkv[(st + 1) % 2], kvn, TAG_DKV, 3));
    if (st < N - 1) ZEROC_CHECK(arrived(&R, 0));
    ZEROC_CHECK(arrived(&R, 3));
  }
  /* dK/dV of this rank's own chunks, summed over every rank's queries */
  return zeroc_k_copy_rows(cp->k, s, at(dqkv, (size_t)Cl, e), 3 * (size_t)Cl, R.dkv[N % 2],
                           2 * (size_t)Cl, (size_t)B * R.Tl, 2 * (size_t)Cl, 1);
}
