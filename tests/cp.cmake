# Context parallelism: the attention block kernels (cpu) against references and the
# one-piece kernel; ring and Ulysses attention on 2 and 4 ranks against the single
# rank's attention rows, with the communication volume of the formulas in cp/cp.h.
zeroc_test(NAME test_cp_kernels SOURCES test_cp_kernels.c LABELS unit)
zeroc_test(NAME test_cp SOURCES test_cp.c NP 2 4 LABELS mpi)
