# Offload I/O layer: pinned pool, NVMe swapper (io_uring), offload state.
# test_offload and test_offload_swap run on TMPDIR (or /tmp); test_offload_fs mounts small tmpfs,
# ramfs and read-only file systems in a private mount namespace (root only,
# skipped with 77 otherwise).
zeroc_test(NAME test_offload SOURCES test_offload.c LABELS unit)
zeroc_test(NAME test_offload_swap SOURCES test_offload_swap.c LABELS unit)
zeroc_test(NAME test_offload_fs SOURCES test_offload_fs.c LABELS unit nvme)
