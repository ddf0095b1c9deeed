/*
 * io/data.h - the io half of zeroc_data_create: opening a token data set. The
 * public constructor is text/data_vocab.c, which hands in how to read the
 * vocabulary of the tokenizer recorded beside the shards (io reads no
 * tokenizers: text sits above io).
 */
#ifndef ZEROC_IO_DATA_H
#define ZEROC_IO_DATA_H

#include "zeroc/data.h"

/* Reads the vocabulary size of the tokenizer file `path` into *vocab. An error
 * (its message in the thread's last error) means "not a tokenizer zeroc reads". */
typedef zeroc_result_t (*zeroc__vocab_probe_t)(const char *path, int *vocab);

/* zeroc_data_create (zeroc/data.h), with `probe` reading a tokenizer.json found
 * beside the first shard (NULL: no tokenizer is looked for). Same results. */
zeroc_result_t zeroc__data_open(const zeroc_data_config_t *cfg, zeroc__vocab_probe_t probe,
                                zeroc_data_t **out);

#endif
