# Dropout: the cpu kernels against the rule and a double reference (finite
# differences with the mask fixed), then `zeroc train --dropout` end to end: every
# layout draws the same masks as one rank (tests/dropout_cli.sh).
zeroc_test(NAME test_dropout SOURCES test_dropout.c LABELS unit)

string(REPLACE ";" " " _dropout_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t dp tp pp off_and_bad)
  add_test(NAME train_dropout_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dropout_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_dropout_mpirun_flags}" ${t})
  set_tests_properties(train_dropout_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()
