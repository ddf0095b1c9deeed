/*
 * offload/swap_internal.h - what the swapper's files share: the slot, ticket
 * and request tables, the swapper struct, and the helpers one file defines
 * for another. Not installed, not exported.
 */
#ifndef ZEROC_OFFLOAD_SWAP_INTERNAL_H
#define ZEROC_OFFLOAD_SWAP_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdint.h>

#include "core/mem.h"
#include "offload/offload.h"

#define PAGE        ZEROC_OFFLOAD_ALIGN
#define MAX_BLOCK   ((size_t)64 << 20)
#define MAX_QD      1024
#define MAX_TICKETS 4096
#define WAKE_TAG    UINT64_MAX

enum { T_FREE = 0, T_QUEUED, T_RUNNING, T_DONE };

typedef struct slot {
  int used;
  int fd;
  char *path;
  uint64_t reserved; /* bytes of file space reserved with fallocate (4 KiB multiple) */
  uint64_t size;     /* logical size once every submitted write has run */
  int valid;         /* 0 after a failed write: the file holds no trustworthy copy */
  int running;       /* ticket running on this slot, -1 when none */
  int pending;       /* tickets submitted and not yet done */
} slot_t;

typedef struct ticket {
  uint32_t gen;
  int state;
  int write;
  int slot;
  uint8_t *buf;
  uint64_t bytes, body;
  uint64_t next; /* next body offset to issue */
  int tail_todo; /* the tail page still has to be issued */
  int inflight;  /* requests in flight */
  int stop;      /* an error: issue nothing more */
  zeroc_result_t res;
  char *msg;
  uint8_t *bounce; /* one 4 KiB page */
} ticket_t;

typedef struct req {
  int ticket; /* -1: free */
  uint64_t off;
  uint8_t *buf;
  uint32_t len;
} req_t;

struct zeroc__swap {
  zeroc__mem_t *mem; /* the accountant the bounce area is counted in; NULL: none */
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  pthread_t thread;
  int thread_started;
  struct io_uring ring;
  int ring_ok;
  int efd;           /* eventfd that wakes the I/O thread */
  uint64_t wake_buf; /* the eventfd read lands here */
  int sleeping;      /* the I/O thread waits in io_uring_enter */
  int stop;
  char *broken; /* set when the ring failed: every later ticket fails with it */

  size_t block;
  int qd, max_tickets;
  int direct, prealloc, check_size;
  int warned_direct;
  char dir_job[4096]; /* <dir>/<job> */
  char rank_dir[4096];
  char lock_path[4200];
  int lock_fd;

  slot_t *slots;
  int nslots, capslots;
  ticket_t *tickets;
  int *free_tickets, nfree_tickets;
  int *queue, nqueue; /* queued and running tickets in submission order */
  uint8_t *bounce_area;
  req_t *reqs;
  int *free_reqs, nfree_reqs;
  int *retry, nretry; /* requests to issue again (partial transfer, EAGAIN) */
  int inflight, max_inflight;
  uint64_t requests;
};

static inline uint64_t zeroc__swap_pad(uint64_t n) { return (n + PAGE - 1) / PAGE * PAGE; }

/* ---- swap_files.c: directories, slot files, what crashed swappers left ---- */

/* Job and slot names become path components: 1..64 of [A-Za-z0-9._-], not starting with '.'. */
int zeroc__swap_name_ok(const char *s);
/* Makes <dir>/<job>/rank<rank>/ and fills sw->dir_job and sw->rank_dir. */
zeroc_result_t zeroc__swap_make_dirs(zeroc__swap_t *sw, const char *dir, const char *job, int rank);
/* Removes every <dir>/<job>/rank<N>/ whose swapper died without closing. */
void zeroc__swap_sweep_stale(const char *dir);
/* Opens a file for the swapper, falling back to buffered I/O where O_DIRECT is refused. */
int zeroc__swap_open_file(zeroc__swap_t *sw, const char *path, int flags);
/* Reserves [from, to) of a slot's file; *unsupported set where fallocate is not. */
zeroc_result_t zeroc__swap_reserve(int fd, const char *path, uint64_t from, uint64_t to,
                                   int *unsupported);
/* Closes and removes a slot's file and clears the slot (mutex held). */
void zeroc__swap_slot_close(zeroc__swap_t *sw, slot_t *s);

/* ---- swap_ring.c: the I/O thread --------------------------------------------- */

/* The I/O thread's body: runs until sw->stop and nothing is left to do. */
void *zeroc__swap_io_main(void *arg);
/* Wakes the I/O thread if it waits in the kernel (mutex held). */
void zeroc__swap_wake(zeroc__swap_t *sw);

#endif
