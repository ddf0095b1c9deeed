# The DLRM planner against the memory accountant (issue 18): every tag to the byte.
zeroc_test(NAME test_plan_dlrm SOURCES test_plan_dlrm.c NP 1 2 4 LABELS mpi TIMEOUT 120)

# zeroc plan --model dlrm* against zeroc train's measured peak (plan_dlrm_cli.sh).
string(REPLACE ";" " " _plan_dlrm_flags "${ZEROC_MPIRUN_FLAGS}")
add_test(NAME plan_dlrm_cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/plan_dlrm_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
          "${_plan_dlrm_flags}")
set_tests_properties(plan_dlrm_cli PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
