# DLRM (issue 18): kernels, the dense model's gradients, metrics and the click data
# formats on one rank; training through `zeroc train` on 1, 2 and 4 ranks (dlrm_cli.sh).
zeroc_test(NAME test_dlrm SOURCES test_dlrm.c LABELS unit)
target_compile_definitions(test_dlrm PRIVATE ZEROC_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")

string(REPLACE ";" " " _dlrm_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t np2 np4 auc criteo resume bad_flags)
  add_test(NAME train_dlrm_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dlrm_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_dlrm_mpirun_flags}" ${CMAKE_CURRENT_SOURCE_DIR}/fixtures ${t})
  set_tests_properties(train_dlrm_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

