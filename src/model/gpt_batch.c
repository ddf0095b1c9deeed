/*
 * model/gpt_batch.c - the GPT run's token data: the stream of the run's shape
 * and order, and one micro-batch of it into the token buffers (this rank's
 * zigzag tokens with context parallelism, the device's copy on cuda). The
 * step (gpt_run.c) and the evaluation (gpt_eval.c) both read through it.
 */
#include "core/error.h"
#include "model/gpt_batch.h"
#include "runtime/runtime.h"
#include "zeroc/device.h"

zeroc_data_config_t zeroc__gpt_data_config(const zeroc__gpt_run_t *run, const char *source,
                                           int shuffle) {
  const zeroc_train_config_t *c = &run->info->config;
  zeroc_data_config_t dcfg = ZEROC_DATA_CONFIG_INIT;
  dcfg.source = source;
  dcfg.vocab = c->vocab;
  dcfg.seq = c->seq;
  dcfg.global_batch = run->info->global_batch;
  dcfg.seed = (uint64_t)c->seed;
  dcfg.shuffle = shuffle;
  return dcfg;
}

zeroc_result_t zeroc__gpt_load(zeroc__gpt_run_t *run, zeroc_data_t *d, uint64_t step, int u,
                               zeroc_gpt_batch_t *b) {
  const zeroc_train_config_t *c = &run->info->config;
  zeroc_data_layout_t lay = {run->dp, run->dp_rank, c->batch, c->grad_accum};
  size_t ntok = run->ntok;
  /* a pipeline takes the whole step's micro-batches at once, one slot each */
  size_t at = run->pipe ? (size_t)u * ntok : 0;
  if (run->cp > 1) { /* the cp ranks of a dp index read the same batch and keep their tokens */
    ZEROC_CHECK(zeroc_data_batch(d, &lay, step, u, run->full_in, run->full_tg));
    zeroc_gpt_cp_tokens(run->full_in, run->inputs + at, c->batch, c->seq, run->cp, run->cp_rank);
    zeroc_gpt_cp_tokens(run->full_tg, run->targets + at, c->batch, c->seq, run->cp, run->cp_rank);
  } else {
    ZEROC_CHECK(zeroc_data_batch(d, &lay, step, u, run->inputs + at, run->targets + at));
  }
  /* the step and the slots name the sequences for dropout's masks */
  int slot;
  ZEROC_CHECK(zeroc_data_first_slot(d, &lay, u, &slot));
  *b = (zeroc_gpt_batch_t){c->batch, c->seq / run->cp, run->inputs + at, run->targets + at,
                           step,     (uint64_t)slot};
  if (run->dev_in) {
    zeroc_stream_t *cs = zeroc_ctx_compute_stream(run->ctx);
    ZEROC_CHECK(zeroc_memcpy_async(cs, run->dev_in + at, run->inputs + at, ntok * 4));
    ZEROC_CHECK(zeroc_memcpy_async(cs, run->dev_tg + at, run->targets + at, ntok * 4));
    b->inputs = run->dev_in + at;
    b->targets = run->dev_tg + at;
  }
  return ZEROC_OK;
}
