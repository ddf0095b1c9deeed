# Sharding engine: every layout against the single-rank run.
zeroc_test(NAME test_shard SOURCES test_shard.c NP 1 2 4 LABELS mpi TIMEOUT 600)
zeroc_test(NAME test_shard_errors SOURCES test_shard_errors.c NP 1 2 4 LABELS mpi)
