# The DLRM planner against the memory accountant (issue 18): every tag to the byte.
zeroc_test(NAME test_plan_dlrm SOURCES test_plan_dlrm.c NP 1 2 4 LABELS mpi TIMEOUT 120)
