# The built-in GPT as zeroc layers.
zeroc_test(NAME test_gpt SOURCES test_gpt.c NP 1 4 LABELS mpi)

# zeroc train end to end (tests/train_cli.sh): real ranks, real files.
string(REPLACE ";" " " _mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t loss_falls resume_bitwise resume_other_dp safetensors_roundtrip corrupt_checkpoint bad_flags
          memory_prediction bench offload header_attention)
  add_test(NAME train_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/train_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_mpirun_flags}" ${t})
  set_tests_properties(train_${t} PROPERTIES LABELS "mpi" TIMEOUT 600 PROCESSORS 2)
endforeach()

# The sampler and GPT-2 files in the forms transformers writes.
zeroc_test(NAME test_sample SOURCES test_sample.c NP 1 2 LABELS mpi TIMEOUT 120)
target_compile_definitions(test_sample PRIVATE ZT_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")
# The sampler on the Llama family: its logits equal the training forward's.
zeroc_test(NAME test_sample_llama SOURCES test_sample_llama.c NP 1 2 LABELS mpi TIMEOUT 120)
target_compile_definitions(test_sample_llama PRIVATE ZT_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")

# zeroc sample and train --sample-every end to end (tests/sample_cli.sh).
foreach(t init resume bad_flags train_sample_every transformers init_shorter_seq sigint llama llama_transformers)
  add_test(NAME sample_cli_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/sample_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_mpirun_flags}" ${t})
  set_tests_properties(sample_cli_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# The model interface (zeroc/arch.h): the registry and the trainer through it.
zeroc_test(NAME test_arch SOURCES test_arch.c NP 1 2 LABELS mpi)
target_compile_definitions(test_arch PRIVATE ZT_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")

# transformers save_pretrained directories in and out of zeroc train (tests/hf_cli.sh).
foreach(t export init bad llama qwen fixtures llama_bad)
  add_test(NAME hf_cli_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hf_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_mpirun_flags}" ${CMAKE_CURRENT_SOURCE_DIR}/fixtures ${t})
  set_tests_properties(hf_cli_${t} PROPERTIES LABELS "mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# The Llama family through zeroc train (tests/llama_cli.sh): every layout against one
# rank, memory against the planner to the byte, resume across tp, refusals.
foreach(t layouts_llama layouts_qwen memory resume bad_flags)
  add_test(NAME llama_cli_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/llama_cli.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_mpirun_flags}" ${t})
  set_tests_properties(llama_cli_${t} PROPERTIES LABELS "mpi" TIMEOUT 600 PROCESSORS 2)
endforeach()
# the layout sweeps run once, unsanitized: test_llama and the mpi layout tests cover their
# code under UBSan (scripts/test's label san_once)
set_tests_properties(llama_cli_layouts_llama llama_cli_layouts_qwen PROPERTIES LABELS "mpi;san_once")
