/*
 * comm/heartbeat.h - noticing a lost node: a dead host, a stopped node leader,
 * a cut link. The node-local status board (comm/watchdog.h) sees only its own
 * node; across nodes, each node's leader (node-local rank 0) sends a UDP
 * datagram to its ring neighbours' leaders every ZEROC_HEARTBEAT_TIMEOUT/10 s
 * and watches theirs. Silence for ZEROC_HEARTBEAT_TIMEOUT seconds (default 3,
 * 0 = off, else 0.2..3600) posts the failure on its node's board, so every
 * rank there fails its collective naming the lost host and ranks, and tells
 * every other leader. If the process is still alive two seconds later (its
 * main thread blocked outside the polled collectives) the leader ends it with
 * MPI_Abort, so a node the launcher can no longer reach ends on its own.
 * Addresses: the up IPv4 interfaces named by ZEROC_HEARTBEAT_IF (comma list
 * of interface names or a.b.c.d/n subnets; default Open MPI's
 * btl_tcp_if_include, else every interface but loopback; at most 4), one
 * socket bound to each (never 0.0.0.0), exchanged once with MPI at start-up.
 * Datagrams are authenticated (HMAC-SHA256 under a per-job key from getrandom,
 * broadcast over MPI), numbered (no replay) and accepted only from their
 * sender's bound address; others are dropped and counted. Nothing runs on a
 * single node.
 */
#ifndef ZEROC_COMM_HEARTBEAT_H
#define ZEROC_COMM_HEARTBEAT_H

#include <stddef.h>
#include <stdint.h>

#include "comm/watchdog.h"
#include "zeroc/result.h"

typedef struct zeroc__heartbeat zeroc__heartbeat_t;

#define ZEROC__HB_KEY_BYTES 32
enum { ZEROC__HB_BEAT = 1, ZEROC__HB_BYE = 2, ZEROC__HB_LOST = 3 };

/* What a leader received: believed, and ignored by reason. */
typedef struct zeroc__heartbeat_stats {
  uint64_t accepted, malformed, bad_mac, wrong_source, replayed;
} zeroc__heartbeat_stats_t;

/* Range-checked ZEROC_HEARTBEAT_TIMEOUT, seconds (0: off). Returns
 * ZEROC_ERR_INVALID_ARG naming the knob and the accepted range. */
zeroc_result_t zeroc__heartbeat_knob(double *timeout_s);

/* Collective over place->world_comm, after the node communicator and the
 * watchdog exist: exchanges addresses and starts the leader's thread when the
 * job spans more than one node. `timeout`: zeroc__heartbeat_knob's value (0:
 * off); a lost node is posted on `wd`. *out stays NULL on ranks that run no
 * heartbeat (not a leader, one node, or off). Returns ZEROC_ERR_INVALID_ARG (no usable
 * address matches ZEROC_HEARTBEAT_IF), ZEROC_ERR_SYSTEM-like codes as
 * ZEROC_ERR_INTERNAL (socket, thread), ZEROC_ERR_NOMEM; the same on every rank. */
zeroc_result_t zeroc__heartbeat_start(const zeroc__place_t *place, double timeout,
                                      zeroc__watchdog_t *wd, zeroc__heartbeat_t **out);

/* Stops the thread (if any). `bye`: this rank completed the final collective,
 * so the neighbours are told to stop watching it instead of finding it silent. */
void zeroc__heartbeat_stop(zeroc__heartbeat_t *hb, int bye);

/* The counts so far (all 0 for NULL). */
void zeroc__heartbeat_stats(const zeroc__heartbeat_t *hb, zeroc__heartbeat_stats_t *out);

/* For tests (tests/test_heartbeat.c) acting as a sender on the network: this
 * leader's node index, bound IPv4 address and port (network order), the
 * job's key, and a datagram as leaders send it (`kind` ZEROC__HB_*, sender
 * node `from`, sequence `seq`, `text` for a loss) sealed under `key` into buf
 * (returns its size, 0 when cap is too small). */
void zeroc__heartbeat_address(const zeroc__heartbeat_t *hb, int *node, uint32_t *addr,
                              uint16_t *port);
const uint8_t *zeroc__heartbeat_key(const zeroc__heartbeat_t *hb);
size_t zeroc__heartbeat_seal(const uint8_t key[ZEROC__HB_KEY_BYTES], int kind, int from,
                             uint64_t seq, const char *text, void *buf, size_t cap);

/* `in` with every byte outside printable ASCII (and the backslash) as \xNN,
 * cut to fit n: what is printed of a loss another leader reported. */
void zeroc__heartbeat_escape(const char *in, char *out, size_t n);

#endif
