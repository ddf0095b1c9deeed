/*
 * apps/data.c - `zeroc data`: text files to llm.c token shards (the library's
 * zeroc_text_prepare, zeroc/prepare.h). This file parses the flags and prints
 * the progress line and the summary; the contract is docs/cli.md, the rules
 * docs/data.md.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "zeroc/prepare.h"
#include "zeroc/zeroc.h"

static void usage(void) {
  printf(
      "usage: zeroc data --tokenizer bytes|FILE --out DIR [flags] FILE|GLOB...\n"
      "  turns text files into llm.c token shards DIR/train_NNNNNN.bin, DIR/val_NNNNNN.bin\n"
      "  and DIR/tokenizer.json (the tokenizer used); each file is one document\n"
      "  --tokenizer     bytes (ids = the bytes, vocab 256), a Hugging Face tokenizer.json,\n"
      "                  or a GPT-2 vocab.json with merges.txt beside it (required)\n"
      "  --out DIR       the shard directory, created when missing (required)\n"
      "  --val-fraction  F, 0 <= F < 1: the share of the text for DIR/val_*.bin, 0 = none (0.05)\n"
      "  --shard-tokens  tokens per shard, 1..2147483647 (100000000)\n"
      "  --threads N     tokenizing threads (the cores available)\n"
      "  --force         replace the shards an earlier run left in DIR\n"
      "  --quiet         no progress line, only the summary\n"
      "Globs are expanded by zeroc too, so they may be quoted; after --, every argument is an\n"
      "input. docs/data.md has the rules (documents, the split, safe writing).\n");
}

typedef struct data_opts {
  const char *tokenizer, *out, *val_text;
  double val_fraction;
  int64_t shard_tokens;
  int threads, force, quiet;
  int set_val, set_shard, set_threads;
} data_opts_t;

/* A library message for the user (zarg_user_msg) without the "data: " prefix. */
static const char *plain(const char *e) {
  e = zarg_user_msg(e);
  return strncmp(e, "data: ", 6) ? e : e + 6;
}

/* ---- progress ------------------------------------------------------------------ */

typedef struct progress {
  int tty, quiet;
  double next_pct; /* not a tty: a line at every 10% of the text */
  int shown;
} progress_t;

/* Set by SIGINT, SIGTERM, SIGHUP: the run stops at its next progress call and
 * leaves nothing behind (the library removes what it wrote). */
static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static int on_progress(void *user, const zeroc_prepare_stats_t *s) {
  progress_t *pr = user;
  if (g_signal) return 1;
  if (pr->quiet || s->done) return 0;
  double pct = s->bytes_total ? 100.0 * (double)s->bytes_done / (double)s->bytes_total : 100;
  if (!pr->tty && pct < pr->next_pct) return 0;
  while (!pr->tty && pr->next_pct <= pct) pr->next_pct += 10;
  double tok = (double)(s->train_tokens + s->val_tokens);
  fprintf(stderr,
          "%sdata: %5.1f%% | %d/%d documents | %.1f/%.1f MB | %llu train + %llu val tokens | %.0f "
          "tok/s%s",
          pr->tty ? "\r" : "", pct, s->documents_done, s->documents, s->bytes_done / 1e6,
          s->bytes_total / 1e6, (unsigned long long)s->train_tokens,
          (unsigned long long)s->val_tokens, s->seconds > 0 ? tok / s->seconds : 0,
          pr->tty ? "   " : "\n");
  fflush(stderr);
  pr->shown = 1;
  return 0;
}

static void print_summary(const data_opts_t *o, const zeroc_prepare_stats_t *s) {
  static const char *const splits[] = {"none", "whole documents", "the tail of each document"};
  double tok = (double)(s->train_tokens + s->val_tokens);
  printf("zeroc data: %d document%s, %.2f MB of text, tokenizer %s (vocab %d%s) on %d thread%s\n",
         s->documents, s->documents == 1 ? "" : "s", s->bytes_total / 1e6, s->tokenizer_kind,
         s->vocab, s->eot >= 0 ? ", end-of-text before each document" : "", s->threads,
         s->threads == 1 ? "" : "s");
  printf("  train: %llu tokens in %d shard%s (%s/train_*.bin)\n",
         (unsigned long long)s->train_tokens, s->train_shards, s->train_shards == 1 ? "" : "s",
         o->out);
  if (s->split == ZEROC_SPLIT_NONE)
    printf("  val:   none (--val-fraction 0)\n");
  else if (s->val_shards == 0)
    printf("  val:   none (the --val-fraction share came to no token: every document went to "
           "train)\n");
  else if (s->split == ZEROC_SPLIT_DOCUMENTS)
    printf("  val:   %llu tokens in %d shard%s (%s/val_*.bin): %d whole document%s\n",
           (unsigned long long)s->val_tokens, s->val_shards, s->val_shards == 1 ? "" : "s", o->out,
           s->val_documents, s->val_documents == 1 ? "" : "s");
  else
    printf("  val:   %llu tokens in %d shard%s (%s/val_*.bin): %s\n",
           (unsigned long long)s->val_tokens, s->val_shards, s->val_shards == 1 ? "" : "s", o->out,
           splits[s->split]);
  printf("  %.0f tokens/s, %.2f MB/s, %.2f s; tokenizer saved as %s/tokenizer.json\n",
         s->seconds > 0 ? tok / s->seconds : 0,
         s->seconds > 0 ? s->bytes_total / 1e6 / s->seconds : 0, s->seconds, o->out);
}

/* ---- the command ---------------------------------------------------------------- */

int zeroc_cmd_data(int argc, char **argv) {
  data_opts_t o;
  memset(&o, 0, sizeof o);
  const zarg_t args[] = {
      {"--tokenizer", ARG_STRING, &o.tokenizer, 0, 0, 0, NULL, NULL},
      {"--out", ARG_STRING, &o.out, 0, 0, 0, NULL, NULL},
      {"--val-fraction", ARG_STRING, &o.val_text, 0, 0, 0, NULL, &o.set_val},
      {"--shard-tokens", ARG_I64, &o.shard_tokens, 1, 2147483647.0, 0, NULL, &o.set_shard},
      {"--threads", ARG_INT, &o.threads, 1, 1024, 0, NULL, &o.set_threads},
      {"--force", ARG_SWITCH, &o.force, 0, 0, 0, NULL, NULL},
      {"--quiet", ARG_SWITCH, &o.quiet, 0, 0, 0, NULL, NULL},
  };
  int nargs = (int)(sizeof args / sizeof args[0]);
  /* the flags (with their values) apart from the inputs */
  char **flags = calloc((size_t)argc + 1, sizeof *flags);
  const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
  int nflags = 0, ninputs = 0, rc = 2;
  if (!flags || !inputs) {
    fprintf(stderr, "zeroc data: out of memory\n");
    rc = 1;
    goto out;
  }
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      rc = 0;
      goto out;
    }
    if (!strcmp(a, "--")) { /* the rest are inputs, even names starting with '-' */
      while (++i < argc) inputs[ninputs++] = argv[i];
      break;
    }
    if (a[0] != '-' || !a[1]) {
      inputs[ninputs++] = a;
      continue;
    }
    flags[nflags++] = argv[i];
    /* "--flag value": the value goes along unless it is a switch or "--flag=value" */
    if (!strchr(a, '=') && i + 1 < argc)
      for (int k = 0; k < nargs; k++)
        if (!strcmp(args[k].name, a) && args[k].kind != ARG_SWITCH) flags[nflags++] = argv[++i];
  }
  if (zarg_parse("data", nflags, flags, args, nargs)) goto out;
  if (o.set_val) {
    char *end;
    errno = 0;
    o.val_fraction = strtod(o.val_text, &end);
    if (errno || end == o.val_text || *end || !(o.val_fraction >= 0 && o.val_fraction < 1)) {
      rc = zarg_fail("data", "--val-fraction '%s': accepted a number 0 <= F < 1", o.val_text);
      goto out;
    }
  }
  if (!o.tokenizer) {
    rc =
        zarg_fail("data", "--tokenizer is required: bytes, a tokenizer.json or a GPT-2 vocab.json");
    goto out;
  }
  if (!o.out) {
    rc = zarg_fail("data", "--out DIR is required (the shard directory)");
    goto out;
  }
  if (!ninputs) {
    rc = zarg_fail("data", "no input files: give text files or globs after the flags");
    goto out;
  }

  zeroc_prepare_config_t c = ZEROC_PREPARE_CONFIG_INIT;
  c.tokenizer = o.tokenizer;
  c.out_dir = o.out;
  c.inputs = inputs;
  c.num_inputs = ninputs;
  if (o.set_val) c.val_fraction = o.val_fraction;
  if (o.set_shard) c.shard_tokens = o.shard_tokens;
  if (o.set_threads) c.threads = o.threads;
  c.force = o.force;
  progress_t pr = {isatty(STDERR_FILENO), o.quiet, 10, 0};
  zeroc_prepare_stats_t st;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (int k = 0; k < 3; k++) sigaction(sigs[k], &sa, NULL);
  zeroc_result_t r = zeroc_text_prepare(&c, on_progress, &pr, &st);
  if (pr.tty && pr.shown) fprintf(stderr, "\n");
  if (r != ZEROC_OK && g_signal) {
    fprintf(stderr, "zeroc data: stopped by signal %d; nothing was written\n", (int)g_signal);
    rc = 128 + (int)g_signal;
    goto out;
  }
  if (r == ZEROC_ERR_INVALID_ARG) {
    rc = zarg_fail("data", "%s", plain(zeroc_last_error(NULL)));
    goto out;
  }
  if (r != ZEROC_OK) {
    fprintf(stderr, "zeroc data: %s\n", plain(zeroc_last_error(NULL)));
    rc = 1;
    goto out;
  }
  print_summary(&o, &st);
  rc = 0;
out:
  free(flags);
  free(inputs);
  return rc;
}
