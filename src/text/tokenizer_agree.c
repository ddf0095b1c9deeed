/*
 * text/tokenizer_agree.c - comparing two tokenizers id by id (see
 * tokenizer_agree.h): the same files saved twice, or a Hugging Face file and
 * zeroc's copy of it, agree; another vocabulary or merge order does not.
 */
#include "text/tokenizer_agree.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "text/bpe_build.h"

/* The bytes of id i (a bpe tokenizer's, defined ids only). */
static const char *id_bytes(const zeroc_tokenizer_t *t, int32_t i, size_t *n) {
  *n = (size_t)(t->off[i + 1] - t->off[i]);
  return t->bytes + t->off[i];
}

/* 0 when a and b agree; else 1 with the first difference in why. */
static int differ(const zeroc_tokenizer_t *a, const zeroc_tokenizer_t *b, char *why, size_t cap) {
  if (a->kind != b->kind || a->vocab != b->vocab) {
    snprintf(why, cap, "%s, vocab %d against %s, vocab %d", zeroc_tokenizer_kind(a), a->vocab,
             zeroc_tokenizer_kind(b), b->vocab);
    return 1;
  }
  if (a->eot != b->eot) {
    snprintf(why, cap, "end-of-text id %d against %d (-1: none)", (int)a->eot, (int)b->eot);
    return 1;
  }
  if (a->kind == ZEROC_TOK_BYTES) return 0;
  for (int32_t i = 0; i < a->vocab; i++) {
    size_t na = 0, nb = 0;
    const char *sa = a->entry[i] == ZEROC_TOK_GAP ? NULL : id_bytes(a, i, &na);
    const char *sb = b->entry[i] == ZEROC_TOK_GAP ? NULL : id_bytes(b, i, &nb);
    if (!sa && !sb) continue;
    if (sa && sb && na == nb && !memcmp(sa, sb, na)) continue;
    char s1[96], s2[96];
    snprintf(why, cap, "id %d is %s%s%s against %s%s%s", (int)i, sa ? "\"" : "",
             sa ? zeroc__tok_show(sa, na, 24, s1, sizeof s1) : "unused", sa ? "\"" : "",
             sb ? "\"" : "", sb ? zeroc__tok_show(sb, nb, 24, s2, sizeof s2) : "unused",
             sb ? "\"" : "");
    return 1;
  }
  if (a->n_merges != b->n_merges) {
    snprintf(why, cap, "%d merges against %d", (int)a->n_merges, (int)b->n_merges);
    return 1;
  }
  for (int32_t m = 0; m < a->n_merges; m++)
    if (a->merges[m][0] != b->merges[m][0] || a->merges[m][1] != b->merges[m][1]) {
      snprintf(why, cap, "merge %d is (%d, %d) against (%d, %d)", (int)m, (int)a->merges[m][0],
               (int)a->merges[m][1], (int)b->merges[m][0], (int)b->merges[m][1]);
      return 1;
    }
  return 0;
}

zeroc_result_t zeroc__tokenizer_files_agree(const char *a, const char *b, int *agree, char *why,
                                            size_t cap) {
  zeroc_tokenizer_t *ta = NULL, *tb = NULL;
  *agree = 0;
  zeroc_result_t r = zeroc_tokenizer_load(a, &ta);
  if (!r) r = zeroc_tokenizer_load(b, &tb);
  if (!r) *agree = !differ(ta, tb, why, cap);
  zeroc_tokenizer_destroy(ta);
  zeroc_tokenizer_destroy(tb);
  return r;
}
