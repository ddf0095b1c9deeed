# text: the tokenizer (bytes, byte-level BPE against committed fixtures made by
# Hugging Face `tokenizers`, tests/fixtures/tokenizer/make_fixtures.py).
zeroc_test(NAME test_tokenizer SOURCES test_tokenizer.c LABELS unit
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/tokenizer)
