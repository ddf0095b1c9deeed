/*
 * model/gpt_eval.c - the GPT's evaluation: the mean loss over the same
 * held-out global batches every time, forward only (zeroc_model_eval, or
 * zeroc_pipeline_eval through the pipeline), one number on every rank. The
 * held-out data is opened and read through once at create, so its problems
 * stop the run before it trains.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "model/gpt_batch.h"
#include "model/gpt_eval.h"
#include "runtime/runtime.h"
#include "text/tokenizer_agree.h"

/* The held-out steps: synthetic data's from 2^32 on, which no training run
 * reaches; a file set's from its start. */
static uint64_t val_first(const zeroc__gpt_run_t *run) {
  return run->info->val.kind == ZEROC_DATA_SYNTHETIC ? (uint64_t)1 << 32 : 0;
}

/* The data layer's message, said to be about the held-out data. */
static zeroc_result_t val_failed(zeroc_result_t r) {
  char msg[ZEROC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "val_data: %s", zeroc__tls_error());
  zeroc__tls_error_set(msg);
  return r;
}

/* Held-out shards made with another tokenizer than the training data's would
 * give a loss of other ids' meaning, accepted in silence: each set's recorded
 * tokenizer (zeroc data writes one beside the shards), when both have one,
 * must be the same. When only one set records one, nothing can be compared
 * (the other's may be any tokenizer whose ids fit --vocab): a warning, on
 * rank 0, says so instead of passing in silence. */
static zeroc_result_t same_tokenizer(const zeroc__gpt_run_t *run) {
  const zeroc_train_info_t *in = run->info;
  const char *v = in->val.tokenizer, *d = in->data.tokenizer;
  int shards = in->val.kind != ZEROC_DATA_SYNTHETIC && in->data.kind != ZEROC_DATA_SYNTHETIC;
  if (shards && !v[0] != !d[0] && zeroc_ctx_mesh(run->ctx)->rank == 0)
    ZWARN(IO,
          "%s '%s' records its tokenizer ('%s') and %s '%s' records none (no tokenizer.json "
          "beside its first shard): the two cannot be checked to agree; the validation loss "
          "means something only if both were made with that tokenizer",
          v[0] ? "val_data" : "the training data", v[0] ? in->config.val_data : in->config.data,
          v[0] ? v : d, v[0] ? "the training data" : "val_data",
          v[0] ? in->config.data : in->config.val_data);
  if (!v[0] || !d[0] || !strcmp(v, d)) return ZEROC_OK;
  char why[256];
  int agree = 0;
  zeroc_result_t r = zeroc__tokenizer_files_agree(v, d, &agree, why, sizeof why);
  if (r) return val_failed(r);
  if (agree) return ZEROC_OK;
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "val_data '%s' was tokenized with '%s' and the training data '%s' with '%s', "
                    "another tokenizer (%s): make both with one tokenizer (zeroc data "
                    "--val-fraction, or the same --tokenizer)",
                    in->config.val_data, v, in->config.data, d, why);
}

zeroc_result_t zeroc__gpt_val_open(zeroc__gpt_run_t *run) {
  zeroc_train_info_t *in = run->info;
  const zeroc_train_config_t *c = &in->config;
  if (!c->val_data) return ZEROC_OK;
  /* the training data's shape and order (unshuffled): its checks and messages */
  zeroc_data_config_t dcfg = zeroc__gpt_data_config(run, c->val_data, 0);
  zeroc_result_t r = zeroc_data_create(&dcfg, &run->val);
  if (r) return val_failed(r);
  zeroc_data_info(run->val, &in->val);
  ZEROC_CHECK(same_tokenizer(run));
  /* whole global batches, at least one; a file set at most once through */
  int64_t per = (int64_t)in->global_batch * c->seq;
  int64_t nb = (c->val_tokens + per - 1) / per;
  if (nb < 1) nb = 1;
  if (in->val.kind != ZEROC_DATA_SYNTHETIC && (uint64_t)nb > in->val.steps_per_epoch)
    nb = (int64_t)in->val.steps_per_epoch;
  if (nb > INT_MAX / c->grad_accum)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "val_tokens %lld: %lld global batches of %lld tokens per evaluation; "
                      "accepted at most %d",
                      (long long)c->val_tokens, (long long)nb, (long long)per,
                      INT_MAX / c->grad_accum);
  in->val_batches = (int)nb;
  if (in->val.kind == ZEROC_DATA_SYNTHETIC) return ZEROC_OK;
  /* every token an evaluation reads, read once now: the data layer checks each
   * against the vocabulary (this rank's slices; the caller agrees) */
  size_t ntok = (size_t)c->batch * (size_t)c->seq;
  int32_t *x = malloc(ntok * 2 * sizeof *x);
  if (!x) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "val_data: token buffers (2 x %zu tokens)", ntok);
  zeroc_data_layout_t lay = {run->dp, run->dp_rank, c->batch, c->grad_accum};
  for (int k = 0; !r && k < in->val_batches; k++)
    for (int u = 0; !r && u < c->grad_accum; u++)
      r = zeroc_data_batch(run->val, &lay, val_first(run) + (uint64_t)k, u, x, x + ntok);
  free(x);
  return r ? val_failed(r) : ZEROC_OK;
}

/* The sum of the micro-batch losses of held-out global batch k on this rank
 * (each micro-batch's loss is its mean over B x T positions). */
static zeroc_result_t eval_batch(zeroc__gpt_run_t *run, int k, double *sum) {
  const zeroc_train_config_t *c = &run->info->config;
  uint64_t step = val_first(run) + (uint64_t)k;
  for (int u = 0; u < c->grad_accum; u++) {
    zeroc_gpt_batch_t b;
    ZEROC_CHECK(zeroc__gpt_load(run, run->val, step, u, &b));
    if (run->pipe) {
      run->mbs[u] = b;
      run->mbp[u] = &run->mbs[u];
      continue;
    }
    float l = 0;
    ZEROC_CHECK(zeroc_model_eval(run->model, &b, &l));
    *sum += l;
  }
  if (run->pipe) {
    double mean = 0;
    ZEROC_CHECK(zeroc_pipeline_eval(run->pipe, run->mbp, &mean));
    *sum += mean * c->grad_accum;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_evaluate(void *self, double *loss, double *auc, double *logloss) {
  zeroc__gpt_run_t *run = self;
  const zeroc_train_config_t *c = &run->info->config;
  if (auc) *auc = NAN;
  if (logloss) *logloss = NAN;
  if (!run->val)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_trainer_evaluate: the config has no val_data");
  double sum = 0;
  for (int k = 0; k < run->info->val_batches; k++) ZEROC_CHECK(eval_batch(run, k, &sum));
  /* the loss is the last stage's, the same on its tp ranks: one share per
   * data-parallel rank, summed over the world, so every rank has one number */
  const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(run->ctx);
  if (mesh->tp_rank != 0 || mesh->pp_rank != mesh->pp - 1) sum = 0;
  ZEROC_CHECK(zeroc__allreduce_host(zeroc__ctx_group(run->ctx, ZEROC_GROUP_WORLD), &sum, 1,
                                    ZEROC_FP64, ZEROC_SUM));
  /* every micro-batch has the same number of positions: the mean of the means */
  *loss = sum / ((double)run->dp * c->grad_accum * run->info->val_batches);
  return ZEROC_OK;
}
