/*
 * text/bpe_save.c - writing a bpe tokenizer as a Hugging Face tokenizer.json
 * (merges as ["a", "b"] pairs, GPT-2's pre-tokenizer as one ByteLevel, the
 * ByteLevel decoder, the NFC normalizer when it had one), which zeroc and
 * `tokenizers` both read back to the same encoding.
 */
#include <stdlib.h>

#include "core/error.h"
#include "io/files.h"
#include "io/json.h"
#include "text/tokenizer_internal.h"

static void str_of(zeroc__jw_t *w, const zeroc_tokenizer_t *t, int32_t id) {
  zeroc__jw_stringn(w, t->strs + t->soff[id], (size_t)(t->soff[id + 1] - t->soff[id]));
}

static void byte_level(zeroc__jw_t *w, int add_prefix_space, int use_regex) {
  zeroc__jw_object_begin(w);
  zeroc__jw_key(w, "type");
  zeroc__jw_string(w, "ByteLevel");
  zeroc__jw_key(w, "add_prefix_space");
  zeroc__jw_bool(w, add_prefix_space);
  zeroc__jw_key(w, "trim_offsets");
  zeroc__jw_bool(w, 1);
  zeroc__jw_key(w, "use_regex");
  zeroc__jw_bool(w, use_regex);
  zeroc__jw_object_end(w);
}

/* Sequence [Split(pattern, Isolated), ByteLevel(use_regex false)], as Llama 3's
 * and Qwen2's tokenizer.json hold their pre-tokenizer. */
static void split_byte_level(zeroc__jw_t *w, int pattern) {
  zeroc__jw_object_begin(w);
  zeroc__jw_key(w, "type");
  zeroc__jw_string(w, "Sequence");
  zeroc__jw_key(w, "pretokenizers");
  zeroc__jw_array_begin(w);
  zeroc__jw_object_begin(w);
  zeroc__jw_key(w, "type");
  zeroc__jw_string(w, "Split");
  zeroc__jw_key(w, "pattern");
  zeroc__jw_object_begin(w);
  zeroc__jw_key(w, "Regex");
  zeroc__jw_string(w, zeroc__tok_pattern_regex(pattern));
  zeroc__jw_object_end(w);
  zeroc__jw_key(w, "behavior");
  zeroc__jw_string(w, "Isolated");
  zeroc__jw_key(w, "invert");
  zeroc__jw_bool(w, 0);
  zeroc__jw_object_end(w);
  byte_level(w, 0, 0);
  zeroc__jw_array_end(w);
  zeroc__jw_object_end(w);
}

static void added_tokens(zeroc__jw_t *w, const zeroc_tokenizer_t *t) {
  zeroc__jw_key(w, "added_tokens");
  zeroc__jw_array_begin(w);
  for (int32_t id = 0; id < t->vocab; id++) { /* in id order, as tokenizers writes them */
    const zeroc__tok_added_t *a = NULL;
    for (int32_t k = 0; k < t->n_added; k++)
      if (t->added[k].id == id) a = &t->added[k];
    if (!a) continue;
    zeroc__jw_object_begin(w);
    zeroc__jw_key(w, "id");
    zeroc__jw_int(w, id);
    zeroc__jw_key(w, "content");
    zeroc__jw_stringn(w, a->content, a->len);
    static const char *const no[] = {"single_word", "lstrip", "rstrip"};
    for (int f = 0; f < 3; f++) {
      zeroc__jw_key(w, no[f]);
      zeroc__jw_bool(w, 0);
    }
    zeroc__jw_key(w, "normalized");
    zeroc__jw_bool(w, a->normalized);
    zeroc__jw_key(w, "special");
    zeroc__jw_bool(w, a->special);
    zeroc__jw_object_end(w);
  }
  zeroc__jw_array_end(w);
}

static void model(zeroc__jw_t *w, const zeroc_tokenizer_t *t) {
  zeroc__jw_key(w, "model");
  zeroc__jw_object_begin(w);
  zeroc__jw_key(w, "type");
  zeroc__jw_string(w, "BPE");
  zeroc__jw_key(w, "dropout");
  zeroc__jw_null(w);
  zeroc__jw_key(w, "unk_token");
  if (t->unk >= 0)
    str_of(w, t, t->unk);
  else
    zeroc__jw_null(w);
  zeroc__jw_key(w, "continuing_subword_prefix");
  zeroc__jw_null(w);
  zeroc__jw_key(w, "end_of_word_suffix");
  zeroc__jw_null(w);
  zeroc__jw_key(w, "fuse_unk");
  zeroc__jw_bool(w, t->fuse_unk);
  zeroc__jw_key(w, "byte_fallback");
  zeroc__jw_bool(w, 0);
  zeroc__jw_key(w, "ignore_merges");
  zeroc__jw_bool(w, t->ignore_merges);
  zeroc__jw_key(w, "vocab");
  zeroc__jw_object_begin(w);
  for (int32_t id = 0; id < t->vocab; id++) {
    if (t->entry[id] == ZEROC_TOK_GAP ||
        zeroc__tok_find(t, t->strs + t->soff[id], (size_t)(t->soff[id + 1] - t->soff[id])) != id)
      continue; /* only the model's own tokens */
    zeroc__jw_keyn(w, t->strs + t->soff[id], (size_t)(t->soff[id + 1] - t->soff[id]));
    zeroc__jw_int(w, id);
  }
  zeroc__jw_object_end(w);
  zeroc__jw_key(w, "merges");
  zeroc__jw_array_begin(w);
  for (int32_t i = 0; i < t->n_merges; i++) {
    zeroc__jw_array_begin(w);
    str_of(w, t, t->merges[i][0]);
    str_of(w, t, t->merges[i][1]);
    zeroc__jw_array_end(w);
  }
  zeroc__jw_array_end(w);
  zeroc__jw_object_end(w);
}

zeroc_result_t zeroc__bpe_save(const zeroc_tokenizer_t *t, const char *path) {
  zeroc__jw_t w;
  zeroc__jw_init(&w, 1);
  zeroc__jw_object_begin(&w);
  zeroc__jw_key(&w, "version");
  zeroc__jw_string(&w, "1.0");
  zeroc__jw_key(&w, "truncation");
  zeroc__jw_null(&w);
  zeroc__jw_key(&w, "padding");
  zeroc__jw_null(&w);
  added_tokens(&w, t);
  zeroc__jw_key(&w, "normalizer");
  if (t->nfc) { /* a Sequence of NFC only was the same NFC */
    zeroc__jw_object_begin(&w);
    zeroc__jw_key(&w, "type");
    zeroc__jw_string(&w, "NFC");
    zeroc__jw_object_end(&w);
  } else {
    zeroc__jw_null(&w);
  }
  zeroc__jw_key(&w, "pre_tokenizer");
  if (t->use_regex && t->pattern != ZEROC__PAT_GPT2)
    split_byte_level(&w, t->pattern); /* Llama 3's or Qwen2's split */
  else
    byte_level(&w, t->add_prefix_space, t->use_regex);
  zeroc__jw_key(&w, "post_processor");
  byte_level(&w, 1, 1);
  zeroc__jw_key(&w, "decoder");
  byte_level(&w, 1, 1);
  model(&w, t);
  zeroc__jw_object_end(&w);
  const char *text = NULL;
  size_t len = 0;
  zeroc_result_t r = zeroc__jw_finish(&w, &text, &len);
  if (r == ZEROC_OK) r = zeroc__file_write_atomic(path, text, len);
  zeroc__jw_free(&w);
  return r;
}
