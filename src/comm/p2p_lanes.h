/*
 * comm/p2p_lanes.h - which directed lane a pipeline stream's send or receive
 * uses (the nccl backend gives each lane a communicator; comm_nccl_cuda.c).
 *
 * A directed stream moves messages one way round the group's ring: +1 (sent
 * to rank+1, received from rank-1) or -1. Edge i joins ranks i and i+1 mod n;
 * adjacent edges get different colours (i % 2, and 2 for the last edge of an
 * odd ring), so a rank's send and receive in one direction cross edges of
 * different colours. Lane = direction x colour: 0..2 for +1, 3..5 for -1.
 * Pure arithmetic, so that the cpu tests check it (tests/test_comm.c).
 */
#ifndef ZEROC_COMM_P2P_LANES_H
#define ZEROC_COMM_P2P_LANES_H

/* the edge colours a ring of n ranks needs: 2, or 3 when n is odd */
static inline int zeroc__p2p_colours(int n) { return n % 2 ? 3 : 2; }

static inline int zeroc__p2p_edge_colour(int edge, int n) {
  return n % 2 && edge == n - 1 ? 2 : edge % 2;
}

/* The lane of a send (send = 1) or receive on a stream of direction dir (+1,
 * -1) at rank me of n (n >= 2); -1 when the stream may not talk to `peer`
 * (only rank+1 for a send of +1 or a receive of -1, only rank-1 otherwise).
 * *want: the peer it may talk to. */
static inline int zeroc__p2p_lane(int n, int me, int dir, int send, int peer, int *want) {
  int ahead = send == (dir > 0); /* to or from rank+1: the edge crossed is (me, me+1) */
  *want = ahead ? (me + 1) % n : (me + n - 1) % n;
  if (peer != *want) return -1;
  int edge = ahead ? me : (me + n - 1) % n;
  return 3 * (dir > 0 ? 0 : 1) + zeroc__p2p_edge_colour(edge, n);
}

#endif
