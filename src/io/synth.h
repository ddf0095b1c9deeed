/*
 * io/synth.h - the built-in synthetic corpus: a fixed random first-order
 * Markov source over V tokens whose entropy rate is known exactly.
 *
 * From state i the next token is, with probability `noise`, uniform over all
 * V tokens, and otherwise one of n_i in [ceil(K/2), K] "likely successors"
 * with random (Dirichlet(1)) probabilities; so
 *   P_ij = noise/V + q_ij,   sum_j q_ij = 1 - noise.
 * The noise makes the chain irreducible and aperiodic, so its stationary
 * distribution pi is unique; power iteration finds it (it contracts by at
 * least 1 - noise per iteration). The entropy rate is
 *   H = -sum_i pi_i sum_j P_ij ln P_ij   (nats per token).
 * Sequence j is drawn from its own seeded generator: x_0 ~ pi, then T steps
 * of the chain, so any rank makes any sequence alone, and since the chain is
 * stationary from x_0 every target x_1..x_T has expected loss exactly H under
 * the true model: H is the loss floor at every position.
 */
#ifndef ZEROC_IO_SYNTH_H
#define ZEROC_IO_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "zeroc/result.h"

#define ZEROC_MARKOV_MAX_SUCCESSORS 64
/* The largest vocabulary: Llama 3's 128256 and Qwen2's 151936 with room (Gemma's 256000) */
#define ZEROC_MARKOV_MAX_VOCAB 262144

typedef struct zeroc__markov {
  int V;                  /* tokens */
  int K;                  /* most successors per state (stride of the tables below) */
  double noise;           /* mass spread evenly over all V tokens */
  uint8_t *nsucc;         /* (V) successors of each state */
  int32_t *succ;          /* (V, K) successor ids, distinct per state */
  double *q;              /* (V, K) their probabilities beyond noise/V; a row sums to 1 - noise */
  double *cum;            /* (V, K) sampling thresholds: noise + running sum of q, last exactly 1 */
  double *pi;             /* (V) stationary distribution */
  double *pi_cdf;         /* (V) running sum of pi, last exactly 1 */
  double *row_entropy;    /* (V) -sum_j P_ij ln P_ij */
  double entropy_rate;    /* H = sum_i pi_i row_entropy_i */
  double unigram_entropy; /* H(pi) = -sum_i pi_i ln pi_i */
  int iterations;         /* power iterations used */
  double residual;        /* L1 change of pi in the last iteration */
  uint64_t seed;
} zeroc__markov_t;

/*
 * Builds the source for (V, K, noise, seed) and solves for pi and H.
 *   V: 2..ZEROC_MARKOV_MAX_VOCAB; successors K: 1..ZEROC_MARKOV_MAX_SUCCESSORS (capped at V);
 *   noise: in (0, 1).
 * Returns ZEROC_ERR_INVALID_ARG naming the value and the accepted range,
 * ZEROC_ERR_NOMEM, ZEROC_ERR_NUMERIC when power iteration does not converge.
 */
zeroc_result_t zeroc__markov_create(int V, int successors, double noise, uint64_t seed,
                                    zeroc__markov_t **m);
void zeroc__markov_destroy(zeroc__markov_t *m);

/* The exact transition probability P(j | i). */
double zeroc__markov_prob(const zeroc__markov_t *m, int i, int j);
/* A draw from pi, and a draw of the successor of `state`. */
int zeroc__markov_start(const zeroc__markov_t *m, zeroc__rng_t *r);
int zeroc__markov_next(const zeroc__markov_t *m, int state, zeroc__rng_t *r);
/* Sequence j of the corpus: n tokens, x_0 ~ pi then n-1 steps, from a
 * generator seeded by (seed, j) alone. */
void zeroc__markov_sequence(const zeroc__markov_t *m, uint64_t j, int32_t *out, size_t n);

#endif
