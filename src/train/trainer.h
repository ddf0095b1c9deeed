/*
 * train/trainer.h - the trainer's insides, shared by the files of src/train (never
 * installed): what create builds and what the step loop reads. The model is
 * reached only through its architecture (zeroc/arch.h): `arch` and its run `net`.
 */
#ifndef ZEROC_TRAIN_TRAINER_H
#define ZEROC_TRAIN_TRAINER_H

#include "train/config.h"
#include "train/spike.h"
#include "zeroc/arch.h"
#include "zeroc/train.h"

struct zeroc_trainer {
  zeroc_ctx_t *ctx;
  zeroc_train_info_t info; /* info.config: the resolved config */
  const zeroc_arch_t *arch;
  void *net;            /* the architecture's run */
  zeroc_model_t *model; /* the run's shards (owned by the run) */
  int next;             /* 0-based index of the next step */
  int save_pending;     /* the cadence's checkpoint after step `next` is due */
  int skipped_total, spikes_total;
  zeroc__spike_t spike_loss, spike_norm;
};

/* Writes the checkpoint of step `step` into `dir`: the model's state outside
 * the shards first, then the shards with the manifest (whose app object the
 * model writes). */
zeroc_result_t zeroc__train_save(zeroc_trainer_t *tr, const char *dir, uint64_t step);

#endif
