# Pipeline parallelism: schedule generators, checker, printer and simulator (pure C, no MPI).
zeroc_test(NAME test_pp_schedule SOURCES test_pp_schedule.c LABELS unit)
# Pipeline runtime on real ranks: the GPT cut into stages against the single-rank run.
zeroc_test(NAME test_pp_runtime SOURCES test_pp_runtime.c NP 2 4 LABELS mpi)

# zeroc train with a pipeline, end to end (tests/pp_cli.sh): every layout against the
# single-rank run, --print-schedule, checkpoints and safetensors across layouts, the
# planner's memory prediction, bad flags.
string(REPLACE ";" " " _pp_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t pp2 pp4 pp2_interleaved pp2_dp2 pp2_recompute pp2_bf16 pp2_tp2 pp2_tp2_dp2 pp2_tp2_sp print_schedule resume resume_tp
          safetensors memory_prediction bad_flags)
  add_test(NAME train_pp_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pp_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_pp_mpirun_flags}" ${t})
  set_tests_properties(train_pp_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2
    SKIP_RETURN_CODE 77)
endforeach()
# once, unsanitized (label san_once): test_pp_runtime and the planner's unit tests cover it
set_tests_properties(train_pp_memory_prediction PROPERTIES LABELS "mpi;san_once")
