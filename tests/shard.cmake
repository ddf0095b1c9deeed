# Sharding engine: every layout against the single-rank run.
zeroc_test(NAME test_shard SOURCES test_shard.c NP 1 2 4 LABELS mpi TIMEOUT 600)
zeroc_test(NAME test_shard_errors SOURCES test_shard_errors.c NP 1 2 4 LABELS mpi)
# The public model API as a user program meets it (issue 36): copied descriptors, every
# inspection call with NULL / dead / out-of-range arguments, messages, callbacks' errors,
# the models-per-context limit, finalize with live models, app_json.
zeroc_test(NAME test_model_api SOURCES test_model_api.c NP 1 2 LABELS mpi)
