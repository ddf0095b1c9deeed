/*
 * pp/sizes.c - bytes of the pipeline's stage-boundary buffers (sizes.h).
 */
#include "pp/sizes.h"

double zeroc__pp_boundary_bytes(double numel, int elem) { return numel * elem; }

double zeroc__pp_grad_buffer_bytes(int slots, int chunks_in, int chunks_out, double tensor) {
  return (double)slots * (chunks_in + chunks_out) * tensor;
}
