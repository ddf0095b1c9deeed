/*
 * model/gpt_cp.c - the GPT's context parallelism: positions and dropout of
 * the zigzag chunks, and attention over the sequence from this rank's tokens
 * (cp/'s ring or Ulysses).
 *
 * The sequence's 2n chunks of c = T/(2n) tokens are dealt in zigzag (rank r
 * holds chunks r and 2n-1-r), so every rank has the same causal work. Local
 * token t < c of a sequence is at global position r c + t, token t >= c at
 * (2n-1-r) c + t - c.
 */
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "kernels/dropout.h"
#include "model/gpt_cp.h"
#include "runtime/runtime.h"
#include "zeroc/gpt.h" /* zeroc_gpt_cp_tokens: its ZEROC_API declaration */

zeroc_result_t zeroc__gpt_cp_init(zeroc__gpt_cp_t *cp, zeroc_ctx_t *ctx, zeroc_kernels_t *k,
                                  zeroc_dtype_t dt, zeroc_cp_mode_t mode, int B, int T, int Cl,
                                  int NH, int tp) {
  const zeroc_mesh_info_t *m = zeroc_ctx_mesh(ctx);
  memset(cp, 0, sizeof *cp);
  cp->n = m->cp > 1 ? m->cp : 1;
  cp->rank = m->cp > 1 ? m->cp_rank : 0;
  cp->mode = mode == ZEROC_CP_MODE_ULYSSES ? ZEROC_CP_MODE_ULYSSES : ZEROC_CP_MODE_RING;
  cp->g = zeroc__ctx_group(ctx, ZEROC_GROUP_CP);
  cp->k = k;
  cp->dt = dt;
  cp->es = zeroc_dtype_size(dt);
  if (cp->n == 1) return ZEROC_OK;
  zeroc__cp_mode_t cm = cp->mode == ZEROC_CP_MODE_ULYSSES ? ZEROC_CP_ULYSSES : ZEROC_CP_RING;
  CHK(zeroc__cp_check_seq(cp->n, T));
  CHK(zeroc__cp_check_heads(cm, NH, tp, cp->n));
  /* ZEROC_CP_OVERLAP=0 waits for each ring hop before its attention, so a
   * benchmark sees what the overlap hides (benchmarks/cp_table.sh) */
  int64_t overlap = 1;
  CHK(zeroc__env_i64("ZEROC_CP_OVERLAP", 1, &overlap));
  CHK(zeroc__cp_create(k, zeroc__ctx_devmem(ctx), cp->g, cm, (int)overlap, &cp->cp));
  /* the peak is reached at build, before the first step (the planner's view) */
  return zeroc__cp_reserve(cp->cp, B, T, Cl, NH / tp);
}

void zeroc__gpt_cp_fini(zeroc__gpt_cp_t *cp) {
  zeroc__cp_destroy(cp->cp);
  cp->cp = NULL;
}

/* The first global position of half h (0, 1) of rank r's tokens. */
static int64_t chunk_start(const zeroc__gpt_cp_t *cp, int r, int h, int64_t c) {
  return zeroc__cp_position(cp->n, r, (int)(2 * c * cp->n), (int)(h * c));
}

/* A run of one sequence's local tokens [lo, hi) (from the sequence's first
 * local token) at consecutive global positions from pos. */
typedef struct {
  int64_t lo, hi, pos;
} run_t;

/* The runs of one sequence's Tl local tokens inside the window [lo, hi)
 * (counted from its first local token; may reach past either end): at most
 * one per half. Returns how many. */
static int seq_runs(const zeroc__gpt_cp_t *cp, int64_t lo, int64_t hi, int Tl, run_t out[2]) {
  int64_t c = Tl / 2;
  int n = 0;
  for (int h = 0; h < 2; h++) {
    int64_t a = h * c > lo ? h * c : lo, e = (h + 1) * c < hi ? (h + 1) * c : hi;
    if (a < e) out[n++] = (run_t){a, e, chunk_start(cp, cp->rank, h, c) + (a - h * c)};
  }
  return n;
}

zeroc_result_t zeroc__gpt_cp_positions(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *x,
                                       void *wpe, int64_t row0, int64_t nrows, int B, int Tl,
                                       int C, int grad) {
  size_t row = (size_t)C * cp->es;
  for (int b = 0; b < B; b++) {
    int64_t base = (int64_t)b * Tl;
    run_t r[2];
    int n = seq_runs(cp, row0 - base, row0 + nrows - base, Tl, r);
    for (int i = 0; i < n; i++) {
      char *xr = (char *)x + (size_t)(base + r[i].lo - row0) * row;
      char *wr = (char *)wpe + (size_t)r[i].pos * row;
      size_t e = (size_t)(r[i].hi - r[i].lo) * (size_t)C;
      CHK(grad ? zeroc_k_add(cp->k, s, wr, xr, e) : zeroc_k_add(cp->k, s, xr, wr, e));
    }
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_cp_dropout(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *out,
                                     const void *in, const zeroc_dropout_t *d, int Nl, int C) {
  /* each run as its own call, named by (sequence, global position) on a
   * sequence of T x cp tokens: the masks of the unsplit model */
  int Tl = d->T;
  int64_t row0 = d->row0, end = row0 + Nl;
  size_t row = (size_t)C * cp->es;
  for (int64_t b = row0 / Tl; b * Tl < end; b++) {
    int64_t base = b * Tl;
    run_t r[2];
    int n = seq_runs(cp, row0 - base, end - base, Tl, r);
    for (int i = 0; i < n; i++) {
      zeroc_dropout_t dd = *d;
      dd.T = Tl * cp->n;
      dd.row0 = b * dd.T + r[i].pos;
      size_t off = (size_t)(base + r[i].lo - row0) * row;
      CHK(zeroc_k_dropout(cp->k, s, (char *)out + off, (const char *)in + off, &dd,
                          (int)(r[i].hi - r[i].lo), C));
    }
  }
  return ZEROC_OK;
}

/* Attention dropout's descriptor with the global sequence length (its masks
 * are named by global head, query and key positions). */
static const zeroc_dropout_t *global_drop(const zeroc__gpt_cp_t *cp, const zeroc_dropout_t *d,
                                          int Tl, zeroc_dropout_t *out) {
  if (!d) return NULL;
  *out = *d;
  out->T = Tl * cp->n;
  return out;
}

zeroc_result_t zeroc__gpt_cp_attention_forward(zeroc__gpt_cp_t *cp, zeroc_stream_t *s, void *out,
                                               float *lse, const void *qkv, int B, int Tl, int Cl,
                                               int NHl, const zeroc_dropout_t *drop) {
  zeroc_dropout_t dd;
  const zeroc_dropout_t *d = global_drop(cp, drop, Tl, &dd);
  return zeroc__cp_attention_forward(cp->cp, s, out, lse, qkv, B, Tl * cp->n, Cl, NHl, d);
}

zeroc_result_t zeroc__gpt_cp_attention_backward(zeroc__gpt_cp_t *cp, zeroc_stream_t *s,
                                                void *dqkv, const void *dout, const void *qkv,
                                                const void *out, const float *lse, int B, int Tl,
                                                int Cl, int NHl, const zeroc_dropout_t *drop) {
  zeroc_dropout_t dd;
  const zeroc_dropout_t *d = global_drop(cp, drop, Tl, &dd);
  return zeroc__cp_attention_backward(cp->cp, s, dqkv, dout, qkv, out, lse, B, Tl * cp->n, Cl,
                                      NHl, d);
}

void zeroc_gpt_cp_tokens(const int32_t *full, int32_t *local, int B, int T, int cp, int rank) {
  int Tl = T / cp, c = Tl / 2;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < 2; h++)
      memcpy(local + (size_t)b * Tl + (size_t)h * c,
             full + (size_t)b * T + (size_t)(h ? 2 * cp - 1 - rank : rank) * c,
             (size_t)c * sizeof(int32_t));
}
