# ZEROC_* environment knobs a user can get wrong (sourced by tests/hostile.sh;
# see probe there). Every numeric knob is range-checked by zeroc_ctx_create:
# a bad value stops every rank at start-up with one line naming the variable,
# its value and the accepted range (src/core/env.c holds the ranges).
# Local ranks inherit mpirun's environment, so `ev VAR=... ztn N` reaches all.
bad="accepted an integer"
probe "ZEROC_THREADS=-1" 2 "ZEROC_THREADS='-1': $bad 1 to 4096" 20 -- ev ZEROC_THREADS=-1 zt train "${TINY[@]}"
probe "ZEROC_THREADS=99999999999" 2 "ZEROC_THREADS='99999999999': $bad" 20 -- ev ZEROC_THREADS=99999999999 zt train "${TINY[@]}"
probe "ZEROC_THREADS=0" 2 "ZEROC_THREADS='0'" 20 -- ev ZEROC_THREADS=0 zt train "${TINY[@]}"
probe "ZEROC_THREADS=4x" 2 "ZEROC_THREADS='4x'" 20 -- ev ZEROC_THREADS=4x zt train "${TINY[@]}"
probe "ZEROC_THREADS=2 is used" 0 "2 threads" 30 -- ev ZEROC_THREADS=2 ZEROC_DEBUG=INFO ZEROC_DEBUG_SUBSYS=TOPO zt train "${TINY[@]}"
probe "ZEROC_BIND=2" 2 "ZEROC_BIND='2': $bad 0 to 1" 20 -- ev ZEROC_BIND=2 zt train "${TINY[@]}"
probe "ZEROC_CPU_GEMM=2" 2 "ZEROC_CPU_GEMM='2': $bad 0 to 1" 20 -- ev ZEROC_CPU_GEMM=2 zt train "${TINY[@]}"
probe "ZEROC_CPU_GEMM=nan" 2 "ZEROC_CPU_GEMM='nan': $bad 0 to 1" 20 -- ev ZEROC_CPU_GEMM=nan zt train "${TINY[@]}"
probe "ZEROC_DEVICE_MEM_LIMIT=-1" 2 "ZEROC_DEVICE_MEM_LIMIT='-1': $bad 0 to" 20 -- ev ZEROC_DEVICE_MEM_LIMIT=-1 zt train "${TINY[@]}"
# the KiB value times 1024 overflowed int64 (UBSan) before it was checked
probe "ZEROC_OFFLOAD_BLOCK_KIB=2^63-1" 2 "ZEROC_OFFLOAD_BLOCK_KIB='9223372036854775807': $bad 4 to 65536" 20 -- \
  ev ZEROC_OFFLOAD_BLOCK_KIB=9223372036854775807 zt train "${TINY[@]}"
probe "ZEROC_OFFLOAD_QD=0" 2 "ZEROC_OFFLOAD_QD='0'" 20 -- ev ZEROC_OFFLOAD_QD=0 zt train "${TINY[@]}"
probe "ZEROC_COMM_TIMEOUT=abc" 2 "ZEROC_COMM_TIMEOUT='abc': accepted a number" 20 -- ev ZEROC_COMM_TIMEOUT=abc zt train "${TINY[@]}"
probe "ZEROC_COMM_TIMEOUT=-5" 2 "ZEROC_COMM_TIMEOUT='-5'" 20 -- ev ZEROC_COMM_TIMEOUT=-5 zt train "${TINY[@]}"
probe "ZEROC_PEAK_TFLOPS=nan" 2 "ZEROC_PEAK_TFLOPS='nan'" 20 -- ev ZEROC_PEAK_TFLOPS=nan zt train "${TINY[@]}"
# a bad value fails every rank together: non-zero exit, no hang
probe "ZEROC_THREADS=-1 on 2 ranks" nz "ZEROC_THREADS='-1'" 60 -- ev ZEROC_THREADS=-1 ztn 2 train "${TINY[@]}"
# ZEROC_COMM_TIMEOUT is honoured by zeroc train (the flag's default used to win):
# a rank that hangs ends the job after ~3 s, not after 300 s
probe "ZEROC_COMM_TIMEOUT=3 ends a hang" nz "did not complete within 3 s|within 3 s" 60 -- \
  ev ZEROC_COMM_TIMEOUT=3 ZEROC_FAULT=hang@forward:rank=1 ztn 2 train "${TINY[@]}"
# precedence: --comm-timeout > ZEROC_COMM_TIMEOUT > 300
probe "ZEROC_COMM_TIMEOUT=7 is the timeout" 0 "timeout 7 s" 30 -- ev ZEROC_COMM_TIMEOUT=7 ZEROC_DEBUG=INFO zt train "${TINY[@]}"
probe "--comm-timeout 9 beats ZEROC_COMM_TIMEOUT=7" 0 "timeout 9 s" 30 -- \
  ev ZEROC_COMM_TIMEOUT=7 ZEROC_DEBUG=INFO zt train "${TINY[@]}" --comm-timeout 9
# malformed fault specs are errors, not silently nothing
probe "ZEROC_FAULT=';' arms nothing" 2 "ZEROC_FAULT=';' holds no spec" 20 -- ev 'ZEROC_FAULT=;' zt train "${TINY[@]}"
probe "ZEROC_FAULT rank beyond the job" 2 "rank=5, but the job has ranks 0..0" 20 -- \
  ev ZEROC_FAULT=kill@forward:rank=5 zt train "${TINY[@]}"
probe "ZEROC_FAULT filter given twice" 2 "filter 'rank=1'.*each at most once" 20 -- \
  ev ZEROC_FAULT=kill@forward:rank=0:rank=1 zt train "${TINY[@]}"
probe "ZEROC_HEARTBEAT_TIMEOUT=0.1 (below 0.2)" 2 "ZEROC_HEARTBEAT_TIMEOUT 0.1: accepted 0 \(off\) or 0.2 to 3600" 30 -- ev ZEROC_HEARTBEAT_TIMEOUT=0.1 zt train "${TINY[@]}"
probe "ZEROC_HEARTBEAT_TIMEOUT=1e9" 2 "ZEROC_HEARTBEAT_TIMEOUT='1e9': accepted a number 0 to 3600" 30 -- ev ZEROC_HEARTBEAT_TIMEOUT=1e9 zt train "${TINY[@]}"
probe "ZEROC_HEARTBEAT_IF with a /33 subnet" 2 "ZEROC_HEARTBEAT_IF entry '10.0.0.0/33': accepted interface names" 30 -- ev ZEROC_HEARTBEAT_IF=eth0,10.0.0.0/33 zt train "${TINY[@]}"
probe "ZEROC_HEARTBEAT_IF of names and a subnet is used" 0 "" 60 -- ev ZEROC_HEARTBEAT_IF=lo,10.1.0.0/16 zt train "${TINY[@]}"
