# CUDA kernels (src/kernels/cuda) against their cpu twins; skipped (77) without a GPU.
zeroc_test(NAME test_kernels_cuda SOURCES test_kernels_cuda.c LABELS gpu)
