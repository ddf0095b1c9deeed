/*
 * model/sample_llama.c - the sampler's forward for the Llama family (Llama 3,
 * Qwen2), through the cpu kernels training runs (rmsnorm, rope, swiglu,
 * matmul) in the order llama_block.c runs them, so each position's logits
 * equal the training forward's to fp32 rounding. The cache keeps the turned
 * keys of the NKV kv heads (NKV/NH of a multi-head cache), and query head h
 * reads kv head h % NKV as in the training kernels.
 */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "model/sample_impl.h"
#include "model/sample_ops.h"

// ids (n) at positions pos..pos+n-1 -> the cache extended by n rows; the logits (V) of the
// last row in s->logits. Per block: x2 = x + o(attn(rope(qkv(rms1(x))))); x = x2 +
// down(swiglu(gate_up(rms2(x2)))).
void zeroc__sampler_llama_forward(zeroc_sampler_t *s, const int32_t *ids, int n) {
  const int C = s->cfg.hidden, NH = s->cfg.heads, NKV = s->cfg.kv_heads, V = s->cfg.vocab;
  const int T = s->cfg.seq, HS = s->HS, KV = s->KV, QKV = s->QKV, F = s->down, pos = s->pos;
  const float eps = (float)s->cfg.norm_eps;
  /* the parameters after q|k|v's weight (and bias): o, norm2, gate|up, down */
  const int o_w = 2 + s->cfg.qkv_bias, norm2 = o_w + 1, gu_w = o_w + 2, down_w = o_w + 3;
  float *x = s->x;
  for (int i = 0; i < n; i++) {
    memcpy(x + (size_t)i * C, s->wte + (size_t)ids[i] * C, (size_t)C * sizeof(float));
    s->posv[i] = pos + i;
  }
  for (int l = 0; l < s->cfg.layers; l++) {
    const float *p[SAMPLER_BLOCK_MAX];
    for (int k = 0; k < s->nbp; k++) p[k] = s->blk[k] + (size_t)l * s->bsize[k];
    float *kv = s->kv + (size_t)l * T * 2 * KV;
    zeroc__cpu_rmsnorm_forward(s->ln, s->rstd, x, p[0], eps, n, C);
    zeroc__sampler_linear(s->qkv, s->ln, p[1], s->cfg.qkv_bias ? p[2] : NULL, n, C, QKV);
    /* q's NH heads and k's NKV heads are contiguous in a row: turned in one call */
    zeroc__cpu_rope(s->qkv, (size_t)QKV, s->posv, s->inv_freq, n, NH + NKV, HS, 0);
    for (int i = 0; i < n; i++) /* turned k | v of the new rows into the cache */
      memcpy(kv + (size_t)(pos + i) * 2 * KV, s->qkv + (size_t)i * QKV + C,
             2 * (size_t)KV * sizeof(float));
    zeroc__sampler_attend(s->atty, s->qkv, (size_t)QKV, kv, n, pos, NH, NKV, HS);
    zeroc__sampler_linear(s->res, s->atty, p[o_w], NULL, n, C, C);
    zeroc__cpu_residual_rmsnorm_forward(s->res, s->ln, s->rstd, s->res, x, p[norm2], eps, n, C);
    zeroc__sampler_linear(s->fch, s->ln, p[gu_w], NULL, n, C, 2 * F);
    zeroc__cpu_swiglu_forward(s->fchg, s->fch, n, F);
    zeroc__sampler_linear(x, s->fchg, p[down_w], NULL, n, F, C);
    zeroc__cpu_add(x, s->res, (size_t)n * C);
  }
  s->pos = pos + n;
  /* the head: the last row only, the one the next token is drawn from */
  const float *in = x + (size_t)(n - 1) * C;
  zeroc__cpu_rmsnorm_forward(s->ln, s->rstd, in, s->lnfw, eps, 1, C);
  zeroc__sampler_linear(s->logits, s->ln, s->lm_head, NULL, 1, C, V);
}
