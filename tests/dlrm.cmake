# DLRM (issue 18): kernels, the dense model's gradients, metrics and the click data
# formats on one rank; training through `zeroc train` on 1, 2 and 4 ranks (dlrm_cli.sh).
zeroc_test(NAME test_dlrm SOURCES test_dlrm.c LABELS unit)
target_compile_definitions(test_dlrm PRIVATE ZEROC_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")
