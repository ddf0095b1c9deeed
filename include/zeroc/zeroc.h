/*
 * zeroc/zeroc.h - the umbrella header: everything a program needs.
 */
#ifndef ZEROC_ZEROC_H
#define ZEROC_ZEROC_H

#include "zeroc/arch.h"
#include "zeroc/ckpt.h"
#include "zeroc/ctx.h"
#include "zeroc/data.h"
#include "zeroc/device.h"
#include "zeroc/embed.h"
#include "zeroc/gpt.h"
#include "zeroc/layer.h"
#include "zeroc/mem.h"
#include "zeroc/mesh.h"
#include "zeroc/pipeline.h"
#include "zeroc/plan.h"
#include "zeroc/plan_dlrm.h"
#include "zeroc/prepare.h"
#include "zeroc/result.h"
#include "zeroc/sample.h"
#include "zeroc/shard.h"
#include "zeroc/tokenizer.h"
#include "zeroc/train.h"
#include "zeroc/types.h"
#include "zeroc/version.h"

#endif
