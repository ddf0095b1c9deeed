# io: token data sets and shards, the synthetic corpus, safetensors, JSON,
# CRC-32C and crash-safe files.
zeroc_test(NAME test_io_files SOURCES test_io_files.c LABELS unit)
