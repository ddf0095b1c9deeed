/*
 * kernels/rope.h - the frequencies of rotary position embeddings (RoPE), shared by the
 * cpu kernels, their cuda twins and the model: one table of inverse frequencies per
 * head size, computed on the host in double and rounded to fp32 once (transformers keeps
 * its inv_freq in fp32 too), so every device turns by the same angles.
 *
 * Pair i (i < HS/2) of a head, dims (i, i + HS/2) (transformers' rotate-half), turns by
 * position * inv_freq[i], inv_freq[i] = theta^(-2i/HS); with Llama 3.1's "llama3" scaling
 * (factor > 0), as transformers' _compute_llama3_parameters: wavelength w = 2 pi /
 * inv_freq; w > original / low_freq_factor (low frequencies): inv_freq / factor;
 * w < original / high_freq_factor (high): unchanged; between: the blend
 * (1 - s) inv_freq / factor + s inv_freq, s = (original / w - low) / (high - low).
 * Plain C (and C++).
 */
#ifndef ZEROC_KERNELS_ROPE_H
#define ZEROC_KERNELS_ROPE_H

#include <math.h>

/* Largest head size the kernels turn: the cuda kernels take the table by value. */
#define ZEROC_ROPE_HS_MAX 512

typedef struct zeroc_rope {
  double theta;            /* rope_theta (10000 GPT-NeoX, 500000 Llama 3, 1e6 Qwen2) */
  double factor;           /* llama3 scaling: factor (>= 1: on), 0 off */
  double low_freq_factor;  /* llama3: low_freq_factor (1 in Llama 3.1) */
  double high_freq_factor; /* llama3: high_freq_factor (4), > low_freq_factor */
  double original_max_pos; /* llama3: original_max_position_embeddings (8192) */
} zeroc_rope_t;

/* The (HS/2) inverse frequencies of r for head size HS (even, <= ZEROC_ROPE_HS_MAX). */
static inline void zeroc_i_rope_inv_freq(const zeroc_rope_t *r, int HS, float *inv_freq) {
  const double two_pi = 6.283185307179586476925286766559;
  for (int i = 0; i < HS / 2; i++) {
    double f = pow(r->theta, -2.0 * i / HS);
    if (r->factor > 0) {
      const double w = two_pi / f, lo = r->original_max_pos / r->low_freq_factor;
      const double hi = r->original_max_pos / r->high_freq_factor;
      if (w > lo) {
        f /= r->factor;
      } else if (w >= hi) {
        const double s = (r->original_max_pos / w - r->low_freq_factor) /
                         (r->high_freq_factor - r->low_freq_factor);
        f = (1 - s) * f / r->factor + s * f;
      }
    }
    inv_freq[i] = (float)f;
  }
}

#endif
