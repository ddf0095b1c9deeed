/*
 * tests/cuda_emu/emu_attention.cpp - part of test_kernels_cuda_emu (emu_check.h): the
 * cuda attention kernels (the scalar ones in fp32, the tensor-core ones of
 * attention_mma.cu in bf16), their context-parallel (query block, key block) pairs and
 * the dropout kernel, against double references on the CPU emulation of CUDA.
 */
#include "emu_check.h"

/* ---- attention ----------------------------------------------------------------------- */

/* The dropout rule of kernels/dropout.h, written out: 1/(1-p) when kept, else 0. */
static double drop_mask(const zeroc_dropout_t *dp, uint64_t row, uint32_t col) {
  uint32_t bits = zeroc_i_dropout_bits(zeroc_i_dropout_hash(dp->key, row), col);
  return (double)bits >= std::floor((double)dp->p * 4294967296.0) ? 1.0 / (1.0 - dp->p) : 0.0;
}

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T); then dqkv += from dout (B,T,C); dp: dropout
// on the probabilities (the reference multiplies each by its mask) or NULL. fresh: dqkv
// starts at 0, so the whole gradient is the change and bf16 is held to 1e-2 on it too.
void t_attention(zeroc_dtype_t dt, int B, int T, int NH, int HS, size_t off,
                 const zeroc_dropout_t *dp_, bool fresh) {
  const char *dn = zeroc_dtype_name(dt);
  const int C = NH * HS;
  const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
  Dev d;
  Kernels K(dt);
  vec qkv = randv(dt, nq, -1.5f, 1.5f), g = randv(dt, no), dqkv0 = fresh ? vec(nq, 0.0f) : randv(dt, nq);
  void *pq = d.put(dt, qkv, off), *out = d.put(dt, vec(no, NAN), off);
  float *lse = d.raw<float>((size_t)B * NH * T, NAN);
  OK(zeroc_i_cuda_attention_forward(&K.k, NULL, out, lse, pq, B, T, C, NH, dp_));

  const double sc = 1 / std::sqrt((double)HS);
  dvec ro(no), rl((size_t)B * NH * T), rd = tod(dqkv0);
  auto at = [&](int b, int t, int part, int h, int x) {
    return ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * HS + x;
  };
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < T; i++) {
        dvec s(i + 1), p(i + 1), dp(i + 1), m(i + 1, 1.0);
        double mx = -1e300, sum = 0, D = 0;
        if (dp_)
          for (int j = 0; j <= i; j++) {
            uint64_t bh = (dp_->seq0 + (uint64_t)b) * (uint64_t)dp_->width + (dp_->first + h);
            m[j] = drop_mask(dp_, bh * dp_->Tmax + (uint64_t)i, (uint32_t)j);
          }
        for (int j = 0; j <= i; j++) {
          double a = 0;
          for (int x = 0; x < HS; x++) a += (double)qkv[at(b, i, 0, h, x)] * qkv[at(b, j, 1, h, x)];
          s[j] = a * sc;
          mx = std::max(mx, s[j]);
        }
        for (int j = 0; j <= i; j++) sum += std::exp(s[j] - mx);
        rl[((size_t)b * NH + h) * T + i] = mx + std::log(sum);
        for (int j = 0; j <= i; j++) p[j] = std::exp(s[j] - mx) / sum;
        const size_t o = ((size_t)b * T + i) * C + (size_t)h * HS;
        for (int x = 0; x < HS; x++) {
          double a = 0;
          for (int j = 0; j <= i; j++) a += m[j] * p[j] * qkv[at(b, j, 2, h, x)];
          ro[o + x] = a;
        }
        for (int j = 0; j <= i; j++) {
          double a = 0;
          for (int x = 0; x < HS; x++) a += (double)g[o + x] * qkv[at(b, j, 2, h, x)];
          dp[j] = m[j] * a;
          D += p[j] * dp[j];
        }
        for (int j = 0; j <= i; j++) {
          double ds = p[j] * (dp[j] - D);
          for (int x = 0; x < HS; x++) {
            rd[at(b, i, 0, h, x)] += sc * ds * qkv[at(b, j, 1, h, x)];
            rd[at(b, j, 1, h, x)] += sc * ds * qkv[at(b, i, 0, h, x)];
            rd[at(b, j, 2, h, x)] += m[j] * p[j] * g[o + x];
          }
        }
      }
  double e = relerr(get(dt, out, no), ro);
  CHECK(e < tol(dt), "attention_forward %s B %d T %d NH %d HS %d off %zu: error %g", dn, B, T, NH,
        HS, off, e);
  e = relerr(vec(lse, lse + (size_t)B * NH * T), rl);
  CHECK(e < 1e-5, "attention_forward lse %s T %d HS %d: error %g", dn, T, HS, e);

  void *pd = d.put(dt, dqkv0, off);
  OK(zeroc_i_cuda_attention_backward(&K.k, NULL, pd, d.put(dt, g, off), pq, out, lse, B, T, C, NH,
                                     dp_));
  vec got = get(dt, pd, nq), change(nq);
  dvec want(nq);
  for (size_t i = 0; i < nq; i++) {
    change[i] = got[i] - dqkv0[i];
    want[i] = rd[i] - dqkv0[i];
  }
  e = relerr(change, want);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-5 : fresh ? 1e-2 : 5e-2),
        "attention_backward %s B %d T %d NH %d HS %d off %zu: error %g", dn, B, T, NH, HS, off, e);
}

/* ---- attention blocks (context parallelism) ------------------------------------------ */

/* A causal sequence of T = 4c tokens cut into 4 chunks, every visible (query chunk, key
 * chunk) pair a block (diagonal or full) merged by log-sum-exp, then every pair's backward
 * with the final out and lse: equals the one-piece kernel (itself checked against double
 * above), out, lse and dqkv; plus the strided row copy, assigned and accumulated. */
void t_attention_blocks(zeroc_dtype_t dt, int B, int c, int NH, int HS, const zeroc_dropout_t *dp) {
  const char *dn = zeroc_dtype_name(dt);
  const int T = 4 * c, C = NH * HS, NCH = 4;
  const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
  Dev d;
  Kernels K(dt);
  vec qkv = randv(dt, n3, -1.5f, 1.5f), g = randv(dt, n1);
  void *pq = d.put(dt, qkv), *pg = d.put(dt, g);
  void *out = d.put(dt, vec(n1, NAN)), *dq = d.put(dt, vec(n3, 0.0f));
  float *lse = d.raw<float>(nl, NAN);
  OK(zeroc_i_cuda_attention_forward(&K.k, NULL, out, lse, pq, B, T, C, NH, dp));
  OK(zeroc_i_cuda_attention_backward(&K.k, NULL, dq, pg, pq, out, lse, B, T, C, NH, dp));
  void *o2 = d.put(dt, vec(n1, NAN)), *dq2 = d.put(dt, vec(n3, 0.0f));
  float *l2 = d.raw<float>(nl, NAN), *pl = d.raw<float>(nl, NAN);
  void *po = d.put(dt, vec(n1, NAN));
  const size_t es = zeroc_dtype_size(dt);
  auto at = [&](void *p, size_t e) { return (void *)((char *)p + e * es); };
  for (int pass = 0; pass < 2; pass++)
    for (int qc = 0; qc < NCH; qc++)
      for (int kc = 0; kc <= qc; kc++) {
        zeroc_attn_block_t a = {B, NH, HS, c, c, qc == kc, 3 * (size_t)C, (size_t)T * 3 * C,
                                3 * (size_t)C, (size_t)T * 3 * C, (size_t)C, (size_t)T * C,
                                (size_t)T, (size_t)NH * T, (int64_t)qc * c, (int64_t)kc * c};
        void *q = at(pq, (size_t)qc * c * 3 * C), *kk = at(pq, (size_t)kc * c * 3 * C + C);
        void *oq = at(o2, (size_t)qc * c * C);
        if (pass == 0) {
          OK(zeroc_i_cuda_attention_block_forward(&K.k, NULL, po, pl, q, kk, at(kk, C), &a, dp));
          OK(zeroc_i_cuda_attention_merge(&K.k, NULL, oq, l2 + qc * c, po, pl, &a, kc == 0));
        } else {
          void *gq = at(dq2, (size_t)qc * c * 3 * C), *gk = at(dq2, (size_t)kc * c * 3 * C + C);
          OK(zeroc_i_cuda_attention_block_backward(&K.k, NULL, gq, gk, at(gk, C),
                                                   at(pg, (size_t)qc * c * C), q, kk, at(kk, C), oq,
                                                   l2 + qc * c, &a, dp));
        }
      }
  const double to = dt == ZEROC_FP32 ? 1e-5 : 2e-2, tb = dt == ZEROC_FP32 ? 1e-5 : 5e-2;
  double e = relerr(get(dt, o2, n1), tod(get(dt, out, n1)));
  CHECK(e < to, "attention blocks %s B %d c %d NH %d HS %d drop %d: out error %g", dn, B, c, NH,
        HS, dp != nullptr, e);
  CHECK((e = relerr(vec(l2, l2 + nl), tod(vec(lse, lse + nl)))) < 1e-5, "blocks lse %s: %g", dn, e);
  e = relerr(get(dt, dq2, n3), tod(get(dt, dq, n3)));
  CHECK(e < tb, "attention blocks %s B %d c %d NH %d HS %d drop %d: dqkv error %g", dn, B, c, NH,
        HS, dp != nullptr, e);
  /* rows 1.. of width 3 from a stride-5 source into a stride-7 destination, twice (add) */
  vec src = randv(dt, 20), dst0(28, 0.5f);
  void *pd = d.put(dt, dst0);
  OK(zeroc_i_cuda_copy_rows(&K.k, NULL, at(pd, 1), 7, at(d.put(dt, src), 2), 5, 4, 3, 0));
  vec once = get(dt, pd, 28);
  size_t bad = 0;
  for (int r = 0; r < 4; r++)
    for (int w = 0; w < 7; w++)
      bad += once[r * 7 + w] != (w >= 1 && w < 4 ? src[r * 5 + 1 + w] : 0.5f);
  CHECK(bad == 0, "copy_rows %s: %zu differ", dn, bad);
}

/* ---- dropout ------------------------------------------------------------------------ */

// in (N,C) -> out (N,C) = in * mask: bit for bit the rule (in fp32, rounded once to dt), in
// place too, with rows starting at row0 (a sequence-parallel rank's)
void t_dropout(zeroc_dtype_t dt, int T, int C, size_t off) {
  const char *dn = zeroc_dtype_name(dt);
  const int B = 3, N = B * T - 2; /* a row split that does not start a sequence */
  Dev d;
  Kernels K(dt);
  zeroc_dropout_t dp = {0.3f, zeroc_i_dropout_key(1, 9, 4, ZEROC_DROP_MLP_RESID), 6, 2, T, T + 5, C,
                        0};
  vec x = randv(dt, (size_t)N * C);
  void *px = d.put(dt, x, off), *py = d.put(dt, vec((size_t)N * C, NAN), off);
  OK(zeroc_i_cuda_dropout(&K.k, NULL, py, px, &dp, N, C));
  const float sc = zeroc_i_dropout_scale(dp.p);
  size_t bad = 0, kept = 0;
  vec want((size_t)N * C);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < C; c++) {
      const int64_t g = dp.row0 + r;
      const uint64_t row = (dp.seq0 + (uint64_t)(g / T)) * dp.Tmax + (uint64_t)(g % T);
      const size_t i = (size_t)r * C + c;
      const bool k = drop_mask(&dp, row, (uint32_t)c) != 0;
      kept += k;
      float w = k ? x[i] * sc : 0.0f;
      if (dt == ZEROC_BF16) w = zeroc_bf16_to_f32(zeroc_f32_to_bf16(w));
      want[i] = w;
    }
  vec got = get(dt, py, (size_t)N * C);
  for (size_t i = 0; i < got.size(); i++) bad += memcmp(&got[i], &want[i], 4) != 0;
  CHECK(bad == 0 && kept > 0 && kept < got.size(), "dropout %s T %d C %d: %zu differ, %zu kept",
        dn, T, C, bad, kept);
  OK(zeroc_i_cuda_dropout(&K.k, NULL, px, px, &dp, N, C));
  got = get(dt, px, (size_t)N * C);
  bad = 0;
  for (size_t i = 0; i < got.size(); i++) bad += memcmp(&got[i], &want[i], 4) != 0;
  CHECK(bad == 0, "dropout in place %s T %d C %d: %zu differ", dn, T, C, bad);
}
