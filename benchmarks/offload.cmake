# Offload I/O bandwidth: the swapper's sequential write/read against fio
# (benchmarks/offload_bw.sh drives it and prints the table for RESULTS.md).
add_executable(offload_bw ${CMAKE_CURRENT_SOURCE_DIR}/offload_bw.c)
target_link_libraries(offload_bw PRIVATE zeroc_internal)
