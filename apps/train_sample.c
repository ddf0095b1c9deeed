/*
 * apps/train_sample.c - `zeroc train --sample-every N` (see train_sample.h).
 * Without --tokenizer the data set's (the tokenizer.json `zeroc data` wrote).
 * The prompt is fixed for the run: the tokenizer's end-of-text token when it
 * has one (GPT-2 starts every document so), else the first 16 tokens of the
 * training data, or the tokens of --sample-prompt; generation draws at temperature 1 from every
 * token with the run's --seed, so successive samples differ only by what the model learnt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/args.h"
#include "apps/train_sample.h"

/* --sample-prompt: its tokens, the last ZTRAIN_SAMPLE_PROMPT_MAX of them. Every
 * rank encodes the same text alike. */
static zeroc_result_t prompt_from_text(ztrain_sample_t *s) {
  size_t len = strlen(s->text), n = 0;
  int32_t *ids = malloc(sizeof(int32_t) * (len + 1));
  if (!ids) return zeroc_error_set(ZEROC_ERR_NOMEM, "--sample-prompt of %zu bytes", len);
  zeroc_result_t r = zeroc_tokenizer_encode(s->tok, s->text, len, ids, &n);
  if (!r && n == 0)
    r = zeroc_error_set(ZEROC_ERR_INVALID_ARG, "--sample-prompt '%s' encodes to no token", s->text);
  if (!r) {
    size_t k = n < ZTRAIN_SAMPLE_PROMPT_MAX ? n : ZTRAIN_SAMPLE_PROMPT_MAX;
    memcpy(s->prompt, ids + (n - k), sizeof(int32_t) * k);
    s->n = (int)k;
  }
  free(ids);
  return r;
}

int ztrain_sample_open(const ztrain_opts_t *o, const zeroc_gpt_config_t *gc, ztrain_sample_t *s) {
  *s = (ztrain_sample_t){
      NULL, o->sample_every,  o->sample_tokens, o->seed < 0 ? 1 : (uint64_t)o->seed, {0},
      0,    o->sample_prompt, o->tokenizer};
  if (!o->sample_every || !o->tokenizer) return 0; /* none: the data set's, once it is open */
  if (zeroc_tokenizer_load(o->tokenizer, &s->tok))
    return zarg_fail("train", "--tokenizer '%s': %s", o->tokenizer,
                     zarg_user_msg(zeroc_last_error(NULL)));
  if (zeroc_tokenizer_vocab(s->tok) > gc->vocab) {
    int v = zeroc_tokenizer_vocab(s->tok);
    ztrain_sample_close(s);
    return zarg_fail("train", "--tokenizer '%s' has %d tokens, more than the model's --vocab %d",
                     o->tokenizer, v, gc->vocab);
  }
  if (s->text && prompt_from_text(s)) {
    ztrain_sample_close(s);
    return zarg_fail("train", "%s", zarg_user_msg(zeroc_last_error(NULL)));
  }
  return 0;
}

/* The first id that `a` and `b` decode differently, or -1 when they have one
 * kind and vocabulary and decode every id alike (what sampling needs of them);
 * its text in why. */
static int32_t decode_differs(const zeroc_tokenizer_t *a, const zeroc_tokenizer_t *b, char *why,
                              size_t cap) {
  int v = zeroc_tokenizer_vocab(a);
  if (strcmp(zeroc_tokenizer_kind(a), zeroc_tokenizer_kind(b)) || v != zeroc_tokenizer_vocab(b)) {
    snprintf(why, cap, "%s, vocab %d against %s, vocab %d", zeroc_tokenizer_kind(a), v,
             zeroc_tokenizer_kind(b), zeroc_tokenizer_vocab(b));
    return 0;
  }
  char ta[256], tb[256];
  for (int32_t id = 0; id < v; id++) {
    size_t na = 0, nb = 0;
    int ra = zeroc_tokenizer_decode(a, &id, 1, ta, sizeof ta, &na) != ZEROC_OK;
    int rb = zeroc_tokenizer_decode(b, &id, 1, tb, sizeof tb, &nb) != ZEROC_OK;
    if (ra != rb || (!ra && (na != nb || memcmp(ta, tb, na < sizeof ta ? na : sizeof ta)))) {
      snprintf(why, cap, "id %d decodes to other bytes%s", (int)id,
               ra != rb ? ": one of them does not define it" : "");
      return id;
    }
  }
  return -1;
}

/* --tokenizer against the tokenizer the data set records (path). */
static zeroc_result_t check_spec(const ztrain_sample_t *s, const char *path) {
  zeroc_tokenizer_t *d = NULL;
  zeroc_result_t r = zeroc_tokenizer_load(path, &d);
  char why[128];
  if (!r && decode_differs(s->tok, d, why, sizeof why) >= 0)
    r = zeroc_error_set(ZEROC_ERR_INVALID_ARG,
                        "--tokenizer '%s' is not the tokenizer the data was made with, '%s' "
                        "(%s): leave --tokenizer out to sample with the data's",
                        s->spec, path, why);
  zeroc_tokenizer_destroy(d);
  return r;
}

zeroc_result_t ztrain_sample_from_data(ztrain_sample_t *s, const zeroc_train_info_t *info,
                                       zeroc_ctx_t *ctx) {
  if (!s->every) return ZEROC_OK;
  if (s->tok) {
    const char *rec = info->data.tokenizer[0] ? info->data.tokenizer : info->val.tokenizer;
    return zeroc_ctx_agree(ctx, rec[0] ? check_spec(s, rec) : ZEROC_OK);
  }
  const char *spec = info->data.tokenizer;
  zeroc_result_t r;
  if (!spec[0])
    r = zeroc_error_set(ZEROC_ERR_INVALID_ARG, "--sample-every needs a tokenizer to print text and "
                                               "the data set records none: --tokenizer bytes|FILE");
  else
    r = zeroc_tokenizer_load(spec, &s->tok);
  if (!r && s->text) r = prompt_from_text(s);
  return zeroc_ctx_agree(ctx, r);
}

zeroc_result_t ztrain_sample_step(ztrain_sample_t *s, zeroc_trainer_t *tr, int step, int root) {
  if (!s->tok || step % s->every) return ZEROC_OK;
  if (!s->n) {
    zeroc_result_t r =
        zeroc_trainer_sample_prompt(tr, zeroc_tokenizer_eot(s->tok), 16, s->prompt, &s->n);
    if (r) return r;
  }
  zeroc_sample_config_t c = ZEROC_SAMPLE_CONFIG_INIT;
  c.tokens = s->tokens;
  c.seed = s->seed;
  c.vocab = zeroc_tokenizer_vocab(s->tok);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(s->n + s->tokens));
  char *text = NULL;
  size_t len = 0, cap = (size_t)(s->n + s->tokens) * 8 + 64;
  /* every rank allocates alike, so a failure here is every rank's */
  zeroc_result_t r =
      ids ? zeroc_trainer_sample(tr, s->prompt, s->n, &c, ids + s->n) : ZEROC_ERR_NOMEM;
  if (r || !root) goto done;
  for (int i = 0; i < s->n; i++) ids[i] = s->prompt[i];
  text = malloc(cap + 1);
  r = text ? zeroc_tokenizer_decode(s->tok, ids, (size_t)(s->n + s->tokens), text, cap, &len)
           : ZEROC_ERR_NOMEM;
  if (r) goto done;
  if (len > cap) len = cap; /* a few very long tokens: the line is cut */
  /* the text as it is, but no terminal control bytes */
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)text[i] < 0x20 && text[i] != '\n' && text[i] != '\t') text[i] = '?';
  printf("step %d sample (%d tokens): ", step, s->tokens);
  fwrite(text, 1, len, stdout);
  printf("\n");
  fflush(stdout);
done:
  free(ids);
  free(text);
  return r;
}

void ztrain_sample_close(ztrain_sample_t *s) {
  zeroc_tokenizer_destroy(s->tok);
  s->tok = NULL;
}
