# Context parallelism in the planner (docs/cp.md): formulas by hand and the search.
zeroc_test(NAME test_plan_cp SOURCES test_plan_cp.c LABELS unit)

# Measured against the plan on real ranks (tests/cp_plan_cli.sh): per-tag peaks
# at cp 1/2/4, cp bytes per step, and the device cap that cp 4 gets under.
string(REPLACE ";" " " _cpplan_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t memory comm oom bench)
  add_test(NAME train_cp_plan_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cp_plan_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_cpplan_mpirun_flags}" ${t})
  set_tests_properties(train_cp_plan_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# zeroc plan --cp: one layout's context line, the search's cp rows, the refusals.
add_test(NAME zeroc_plan_cp COMMAND zeroc_cli plan --model gpt2-124m --seq 8192 --gpus 8 --cp 4
  --cp-mode ulysses)
set_tests_properties(zeroc_plan_cp PROPERTIES LABELS unit TIMEOUT 60
  PASS_REGULAR_EXPRESSION "tp 1 x pp 1 x cp 4 x dp 2; ZeRO-3, shards over 8 ranks.*context +cp 4, ulysses: each rank holds chunks r and 7-r of 8, 2048 tokens.*cp [0-9.e-]+\\);")
add_test(NAME zeroc_plan_cp_all COMMAND zeroc_cli plan --model gpt2-350m --seq 131072 --batch 1
  --gpus 8 --gpu-mem 24 --all --top 3)
set_tests_properties(zeroc_plan_cp_all PROPERTIES LABELS unit TIMEOUT 60
  PASS_REGULAR_EXPRESSION "layouts fit; the 3 fastest.*\n +1 +[0-9]+ +[0-9]+ +[248] +(ring|uly) ")
# (tiny: seq 64, 4 heads)
set(_bad_seq "--cp;3;--gpus;3")
set(_bad_heads "--cp;2;--cp-mode;ulysses;--heads;3;--hidden;96;--gpus;2")
set(_bad_mode "--cp-mode;spiral")
set(_bad_world "--cp;4;--gpus;2")
foreach(b seq heads mode world)
  add_test(NAME zeroc_plan_cp_bad_${b} COMMAND zeroc_cli plan ${_bad_${b}})
  set_tests_properties(zeroc_plan_cp_bad_${b} PROPERTIES LABELS unit TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^zeroc plan: [^\n]*--cp[^\n]*\n$")
endforeach()
