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
 * Addresses: the node's IPv4 interfaces named by ZEROC_HEARTBEAT_IF (comma
 * list of interface names or a.b.c.d/n subnets; default Open MPI's
 * btl_tcp_if_include, else every interface but loopback), exchanged once with
 * MPI at start-up. Nothing runs on a single node.
 */
#ifndef ZEROC_COMM_HEARTBEAT_H
#define ZEROC_COMM_HEARTBEAT_H

#include "comm/watchdog.h"
#include "zeroc/result.h"

typedef struct zeroc__heartbeat zeroc__heartbeat_t;

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

#endif
