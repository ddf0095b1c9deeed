# Model-parallel embedding bags: every sharding against the single-rank run.
zeroc_test(NAME test_embed SOURCES test_embed.c NP 1 2 4 LABELS mpi)
# The cpu embedding-bag kernels against references in double.
zeroc_test(NAME test_kernels_embed SOURCES test_kernels_embed.c LABELS unit)
