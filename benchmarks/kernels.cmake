# Kernels: time every cpu kernel on one GPT shape (bench_kernels_cpu --model small);
# attention_ref.c: the previous cpu attention, timed beside the current (--attention).
add_executable(bench_kernels_cpu ${CMAKE_CURRENT_LIST_DIR}/kernels_cpu.c
  ${CMAKE_CURRENT_LIST_DIR}/attention_ref.c)
target_link_libraries(bench_kernels_cpu PRIVATE zeroc_internal)
