/*
 * kernels/dispatch.h - the one rule of every kernel dispatch (kernels.c,
 * embedbag.c, dlrm_kernels.c, llama_kernels.c): on a cuda kernels object the
 * cuda twin zeroc_i_cuda_<name> runs and its result is returned; a build
 * without CUDA refuses one by name. On cpu the caller goes on to its cpu twin.
 */
#ifndef ZEROC_KERNELS_DISPATCH_H
#define ZEROC_KERNELS_DISPATCH_H

#include "core/error.h"

#ifdef ZEROC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#define CUDA_OR_CPU(name, ...)                                                                     \
  if (k->device == ZEROC_DEVICE_CUDA) return zeroc_i_cuda_##name(__VA_ARGS__)
#else
#define CUDA_OR_CPU(name, ...)                                                                     \
  if (k->device == ZEROC_DEVICE_CUDA)                                                              \
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "%s: built without CUDA", #name)
#endif

#endif
