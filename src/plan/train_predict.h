/*
 * plan/train_predict.h - the planner's prediction for a resolved training run.
 */
#ifndef ZEROC_PLAN_TRAIN_PREDICT_H
#define ZEROC_PLAN_TRAIN_PREDICT_H

#include "zeroc/train.h"

/* Fills info's params, tokens_per_step, flops_per_step, peak_flops and the
 * per-rank memory prediction (predicted_*, or plan_error when the planner
 * refuses the layout) for the run of info->config on ctx's mesh. Local. */
void zeroc__plan_train(zeroc_ctx_t *ctx, zeroc_train_info_t *info);

#endif
