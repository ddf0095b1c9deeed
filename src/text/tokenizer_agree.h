/*
 * text/tokenizer_agree.h - whether two tokenizer files give their ids the
 * same meaning: validation shards must come from the training data's
 * tokenizer (model/gpt_eval.c checks the two recorded beside the shards).
 */
#ifndef ZEROC_TEXT_TOKENIZER_AGREE_H
#define ZEROC_TEXT_TOKENIZER_AGREE_H

#include <stddef.h>

#include "zeroc/tokenizer.h"

/* Loads the tokenizer files a and b (zeroc_tokenizer_load's specs) and sets
 * *agree: 1 when they have the same kind, vocabulary, end-of-text id, bytes
 * for every id and merges (so they encode and decode alike), else 0 with the
 * first difference in why[cap] ("bpe, vocab 300 against bytes, vocab 256",
 * "id 261 is \"ab\" against \"ba\""). Returns a load's error. */
zeroc_result_t zeroc__tokenizer_files_agree(const char *a, const char *b, int *agree, char *why,
                                            size_t cap);

#endif
