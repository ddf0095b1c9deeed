# GPU kernel timings (benchmarks/gpu/): built only with the CUDA backend; run them
# with benchmarks/gpu/run.sh on a GPU machine.
if(ZEROC_HAVE_CUDA)
  add_executable(zeroc_kernels_bench ${CMAKE_CURRENT_SOURCE_DIR}/gpu/kernels_bench.c)
  target_link_libraries(zeroc_kernels_bench PRIVATE zeroc_internal)
endif()
