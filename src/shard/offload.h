/*
 * shard/offload.h - the sharded model's offloaded state (shard/offload.c): the
 * optimizer state in pinned host memory or on NVMe, and the ZeRO-3 parameter
 * shards staged from there for their gathers.
 */
#ifndef ZEROC_SHARD_OFFLOAD_H
#define ZEROC_SHARD_OFFLOAD_H

#include <stddef.h>

#include "shard/model.h"

zeroc_result_t zeroc__moff_init(zeroc_model_t *m, size_t maxS);
void zeroc__moff_fini(zeroc_model_t *m);
/* The optimizer state of unit i, resident until zeroc__moff_state_done(i). */
zeroc_result_t zeroc__moff_state(zeroc_model_t *m, int i, zeroc__state_view_t *v);
zeroc_result_t zeroc__moff_state_done(zeroc_model_t *m, int i);
zeroc_result_t zeroc__moff_state_prefetch(zeroc_model_t *m, int i);
zeroc_result_t zeroc__moff_flush(zeroc_model_t *m);
/* Where unit i's all-gather reads its parameter shard from (staged as
 * needed); `next` is read ahead (-1: none). */
zeroc_result_t zeroc__moff_param_src(zeroc_model_t *m, int i, int next, const void **src);
/* Stores unit i's new compute shard cast from the host fp32 `master`
 * (offloaded parameters). */
zeroc_result_t zeroc__moff_param_store(zeroc_model_t *m, int i, const float *master);

#endif
