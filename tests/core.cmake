# Foundation: core (results, mesh, accountant, topology, config), cpu device, mpi collectives.
zeroc_test(NAME test_core SOURCES test_core.c LABELS unit)
zeroc_test(NAME test_device SOURCES test_device.c LABELS unit)
zeroc_test(NAME test_comm SOURCES test_comm.c NP 2 4 LABELS mpi)
zeroc_test(NAME test_ctx SOURCES test_ctx.c NP 1 3 4 LABELS mpi)
zeroc_test(NAME test_watchdog SOURCES test_watchdog.c NP 2 4 LABELS mpi)
# The error contract (include/zeroc/result.h): each failing public call names its own failure.
zeroc_test(NAME test_errors SOURCES test_errors.c NP 1 LABELS mpi)

# GPU: nccl collectives (one GPU, or mpirun -np N on N GPUs) and GPU-vs-CPU training.
zeroc_test(NAME test_comm_nccl SOURCES test_comm_nccl.c LABELS gpu)
add_test(NAME gpu_train_matches_cpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_train.sh $<TARGET_FILE:zeroc_cli>)
set_tests_properties(gpu_train_matches_cpu PROPERTIES LABELS "gpu" TIMEOUT 900 SKIP_RETURN_CODE 77)
add_test(NAME gpu_clip_skip_matches_cpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_clip_skip.sh $<TARGET_FILE:zeroc_cli>)
set_tests_properties(gpu_clip_skip_matches_cpu PROPERTIES LABELS "gpu" TIMEOUT 900 SKIP_RETURN_CODE 77)
