/*
 * cp/ring.c - ring attention (see cp/cp.h). Not yet implemented on this commit.
 */
#include "core/error.h"
#include "cp/cp_internal.h"

zeroc_result_t zeroc__cp_ring_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out, float *lse,
                                      const void *qkv, int B, int T, int Cl, int NHl,
                                      const zeroc_dropout_t *drop) {
  (void)cp, (void)s, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)Cl, (void)NHl,
      (void)drop;
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "cp ring attention: not yet implemented");
}

zeroc_result_t zeroc__cp_ring_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                       const void *dout, const void *qkv, const void *out,
                                       const float *lse, int B, int T, int Cl, int NHl,
                                       const zeroc_dropout_t *drop) {
  (void)cp, (void)s, (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse, (void)B, (void)T,
      (void)Cl, (void)NHl, (void)drop;
  return ZEROC_FAIL(ZEROC_ERR_UNSUPPORTED, "cp ring attention: not yet implemented");
}
