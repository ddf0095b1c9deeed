# Pipeline parallelism: schedule generators, checker, printer and simulator (pure C, no MPI).
zeroc_test(NAME test_pp_schedule SOURCES test_pp_schedule.c LABELS unit)
# Pipeline runtime on real ranks: the GPT cut into stages against the single-rank run.
zeroc_test(NAME test_pp_runtime SOURCES test_pp_runtime.c NP 2 4 LABELS mpi)
