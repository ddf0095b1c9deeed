# CUDA kernels (src/kernels/cuda).
# test_kernels_cuda: the kernels on the GPU against their cpu twins; skipped (77) without one.
zeroc_test(NAME test_kernels_cuda SOURCES test_kernels_cuda.c LABELS gpu)
# test_kernels_cuda_engine: the engine kernels (cast, accumulate, adamw, adamw_mixed, the
# loss mean read back through pinned memory) on the GPU against their cpu twins; skipped (77)
# without one.
zeroc_test(NAME test_kernels_cuda_engine SOURCES test_kernels_cuda_engine.c LABELS gpu)
# test_kernels_cuda_llama: the Llama-family kernels (RMSNorm, RoPE, SwiGLU, GQA) on the GPU
# against their cpu twins; skipped (77) without one.
zeroc_test(NAME test_kernels_cuda_llama SOURCES test_kernels_cuda_llama.c LABELS gpu)
# test_cuda_parallel: the memory pool and sumsq with several streams in flight, the
# vocabulary-parallel embedding backward; skipped (77) without a GPU.
zeroc_test(NAME test_cuda_parallel SOURCES test_cuda_parallel.c LABELS gpu)

# test_kernels_cuda_emu: the same kernel sources, turned into C++ by cuda_emu/transform.py,
# run on a CPU emulation of CUDA (tests/cuda_emu/include) against double references, so
# the kernels' logic is checked on every machine. Needs a C++20 compiler and python3;
# without them it is left out with a message. ZEROC_CUDA_EMU=OFF leaves it out too
# (scripts/test's UBSan pass, where its build takes a minute; scripts/sanitize builds it).
find_package(Python3 QUIET COMPONENTS Interpreter)
include(CheckLanguage)
check_language(CXX)
if(NOT ZEROC_CUDA_EMU)
  message(STATUS "zeroc: the cuda emulation tests left out (ZEROC_CUDA_EMU=OFF)")
elseif(Python3_Interpreter_FOUND AND CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(_emu_dir ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu)
  set(_emu_gen ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu_gen)
  file(GLOB _emu_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/cuda/*.cu)
  set(_emu_sources ${_emu_dir}/test_kernels_cuda_emu.cpp ${_emu_dir}/emu_attention.cpp
    ${_emu_dir}/emu_vocab_engine.cpp ${_emu_dir}/emu_llama.cpp ${_emu_dir}/emu_stubs.c
    ${_emu_gen}/kernels/cuda/common.cuh)
  add_custom_command(OUTPUT ${_emu_gen}/kernels/cuda/common.cuh
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_emu_gen}/kernels/cuda
    COMMAND Python3::Interpreter ${_emu_dir}/transform.py
            ${PROJECT_SOURCE_DIR}/src/kernels/cuda/common.cuh ${_emu_gen}/kernels/cuda/common.cuh
    DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/cuda/common.cuh ${_emu_dir}/transform.py VERBATIM)
  foreach(cu ${_emu_cu})
    get_filename_component(_name ${cu} NAME_WE)
    add_custom_command(OUTPUT ${_emu_gen}/${_name}.cpp
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_emu_gen}
      COMMAND Python3::Interpreter ${_emu_dir}/transform.py ${cu} ${_emu_gen}/${_name}.cpp
      DEPENDS ${cu} ${_emu_dir}/transform.py VERBATIM)
    list(APPEND _emu_sources ${_emu_gen}/${_name}.cpp)
  endforeach()
  add_executable(test_kernels_cuda_emu ${_emu_sources})
  set_target_properties(test_kernels_cuda_emu PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
    CXX_EXTENSIONS OFF)
  # The emulation's headers come first so <cuda_runtime.h> and friends are its own;
  # nothing of the real toolkit or of libzeroc is linked.
  target_include_directories(test_kernels_cuda_emu BEFORE PRIVATE ${_emu_dir}/include ${_emu_gen})
  target_include_directories(test_kernels_cuda_emu PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
  # -ffp-contract=off: the engine kernels are checked bit for bit against plain C arithmetic
  target_compile_options(test_kernels_cuda_emu PRIVATE -Wall -Wextra -Wno-unused-parameter
    -Wno-unknown-pragmas -ffp-contract=off $<$<BOOL:${ZEROC_WERROR}>:-Werror>)
  target_link_libraries(test_kernels_cuda_emu PRIVATE Threads::Threads)
  add_test(NAME test_kernels_cuda_emu COMMAND test_kernels_cuda_emu)
  # san_once: once, unsanitized, in scripts/test (its UBSan pass neither builds nor runs it)
  set_tests_properties(test_kernels_cuda_emu PROPERTIES LABELS "unit;san_once" TIMEOUT 300)
else()
  message(STATUS "zeroc: test_kernels_cuda_emu left out (needs python3 and a C++ compiler)")
endif()
