# The trainer (zeroc/train.h): config checks and defaults, the step loop,
# save and resume through the library.
zeroc_test(NAME test_train SOURCES test_train.c NP 1 2 LABELS mpi)
