/*
 * train/dlrm_run.h - the DLRM path's state (dlrm_train.c, dlrm_run.c).
 */
#ifndef ZEROC_TRAIN_DLRM_RUN_H
#define ZEROC_TRAIN_DLRM_RUN_H

#include "io/clicks.h"
#include "train/dlrm_tables.h"
#include "zeroc/dlrm.h"

struct zeroc__dlrm_run {
  zeroc_dlrm_t *dlrm;
  zeroc__clicks_t *data, *val;
  zeroc__tables_t *tables;
  zeroc__click_batch_t hb;                  /* host batch */
  float *dense, *labels, *pooled, *dpooled; /* device */
  uint64_t val_first;
  int nval;                                  /* held-out samples: val_batches x global batch */
  float *val_labels, *val_logits, *val_prob; /* (nval) host */
};

#endif
