# io: CRC-32C, shard reads, synthetic corpus, JSON and safetensors speeds.
add_executable(bench_io ${CMAKE_CURRENT_SOURCE_DIR}/bench_io.c)
target_link_libraries(bench_io PRIVATE zeroc_internal)
