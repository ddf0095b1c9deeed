#!/usr/bin/env bash
# tests/env_knobs.sh SOURCE_DIR - every numeric knob the sources read through
# zeroc__env_i64/_f64 is in src/core/env.c's table (a knob missing there is
# ZEROC_ERR_INTERNAL at run time, and the cuda kernels' knobs only run on a GPU,
# so a missing one would pass every CPU test).
src=${1:?usage: env_knobs.sh SOURCE_DIR}
names=$(grep -rhoE 'zeroc__env_(i64|f64)\("ZEROC_[A-Z0-9_]+"' "$src/src" "$src/apps" |
  sed -E 's/.*"(ZEROC_[A-Z0-9_]+)"/\1/' | sort -u)
[ -n "$names" ] || { echo "FAIL: no knob found under $src/src (pattern broken?)"; exit 1; }
bad=0
for k in $names; do
  grep -q "{\"$k\"," "$src/src/core/env.c" || { echo "FAIL: $k is read but not in src/core/env.c's table"; bad=1; }
done
[ $bad = 0 ] && echo "$(wc -w <<<"$names") knobs, all in env.c's table"
exit $bad
