/*
 * cp/cp_internal.h - the two algorithms behind cp.c's entry points: ring (ring.c)
 * and Ulysses (ulysses.c), on the cp object of cp/cp_types.h.
 */
#ifndef ZEROC_CP_CP_INTERNAL_H
#define ZEROC_CP_CP_INTERNAL_H

#include "cp/cp_types.h"

zeroc_result_t zeroc__cp_ring_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out, float *lse,
                                      const void *qkv, int B, int T, int Cl, int NHl,
                                      const zeroc_dropout_t *drop);
zeroc_result_t zeroc__cp_ring_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                       const void *dout, const void *qkv, const void *out,
                                       const float *lse, int B, int T, int Cl, int NHl,
                                       const zeroc_dropout_t *drop);
zeroc_result_t zeroc__cp_ulysses_forward(zeroc__cp_t *cp, zeroc_stream_t *s, void *out, float *lse,
                                         const void *qkv, int B, int T, int Cl, int NHl,
                                         const zeroc_dropout_t *drop);
zeroc_result_t zeroc__cp_ulysses_backward(zeroc__cp_t *cp, zeroc_stream_t *s, void *dqkv,
                                          const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int Cl, int NHl,
                                          const zeroc_dropout_t *drop);

#endif
