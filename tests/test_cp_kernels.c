/*
 * tests/test_cp_kernels.c - the attention block kernels of context parallelism
 * (kernels.h: zeroc_attn_block_t), cpu twins through the dispatch: a block pair
 * (full and causal-diagonal, separate q and k/v strides, dropout at global
 * positions) against a double-precision reference; its backward against central
 * differences of that reference; and a whole causal sequence cut into two chunks
 * (diagonal, full + merge + diagonal) against the one-piece kernel, forward and
 * backward.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx;
static zeroc_kernels_t *K;

enum { B = 2, NH = 3, HS = 5, C = NH * HS };

/* q (B,Tq) rows of stride C+2 (a gap), k and v interleaved (B,Tk,2C): q and k/v
 * strides differ from each other and from the packed qkv. */
typedef struct pairdata {
  int Tq, Tk, causal;
  int64_t qp, kp;
  float *q, *kv, *dout;
  zeroc_attn_block_t blk;
} pairdata_t;

static void pair_make(pairdata_t *d, int Tq, int Tk, int causal, int64_t qp, int64_t kp,
                      uint64_t seed) {
  d->Tq = Tq, d->Tk = Tk, d->causal = causal, d->qp = qp, d->kp = kp;
  const size_t qt = C + 2, kvt = 2 * C;
  d->q = malloc(sizeof(float) * B * Tq * qt);
  d->kv = malloc(sizeof(float) * B * Tk * kvt);
  d->dout = malloc(sizeof(float) * B * Tq * C);
  zt_fill_uniform(d->q, (size_t)B * Tq * qt, seed, -1.5f, 1.5f);
  zt_fill_uniform(d->kv, (size_t)B * Tk * kvt, seed + 1, -1.5f, 1.5f);
  zt_fill_uniform(d->dout, (size_t)B * Tq * C, seed + 2, -1, 1);
  d->blk = (zeroc_attn_block_t){.B = B,
                                .NH = NH,
                                .HS = HS,
                                .Tq = Tq,
                                .Tk = Tk,
                                .causal = causal,
                                .q_t = qt,
                                .q_b = (size_t)Tq * qt,
                                .kv_t = kvt,
                                .kv_b = (size_t)Tk * kvt,
                                .o_t = C,
                                .o_b = (size_t)Tq * C,
                                .l_h = (size_t)Tq,
                                .l_b = (size_t)NH * Tq,
                                .q_pos = qp,
                                .k_pos = kp};
}

static void pair_free(pairdata_t *d) {
  free(d->q);
  free(d->kv);
  free(d->dout);
}

static double mask(const zeroc_dropout_t *dp, int b, int h, int64_t i, int64_t j) {
  if (!dp || dp->p == 0) return 1;
  uint64_t rk = zeroc_i_dropout_row_key(dp->key, zeroc_i_dropout_row_att(dp, b, h, i));
  return zeroc_i_dropout_bits(rk, (uint32_t)j) >= zeroc_i_dropout_threshold(dp->p)
             ? 1.0 / (1.0 - dp->p)
             : 0.0;
}

/* Double reference of the pair: out (B,Tq,C), lse (B,NH,Tq); returns sum(dout*out). */
static double pair_ref(const pairdata_t *d, const zeroc_dropout_t *dp, double *out, double *lse) {
  const zeroc_attn_block_t *a = &d->blk;
  double loss = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < d->Tq; i++) {
        const int jn = d->causal ? i + 1 : d->Tk;
        double s[160], mx = -1e300, sum = 0; /* Tk <= 160 */
        for (int j = 0; j < jn; j++) {
          double x = 0;
          for (int e = 0; e < HS; e++)
            x += (double)d->q[b * a->q_b + i * a->q_t + h * HS + e] *
                 d->kv[b * a->kv_b + j * a->kv_t + h * HS + e];
          s[j] = x / sqrt((double)HS);
          mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j < jn; j++) sum += exp(s[j] - mx);
        if (lse) lse[((size_t)b * NH + h) * d->Tq + i] = mx + log(sum);
        for (int e = 0; e < HS; e++) {
          double o = 0;
          for (int j = 0; j < jn; j++)
            o += mask(dp, b, h, d->qp + i, d->kp + j) * exp(s[j] - mx) / sum *
                 d->kv[b * a->kv_b + j * a->kv_t + C + h * HS + e];
          const size_t oi = ((size_t)b * d->Tq + i) * C + h * HS + e;
          if (out) out[oi] = o;
          loss += o * d->dout[oi];
        }
      }
  return loss;
}

static double rel(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num) / (sqrt(den) > 1e-30 ? sqrt(den) : 1e-30);
}

static void check_pair(int Tq, int Tk, int causal, int64_t qp, int64_t kp,
                       const zeroc_dropout_t *dp) {
  pairdata_t d;
  pair_make(&d, Tq, Tk, causal, qp, kp, 100 + (uint64_t)Tq * 7 + (uint64_t)causal);
  const size_t no = (size_t)B * Tq * C, nl = (size_t)B * NH * Tq;
  float *po = malloc(sizeof(float) * no), *pl = malloc(sizeof(float) * nl);
  double *ro = malloc(sizeof(double) * no), *rl = malloc(sizeof(double) * nl);
  ZT_OK(zeroc_k_attention_block_forward(K, NULL, po, pl, d.q, d.kv, d.kv + C, &d.blk, dp));
  pair_ref(&d, dp, ro, rl);
  double eo = rel(po, ro, no), el = rel(pl, rl, nl);
  ZT_ASSERT_MSG(eo < 1e-5 && el < 1e-5,
                "block Tq %d Tk %d causal %d drop %d: out err %g lse err %g", Tq, Tk, causal,
                dp != NULL, eo, el);
  /* backward with the block's own out and lse (the block is then a whole attention):
   * gradients pre-filled, so the kernel must accumulate */
  const size_t nq = (size_t)B * Tq * (C + 2), nkv = (size_t)B * Tk * 2 * C;
  float *dq = malloc(sizeof(float) * nq), *dkv = malloc(sizeof(float) * nkv);
  zt_fill_uniform(dq, nq, 7, -1, 1);
  zt_fill_uniform(dkv, nkv, 8, -1, 1);
  float *dq0 = malloc(sizeof(float) * nq), *dkv0 = malloc(sizeof(float) * nkv);
  memcpy(dq0, dq, sizeof(float) * nq);
  memcpy(dkv0, dkv, sizeof(float) * nkv);
  ZT_OK(zeroc_k_attention_block_backward(K, NULL, dq, dkv, dkv + C, d.dout, d.q, d.kv, d.kv + C, po,
                                         pl, &d.blk, dp));
  /* central differences of sum(dout * out) on a sample of every input (sparser on
   * the big pairs; 37 is prime to both row strides, so every column is hit) */
  const double h = 1e-3;
  const size_t step = (size_t)Tq * Tk > 1000 ? 37 : 3;
  double num = 0, den = 0;
  for (int which = 0; which < 2; which++) {
    float *x = which ? d.kv : d.q;
    const size_t n = which ? nkv : nq;
    for (size_t i = 0; i < n; i += step) {
      if (!which && i % (C + 2) >= C) continue; /* the gap */
      const float keep = x[i], xp = keep + (float)h, xm = keep - (float)h;
      x[i] = xp;
      const double lp = pair_ref(&d, dp, NULL, NULL);
      x[i] = xm;
      const double lm = pair_ref(&d, dp, NULL, NULL);
      x[i] = keep;
      const double want = (lp - lm) / ((double)xp - (double)xm);
      const double got = which ? (double)dkv[i] - dkv0[i] : (double)dq[i] - dq0[i];
      num += (got - want) * (got - want);
      den += want * want;
    }
  }
  const double eg = sqrt(num) / sqrt(den);
  ZT_ASSERT_MSG(eg < 1e-4, "block backward Tq %d Tk %d causal %d drop %d: finite-difference err %g",
                Tq, Tk, causal, dp != NULL, eg);
  int gap_bad = 0;
  for (size_t i = 0; i < nq; i++) gap_bad += i % (C + 2) >= C && dq[i] != dq0[i];
  CU_ASSERT_EQUAL(gap_bad, 0);
  free(po), free(pl), free(ro), free(rl), free(dq), free(dkv), free(dq0), free(dkv0);
  pair_free(&d);
}

static void test_block_pairs(void) {
  zeroc_dropout_t dp = {0.25f, zeroc_i_dropout_key(3, 1, 2, ZEROC_DROP_ATTN), 4, 0, 40, 64, 8, 2};
  check_pair(6, 6, 1, 12, 12, NULL);
  check_pair(5, 7, 0, 30, 3, NULL);
  check_pair(6, 6, 1, 12, 12, &dp);
  check_pair(5, 7, 0, 30, 3, &dp);
  check_pair(1, 1, 1, 0, 0, NULL);
  /* across the cpu kernel's 64 x 64 tiles: a diagonal pair one row past a tile, an
   * off-diagonal one with partial tiles both ways */
  zeroc_dropout_t dl = {0.25f, zeroc_i_dropout_key(3, 1, 2, ZEROC_DROP_ATTN), 4, 0, 200, 256, 8, 2};
  check_pair(65, 65, 1, 65, 65, NULL);
  check_pair(65, 65, 1, 65, 65, &dl);
  check_pair(70, 131, 0, 140, 3, &dl);
}

/* A causal sequence of T = 2c tokens in two chunks: rows of chunk 0 = its diagonal
 * block; rows of chunk 1 = full(q1, k0) merged with diagonal(q1, k1). Equals the
 * one-piece kernel forward (out, lse) and backward (dqkv as the sum over pairs). */
static void check_split(const zeroc_dropout_t *dp) {
  enum { c = 7, T = 2 * c };
  const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
  float *qkv = malloc(sizeof(float) * n3), *dout = malloc(sizeof(float) * n1);
  zt_fill_uniform(qkv, n3, 41, -1.5f, 1.5f);
  zt_fill_uniform(dout, n1, 42, -1, 1);
  float *out = malloc(sizeof(float) * n1), *lse = malloc(sizeof(float) * nl);
  float *dq = calloc(n3, sizeof(float));
  ZT_OK(zeroc_k_attention_forward(K, NULL, out, lse, qkv, B, T, C, NH, dp));
  ZT_OK(zeroc_k_attention_backward(K, NULL, dq, dout, qkv, out, lse, B, T, C, NH, dp));
  float *o2 = malloc(sizeof(float) * n1), *l2 = malloc(sizeof(float) * nl);
  float *dq2 = calloc(n3, sizeof(float));
  float *po = malloc(sizeof(float) * n1), *pl = malloc(sizeof(float) * nl);
  const int pairs[3][2] = {{0, 0}, {1, 0}, {1, 1}}; /* (query chunk, key chunk) */
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < 3; k++) {
      const int qc = pairs[k][0], kc = pairs[k][1];
      zeroc_attn_block_t a = {.B = B,
                              .NH = NH,
                              .HS = HS,
                              .Tq = c,
                              .Tk = c,
                              .causal = qc == kc,
                              .q_t = 3 * C,
                              .q_b = (size_t)T * 3 * C,
                              .kv_t = 3 * C,
                              .kv_b = (size_t)T * 3 * C,
                              .o_t = C,
                              .o_b = (size_t)T * C,
                              .l_h = T,
                              .l_b = (size_t)NH * T,
                              .q_pos = qc * c,
                              .k_pos = kc * c};
      const float *q = qkv + (size_t)qc * c * 3 * C, *kk = qkv + (size_t)kc * c * 3 * C + C;
      if (pass == 0) {
        ZT_OK(zeroc_k_attention_block_forward(K, NULL, po, pl, q, kk, kk + C, &a, dp));
        ZT_OK(zeroc_k_attention_merge(K, NULL, o2 + (size_t)qc * c * C, l2 + qc * c, po, pl, &a,
                                      k != 2));
      } else {
        float *g = dq2 + (size_t)qc * c * 3 * C, *gk = dq2 + (size_t)kc * c * 3 * C + C;
        ZT_OK(zeroc_k_attention_block_backward(K, NULL, g, gk, gk + C, dout + (size_t)qc * c * C, q,
                                               kk, kk + C, o2 + (size_t)qc * c * C, l2 + qc * c, &a,
                                               dp));
      }
    }
  double eo = zt_rel_err(o2, out, n1), el = zt_rel_err(l2, lse, nl), ed = zt_rel_err(dq2, dq, n3);
  ZT_ASSERT_MSG(eo < 1e-6 && el < 1e-6 && ed < 1e-5,
                "two chunks vs one piece (drop %d): out %g lse %g dqkv %g", dp != NULL, eo, el, ed);
  free(qkv), free(dout), free(out), free(lse), free(dq), free(o2), free(l2), free(dq2), free(po),
      free(pl);
}

static void test_split_equals_full(void) {
  zeroc_dropout_t dp = {0.2f, zeroc_i_dropout_key(5, 3, 0, ZEROC_DROP_ATTN), 0, 0, 14, 14, NH, 0};
  check_split(NULL);
  check_split(&dp);
}

static void test_copy_rows(void) {
  float src[4 * 5], dst[4 * 7];
  for (int i = 0; i < 20; i++) src[i] = (float)i;
  for (int i = 0; i < 28; i++) dst[i] = -1;
  ZT_OK(zeroc_k_copy_rows(K, NULL, dst + 1, 7, src + 2, 5, 4, 3, 0));
  ZT_OK(zeroc_k_copy_rows(K, NULL, dst + 1, 7, src + 2, 5, 4, 3, 1));
  int bad = 0;
  for (int r = 0; r < 4; r++)
    for (int w = 0; w < 7; w++)
      bad += dst[r * 7 + w] != (w >= 1 && w < 4 ? 2 * src[r * 5 + 2 + w - 1] : -1.0f);
  CU_ASSERT_EQUAL(bad, 0);
  zeroc_attn_block_t a = {.B = 1, .NH = 1, .HS = 1, .Tq = 2, .Tk = 3, .causal = 1};
  CU_ASSERT_EQUAL(zeroc_k_attention_block_forward(K, NULL, dst, dst, src, src, src, &a, NULL),
                  ZEROC_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"block pair fwd vs reference, bwd vs finite differences (dropout too)", test_block_pairs},
      {"two chunks merged equal the one-piece kernel, fwd and bwd", test_split_equals_full},
      {"strided row copy and bad block shapes", test_copy_rows},
      ZT_END,
  };
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ctx = zt_ctx(1, 1, 1);
  if (!ctx) return 1;
  if (zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx), ZEROC_FP32, &K) !=
      ZEROC_OK) {
    fprintf(stderr, "zeroc_kernels_create: %s\n", zeroc_last_error(NULL));
    return 1;
  }
  int rc = zt_run("cp_kernels", tests);
  zeroc_kernels_destroy(K);
  zeroc_ctx_destroy(ctx);
  MPI_Finalize();
  return rc;
}
