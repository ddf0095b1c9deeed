#!/usr/bin/env bash
# tests/hostile.sh - hostile input, as a user would give it: every probe of
# tests/hostile/GROUP.sh runs a real `zeroc` (on real ranks where it says so)
# and must end within its time limit with the expected exit status and a
# message that names what is wrong; no probe may hang, crash (a signal, a
# sanitizer report) or leave a half-written file behind.
# usage: hostile.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" GROUP
# HOSTILE_TABLE=FILE appends one Markdown row per probe (what, result, time).
set -u
ZEROC=$(realpath "$1") MPIRUN=$2 FLAGS=$3 GROUP=$4
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-hostile-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export ZEROC_BIND=0 OMP_NUM_THREADS=1
PASS=0 FAILED=0

now() { date +%s.%N; }
# zt ARGS...: one rank of `zeroc` (no launcher); ztn N ARGS...: N ranks under mpirun
zt() { "$ZEROC" "$@"; }
ztn() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" "$@"; }
export ZEROC MPIRUN FLAGS WORK
# ev VAR=VALUE... COMMAND...: COMMAND (a function too) with those variables set
ev() { while [[ $1 == *=* ]]; do export "$1"; shift; done; "$@"; }
export -f zt ztn ev  # probes run them under timeout(1), in a child bash
# a tiny, quick training job's flags
TINY=(--device cpu --model tiny --steps 3 --quiet)
# ab_tokenizer FILE: a BPE tokenizer.json of "a" and "b" only (no byte-level alphabet, no
# unknown token), which cannot encode other letters (the inputs and text groups)
ab_tokenizer() {
  python3 - "$1" <<'PY'
import json, sys
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": bl, "post_processor": None, "decoder": bl,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "vocab": {"a": 0, "b": 1},
                     "merges": []}}, open(sys.argv[1], "w"))
PY
}

# probe WHAT EXPECT REGEX LIMIT -- COMMAND...
#   WHAT   the row's text
#   EXPECT 0 (must succeed), nz (must fail with an exit status, not a signal)
#          or a number
#   REGEX  an extended regular expression the output must match ('' = any)
#   LIMIT  seconds before the probe counts as a hang
# COMMAND may be zt, ztn, ev VAR=... zt, or any function the group exports.
# Sets OUT (the output) and RC for checks that follow.
probe() {
  local what=$1 expect=$2 re=$3 limit=$4; shift 5
  local t0 dt verdict=ok why=""
  t0=$(now)
  OUT=$(timeout -k 5 "$limit" bash -c '"$@"' probe "$@" 2>&1 < /dev/null); RC=$?
  dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  if [ $RC = 124 ] || [ $RC = 137 ]; then verdict=FAIL why="hung (killed after $limit s)"
  elif [ $RC -gt 128 ] && [ "$expect" != $RC ]; then verdict=FAIL why="died of signal $((RC - 128))"
  elif echo "$OUT" | grep -qE 'runtime error:|AddressSanitizer|LeakSanitizer|Segmentation fault|core dumped'; then
    verdict=FAIL why="crashed or a sanitizer report"
  elif [ "$expect" = nz ] && [ $RC = 0 ]; then verdict=FAIL why="exited 0, expected a failure"
  elif [ "$expect" != nz ] && [ "$expect" != $RC ]; then verdict=FAIL why="exited $RC, expected $expect"
  elif [ -n "$re" ] && ! echo "$OUT" | grep -qE -- "$re"; then verdict=FAIL why="no line matches /$re/"
  fi
  # the message without its "zeroc train: rank 0 (phase): ZEROC_ERR_X: file.c:12: " prefix
  local msg; msg=$(echo "$OUT" | grep -m1 -E -- "${re:-.}" |
    sed -E 's/^zeroc [a-z]+: (rank [0-9]+ \([a-z]+\): )?(ZEROC_ERR_[A-Z_]+: )?([a-z_]+\.c:[0-9]+: )?//' | cut -c1-120)
  if [ $verdict = ok ]; then
    PASS=$((PASS + 1)); echo "ok   $what ($dt s, exit $RC)"
  else
    FAILED=$((FAILED + 1)); echo "FAIL $what: $why ($dt s, exit $RC)"; echo "$OUT" | tail -15 | sed 's/^/     | /'
  fi
  if [ -n "${HOSTILE_TABLE:-}" ]; then
    local res; [ $RC = 0 ] && res="exit 0" || res="exit $RC: \`$(echo "$msg" | sed 's/|/\\|/g; s/`//g')\`"
    [ $verdict = ok ] || res="**FAIL** ($why)"
    echo "| $what | $res | $dt s |" >> "$HOSTILE_TABLE"
  fi
  return 0
}
# check WHAT COMMAND...: an extra assertion after a probe (a file left intact,
# nothing half-written); counts like a probe.
check() {
  local what=$1; shift
  if "$@"; then PASS=$((PASS + 1)); echo "ok   $what"
  else FAILED=$((FAILED + 1)); echo "FAIL $what"; fi
}

[ -f "$HERE/hostile/$GROUP.sh" ] || { echo "hostile.sh: no probe group '$GROUP' (tests/hostile/*.sh)"; exit 2; }
cd "$WORK"
# shellcheck source=/dev/null
. "$HERE/hostile/$GROUP.sh"
echo "$GROUP: $PASS passed, $FAILED failed"
[ $FAILED = 0 ]
