# Kernels: the cpu twins through the dispatch, against double-precision references
# (attention and the engine kernels in their own binaries; shared helpers in kernels_test.h),
# and the AVX-512 matrix product the cpu matmul uses where the CPU has it.
zeroc_test(NAME test_kernels_cpu SOURCES test_kernels_cpu.c LABELS unit)
zeroc_test(NAME test_kernels_engine SOURCES test_kernels_engine.c LABELS unit)
zeroc_test(NAME test_kernels_attn SOURCES test_kernels_attn.c LABELS unit)
zeroc_test(NAME test_gemm_cpu SOURCES test_gemm_cpu.c LABELS unit)
# the Llama-family kernels (RMSNorm, RoPE, SwiGLU, grouped-query attention)
zeroc_test(NAME test_kernels_llama SOURCES test_kernels_llama.c LABELS unit)
