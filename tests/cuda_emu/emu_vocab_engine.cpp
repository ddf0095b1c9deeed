/*
 * tests/cuda_emu/emu_vocab_engine.cpp - part of test_kernels_cuda_emu (emu_check.h): the
 * elementwise, cross-entropy and vocabulary-parallel kernels against double references,
 * the engine kernels bit for bit against the cpu formula, and the embedding bags, on the
 * CPU emulation of CUDA.
 */
#include "emu_check.h"

/* ---- elementwise --------------------------------------------------------------------- */

void t_elementwise(zeroc_dtype_t dt, size_t n, size_t off) {
  const char *dn = zeroc_dtype_name(dt);
  const double s = std::sqrt(2 / M_PI);
  Dev d;
  Kernels K(dt);
  vec x = randv(dt, n, -4, 4), y = randv(dt, n), z = randv(dt, n);
  void *out = d.put(dt, vec(n, NAN), off), *px = d.put(dt, x, off);
  OK(zeroc_i_cuda_gelu_forward(&K.k, NULL, out, px, n));
  dvec r(n);
  for (size_t i = 0; i < n; i++)
    r[i] = 0.5 * x[i] * (1 + std::tanh(s * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  double e = relerr(get(dt, out, n), r);
  CHECK(e < tol(dt), "gelu_forward %s n %zu off %zu: error %g", dn, n, off, e);

  void *pz = d.put(dt, z, off);
  OK(zeroc_i_cuda_gelu_backward(&K.k, NULL, pz, px, d.put(dt, y, off), n));
  for (size_t i = 0; i < n; i++) {
    double t = std::tanh(s * (x[i] + 0.044715 * x[i] * x[i] * x[i]));
    r[i] = z[i] +
           y[i] * (0.5 * (1 + t) + 0.5 * x[i] * (1 - t * t) * s * (1 + 3 * 0.044715 * x[i] * x[i]));
  }
  e = relerr(get(dt, pz, n), r);
  CHECK(e < tol(dt), "gelu_backward %s n %zu off %zu: error %g", dn, n, off, e);

  void *py = d.put(dt, y, off);
  OK(zeroc_i_cuda_residual_forward(&K.k, NULL, py, py, d.put(dt, z, off), n)); /* out aliases a */
  for (size_t i = 0; i < n; i++) r[i] = (double)y[i] + z[i];
  e = relerr(get(dt, py, n), r);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-7 : 4e-3), "residual_forward %s: error %g", dn, e);
  OK(zeroc_i_cuda_add(&K.k, NULL, py, d.put(dt, x, off), n));
  for (size_t i = 0; i < n; i++) r[i] += x[i];
  e = relerr(get(dt, py, n), r);
  CHECK(e < tol(dt), "add %s: error %g", dn, e);
}

/* ---- classifier ---------------------------------------------------------------------- */

// logits (N,Vp) -> losses (N), logits = dloss * (softmax - onehot); row 2 has no target
void t_crossentropy(zeroc_dtype_t dt, int Vp, float dloss) {
  const char *dn = zeroc_dtype_name(dt);
  const int N = 7, V = 37;
  Dev d;
  Kernels K(dt);
  vec lg = randv(dt, (size_t)N * Vp, -3, 5);
  int32_t *tg = d.raw<int32_t>(N, 0);
  for (int r = 0; r < N; r++) tg[r] = r == 2 ? -1 : (int)(urand() * V);
  float *loss = d.raw<float>(N, NAN);
  void *pl = d.put(dt, lg);
  OK(zeroc_i_cuda_crossentropy_forward_backward(&K.k, NULL, loss, pl, tg, N, V, Vp, dloss));
  dvec rl(N), rg((size_t)N * Vp);
  for (int r = 0; r < N; r++) {
    const float *row = &lg[(size_t)r * Vp];
    double mx = -1e300, sum = 0;
    for (int j = 0; j < V; j++) mx = std::max(mx, (double)row[j]);
    for (int j = 0; j < V; j++) sum += std::exp(row[j] - mx);
    rl[r] = tg[r] < 0 ? 0 : mx + std::log(sum) - row[tg[r]];
    for (int j = 0; j < Vp; j++) {
      double grad = tg[r] < 0 || j >= V ? 0 : dloss * (std::exp(row[j] - mx) / sum - (j == tg[r]));
      rg[(size_t)r * Vp + j] = dloss == 0 ? row[j] : grad;
    }
  }
  double e = relerr(vec(loss, loss + N), rl);
  CHECK(e < 1e-6, "crossentropy losses %s Vp %d: error %g", dn, Vp, e);
  e = relerr(get(dt, pl, (size_t)N * Vp), rg);
  CHECK(dloss == 0 ? e == 0 : e < tol(dt), "crossentropy logits %s Vp %d dloss %g: error %g", dn,
        Vp, dloss, e);

  tg[0] = V; /* out of range: a NaN loss, the other rows unharmed, padding still 0 */
  pl = d.put(dt, lg);
  OK(zeroc_i_cuda_crossentropy_forward_backward(&K.k, NULL, loss, pl, tg, N, V, Vp, dloss));
  CHECK(std::isnan(loss[0]) && std::fabs(loss[1] - rl[1]) < 1e-5 * std::fabs(rl[1]),
        "crossentropy with target V: losses %g %g", loss[0], loss[1]);
  const vec row0 = get(dt, pl, Vp);
  double pad = 0;
  for (int j = V; j < Vp; j++) pad += std::fabs(row0[j] - (dloss == 0 ? lg[j] : 0.0f));
  CHECK(pad == 0, "crossentropy with target V: padding columns changed by %g", pad);
}

/* ---- vocabulary-parallel (tensor parallelism) ------------------------------------------ */

// Two ranks' slices of a vocabulary of V = 37 padded to 48 (24 rows each); the
// all-reduces between the cross-entropy passes are done here on the host. The
// result must equal the unsplit softmax cross-entropy and embedding.
void t_vocab(zeroc_dtype_t dt, float dloss) {
  const char *dn = zeroc_dtype_name(dt);
  const int N = 6, V = 37, Vp = 48, Vl = 24, C = 8, B = 2, T = 3;
  Dev d;
  Kernels K(dt);
  vec lg = randv(dt, (size_t)N * Vp, -3, 5);
  int32_t *tg = d.raw<int32_t>(N, 0);
  for (int r = 0; r < N; r++) tg[r] = r == 1 ? -1 : (int)(urand() * V);
  tg[3] = 30; /* a target in the second slice (its real columns end at 37) */
  float *mx[2], *xt[2], *se[2], *loss[2];
  void *pl[2];
  for (int k = 0; k < 2; k++) {
    vec part((size_t)N * Vl);
    for (int r = 0; r < N; r++)
      for (int j = 0; j < Vl; j++) part[(size_t)r * Vl + j] = lg[(size_t)r * Vp + k * Vl + j];
    pl[k] = d.put(dt, part);
    mx[k] = d.raw<float>(N, NAN);
    xt[k] = d.raw<float>(N, NAN);
    se[k] = d.raw<float>(N, NAN);
    loss[k] = d.raw<float>(N, NAN);
    OK(zeroc_i_cuda_vocab_ce_local(&K.k, NULL, mx[k], xt[k], pl[k], tg, N, Vl, k * Vl, V));
  }
  float *gmx = d.raw<float>(N, 0), *gxt = d.raw<float>(N, 0), *gse = d.raw<float>(N, 0);
  for (int r = 0; r < N; r++) gmx[r] = std::max(mx[0][r], mx[1][r]), gxt[r] = xt[0][r] + xt[1][r];
  for (int k = 0; k < 2; k++)
    OK(zeroc_i_cuda_vocab_ce_sumexp(&K.k, NULL, se[k], pl[k], gmx, N, Vl, k * Vl, V));
  for (int r = 0; r < N; r++) gse[r] = se[0][r] + se[1][r];
  for (int k = 0; k < 2; k++)
    OK(zeroc_i_cuda_vocab_ce_finish(&K.k, NULL, loss[k], pl[k], tg, gmx, gse, gxt, N, Vl, k * Vl, V,
                                    dloss));
  dvec rl(N), rg((size_t)N * Vp);
  for (int r = 0; r < N; r++) {
    const float *row = &lg[(size_t)r * Vp];
    double m = -1e300, sum = 0;
    for (int j = 0; j < V; j++) m = std::max(m, (double)row[j]);
    for (int j = 0; j < V; j++) sum += std::exp(row[j] - m);
    rl[r] = tg[r] < 0 ? 0 : m + std::log(sum) - row[tg[r]];
    for (int j = 0; j < Vp; j++)
      rg[(size_t)r * Vp + j] = tg[r] < 0 || j >= V ? 0 : dloss * (std::exp(row[j] - m) / sum - (j == tg[r]));
  }
  double el = 0, nl = 0;
  for (int k = 0; k < 2; k++)
    for (int r = 0; r < N; r++) {
      el += std::pow(loss[k][r] - rl[r], 2);
      nl += rl[r] * rl[r];
    }
  CHECK(std::sqrt(el / nl) < 1e-6, "vocab cross-entropy losses %s: error %g", dn, std::sqrt(el / nl));
  if (dloss != 0) {
    vec got((size_t)N * Vp);
    for (int k = 0; k < 2; k++) {
      vec part = get(dt, pl[k], (size_t)N * Vl);
      for (int r = 0; r < N; r++)
        for (int j = 0; j < Vl; j++) got[(size_t)r * Vp + k * Vl + j] = part[(size_t)r * Vl + j];
    }
    double e = relerr(got, rg);
    CHECK(e < tol(dt), "vocab cross-entropy gradient %s: error %g", dn, e);
  }
  /* the embedding: each slice writes only its tokens' rows; the sum is the whole */
  vec wte = randv(dt, (size_t)Vp * C), wpe = randv(dt, (size_t)T * C), dout = randv(dt, (size_t)B * T * C);
  int32_t *ids = d.raw<int32_t>(B * T, 0);
  for (int i = 0; i < B * T; i++) ids[i] = i == 4 ? ids[0] : (int)(urand() * V); /* a repeat */
  dvec out((size_t)B * T * C, 0), dw((size_t)Vp * C, 0);
  for (int k = 0; k < 2; k++) {
    vec slice(wte.begin() + (size_t)k * Vl * C, wte.begin() + (size_t)(k + 1) * Vl * C);
    void *o = d.put(dt, vec((size_t)B * T * C, NAN));
    OK(zeroc_i_cuda_vocab_embed_forward(&K.k, NULL, o, ids, d.put(dt, slice),
                                        k == 0 ? d.put(dt, wpe) : NULL, B, T, C, k * Vl, Vl));
    vec got = get(dt, o, (size_t)B * T * C);
    for (size_t i = 0; i < got.size(); i++) out[i] += got[i];
    vec dws = randv(dt, (size_t)Vl * C, -1, 1);
    void *pd = d.put(dt, dws);
    OK(zeroc_i_cuda_vocab_embed_backward(&K.k, NULL, pd, NULL, d.put(dt, dout), ids, B, T, C,
                                         k * Vl, Vl));
    vec gd = get(dt, pd, (size_t)Vl * C);
    for (size_t i = 0; i < gd.size(); i++) dw[(size_t)k * Vl * C + i] = (double)gd[i] - dws[i];
  }
  dvec ro((size_t)B * T * C), rw((size_t)Vp * C, 0);
  for (int i = 0; i < B * T; i++)
    for (int c = 0; c < C; c++) {
      ro[(size_t)i * C + c] = (double)wte[(size_t)ids[i] * C + c] + wpe[(size_t)(i % T) * C + c];
      rw[(size_t)ids[i] * C + c] += dout[(size_t)i * C + c];
    }
  double e = relerr(vec(out.begin(), out.end()), ro);
  CHECK(e < tol(dt), "vocab embedding forward %s: error %g", dn, e);
  e = relerr(vec(dw.begin(), dw.end()), rw);
  CHECK(e < (dt == ZEROC_FP32 ? 1e-5 : 3e-2), "vocab embedding backward %s: error %g", dn, e);
}

/* ---- engine -------------------------------------------------------------------------- */

void t_engine(size_t n, size_t off) {
  Dev d;
  Kernels K(ZEROC_FP32);
  vec x = randv(ZEROC_FP32, n, -100, 100);
  const float special[] = {NAN,         INFINITY, -INFINITY, 1.00390625f,
                           1.01171875f, -0.0f,    3.4e38f,   1e-40f};
  for (size_t i = 0; i < 8 && i < n; i++) x[i] = special[i];
  float *src = (float *)d.put(ZEROC_FP32, x, off);
  uint16_t *bf = (uint16_t *)d.put(ZEROC_BF16, vec(n, 0), off);
  OK(zeroc_i_cuda_cast(&K.k, NULL, bf, ZEROC_BF16, src, ZEROC_FP32, n));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += bf[i] != zeroc_f32_to_bf16(x[i]);
  CHECK(bad == 0, "cast fp32 -> bf16 n %zu: %zu differ from zeroc_f32_to_bf16", n, bad);
  float *back = (float *)d.put(ZEROC_FP32, vec(n, NAN), off);
  OK(zeroc_i_cuda_cast(&K.k, NULL, back, ZEROC_FP32, bf, ZEROC_BF16, n));
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float r = zeroc_bf16_to_f32(bf[i]);
    bad += memcmp(&r, &back[i], 4) != 0;
  }
  CHECK(bad == 0, "cast bf16 -> fp32 n %zu: %zu differ", n, bad);

  vec a = randv(ZEROC_FP32, n), b = randv(ZEROC_BF16, n);
  float *pa = (float *)d.put(ZEROC_FP32, a, off);
  OK(zeroc_i_cuda_accumulate(&K.k, NULL, pa, d.put(ZEROC_BF16, b, off), ZEROC_BF16, n, 0.37f));
  OK(zeroc_i_cuda_scale(&K.k, NULL, pa, n, -1.7f));
  bad = 0;
  for (size_t i = 0; i < n; i++) bad += pa[i] != (a[i] + 0.37f * b[i]) * -1.7f;
  CHECK(bad == 0, "accumulate + scale n %zu: %zu differ", n, bad);

  /* add_to, against the cpu twin's rule: fp32 adds exactly; bf16 adds in fp32
   * and rounds once, to nearest even */
  vec w = randv(ZEROC_FP32, n), y = randv(ZEROC_FP32, n);
  const float *pw = (const float *)d.put(ZEROC_FP32, w, off);
  float *py = (float *)d.put(ZEROC_FP32, y, off);
  uint16_t *pz = (uint16_t *)d.put(ZEROC_BF16, randv(ZEROC_BF16, n), off);
  std::vector<uint16_t> z0(pz, pz + n);
  OK(zeroc_i_cuda_add_to(&K.k, NULL, py, ZEROC_FP32, pw, n));
  OK(zeroc_i_cuda_add_to(&K.k, NULL, pz, ZEROC_BF16, pw, n));
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float f = y[i] + w[i];
    bad += memcmp(&f, &py[i], 4) != 0;
    bad += pz[i] != zeroc_f32_to_bf16(zeroc_bf16_to_f32(z0[i]) + w[i]);
  }
  CHECK(bad == 0, "add_to fp32 and bf16 n %zu: %zu differ", n, bad);

  double *acc = d.raw<double>(1, 2.5), want = 2.5;
  OK(zeroc_i_cuda_sumsq(&K.k, NULL, acc, pa, ZEROC_FP32, n));
  for (size_t i = 0; i < n; i++) want += (double)pa[i] * pa[i];
  CHECK(std::fabs(*acc - want) <= 1e-12 * want, "sumsq n %zu: %.17g, want %.17g", n, *acc, want);
  /* bf16 read in place: the sum of the exactly widened values */
  vec sb = randv(ZEROC_BF16, n);
  const uint16_t *psb = (const uint16_t *)d.put(ZEROC_BF16, sb, off);
  double *bacc = d.raw<double>(1, 0.5), bwant = 0.5;
  OK(zeroc_i_cuda_sumsq(&K.k, NULL, bacc, psb, ZEROC_BF16, n));
  for (size_t i = 0; i < n; i++) bwant += (double)sb[i] * sb[i];
  CHECK(std::fabs(*bacc - bwant) <= 1e-12 * bwant, "sumsq of bf16 n %zu: %.17g, want %.17g", n,
        *bacc, bwant);

  /* a loss head's mean added on the device: (float)(sum / denom) twice, against the
   * index-order sum of the cpu twin (the block's order differs: fp32 rounding at worst) */
  vec ls = randv(ZEROC_FP32, n, 0, 12);
  const float *pl = (const float *)d.put(ZEROC_FP32, ls, off);
  double *lacc = d.raw<double>(2, -1.0), lwant = -1.0;
  OK(zeroc_i_cuda_mean_add(&K.k, NULL, lacc, pl, n, (double)n));
  OK(zeroc_i_cuda_mean_add(&K.k, NULL, lacc, pl, n, 3.0));
  for (double den : {(double)n, 3.0}) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += ls[i];
    lwant += (double)(float)(sum / den);
  }
  CHECK(std::fabs(lacc[0] - lwant) <= 1e-6 * std::fabs(lwant), "mean_add n %zu: %.17g, want %.17g",
        n, lacc[0], lwant);
  CHECK(lacc[1] == -1.0, "mean_add n %zu wrote past its double: %g", n, lacc[1]);

  vec p = randv(ZEROC_FP32, n), m = randv(ZEROC_FP32, n, -0.1f, 0.1f),
      v = randv(ZEROC_FP32, n, 0, 0.01f);
  vec g = randv(ZEROC_FP32, n);
  float *pp = (float *)d.put(ZEROC_FP32, p, off), *pm = (float *)d.put(ZEROC_FP32, m, off);
  float *pv = (float *)d.put(ZEROC_FP32, v, off);
  const zeroc_adamw_args_t ar = {
      3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, 1 - 0.9f * 0.9f, 1 - 0.95f * 0.95f, nullptr};
  OK(zeroc_i_cuda_adamw(&K.k, NULL, pp, pm, pv, (float *)d.put(ZEROC_FP32, g, off), n, &ar));
  /* kernels/cpu/engine.c's formula, operation for operation */
  const float ib1 = 1.0f - ar.beta1, ib2 = 1.0f - ar.beta2;
  const float rbc1 = 1.0f / ar.bias_corr1, rbc2 = 1.0f / ar.bias_corr2;
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * ar.grad_scale;
    float mi = ar.beta1 * m[i] + ib1 * gi, vi = ar.beta2 * v[i] + ib2 * gi * gi;
    float pi = p[i] - ar.lr * ((mi * rbc1) / (sqrtf(vi * rbc2) + ar.eps) + ar.weight_decay * p[i]);
    bad += pi != pp[i] || mi != pm[i] || vi != pv[i];
  }
  CHECK(bad == 0, "adamw n %zu: %zu differ", n, bad);

  /* adamw_mixed: the bf16 gradient read as is, the new param also written in bf16 (and
   * fp32): the bits of cast + adamw + cast, so of the loop above on the same inputs */
  for (int od = 0; od < 2; od++) {
    const zeroc_dtype_t out_dt = od ? ZEROC_FP32 : ZEROC_BF16;
    vec gb = randv(ZEROC_BF16, n); /* bf16 values: exact in fp32 */
    float *qp = (float *)d.put(ZEROC_FP32, p, off), *qm = (float *)d.put(ZEROC_FP32, m, off);
    float *qv = (float *)d.put(ZEROC_FP32, v, off);
    void *qo = d.put(out_dt, vec(n, NAN), off);
    OK(zeroc_i_cuda_adamw_mixed(&K.k, NULL, qp, qm, qv, d.put(ZEROC_BF16, gb, off), ZEROC_BF16, qo,
                                out_dt, n, &ar));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      float gi = gb[i] * ar.grad_scale;
      float mi = ar.beta1 * m[i] + ib1 * gi, vi = ar.beta2 * v[i] + ib2 * gi * gi;
      float pi =
          p[i] - ar.lr * ((mi * rbc1) / (sqrtf(vi * rbc2) + ar.eps) + ar.weight_decay * p[i]);
      bool ob = od ? ((float *)qo)[i] != pi : ((uint16_t *)qo)[i] != zeroc_f32_to_bf16(pi);
      bad += pi != qp[i] || mi != qm[i] || vi != qv[i] || ob;
    }
    CHECK(bad == 0, "adamw_mixed (bf16 grad, %s out) n %zu: %zu differ", zeroc_dtype_name(out_dt),
          n, bad);
  }

  /* the multiplier in device memory (clip_scale's): the bits of grad_scale; NaN there: a
   * skipped step, nothing written */
  float *sd = d.raw<float>(1, ar.grad_scale);
  zeroc_adamw_args_t as = ar;
  as.grad_scale = 5.0f; /* ignored */
  as.scale_dev = sd;
  for (int skip = 0; skip < 2; skip++) {
    *sd = skip ? NAN : ar.grad_scale;
    float *rp = (float *)d.put(ZEROC_FP32, p, off), *rm = (float *)d.put(ZEROC_FP32, m, off);
    float *rv = (float *)d.put(ZEROC_FP32, v, off);
    void *ro = d.put(ZEROC_FP32, vec(n, 7.0f), off);
    OK(zeroc_i_cuda_adamw(&K.k, NULL, rp, rm, rv, (float *)d.put(ZEROC_FP32, g, off), n, &as));
    bad = 0;
    for (size_t i = 0; i < n; i++)
      bad += skip ? rp[i] != p[i] || rm[i] != m[i] || rv[i] != v[i]
                  : rp[i] != pp[i] || rm[i] != pm[i] || rv[i] != pv[i];
    CHECK(bad == 0, "adamw, multiplier in memory%s, n %zu: %zu differ", skip ? " (NaN)" : "", n,
          bad);
    if (!skip) continue;
    OK(zeroc_i_cuda_adamw_mixed(&K.k, NULL, rp, rm, rv, d.put(ZEROC_FP32, g, off), ZEROC_FP32, ro,
                                ZEROC_FP32, n, &as));
    bad = 0;
    for (size_t i = 0; i < n; i++)
      bad += rp[i] != p[i] || rm[i] != m[i] || rv[i] != v[i] || ((float *)ro)[i] != 7.0f;
    CHECK(bad == 0, "adamw_mixed with a NaN multiplier in memory, n %zu: %zu written", n, bad);
  }
}

/* clip_scale on the device: kernels/clip.h's formula, the same bits as the host's */
void t_clip_scale() {
  Kernels K(ZEROC_FP32);
  Dev d;
  const double sums[] = {0, 0.25, 1, 4, 1e30, INFINITY, NAN};
  for (double sum : sums)
    for (float clip : {0.0f, 1.0f, 0.05f}) {
      double *ds = d.raw<double>(1, sum);
      float *out = d.raw<float>(1, -1.0f);
      OK(zeroc_i_cuda_clip_scale(&K.k, NULL, out, ds, clip));
      const double norm = std::sqrt(sum);
      const float want = !std::isfinite(norm)      ? NAN
                         : clip > 0 && norm > clip ? (float)(clip / (norm + 1e-6))
                                                   : 1.0f;
      CHECK(std::isnan(want) ? std::isnan(*out) : *out == want,
            "clip_scale of sum %g, clip %g: %.9g, want %.9g", sum, clip, *out, want);
    }
}

// embed/'s bags: w (R,dc), nb bags in blocks of 3 (out rows blk_stride apart), then
// the compact gradient, row sums of squares and row-wise AdaGrad on rows 1, 4, 6
void t_embedbag(int dc) {
  Kernels K(ZEROC_FP32);
  Dev d;
  const int R = 7, nb = 8, blk = 3, ldo = dc + 2, stride = blk * ldo + 5;
  vec w = randv(ZEROC_FP32, (size_t)R * dc), dout = randv(ZEROC_FP32, (size_t)3 * stride);
  int32_t *offs = d.raw<int32_t>(nb + 1, 0);
  int64_t *idx = d.raw<int64_t>(3 * nb, 0);
  for (int b = 0; b < nb; b++) { /* bags of 0..3 ids with repeats */
    offs[b + 1] = offs[b] + b % 4;
    for (int i = offs[b]; i < offs[b + 1]; i++) idx[i] = (int64_t)(urand() * R);
  }
  float *out = (float *)d.put(ZEROC_FP32, vec((size_t)3 * stride, 0.0f)), *pw = (float *)d.put(ZEROC_FP32, w);
  OK(zeroc_i_cuda_embedbag_forward(&K.k, NULL, out, blk, stride, ldo, pw, dc, idx, offs, nb, dc));
  vec got, gg;
  dvec want, wg((size_t)R * dc, 0.0);
  for (int b = 0; b < nb; b++) {
    size_t o = (size_t)(b / blk) * stride + (size_t)(b % blk) * ldo;
    for (int j = 0; j < dc; j++) {
      double a = 0;
      for (int i = offs[b]; i < offs[b + 1]; i++) {
        a += w[(size_t)idx[i] * dc + j];
        wg[(size_t)idx[i] * dc + j] += dout[o + j];
      }
      got.push_back(out[o + j]);
      want.push_back(a);
    }
  }
  CHECK(relerr(got, want) <= tol(ZEROC_FP32), "embedbag_forward dc %d: rel %.3g", dc, relerr(got, want));
  float *g = (float *)d.put(ZEROC_FP32, vec((size_t)R * dc, 0.0f));
  OK(zeroc_i_cuda_embedbag_backward(&K.k, NULL, g, dc, idx, offs, nb,
                                    (float *)d.put(ZEROC_FP32, dout), blk, stride, ldo, dc));
  gg = get(ZEROC_FP32, g, (size_t)R * dc);
  CHECK(relerr(gg, wg) <= tol(ZEROC_FP32), "embedbag_backward dc %d: rel %.3g", dc, relerr(gg, wg));
  vec st = randv(ZEROC_FP32, R, 0.1f, 1.0f), gr = randv(ZEROC_FP32, (size_t)3 * dc);
  float *ss = d.raw<float>(3, NAN), *pg = (float *)d.put(ZEROC_FP32, gr), *pst = (float *)d.put(ZEROC_FP32, st);
  int64_t *rows = d.raw<int64_t>(3, 0);
  rows[0] = 1, rows[1] = 4, rows[2] = 6;
  OK(zeroc_i_cuda_rowwise_sumsq(&K.k, NULL, ss, pg, 3, dc, 0.5f));
  OK(zeroc_i_cuda_rowwise_adagrad(&K.k, NULL, pw, dc, pst, rows, pg, ss, 3, dc, dc + 1, 0.5f, 0.1f,
                                  1e-8f));
  dvec ws = tod(w), wst = tod(st);
  for (int u = 0; u < 3; u++) {
    double q = 0;
    for (int j = 0; j < dc; j++) q += 0.25 * gr[(size_t)u * dc + j] * gr[(size_t)u * dc + j];
    wst[rows[u]] += q / (dc + 1);
    for (int j = 0; j < dc; j++)
      ws[(size_t)rows[u] * dc + j] -= 0.1 * 0.5 * gr[(size_t)u * dc + j] / (std::sqrt(wst[rows[u]]) + 1e-8);
  }
  CHECK(relerr(get(ZEROC_FP32, pw, (size_t)R * dc), ws) <= tol(ZEROC_FP32), "rowwise_adagrad dc %d", dc);
  CHECK(relerr(get(ZEROC_FP32, pst, R), wst) <= tol(ZEROC_FP32), "rowwise_adagrad state dc %d", dc);
}
