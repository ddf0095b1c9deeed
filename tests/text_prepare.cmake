# text -> shards (zeroc_text_prepare, `zeroc data`): the library on real text
# (/usr/share/common-licenses), and the command end to end (tests/data_cli.sh).
zeroc_test(NAME test_text_prepare SOURCES test_text_prepare.c LABELS unit
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/tokenizer)
string(REPLACE ";" " " _mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t data_prepare data_bad_flags data_train data_signal data_lock data_force_commit)
  add_test(NAME ${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/data_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_mpirun_flags}" ${t})
  set_tests_properties(${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2 SKIP_RETURN_CODE 77)
endforeach()
