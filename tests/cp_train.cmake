# zeroc train with --cp end to end (tests/cp_cli.sh): real ranks, every layout
# against the single rank.
string(REPLACE ";" " " _cp_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t modes composed pipeline dropout_eval resume_other_cp bad_flags)
  add_test(NAME train_cp_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cp_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_cp_mpirun_flags}" ${t})
  set_tests_properties(train_cp_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()
