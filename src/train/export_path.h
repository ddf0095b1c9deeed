/*
 * train/export_path.h - the kinds of --export path (export_path.c), for
 * zeroc_trainer_export (export.c) and the trainer's start-up checks.
 */
#ifndef ZEROC_TRAIN_EXPORT_PATH_H
#define ZEROC_TRAIN_EXPORT_PATH_H

#include "zeroc/arch.h"

/* 1: `path` names a transformers directory (it does not end in ".safetensors"). */
int zeroc__export_is_dir(const char *path);

/* The start-up check of --export `path` for a model of `arch`: a file's
 * parent takes it; a directory exists and is writable, or its parent takes it,
 * and the model has a transformers class. ZEROC_ERR_INVALID_ARG naming it. */
zeroc_result_t zeroc__export_check(const zeroc_arch_t *arch, const char *path);

#endif
