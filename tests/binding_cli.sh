#!/usr/bin/env bash
# tests/binding_cli.sh - a launcher's binding is left alone (issue 40, hazard 5): under
# `mpirun --bind-to core` each rank keeps its one core (--print-topology marks it "the
# launcher's binding", 1 thread); with --bind-to none, or Open MPI's unasked default
# (one core per rank at 2 ranks or fewer), zeroc binds each rank to its share of the node.
# usage: binding_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS"
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$(echo "$3" | sed 's/--bind-to [a-z]*//')
fail() { echo "FAIL: $*"; exit 1; }
topo() { # np, launcher flags... -> the rank lines
  local np=$1; shift
  $MPIRUN $FLAGS "$@" -np "$np" "$ZEROC" train --quiet --device cpu --model tiny --steps 1 \
    --print-topology 2>&1 | grep '^rank'
}
threads() { echo "$1" | sed -n 's/.* threads \([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s }'; }
# the cores zeroc sees (hwloc's, not counting hyperthreads): one unbound rank's threads
cores=$(threads "$(topo 1 --bind-to none)")
[ -n "$cores" ] && [ "$cores" -ge 2 ] || { echo "SKIP: $cores core(s): no binding is narrower"; exit 77; }
for np in 1 2; do
  out=$(topo "$np" --bind-to core)
  [ "$(echo "$out" | grep -c "the launcher's binding")" = "$np" ] || fail "np $np --bind-to core: $out"
  echo "$out" | grep -q "threads 1 " || fail "np $np --bind-to core: not 1 thread: $out"
  # each rank on its own single core, the one the launcher gave
  [ "$(echo "$out" | awk '{ print $7 }' | sort -u | wc -l)" = "$np" ] || fail "np $np: cores $out"
  echo "np $np --bind-to core: kept: $(echo "$out" | awk '{ printf "%s ", $7 }')"
  for b in "--bind-to none" ""; do
    out=$(topo "$np" $b)
    echo "$out" | grep -q "the launcher's binding" && fail "np $np '$b': zeroc's plan expected: $out"
    # zeroc's plan shares the cores out: the ranks' threads add up to them
    [ "$(threads "$out")" = "$cores" ] || fail "np $np '$b': threads do not add up to $cores: $out"
    echo "np $np '${b:-default}': zeroc's plan, $cores cores shared out"
  done
done
# ZEROC_BIND=0 binds nothing and says so
out=$(ZEROC_BIND=0 topo 1 --bind-to none)
echo "$out" | grep -q "cores unbound" || fail "ZEROC_BIND=0: $out"
echo "ZEROC_BIND=0: unbound"
