/*
 * kernels/attention_cudnn_ws.c - the workspace cuDNN's attention runs with, as one formula:
 * the cuDNN path allocates (and the accountant counts) what it gives, the planner predicts
 * it, and on a GPU each built plan's own request is checked against it. Also the knobs
 * both sides read. Pure arithmetic and the environment: compiled with and without CUDA.
 */
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "kernels/attention_cudnn.h"

#define ALIGN256(x) (((x) + 255) & ~(size_t)255)

int zeroc__cudnn_takes(int C, int NH) {
  if (NH < 1 || C < 1 || C % NH) return 0;
  const int HS = C / NH;
  return HS % 8 == 0 && HS <= 128;
}

void zeroc__cudnn_ws(int B, int T, int C, int NH, int deterministic, zeroc__cudnn_ws_t *w) {
  const size_t b = (size_t)B, t = (size_t)T, nh = (size_t)NH;
  /* cuDNN's dP workspace is tiled on both sequence axes: T rounded up to its tile (64 in
   * NVIDIA's frontend's estimate; 128 here, to be above any tile it picks) */
  const size_t tt = (t + 127) / 128 * 128;
  w->fwd = ZEROC__CUDNN_PLAN_RESERVE;
  w->dsum = ALIGN256(b * nh * t * sizeof(float));
  w->dqacc = deterministic ? 0 : ALIGN256(b * t * (size_t)C * sizeof(float));
  w->bwd_plan = ZEROC__CUDNN_PLAN_RESERVE + (deterministic ? ALIGN256(b * nh * tt * tt * 2) : 0);
  w->bwd = w->dsum + w->dqacc + w->bwd_plan;
  w->total = w->bwd > w->fwd ? w->bwd : w->fwd;
}

size_t zeroc__cudnn_ws_own(size_t need, size_t scratch_bytes) {
  return need > scratch_bytes ? need : 0;
}

zeroc_result_t zeroc__cudnn_mode_parse(const char *v, zeroc__cudnn_mode_t *mode) {
  if (!v || !*v) v = ZEROC_CUDA_ATTENTION_DEFAULT;
  if (!strcmp(v, "auto"))
    *mode = ZEROC__CUDNN_AUTO;
  else if (!strcmp(v, "cudnn"))
    *mode = ZEROC__CUDNN_REQUIRED;
  else if (!strcmp(v, "zeroc"))
    *mode = ZEROC__CUDNN_OFF;
  else
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_CUDA_ATTENTION='%.64s': accepted auto (cuDNN flash attention where it "
                      "applies and loads, else zeroc's kernels; the default), cudnn (cuDNN "
                      "required where it applies) or zeroc (zeroc's own kernels only)",
                      v);
  return ZEROC_OK;
}

zeroc_result_t zeroc__cudnn_deterministic_knob(int *out) {
  int64_t v = 0;
  ZEROC_CHECK(zeroc__env_i64("ZEROC_CUDA_DETERMINISTIC", 0, &v));
  if (v != 0 && v != 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_CUDA_DETERMINISTIC=%lld: accepted 0 (cuDNN's fast attention "
                      "backward, the default) or 1 (bitwise-repeatable kernels)",
                      (long long)v);
  *out = (int)v;
  return ZEROC_OK;
}

#ifndef ZEROC_HAVE_CUDA
int zeroc__cudnn_attention_loaded(void) { return 0; } /* no cuda kernels at all */
#endif
