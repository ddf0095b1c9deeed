# Kernels: the cpu twins through the dispatch, against double-precision references
# (attention in its own binary; shared helpers in kernels_test.h).
zeroc_test(NAME test_kernels_cpu SOURCES test_kernels_cpu.c LABELS unit)
zeroc_test(NAME test_kernels_attn SOURCES test_kernels_attn.c LABELS unit)
