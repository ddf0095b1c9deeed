/*
 * io/data.c - token data sets: the llm.c shard reader (pread, tokens checked
 * against the vocabulary as they are read), the synthetic corpus, the rule
 * that maps (step, slot) to a sequence, the micro-batch of a data-parallel
 * rank, the resume position, and the shard writer. zeroc_data_create itself
 * is text/data_vocab.c (it reads the recorded tokenizer), over
 * zeroc__data_open here.
 */
#include "io/data.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "io/synth.h"

#define TAG_SHUFFLE 0x53485546464cULL /* "SHUFFL" */
#define TAG_STREAM  0x53545245414dULL /* "STREAM" */
#define TAG_FPRINT  0x46505249ULL     /* "FPRI" */

#define SYNTH_DEFAULT_SUCCESSORS 8
#define SYNTH_DEFAULT_NOISE      0.05

/* Tokens decoded per pread: 8 KiB of uint32 (4 KiB of uint16) on the stack. */
#define READ_CHUNK 2048

typedef struct shard {
  char *path;
  int fd;
  int width;      /* bytes per token: 2 (uint16) or 4 (uint32), from the header */
  uint64_t count; /* tokens, from the header */
  uint64_t start; /* index of its first token in the concatenated stream */
} shard_t;

struct zeroc_data {
  zeroc_data_config_t cfg;
  char *source;
  zeroc_data_kind_t kind;
  shard_t *files;
  int nfiles;
  uint64_t ntok, nseq, spe; /* tokens, sequences N, steps per epoch */
  zeroc__markov_t *markov;
  uint64_t fingerprint;
  char tokenizer[ZEROC_DATA_PATH_MAX]; /* the recorded tokenizer.json, or "" */
  int tokenizer_vocab;
};

/* ---- configuration ------------------------------------------------------------ */

static zeroc_result_t read_config(const zeroc_data_config_t *in, zeroc_data_config_t *out) {
  const zeroc_data_config_t dflt = ZEROC_DATA_CONFIG_INIT;
  *out = dflt;
  if (!in || in->magic != ZEROC_CONFIG_MAGIC || in->size < offsetof(zeroc_data_config_t, seed) ||
      in->size > 65536)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_data_config_t was not initialised with ZEROC_DATA_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in ? in->size : 0, in ? in->magic : 0);
  memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  if (out->seed == (uint64_t)ZEROC_UNSET) out->seed = 1;
  if (out->synth_successors == 0) out->synth_successors = SYNTH_DEFAULT_SUCCESSORS;
  if (out->synth_noise == 0) out->synth_noise = SYNTH_DEFAULT_NOISE;
  if (out->vocab < 2)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: vocab %d; accepted 2..%d", out->vocab,
                      ZEROC_DATA_VOCAB_MAX);
  if (out->seq < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: seq (T) %d; accepted >= 1", out->seq);
  if (out->global_batch < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "data: global batch %d; accepted >= 1 (batch x grad-accum x dp)",
                      out->global_batch);
  if (out->shuffle != 0 && out->shuffle != 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: shuffle %d; accepted 0 or 1", out->shuffle);
  return ZEROC_OK;
}

static int is_synthetic(const char *source) { return !source || !strcmp(source, "synthetic"); }

/* ---- shards ------------------------------------------------------------------- */

static int32_t le32(const unsigned char *p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24);
}

/* Opens one shard and checks its header against its size. */
static zeroc_result_t open_shard(shard_t *s, const char *path) {
  zeroc_result_t res = ZEROC_OK;
  unsigned char h[ZEROC_SHARD_HEADER_BYTES];
  struct stat st;
  s->fd = -1;
  s->path = strdup(path);
  if (!s->path) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
  res = zeroc__open_regular(path, "data file", &s->fd, &st);
  if (res != ZEROC_OK && !S_ISDIR(st.st_mode)) goto fail;
  if (res != ZEROC_OK) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "data file '%s' is a directory; give a .bin file or a glob such as "
                     "'%s/*.bin'",
                     path, path);
    goto fail;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (size < ZEROC_SHARD_HEADER_BYTES) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "data file '%s' is %llu bytes, shorter than the %d-byte llm.c shard header "
                     "(truncated header)",
                     path, (unsigned long long)size, ZEROC_SHARD_HEADER_BYTES);
    goto fail;
  }
  ssize_t got;
  do got = pread(s->fd, h, sizeof h, 0);
  while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof h) {
    res = ZEROC_FAIL(ZEROC_ERR_IO, "data file '%s': reading the %d-byte header: %s", path,
                     ZEROC_SHARD_HEADER_BYTES, got < 0 ? strerror(errno) : "short read");
    goto fail;
  }
  int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
  if (magic != ZEROC_SHARD_MAGIC && magic != ZEROC_SHARD_MAGIC_U32) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "data file '%s': magic %d (0x%08x) at byte 0 is not the llm.c token shard "
                     "magic %d (uint16 tokens) or %d (uint32); is it a token shard?",
                     path, magic, (unsigned)magic, ZEROC_SHARD_MAGIC, ZEROC_SHARD_MAGIC_U32);
    goto fail;
  }
  int u32 = magic == ZEROC_SHARD_MAGIC_U32;
  int want_version = u32 ? ZEROC_SHARD_VERSION_U32 : ZEROC_SHARD_VERSION;
  if (version != want_version) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "data file '%s': shard version %d at byte 4; supported: %d (%s tokens, "
                     "magic %d)",
                     path, version, want_version, u32 ? "uint32" : "uint16", magic);
    goto fail;
  }
  s->width = u32 ? 4 : 2;
  if (count < 0) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "data file '%s': token count %d at byte 8 is negative",
                     path, count);
    goto fail;
  }
  uint64_t need = ZEROC_SHARD_HEADER_BYTES + (uint64_t)s->width * (uint64_t)count;
  if (size < need) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "data file '%s' is %llu bytes, shorter than its header's count of %d tokens "
                     "needs (%llu bytes = 1024 + %d x count): truncated",
                     path, (unsigned long long)size, count, (unsigned long long)need, s->width);
    goto fail;
  }
  if (size > need) {
    res = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                     "data file '%s' is %llu bytes, longer than its header's count of %d tokens "
                     "needs (%llu bytes = 1024 + %d x count): wrong count or trailing data",
                     path, (unsigned long long)size, count, (unsigned long long)need, s->width);
    goto fail;
  }
  s->count = (uint64_t)count;
  return ZEROC_OK;
fail:
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  free(s->path);
  s->path = NULL;
  return res;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* CRC-32C of a shard's header, first MiB and last MiB of tokens (all of a
 * file under 2 MiB + header). Names and sizes alone let a re-tokenised data
 * set of the same shape pass for the checkpoint's; reading every byte of
 * every shard would cost minutes at each start on a large corpus, while the
 * ends catch a re-tokenisation or another corpus at a fixed 2 MiB a file. */
#define FPRINT_SPAN (1u << 20)
static zeroc_result_t content_crc(const shard_t *s, uint32_t *out) {
  uint64_t size = ZEROC_SHARD_HEADER_BYTES + (uint64_t)s->width * s->count;
  uint64_t spans[2][2] = {{0, size < ZEROC_SHARD_HEADER_BYTES + 2ull * FPRINT_SPAN
                                  ? size : ZEROC_SHARD_HEADER_BYTES + FPRINT_SPAN},
                          {0, 0}};
  if (spans[0][1] < size) spans[1][0] = size - FPRINT_SPAN, spans[1][1] = size;
  unsigned char *buf = malloc(ZEROC_SHARD_HEADER_BYTES + FPRINT_SPAN);
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for a fingerprint");
  uint32_t crc = 0;
  for (int k = 0; k < 2; k++) {
    for (uint64_t at = spans[k][0]; at < spans[k][1];) {
      size_t want = (size_t)(spans[k][1] - at < FPRINT_SPAN ? spans[k][1] - at : FPRINT_SPAN);
      ssize_t got;
      do got = pread(s->fd, buf, want, (off_t)at);
      while (got < 0 && errno == EINTR);
      if (got <= 0) {
        zeroc_result_t r = ZEROC_FAIL(ZEROC_ERR_IO, "data file '%s': reading byte %llu for its fingerprint: %s",
                                      s->path, (unsigned long long)at, got < 0 ? strerror(errno) : "short read");
        free(buf);
        return r;
      }
      crc = zeroc__crc32c(crc, buf, (size_t)got);
      at += (uint64_t)got;
    }
  }
  free(buf);
  *out = crc;
  return ZEROC_OK;
}

static uint64_t hash_str(uint64_t h, const char *s) {
  /* FNV-1a, folded into the running hash */
  uint64_t f = 0xcbf29ce484222325ULL;
  for (; *s; s++) f = (f ^ (unsigned char)*s) * 0x100000001b3ULL;
  return zeroc__hash2(h, f);
}

/* Expands the source to sorted paths and opens every shard. */
static zeroc_result_t open_files(zeroc_data_t *d) {
  zeroc_result_t res = ZEROC_OK;
  glob_t g;
  int have_glob = 0;
  char **paths = NULL;
  size_t n = 0;
  const char *src = d->source;
  if (strpbrk(src, "*?[")) {
    int rc = glob(src, 0, NULL, &g);
    have_glob = 1;
    if (rc == GLOB_NOMATCH) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "data '%s': the glob matches no files (accepted: a .bin path, a glob of "
                       ".bin shards, or 'synthetic')",
                       src);
      goto fail;
    }
    if (rc != 0) {
      res = ZEROC_FAIL(ZEROC_ERR_IO, "data '%s': glob failed (%s)", src,
                       rc == GLOB_NOSPACE ? "out of memory" : "read error");
      goto fail;
    }
    n = g.gl_pathc;
    paths = malloc(n * sizeof *paths);
    if (!paths) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
      goto fail;
    }
    for (size_t i = 0; i < n; i++) paths[i] = g.gl_pathv[i];
    /* byte order, not the locale's collation: every rank and machine agrees */
    qsort(paths, n, sizeof *paths, cmp_str);
  } else {
    n = 1;
    paths = malloc(sizeof *paths);
    if (!paths) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
      goto fail;
    }
    paths[0] = (char *)src;
  }
  if (n > INT_MAX / 2) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data '%s': %zu files is too many", src, n);
    goto fail;
  }
  d->files = calloc(n, sizeof *d->files);
  if (!d->files) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %zu files", n);
    goto fail;
  }
  uint64_t h = zeroc__hash2(TAG_FPRINT, ZEROC_DATA_FILES);
  for (size_t i = 0; i < n; i++) {
    ZEROC_TRY(open_shard(&d->files[i], paths[i]));
    d->nfiles = (int)i + 1;
    d->files[i].start = d->ntok;
    d->ntok += d->files[i].count;
    const char *base = strrchr(paths[i], '/');
    h = hash_str(h, base ? base + 1 : paths[i]);
    h = zeroc__hash2(h, d->files[i].count);
    uint32_t crc = 0;
    ZEROC_TRY(content_crc(&d->files[i], &crc));
    h = zeroc__hash2(h, crc);
  }
  d->fingerprint = h;
fail:
  free(paths);
  if (have_glob) globfree(&g);
  return res;
}

/* A directory stands for its train_*.bin shards (what `zeroc data` writes);
 * one without any is left as it is, for open_shard to refuse by name. */
static zeroc_result_t resolve_dir(zeroc_data_t *d) {
  struct stat st;
  char pat[PATH_MAX];
  glob_t g;
  if (strpbrk(d->source, "*?[") || stat(d->source, &st) != 0 || !S_ISDIR(st.st_mode))
    return ZEROC_OK;
  size_t n = strlen(d->source);
  while (n > 1 && d->source[n - 1] == '/') n--;
  if ((size_t)snprintf(pat, sizeof pat, "%.*s/train_*.bin", (int)n, d->source) >= sizeof pat)
    return ZEROC_OK;
  int rc = glob(pat, 0, NULL, &g);
  if (rc == 0) {
    char *src = strdup(pat);
    if (!src) {
      globfree(&g);
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
    }
    free(d->source);
    d->source = src;
    d->cfg.source = src;
  }
  if (rc == 0 || rc == GLOB_NOSPACE) globfree(&g);
  return ZEROC_OK;
}

/* The tokenizer a shard set records (<dir of the first shard>/tokenizer.json)
 * must fit the model: a token id >= vocab would otherwise stop training at
 * the first batch that holds one, maybe hours in. A file there that is not a
 * tokenizer zeroc reads is only reported (the shards may come from elsewhere). */
static zeroc_result_t check_tokenizer(zeroc_data_t *d, zeroc__vocab_probe_t probe) {
  const char *first = d->files[0].path, *slash = strrchr(first, '/');
  char path[ZEROC_DATA_PATH_MAX];
  int len = slash ? (int)(slash - first) + 1 : 0;
  if ((size_t)snprintf(path, sizeof path, "%.*stokenizer.json", len, first) >= sizeof path)
    return ZEROC_OK;
  if (access(path, F_OK) != 0) return ZEROC_OK;
  int v = 0;
  if (probe(path, &v) != ZEROC_OK) {
    ZWARN(IO,
          "data: '%s' beside the shards is not a tokenizer zeroc reads (%s); the data's "
          "vocabulary is checked token by token only",
          path, zeroc__tls_error());
    zeroc__tls_error_clear();
    return ZEROC_OK;
  }
  if (v > d->cfg.vocab)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "data '%s' was tokenized with '%s' (vocab %d), more ids than the model's "
                      "vocab %d: use --vocab %d or more, or data made with a smaller tokenizer",
                      d->source, path, v, d->cfg.vocab, v);
  memcpy(d->tokenizer, path, strlen(path) + 1);
  d->tokenizer_vocab = v;
  return ZEROC_OK;
}

/* Reads tokens [start, start + n) of the stream, checking each against V. */
static zeroc_result_t read_tokens(const zeroc_data_t *d, uint64_t start, size_t n, int32_t *out) {
  unsigned char buf[4 * READ_CHUNK];
  /* the last file whose first token is <= start */
  int lo = 0, hi = d->nfiles - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (d->files[mid].start <= start)
      lo = mid;
    else
      hi = mid - 1;
  }
  int f = lo;
  while (n > 0) {
    while (f < d->nfiles && start >= d->files[f].start + d->files[f].count) f++;
    if (f >= d->nfiles)
      return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "data: token %llu is past the end (%llu tokens)",
                        (unsigned long long)start, (unsigned long long)d->ntok);
    const shard_t *s = &d->files[f];
    uint64_t in_file = start - s->start;
    size_t take = n;
    if (take > READ_CHUNK) take = READ_CHUNK;
    if (take > s->count - in_file) take = (size_t)(s->count - in_file);
    int w = s->width;
    uint64_t off = ZEROC_SHARD_HEADER_BYTES + (uint64_t)w * in_file;
    size_t want = (size_t)w * take, got = 0;
    while (got < want) {
      ssize_t r = pread(s->fd, buf + got, want - got, (off_t)(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0)
        return ZEROC_FAIL(ZEROC_ERR_IO, "data file '%s': pread(%zu bytes at byte %llu): %s",
                          s->path, want - got, (unsigned long long)(off + got), strerror(errno));
      if (r == 0)
        return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                          "data file '%s': end of file at byte %llu while reading %zu bytes (the "
                          "file shrank after it was opened?)",
                          s->path, (unsigned long long)(off + got), want - got);
      got += (size_t)r;
    }
    for (size_t i = 0; i < take; i++) {
      /* uint32 above 2^31 - 1 reads negative: out of every vocabulary */
      int32_t t = w == 2 ? (int32_t)(buf[2 * i] | buf[2 * i + 1] << 8) : le32(buf + 4 * i);
      if (t < 0 || t >= d->cfg.vocab)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "data file '%s': token %lld at byte offset %llu (token %llu of the "
                          "file) is >= vocab %d; the data needs a larger --vocab",
                          s->path, t < 0 ? (long long)(uint32_t)t : (long long)t,
                          (unsigned long long)(off + (uint64_t)w * i),
                          (unsigned long long)(in_file + i), d->cfg.vocab);
      out[i] = t;
    }
    out += take;
    start += take;
    n -= take;
  }
  return ZEROC_OK;
}

/* ---- the data set ------------------------------------------------------------- */

zeroc_result_t zeroc__data_open(const zeroc_data_config_t *cfg, zeroc__vocab_probe_t probe,
                                zeroc_data_t **out) {
  zeroc_result_t res = ZEROC_OK;
  *out = NULL;
  zeroc_data_t *d = calloc(1, sizeof *d);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
  ZEROC_TRY(read_config(cfg, &d->cfg));
  d->source = strdup(is_synthetic(d->cfg.source) ? "synthetic" : d->cfg.source);
  if (!d->source) {
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory");
    goto fail;
  }
  if (!*d->source) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "data: empty source; accepted: 'synthetic', a .bin path or a glob");
    goto fail;
  }
  d->cfg.source = d->source;
  uint64_t T = (uint64_t)d->cfg.seq, G = (uint64_t)d->cfg.global_batch;
  if (is_synthetic(d->source)) {
    d->kind = ZEROC_DATA_SYNTHETIC;
    ZEROC_TRY(zeroc__markov_create(d->cfg.vocab, d->cfg.synth_successors, d->cfg.synth_noise,
                                   d->cfg.seed, &d->markov));
    d->nseq = d->spe = UINT64_MAX;
    uint64_t h = zeroc__hash2(TAG_FPRINT, ZEROC_DATA_SYNTHETIC), nb;
    memcpy(&nb, &d->cfg.synth_noise, sizeof nb);
    h = zeroc__hash2(h, (uint64_t)d->cfg.vocab);
    h = zeroc__hash2(h, d->cfg.seed);
    h = zeroc__hash2(h, (uint64_t)d->cfg.synth_successors);
    d->fingerprint = zeroc__hash2(h, nb);
    ZINFO(IO, "data: synthetic Markov corpus, V %d, loss floor %.6f nats/token", d->cfg.vocab,
          d->markov->entropy_rate);
  } else {
    d->kind = ZEROC_DATA_FILES;
    ZEROC_TRY(resolve_dir(d));
    ZEROC_TRY(open_files(d));
    if (probe) ZEROC_TRY(check_tokenizer(d, probe));
    d->nseq = d->ntok >= 1 ? (d->ntok - 1) / T : 0;
    if (d->nseq < G) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "data '%s' (%d file%s, %llu tokens) holds %llu sequences of T+1 = %llu "
                       "tokens; one global batch needs %llu sequences (%llu tokens): use more "
                       "data or a smaller batch or --seq",
                       d->source, d->nfiles, d->nfiles == 1 ? "" : "s", (unsigned long long)d->ntok,
                       (unsigned long long)d->nseq, (unsigned long long)(T + 1),
                       (unsigned long long)G, (unsigned long long)(G * T + 1));
      goto fail;
    }
    d->spe = d->nseq / G;
    ZINFO(IO, "data: '%s': %d files, %llu tokens, %llu sequences of %llu+1, %llu steps per epoch",
          d->source, d->nfiles, (unsigned long long)d->ntok, (unsigned long long)d->nseq,
          (unsigned long long)T, (unsigned long long)d->spe);
  }
  *out = d;
  return ZEROC_OK;
fail:
  zeroc_data_destroy(d);
  return res;
}

void zeroc_data_destroy(zeroc_data_t *d) {
  if (!d) return;
  for (int i = 0; i < d->nfiles; i++) {
    if (d->files[i].fd >= 0) close(d->files[i].fd);
    free(d->files[i].path);
  }
  free(d->files);
  zeroc__markov_destroy(d->markov);
  free(d->source);
  free(d);
}

void zeroc_data_info(const zeroc_data_t *d, zeroc_data_info_t *o) {
  memset(o, 0, sizeof *o);
  o->kind = d->kind;
  o->vocab = d->cfg.vocab;
  o->seq = d->cfg.seq;
  o->global_batch = d->cfg.global_batch;
  o->shuffle = d->cfg.shuffle;
  o->seed = d->cfg.seed;
  o->num_files = d->nfiles;
  o->num_tokens = d->ntok;
  o->num_sequences = d->nseq;
  o->steps_per_epoch = d->spe;
  o->loss_floor = d->markov ? d->markov->entropy_rate : NAN;
  o->unigram_entropy = d->markov ? d->markov->unigram_entropy : NAN;
  o->fingerprint = d->fingerprint;
  memcpy(o->tokenizer, d->tokenizer, sizeof o->tokenizer);
  o->tokenizer_vocab = d->tokenizer_vocab;
}

zeroc_result_t zeroc_data_sequence_index(const zeroc_data_t *d, uint64_t step, int slot,
                                         uint64_t *seq) {
  uint64_t G = (uint64_t)d->cfg.global_batch;
  if (slot < 0 || (uint64_t)slot >= G)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: slot %d; accepted 0..%llu (global batch %llu)",
                      slot, (unsigned long long)(G - 1), (unsigned long long)G);
  if (d->kind == ZEROC_DATA_SYNTHETIC) {
    /* an endless stream: no epochs; shuffling independent draws changes nothing */
    uint64_t j;
    if (__builtin_mul_overflow(step, G, &j) || __builtin_add_overflow(j, (uint64_t)slot, &j))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: step %llu x global batch %llu overflows",
                        (unsigned long long)step, (unsigned long long)G);
    *seq = j;
    return ZEROC_OK;
  }
  uint64_t epoch = step / d->spe;
  uint64_t pos = (step % d->spe) * G + (uint64_t)slot; /* < spe*G <= N */
  if (d->cfg.shuffle)
    pos = zeroc__permute(pos, d->nseq, zeroc__hash2(zeroc__hash2(d->cfg.seed, TAG_SHUFFLE), epoch));
  *seq = pos;
  return ZEROC_OK;
}

zeroc_result_t zeroc_data_read_sequence(const zeroc_data_t *d, uint64_t seq, int32_t *tokens) {
  size_t n = (size_t)d->cfg.seq + 1;
  if (d->kind == ZEROC_DATA_SYNTHETIC) {
    zeroc__markov_sequence(d->markov, seq, tokens, n);
    return ZEROC_OK;
  }
  if (seq >= d->nseq)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data '%s': sequence %llu; accepted 0..%llu",
                      d->source, (unsigned long long)seq, (unsigned long long)(d->nseq - 1));
  return read_tokens(d, seq * (uint64_t)d->cfg.seq, n, tokens);
}

zeroc_result_t zeroc_data_first_slot(const zeroc_data_t *d, const zeroc_data_layout_t *l,
                                     int micro_step, int *first_slot) {
  if (l->dp < 1 || l->micro_batch < 1 || l->grad_accum < 1 || l->dp_rank < 0 || l->dp_rank >= l->dp)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "data layout dp %d, dp_rank %d, micro_batch %d, grad_accum %d: each size "
                      "must be >= 1 and 0 <= dp_rank < dp",
                      l->dp, l->dp_rank, l->micro_batch, l->grad_accum);
  int64_t g = (int64_t)l->dp * l->micro_batch * l->grad_accum;
  if (g != d->cfg.global_batch)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "data layout: dp %d x micro_batch %d x grad_accum %d = %lld sequences, but "
                      "the data set's global batch is %d",
                      l->dp, l->micro_batch, l->grad_accum, (long long)g, d->cfg.global_batch);
  if (micro_step < 0 || micro_step >= l->grad_accum)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "data: micro-step %d; accepted 0..%d", micro_step,
                      l->grad_accum - 1);
  *first_slot = (micro_step * l->dp + l->dp_rank) * l->micro_batch;
  return ZEROC_OK;
}

zeroc_result_t zeroc_data_batch(const zeroc_data_t *d, const zeroc_data_layout_t *l, uint64_t step,
                                int micro_step, int32_t *inputs, int32_t *targets) {
  zeroc_result_t res = ZEROC_OK;
  int first;
  size_t T = (size_t)d->cfg.seq;
  ZEROC_CHECK(zeroc_data_first_slot(d, l, micro_step, &first));
  int32_t *tok = malloc((T + 1) * sizeof *tok);
  if (!tok) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "data: out of host memory for %zu tokens", T + 1);
  for (int i = 0; i < l->micro_batch; i++) {
    uint64_t j;
    ZEROC_TRY(zeroc_data_sequence_index(d, step, first + i, &j));
    ZEROC_TRY(zeroc_data_read_sequence(d, j, tok));
    memcpy(inputs + (size_t)i * T, tok, T * sizeof *tok);
    memcpy(targets + (size_t)i * T, tok + 1, T * sizeof *tok);
  }
fail:
  free(tok);
  return res;
}

void zeroc_data_position(const zeroc_data_t *d, uint64_t step, zeroc_data_position_t *o) {
  memset(o, 0, sizeof *o);
  o->step = step;
  o->epoch = d->kind == ZEROC_DATA_SYNTHETIC ? 0 : step / d->spe;
  o->step_in_epoch = d->kind == ZEROC_DATA_SYNTHETIC ? step : step % d->spe;
  o->seed = d->cfg.seed;
  o->shuffle = d->cfg.shuffle;
  o->seq = d->cfg.seq;
  o->global_batch = d->cfg.global_batch;
  o->num_sequences = d->nseq;
  o->fingerprint = d->fingerprint;
}

zeroc_result_t zeroc_data_check_position(const zeroc_data_t *d, const zeroc_data_position_t *p) {
  zeroc_data_position_t now;
  zeroc_data_position(d, p->step, &now);
  if (p->fingerprint != now.fingerprint || p->num_sequences != now.num_sequences)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "resume: the checkpoint was written with other data (fingerprint %016llx, "
                      "%llu sequences); this run's data '%s' has fingerprint %016llx, %llu "
                      "sequences (shard names, sizes, contents or the synthetic source differ)",
                      (unsigned long long)p->fingerprint, (unsigned long long)p->num_sequences,
                      d->source, (unsigned long long)now.fingerprint,
                      (unsigned long long)now.num_sequences);
  if (p->seq != now.seq || p->global_batch != now.global_batch)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "resume: the checkpoint used seq %d and global batch %d; this run has seq "
                      "%d and global batch %d (batch x grad-accum x dp must match to continue "
                      "the same sequence order)",
                      p->seq, p->global_batch, now.seq, now.global_batch);
  if (p->seed != now.seed || p->shuffle != now.shuffle)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "resume: the checkpoint used seed %llu with shuffle %s; this run has seed "
                      "%llu with shuffle %s",
                      (unsigned long long)p->seed, p->shuffle ? "on" : "off",
                      (unsigned long long)now.seed, now.shuffle ? "on" : "off");
  if (p->epoch != now.epoch || p->step_in_epoch != now.step_in_epoch)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "resume: step %llu is recorded at epoch %llu step %llu, but this data "
                      "places it at epoch %llu step %llu",
                      (unsigned long long)p->step, (unsigned long long)p->epoch,
                      (unsigned long long)p->step_in_epoch, (unsigned long long)now.epoch,
                      (unsigned long long)now.step_in_epoch);
  return ZEROC_OK;
}

/* ---- writing shards ----------------------------------------------------------- */

struct zeroc_shard_writer {
  zeroc__afile_t f;
  uint64_t count;
  int width; /* bytes per token: 2 or 4 */
};

int zeroc_shard_token_bytes(int vocab) { return vocab <= 65536 ? 2 : 4; }

zeroc_result_t zeroc_shard_writer_create(const char *path, zeroc_shard_writer_t **out) {
  return zeroc_shard_writer_create_width(path, 2, out);
}

zeroc_result_t zeroc_shard_writer_create_width(const char *path, int token_bytes,
                                               zeroc_shard_writer_t **out) {
  zeroc_result_t res = ZEROC_OK;
  static const unsigned char zeros[ZEROC_SHARD_HEADER_BYTES];
  if (!out || !path || (token_bytes != 2 && token_bytes != 4))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_shard_writer_create_width: token_bytes %d; accepted 2 (uint16) or 4 "
                      "(uint32), with path and out not NULL",
                      token_bytes);
  *out = NULL;
  zeroc_shard_writer_t *w = calloc(1, sizeof *w);
  if (!w) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "shard writer: out of host memory");
  w->f.fd = -1;
  w->width = token_bytes;
  ZEROC_TRY(zeroc__afile_open(&w->f, path));
  /* the real header goes in at finish, once the count is known */
  ZEROC_TRY(zeroc__afile_write(&w->f, zeros, sizeof zeros));
  *out = w;
  return ZEROC_OK;
fail:
  zeroc_shard_writer_destroy(w);
  return res;
}

zeroc_result_t zeroc_shard_writer_append(zeroc_shard_writer_t *w, const int32_t *tokens, size_t n) {
  unsigned char buf[4 * READ_CHUNK];
  int wd = w->width;
  int32_t max = wd == 2 ? 65535 : INT32_MAX;
  if (n > (uint64_t)INT32_MAX - w->count)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "shard '%s': %llu + %zu tokens passes the llm.c limit of %d per shard "
                      "(the header count is int32); start another shard",
                      w->f.path, (unsigned long long)w->count, n, INT32_MAX);
  for (size_t i = 0; i < n;) {
    size_t k = n - i < READ_CHUNK ? n - i : READ_CHUNK;
    for (size_t j = 0; j < k; j++) {
      int32_t t = tokens[i + j];
      if (t < 0 || t > max)
        return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                          "shard '%s': token %d (index %zu of this append); accepted 0..%d in a "
                          "%s shard%s",
                          w->f.path, t, i + j, max, wd == 2 ? "uint16" : "uint32",
                          wd == 2 && t > 0 ? " (ids above 65535 need the uint32 format)" : "");
      for (int b = 0; b < wd; b++)
        buf[wd * j + (size_t)b] = (unsigned char)((uint32_t)t >> (8 * b));
    }
    ZEROC_CHECK(zeroc__afile_write(&w->f, buf, (size_t)wd * k));
    w->count += k;
    i += k;
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc_shard_writer_finish(zeroc_shard_writer_t *w) {
  unsigned char h[12];
  int32_t v[3] = {w->width == 4 ? ZEROC_SHARD_MAGIC_U32 : ZEROC_SHARD_MAGIC,
                  w->width == 4 ? ZEROC_SHARD_VERSION_U32 : ZEROC_SHARD_VERSION, (int32_t)w->count};
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 4; b++) h[4 * i + b] = (unsigned char)((uint32_t)v[i] >> (8 * b));
  ZEROC_CHECK(zeroc__afile_pwrite(&w->f, h, sizeof h, 0));
  return zeroc__afile_commit(&w->f);
}

void zeroc_shard_writer_destroy(zeroc_shard_writer_t *w) {
  if (!w) return;
  zeroc__afile_abort(&w->f);
  free(w);
}

zeroc_result_t zeroc_data_write_synthetic(const zeroc_data_config_t *cfg, const char *prefix,
                                          uint64_t tokens, uint64_t tokens_per_shard,
                                          int *num_files) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_data_config_t c;
  zeroc__markov_t *m = NULL;
  zeroc_shard_writer_t *w = NULL;
  int32_t buf[READ_CHUNK];
  int files = 0;
  if (num_files) *num_files = 0;
  /* seq and global batch do not matter here; give read_config valid ones */
  zeroc_data_config_t tmp = *cfg;
  if (tmp.size >= offsetof(zeroc_data_config_t, seed)) tmp.seq = tmp.global_batch = 1;
  ZEROC_TRY(read_config(&tmp, &c));
  if (!is_synthetic(c.source)) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "write_synthetic: source '%s'; only 'synthetic' (or NULL) is accepted",
                     c.source);
    goto fail;
  }
  if (tokens_per_shard < 1 || tokens_per_shard > INT32_MAX) {
    res =
        ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "write_synthetic: tokens per shard %llu; accepted 1..%d",
                   (unsigned long long)tokens_per_shard, INT32_MAX);
    goto fail;
  }
  ZEROC_TRY(zeroc__markov_create(c.vocab, c.synth_successors, c.synth_noise, c.seed, &m));
  zeroc__rng_t r;
  zeroc__rng_seed(&r, zeroc__hash2(c.seed, TAG_STREAM));
  int x = zeroc__markov_start(m, &r);
  uint64_t done = 0;
  while (done < tokens) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s_%06d.bin", prefix, files) >= sizeof path) {
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "write_synthetic: prefix '%s' is too long", prefix);
      goto fail;
    }
    ZEROC_TRY(zeroc_shard_writer_create_width(path, zeroc_shard_token_bytes(c.vocab), &w));
    uint64_t in_shard = tokens - done < tokens_per_shard ? tokens - done : tokens_per_shard;
    for (uint64_t i = 0; i < in_shard;) {
      size_t k = in_shard - i < READ_CHUNK ? (size_t)(in_shard - i) : READ_CHUNK;
      for (size_t j = 0; j < k; j++) {
        buf[j] = x;
        x = zeroc__markov_next(m, x, &r);
      }
      ZEROC_TRY(zeroc_shard_writer_append(w, buf, k));
      i += k;
    }
    ZEROC_TRY(zeroc_shard_writer_finish(w));
    zeroc_shard_writer_destroy(w);
    w = NULL;
    done += in_shard;
    files++;
  }
  if (num_files) *num_files = files;
fail:
  zeroc_shard_writer_destroy(w);
  zeroc__markov_destroy(m);
  return res;
}
