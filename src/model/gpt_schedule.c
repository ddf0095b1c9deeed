/*
 * model/gpt_schedule.c - `zeroc train --print-schedule`: the stage cut of
 * the GPT over pp x vpp stages (units, share of the cost) and every rank's
 * actions, from the same partition and pipeline config the trainer builds,
 * so the schedule printed is the one that runs. No MPI, nothing trained.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_price.h"
#include "model/gpt_run.h"
#include "model/lm_rules.h"

zeroc_result_t zeroc__gpt_print_schedule(FILE *f, const zeroc_train_info_t *info, int pp, int tp,
                                         zeroc_dtype_t act_dtype) {
  const zeroc_train_config_t *c = &info->config;
  const zeroc_gpt_config_t *g = &info->model;
  int S = pp * c->vpp, nu = zeroc_gpt_num_units(g);
  int *bounds = malloc(sizeof(int) * (size_t)(S + 1));
  double *cost = malloc(sizeof(double) * (size_t)nu);
  zeroc_result_t r = ZEROC_OK;
  if (!bounds || !cost)
    r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "pipeline schedule of %d stages and %d units", S, nu);
  if (!r) r = zeroc__gpt_partition(g, S, bounds);
  if (r) goto exit;
  zeroc_gpt_unit_costs(g, cost);
  zeroc_pipeline_config_t pc = zeroc__gpt_pipe_config(c, tp, 1, act_dtype);
  fprintf(f, "pipeline: %s, %d ranks x %d chunks = %d stages, %d micro-batches of %d sequences\n",
          c->pp_schedule == ZEROC_PIPELINE_INTERLEAVED ? "interleaved" : "1f1b", pp, c->vpp, S,
          c->grad_accum, g->batch);
  for (int st = 0; st < S; st++) {
    char a[32], b[32];
    double sum = 0;
    int first = bounds[st], last = bounds[st + 1] - 1;
    for (int u = first; u <= last; u++) sum += cost[u];
    zeroc__gpt_unit_name(g, first, a, sizeof a);
    zeroc__gpt_unit_name(g, last, b, sizeof b);
    fprintf(f,
            "  stage %d (rank %d, chunk %d): units %d..%d (%s%s%s), cost %.1f%% (FLOPs and "
            "parameters)%s\n",
            st, st % pp, st / pp, first, last, a, last > first ? " .. " : "", last > first ? b : "",
            100 * sum, st == S - 1 && S > 1 ? " + a tied copy of wte" : "");
  }
  r = zeroc_pipeline_print_schedule(f, &pc, pp, 1);
exit:
  free(bounds);
  free(cost);
  return r;
}
