/*
 * train/sample.c - sampling from a training run: the trainer's weights
 * gathered to rank 0 (the export's consolidation, persist/gpt_file.h) into a
 * sampler, which generates there while the other ranks wait in the agreement.
 */
#include <string.h>

#include "core/error.h"
#include "model/sample.h"
#include "persist/gpt_file.h"
#include "runtime/runtime.h"
#include "train/trainer.h"

/* Rank 0: copies the consolidated tensors into the sampler (wte without its
 * padding rows: they come first, so the real rows are a prefix). */
static zeroc_result_t fill(void *user, const float *const *src, uint64_t maxp) {
  zeroc_sampler_t *s = user;
  int L = zeroc_sampler_config(s)->layers;
  (void)maxp;
  for (int gu = 0; gu < L + 2; gu++) {
    int np = gu > 0 && gu <= L ? 12 : 2;
    for (int p = 0; p < np; p++) {
      uint64_t rows, cols;
      float *dst = zeroc__sampler_param(s, gu, p, &rows, &cols);
      if (!dst) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "sampler: no parameter %d of unit %d", p, gu);
      memcpy(dst, src[gu * 12 + p], rows * (cols ? cols : 1) * sizeof(float));
    }
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_sampler_from_trainer(zeroc_trainer_t *tr, zeroc_sampler_t **out) {
  if (!tr || !out) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_sampler_from_trainer: NULL");
  *out = NULL;
  zeroc_sampler_t *s = NULL;
  int root = zeroc_ctx_mesh(tr->ctx)->rank == 0;
  zeroc_result_t r = root ? zeroc__sampler_create(&tr->info.model, &s) : ZEROC_OK;
  r = zeroc_ctx_agree(tr->ctx, r);
  if (!r) r = zeroc__gpt_collect(tr->model, tr->gpt, fill, s);
  if (r) {
    zeroc_sampler_destroy(s);
    return zeroc__ctx_ret(tr->ctx, r);
  }
  *out = s;
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_sample(zeroc_trainer_t *tr, const int32_t *prompt, int n, int tokens,
                                    double temperature, int top_k, uint64_t seed, int32_t *out) {
  zeroc_sampler_t *s = NULL;
  CHK(zeroc_sampler_from_trainer(tr, &s));
  zeroc_result_t r =
      s ? zeroc_sampler_generate(s, prompt, n, tokens, temperature, top_k, seed, out) : ZEROC_OK;
  zeroc_sampler_destroy(s);
  return zeroc__ctx_ret(tr->ctx, zeroc_ctx_agree(tr->ctx, r));
}
