#!/usr/bin/env bash
# benchmarks/gpt_profile.sh - where one zeroc rank's cycles go: `perf record -g` on rank 0
# of an NP-rank `zeroc train` on issue 20's GPT (4 layers, hidden 256, 4 heads, vocab 4096,
# seq 128, batch 8 per rank; PRESET or LAYERS.. BATCH pick another: gpt_shape.sh), then the share of the samples per symbol (self, not children)
# and per shared object. perf needs perf_event_paranoid <= 1 or root.
# usage: gpt_profile.sh BUILD_DIR OUT_DIR [NP] [STEPS]
#   env ZEROC_FLAGS (default "--zero 1"), ZEROC_ENV (e.g. "ZEROC_THREADS=2"), PERF (perf),
#   MPIRUN_FLAGS, LD_LIBRARY_PATH (passed to the ranks: e.g. another OpenBLAS build)
set -u
BUILD=$1 OUT=$2 NP=${3:-2} STEPS=${4:-40}
ZF=${ZEROC_FLAGS:---zero 1} ZENV=${ZEROC_ENV:-} PERF=${PERF:-perf}
FLAGS=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
. "$(dirname "$0")/gpt_shape.sh"
mkdir -p "$OUT"
envx=(-x LD_LIBRARY_PATH)
for e in $ZENV; do envx+=(-x "$e"); done
# rank 0 runs under perf; the others plain
env LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" $ZENV mpirun $FLAGS -np "$NP" "${envx[@]}" bash -c \
  'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec "$0" record -F 1999 -g -o "$1/perf.data" -- "${@:2}";
   else exec "${@:2}"; fi' "$PERF" "$OUT" "$BUILD/zeroc" train --device cpu --model custom \
  "${SHAPE[@]}" $ZF --steps "$STEPS" \
  --quiet --metrics "$OUT/metrics.jsonl" > "$OUT/train.log" 2>&1 || { cat "$OUT/train.log"; exit 1; }
"$PERF" report -i "$OUT/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -40 > "$OUT/symbols.txt"
"$PERF" report -i "$OUT/perf.data" --no-children --sort dso --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -15 > "$OUT/dso.txt"
"$PERF" report -i "$OUT/perf.data" --no-children --sort comm --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -15 > "$OUT/threads.txt"
sed -n 's/.*"tokens_per_s": \([^,]*\).*/\1/p' "$OUT/metrics.jsonl" | sed -n "4,${STEPS}p" | sort -g |
  awk '{ a[NR] = $1 } END { printf "median tokens/s under perf (steps 4..): %.0f\n", a[int((NR + 1) / 2)] }'
cat "$OUT/dso.txt" "$OUT/threads.txt" "$OUT/symbols.txt"
