/*
 * apps/train_dlrm.h - `zeroc train` for the DLRM models (apps/train_dlrm.c).
 */
#ifndef ZEROC_APPS_TRAIN_DLRM_H
#define ZEROC_APPS_TRAIN_DLRM_H

/* 1 when argv names a DLRM model with --model. */
int ztrain_is_dlrm(int argc, char **argv);
/* The DLRM's --help. */
void ztrain_dlrm_usage(void);

#endif
