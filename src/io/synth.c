/*
 * io/synth.c - the synthetic Markov corpus: building the random source,
 * solving for its stationary distribution and entropy rate, and sampling.
 */
#include "io/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* Domain tags, so the structure of the source and the sequences come from
 * unrelated streams of the same seed. */
#define TAG_STRUCTURE 0x4d41524b4f56ULL /* "MARKOV" */
#define TAG_SEQUENCE  0x53455155454eULL /* "SEQUEN" */

#define POWER_MAX_ITERS 20000
#define POWER_TOL       1e-14 /* L1 change of pi that ends the iteration */
#define POWER_ACCEPT    1e-11 /* worst residual accepted when the budget runs out */

void zeroc__markov_destroy(zeroc__markov_t *m) {
  if (!m) return;
  free(m->nsucc);
  free(m->succ);
  free(m->q);
  free(m->cum);
  free(m->pi);
  free(m->pi_cdf);
  free(m->row_entropy);
  free(m);
}

/* Draws the successors and their probabilities of every state. */
static void build_rows(zeroc__markov_t *m) {
  zeroc__rng_t r;
  zeroc__rng_seed(&r, zeroc__hash2(m->seed, TAG_STRUCTURE));
  int V = m->V, K = m->K;
  int lo = (K + 1) / 2;
  for (int i = 0; i < V; i++) {
    int n = lo + (int)zeroc__rng_below(&r, (uint64_t)(K - lo + 1));
    int32_t *s = m->succ + (size_t)i * K;
    double *q = m->q + (size_t)i * K, sum = 0;
    for (int k = 0; k < n; k++) {
      int dup;
      do { /* distinct successors, so P_ij has one q term per j */
        s[k] = (int32_t)zeroc__rng_below(&r, (uint64_t)V);
        dup = 0;
        for (int t = 0; t < k; t++) dup |= s[t] == s[k];
      } while (dup);
      /* Dirichlet(1): normalised exponentials; 1 - u is in (0, 1] */
      q[k] = -log(1.0 - zeroc__rng_double(&r));
      sum += q[k];
    }
    if (sum <= 0) { /* every draw was exactly 0: astronomically unlikely */
      for (int k = 0; k < n; k++) q[k] = 1.0;
      sum = n;
    }
    double run = m->noise, *cum = m->cum + (size_t)i * K;
    for (int k = 0; k < n; k++) {
      q[k] = q[k] / sum * (1.0 - m->noise);
      run += q[k];
      cum[k] = run;
    }
    cum[n - 1] = 1.0; /* absorb rounding: a draw u < 1 always lands */
    m->nsucc[i] = (uint8_t)n;
  }
}

/* pi P = pi by power iteration from the uniform distribution. */
static zeroc_result_t solve_stationary(zeroc__markov_t *m) {
  int V = m->V, K = m->K;
  double *next = malloc(sizeof(double) * (size_t)V);
  if (!next) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "synthetic corpus: out of host memory (V %d)", V);
  for (int i = 0; i < V; i++) m->pi[i] = 1.0 / V;
  double delta = 1;
  int it = 0;
  while (it < POWER_MAX_ITERS && delta > POWER_TOL) {
    /* (pi P)_j = noise/V (sum_i pi_i = 1) + sum_i pi_i q_ij */
    for (int j = 0; j < V; j++) next[j] = m->noise / V;
    for (int i = 0; i < V; i++) {
      const int32_t *s = m->succ + (size_t)i * K;
      const double *q = m->q + (size_t)i * K;
      for (int k = 0; k < m->nsucc[i]; k++) next[s[k]] += m->pi[i] * q[k];
    }
    double sum = 0;
    for (int j = 0; j < V; j++) sum += next[j];
    delta = 0;
    for (int j = 0; j < V; j++) {
      double v = next[j] / sum; /* keep it a distribution despite rounding */
      delta += fabs(v - m->pi[j]);
      m->pi[j] = v;
    }
    it++;
  }
  free(next);
  m->iterations = it;
  m->residual = delta;
  if (delta > POWER_ACCEPT)
    return ZEROC_FAIL(
        ZEROC_ERR_NUMERIC,
        "synthetic corpus: stationary distribution did not converge in %d "
        "iterations (L1 change %.3g, V %d, noise %g); a larger noise converges faster",
        it, delta, V, m->noise);
  return ZEROC_OK;
}

static void compute_entropy(zeroc__markov_t *m) {
  int V = m->V, K = m->K;
  double a = m->noise / V; /* the probability of every non-successor */
  double a_term = a * log(a);
  double h = 0, hu = 0, run = 0;
  for (int i = 0; i < V; i++) {
    const double *q = m->q + (size_t)i * K;
    int n = m->nsucc[i];
    double e = -(double)(V - n) * a_term;
    for (int k = 0; k < n; k++) e -= (q[k] + a) * log(q[k] + a);
    m->row_entropy[i] = e;
    h += m->pi[i] * e;
    if (m->pi[i] > 0) hu -= m->pi[i] * log(m->pi[i]);
    run += m->pi[i];
    m->pi_cdf[i] = run;
  }
  m->pi_cdf[V - 1] = 1.0;
  m->entropy_rate = h;
  m->unigram_entropy = hu;
}

zeroc_result_t zeroc__markov_create(int V, int successors, double noise, uint64_t seed,
                                    zeroc__markov_t **out) {
  zeroc_result_t res = ZEROC_OK;
  *out = NULL;
  if (V < 2 || V > ZEROC_MARKOV_MAX_VOCAB)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "synthetic corpus: vocab %d; accepted 2..%d", V,
                      ZEROC_MARKOV_MAX_VOCAB);
  if (successors < 1 || successors > ZEROC_MARKOV_MAX_SUCCESSORS)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "synthetic corpus: successors %d; accepted 1..%d",
                      successors, ZEROC_MARKOV_MAX_SUCCESSORS);
  if (!(noise > 0 && noise < 1))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "synthetic corpus: noise %g; accepted a probability in (0, 1)", noise);
  zeroc__markov_t *m = calloc(1, sizeof *m);
  if (!m) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "synthetic corpus: out of host memory");
  m->V = V;
  m->K = successors < V ? successors : V;
  m->noise = noise;
  m->seed = seed;
  size_t vk = (size_t)V * (size_t)m->K;
  m->nsucc = malloc((size_t)V);
  m->succ = malloc(vk * sizeof *m->succ);
  m->q = malloc(vk * sizeof *m->q);
  m->cum = malloc(vk * sizeof *m->cum);
  m->pi = malloc((size_t)V * sizeof *m->pi);
  m->pi_cdf = malloc((size_t)V * sizeof *m->pi_cdf);
  m->row_entropy = malloc((size_t)V * sizeof *m->row_entropy);
  if (!m->nsucc || !m->succ || !m->q || !m->cum || !m->pi || !m->pi_cdf || !m->row_entropy) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "synthetic corpus: out of host memory for V %d x K %d", V,
                     m->K);
    goto fail;
  }
  build_rows(m);
  ZEROC_TRY(solve_stationary(m));
  compute_entropy(m);
  ZINFO(IO,
        "synthetic corpus: V %d, successors <= %d, noise %g, seed %llu: entropy rate %.6f "
        "nats/token, unigram entropy %.6f, pi after %d iterations (residual %.2g)",
        V, m->K, noise, (unsigned long long)seed, m->entropy_rate, m->unigram_entropy,
        m->iterations, m->residual);
  *out = m;
  return ZEROC_OK;
fail:
  zeroc__markov_destroy(m);
  return res;
}

double zeroc__markov_prob(const zeroc__markov_t *m, int i, int j) {
  double p = m->noise / m->V;
  const int32_t *s = m->succ + (size_t)i * m->K;
  for (int k = 0; k < m->nsucc[i]; k++)
    if (s[k] == j) p += m->q[(size_t)i * m->K + (size_t)k];
  return p;
}

int zeroc__markov_start(const zeroc__markov_t *m, zeroc__rng_t *r) {
  double u = zeroc__rng_double(r);
  int lo = 0, hi = m->V - 1; /* first i with u < pi_cdf[i]; pi_cdf[V-1] = 1 > u */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (u < m->pi_cdf[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

int zeroc__markov_next(const zeroc__markov_t *m, int state, zeroc__rng_t *r) {
  double u = zeroc__rng_double(r);
  if (u < m->noise) return (int)zeroc__rng_below(r, (uint64_t)m->V);
  const double *cum = m->cum + (size_t)state * m->K;
  int n = m->nsucc[state], k = 0;
  while (k < n - 1 && u >= cum[k]) k++;
  return m->succ[(size_t)state * m->K + (size_t)k];
}

void zeroc__markov_sequence(const zeroc__markov_t *m, uint64_t j, int32_t *out, size_t n) {
  if (!n) return;
  zeroc__rng_t r;
  zeroc__rng_seed(&r, zeroc__hash2(zeroc__hash2(m->seed, TAG_SEQUENCE), j));
  int x = zeroc__markov_start(m, &r);
  out[0] = x;
  for (size_t t = 1; t < n; t++) {
    x = zeroc__markov_next(m, x, &r);
    out[t] = x;
  }
}
