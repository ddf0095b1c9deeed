# io: token data sets and shards, the synthetic corpus, safetensors, JSON,
# CRC-32C and crash-safe files.
zeroc_test(NAME test_io_files SOURCES test_io_files.c LABELS unit)
zeroc_test(NAME test_io_json SOURCES test_io_json.c LABELS unit)
zeroc_test(NAME test_io_safetensors SOURCES test_io_safetensors.c LABELS unit)
zeroc_test(NAME test_io_st_set SOURCES test_io_st_set.c LABELS unit)
zeroc_test(NAME test_io_data SOURCES test_io_data.c LABELS unit)
zeroc_test(NAME test_io_synth SOURCES test_io_synth.c LABELS unit)
zeroc_test(NAME test_io_data_mpi SOURCES test_io_data_mpi.c NP 2 4 LABELS mpi)
