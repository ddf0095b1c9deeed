/*
 * train/config.h - what config.c (zeroc_train_config_resolve) gives the other
 * files of src/train beyond the public API.
 */
#ifndef ZEROC_TRAIN_CONFIG_H
#define ZEROC_TRAIN_CONFIG_H

#include "zeroc/shard.h"
#include "zeroc/train.h"

/* The shard engine's settings of a resolved config, parameters in `dtype`. */
zeroc_shard_config_t zeroc__train_shard_config(const zeroc_train_config_t *c, zeroc_dtype_t dtype);

#endif
