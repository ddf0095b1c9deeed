# The built-in GPT as zeroc layers.
zeroc_test(NAME test_gpt SOURCES test_gpt.c NP 1 4 LABELS mpi)
