/*
 * comm/heartbeat.c - node leaders watching each other over UDP (what and why:
 * comm/heartbeat.h). UDP, not TCP: a datagram that does not come is the whole
 * signal, there is no connection whose own timeouts (minutes, on a cut link)
 * would stand between us and the answer.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/heartbeat.h"
#include "comm/watchdog.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

#define HB_MAGIC 0x7a686231u /* "zhb1" */
#define MAX_ADDRS 4
#define GRACE_S 2.0 /* between posting a loss and ending the process ourselves */

enum { MSG_BEAT = 1, MSG_BYE = 2, MSG_LOST = 3 };

typedef struct {
  uint32_t magic, kind;
  uint64_t tag; /* this job's: leader 0's, so datagrams of other jobs are ignored */
  int32_t from; /* sender's node index */
  char text[300]; /* MSG_LOST: the loss as the detecting leader saw it */
} hb_msg_t;

typedef struct {
  uint32_t addr[MAX_ADDRS]; /* IPv4, network order */
  int32_t naddr;
  uint16_t port; /* network order */
  char host[64];
  char ranks[48]; /* the node's world ranks, for messages: "2,3" */
  int32_t leader; /* its world rank */
} node_info_t;

struct zeroc__heartbeat {
  zeroc__watchdog_t *wd; /* the node's board, where a lost node is posted */
  int fd, me, nnodes, world_rank;
  double timeout, period;
  uint64_t tag;
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

/* This node's IPv4 addresses that the heartbeat advertises. */
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

static void send_to(struct zeroc__heartbeat *hb, int node, const hb_msg_t *m) {
  const node_info_t *ni = &hb->nodes[node];
  for (int k = 0; k < ni->naddr; k++) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = ni->port};
    sa.sin_addr.s_addr = ni->addr[k];
    /* best effort: an unreachable address is what the receiver's timeout is for */
    (void)sendto(hb->fd, m, sizeof *m, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof sa);
  }
}

static void msg_init(struct zeroc__heartbeat *hb, hb_msg_t *m, int kind) {
  memset(m, 0, sizeof *m);
  m->magic = HB_MAGIC;
  m->kind = (uint32_t)kind;
  m->tag = hb->tag;
  m->from = hb->me;
}

/* A loss seen here (or reported by another leader): post it on the board,
 * tell every other leader, and give the process GRACE_S to end through its
 * failing collectives before ending it here. */
static void lost(struct zeroc__heartbeat *hb, const char *text, int tell) {
  zeroc__watchdog_post(hb->wd, text);
  if (tell) {
    hb_msg_t m;
    msg_init(hb, &m, MSG_LOST);
    snprintf(m.text, sizeof m.text, "%s", text);
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

/* Reads every waiting datagram; returns 1 when another leader reported a loss. */
static int drain(struct zeroc__heartbeat *hb, double *heard, int *gone, char *text, size_t n) {
  for (int k = 0; k < 1024; k++) { /* bounded: a flood cannot starve the checks */
    hb_msg_t m;
    ssize_t got = recv(hb->fd, &m, sizeof m, MSG_DONTWAIT);
    if (got < 0) return 0;
    if (got != (ssize_t)sizeof m || m.magic != HB_MAGIC || m.tag != hb->tag || m.from < 0 ||
        m.from >= hb->nnodes || m.from == hb->me)
      continue;
    if (m.kind == MSG_BEAT) heard[m.from] = zeroc__now_s();
    if (m.kind == MSG_BYE) gone[m.from] = 1;
    if (m.kind == MSG_LOST) {
      m.text[sizeof m.text - 1] = 0;
      snprintf(text, n, "%s (reported by host %s)", m.text, hb->nodes[m.from].host);
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
  char text[400];
  hb_msg_t beat;
  msg_init(hb, &beat, MSG_BEAT);
  while (!atomic_load(&hb->stop)) {
    struct pollfd p = {.fd = hb->fd, .events = POLLIN};
    (void)poll(&p, 1, (int)(hb->period * 1000 / 2) + 1);
    if (drain(hb, heard, gone, text, sizeof text)) {
      lost(hb, text, 0);
      break;
    }
    double t = zeroc__now_s();
    if (t >= next_beat) {
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
  hb->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (hb->fd < 0) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "heartbeat socket: %s", strerror(errno));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  socklen_t len = sizeof sa;
  if (bind(hb->fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(hb->fd, (struct sockaddr *)&sa, &len) != 0)
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "heartbeat socket bind on %s: %s", pl->host,
                      strerror(errno));
  mine->port = sa.sin_port;
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
  if (hb->fd >= 0) close(hb->fd);
  free(hb->nodes);
  free(hb);
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
    if (hb) hb->fd = -1;
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
    uint64_t tag = ((uint64_t)getpid() << 32) ^ (uint64_t)(zeroc__now_s() * 1e9);
    MPI_Bcast(&tag, 1, MPI_UINT64_T, 0, leaders);
    hb->tag = tag;
    /* a ring: each leader beats to and watches the node before and after it */
    hb->nb[hb->nnb++] = (hb->me + 1) % hb->nnodes;
    if (hb->nnodes > 2) hb->nb[hb->nnb++] = (hb->me + hb->nnodes - 1) % hb->nnodes;
    if (pthread_create(&hb->thread, NULL, hb_main, hb) != 0)
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
    ZINFO(COMM, "heartbeat: node %d of %d (%s), UDP port %d, every %.2f s, lost after %.1f s",
          hb->me, hb->nnodes, pl->host, ntohs(mine.port), hb->period, hb->timeout);
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
    msg_init(hb, &m, MSG_BYE);
    for (int r = 0; r < 3; r++)
      for (int k = 0; k < hb->nnb; k++) send_to(hb, hb->nb[k], &m);
  }
  hb_free(hb);
}
