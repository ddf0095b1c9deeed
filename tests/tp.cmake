# Tensor parallelism: each TP layer against the unsplit layer, the vocab-parallel
# cross-entropy, and the GPT at tp 2 and 4 (also x ZeRO-3) against the single rank.
zeroc_test(NAME test_tp SOURCES test_tp.c NP 2 4 LABELS mpi)

# zeroc train with --tp end to end (tests/tp_cli.sh): real ranks, real files.
string(REPLACE ";" " " _tp_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t tp2 tp4 tp2_zero3 tp2_sp tp2_sp_zero3_recompute resume_other_tp safetensors
          memory_prediction bad_flags)
  add_test(NAME train_tp_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tp_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_tp_mpirun_flags}" ${t})
  set_tests_properties(train_tp_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()
