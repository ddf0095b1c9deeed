# text -> shards (zeroc_text_prepare, `zeroc data`): the library on real text
# (/usr/share/common-licenses), and the command end to end (tests/data_cli.sh).
zeroc_test(NAME test_text_prepare SOURCES test_text_prepare.c LABELS unit
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/tokenizer)
