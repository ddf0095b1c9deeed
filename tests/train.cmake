# The trainer (zeroc/train.h): config checks and defaults, the step loop,
# save and resume through the library.
zeroc_test(NAME test_train SOURCES test_train.c NP 1 2 LABELS mpi)

# zeroc train --val-data/--val-every/--val-tokens end to end (tests/eval_cli.sh): the
# validation loss in every layout against the single-rank run, training bitwise
# unchanged by the evaluation, the flags' refusals.
string(REPLACE ";" " " _eval_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t dp tp pp dropout flags)
  add_test(NAME train_eval_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/eval_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_eval_mpirun_flags}" ${t})
  set_tests_properties(train_eval_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2
    SKIP_RETURN_CODE 77)
endforeach()
