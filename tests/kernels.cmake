# Kernels: the cpu twins through the dispatch, against double-precision references.
zeroc_test(NAME test_kernels_cpu SOURCES test_kernels_cpu.c LABELS unit)
