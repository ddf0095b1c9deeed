/*
 * tests/test_heartbeat.c - the node heartbeat believes no datagram on its
 * word. Two ranks on this host act as two nodes (each its own node
 * communicator and host name) whose leaders bind 127.0.0.1; each rank then
 * plays an attacker against its own leader: a forged loss (random MAC), a
 * loss sealed with another key, a replay of its peer's first beat and a loss
 * with a fresh number and the job's key sent from another address
 * (127.0.0.2). Every one is ignored and counted under its reason; no loss is
 * taken (one would end the process after two seconds); the genuine beats go
 * on being accepted. The escaping of a reported loss's text is checked too.
 */
#include <arpa/inet.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/heartbeat.h"
#include "testutil.h"

/* Sends buf from `from_addr` (dotted) to the leader at addr:port (network order). */
static int send_from(const char *from_addr, uint32_t addr, uint16_t port, const void *buf,
                     size_t n) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in me = {.sin_family = AF_INET};
  inet_pton(AF_INET, from_addr, &me.sin_addr);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = port};
  to.sin_addr.s_addr = addr;
  int ok = bind(fd, (struct sockaddr *)&me, sizeof me) == 0 &&
           sendto(fd, buf, n, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)n;
  close(fd);
  return ok ? 0 : -1;
}

static void test_datagrams_not_believed(void) {
  int me = zt_rank();
  setenv("ZEROC_HEARTBEAT_IF", "127.0.0.1/32", 1);
  int local_of_world[2] = {me == 0 ? 0 : -1, me == 1 ? 0 : -1};
  /* each rank a node of its own */
  zeroc__place_t pl = {MPI_COMM_WORLD, MPI_COMM_SELF,         me, 2, 0, 1,
                       local_of_world, me ? "hostB" : "hostA"};
  zeroc__heartbeat_t *hb = NULL;
  ZT_OK(zeroc__heartbeat_start(&pl, 1.0, NULL, &hb));
  CU_ASSERT_PTR_NOT_NULL_FATAL(hb);
  int node, peer;
  uint32_t addr;
  uint16_t port;
  zeroc__heartbeat_address(hb, &node, &addr, &port);
  peer = 1 - node;
  CU_ASSERT_EQUAL(addr, htonl(INADDR_LOOPBACK)); /* bound to the chosen address, not 0.0.0.0 */
  usleep(400000);                                /* beats flow both ways */
  zeroc__heartbeat_stats_t st0;
  zeroc__heartbeat_stats(hb, &st0);
  ZT_ASSERT_MSG(st0.accepted >= 2, "only %llu genuine beats accepted",
                (unsigned long long)st0.accepted);

  uint8_t buf[1024], other[ZEROC__HB_KEY_BYTES];
  const uint8_t *key = zeroc__heartbeat_key(hb);
  for (int i = 0; i < ZEROC__HB_KEY_BYTES; i++) other[i] = (uint8_t)(key[i] ^ (1 + i));
  const uint64_t fresh = 1ull << 40;
  /* forged: a loss with a MAC of random bytes */
  size_t n =
      zeroc__heartbeat_seal(key, ZEROC__HB_LOST, peer, fresh, "forged loss", buf, sizeof buf);
  CU_ASSERT_FATAL(n > 0);
  for (int i = 1; i <= ZEROC__HB_KEY_BYTES; i++) buf[n - (size_t)i] = (uint8_t)rand();
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, n), 0);
  /* another key (another job's, or a guess) */
  n = zeroc__heartbeat_seal(other, ZEROC__HB_LOST, peer, fresh, "wrong key", buf, sizeof buf);
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, n), 0);
  /* a replay: the peer's first beat, byte for byte, and an old-numbered loss */
  n = zeroc__heartbeat_seal(key, ZEROC__HB_BEAT, peer, 1, NULL, buf, sizeof buf);
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, n), 0);
  n = zeroc__heartbeat_seal(key, ZEROC__HB_LOST, peer, 1, "replayed loss", buf, sizeof buf);
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, n), 0);
  /* the job's key and a fresh number, from an address the peer does not use */
  n = zeroc__heartbeat_seal(key, ZEROC__HB_LOST, peer, fresh, "wrong source", buf, sizeof buf);
  int sent = send_from("127.0.0.2", addr, port, buf, n);
  CU_ASSERT_EQUAL(sent, 0);
  /* malformed: short; and a loss claiming the receiver itself as sender (what
   * its own datagrams look like back through a shared address: dropped silently) */
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, 10), 0);
  n = zeroc__heartbeat_seal(key, ZEROC__HB_LOST, node, fresh, "from myself", buf, sizeof buf);
  CU_ASSERT_EQUAL(send_from("127.0.0.1", addr, port, buf, n), 0);

  /* past the timeout and the 2 s grace a believed loss would have: still here */
  sleep(3);
  zeroc__heartbeat_stats_t st;
  zeroc__heartbeat_stats(hb, &st);
  ZT_ASSERT_MSG(st.bad_mac == 2 && st.replayed == 2 && st.wrong_source == (sent == 0) &&
                    st.malformed == 1,
                "ignored: %llu bad MAC (want 2), %llu replays (2), %llu wrong source (1), %llu "
                "malformed (1)",
                (unsigned long long)st.bad_mac, (unsigned long long)st.replayed,
                (unsigned long long)st.wrong_source, (unsigned long long)st.malformed);
  /* the genuine beats were believed all along: the peer never looked lost */
  ZT_ASSERT_MSG(st.accepted > st0.accepted + 5, "beats accepted: %llu then %llu",
                (unsigned long long)st0.accepted, (unsigned long long)st.accepted);
  MPI_Barrier(MPI_COMM_WORLD);
  zeroc__heartbeat_stop(hb, 1);
  unsetenv("ZEROC_HEARTBEAT_IF");
}

static void test_escape(void) {
  char out[64];
  zeroc__heartbeat_escape("host n1 lost\x1b[2J\n\\ok", out, sizeof out);
  ZT_ASSERT_MSG(!strcmp(out, "host n1 lost\\x1b[2J\\x0a\\x5cok"), "escaped: '%s'", out);
  zeroc__heartbeat_escape("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", out, 20);
  ZT_ASSERT_MSG(strlen(out) < 20 && !strncmp(out, "\\x01\\x02\\x03", 12), "cut: '%s'", out);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"forged, replayed, wrong-key and wrong-source datagrams are ignored and counted",
       test_datagrams_not_believed},
      {"a reported loss's text is escaped", test_escape},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "heartbeat", tests, 2, 2);
}
