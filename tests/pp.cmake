# Pipeline parallelism: schedule generators, checker, printer and simulator (pure C, no MPI).
zeroc_test(NAME test_pp_schedule SOURCES test_pp_schedule.c LABELS unit)
