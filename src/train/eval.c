/*
 * train/eval.c - the trainer's evaluation: the mean loss over held-out global
 * batches, forward only (zeroc_model_eval), averaged over the data-parallel
 * ranks. Pipelines are not evaluated yet (their forward runs only inside the
 * schedule's step).
 */
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "runtime/runtime.h"
#include "train/trainer.h"
#include "zeroc/device.h"

/* The held-out stream: the training data's shape and order, val_data's tokens. */
static zeroc_result_t open_val(zeroc_trainer_t *tr) {
  zeroc_data_config_t dcfg = zeroc__train_data_config(tr, tr->info.config.val_data, 0);
  return zeroc_ctx_agree(tr->ctx, zeroc_data_create(&dcfg, &tr->val));
}

static zeroc_result_t evaluate(zeroc_trainer_t *tr, double *loss) {
  const zeroc_train_config_t *c = &tr->info.config;
  if (!c->val_data)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_evaluate: the config has no val_data");
  if (tr->pipe)
    return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED,
                      "zeroc_trainer_evaluate: evaluation with a pipeline (pp %d) is not "
                      "supported yet",
                      tr->pp);
  if (!tr->val) ZEROC_CHECK(open_val(tr));
  zeroc_data_info_t vi;
  zeroc_data_info(tr->val, &vi);
  /* synthetic: sequences far past any training run's, so they are held out */
  uint64_t first = vi.kind == ZEROC_DATA_SYNTHETIC ? (uint64_t)1 << 32 : 0;
  zeroc_data_layout_t lay = {tr->dp, tr->dp_rank, c->batch, c->grad_accum};
  double sum = 0;
  for (int k = 0; k < c->val_batches; k++)
    for (int u = 0; u < c->grad_accum; u++) {
      ZEROC_CHECK(zeroc_data_batch(tr->val, &lay, first + (uint64_t)k, u, tr->inputs, tr->targets));
      zeroc_gpt_batch_t b = {c->batch, c->seq, tr->inputs, tr->targets, 0, 0};
      if (tr->dev_in) {
        zeroc_stream_t *cs = zeroc_ctx_compute_stream(tr->ctx);
        ZEROC_CHECK(zeroc_memcpy_async(cs, tr->dev_in, tr->inputs, tr->ntok * 4));
        ZEROC_CHECK(zeroc_memcpy_async(cs, tr->dev_tg, tr->targets, tr->ntok * 4));
        b.inputs = tr->dev_in;
        b.targets = tr->dev_tg;
      }
      float l = 0;
      ZEROC_CHECK(zeroc_model_eval(tr->model, &b, &l));
      sum += l;
    }
  /* every micro-batch has the same number of tokens: the mean of the means */
  ZEROC_CHECK(zeroc__allreduce_host(zeroc__ctx_group(tr->ctx, ZEROC_GROUP_DP), &sum, 1, ZEROC_FP64,
                                    ZEROC_SUM));
  *loss = sum / ((double)tr->dp * c->grad_accum * c->val_batches);
  return ZEROC_OK;
}

zeroc_result_t zeroc_trainer_evaluate(zeroc_trainer_t *tr, double *loss) {
  if (!tr || !loss)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_evaluate: NULL argument");
  return zeroc__ctx_ret(tr->ctx, evaluate(tr, loss));
}
