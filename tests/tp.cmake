# Tensor parallelism: each TP layer against the unsplit layer, the vocab-parallel
# cross-entropy, and the GPT at tp 2 and 4 (also x ZeRO-3) against the single rank.
zeroc_test(NAME test_tp SOURCES test_tp.c NP 2 4 LABELS mpi)
