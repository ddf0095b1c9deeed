/*
 * comm/heartbeat.c - node leaders watching each other over UDP (what and why:
 * comm/heartbeat.h). UDP, not TCP: a datagram that does not come is the whole
 * signal, there is no connection whose own timeouts (minutes, on a cut link)
 * would stand between us and the answer.
 *
 * Anyone on the network can send a datagram, so none is believed on its
 * word: each carries its sender's node, a sequence number that only grows,
 * and an HMAC-SHA256 under a 256-bit key drawn from getrandom by the first
 * leader and broadcast over MPI at start-up (never on the wire). A datagram
 * whose MAC does not check, that repeats or goes back on its sender's
 * sequence, or that comes from an address other than the one its sender
 * bound, is dropped and counted. The socket binds to the chosen interface's
 * address, not to every interface.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/heartbeat.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

#define HB_MAGIC  0x7a686232u /* "zhb2": authenticated */
#define MAX_ADDRS 4           /* the addresses a leader binds, one socket each */
#define GRACE_S 2.0 /* between posting a loss and ending the process ourselves */

enum { MSG_BEAT = ZEROC__HB_BEAT, MSG_BYE = ZEROC__HB_BYE, MSG_LOST = ZEROC__HB_LOST };

/* A datagram; every byte before `mac` is authenticated (no implicit padding). */
typedef struct {
  uint32_t magic, kind;
  int32_t from;   /* sender's node index */
  uint32_t zero;  /* 0 */
  uint64_t seq;   /* the sender's count of datagrams, from 1: a replay repeats or goes back */
  char text[296]; /* MSG_LOST: the loss as the detecting leader saw it */
  uint8_t mac[ZEROC_SHA256_BYTES]; /* HMAC-SHA256 of the bytes before it under the job's key */
} hb_msg_t;
_Static_assert(sizeof(hb_msg_t) == 352, "hb_msg_t has padding the MAC would not cover");

typedef struct {
  uint32_t addr[MAX_ADDRS]; /* IPv4, network order */
  int32_t naddr;
  uint16_t port[MAX_ADDRS]; /* each address's socket's port, network order */
  char host[64];
  char ranks[48]; /* the node's world ranks, for messages: "2,3" */
  int32_t leader; /* its world rank */
} node_info_t;

struct zeroc__heartbeat {
  zeroc__watchdog_t *wd; /* the node's board, where a lost node is posted */
  int fd[MAX_ADDRS], nfd; /* one socket bound to each of this node's addresses */
  int me, nnodes, world_rank;
  double timeout, period;
  uint8_t key[ZEROC__HB_KEY_BYTES]; /* the job's MAC key */
  uint64_t seq;                     /* the last sequence number sent */
  uint64_t *last_seq;               /* per node: the last one accepted */
  _Atomic uint64_t ignored[4];      /* malformed, bad MAC, wrong source, replayed */
  _Atomic uint64_t accepted;
  node_info_t *nodes;
  int nb[2], nnb; /* ring neighbours watched and beaten to */
  pthread_t thread;
  _Atomic int stop;
};

static int filter_entry(char *tok, int *subnet, uint32_t *net, uint32_t *mask);

zeroc_result_t zeroc__heartbeat_knob(double *timeout_s) {
  double t;
  ZEROC_CHECK(zeroc__env_f64("ZEROC_HEARTBEAT_TIMEOUT", 3.0, &t));
  if (!(t == 0 || t >= 0.2)) /* the table's range is 0..3600; (0, 0.2) is too short to be safe */
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_HEARTBEAT_TIMEOUT %g: accepted 0 (off) or 0.2 to 3600 seconds", t);
  /* the interface filter, judged here so that a typo fails every rank at
   * start-up, also on one node where no heartbeat runs */
  const char *f = zeroc__env_str("ZEROC_HEARTBEAT_IF", NULL);
  char buf[256];
  if (f && strlen(f) >= sizeof buf)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "ZEROC_HEARTBEAT_IF is %zu characters: accepted at most %zu",
                      strlen(f), sizeof buf - 1);
  if (f) {
    snprintf(buf, sizeof buf, "%s", f);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    for (; tok; tok = strtok_r(NULL, ",", &save)) {
      int subnet;
      uint32_t net, mask;
      if (filter_entry(tok, &subnet, &net, &mask))
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "ZEROC_HEARTBEAT_IF entry '%.64s': accepted interface names or a.b.c.d/n "
                          "subnets (n 0..32), comma-separated",
                          tok);
    }
  }
  *timeout_s = t;
  return ZEROC_OK;
}

/* One entry of an interface filter: a name, or a.b.c.d/n (net and mask in host
 * order, *subnet set). -1 if it is neither: an empty entry, a bad address or n
 * outside 0..32. */
static int filter_entry(char *tok, int *subnet, uint32_t *net, uint32_t *mask) {
  char *slash = strchr(tok, '/');
  *subnet = slash != NULL;
  if (!*tok || tok == slash) return -1;
  if (!slash) return 0;
  *slash = 0;
  struct in_addr in;
  char *end;
  errno = 0;
  long bits = strtol(slash + 1, &end, 10);
  int bad = errno || end == slash + 1 || *end || bits < 0 || bits > 32 ||
            inet_pton(AF_INET, tok, &in) != 1;
  *slash = '/';
  if (bad) return -1;
  *mask = bits ? ~0u << (32 - bits) : 0;
  *net = ntohl(in.s_addr) & *mask;
  return 0;
}

/* Does interface `name` with address `a` (host order) match one entry of the
 * comma list `filter` (checked by zeroc__heartbeat_knob when it is ours)? */
static int if_matches(const char *filter, const char *name, uint32_t a) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", filter);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int subnet;
    uint32_t net, mask;
    if (filter_entry(tok, &subnet, &net, &mask)) continue;
    if (subnet ? (a & mask) == net : !strcmp(tok, name)) return 1;
  }
  return 0;
}

/* This node's IPv4 addresses that the heartbeat binds and advertises (at most
 * MAX_ADDRS): the up interfaces matching the filter (ZEROC_HEARTBEAT_IF, else
 * Open MPI's btl_tcp_if_include, the interfaces its peers talk over), else
 * every one but loopback. */
static zeroc_result_t local_addrs(node_info_t *ni) {
  const char *filter = zeroc__env_str("ZEROC_HEARTBEAT_IF", NULL);
  if (!filter) filter = getenv("OMPI_MCA_btl_tcp_if_include");
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "getifaddrs: %s", strerror(errno));
  ni->naddr = 0;
  for (struct ifaddrs *i = ifs; i && ni->naddr < MAX_ADDRS; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    uint32_t a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    if (filter ? !if_matches(filter, i->ifa_name, ntohl(a)) : (i->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    ni->addr[ni->naddr++] = a;
  }
  freeifaddrs(ifs);
  if (ni->naddr == 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "heartbeat: no IPv4 interface of %s matches %s (set ZEROC_HEARTBEAT_IF to "
                      "interface names or a.b.c.d/n subnets, or ZEROC_HEARTBEAT_TIMEOUT=0)",
                      ni->host, filter ? filter : "'every interface but loopback'");
  return ZEROC_OK;
}

size_t zeroc__heartbeat_seal(const uint8_t key[ZEROC__HB_KEY_BYTES], int kind, int from,
                             uint64_t seq, const char *text, void *buf, size_t cap) {
  hb_msg_t m;
  if (cap < sizeof m) return 0;
  memset(&m, 0, sizeof m);
  m.magic = HB_MAGIC;
  m.kind = (uint32_t)kind;
  m.from = from;
  m.seq = seq;
  if (text) snprintf(m.text, sizeof m.text, "%s", text);
  zeroc__hmac_sha256(key, ZEROC__HB_KEY_BYTES, &m, offsetof(hb_msg_t, mac), m.mac);
  memcpy(buf, &m, sizeof m);
  return sizeof m;
}

void zeroc__heartbeat_escape(const char *in, char *out, size_t n) {
  size_t o = 0;
  if (!n) return;
  for (const unsigned char *p = (const unsigned char *)in; *p && o + 5 < n; p++) {
    if (*p >= 0x20 && *p < 0x7f && *p != '\\')
      out[o++] = (char)*p;
    else
      o += (size_t)snprintf(out + o, n - o, "\\x%02x", *p);
  }
  out[o] = 0;
}

/* From each of our addresses to each of the node's: which pairs route is not
 * known here, and a copy that comes twice is dropped as a duplicate. */
static void send_to(struct zeroc__heartbeat *hb, int node, const hb_msg_t *m) {
  const node_info_t *ni = &hb->nodes[node];
  for (int j = 0; j < hb->nfd; j++)
    for (int k = 0; k < ni->naddr; k++) {
      struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = ni->port[k]};
      sa.sin_addr.s_addr = ni->addr[k];
      /* best effort: an unreachable address is what the receiver's timeout is for */
      (void)sendto(hb->fd[j], m, sizeof *m, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof sa);
    }
}

/* This leader's next datagram of `kind`, sealed. */
static void msg_init(struct zeroc__heartbeat *hb, hb_msg_t *m, int kind, const char *text) {
  zeroc__heartbeat_seal(hb->key, kind, hb->me, ++hb->seq, text, m, sizeof *m);
}

/* A loss seen here (or reported by another leader): post it on the board,
 * tell every other leader, and give the process GRACE_S to end through its
 * failing collectives before ending it here. */
static void lost(struct zeroc__heartbeat *hb, const char *text, int tell) {
  zeroc__watchdog_post(hb->wd, text);
  if (tell) {
    hb_msg_t m;
    msg_init(hb, &m, MSG_LOST, text);
    for (int n = 0; n < hb->nnodes; n++)
      if (n != hb->me) send_to(hb, n, &m);
  }
  double until = zeroc__now_s() + GRACE_S;
  while (!atomic_load(&hb->stop) && zeroc__now_s() < until) {
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&hb->stop)) return;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  fprintf(stderr, "zeroc: rank %d (%s:%d) aborting the job: %s\n", hb->world_rank, host,
          (int)getpid(), text);
  fflush(stderr);
  alarm(3); /* MPI_Abort may wait on a launcher it cannot reach: SIGALRM ends us then */
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

enum { IGN_MALFORMED, IGN_MAC, IGN_SOURCE, IGN_REPLAY };

/* A datagram not believed: counted, and the first of each kind said once. */
static void ignore(struct zeroc__heartbeat *hb, int why, const struct sockaddr_in *src) {
  static const char *const WHY[] = {"malformed", "its MAC does not check (forged, or another key)",
                                    "from an address its sender does not use",
                                    "a replay (its sequence number was seen)"};
  if (atomic_fetch_add(&hb->ignored[why], 1) == 0) {
    char a[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &src->sin_addr, a, sizeof a);
    ZWARN(COMM, "heartbeat: ignored a datagram from %s:%d: %s (further ones are only counted)", a,
          ntohs(src->sin_port), WHY[why]);
  }
}

/* Is datagram `m` (of `got` bytes, from `src`) genuine and new? Else counted. */
static int believe(struct zeroc__heartbeat *hb, hb_msg_t *m, ssize_t got,
                   const struct sockaddr_in *src) {
  if (got != (ssize_t)sizeof *m || m->magic != HB_MAGIC || m->from < 0 || m->from >= hb->nnodes) {
    ignore(hb, IGN_MALFORMED, src);
    return 0;
  }
  uint8_t mac[ZEROC_SHA256_BYTES];
  zeroc__hmac_sha256(hb->key, sizeof hb->key, m, offsetof(hb_msg_t, mac), mac);
  if (!zeroc__ct_equal(mac, m->mac, sizeof mac)) {
    ignore(hb, IGN_MAC, src);
    return 0;
  }
  /* our own, back through an address two nodes share (a docker bridge): not news */
  if (m->from == hb->me) return 0;
  const node_info_t *ni = &hb->nodes[m->from];
  int known = 0;
  for (int k = 0; k < ni->naddr; k++) known |= src->sin_addr.s_addr == ni->addr[k];
  if (!known) {
    ignore(hb, IGN_SOURCE, src);
    return 0;
  }
  if (m->seq == hb->last_seq[m->from]) return 0; /* the same datagram by another path */
  if (m->seq < hb->last_seq[m->from]) {
    ignore(hb, IGN_REPLAY, src);
    return 0;
  }
  hb->last_seq[m->from] = m->seq;
  atomic_fetch_add(&hb->accepted, 1);
  return 1;
}

/* Reads every waiting datagram; returns 1 when another leader reported a loss. */
static int drain(struct zeroc__heartbeat *hb, double *heard, int *gone, char *text, size_t n) {
  for (int k = 0; k < 1024; k++) { /* bounded: a flood cannot starve the checks */
    hb_msg_t m;
    struct sockaddr_in src;
    socklen_t slen = sizeof src;
    memset(&src, 0, sizeof src);
    ssize_t got = -1;
    for (int j = 0; j < hb->nfd && got < 0; j++)
      got = recvfrom(hb->fd[j], &m, sizeof m, MSG_DONTWAIT, (struct sockaddr *)&src, &slen);
    if (got < 0) return 0;
    if (!believe(hb, &m, got, &src)) continue;
    if (m.kind == MSG_BEAT) heard[m.from] = zeroc__now_s();
    if (m.kind == MSG_BYE) gone[m.from] = 1;
    if (m.kind == MSG_LOST) {
      /* genuine, but printed as text only: its bytes never reach the terminal raw */
      char safe[4 * sizeof m.text + 1];
      m.text[sizeof m.text - 1] = 0;
      zeroc__heartbeat_escape(m.text, safe, sizeof safe);
      snprintf(text, n, "%s (reported by host %s)", safe, hb->nodes[m.from].host);
      return 1;
    }
  }
  return 0;
}

static void *hb_main(void *arg) {
  struct zeroc__heartbeat *hb = arg;
  double *heard = calloc((size_t)hb->nnodes, sizeof *heard);
  int *gone = calloc((size_t)hb->nnodes, sizeof *gone);
  if (!heard || !gone) { /* cannot watch: say so, training goes on */
    ZWARN(COMM, "heartbeat: out of memory; lost nodes are seen only through the timeout");
    free(heard);
    free(gone);
    return NULL;
  }
  double t0 = zeroc__now_s(), next_beat = t0;
  for (int n = 0; n < hb->nnodes; n++) heard[n] = t0;
  char text[1400];
  hb_msg_t beat;
  while (!atomic_load(&hb->stop)) {
    struct pollfd p[MAX_ADDRS];
    for (int j = 0; j < hb->nfd; j++) p[j] = (struct pollfd){.fd = hb->fd[j], .events = POLLIN};
    (void)poll(p, (nfds_t)hb->nfd, (int)(hb->period * 1000 / 2) + 1);
    if (drain(hb, heard, gone, text, sizeof text)) {
      lost(hb, text, 0);
      break;
    }
    double t = zeroc__now_s();
    if (t >= next_beat) {
      msg_init(hb, &beat, MSG_BEAT, NULL); /* a new sequence number each time */
      for (int k = 0; k < hb->nnb; k++) send_to(hb, hb->nb[k], &beat);
      next_beat = t + hb->period;
    }
    int dead = -1;
    for (int k = 0; k < hb->nnb; k++)
      if (!gone[hb->nb[k]] && t - heard[hb->nb[k]] > hb->timeout) dead = hb->nb[k];
    if (dead >= 0) {
      const node_info_t *d = &hb->nodes[dead];
      snprintf(text, sizeof text,
               "host %s (ranks %s) lost: no heartbeat from its leader rank %d for %.1f s (host "
               "down, its leader stopped, or the link to it cut; seen by host %s)",
               d->host, d->ranks, d->leader, t - heard[dead], hb->nodes[hb->me].host);
      lost(hb, text, 1);
      break;
    }
  }
  free(heard);
  free(gone);
  return NULL;
}

/* ---- start and stop -------------------------------------------------------------- */

/* This leader's half of the set-up: its socket and what the others need to
 * know about it. Runs on node leaders only. */
static zeroc_result_t leader_prepare(const zeroc__place_t *pl, struct zeroc__heartbeat *hb,
                                     node_info_t *mine) {
  memset(mine, 0, sizeof *mine);
  snprintf(mine->host, sizeof mine->host, "%s", pl->host);
  mine->leader = pl->world_rank;
  size_t off = 0;
  for (int w = 0; w < pl->world_size && off + 12 < sizeof mine->ranks; w++)
    if (pl->local_of_world[w] >= 0)
      off += (size_t)snprintf(mine->ranks + off, sizeof mine->ranks - off, "%s%d", off ? "," : "", w);
  if (off + 12 >= sizeof mine->ranks) snprintf(mine->ranks + off, sizeof mine->ranks - off, ",...");
  ZEROC_CHECK(local_addrs(mine));
  /* the chosen interfaces' addresses only, never 0.0.0.0: datagrams from us
   * leave from one of them, which is what the others check, and nothing comes
   * in through another interface */
  for (int k = 0; k < mine->naddr; k++) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "heartbeat socket: %s", strerror(errno));
    hb->fd[hb->nfd++] = fd;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = mine->addr[k]};
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
      char a[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &mine->addr[k], a, sizeof a);
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "heartbeat socket bind to %s on %s: %s", a, pl->host,
                        strerror(errno));
    }
    mine->port[k] = sa.sin_port;
  }
  return ZEROC_OK;
}

/* The lowest world rank whose `res` failed, or the world size; collective. */
static int first_failed(const zeroc__place_t *pl, zeroc_result_t res) {
  int mine = res != ZEROC_OK ? pl->world_rank : pl->world_size, first = pl->world_size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, pl->world_comm);
  return first;
}

static void hb_free(struct zeroc__heartbeat *hb) {
  if (!hb) return;
  for (int j = 0; j < hb->nfd; j++) close(hb->fd[j]);
  free(hb->nodes);
  free(hb->last_seq);
  memset(hb->key, 0, sizeof hb->key);
  free(hb);
}

/* Leader 0 draws the job's key; every leader gets it over MPI (not the network
 * the heartbeat runs on). Collective over `leaders`; the same result on each. */
static zeroc_result_t share_key(struct zeroc__heartbeat *hb, MPI_Comm leaders) {
  uint8_t buf[ZEROC__HB_KEY_BYTES + 1] = {0};
  if (hb->me == 0)
    buf[ZEROC__HB_KEY_BYTES] = getrandom(buf, ZEROC__HB_KEY_BYTES, 0) == ZEROC__HB_KEY_BYTES;
  MPI_Bcast(buf, (int)sizeof buf, MPI_BYTE, 0, leaders);
  int ok = buf[ZEROC__HB_KEY_BYTES];
  memcpy(hb->key, buf, ZEROC__HB_KEY_BYTES);
  memset(buf, 0, sizeof buf);
  if (!ok)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                      "heartbeat: the first node leader could not draw the job's key (getrandom)");
  return ZEROC_OK;
}

zeroc_result_t zeroc__heartbeat_start(const zeroc__place_t *pl, double timeout,
                                      zeroc__watchdog_t *wd, zeroc__heartbeat_t **out) {
  *out = NULL;
  int lead = pl->local_rank == 0, v[2] = {0, 0};
  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_Comm_split(pl->world_comm, lead ? 0 : MPI_UNDEFINED, pl->world_rank, &leaders);
  if (lead) {
    MPI_Comm_rank(leaders, &v[0]);
    MPI_Comm_size(leaders, &v[1]);
  }
  MPI_Bcast(v, 2, MPI_INT, 0, pl->node_comm);
  int on = v[1] > 1 && timeout > 0, all_on = 0;
  MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, pl->world_comm); /* the knob may differ per rank */
  if (!all_on) {
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    if (v[1] > 1)
      ZINFO(COMM, "heartbeat off (ZEROC_HEARTBEAT_TIMEOUT=0 on some rank): lost nodes are seen "
                  "only through the timeout");
    return ZEROC_OK;
  }
  zeroc_result_t res = ZEROC_OK;
  struct zeroc__heartbeat *hb = NULL;
  node_info_t mine;
  if (lead) {
    hb = calloc(1, sizeof *hb);
    if (hb) hb->nodes = calloc((size_t)v[1], sizeof *hb->nodes);
    res = !hb || !hb->nodes ? ZEROC_FAIL(ZEROC_ERR_NOMEM, "heartbeat tables")
                            : leader_prepare(pl, hb, &mine);
  }
  int first = first_failed(pl, res);
  if (first < pl->world_size) {
    if (res == ZEROC_OK)
      res = ZEROC_FAIL(ZEROC_ERR_REMOTE, "rank %d could not start the node heartbeat (its "
                                         "message gives the cause)", first);
    goto fail;
  }
  if (lead) {
    hb->wd = wd;
    hb->me = v[0];
    hb->nnodes = v[1];
    hb->world_rank = pl->world_rank;
    hb->timeout = timeout;
    hb->period = hb->timeout / 10 < 0.05 ? 0.05 : hb->timeout / 10 > 0.5 ? 0.5 : hb->timeout / 10;
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, hb->nodes, (int)sizeof mine, MPI_BYTE, leaders);
    res = share_key(hb, leaders);
    hb->last_seq = calloc((size_t)hb->nnodes, sizeof *hb->last_seq);
    if (!res && !hb->last_seq) res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "heartbeat sequence table");
    /* a ring: each leader beats to and watches the node before and after it */
    hb->nb[hb->nnb++] = (hb->me + 1) % hb->nnodes;
    if (hb->nnodes > 2) hb->nb[hb->nnb++] = (hb->me + hb->nnodes - 1) % hb->nnodes;
    if (!res && pthread_create(&hb->thread, NULL, hb_main, hb) != 0)
      res = ZEROC_FAIL(ZEROC_ERR_INTERNAL, "heartbeat thread on %s: %s", pl->host, strerror(errno));
  }
  /* a leader without its thread would be found silent: every rank fails together */
  first = first_failed(pl, res);
  if (first < pl->world_size) {
    if (res == ZEROC_OK) {
      if (hb) {
        atomic_store(&hb->stop, 1);
        pthread_join(hb->thread, NULL);
      }
      res = ZEROC_FAIL(ZEROC_ERR_REMOTE, "rank %d could not start the node heartbeat (its "
                                         "message gives the cause)", first);
    }
    goto fail;
  }
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  *out = hb;
  if (lead)
    ZINFO(COMM,
          "heartbeat: node %d of %d (%s), %d address(es), UDP port %d, every %.2f s, lost "
          "after %.1f s",
          hb->me, hb->nnodes, pl->host, mine.naddr, ntohs(mine.port[0]), hb->period, hb->timeout);
  return ZEROC_OK;
fail:
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  hb_free(hb);
  return res;
}

void zeroc__heartbeat_stop(zeroc__heartbeat_t *hb, int bye) {
  if (!hb) return;
  atomic_store(&hb->stop, 1);
  pthread_join(hb->thread, NULL);
  if (bye) { /* three times: one lost datagram must not look like a lost node */
    hb_msg_t m;
    for (int r = 0; r < 3; r++) {
      msg_init(hb, &m, MSG_BYE, NULL); /* each its own sequence number: none is a replay */
      for (int k = 0; k < hb->nnb; k++) send_to(hb, hb->nb[k], &m);
    }
  }
  zeroc__heartbeat_stats_t st;
  zeroc__heartbeat_stats(hb, &st);
  if (st.malformed + st.bad_mac + st.wrong_source + st.replayed)
    ZWARN(COMM,
          "heartbeat: ignored %llu malformed datagrams, %llu with a MAC that did not check, %llu "
          "from an address their sender does not use, %llu replays",
          (unsigned long long)st.malformed, (unsigned long long)st.bad_mac,
          (unsigned long long)st.wrong_source, (unsigned long long)st.replayed);
  hb_free(hb);
}

void zeroc__heartbeat_stats(const zeroc__heartbeat_t *hb, zeroc__heartbeat_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!hb) return;
  out->malformed = atomic_load(&hb->ignored[IGN_MALFORMED]);
  out->bad_mac = atomic_load(&hb->ignored[IGN_MAC]);
  out->wrong_source = atomic_load(&hb->ignored[IGN_SOURCE]);
  out->replayed = atomic_load(&hb->ignored[IGN_REPLAY]);
  out->accepted = atomic_load(&hb->accepted);
}

void zeroc__heartbeat_address(const zeroc__heartbeat_t *hb, int *node, uint32_t *addr,
                              uint16_t *port) {
  const node_info_t *ni = &hb->nodes[hb->me];
  *node = hb->me;
  *addr = ni->addr[0];
  *port = ni->port[0];
}

const uint8_t *zeroc__heartbeat_key(const zeroc__heartbeat_t *hb) { return hb->key; }
