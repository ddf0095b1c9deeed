# The planner (zeroc plan): library checks, then the command itself.
zeroc_test(NAME test_plan SOURCES test_plan.c LABELS unit)

# cuDNN attention's workspace: the formula, the planner's prediction of it, the knobs; and
# `zeroc plan --attention cudnn|flash|naive --deterministic`.
zeroc_test(NAME test_plan_attention SOURCES test_plan_attention.c LABELS unit)
add_test(NAME test_plan_attention_cli COMMAND test_plan_attention --cli $<TARGET_FILE:zeroc_cli>)
set_tests_properties(test_plan_attention_cli PROPERTIES LABELS unit TIMEOUT 120)

# The built command: bad values exit 2 naming the flag, good ones print the plan.
add_test(NAME test_plan_cli COMMAND test_plan --cli $<TARGET_FILE:zeroc_cli>)
set_tests_properties(test_plan_cli PROPERTIES LABELS unit TIMEOUT 120)
add_test(NAME zeroc_plan_7b COMMAND zeroc_cli plan --layers 32 --hidden 4096 --heads 32
  --vocab 50257 --seq 2048 --batch 1 --gpus 8 --gpu-mem 80 --zero 3)
set_tests_properties(zeroc_plan_7b PROPERTIES LABELS unit TIMEOUT 60
  PASS_REGULAR_EXPRESSION "GPT 6\\.66B parameters.*ZeRO-3, shards over 8 ranks.*per token.*total +[0-9.]+ of 80 GiB: fits")
add_test(NAME zeroc_plan_all COMMAND zeroc_cli plan --model gpt2-350m --gpus 16 --gpu-mem 24 --all --top 5)
set_tests_properties(zeroc_plan_all PROPERTIES LABELS unit TIMEOUT 60
  PASS_REGULAR_EXPRESSION "layouts fit; the 5 fastest.*\n +1 +[0-9]+ +[0-9]+ ")
# --model names come from the registry (zeroc/arch.h): an unknown one is refused
# by train, plan and bench alike, listing every registered architecture's names.
foreach(cmd train plan bench)
  add_test(NAME zeroc_${cmd}_unknown_model COMMAND zeroc_cli ${cmd} --model llama --device cpu)
  set_tests_properties(zeroc_${cmd}_unknown_model PROPERTIES LABELS unit TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^zeroc ${cmd}: --model 'llama': accepted tiny, [^\n]*custom, dlrm-tiny, dlrm, dlrm-mlperf\n$")
endforeach()
