# Flags and files a user can get wrong on the command line (sourced by
# tests/hostile.sh; see probe there).
probe "unknown flag" nz "unknown flag '--bogus'" 20 -- zt train "${TINY[@]}" --bogus
probe "--steps not a number" nz "steps" 20 -- zt train "${TINY[@]}" --steps abc
probe "--data names a missing file" nz "nope" 20 -- zt train "${TINY[@]}" --data "$WORK/nope.bin"
probe "tiny job on 2 ranks succeeds" 0 "" 120 -- ztn 2 train "${TINY[@]}"
probe "ZEROC_DEBUG set by ev" 0 "" 60 -- ev ZEROC_DEBUG=WARN zt train "${TINY[@]}"
