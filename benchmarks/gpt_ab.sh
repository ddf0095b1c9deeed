#!/usr/bin/env bash
# benchmarks/gpt_ab.sh - two builds of zeroc side by side on the same GPT in paired rounds, for
# changes smaller than this shared host's noise: in each round both builds train STEPS steps
# (the order alternates), each run gives the median and the 10th percentile of `step_ms` over
# steps 4..STEPS, and the round the ratios NEW/OLD of both; the summary is the median of the
# rounds' ratios and their range (below 1: NEW is faster).
# usage: gpt_ab.sh OLD_BUILD NEW_BUILD [ROUNDS] [NP]
#   OLD_BUILD and NEW_BUILD may be the same build with OLD_ENV / NEW_ENV telling the sides apart
#   (e.g. OLD_ENV=ZEROC_CPU_GEMM=0 NEW_ENV=ZEROC_CPU_GEMM=1: OpenBLAS against zeroc's product),
#   env ZEROC_FLAGS (default "--zero 1"), the shape in PRESET or LAYERS HIDDEN HEADS VOCAB SEQ
#   BATCH (gpt_shape.sh; default issue 20's GPT), STEPS (default 30), MPIRUN_FLAGS
set -u
OLD=$1 NEW=$2 ROUNDS=${3:-8} NP=${4:-2}
. "$(dirname "$0")/gpt_shape.sh"
STEPS=${STEPS:-30}
[ "$STEPS" -ge 5 ] 2>/dev/null || { echo "gpt_ab.sh: STEPS '$STEPS' must be an integer >= 5 (steps 1-3 are warm-up)" >&2; exit 2; }
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "gpt_ab.sh: ROUNDS '$ROUNDS' must be an integer >= 1" >&2; exit 2; }
[ "$NP" -ge 1 ] 2>/dev/null || { echo "gpt_ab.sh: NP '$NP' must be an integer >= 1" >&2; exit 2; }
for b in "$OLD" "$NEW"; do
  [ -x "$b/zeroc" ] || { echo "gpt_ab.sh: no zeroc program in '$b' (a build directory is expected)" >&2; exit 2; }
done
ZF=${ZEROC_FLAGS:---zero 1}
FLAGS=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-ab-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# prints "median p10" of step_ms over steps 4..STEPS; $2: that side's VAR=value words
run() {
  local envx=() e
  for e in $2; do envx+=(-x "$e"); done
  env $2 mpirun $FLAGS -np "$NP" "${envx[@]}" "$1/zeroc" train --device cpu --model custom "${SHAPE[@]}" $ZF \
    --steps "$STEPS" --quiet --metrics "$WORK/m.jsonl" > "$WORK/z.log" 2>&1 ||
    { cat "$WORK/z.log" >&2; exit 1; }
  sed -n 's/.*"step_ms": \([^,]*\).*/\1/p' "$WORK/m.jsonl" | sed -n "4,${STEPS}p" | sort -g |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)], a[int(NR / 10) + 1] }'
}
: > "$WORK/r"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then o=$(run "$OLD" "${OLD_ENV:-}"); n=$(run "$NEW" "${NEW_ENV:-}")
  else n=$(run "$NEW" "${NEW_ENV:-}"); o=$(run "$OLD" "${OLD_ENV:-}"); fi
  echo "$o $n" | awk -v r="$r" '{ printf "round %d: old %.1f ms (p10 %.1f), new %.1f ms (p10 %.1f), new/old %.4f (p10 %.4f)\n", r, $1, $2, $3, $4, $3 / $1, $4 / $2 }' | tee -a "$WORK/r"
done
for f in 14 16; do
  sed 's/[(),]//g' "$WORK/r" | awk -v f=$f '{ print $f }' | sort -g | awk -v f=$f '{ a[NR] = $1 } END {
    printf "new/old, %s: median %.4f over %d rounds (range %.4f-%.4f)\n", f == 14 ? "medians" : "10th percentiles",
      (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, NR, a[1], a[NR] }'
done
