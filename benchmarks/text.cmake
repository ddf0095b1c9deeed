# text: tokenizer encode/decode speed and equality with Hugging Face
# `tokenizers` (benchmarks/tokenizer.py drives it).
add_executable(bench_tokenizer ${CMAKE_CURRENT_SOURCE_DIR}/bench_tokenizer.c)
target_link_libraries(bench_tokenizer PRIVATE zeroc_internal)
