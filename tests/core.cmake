# Foundation: core (results, mesh, accountant, topology, config), cpu device, mpi collectives.
zeroc_test(NAME test_core SOURCES test_core.c LABELS unit)
zeroc_test(NAME test_device SOURCES test_device.c LABELS unit)
zeroc_test(NAME test_comm SOURCES test_comm.c NP 2 4 LABELS mpi)
zeroc_test(NAME test_ctx SOURCES test_ctx.c NP 1 3 4 LABELS mpi)
zeroc_test(NAME test_watchdog SOURCES test_watchdog.c NP 2 4 LABELS mpi)
