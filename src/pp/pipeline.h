/*
 * pp/pipeline.h - what other parts of the library ask of a model that is one
 * stage of a pipeline (pp/pipeline.c): where its units sit in the whole model.
 */
#ifndef ZEROC_PP_PIPELINE_H
#define ZEROC_PP_PIPELINE_H

#include "zeroc/shard.h"

/* The pipeline stage (0 .. pp x chunks - 1, in the order of the whole model's
 * units) that holds local unit `unit` of `m`: chunk c of pipeline rank r is
 * stage c pp + r once zeroc_pipeline_create registered the pipeline, and the
 * rank's pp coordinate (one chunk per rank) before; -1 for a unit it does not
 * have. Local. */
int zeroc__pipeline_unit_stage(const zeroc_model_t *m, int unit);

#endif
