/*
 * apps/sample.c - `zeroc sample`: the prompt and its continuation, generated
 * by the built-in GPT from an exported file (--init, no MPI needed) or a
 * checkpoint (--resume, under the mpirun layout that wrote it). The sampler
 * and the tokenizer are the library's (zeroc/sample.h, zeroc/tokenizer.h);
 * this file parses the flags and prints.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "zeroc/zeroc.h"

#define ZSAMPLE_MAX_TOKENS (1 << 20)

typedef struct {
  int model, layers, hidden, heads, vocab, seq, tp, pp, vpp, tokens, top_k, no_cache, stats;
  int set_layers, set_hidden, set_heads, set_vocab, set_seq;
  int kv_heads, ffn, set_kv_heads, set_ffn; /* the Llama family's */
  int64_t seed;
  double temperature;
  const char *init, *resume, *tokenizer, *prompt;
} zsample_opts_t;

static void usage(void) {
  printf(
      "usage: zeroc sample (--init FILE.safetensors|DIR | --resume DIR) --tokenizer bytes|FILE\n"
      "                    --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]\n"
      "  prints the prompt and its continuation (N tokens, 64), generated with a KV cache\n"
      "  --temperature 0 is greedy (1); --top-k 0 draws from every token (0); --seed (1)\n"
      "model:   --model tiny|small|gpt2-124m|... (tiny) --layers --hidden --heads --vocab --seq\n"
      "         as zeroc train; a longer prompt keeps its last --seq tokens\n"
      "         llama-tiny|qwen-tiny|llama3.2-1b|...: also --kv-heads --ffn; their --init FILE is\n"
      "         a transformers model.safetensors (LlamaForCausalLM, Qwen2ForCausalLM)\n"
      "--init DIR: a save_pretrained directory (config.json, one or sharded safetensors):\n"
      "         its config.json gives the model and shape (only --seq may be added)\n"
      "--resume: run under the checkpoint's layout: mpirun -np N zeroc sample --tp T --pp P\n"
      "         [--vpp V] --resume DIR ...\n"
      "other:   --no-cache (recompute the whole window every token) --stats (tokens/s on stderr)\n"
      "docs/sample.md has the details.\n");
}

static int parse(int argc, char **argv, zsample_opts_t *o) {
  const zarg_t args[] = {
      {"--model", ARG_CHOICE, &o->model, 0, 0, 0, zarg_models, NULL},
      {"--layers", ARG_INT, &o->layers, ZARG_LIM_LAYERS, 0, NULL, &o->set_layers},
      {"--hidden", ARG_INT, &o->hidden, ZARG_LIM_HIDDEN, 0, NULL, &o->set_hidden},
      {"--heads", ARG_INT, &o->heads, ZARG_LIM_HEADS, 0, NULL, &o->set_heads},
      {"--vocab", ARG_INT, &o->vocab, ZARG_LIM_VOCAB, 0, NULL, &o->set_vocab},
      {"--seq", ARG_INT, &o->seq, ZARG_LIM_SEQ, 0, NULL, &o->set_seq},
      {"--kv-heads", ARG_INT, &o->kv_heads, ZARG_LIM_KV_HEADS, 0, NULL, &o->set_kv_heads},
      {"--ffn", ARG_INT, &o->ffn, ZARG_LIM_FFN, 0, NULL, &o->set_ffn},
      {"--tp", ARG_INT, &o->tp, ZARG_LIM_TP, 0, NULL, NULL},
      {"--pp", ARG_INT, &o->pp, ZARG_LIM_PP, 0, NULL, NULL},
      {"--vpp", ARG_INT, &o->vpp, ZARG_LIM_VPP, 0, NULL, NULL},
      {"--init", ARG_STRING, &o->init, 0, 0, 0, NULL, NULL},
      {"--resume", ARG_STRING, &o->resume, 0, 0, 0, NULL, NULL},
      {"--tokenizer", ARG_STRING, &o->tokenizer, 0, 0, 0, NULL, NULL},
      {"--prompt", ARG_STRING, &o->prompt, 0, 0, 0, NULL, NULL},
      {"--tokens", ARG_INT, &o->tokens, 1, ZSAMPLE_MAX_TOKENS, 0, NULL, NULL},
      {"--temperature", ARG_DOUBLE, &o->temperature, 0, 1e6, 0, NULL, NULL},
      {"--top-k", ARG_INT, &o->top_k, 0, 1 << 24, 0, NULL, NULL},
      {"--seed", ARG_I64, &o->seed, 0, 9e18, 0, NULL, NULL},
      {"--no-cache", ARG_SWITCH, &o->no_cache, 0, 0, 0, NULL, NULL},
      {"--stats", ARG_SWITCH, &o->stats, 0, 0, 0, NULL, NULL},
  };
  return zarg_parse("sample", argc, argv, args, (int)(sizeof args / sizeof args[0]));
}

/* The Llama family's flags over its preset into *gc; 0, or 2 after the one-line error. */
static int check_llama(const zsample_opts_t *o, zeroc_gpt_config_t *gc) {
  if (gc->family != ZEROC_GPT_FAMILY_LLAMA) {
    if (o->set_kv_heads || o->set_ffn)
      return zarg_fail("sample",
                       "%s is a setting of the Llama family; model %s is GPT-2 (accepted there: "
                       "llama-tiny, qwen-tiny, llama3.2-1b, llama3.1-8b, qwen2.5-0.5b, qwen2.5-7b)",
                       o->set_kv_heads ? "--kv-heads" : "--ffn", zarg_models[o->model]);
    return 0;
  }
  if (o->set_kv_heads) gc->kv_heads = o->kv_heads;
  if (o->set_ffn) gc->ffn = o->ffn;
  if (gc->heads % gc->kv_heads)
    return zarg_fail("sample", "--kv-heads %d must divide --heads %d", gc->kv_heads, gc->heads);
  if (zeroc_gpt_config_check(gc)) /* the head size RoPE turns: even, at most 512 */
    return zarg_fail("sample", "%s", zarg_user_msg(zeroc_last_error(NULL)));
  return 0;
}

/* --init DIR, a transformers save_pretrained directory: the model and its shape from its
 * config.json, as `zeroc train --init DIR` reads it (the library's resolve, one rank);
 * --seq (up to its max_position_embeddings) is the only shape flag it takes. */
static int dir_shape(const zsample_opts_t *o, zeroc_gpt_config_t *gc) {
  if (o->set_layers || o->set_hidden || o->set_heads || o->set_vocab || o->set_kv_heads ||
      o->set_ffn)
    return zarg_fail("sample",
                     "--init '%s' is a directory: its config.json gives the shape "
                     "(accepted with it: --seq)",
                     o->init);
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  c.init = o->init;
  if (o->set_seq) c.seq = o->seq;
  zeroc_mesh_info_t mesh;
  zeroc_train_info_t info;
  if (zeroc_mesh_layout_cp(1, 1, 1, 1, 1, 0, &mesh) ||
      zeroc_train_config_resolve(&c, &mesh, ZEROC_DEVICE_CPU, ZEROC_NAMES_FLAGS, &info))
    return zarg_fail("sample", "--init '%s': %s", o->init, zarg_user_msg(zeroc_last_error(NULL)));
  if (info.dlrm) return zarg_fail("sample", "--init '%s' holds a DLRM: nothing to sample", o->init);
  *gc = info.model;
  return 0;
}

/* What can be checked before any file is read or MPI starts: the model's shape
 * into *gc. Returns 0, or 2 after the one-line error. */
static int check(const zsample_opts_t *o, zeroc_gpt_config_t *gc) {
  if (!o->init == !o->resume)
    return zarg_fail("sample", "give one of --init FILE.safetensors and --resume DIR%s",
                     o->init ? ", not both" : "");
  if (!o->prompt) return zarg_fail("sample", "--prompt TEXT is required");
  if (!o->tokenizer)
    return zarg_fail("sample", "--tokenizer is required: bytes, or a tokenizer.json / vocab.json");
  if (o->init && (o->tp > 1 || o->pp > 1 || o->vpp > 1))
    return zarg_fail("sample", "--tp, --pp and --vpp describe a --resume checkpoint's layout");
  if (o->init && access(o->init, R_OK))
    return zarg_fail("sample", "--init '%s': file not readable", o->init);
  if (o->resume && access(o->resume, R_OK))
    return zarg_fail("sample", "--resume '%s': no such checkpoint directory", o->resume);
  struct stat st;
  if (o->init && !stat(o->init, &st) && S_ISDIR(st.st_mode)) return dir_shape(o, gc);
  const int size[5] = {o->layers, o->hidden, o->heads, o->vocab, o->seq};
  const int set[5] = {o->set_layers, o->set_hidden, o->set_heads, o->set_vocab, o->set_seq};
  if (zarg_model_shape("sample", o->model, size, set, gc)) return 2;
  if (gc->hidden % gc->heads)
    return zarg_fail("sample", "--heads %d must divide --hidden %d", gc->heads, gc->hidden);
  return check_llama(o, gc);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Set by SIGINT during generation: the tokens so far stay printed, the rest are not made. */
static volatile sig_atomic_t g_sigint;
static void on_sigint(int sig) { g_sigint = sig; }

/* Printing each token as it comes (zeroc_sample_token_fn). */
typedef struct {
  const zeroc_tokenizer_t *tok;
  char *buf;
  size_t cap;
  zeroc_result_t r; /* the first decode failure */
} stream_t;

static int print_token(void *user, const int32_t *out, int count) {
  stream_t *st = user;
  size_t len = 0;
  /* a token's text is its own bytes: the pieces written one by one are the whole text */
  for (int pass = 0; pass < 2; pass++) {
    st->r = zeroc_tokenizer_decode(st->tok, out + count - 1, 1, st->buf, st->cap, &len);
    if (st->r || len <= st->cap) break;
    char *b = realloc(st->buf, len + 1);
    if (!b) {
      st->r = zeroc_error_set(ZEROC_ERR_NOMEM, "out of host memory for a token's text of %zu bytes",
                              len);
      break;
    }
    st->buf = b, st->cap = len;
  }
  if (st->r) return 1;
  fwrite(st->buf, 1, len, stdout);
  fflush(stdout);
  return g_sigint != 0;
}

/* Rank 0 (or the only process): encode, generate, print each token as it comes. Returns the
 * exit status. */
static int generate(zeroc_sampler_t *s, const zeroc_tokenizer_t *tok, const zsample_opts_t *o) {
  size_t plen = strlen(o->prompt), n = 0;
  int32_t *ids = malloc(sizeof(int32_t) * (plen + 1)),
          *out = malloc(sizeof(int32_t) * (size_t)o->tokens);
  int rc = 1;
  if (!ids || !out) goto done;
  if (zeroc_tokenizer_encode(tok, o->prompt, plen, ids, &n)) goto fail;
  if (n == 0) {
    rc = zarg_fail("sample", "--prompt '%s' encodes to no tokens", o->prompt);
    goto done;
  }
  zeroc_sampler_set_cache(s, !o->no_cache);
  zeroc_sampler_set_vocab(s, zeroc_tokenizer_vocab(tok));
  /* the prompt at once, then each token as it comes; SIGINT stops after the current one */
  fwrite(o->prompt, 1, plen, stdout);
  fflush(stdout);
  struct sigaction sa, old_int;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  g_sigint = 0;
  sigaction(SIGINT, &sa, &old_int);
  stream_t st = {tok, NULL, 0, ZEROC_OK};
  int got = 0;
  double t0 = now_s();
  zeroc_result_t r =
      zeroc_sampler_generate_each(s, ids, (int)n, o->tokens, o->temperature, o->top_k,
                                  (uint64_t)o->seed, out, print_token, &st, &got);
  double dt = now_s() - t0;
  sigaction(SIGINT, &old_int, NULL);
  free(st.buf);
  fputc('\n', stdout);
  fflush(stdout);
  if (r == ZEROC_OK) r = st.r;
  if (r) goto fail;
  if (g_sigint && got < o->tokens) {
    fprintf(stderr, "zeroc sample: stopped by SIGINT after %d of %d tokens\n", got, o->tokens);
    rc = 128 + SIGINT;
    goto done;
  }
  if (o->stats)
    fprintf(stderr,
            "zeroc sample: %zu prompt tokens%s, %d generated in %.3f s: %.1f tokens/s (%s)\n", n,
            n > (size_t)zeroc_sampler_config(s)->seq ? " (the last --seq kept)" : "", got, dt,
            got / dt, o->no_cache ? "no cache: whole window every token" : "KV cache");
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "zeroc sample: %s\n", zarg_user_msg(zeroc_last_error(NULL)));
done:
  free(ids);
  free(out);
  return rc;
}

/* --resume: every rank rebuilds its part of the model and loads its shards;
 * rank 0 samples. */
static int from_checkpoint(const zsample_opts_t *o, const zeroc_gpt_config_t *gc,
                           const zeroc_tokenizer_t *tok) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU; /* the sampler runs on the cpu; the checkpoint is fp32 files */
  cc.tp = o->tp > 0 ? o->tp : 1;
  cc.pp = o->pp > 0 ? o->pp : 1;
  zeroc_ctx_t *ctx = NULL;
  zeroc_result_t r = zeroc_ctx_create(&ctx, &cc);
  if (r != ZEROC_OK) {
    const char *e = zarg_user_msg(zeroc_last_error(NULL));
    if (r == ZEROC_ERR_INVALID_ARG) return zarg_fail("sample", "%s", e);
    fprintf(stderr, "zeroc sample: %s\n", e);
    return 1;
  }
  int root = zeroc_ctx_mesh(ctx)->rank == 0, rc = 0;
  zeroc_sampler_t *s = NULL;
  r = zeroc_sampler_from_checkpoint(ctx, o->resume, gc, o->vpp, &s);
  if (r) {
    if (root) fprintf(stderr, "zeroc sample: --resume: %s\n", zarg_user_msg(zeroc_last_error(ctx)));
    rc = r == ZEROC_ERR_INVALID_ARG ? 2 : 1;
  } else if (root) {
    rc = generate(s, tok, o);
  }
  zeroc_sampler_destroy(s);
  zeroc_ctx_finalize(ctx);
  return rc;
}

int zeroc_cmd_sample(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
  zsample_opts_t o = {.tokens = 64, .temperature = 1.0, .seed = 1, .tp = 1, .pp = 1, .vpp = 1};
  zeroc_gpt_config_t gc;
  if (parse(argc, argv, &o) || check(&o, &gc)) return 2;
  zeroc_tokenizer_t *tok = NULL;
  if (zeroc_tokenizer_load(o.tokenizer, &tok))
    return zarg_fail("sample", "--tokenizer '%s': %s", o.tokenizer,
                     zarg_user_msg(zeroc_last_error(NULL)));
  int rc;
  if (zeroc_tokenizer_vocab(tok) > gc.vocab) {
    rc = zarg_fail("sample", "--tokenizer '%s' has %d tokens, more than the model's --vocab %d",
                   o.tokenizer, zeroc_tokenizer_vocab(tok), gc.vocab);
  } else if (o.init) {
    zeroc_sampler_t *s = NULL;
    zeroc_result_t r = zeroc_sampler_load(o.init, &gc, &s);
    if (r == ZEROC_ERR_INVALID_ARG) {
      rc = zarg_fail("sample", "--init: %s", zarg_user_msg(zeroc_last_error(NULL)));
    } else if (r) {
      fprintf(stderr, "zeroc sample: --init: %s\n", zarg_user_msg(zeroc_last_error(NULL)));
      rc = 1;
    } else {
      rc = generate(s, tok, &o);
    }
    zeroc_sampler_destroy(s);
  } else {
    rc = from_checkpoint(&o, &gc, tok);
  }
  zeroc_tokenizer_destroy(tok);
  return rc;
}
