/*
 * pp/sizes.h - the bytes of the pipeline's stage-boundary buffers
 * (pipeline.c), as pure functions: the pipeline sizes its allocations with
 * them and the planner (src/plan) predicts with them.
 */
#ifndef ZEROC_PP_SIZES_H
#define ZEROC_PP_SIZES_H

/* One boundary tensor, an activation or its gradient: `numel` elements of
 * `elem` bytes. A double, exact below 2^53, so the planner can pass a split
 * that need not be whole. */
double zeroc__pp_boundary_bytes(double numel, int elem);

/* The gradient buffers of a pipeline rank with `slots` activation slots per
 * chunk: per slot, each of its `chunks_in` chunks that receive their input
 * sends the input's gradient back from a buffer, and each of its `chunks_out`
 * chunks that send their output receives the output's gradient into one.
 * `tensor`: zeroc__pp_boundary_bytes. */
double zeroc__pp_grad_buffer_bytes(int slots, int chunks_in, int chunks_out, double tensor);

#endif
