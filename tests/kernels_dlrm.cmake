# test_dlrm_cuda_emu: the cuda DLRM kernels on the CPU emulation of CUDA (this file is read
# after kernels_cuda.cmake, which generates the sources it reuses).
if(TARGET test_kernels_cuda_emu)
  add_executable(test_dlrm_cuda_emu ${_emu_dir}/test_dlrm_cuda_emu.cpp ${_emu_dir}/emu_stubs.c
                 ${_emu_gen}/dlrm.cpp
                 ${_emu_gen}/kernels/cuda/common.cuh)
  set_target_properties(test_dlrm_cuda_emu PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
    CXX_EXTENSIONS OFF)
  target_include_directories(test_dlrm_cuda_emu BEFORE PRIVATE ${_emu_dir}/include ${_emu_gen})
  target_include_directories(test_dlrm_cuda_emu PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
  target_compile_options(test_dlrm_cuda_emu PRIVATE -Wall -Wextra -Wno-unused-parameter
    -Wno-unknown-pragmas $<$<BOOL:${ZEROC_WERROR}>:-Werror>)
  target_link_libraries(test_dlrm_cuda_emu PRIVATE Threads::Threads)
  add_test(NAME test_dlrm_cuda_emu COMMAND test_dlrm_cuda_emu)
  set_tests_properties(test_dlrm_cuda_emu PROPERTIES LABELS unit TIMEOUT 300)
endif()

# test_dlrm_cuda: the DLRM kernels on the GPU against their cpu twins; skipped (77) without one.
zeroc_test(NAME test_dlrm_cuda SOURCES test_dlrm_cuda.c LABELS gpu)
