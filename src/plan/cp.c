/*
 * plan/cp.c - context parallelism in the planner: the bytes ring attention
 * and Ulysses keep or move per transformer block (docs/cp.md gives the
 * reasoning), and the checks of a cp layout's fields.
 *
 * Notation, for one micro-batch on one rank: N the cp size, BTl = B T / N the
 * local tokens (two zigzag chunks of each sequence), Cl = C / tp the channels
 * of this tp rank, e bytes per activation element, and X = BTl Cl e the bytes
 * of one local (B, T/N, C/tp) tensor, such as K or V.
 */
#include "core/error.h"
#include "plan/plan_internal.h"

/* What the two modes keep, hold and send (src/cp computes the numbers; this
 * is why they are what they are), per block and micro-batch:
 *
 * Ring: N-1 hops forward, each sending the K and V in hand (2X) to the next
 * rank while attending to them: (N-1) 2X. Backward: K and V go round again
 * ((N-1) 2X) and the dK, dV accumulators travel with them and take one more
 * hop home (N 2X): (3N-2) 2X in all. Buffers: double buffers of K/V and of
 * dK/dV (8X), one block's partial output (c Cl e) and its log-sum-exp
 * (c NHl fp32), c = B T / 2N. Nothing beyond gpt.c's own q, k, v, output and
 * log-sum-exp is kept for backward.
 *
 * Ulysses: forward, all-to-all q, k, v (3X) from sequence-split to head-split,
 * attention on the whole sequence for NHl/N heads, the output (X) back; each
 * all-to-all keeps 1/N of its buffer local, so (N-1)/N of 4X leaves.
 * Backward: q, k, v and the output again and the output's gradient (5X) to
 * head-split, dq, dk, dv (3X) back: 8X (N-1)/N; 12X (N-1)/N in all. Nothing
 * head-split is kept between forward and backward. Buffers: send and receive
 * staging of qkv, head-split qkv, out, dout and dqkv, 14X.
 *
 * src/cp computes these numbers (zeroc__cp_buffer_bytes, zeroc__cp_comm_bytes)
 * for the run and the model's price alike (model/gpt_price.c). */

zeroc_result_t zeroc__plan_check_cp(const zeroc_plan_config_t *c) {
  if (c->cp < 1 || c->cp > 4096)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cp %d: accepted 1..4096", c->cp);
  if (c->cp_mode != ZEROC_CP_MODE_RING && c->cp_mode != ZEROC_CP_MODE_ULYSSES)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "cp_mode %d: accepted %d (ring) or %d (ulysses)",
                      (int)c->cp_mode, (int)ZEROC_CP_MODE_RING, (int)ZEROC_CP_MODE_ULYSSES);
  /* the split of a sequence (2 cp | seq, Ulysses cp | heads / tp) is the
   * model's rule: its price_check */
  return ZEROC_OK;
}
