# Kernels: the cpu twins through the dispatch, against double-precision references
# (attention and the engine kernels in their own binaries; shared helpers in kernels_test.h).
zeroc_test(NAME test_kernels_cpu SOURCES test_kernels_cpu.c LABELS unit)
zeroc_test(NAME test_kernels_engine SOURCES test_kernels_engine.c LABELS unit)
zeroc_test(NAME test_kernels_attn SOURCES test_kernels_attn.c LABELS unit)
