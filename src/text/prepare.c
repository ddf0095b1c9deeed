/*
 * text/prepare.c - zeroc_text_prepare: text files to llm.c token shards. This
 * file checks the config, expands the inputs, decides the train/validation
 * split, guards the output directory, and puts the finished shards and the
 * tokenizer in place together; the reading, tokenizing and writing are
 * text/prepare_run.c. The rules are in docs/data.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/rng.h"
#include "io/files.h"
#include "text/prepare_internal.h"
#include "zeroc/data.h"

#define DEFAULT_VAL_FRACTION 0.05
#define DEFAULT_SHARD_TOKENS 100000000LL /* llm.c's fineweb shards */
#define DEFAULT_CHUNK_BYTES  (1LL << 20)
#define MAX_THREADS          1024
#define TAG_SPLIT            0x53504c4954ULL /* "SPLIT" */
#define SCAN_BLOCK           65536
#define ASIDE_PREFIX         ".zeroc-data-old." /* a --force run's earlier set, set aside */
#define ASIDE_DONE           ".moved" /* in the aside directory: every old file is in it */

/* ---- configuration ------------------------------------------------------------ */

static int cores_online(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)(n < MAX_THREADS ? n : MAX_THREADS) : 1;
}

#define BAD(...) ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, __VA_ARGS__)

/* Copies a caller's versioned config over the initializer's and resolves the
 * unset fields. */
static zeroc_result_t read_config(const zeroc_prepare_config_t *in, zeroc_prepare_config_t *c) {
  const zeroc_prepare_config_t dflt = ZEROC_PREPARE_CONFIG_INIT;
  *c = dflt;
  if (!in || in->magic != ZEROC_CONFIG_MAGIC ||
      in->size < offsetof(zeroc_prepare_config_t, val_fraction) || in->size > 65536)
    return BAD("zeroc_prepare_config_t was not initialised with ZEROC_PREPARE_CONFIG_INIT (size "
               "%zu, magic 0x%x)",
               in ? in->size : 0, in ? in->magic : 0);
  memcpy(c, in, in->size < sizeof *c ? in->size : sizeof *c);
  c->size = sizeof *c;
  if (c->val_fraction == (double)ZEROC_UNSET) c->val_fraction = DEFAULT_VAL_FRACTION;
  if (c->shard_tokens == (int64_t)ZEROC_UNSET) c->shard_tokens = DEFAULT_SHARD_TOKENS;
  if (c->threads == ZEROC_UNSET) c->threads = cores_online();
  if (c->chunk_bytes == (int64_t)ZEROC_UNSET) c->chunk_bytes = DEFAULT_CHUNK_BYTES;
  if (!c->tokenizer || !*c->tokenizer)
    return BAD("data: no tokenizer (--tokenizer); accepted: bytes, a tokenizer.json or a GPT-2 "
               "vocab.json");
  if (!c->out_dir || !*c->out_dir) return BAD("data: no output directory (--out)");
  if (c->num_inputs < 1 || !c->inputs)
    return BAD("data: no input files; give one or more text files or globs");
  if (!(c->val_fraction >= 0 && c->val_fraction < 1))
    return BAD("data: val fraction (--val-fraction) %g; accepted 0 <= F < 1", c->val_fraction);
  if (c->shard_tokens < 1 || c->shard_tokens > INT32_MAX)
    return BAD("data: shard tokens (--shard-tokens) %lld; accepted 1..%d (the llm.c header "
               "count is int32)",
               (long long)c->shard_tokens, INT32_MAX);
  if (c->threads < 1 || c->threads > MAX_THREADS)
    return BAD("data: threads (--threads) %d; accepted 1..%d", c->threads, MAX_THREADS);
  if (c->chunk_bytes < 4096 || c->chunk_bytes > (1LL << 30))
    return BAD("data: chunk bytes %lld; accepted 4096..%lld", (long long)c->chunk_bytes, 1LL << 30);
  if (c->force != 0 && c->force != 1) return BAD("data: force %d; accepted 0 or 1", c->force);
  return ZEROC_OK;
}

/* ---- inputs ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static zeroc_result_t add_doc(zeroc__prepare_t *p, const char *path, int *cap) {
  struct stat st;
  if (stat(path, &st) != 0) return BAD("data: input '%s': %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return BAD("data: input '%s' is a %s; accepted: text files (or globs matching them)", path,
               zeroc__file_kind(st.st_mode));
  if (access(path, R_OK) != 0)
    return BAD("data: input '%s' cannot be read: %s", path, strerror(errno));
  if (p->ndocs == INT_MAX) return BAD("data: more than %d input files", INT_MAX);
  if (p->ndocs == *cap) {
    int c = *cap ? 2 * *cap : 64;
    zeroc__doc_t *nd = realloc(p->docs, (size_t)c * sizeof *nd);
    if (!nd) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %d inputs", c);
    p->docs = nd;
    *cap = c;
  }
  zeroc__doc_t *d = &p->docs[p->ndocs];
  d->path = strdup(path);
  if (!d->path) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
  d->size = (uint64_t)st.st_size;
  d->val_cut = d->size;
  p->ndocs++;
  p->stats.bytes_total += d->size;
  return ZEROC_OK;
}

/* Every input in the order given; a glob's matches sorted by bytes (not the
 * locale's collation), so every machine makes the same shards. */
static zeroc_result_t expand_inputs(zeroc__prepare_t *p) {
  int cap = 0;
  for (int i = 0; i < p->cfg.num_inputs; i++) {
    const char *in = p->cfg.inputs[i];
    if (!in || !*in) return BAD("data: input %d is an empty name", i + 1);
    if (!strpbrk(in, "*?[")) {
      ZEROC_CHECK(add_doc(p, in, &cap));
      continue;
    }
    glob_t g;
    int rc = glob(in, GLOB_NOSORT, NULL, &g);
    if (rc == GLOB_NOMATCH) return BAD("data: input '%s': the glob matches no files", in);
    if (rc != 0) {
      if (rc != GLOB_NOSPACE) globfree(&g);
      return ZEROC_FAIL(rc == GLOB_NOSPACE ? ZEROC_ERR_NOMEM : ZEROC_ERR_IO,
                        "data: input '%s': glob failed (%s)", in,
                        rc == GLOB_NOSPACE ? "out of memory" : "read error");
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    zeroc_result_t r = ZEROC_OK;
    for (size_t k = 0; k < g.gl_pathc && r == ZEROC_OK; k++) r = add_doc(p, g.gl_pathv[k], &cap);
    globfree(&g);
    ZEROC_CHECK(r);
  }
  p->stats.documents = p->ndocs;
  return ZEROC_OK;
}

/* ---- the split ---------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

/* A document's place in [0, 1): it goes to val when below F. */
static double doc_draw(int index, const char *path) {
  uint64_t h = zeroc__hash2(zeroc__hash2(TAG_SPLIT, (uint64_t)index), fnv1a(path));
  return (double)(h >> 11) * 0x1p-53;
}

/* The first line start at or after byte `t` of d (a line start: byte 0 or
 * the byte after a '\n'); where none follows, the last one before t; where
 * the text has no line break, t itself moved forward to a UTF-8 character
 * start. */
static zeroc_result_t val_cut(const zeroc__doc_t *d, uint64_t t, uint64_t *cut) {
  zeroc_result_t res = ZEROC_OK;
  unsigned char buf[SCAN_BLOCK];
  *cut = t;
  if (t == 0 || t >= d->size) return ZEROC_OK;
  int fd = open(d->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "input '%s': cannot open: %s", d->path, strerror(errno));
  /* forward from byte t-1: a '\n' at i starts a line at i+1 */
  for (uint64_t at = t - 1; at < d->size;) {
    ssize_t got = pread(fd, buf, sizeof buf, (off_t)at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) goto io_error;
    for (ssize_t i = 0; i < got; i++)
      if (buf[i] == '\n') {
        if (at + (uint64_t)i + 1 < d->size) {
          *cut = at + (uint64_t)i + 1;
          goto done;
        }
        goto backward; /* the last byte: the line start after it is the end */
      }
    at += (uint64_t)got;
  }
backward:
  for (uint64_t end = t - 1; end > 0;) {
    uint64_t at = end > sizeof buf ? end - sizeof buf : 0;
    ssize_t got = pread(fd, buf, (size_t)(end - at), (off_t)at);
    if (got < 0 && errno == EINTR) continue;
    if (got != (ssize_t)(end - at)) goto io_error;
    for (ssize_t i = got - 1; i >= 0; i--)
      if (buf[i] == '\n') {
        *cut = at + (uint64_t)i + 1;
        goto done;
      }
    end = at;
  }
  /* no line break before t either: cut at t, on a character start */
  for (uint64_t at = t; at < d->size; at++) {
    ssize_t got = pread(fd, buf, 1, (off_t)at);
    if (got != 1) goto io_error;
    if ((buf[0] & 0xc0) != 0x80) {
      *cut = at;
      goto done;
    }
  }
  *cut = d->size;
done:
  close(fd);
  return res;
io_error:
  res = ZEROC_FAIL(ZEROC_ERR_IO, "input '%s': reading it: %s", d->path,
                   errno ? strerror(errno) : "short read (the file changed?)");
  close(fd);
  return res;
}

/* Whole documents to val when there are at least 1/F of them (at least one
 * to val and one to train); else the last F of every document's text. */
static zeroc_result_t choose_split(zeroc__prepare_t *p) {
  double F = p->cfg.val_fraction;
  zeroc_prepare_stats_t *st = &p->stats;
  if (F == 0) {
    st->split = ZEROC_SPLIT_NONE;
    return ZEROC_OK;
  }
  if ((double)p->ndocs * F >= 1.0) {
    st->split = ZEROC_SPLIT_DOCUMENTS;
    int lo = 0, hi = 0;
    double dlo = 2, dhi = -1;
    for (int i = 0; i < p->ndocs; i++) {
      double u = doc_draw(i, p->docs[i].path);
      if (u < F) p->docs[i].val_cut = 0, st->val_documents++;
      if (u < dlo) dlo = u, lo = i;
      if (u > dhi) dhi = u, hi = i;
    }
    if (st->val_documents == 0) p->docs[lo].val_cut = 0, st->val_documents = 1;
    if (st->val_documents == p->ndocs) p->docs[hi].val_cut = p->docs[hi].size, st->val_documents--;
    return ZEROC_OK;
  }
  st->split = ZEROC_SPLIT_TAIL;
  for (int i = 0; i < p->ndocs; i++) {
    zeroc__doc_t *d = &p->docs[i];
    uint64_t tail = (uint64_t)floor(F * (double)d->size);
    ZEROC_CHECK(val_cut(d, d->size - tail, &d->val_cut));
  }
  return ZEROC_OK;
}

/* ---- the output directory ------------------------------------------------------------ */

/* "train_NNNNNN.bin" or "val_NNNNNN.bin" (six or more digits; prepare_run.c's
 * shard_name writes them): its stream and
 * index, or -1. */
static int shard_index(const char *name, int *stream) {
  const char *rest = NULL;
  if (!strncmp(name, "train_", 6))
    rest = name + 6, *stream = ZEROC__TRAIN;
  else if (!strncmp(name, "val_", 4))
    rest = name + 4, *stream = ZEROC__VAL;
  else
    return -1;
  size_t k = strspn(rest, "0123456789");
  if (k < 6 || k > 9 || strcmp(rest + k, ".bin")) return -1;
  return atoi(rest);
}

/* The directory may be new or hold other files, but not shards of an
 * earlier run unless force. `first` receives one such shard's name. */
static zeroc_result_t check_out_dir(const zeroc_prepare_config_t *c, int *exists) {
  struct stat st;
  *exists = 0;
  if (stat(c->out_dir, &st) != 0) {
    if (errno == ENOENT) return ZEROC_OK;
    return BAD("data: output directory (--out) '%s': %s", c->out_dir, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return BAD("data: output directory (--out) '%s' is a %s; accepted: a directory (created when "
               "missing)",
               c->out_dir, zeroc__file_kind(st.st_mode));
  *exists = 1;
  if (c->force) return ZEROC_OK;
  DIR *dir = opendir(c->out_dir);
  if (!dir) return BAD("data: output directory (--out) '%s': %s", c->out_dir, strerror(errno));
  struct dirent *e;
  char found[300] = "";
  int count = 0, s, aside = 0;
  while ((e = readdir(dir))) {
    if (shard_index(e->d_name, &s) >= 0 && count++ == 0)
      snprintf(found, sizeof found, "%s", e->d_name);
    aside |= !strncmp(e->d_name, ASIDE_PREFIX, strlen(ASIDE_PREFIX));
  }
  closedir(dir);
  /* a killed --force run's sets: judged again once the earlier one is restored */
  if (count && !aside)
    return BAD("data: output directory (--out) '%s' already holds %d shard%s (%s%s); pass --force "
               "to replace them, or choose another directory",
               c->out_dir, count, count == 1 ? "" : "s", found, count > 1 ? ", ..." : "");
  return ZEROC_OK;
}

int zeroc__prepare_is_stale(const char *name, const int nshards[2]) {
  int s, k = shard_index(name, &s);
  if (k < 0) return 0; /* not a shard */
  if (k >= nshards[s]) return 1;
  /* the very name this run wrote for index k: 6 digits, 7 from 10^6 on */
  char mine[32];
  snprintf(mine, sizeof mine, "%s_%06d.bin", s == ZEROC__VAL ? "val" : "train", k);
  return strcmp(name, mine) != 0;
}

/* Only one run writes an output directory at a time: an exclusive flock on
 * the directory itself (no file added to it), held until the run ends. A
 * second run refuses before writing anything. *fd: the locked descriptor. */
static zeroc_result_t lock_out_dir(const zeroc_prepare_config_t *c, int *fd) {
  *fd = open(c->out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0)
    return ZEROC_FAIL(ZEROC_ERR_IO, "data: output directory (--out) '%s': %s", c->out_dir,
                      strerror(errno));
  if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return ZEROC_OK;
  int e = errno;
  close(*fd);
  *fd = -1;
  if (e == EWOULDBLOCK)
    return BAD("data: output directory (--out) '%s' is being written by another zeroc data run; "
               "wait for it, or choose another directory",
               c->out_dir);
  return ZEROC_FAIL(ZEROC_ERR_IO, "data: locking the output directory '%s': %s", c->out_dir,
                    strerror(e));
}

/* Under the lock no other run writes here: temporaries of shards and of the
 * tokenizer are what killed runs (kill -9, a crash) left. Removed, and said. */
static void sweep_dead_temporaries(const char *out) {
  DIR *dir = opendir(out);
  if (!dir) return;
  struct dirent *e;
  int n = 0, s;
  char path[PATH_MAX], base[300];
  while ((e = readdir(dir))) {
    const char *t = strstr(e->d_name, ".tmp.");
    snprintf(base, sizeof base, "%.*s", t ? (int)(t - e->d_name) : 0, e->d_name);
    int shard_tmp = t && shard_index(base, &s) >= 0;
    if (!shard_tmp && strcmp(e->d_name, "tokenizer.json.new")) continue;
    snprintf(path, sizeof path, "%s/%s", out, e->d_name);
    if (unlink(path) == 0) n++;
  }
  closedir(dir);
  if (n)
    ZWARN(IO, "data: removed %d temporar%s left in '%s' by an interrupted run", n,
          n == 1 ? "y" : "ies", out);
}

/* After the new set is in place: shards of an earlier run past the new
 * counts go, so that "train_*.bin" names the new set alone. */
static zeroc_result_t remove_stale(const zeroc__prepare_t *p) {
  DIR *dir = opendir(p->cfg.out_dir);
  if (!dir) return ZEROC_FAIL(ZEROC_ERR_IO, "data: '%s': %s", p->cfg.out_dir, strerror(errno));
  struct dirent *e;
  zeroc_result_t res = ZEROC_OK;
  char path[PATH_MAX];
  while ((e = readdir(dir)) && res == ZEROC_OK) {
    if (!zeroc__prepare_is_stale(e->d_name, p->nshards)) continue;
    snprintf(path, sizeof path, "%s/%s", p->cfg.out_dir, e->d_name);
    if (unlink(path) != 0 && errno != ENOENT)
      res = ZEROC_FAIL(ZEROC_ERR_IO, "data: removing the earlier shard '%s': %s", path,
                       strerror(errno));
  }
  closedir(dir);
  return res;
}

/* ---- --force: the old set aside while the new one goes in ------------------------- */

/* Is `name` in --out a file of a finished set: a shard, or the tokenizer? */
static int set_file(const char *name) {
  int s;
  return shard_index(name, &s) >= 0 || !strcmp(name, "tokenizer.json");
}

/* Moves every set file of `from` into `to` (directories of one file system).
 * `skip_existing`: a name already in `to` stays where it is. */
static zeroc_result_t move_set(const char *from, const char *to, int skip_existing) {
  DIR *dir = opendir(from);
  if (!dir) return ZEROC_FAIL(ZEROC_ERR_IO, "data: '%s': %s", from, strerror(errno));
  zeroc_result_t res = ZEROC_OK;
  struct dirent *e;
  char a[PATH_MAX], b[PATH_MAX];
  struct stat st;
  while (res == ZEROC_OK && (e = readdir(dir))) {
    if (!set_file(e->d_name)) continue;
    snprintf(a, sizeof a, "%s/%s", from, e->d_name);
    snprintf(b, sizeof b, "%s/%s", to, e->d_name);
    if (skip_existing && lstat(b, &st) == 0) continue;
    if (rename(a, b) != 0)
      res = ZEROC_FAIL(ZEROC_ERR_IO, "data: moving '%s' to '%s': %s", a, b, strerror(errno));
  }
  closedir(dir);
  return res;
}

/* Removes every set file of `dir` (the new set, when the old one comes back). */
static void remove_set(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char a[PATH_MAX];
  while ((e = readdir(d)))
    if (set_file(e->d_name)) {
      snprintf(a, sizeof a, "%s/%s", dir, e->d_name);
      unlink(a);
    }
  closedir(d);
}

/* The old set back from `aside` into `out`. `all_moved`: the move aside had
 * finished, so set files in `out` are new ones, removed first; otherwise the
 * move stopped part way and `out` holds only old files. */
static zeroc_result_t restore_set(const char *out, const char *aside, int all_moved) {
  char done[PATH_MAX];
  snprintf(done, sizeof done, "%s/" ASIDE_DONE, aside);
  if (all_moved) remove_set(out);
  ZEROC_CHECK(move_set(aside, out, 1));
  unlink(done);
  ZEROC_CHECK(zeroc__rmtree(aside));
  return zeroc__fsync_dir(out);
}

/* Under the lock: an aside directory is what a --force run killed while
 * committing left; its old set comes back, whole. */
static zeroc_result_t recover_killed_commit(const char *out) {
  DIR *d = opendir(out);
  if (!d) return ZEROC_OK;
  struct dirent *e;
  char aside[PATH_MAX], done[PATH_MAX + 16];
  zeroc_result_t res = ZEROC_OK;
  struct stat st;
  while (res == ZEROC_OK && (e = readdir(d))) {
    if (strncmp(e->d_name, ASIDE_PREFIX, strlen(ASIDE_PREFIX))) continue;
    snprintf(aside, sizeof aside, "%s/%s", out, e->d_name);
    snprintf(done, sizeof done, "%s/" ASIDE_DONE, aside);
    res = restore_set(out, aside, lstat(done, &st) == 0);
    if (res == ZEROC_OK)
      ZWARN(IO,
            "data: a --force run was killed while putting its files in place in '%s'; the "
            "earlier set is restored",
            out);
  }
  closedir(d);
  return res;
}

/* The new set into place: shards, then the tokenizer. `placed`: how many. */
static zeroc_result_t place_new(zeroc__prepare_t *p, zeroc__afile_t *tokfile,
                                zeroc__fault_t *fault) {
  int placed = 0;
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < p->nshards[s]; i++) {
      ZEROC_FAULT_IN(fault, 0, "data.commit", (uint64_t)placed, NULL);
      ZEROC_CHECK(zeroc__afile_commit(p->shards[s] + i));
      placed++;
    }
  ZEROC_FAULT_IN(fault, 0, "data.commit", (uint64_t)placed, NULL);
  return zeroc__afile_commit(tokfile);
}

/* Renames every shard and the tokenizer into place. With --force the old set
 * first goes aside (one rename each, into a directory of --out) and comes
 * back if the new one cannot be placed whole; so --out holds one whole set,
 * old or new, also after a kill (the next run restores the old one). */
static zeroc_result_t commit(zeroc__prepare_t *p, zeroc__afile_t *tokfile) {
  zeroc__fault_t *fault = NULL;
  (void)zeroc__fault_parse(getenv("ZEROC_FAULT"), &fault); /* test-only; refused: none */
  zeroc__tls_error_clear();
  zeroc_result_t res = ZEROC_OK;
  char aside[PATH_MAX], done[PATH_MAX + 16];
  if (!p->cfg.force) {
    res = place_new(p, tokfile, fault);
    zeroc__fault_free(fault);
    return res;
  }
  snprintf(aside, sizeof aside, "%s/" ASIDE_PREFIX "%ld", p->cfg.out_dir, (long)getpid());
  snprintf(done, sizeof done, "%s/" ASIDE_DONE, aside);
  if (mkdir(aside, 0700) != 0) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "data: mkdir('%s'): %s", aside, strerror(errno));
    goto out;
  }
  res = move_set(p->cfg.out_dir, aside, 0);
  if (res == ZEROC_OK) res = zeroc__file_write_sync(done, "", 0);
  if (res == ZEROC_OK) res = zeroc__fsync_dir(p->cfg.out_dir);
  if (res != ZEROC_OK) {
    struct stat st;
    restore_set(p->cfg.out_dir, aside, lstat(done, &st) == 0);
    goto out;
  }
  res = place_new(p, tokfile, fault);
  if (res != ZEROC_OK) {
    /* the new files placed so far go, the old set comes back: no mix */
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    restore_set(p->cfg.out_dir, aside, 1);
    zeroc__tls_error_set(msg);
    goto out;
  }
  unlink(done);
  res = zeroc__rmtree(aside);
  if (res == ZEROC_OK) res = remove_stale(p); /* nothing old is left but other names */
out:
  zeroc__fault_free(fault);
  return res;
}

/* ---- the whole run -------------------------------------------------------------------- */

static zeroc_result_t load_tokenizer(zeroc__prepare_t *p, zeroc_tokenizer_t **tok) {
  zeroc_result_t r = zeroc_tokenizer_load(p->cfg.tokenizer, tok);
  if (r != ZEROC_OK) {
    /* keep the loader's reason; say which flag it was about */
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    return ZEROC_FAIL(r == ZEROC_ERR_NOMEM ? r : ZEROC_ERR_INVALID_ARG, "data: --tokenizer: %s",
                      msg);
  }
  int v = zeroc_tokenizer_vocab(*tok);
  /* uint16 shards up to 65536 ids; llm.c's uint32 format above (Llama 3, Qwen2) */
  p->width = zeroc_shard_token_bytes(v);
  p->tok = *tok;
  p->eot = p->stats.eot = zeroc_tokenizer_eot(*tok);
  /* add_prefix_space shows as "x" encoding like " x", or as "x" needing more
   * ids than its one byte (the encoder then refuses) */
  int32_t a[4], b[4];
  size_t na = 0, nb = 0;
  if (zeroc_tokenizer_encode(*tok, "x", 1, a, &na) != ZEROC_OK) {
    zeroc__tls_error_clear();
    p->space_cut = 1;
  } else {
    ZEROC_CHECK(zeroc_tokenizer_encode(*tok, " x", 2, b, &nb));
    p->space_cut = na == nb && !memcmp(a, b, na * sizeof *a);
  }
  p->stats.vocab = v;
  snprintf(p->stats.tokenizer_kind, sizeof p->stats.tokenizer_kind, "%s",
           zeroc_tokenizer_kind(*tok));
  return ZEROC_OK;
}

zeroc_result_t zeroc_text_prepare(const zeroc_prepare_config_t *cfg,
                                  zeroc_prepare_progress_fn progress, void *user,
                                  zeroc_prepare_stats_t *stats) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__prepare_t p;
  zeroc_tokenizer_t *tok = NULL;
  zeroc__afile_t tokfile = ZEROC_AFILE_INIT;
  int existed = 1, lockfd = -1, again;
  char path[PATH_MAX];
  memset(&p, 0, sizeof p);
  p.t0 = zeroc__now_s();
  p.progress = progress;
  p.user = user;
  /* everything that can be refused is checked before anything is written */
  ZEROC_TRY(read_config(cfg, &p.cfg));
  p.stats.threads = p.cfg.threads;
  ZEROC_TRY(check_out_dir(&p.cfg, &existed));
  ZEROC_TRY(expand_inputs(&p));
  if (p.stats.bytes_total == 0) {
    res = BAD("data: the %d input file%s hold%s no text", p.ndocs, p.ndocs == 1 ? "" : "s",
              p.ndocs == 1 ? "s" : "");
    goto fail;
  }
  ZEROC_TRY(load_tokenizer(&p, &tok));
  ZEROC_TRY(choose_split(&p));
  ZINFO(IO, "data: %d documents, %llu bytes, split %d, %d threads, tokenizer %s (vocab %d)",
        p.ndocs, (unsigned long long)p.stats.bytes_total, (int)p.stats.split, p.cfg.threads,
        p.stats.tokenizer_kind, p.stats.vocab);

  if (!existed) ZEROC_TRY(zeroc__mkdir_p(p.cfg.out_dir, 0755));
  res = lock_out_dir(&p.cfg, &lockfd);
  if (res != ZEROC_OK) {
    existed = 1; /* the other run's directory now: never removed here */
    goto fail;
  }
  /* what killed runs left, then (another run may have finished here since the
   * first look) the check again */
  sweep_dead_temporaries(p.cfg.out_dir);
  ZEROC_TRY(recover_killed_commit(p.cfg.out_dir));
  ZEROC_TRY(check_out_dir(&p.cfg, &again));
  ZEROC_TRY(zeroc__prepare_run(&p));
  if (p.stats.train_tokens == 0) {
    res = BAD("data: the inputs gave no train tokens (%llu val tokens); give more text or a "
              "smaller --val-fraction",
              (unsigned long long)p.stats.val_tokens);
    goto fail;
  }
  /* the tokenizer goes under a temporary name of its own, renamed with the shards */
  if ((size_t)snprintf(path, sizeof path, "%s/tokenizer.json.new", p.cfg.out_dir) >= sizeof path) {
    res = BAD("data: output directory '%s' is too long a name", p.cfg.out_dir);
    goto fail;
  }
  ZEROC_TRY(zeroc_tokenizer_save(tok, path));
  tokfile.path = malloc(strlen(path) + 1);
  tokfile.tmp = strdup(path);
  if (!tokfile.path || !tokfile.tmp) {
    free(tokfile.tmp);
    tokfile.tmp = NULL;
    unlink(path);
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
    goto fail;
  }
  snprintf(tokfile.path, strlen(path) + 1, "%s/tokenizer.json", p.cfg.out_dir);
  ZEROC_TRY(commit(&p, &tokfile));
  p.stats.done = 1;
  p.last_report = 0;
  p.stats.seconds = zeroc__now_s() - p.t0;
  if (progress) (void)progress(user, &p.stats); /* done: nothing left to stop */
fail:
  zeroc__afile_abort(&tokfile);
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < p.nshards[s]; i++) zeroc__afile_abort(p.shards[s] + i);
    free(p.shards[s]);
  }
  if (res != ZEROC_OK && !existed) rmdir(p.cfg.out_dir); /* only if still empty */
  if (lockfd >= 0) close(lockfd);                        /* the lock goes with it */
  p.stats.seconds = zeroc__now_s() - p.t0;
  if (stats) *stats = p.stats;
  for (int i = 0; i < p.ndocs; i++) free(p.docs[i].path);
  free(p.docs);
  zeroc_tokenizer_destroy(tok);
  return res;
}
