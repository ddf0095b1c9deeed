# Foundation: core (results, mesh, accountant, topology, config), cpu device, mpi collectives.
zeroc_test(NAME test_core SOURCES test_core.c LABELS unit)
zeroc_test(NAME test_device SOURCES test_device.c LABELS unit)
zeroc_test(NAME test_comm SOURCES test_comm.c NP 2 3 4 LABELS mpi)
zeroc_test(NAME test_ctx SOURCES test_ctx.c NP 1 3 4 LABELS mpi)
# zeroc initialising MPI itself: a failed create leaves it up for another attempt; the
# last context's finalize takes it down; a program that only failed still ends cleanly.
zeroc_test(NAME test_ctx_owned_mpi SOURCES test_ctx_owned_mpi.c NP 1 2 LABELS mpi)
add_test(NAME test_ctx_owned_mpi_fail_only
  COMMAND ${ZEROC_MPIEXEC} ${ZEROC_MPIRUN_FLAGS} -np 2 $<TARGET_FILE:test_ctx_owned_mpi> fail-only)
set_tests_properties(test_ctx_owned_mpi_fail_only PROPERTIES LABELS "mpi" TIMEOUT 120 PROCESSORS 2
  FAIL_REGULAR_EXPRESSION "exiting improperly|without calling .finalize")
zeroc_test(NAME test_watchdog SOURCES test_watchdog.c NP 2 4 LABELS mpi)
zeroc_test(NAME test_heartbeat SOURCES test_heartbeat.c NP 2 LABELS mpi TIMEOUT 120)
# The error contract (include/zeroc/result.h): each failing public call names its own failure.
zeroc_test(NAME test_errors SOURCES test_errors.c NP 1 LABELS mpi)

# GPU: nccl collectives (one GPU, or mpirun -np N on N GPUs) and GPU-vs-CPU training.
zeroc_test(NAME test_comm_nccl SOURCES test_comm_nccl.c LABELS gpu)
add_test(NAME gpu_train_matches_cpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_train.sh $<TARGET_FILE:zeroc_cli>)
set_tests_properties(gpu_train_matches_cpu PROPERTIES LABELS "gpu" TIMEOUT 900 SKIP_RETURN_CODE 77)

# The staged comm (ZEROC_COMM=mpi on cuda, =staged on either device: MPI on pinned host
# copies, so several ranks may share one GPU): the collectives of test_comm through the
# staging code on the cpu device; on a GPU, test_comm_nccl's device-buffer collectives
# with 2 and 4 ranks on one GPU, and tests/gpu_layouts.sh (ZeRO-1/2/3, HSDP, TP, PP
# against the 1-rank run; its cpu mode, labelled mpi, also wants bitwise equality with
# the unstaged mpi backend and checks ZEROC_COMM's refusals).
string(REPLACE ";" " " _staged_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(np 2 4)
  add_test(NAME test_comm_staged_np${np}
    COMMAND ${ZEROC_MPIEXEC} ${ZEROC_MPIRUN_FLAGS} -x ZEROC_COMM -np ${np} $<TARGET_FILE:test_comm>)
  set_tests_properties(test_comm_staged_np${np} PROPERTIES LABELS "mpi" TIMEOUT 300
    SKIP_RETURN_CODE 77 PROCESSORS 2 ENVIRONMENT "ZEROC_COMM=staged")
  add_test(NAME test_comm_nccl_staged_np${np}
    COMMAND ${ZEROC_MPIEXEC} ${ZEROC_MPIRUN_FLAGS} -x ZEROC_COMM -np ${np} $<TARGET_FILE:test_comm_nccl>)
  set_tests_properties(test_comm_nccl_staged_np${np} PROPERTIES LABELS "gpu" TIMEOUT 300
    SKIP_RETURN_CODE 77 ENVIRONMENT "ZEROC_COMM=mpi")
endforeach()
add_test(NAME gpu_layouts_staged
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_layouts.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC})
set_tests_properties(gpu_layouts_staged PROPERTIES LABELS "gpu" TIMEOUT 1800 SKIP_RETURN_CODE 77
  ENVIRONMENT "MPIRUN_FLAGS=${_staged_mpirun_flags}")
add_test(NAME layouts_staged_cpu
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_layouts.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC})
set_tests_properties(layouts_staged_cpu PROPERTIES LABELS "mpi;san_once" TIMEOUT 600 PROCESSORS 2
  SKIP_RETURN_CODE 77 ENVIRONMENT "MPIRUN_FLAGS=${_staged_mpirun_flags};ZEROC_LAYOUTS_DEVICE=cpu")
add_test(NAME gpu_clip_skip_matches_cpu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_clip_skip.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC})
set_tests_properties(gpu_clip_skip_matches_cpu PROPERTIES LABELS "gpu" TIMEOUT 900 SKIP_RETURN_CODE 77
  ENVIRONMENT "MPIRUN_FLAGS=${_staged_mpirun_flags}")

# every numeric environment knob the sources read is in env.c's table (the cuda kernels'
# knobs are read only on a GPU, so no cpu test would notice a missing one)
add_test(NAME env_knobs_in_table COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/env_knobs.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(env_knobs_in_table PROPERTIES LABELS "unit" TIMEOUT 60)
# A launcher's binding left alone, zeroc's plan otherwise (issue 40, hazard 5), read from
# --print-topology under mpirun --bind-to core / none / Open MPI's default.
string(REPLACE ";" " " _bind_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
add_test(NAME binding_cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/binding_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
          "${_bind_mpirun_flags}")
set_tests_properties(binding_cli PROPERTIES LABELS "mpi" TIMEOUT 120 SKIP_RETURN_CODE 77
  PROCESSORS 2)
