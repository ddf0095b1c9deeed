/*
 * model/gpt_price.h - the GPT's pricing functions of the model interface
 * (zeroc/arch.h, gpt_price.c), for its table in gpt_run.c.
 */
#ifndef ZEROC_MODEL_GPT_PRICE_H
#define ZEROC_MODEL_GPT_PRICE_H

#include <stddef.h>

#include "zeroc/arch.h"
#include "zeroc/train.h"

zeroc_result_t zeroc__gpt_price_check(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                      int names);
void zeroc__gpt_price_unit(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L, int u,
                           zeroc_arch_unit_price_t *out);
zeroc_result_t zeroc__gpt_price_stage(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                      const zeroc_arch_stage_t *st, zeroc_arch_stage_price_t *out);
void zeroc__gpt_figures(const zeroc_train_info_t *info, double sequences, int recompute,
                        zeroc_arch_figures_t *out);

/* Unit u's name in messages and schedules: "embedding", "block 3", "head". */
void zeroc__gpt_unit_name(const zeroc_gpt_config_t *g, int u, char *buf, size_t n);

#endif
