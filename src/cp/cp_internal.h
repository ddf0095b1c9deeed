/*
 * cp/cp_internal.h - what cp.c, ring.c and ulysses.c share.
 */
#ifndef ZEROC_CP_CP_INTERNAL_H
#define ZEROC_CP_CP_INTERNAL_H

#include "cp/cp.h"

zeroc_result_t zeroc__cp_check_shape(const zeroc__cp_t *cp, int B, int T, int Cl, int NHl);

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
