#!/usr/bin/env bash
# examples/dlrm_layers_check.sh - the user-written DLRM (dlrm_layers.c) on 2 ranks
# with table-, column- and row-wise tables gives the single-rank run's per-step
# losses to 1e-5 relative, and its loss falls (the program's exit status).
# usage: dlrm_layers_check.sh BINARY MPIRUN "MPIRUN_FLAGS"
set -u
BIN=$1 MPIRUN=$2 FLAGS=$3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dlrm-layers-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
$MPIRUN $FLAGS -np 1 "$BIN" auto "$WORK/one.txt" || { echo "FAIL: single-rank run exited $?"; exit 1; }
for s in table column row; do
  $MPIRUN $FLAGS -np 2 "$BIN" $s "$WORK/two.txt" || { echo "FAIL: 2 ranks $s exited $?"; exit 1; }
  [ "$(wc -l < "$WORK/one.txt")" = "$(wc -l < "$WORK/two.txt")" ] || { echo "FAIL: step counts differ"; exit 1; }
  paste "$WORK/one.txt" "$WORK/two.txt" | awk -v s=$s '
    { d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if (!(d <= 1e-5 * $1)) bad++ }
    END { printf "2 ranks %s-wise: max rel loss diff %.3g over %d steps\n", s, m, NR; exit bad > 0 }' \
    || { paste "$WORK/one.txt" "$WORK/two.txt"; echo "FAIL: 2 ranks $s-wise differ from 1 rank"; exit 1; }
done
