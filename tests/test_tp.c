/*
 * tests/test_tp.c - tensor parallelism on real ranks (tp = 2 and 4): each TP
 * layer forward and backward against the unsplit layer computed in double
 * precision (every rank checks its slice of the outputs, weights' gradients
 * and input gradients), with and without sequence parallelism; the
 * vocabulary-parallel cross-entropy against the plain fused kernel with a
 * vocabulary not divisible by tp; the split arithmetic; and the whole GPT at
 * tp against the single-rank model: identical initial weights, gradients
 * slice by slice, losses over optimizer steps, replicated parameters kept
 * bit-identical across tp ranks. Also the initial values: a shard filled in
 * chunks on several threads is the per-element draw, bit for bit.
 */
#include <mpi.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "shard/flat.h"
#include "testutil.h"
#include "tp/split.h"
#include "tp/tp.h"

#define TOL 1e-5 /* fp32 against a double reference, relative (norm-wise) */

/* ---- fixtures ------------------------------------------------------------------- */

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_kernels_t *k;
  zeroc__tp_t tp;
  zeroc_stream_t *s;
} fx_t;

/* A context whose tp group is the whole world. */
static int fx_open(fx_t *f, int sp) {
  memset(f, 0, sizeof *f);
  f->ctx = zt_ctx(zt_world(), 1, 1);
  if (!f->ctx) return -1;
  ZT_OK(zeroc_kernels_create(zeroc__ctx_devmem(f->ctx), zeroc_ctx_compute_stream(f->ctx),
                             ZEROC_FP32, &f->k));
  if (!f->k) return -1;
  ZT_OK(zeroc__tp_init(&f->tp, f->ctx, f->k, sp));
  f->s = zeroc_ctx_compute_stream(f->ctx);
  return 0;
}

static void fx_close(fx_t *f) {
  zeroc__tp_fini(&f->tp); /* its stream and events, before the context goes */
  zeroc_kernels_destroy(f->k);
  if (f->ctx) ZT_OK(zeroc_ctx_finalize(f->ctx));
}

static float *fill(size_t n, uint64_t seed) {
  float *x = malloc(n * sizeof *x + 4);
  zt_fill_normal(x, n, seed, 1.0f);
  return x;
}

static float *zeros(size_t n) { return calloc(n + 1, sizeof(float)); }

/* Rows [r0, r0+nr) of a (rows, cols) matrix. */
static float *rows_of(const float *a, int cols, int r0, int nr) {
  float *o = malloc((size_t)nr * cols * sizeof *o + 4);
  memcpy(o, a + (size_t)r0 * cols, (size_t)nr * cols * sizeof *o);
  return o;
}

/* The local slice of a (d0, d1) tensor split along `dim` in `groups` groups,
 * for tp rank r of t (tp/split.h's mapping, which the layers rely on). */
static float *slice_of(const float *full, int d0, int d1, int dim, int groups, int r, int t) {
  zeroc__split_t sp = {d1 ? 2 : 1, {d0, d1 ? d1 : 0}, groups, dim, t};
  uint64_t n = (uint64_t)d0 * (d1 ? d1 : 1) / (uint64_t)t;
  float *o = malloc(n * sizeof *o + 4);
  for (uint64_t j = 0; j < n; j++) o[j] = full[zeroc__split_to_global(&sp, r, j)];
  return o;
}

static void check(const char *what, const float *got, const float *want, size_t n, double tol) {
  double e = zt_rel_err(got, want, n);
  ZT_ASSERT_MSG(e <= tol, "%s: relative error %.3g > %.1g (tp %d)", what, e, tol, zt_world());
}

/* ---- split arithmetic ------------------------------------------------------------ */

static void test_split_arithmetic(void) {
  /* (12, 5) split along 0 in 3 groups over 2 ranks: rank 1 holds rows 2,3 | 6,7 | 10,11 */
  zeroc__split_t s = {2, {12, 5}, 3, 0, 2};
  CU_ASSERT_EQUAL(zeroc__split_to_global(&s, 1, 0), 2 * 5);
  CU_ASSERT_EQUAL(zeroc__split_to_global(&s, 1, 2 * 5 + 3), 6 * 5 + 3);
  CU_ASSERT_EQUAL(zeroc__split_to_global(&s, 1, 5 * 5 + 4), 11 * 5 + 4);
  /* along 1 (row-parallel): (4, 6) over 3 ranks, rank 2 holds columns 4, 5 */
  zeroc__split_t c = {2, {4, 6}, 1, 1, 3};
  CU_ASSERT_EQUAL(zeroc__split_to_global(&c, 2, 0), 4);
  CU_ASSERT_EQUAL(zeroc__split_to_global(&c, 2, 3), 1 * 6 + 5);
  /* every element of the unsplit tensor has exactly one holder, both ways */
  zeroc__split_t cases[] = {s, c, {1, {24}, 3, 0, 4}, {2, {8, 3}, 1, 0, 8}};
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zeroc__split_t *x = &cases[i];
    uint64_t full = zeroc__split_full_numel(x);
    char *seen = calloc(full, 1);
    for (int r = 0; r < x->size; r++)
      for (uint64_t j = 0; j < full / (uint64_t)x->size; j++) {
        uint64_t g = zeroc__split_to_global(x, r, j), l;
        int rr;
        zeroc__split_to_local(x, g, &rr, &l);
        bad += g >= full || seen[g]++ || rr != r || l != j;
      }
    free(seen);
  }
  ZT_ASSERT_MSG(bad == 0, "%d elements map wrongly", bad);
  /* remapping between padded shapes keeps (row, col) */
  int64_t a[2] = {5, 3}, b[2] = {8, 3};
  uint64_t o = 0;
  CU_ASSERT(zeroc__split_remap(4 * 3 + 2, a, b, 2, &o) && o == 4 * 3 + 2);
  CU_ASSERT(!zeroc__split_remap(6 * 3 + 1, b, a, 2, &o));
  /* the public form on a descriptor */
  zeroc_param_desc_t pd = {.name = "w",
                           .ndim = 2,
                           .shape = {6, 5},
                           .tp_groups = 3,
                           .tp_dim = 0,
                           .tp_rank = 1,
                           .tp_size = 2,
                           .tp_full = {12, 5}};
  ZT_OK(zeroc__split_check(&pd));
  CU_ASSERT_EQUAL(zeroc_param_global_index(&pd, 5), 3 * 5);      /* local row 1: row 3 */
  CU_ASSERT_EQUAL(zeroc_param_global_index(&pd, 12), 6 * 5 + 2); /* local row 2: row 6 */
  pd.shape[0] = 3;
  CU_ASSERT_EQUAL(zeroc__split_check(&pd), ZEROC_ERR_INVALID_ARG);
}

/* ---- linear layers ----------------------------------------------------------------- */

enum { B = 2, T = 8, N = B * T, C = 16 };

/* out (n,oc) = in (n,c) @ w (oc,c)^T + b, in double */
static void ref_linear(float *out, const float *in, const float *w, const float *b, int n, int c,
                       int oc) {
  for (int i = 0; i < n; i++)
    for (int o = 0; o < oc; o++) {
      double acc = b ? b[o] : 0;
      for (int j = 0; j < c; j++) acc += (double)in[(size_t)i * c + j] * w[(size_t)o * c + j];
      out[(size_t)i * oc + o] = (float)acc;
    }
}

/* din = dout @ w; dw = dout^T @ in; db = column sums of dout, in double */
static void ref_linear_backward(float *din, float *dw, float *db, const float *dout,
                                const float *in, const float *w, int n, int c, int oc) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < c; j++) {
      double acc = 0;
      for (int o = 0; o < oc; o++) acc += (double)dout[(size_t)i * oc + o] * w[(size_t)o * c + j];
      din[(size_t)i * c + j] = (float)acc;
    }
  for (int o = 0; o < oc; o++) {
    double sb = 0;
    for (int j = 0; j < c; j++) {
      double acc = 0;
      for (int i = 0; i < n; i++) acc += (double)dout[(size_t)i * oc + o] * in[(size_t)i * c + j];
      dw[(size_t)o * c + j] = (float)acc;
    }
    for (int i = 0; i < n; i++) sb += dout[(size_t)i * oc + o];
    db[o] = (float)sb;
  }
}

/* Column-parallel (the fused qkv: 3 groups) against the unsplit layer. */
static void column_case(int sp) {
  fx_t f;
  if (fx_open(&f, sp)) return;
  int t = zt_world(), r = zt_rank(), OC = 3 * C, OCl = OC / t, Nl = sp ? N / t : N;
  float *in = fill(N * C, 1), *w = fill((size_t)OC * C, 2), *b = fill(OC, 3),
        *dout = fill((size_t)N * OC, 4);
  float *out = zeros((size_t)N * OC), *din = zeros(N * C), *dw = zeros((size_t)OC * C),
        *db = zeros(OC);
  ref_linear(out, in, w, b, N, C, OC);
  ref_linear_backward(din, dw, db, dout, in, w, N, C, OC);
  /* this rank's inputs: its rows of `in` (sequence parallel), its rows of w, b
   * and its columns of dout */
  float *in_l = rows_of(in, C, sp ? r * Nl : 0, Nl), *w_l = slice_of(w, OC, C, 0, 3, r, t);
  float *b_l = slice_of(b, OC, 0, 0, 3, r, t), *dout_l = slice_of(dout, N, OC, 1, 3, r, t);
  float *gath = zeros(N * C), *part = zeros(N * C), *o_l = zeros((size_t)N * OCl),
        *din_l = zeros(N * C);
  float *dw_l = zeros((size_t)OCl * C), *db_l = zeros(OCl);
  ZT_OK(zeroc__tp_column_forward(&f.tp, f.s, o_l, in_l, gath, w_l, b_l, N, C, OCl));
  ZT_OK(zeroc__tp_column_backward(&f.tp, f.s, din_l, dw_l, db_l, dout_l, in_l, gath, part, w_l, N,
                                  C, OCl));
  float *o_ref = slice_of(out, N, OC, 1, 3, r, t), *din_ref = rows_of(din, C, sp ? r * Nl : 0, Nl);
  float *dw_ref = slice_of(dw, OC, C, 0, 3, r, t), *db_ref = slice_of(db, OC, 0, 0, 3, r, t);
  check("column-parallel output", o_l, o_ref, (size_t)N * OCl, TOL);
  check("column-parallel input gradient", din_l, din_ref, (size_t)Nl * C, TOL);
  check("column-parallel weight gradient", dw_l, dw_ref, (size_t)OCl * C, TOL);
  check("column-parallel bias gradient", db_l, db_ref, OCl, TOL);
  float *ptrs[] = {in,     w,    b,    dout, out,   din,  dw,   db,    in_l,    w_l,    b_l,
                   dout_l, gath, part, o_l,  din_l, dw_l, db_l, o_ref, din_ref, dw_ref, db_ref};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
  fx_close(&f);
}

/* Row-parallel (MLP down: 4C -> C) against the unsplit layer. */
static void row_case(int sp) {
  fx_t f;
  if (fx_open(&f, sp)) return;
  int t = zt_world(), r = zt_rank(), CI = 4 * C, Cl = CI / t, Nl = sp ? N / t : N;
  float *in = fill((size_t)N * CI, 5), *w = fill((size_t)C * CI, 6), *b = fill(C, 7),
        *dout = fill(N * C, 8);
  float *out = zeros(N * C), *din = zeros((size_t)N * CI), *dw = zeros((size_t)C * CI),
        *db = zeros(C);
  ref_linear(out, in, w, b, N, CI, C);
  ref_linear_backward(din, dw, db, dout, in, w, N, CI, C);
  float *in_l = slice_of(in, N, CI, 1, 1, r, t), *w_l = slice_of(w, C, CI, 1, 1, r, t);
  float *dout_l = rows_of(dout, C, sp ? r * Nl : 0, Nl);
  float *gath = zeros(N * C), *part = zeros(N * C), *o_l = zeros(N * C),
        *din_l = zeros((size_t)N * Cl);
  float *dw_l = zeros((size_t)C * Cl), *db_l = zeros(C);
  ZT_OK(zeroc__tp_row_forward(&f.tp, f.s, o_l, in_l, part, w_l, b, N, Cl, C));
  ZT_OK(zeroc__tp_row_backward(&f.tp, f.s, din_l, dw_l, db_l, dout_l, in_l, gath, w_l, N, Cl, C));
  float *o_ref = rows_of(out, C, sp ? r * Nl : 0, Nl), *din_ref = slice_of(din, N, CI, 1, 1, r, t);
  float *dw_ref = slice_of(dw, C, CI, 1, 1, r, t);
  check("row-parallel output", o_l, o_ref, (size_t)Nl * C, TOL);
  check("row-parallel input gradient", din_l, din_ref, (size_t)N * Cl, TOL);
  check("row-parallel weight gradient", dw_l, dw_ref, (size_t)C * Cl, TOL);
  /* the replicated bias's gradient is the whole sum on every rank */
  check("row-parallel bias gradient", db_l, db, C, TOL);
  float *ptrs[] = {in,     w,    b,    dout, out,   din,  dw,   db,    in_l,    w_l,
                   dout_l, gath, part, o_l,  din_l, dw_l, db_l, o_ref, din_ref, dw_ref};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
  fx_close(&f);
}

static void test_column_parallel(void) { column_case(0); }
static void test_column_parallel_sp(void) { column_case(1); }
static void test_row_parallel(void) { row_case(0); }
static void test_row_parallel_sp(void) { row_case(1); }

/* ---- vocabulary-parallel embedding ----------------------------------------------- */

enum { V = 101 }; /* not a multiple of any tp size */

static int padded(int t) { return (V + 64 * t - 1) / (64 * t) * (64 * t); }

static void embedding_case(int sp) {
  fx_t f;
  if (fx_open(&f, sp)) return;
  int t = zt_world(), r = zt_rank(), Vp = padded(t), Vl = Vp / t, Nl = sp ? N / t : N;
  float *wte = fill((size_t)Vp * C, 9), *wpe = fill(T * C, 10), *dout = fill(N * C, 11);
  for (size_t i = (size_t)V * C; i < (size_t)Vp * C; i++) wte[i] = 0; /* padding rows */
  int32_t inp[N];
  uint64_t st = 12;
  for (int i = 0; i < N; i++) inp[i] = (int32_t)(zt_rand_u64(&st) % V);
  inp[1] = inp[5] = V - 1; /* a repeated token, in the last rank's rows for t = 2 */
  /* reference: the plain encoder (the unsplit layer) and a double backward */
  float *out = zeros(N * C), *dwte = zeros((size_t)Vp * C), *dwpe = zeros(T * C);
  ZT_OK(zeroc_k_encoder_forward(f.k, f.s, out, inp, wte, wpe, B, T, C));
  for (int c = 0; c < C; c++) {
    for (int v = 0; v < V; v++) {
      double acc = 0;
      for (int i = 0; i < N; i++) acc += inp[i] == v ? dout[(size_t)i * C + c] : 0.0;
      dwte[(size_t)v * C + c] = (float)acc;
    }
    for (int p = 0; p < T; p++) {
      double acc = 0;
      for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + p) * C + c];
      dwpe[(size_t)p * C + c] = (float)acc;
    }
  }
  float *wte_l = rows_of(wte, C, r * Vl, Vl), *dout_l = rows_of(dout, C, sp ? r * Nl : 0, Nl);
  float *o_l = zeros(N * C), *gath = zeros(N * C), *part = zeros(N * C),
        *dwte_l = zeros((size_t)Vl * C);
  float *dwpe_l = zeros(T * C);
  ZT_OK(zeroc__tp_embedding_forward(&f.tp, f.s, o_l, part, inp, wte_l, wpe, B, T, C, Vl));
  ZT_OK(zeroc__tp_embedding_backward(&f.tp, f.s, dwte_l, dwpe_l, dout_l, gath, inp, B, T, C, Vl));
  /* exactly one non-zero term per sum: the rows are the unsplit ones bit for bit */
  float *o_ref = rows_of(out, C, sp ? r * Nl : 0, Nl), *dwte_ref = rows_of(dwte, C, r * Vl, Vl);
  ZT_ASSERT_MSG(memcmp(o_l, o_ref, sizeof(float) * (size_t)Nl * C) == 0,
                "vocab-parallel embedding output differs from the unsplit encoder's bits");
  check("vocab-parallel wte gradient", dwte_l, dwte_ref, (size_t)Vl * C, TOL);
  check("position embedding gradient", dwpe_l, dwpe, T * C, TOL);
  double pad = 0;
  for (int v = 0; v < Vl; v++)
    if (r * Vl + v >= V)
      for (int c = 0; c < C; c++) pad += fabs(dwte_l[(size_t)v * C + c]);
  ZT_ASSERT_MSG(pad == 0, "padding rows of wte received gradient %g", pad);
  float *ptrs[] = {wte, wpe,  dout, out,    dwte,   dwpe,  wte_l,   dout_l,
                   o_l, gath, part, dwte_l, dwpe_l, o_ref, dwte_ref};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
  fx_close(&f);
}

static void test_embedding(void) { embedding_case(0); }
static void test_embedding_sp(void) { embedding_case(1); }

/* ---- vocabulary-parallel cross-entropy ---------------------------------------------- */

static void test_crossentropy(void) {
  fx_t f;
  if (fx_open(&f, 0)) return;
  int t = zt_world(), r = zt_rank(), Vp = padded(t), Vl = Vp / t;
  /* logits around a large offset: the shared max must keep exp in range */
  float *logits = fill((size_t)N * Vp, 13);
  for (size_t i = 0; i < (size_t)N * Vp; i++) logits[i] = 3.0f * logits[i] + 40.0f;
  int32_t tg[N];
  uint64_t st = 14;
  for (int i = 0; i < N; i++) tg[i] = (int32_t)(zt_rand_u64(&st) % V);
  tg[3] = -1;    /* no loss here */
  tg[4] = V - 1; /* the last real column */
  const float dloss = 0.25f;
  /* the plain fused kernel on the unsplit logits, and a double reference of the loss */
  float *ref = malloc(sizeof(float) * (size_t)N * Vp), *loss_ref = zeros(N), *loss_dbl = zeros(N);
  memcpy(ref, logits, sizeof(float) * (size_t)N * Vp);
  ZT_OK(zeroc_k_crossentropy_forward_backward(f.k, f.s, loss_ref, ref, tg, N, V, Vp, dloss));
  for (int i = 0; i < N; i++) {
    if (tg[i] < 0) continue;
    const float *x = logits + (size_t)i * Vp;
    double m = x[0], s = 0;
    for (int v = 1; v < V; v++) m = x[v] > m ? x[v] : m;
    for (int v = 0; v < V; v++) s += exp((double)x[v] - m);
    loss_dbl[i] = (float)(m + log(s) - x[tg[i]]);
  }
  float *mine = rows_of(logits, Vp, 0, N), *mine_l = slice_of(mine, N, Vp, 1, 1, r, t);
  float *loss = zeros(N), *stats = zeros(3 * N);
  ZT_OK(zeroc__tp_crossentropy(&f.tp, f.s, loss, mine_l, tg, stats, N, V, Vl, dloss));
  float *grad_ref = slice_of(ref, N, Vp, 1, 1, r, t);
  check("vocab-parallel losses against double", loss, loss_dbl, N, TOL);
  check("vocab-parallel losses against the fused kernel", loss, loss_ref, N, TOL);
  check("vocab-parallel logit gradient", mine_l, grad_ref, (size_t)N * Vl, TOL);
  CU_ASSERT_EQUAL(loss[3], 0.0f);
  int pad_bad = 0;
  for (int i = 0; i < N; i++)
    for (int v = 0; v < Vl; v++) pad_bad += r * Vl + v >= V && mine_l[(size_t)i * Vl + v] != 0.0f;
  ZT_ASSERT_MSG(pad_bad == 0, "%d padding gradients are not zero", pad_bad);
  /* every rank holds the same losses */
  float lmax[N], lmin[N];
  MPI_Allreduce(loss, lmax, N, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(loss, lmin, N, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  ZT_ASSERT_MSG(memcmp(lmax, lmin, sizeof lmax) == 0, "ranks hold different losses");
  /* forward only (dloss 0) leaves the logits untouched */
  float *keep = slice_of(mine, N, Vp, 1, 1, r, t), *copy = slice_of(mine, N, Vp, 1, 1, r, t);
  ZT_OK(zeroc__tp_crossentropy(&f.tp, f.s, loss, copy, tg, stats, N, V, Vl, 0.0f));
  CU_ASSERT(memcmp(keep, copy, sizeof(float) * (size_t)N * Vl) == 0);
  check("forward-only losses", loss, loss_dbl, N, TOL);
  float *ptrs[] = {logits, ref,   loss_ref, loss_dbl, mine, mine_l,
                   loss,   stats, grad_ref, keep,     copy};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
  fx_close(&f);
}

/* ---- initial values ------------------------------------------------------------- */

/* The value of local element j of parameter pd (unit `unit`, index i) drawn
 * one element at a time: the rule every chunked, threaded fill must equal. */
static float init_ref(const zeroc_param_desc_t *pd, int unit, int i, uint64_t seed, uint64_t j) {
  uint64_t stream = pd->init_stream ? pd->init_stream : ((uint64_t)unit << 16) + (uint64_t)i + 1;
  switch (pd->init) {
  case ZEROC_INIT_ZEROS:
    return 0.0f;
  case ZEROC_INIT_ONES:
    return 1.0f;
  case ZEROC_INIT_UNIFORM:
    return pd->init_scale * (2.0f * zeroc_rng_uniform(seed, stream, j) - 1.0f);
  default:
    return pd->init_scale * zeroc_rng_normal(seed, stream, zeroc_param_global_index(pd, j));
  }
}

static void test_init_threads(void) {
  /* the counter-based draws are pinned: stored references depend on them */
  CU_ASSERT_EQUAL(zeroc_rng_normal(1234, 7, 0), 0x1.1c5918p+0f);
  CU_ASSERT_EQUAL(zeroc_rng_normal(1234, 7, 987654321), -0x1.9173a2p-2f);
  CU_ASSERT_EQUAL(zeroc_rng_uniform(1234, 7, 12345), 0x1.4c1974p-1f);
  /* runs of consecutive unsplit indices */
  zeroc__split_t cases[] = {
      {2, {12, 5}, 3, 0, 2}, {2, {4, 6}, 1, 1, 3}, {1, {24}, 3, 0, 4}, {2, {8, 3}, 1, 0, 8}};
  int bad = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int r = 0; r < cases[c].size; r++) {
      uint64_t n = zeroc__split_full_numel(&cases[c]) / (uint64_t)cases[c].size;
      for (uint64_t j = 0; j < n; j++) {
        uint64_t run = zeroc__split_run(&cases[c], j), g = zeroc__split_to_global(&cases[c], r, j);
        bad += run < 1;
        for (uint64_t k = 1; k < run && j + k < n; k++)
          bad += zeroc__split_to_global(&cases[c], r, j + k) != g + k;
      }
    }
  ZT_ASSERT_MSG(bad == 0, "%d run elements map wrongly", bad);
  /* a layer of every kind, sizes over several chunks, cut into 3 shards */
  zeroc_param_desc_t p[6] = {
      {.name = "normal", .ndim = 2, .shape = {301, 1001}, .init_scale = 0.02f},
      {.name = "uniform",
       .ndim = 1,
       .shape = {70001},
       .init = ZEROC_INIT_UNIFORM,
       .init_scale = 0.5f},
      {.name = "ones", .ndim = 1, .shape = {5}, .init = ZEROC_INIT_ONES},
      {.name = "zeros", .ndim = 1, .shape = {3}, .init = ZEROC_INIT_ZEROS},
      {.name = "qkv",
       .ndim = 2,
       .shape = {360, 300},
       .init_scale = 0.1f,
       .init_stream = 9,
       .init = ZEROC_INIT_CUSTOM,
       .init_fn = zeroc__split_init_normal,
       .tp_groups = 3,
       .tp_dim = 0,
       .tp_rank = 1,
       .tp_size = 2,
       .tp_full = {720, 300}},
      {.name = "rowp",
       .ndim = 2,
       .shape = {300, 250},
       .init_scale = 0.3f,
       .init_stream = 11,
       .init = ZEROC_INIT_CUSTOM,
       .init_fn = zeroc__split_init_normal,
       .tp_groups = 1,
       .tp_dim = 1,
       .tp_rank = 0,
       .tp_size = 2,
       .tp_full = {300, 500}}};
  zeroc_layer_t L = {.name = "init", .nparams = 6, .params = p};
  int saved = omp_get_max_threads();
  const uint64_t seed = 4242;
  for (int rank = 0; rank < 3; rank++) {
    zeroc__flat_t f;
    ZT_OK(zeroc__flat_layout(&L, 5, 3, rank, &f));
    float *a = malloc(f.S * sizeof *a + 4), *b = malloc(f.S * sizeof *b + 4);
    float *want = zeros(f.S);
    omp_set_num_threads(1);
    zeroc__flat_init_shard(&L, 5, &f, seed, a);
    omp_set_num_threads(3);
    memset(b, 0x7f, f.S * sizeof *b); /* stale bytes must not survive */
    zeroc__flat_init_shard(&L, 5, &f, seed, b);
    for (int i = 0; i < f.n; i++)
      for (uint64_t e = f.p[i].lo; e < f.p[i].hi; e++)
        want[e - f.shard_off] = init_ref(&p[i], 5, i, seed, e - f.p[i].off);
    ZT_ASSERT_MSG(!memcmp(a, b, f.S * sizeof *a), "shard %d: 1 and 3 threads differ", rank);
    ZT_ASSERT_MSG(!memcmp(a, want, f.S * sizeof *a),
                  "shard %d: the threaded fill differs from the per-element draws", rank);
    free(a);
    free(b);
    free(want);
    zeroc__flat_free(&f);
  }
  omp_set_num_threads(saved);
}

/* ---- the whole GPT -------------------------------------------------------------- */

static const zeroc_gpt_config_t GC = {
    .layers = 2, .hidden = 16, .heads = 4, .vocab = 101, .seq = 8, .batch = 4}; /* L C NH V T B */
enum { GB = 4 };                                            /* sequences per step */

typedef struct {
  zeroc_ctx_t *ctx;
  zeroc_gpt_t *gpt;
  zeroc_model_t *m;
} run_t;

/* self: the single-rank reference on MPI_COMM_SELF; else tp ranks x dp. */
static int run_open(run_t *r, int self, int tp, int sp, int stage, int Bm) {
  memset(r, 0, sizeof *r);
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.threads = 1;
  cc.comm_timeout_s = 120;
  cc.tp = self ? 1 : tp;
  MPI_Comm sc = MPI_COMM_SELF;
  if (self) cc.mpi_comm = &sc;
  ZT_OK(zeroc_ctx_create(&r->ctx, &cc));
  if (!r->ctx) return -1;
  zeroc_gpt_options_t o = ZEROC_GPT_OPTIONS_INIT;
  o.batch = Bm;
  o.sequence_parallel = sp;
  ZT_OK(zeroc_gpt_create_ex(r->ctx, &GC, &o, &r->gpt));
  if (!r->gpt) return -1;
  int n;
  const zeroc_layer_t *L = zeroc_gpt_layers(r->gpt, &n);
  zeroc_shard_config_t s = ZEROC_SHARD_CONFIG_INIT;
  s.stage = stage;
  s.weight_decay = 0.1f;
  s.seed = 5;
  ZT_OK(zeroc_shard(r->ctx, L, n, &s, &r->m));
  return r->m ? 0 : -1;
}

static void run_close(run_t *r) {
  zeroc_model_destroy(r->m);
  zeroc_gpt_destroy(r->gpt);
  if (r->ctx) ZT_OK(zeroc_ctx_finalize(r->ctx));
}

static void make_batch(int step, int32_t *in, int32_t *tg) {
  uint64_t s = 91 + (uint64_t)step;
  for (int i = 0; i < GB * GC.seq; i++) in[i] = (int32_t)(zt_rand_u64(&s) % GC.vocab);
  for (int i = 0; i < GB * GC.seq; i++) tg[i] = (int32_t)((in[i] * 7 + 3) % GC.vocab);
}

/* Every unit's full flat state of a stage-0 model (one shard = everything). */
static float **states(run_t *r, zeroc_state_kind_t kind) {
  int n = zeroc_model_num_units(r->m);
  float **u = calloc((size_t)n, sizeof *u);
  for (int i = 0; i < n; i++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(r->m, i, &ui));
    u[i] = malloc(4 * ui.shard_numel);
    ZT_OK(zeroc_model_get_shard(r->m, i, kind, u[i]));
  }
  return u;
}

static void free_states(float **s, int n) {
  for (int i = 0; i < n; i++) free(s[i]);
  free(s);
}

/* Compares this tp rank's parameters (or gradients) with the single-rank
 * model's at the same unsplit indices: bitwise (tol < 0) or to tol, norm-wise
 * per parameter. Elements of the tp model's padding must be zero. */
static void compare_slices(const char *what, run_t *tpr, float **a, run_t *one, float **b,
                           double tol) {
  int n = zeroc_model_num_units(tpr->m), bad = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(tpr->m, u, &ui));
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(tpr->m, u, p);
      const zeroc_param_desc_t *pr = zeroc_model_param_desc(one->m, u, p);
      uint64_t ne = zeroc_param_numel(pd), n1 = zeroc_param_numel(pr);
      const float *x = a[u] + zeroc_model_param_offset(tpr->m, u, p);
      const float *y = b[u] + zeroc_model_param_offset(one->m, u, p);
      float *want = zeros(ne);
      int pad = 0;
      /* the unsplit index is (row, column) with the same C in both: only the
       * number of padding rows of wte differs */
      for (uint64_t j = 0; j < ne; j++) {
        uint64_t g = zeroc_param_global_index(pd, j);
        if (g < n1)
          want[j] = y[g];
        else
          pad += x[j] != 0.0f;
      }
      int ok = tol < 0 ? memcmp(x, want, 4 * ne) == 0 : zt_rel_err(x, want, ne) <= tol;
      if (!ok || pad)
        fprintf(stderr, "  [rank %d] %s: unit %d '%s' differs (rel %.3g, %d padding non-zero)\n",
                zt_rank(), what, u, pd->name, zt_rel_err(x, want, ne), pad);
      bad += !ok || pad;
      free(want);
    }
  }
  ZT_ASSERT_MSG(bad == 0, "%s: %d parameters differ from the single-rank model", what, bad);
}

/* tp = world, dp = 1: identical initial weights; one micro-step's gradients
 * slice by slice; then losses and norms over 3 steps; replicated parameters
 * bit-identical across the tp ranks. */
static void gpt_case(int sp) {
  int W = zt_world();
  run_t one, tpr;
  int32_t in[GB * 8], tg[GB * 8];
  if (run_open(&one, 1, 1, 0, 0, GB) || run_open(&tpr, 0, W, sp, 0, GB)) return;
  int n = zeroc_model_num_units(one.m);
  float **w1 = states(&one, ZEROC_STATE_MASTER), **wt = states(&tpr, ZEROC_STATE_MASTER);
  compare_slices("initial weights", &tpr, wt, &one, w1, -1);
  float loss[2][3], norm[2][3];
  for (int k = 0; k < 3; k++) {
    make_batch(k, in, tg);
    zeroc_gpt_batch_t b = {GB, GC.seq, in, tg, 0, 0};
    for (int which = 0; which < 2; which++) {
      run_t *r = which ? &tpr : &one;
      ZT_OK(zeroc_model_forward(r->m, &b));
      ZT_OK(zeroc_model_backward(r->m));
    }
    if (k == 0) {
      float **g1 = states(&one, ZEROC_STATE_GRAD), **gt = states(&tpr, ZEROC_STATE_GRAD);
      compare_slices("gradients", &tpr, gt, &one, g1, 1e-5);
      free_states(g1, n);
      free_states(gt, n);
    }
    for (int which = 0; which < 2; which++) {
      zeroc_step_info_t info;
      ZT_OK(zeroc_model_step(which ? tpr.m : one.m, 3e-3f, &info));
      loss[which][k] = info.loss;
      norm[which][k] = info.grad_norm;
    }
  }
  for (int k = 0; k < 3; k++) {
    double el = fabs(loss[1][k] - loss[0][k]) / loss[0][k],
           en = fabs(norm[1][k] - norm[0][k]) / norm[0][k];
    ZT_ASSERT_MSG(el < 1e-5 && en < 1e-5, "step %d: loss %.8g vs %.8g, norm %.8g vs %.8g", k,
                  loss[1][k], loss[0][k], norm[1][k], norm[0][k]);
  }
  /* replicated parameters: the same bits on every tp rank after the steps */
  float **w = states(&tpr, ZEROC_STATE_MASTER);
  int differ = 0;
  for (int u = 0; u < n; u++) {
    zeroc_unit_info_t ui;
    ZT_OK(zeroc_model_unit_info(tpr.m, u, &ui));
    for (int p = 0; p < ui.nparams; p++) {
      const zeroc_param_desc_t *pd = zeroc_model_param_desc(tpr.m, u, p);
      if (!(pd->flags & ZEROC_PARAM_TP_REPLICATED)) continue;
      size_t ne = zeroc_param_numel(pd);
      float *x = w[u] + zeroc_model_param_offset(tpr.m, u, p), *r0 = malloc(4 * ne);
      memcpy(r0, x, 4 * ne);
      MPI_Bcast(r0, (int)ne, MPI_FLOAT, 0, MPI_COMM_WORLD);
      differ += memcmp(r0, x, 4 * ne) != 0;
      free(r0);
    }
  }
  int any = 0;
  MPI_Allreduce(&differ, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  ZT_ASSERT_MSG(any == 0, "%d replicated parameters differ between tp ranks", any);
  free_states(w, n);
  free_states(w1, n);
  free_states(wt, n);
  run_close(&tpr);
  run_close(&one);
}

static void test_gpt_tp(void) { gpt_case(0); }
static void test_gpt_tp_sp(void) { gpt_case(1); }

/* tp 2 x dp (ZeRO-3) on 4 ranks: 2-D, each dp rank half the batch. */
static void test_gpt_tp_zero3(void) {
  int W = zt_world();
  if (W != 4) return;
  float loss[2][3], norm[2][3];
  for (int par = 0; par < 2; par++) {
    run_t r;
    int Bm = par ? GB / 2 : GB, d = par ? zt_rank() / 2 : 0; /* tp fastest: dp rank = rank / 2 */
    if (run_open(&r, !par, 2, 0, par ? 3 : 0, Bm)) return;
    for (int k = 0; k < 3; k++) {
      int32_t in[GB * 8], tg[GB * 8];
      make_batch(10 + k, in, tg);
      zeroc_gpt_batch_t b = {Bm, GC.seq, in + d * Bm * GC.seq, tg + d * Bm * GC.seq, 0, 0};
      ZT_OK(zeroc_model_forward(r.m, &b));
      ZT_OK(zeroc_model_backward(r.m));
      zeroc_step_info_t info;
      ZT_OK(zeroc_model_step(r.m, 3e-3f, &info));
      loss[par][k] = info.loss;
      norm[par][k] = info.grad_norm;
    }
    run_close(&r);
  }
  for (int k = 0; k < 3; k++) {
    double el = fabs(loss[1][k] - loss[0][k]) / loss[0][k],
           en = fabs(norm[1][k] - norm[0][k]) / norm[0][k];
    ZT_ASSERT_MSG(el < 1e-5 && en < 1e-5,
                  "tp 2 x ZeRO-3 step %d: loss %.8g vs %.8g, norm %.8g vs %.8g", k, loss[1][k],
                  loss[0][k], norm[1][k], norm[0][k]);
  }
}

/* Shapes tp cannot split are refused with a message naming the numbers. */
static void test_gpt_bad_shapes(void) {
  int W = zt_world();
  zeroc_ctx_t *ctx = zt_ctx(W, 1, 1);
  if (!ctx) return;
  zeroc_gpt_config_t c = GC;
  c.heads = W == 2 ? 1 : 2; /* tp does not divide the heads */
  zeroc_gpt_t *g = NULL;
  CU_ASSERT_EQUAL(zeroc_gpt_create(ctx, &c, 2, 0, ZEROC_FP32, &g), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "divide the heads") != NULL, "message: %s",
                zeroc_last_error(NULL));
  CU_ASSERT_PTR_NULL(g);
  /* sequence parallel with B*T not a multiple of tp: refused at forward */
  zeroc_gpt_options_t o = ZEROC_GPT_OPTIONS_INIT;
  o.batch = 1;
  o.sequence_parallel = 1;
  ZT_OK(zeroc_gpt_create_ex(ctx, &GC, &o, &g));
  if (g) {
    const zeroc_layer_t *L = zeroc_gpt_layers(g, NULL);
    int32_t in[8] = {0}, tg[8] = {0};
    zeroc_gpt_batch_t b = {1, 3, in, tg, 0, 0};
    zeroc_layer_io_t io = {0};
    io.in = &b;
    io.user = L[0].user;
    io.stream = zeroc_ctx_compute_stream(ctx);
    CU_ASSERT_EQUAL(L[0].forward(&io), ZEROC_ERR_INVALID_ARG);
    ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "multiple of") != NULL, "message: %s",
                  zeroc_last_error(NULL));
    zeroc_gpt_destroy(g);
  }
  ZT_OK(zeroc_ctx_finalize(ctx));
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"split arithmetic: local <-> unsplit indices", test_split_arithmetic},
      {"initial values: threaded chunks equal the per-element draws", test_init_threads},
      {"column-parallel linear (qkv, 3 groups) vs unsplit", test_column_parallel},
      {"column-parallel linear, sequence parallel", test_column_parallel_sp},
      {"row-parallel linear vs unsplit", test_row_parallel},
      {"row-parallel linear, sequence parallel", test_row_parallel_sp},
      {"vocab-parallel embedding vs unsplit (V % tp != 0)", test_embedding},
      {"vocab-parallel embedding, sequence parallel", test_embedding_sp},
      {"vocab-parallel cross-entropy vs the fused kernel", test_crossentropy},
      {"GPT at tp = world vs single rank (weights, grads, steps)", test_gpt_tp},
      {"GPT at tp = world, sequence parallel, vs single rank", test_gpt_tp_sp},
      {"GPT tp 2 x ZeRO-3 (4 ranks) vs single rank", test_gpt_tp_zero3},
      {"shapes tp cannot split are refused", test_gpt_bad_shapes},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "tp", tests, 2, 0);
}
