/*
 * text/prepare_run.c - the work of `zeroc data`: the calling thread reads the
 * documents and cuts them into pieces (a whole small document, or about
 * chunk_bytes of a large one cut at a safe line boundary), a pool of threads
 * tokenizes the pieces, and the calling thread appends their tokens to the
 * train and val shards in piece order. Pieces depend only on the inputs and
 * chunk_bytes, never on the thread count, so the shards are the same for any
 * --threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "text/prepare_internal.h"
#include "text/tokenizer_internal.h"
#include "zeroc/data.h" /* the llm.c shard header */

/* Pieces that may be read ahead of the writer, per tokenizing thread: enough
 * to keep every thread busy while one piece of each is being written. */
#define SLOTS_PER_THREAD 2
/* Without a safe cut in one chunk, the reader reads up to this many chunks
 * before it cuts at any line break (or character) instead. */
#define MAX_CHUNKS_SEARCHED 4
#define REPORT_EVERY_S      0.2

/* ---- pieces --------------------------------------------------------------------- */

enum { SLOT_FREE = 0, SLOT_READY, SLOT_BUSY, SLOT_DONE, SLOT_FAILED };

typedef struct piece {
  int state;
  int stream;      /* ZEROC__TRAIN or ZEROC__VAL */
  int doc;         /* the document it belongs to */
  int last_of_doc; /* writing it completes the document */
  int eot;         /* the tokens start with the end-of-text id */
  char *text;
  size_t len, cap;
  int32_t *ids;
  size_t n, ids_cap;
  size_t dropped; /* text bytes the tokenizer had no token for */
  zeroc_result_t res;
  char *err; /* a worker's error text */
} piece_t;

/* Where the reader is: document `doc`, its part `part` (train, then val),
 * the next byte `pos` to read, and the bytes read past the last cut. */
typedef struct reader {
  int doc, part, fd;
  uint64_t pos, end;
  int part_started;
  int cut_warned; /* the document's forced cut was reported (once per document) */
  char *carry;
  size_t carry_len, carry_cap;
} reader_t;

static int graphic(unsigned char c) { return c > 0x20 && c < 0x7f; }
static int ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

size_t zeroc__prepare_safe_cut(const char *text, size_t len, int need_newline, int need_space) {
  const unsigned char *b = (const unsigned char *)text;
  for (size_t p = len >= 2 ? len - 2 : 0; p >= 1; p--) {
    if (!ascii_space(b[p]) || !graphic(b[p + 1]) || (need_space && b[p] != ' ')) continue;
    /* the whitespace run ending at p must start after a printable character */
    size_t q = p;
    int newline = 0;
    while (q > 0 && ascii_space(b[q - 1])) newline |= b[--q] == '\n';
    newline |= b[p] == '\n';
    if (q > 0 && graphic(b[q - 1]) && (newline || !need_newline)) return p;
    if (q == 0) break;
    p = q; /* the run is not usable: go on before it */
  }
  return 0;
}

/* A cut when no safe one was found: after the last line break, else before
 * the last UTF-8 lead byte (never inside a character), else everything. */
static size_t fallback_cut(const char *buf, size_t len) {
  for (size_t p = len - 1; p >= 1; p--)
    if (buf[p - 1] == '\n') return p;
  for (size_t p = len - 1; p >= 1; p--)
    if (((unsigned char)buf[p] & 0xc0) != 0x80) return p;
  return len;
}

static zeroc_result_t grow(void **buf, size_t *cap, size_t need, size_t elem, const char *what) {
  if (need <= *cap) return ZEROC_OK;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  void *nb = realloc(*buf, c * elem);
  if (!nb)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %zu bytes of %s", c * elem,
                      what);
  *buf = nb;
  *cap = c;
  return ZEROC_OK;
}

static zeroc_result_t read_at(const zeroc__doc_t *d, int fd, char *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return ZEROC_FAIL(ZEROC_ERR_IO, "input '%s': reading %zu bytes at byte %llu: %s", d->path,
                        n - got, (unsigned long long)(off + got), strerror(errno));
    if (r == 0)
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "input '%s': the file ended at byte %llu, but it had %llu bytes when the "
                        "run started (it changed while being read)",
                        d->path, (unsigned long long)(off + got), (unsigned long long)d->size);
    got += (size_t)r;
  }
  return ZEROC_OK;
}

/* Moves the reader to the next part that has bytes (or to an empty document,
 * which still yields one empty piece so that it is counted). 0: all read. */
static zeroc_result_t next_part(zeroc__prepare_t *p, reader_t *r, int *more) {
  *more = 0;
  for (;;) {
    if (r->doc >= p->ndocs) return ZEROC_OK;
    const zeroc__doc_t *d = &p->docs[r->doc];
    if (r->fd < 0) {
      r->fd = open(d->path, O_RDONLY | O_CLOEXEC);
      if (r->fd < 0)
        return ZEROC_FAIL(ZEROC_ERR_IO, "input '%s': cannot open: %s", d->path, strerror(errno));
      r->part = -1;
      r->cut_warned = 0;
    }
    while (++r->part < 2) {
      uint64_t a = r->part == ZEROC__TRAIN ? 0 : d->val_cut;
      uint64_t b = r->part == ZEROC__TRAIN ? d->val_cut : d->size;
      if (b > a || (d->size == 0 && r->part == ZEROC__TRAIN)) {
        r->pos = a, r->end = b, r->part_started = 0;
        *more = 1;
        return ZEROC_OK;
      }
    }
    close(r->fd);
    r->fd = -1;
    r->doc++;
  }
}

/* Fills `pc` with the next piece; *got = 0 when every document is read. */
static zeroc_result_t read_piece(zeroc__prepare_t *p, reader_t *r, piece_t *pc, int *got) {
  *got = 0;
  if (r->fd < 0 || (r->pos >= r->end && r->carry_len == 0 && r->part_started)) {
    int more;
    ZEROC_CHECK(next_part(p, r, &more));
    if (!more) return ZEROC_OK;
  }
  const zeroc__doc_t *d = &p->docs[r->doc];
  size_t chunk = (size_t)p->cfg.chunk_bytes, len = r->carry_len;
  ZEROC_CHECK(grow((void **)&pc->text, &pc->cap, chunk + len + 1, 1, "text"));
  if (len) memcpy(pc->text, r->carry, len); /* carry is NULL before the first cut */
  r->carry_len = 0;
  size_t cut = 0;
  for (int round = 1;; round++) {
    /* a chunk (less what was carried over) in the first round, one more in each next */
    size_t want = (size_t)(r->end - r->pos), step = round == 1 && len < chunk ? chunk - len : chunk;
    if (want > step) want = step;
    if (want > 0) {
      ZEROC_CHECK(grow((void **)&pc->text, &pc->cap, len + want + 1, 1, "text"));
      ZEROC_CHECK(read_at(d, r->fd, pc->text + len, want, r->pos));
      r->pos += want;
      len += want;
    }
    if (r->pos >= r->end) {
      cut = len; /* the rest of the part */
      break;
    }
    cut = zeroc__prepare_safe_cut(pc->text, len, 1, p->space_cut);
    if (cut > 0) break;
    if (round >= MAX_CHUNKS_SEARCHED || p->space_cut) {
      /* no line boundary: between words, still exact */
      cut = zeroc__prepare_safe_cut(pc->text, len, 0, p->space_cut);
      if (cut > 0) break;
      cut = fallback_cut(pc->text, len);
      /* a file of megabytes of spaces needs such a cut every few chunks: one line */
      if (!r->cut_warned)
        ZWARN(IO,
              "data: '%s': no white space between printable characters in %zu bytes near byte "
              "%llu; cut the text there and wherever else the file needs it (its tokens may "
              "differ from a whole-file encoding at the cuts; said once per file)",
              d->path, len, (unsigned long long)r->pos);
      r->cut_warned = 1;
      break;
    }
  }
  /* what follows the cut is the start of the next piece */
  ZEROC_CHECK(grow((void **)&r->carry, &r->carry_cap, len - cut + 1, 1, "text"));
  memcpy(r->carry, pc->text + cut, len - cut);
  r->carry_len = len - cut;
  pc->len = cut;
  pc->stream = r->part;
  pc->doc = r->doc;
  pc->eot = !r->part_started && p->eot >= 0 && d->size > 0;
  r->part_started = 1;
  pc->last_of_doc = 0;
  if (r->pos >= r->end && r->carry_len == 0) {
    /* the part is done; the document too when no val part follows */
    int val_follows = r->part == ZEROC__TRAIN && d->size > d->val_cut;
    pc->last_of_doc = !val_follows;
  }
  pc->state = SLOT_READY;
  *got = 1;
  return ZEROC_OK;
}

/* ---- tokenizing ------------------------------------------------------------------- */

static zeroc_result_t encode_piece(const zeroc__prepare_t *p, piece_t *pc) {
  /* the end-of-text id, a space add_prefix_space may add, and what NFC adds */
  size_t room = zeroc__tok_max_ids(p->tok, pc->len + 1);
  ZEROC_CHECK(grow((void **)&pc->ids, &pc->ids_cap, room + 1, sizeof *pc->ids, "token ids"));
  size_t k = 0, n = 0;
  if (pc->eot) pc->ids[k++] = p->eot;
  if (pc->len && p->space_cut && pc->text[0] != ' ') {
    /* the space add_prefix_space would add, written out: the same tokens, and
     * the encoder's ids-per-byte bound holds (the buffer has a byte to spare) */
    memmove(pc->text + 1, pc->text, pc->len);
    pc->text[0] = ' ';
    pc->len++;
    zeroc_result_t r =
        zeroc__tokenizer_encode_cap(p->tok, pc->text, pc->len, pc->ids + k, room, &n, &pc->dropped);
    pc->len--; /* the text counted is the document's (the buffer is not read again) */
    ZEROC_CHECK(r);
    if (p->tok->kind == ZEROC_TOK_BPE && p->tok->byte_id[' '] < 0 && p->tok->unk < 0)
      pc->dropped--; /* that space is not the document's */
  } else if (pc->len) {
    ZEROC_CHECK(zeroc__tokenizer_encode_cap(p->tok, pc->text, pc->len, pc->ids + k, room, &n,
                                            &pc->dropped));
  } else {
    pc->dropped = 0;
  }
  pc->n = k + n;
  return ZEROC_OK;
}

typedef struct pool {
  zeroc__prepare_t *p;
  piece_t *slots;
  uint64_t nslots;
  uint64_t next_read, next_work, next_write; /* piece sequence numbers */
  int stop;
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
} pool_t;

static void *worker(void *arg) {
  pool_t *pl = arg;
  pthread_mutex_lock(&pl->mu);
  for (;;) {
    while (!pl->stop && pl->next_work == pl->next_read) pthread_cond_wait(&pl->work_cv, &pl->mu);
    if (pl->stop) break;
    piece_t *pc = &pl->slots[pl->next_work++ % pl->nslots];
    pc->state = SLOT_BUSY;
    pthread_mutex_unlock(&pl->mu);
    zeroc_result_t r = encode_piece(pl->p, pc);
    char *err = r == ZEROC_OK ? NULL : strdup(zeroc__tls_error());
    pthread_mutex_lock(&pl->mu);
    pc->res = r;
    pc->err = err;
    pc->state = r == ZEROC_OK ? SLOT_DONE : SLOT_FAILED;
    pthread_cond_broadcast(&pl->done_cv);
  }
  pthread_mutex_unlock(&pl->mu);
  return NULL;
}

/* ---- writing ------------------------------------------------------------------------ */

static zeroc_result_t shard_header(zeroc__afile_t *f, uint64_t count, int width) {
  unsigned char h[12];
  int32_t v[3] = {width == 4 ? ZEROC_SHARD_MAGIC_U32 : ZEROC_SHARD_MAGIC,
                  width == 4 ? ZEROC_SHARD_VERSION_U32 : ZEROC_SHARD_VERSION, (int32_t)count};
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 4; b++) h[4 * i + b] = (unsigned char)((uint32_t)v[i] >> (8 * b));
  return zeroc__afile_pwrite(f, h, sizeof h, 0);
}

/* Completes the stream's last shard: its header, then fsync and close (the
 * rename waits for the whole run). */
static zeroc_result_t close_shard(zeroc__prepare_t *p, int s) {
  if (p->nshards[s] == 0) return ZEROC_OK;
  zeroc__afile_t *f = p->shards[s] + p->nshards[s] - 1;
  if (f->fd < 0) return ZEROC_OK;
  ZEROC_CHECK(shard_header(f, p->in_shard[s], p->width));
  return zeroc__afile_close(f);
}

/* "<out_dir>/<train|val>_NNNNNN.bin" into buf (prepare.c's shard_index reads them back). */
static zeroc_result_t shard_name(const char *dir, int stream, int index, char *buf, size_t n) {
  if ((size_t)snprintf(buf, n, "%s/%s_%06d.bin", dir, stream == ZEROC__VAL ? "val" : "train",
                       index) >= n)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: output directory '%s' is too long a name", dir);
  return ZEROC_OK;
}

static zeroc_result_t open_shard(zeroc__prepare_t *p, int s) {
  static const unsigned char zeros[1024];
  char path[PATH_MAX];
  ZEROC_CHECK(close_shard(p, s));
  ZEROC_CHECK(shard_name(p->cfg.out_dir, s, p->nshards[s], path, sizeof path));
  if (p->nshards[s] == p->cap_shards[s]) {
    int c = p->cap_shards[s] ? 2 * p->cap_shards[s] : 8;
    zeroc__afile_t *nf = realloc(p->shards[s], (size_t)c * sizeof *nf);
    if (!nf) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %d shards", c);
    p->shards[s] = nf;
    p->cap_shards[s] = c;
  }
  zeroc__afile_t *f = p->shards[s] + p->nshards[s];
  *f = (zeroc__afile_t)ZEROC_AFILE_INIT;
  ZEROC_CHECK(zeroc__afile_open(f, path));
  p->nshards[s]++;
  p->in_shard[s] = 0;
  /* the real header goes in when the shard is complete */
  return zeroc__afile_write(f, zeros, sizeof zeros);
}

static zeroc_result_t report(zeroc__prepare_t *p, int force) {
  zeroc_prepare_stats_t *st = &p->stats;
  double now = zeroc__now_s();
  st->seconds = now - p->t0;
  st->train_shards = p->nshards[ZEROC__TRAIN];
  st->val_shards = p->nshards[ZEROC__VAL];
  if (p->progress && (force || now - p->last_report >= REPORT_EVERY_S)) {
    p->last_report = now;
    if (p->progress(p->user, st))
      return ZEROC_FAIL(ZEROC_ERR_IO,
                        "data: stopped at %.1f of %.1f MB (the progress callback "
                        "asked to); nothing was written",
                        st->bytes_done / 1e6, st->bytes_total / 1e6);
  }
  return ZEROC_OK;
}

/* Appends a piece's tokens to its stream, starting shards as they fill. */
static zeroc_result_t write_piece(zeroc__prepare_t *p, const piece_t *pc) {
  unsigned char buf[4 * 4096];
  int s = pc->stream, w = p->width;
  int32_t max = w == 2 ? 65535 : INT32_MAX;
  uint64_t per = (uint64_t)p->cfg.shard_tokens;
  for (size_t i = 0; i < pc->n;) {
    if (p->nshards[s] == 0 || p->in_shard[s] == per) ZEROC_CHECK(open_shard(p, s));
    size_t k = pc->n - i;
    if (k > 4096) k = 4096;
    if (k > per - p->in_shard[s]) k = (size_t)(per - p->in_shard[s]);
    for (size_t j = 0; j < k; j++) {
      int32_t t = pc->ids[i + j];
      if (t < 0 || t > max)
        return ZEROC_FAIL(ZEROC_ERR_INTERNAL,
                          "data: token id %d from the tokenizer; accepted 0..%d", t, max);
      /* llm.c shards are little-endian */
      for (int b = 0; b < w; b++)
        buf[(size_t)w * j + (size_t)b] = (unsigned char)((uint32_t)t >> (8 * b));
    }
    ZEROC_CHECK(zeroc__afile_write(p->shards[s] + p->nshards[s] - 1, buf, (size_t)w * k));
    p->in_shard[s] += k;
    i += k;
  }
  if (s == ZEROC__TRAIN)
    p->stats.train_tokens += pc->n;
  else
    p->stats.val_tokens += pc->n;
  p->stats.bytes_done += pc->len;
  p->doc_bytes += pc->len;
  p->doc_tokens += pc->n - (pc->eot ? 1 : 0);
  p->doc_dropped += pc->dropped;
  if (pc->last_of_doc) {
    /* a tokenizer with no token for a byte (no byte-level alphabet, no unk) drops it: a
     * document that loses all of its text would be written as nothing, in silence */
    if (p->doc_bytes > 0 && p->doc_tokens == 0)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "data: document '%s' (%llu bytes) encodes to no token: the tokenizer "
                        "has no token for its bytes (no byte-level alphabet, no unknown token); "
                        "accepted a tokenizer that covers the text",
                        p->docs[pc->doc].path, (unsigned long long)p->doc_bytes);
    if (p->doc_dropped && !p->dropped_docs++) p->first_dropped = pc->doc;
    p->dropped_bytes += p->doc_dropped;
    p->doc_bytes = p->doc_tokens = p->doc_dropped = 0;
    p->stats.documents_done++;
  }
  return report(p, 0);
}

/* ---- the run -------------------------------------------------------------------------- */

static zeroc_result_t run_serial(zeroc__prepare_t *p, reader_t *r) {
  zeroc_result_t res = ZEROC_OK;
  piece_t pc;
  memset(&pc, 0, sizeof pc);
  for (;;) {
    int got;
    ZEROC_TRY(read_piece(p, r, &pc, &got));
    if (!got) break;
    ZEROC_TRY(encode_piece(p, &pc));
    ZEROC_TRY(write_piece(p, &pc));
  }
fail:
  free(pc.text);
  free(pc.ids);
  return res;
}

static zeroc_result_t run_pool(zeroc__prepare_t *p, reader_t *r, int threads) {
  zeroc_result_t res = ZEROC_OK;
  pool_t pl;
  memset(&pl, 0, sizeof pl);
  pl.p = p;
  pl.nslots = (uint64_t)threads * SLOTS_PER_THREAD + 1;
  pl.slots = calloc(pl.nslots, sizeof *pl.slots);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  int started = 0, reader_done = 0;
  pthread_mutex_init(&pl.mu, NULL);
  pthread_cond_init(&pl.work_cv, NULL);
  pthread_cond_init(&pl.done_cv, NULL);
  if (!pl.slots || !tid) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %d threads", threads);
    goto fail;
  }
  for (; started < threads; started++) {
    int e = pthread_create(&tid[started], NULL, worker, &pl);
    if (e) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: pthread_create (thread %d of %d): %s", started + 1,
                       threads, strerror(e));
      goto fail;
    }
  }
  for (;;) {
    /* read ahead while slots are free (a free slot is the reader's alone) */
    while (!reader_done && pl.next_read - pl.next_write < pl.nslots) {
      int got;
      ZEROC_TRY(read_piece(p, r, &pl.slots[pl.next_read % pl.nslots], &got));
      if (!got) {
        reader_done = 1;
        break;
      }
      pthread_mutex_lock(&pl.mu);
      pl.next_read++;
      pthread_cond_signal(&pl.work_cv);
      pthread_mutex_unlock(&pl.mu);
    }
    if (pl.next_write == pl.next_read) break;
    piece_t *pc = &pl.slots[pl.next_write % pl.nslots];
    pthread_mutex_lock(&pl.mu);
    while (pc->state != SLOT_DONE && pc->state != SLOT_FAILED)
      pthread_cond_wait(&pl.done_cv, &pl.mu);
    pthread_mutex_unlock(&pl.mu);
    if (pc->state == SLOT_FAILED) {
      zeroc__tls_error_set(pc->err ? pc->err : "data: a tokenizing thread failed");
      res = pc->res;
      goto fail;
    }
    ZEROC_TRY(write_piece(p, pc));
    pc->state = SLOT_FREE;
    pl.next_write++;
  }
fail:
  if (started) {
    pthread_mutex_lock(&pl.mu);
    pl.stop = 1;
    pthread_cond_broadcast(&pl.work_cv);
    pthread_mutex_unlock(&pl.mu);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  }
  pthread_mutex_destroy(&pl.mu);
  pthread_cond_destroy(&pl.work_cv);
  pthread_cond_destroy(&pl.done_cv);
  if (pl.slots) {
    for (uint64_t i = 0; i < pl.nslots; i++) {
      free(pl.slots[i].text);
      free(pl.slots[i].ids);
      free(pl.slots[i].err);
    }
  }
  free(pl.slots);
  free(tid);
  return res;
}

zeroc_result_t zeroc__prepare_run(zeroc__prepare_t *p) {
  zeroc_result_t res;
  reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = -1;
  p->last_report = -1e9; /* the first write reports at once */
  if (p->cfg.threads <= 1)
    res = run_serial(p, &r);
  else
    res = run_pool(p, &r, p->cfg.threads);
  if (r.fd >= 0) close(r.fd);
  free(r.carry);
  if (res == ZEROC_OK) res = close_shard(p, ZEROC__TRAIN);
  if (res == ZEROC_OK) res = close_shard(p, ZEROC__VAL);
  if (res == ZEROC_OK) res = report(p, 0);
  /* text left out, but not all of a document's (that is refused above): one line */
  if (res == ZEROC_OK && p->dropped_docs)
    ZWARN(IO,
          "data: the tokenizer has no token for %llu byte%s of %d document%s (the first: '%s'); "
          "they are left out of the shards (no byte-level alphabet, no unknown token)",
          (unsigned long long)p->dropped_bytes, p->dropped_bytes == 1 ? "" : "s", p->dropped_docs,
          p->dropped_docs == 1 ? "" : "s", p->docs[p->first_dropped].path);
  return res;
}
