# Kernels: time every cpu kernel on one GPT shape (bench_kernels_cpu --model small).
add_executable(bench_kernels_cpu ${CMAKE_CURRENT_LIST_DIR}/kernels_cpu.c)
target_link_libraries(bench_kernels_cpu PRIVATE zeroc_internal)
