# The sgemm ceiling (issue 20): OpenBLAS sgemm at n = 2048 on 1 and 2 threads.
add_executable(bench_sgemm ${CMAKE_CURRENT_LIST_DIR}/sgemm.c)
target_link_libraries(bench_sgemm PRIVATE PkgConfig::OPENBLAS)
