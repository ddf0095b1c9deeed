# Sharding engine: every layout against the single-rank run.
zeroc_test(NAME test_shard SOURCES test_shard.c NP 1 2 4 LABELS mpi TIMEOUT 600)
zeroc_test(NAME test_shard_errors SOURCES test_shard_errors.c NP 1 2 4 LABELS mpi)
# The public model API as a user program meets it (issue 36): copied descriptors, every
# inspection call with NULL / dead / out-of-range arguments, messages, callbacks' errors,
# the models-per-context limit, finalize with live models, app_json.
zeroc_test(NAME test_model_api SOURCES test_model_api.c NP 1 2 LABELS mpi)
# A user model's parameters exported and imported by name across layouts (ZeRO-3 over
# the world -> 1 rank, ZeRO-1 on 2, HSDP, tp 2), zeroc_model_eval_mean against the
# 1-rank run, zeroc_ctx_allreduce (issue 36).
zeroc_test(NAME test_model_io SOURCES test_model_io.c NP 1 2 4 LABELS mpi)
