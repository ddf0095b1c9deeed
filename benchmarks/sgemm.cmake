# The sgemm ceiling (issue 20): OpenBLAS sgemm at n = 2048 on 1 and 2 threads, and (--gpt)
# the products of a GPT step one by one.
add_executable(bench_sgemm ${CMAKE_CURRENT_LIST_DIR}/sgemm.c)
target_link_libraries(bench_sgemm PRIVATE PkgConfig::OPENBLAS OpenMP::OpenMP_C)
# zeroc's AVX-512 product against OpenBLAS on the same products (bench_gemm TOKENS HIDDEN VOCAB
# [LAYERS] [REPS] [--evict]).
add_executable(bench_gemm ${CMAKE_CURRENT_LIST_DIR}/gemm.c)
target_link_libraries(bench_gemm PRIVATE zeroc_internal PkgConfig::OPENBLAS OpenMP::OpenMP_C)
