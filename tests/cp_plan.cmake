# Context parallelism in the planner (docs/cp.md): formulas by hand and the search.
zeroc_test(NAME test_plan_cp SOURCES test_plan_cp.c LABELS unit)

# Measured against the plan on real ranks (tests/cp_plan_cli.sh): per-tag peaks
# at cp 1/2/4, cp bytes per step, and the device cap that cp 4 gets under.
string(REPLACE ";" " " _cpplan_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t memory comm oom)
  add_test(NAME train_cp_plan_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cp_plan_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_cpplan_mpirun_flags}" ${t})
  set_tests_properties(train_cp_plan_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()
