/*
 * model/dlrm_price.h - the DLRM's unit list and pricing functions of the model
 * interface (zeroc/arch.h, dlrm_price.c), for its table in dlrm_arch.c.
 */
#ifndef ZEROC_MODEL_DLRM_PRICE_H
#define ZEROC_MODEL_DLRM_PRICE_H

#include "zeroc/arch.h"
#include "zeroc/train.h"

int zeroc__dlrm_num_units(const zeroc_train_info_t *info);
void zeroc__dlrm_unit_costs(const zeroc_train_info_t *info, double *cost);
zeroc_result_t zeroc__dlrm_price_check(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                       int names);
void zeroc__dlrm_price_unit(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L, int u,
                            zeroc_arch_unit_price_t *out);
zeroc_result_t zeroc__dlrm_price_stage(const zeroc_train_info_t *info, const zeroc_arch_layout_t *L,
                                       const zeroc_arch_stage_t *st, zeroc_arch_stage_price_t *out);
void zeroc__dlrm_figures(const zeroc_train_info_t *info, double sequences, int recompute,
                         zeroc_arch_figures_t *out);

#endif
