#!/usr/bin/env python3
"""benchmarks/data_train_tokenizer.py - trains a GPT-2-style byte-level BPE
tokenizer.json (ByteLevel pre-tokenizer, <|endoftext|> as a special token) with
Hugging Face `tokenizers` on the given text files, for the `zeroc data`
benchmark (benchmarks/RESULTS.md). Offline only (/work/venv/bin/python).

usage: data_train_tokenizer.py VOCAB OUT.json FILE...
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

vocab, out, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train(files, trainer)
tok.save(out)
print(f"{out}: vocab {tok.get_vocab_size()}")
