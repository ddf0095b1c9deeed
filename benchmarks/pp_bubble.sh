#!/usr/bin/env bash
# benchmarks/pp_bubble.sh - the pipeline bubble measured on real ranks: for each
# (p, m, v), `zeroc train` with the pipeline, and the first stage's idle share
# of the forward/backward part of the step (its metrics' pp_bubble: run time
# minus its own compute time, over run time), median over the measured steps,
# against the schedule theory (p-1)/(v m + p - 1) of the step, and idle over
# busy time against (p-1)/(v m).
# usage: pp_bubble.sh ZEROC_BINARY [STEPS] > table.md   (env MPIRUN_FLAGS, CONFIGS)
set -u
ZEROC=$1 STEPS=${2:-12}
FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none --allow-run-as-root}
CONFIGS=${CONFIGS:-"2,2,1 2,4,1 2,8,1 2,4,2 2,8,2 4,4,1 4,8,1 4,8,2"}
MODEL=(--model custom --layers 8 --hidden 128 --heads 4 --vocab 256 --seq 128 --batch 2)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-bubble-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "| p | m | v | schedule | idle / step, measured | theory (p-1)/(vm+p-1) | idle / busy, measured | theory (p-1)/(vm) | slowest stage / first stage compute | step ms (fwd+bwd) | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in $CONFIGS; do
  IFS=, read -r p m v <<< "$c"
  sched=1f1b; extra=()
  if [ "$v" -gt 1 ]; then sched=interleaved; extra=(--pp-schedule interleaved --vpp "$v"); fi
  load=$(cut -d' ' -f1 /proc/loadavg)
  ZEROC_THREADS=1 mpirun $FLAGS -np "$p" "$ZEROC" train --quiet "${MODEL[@]}" --pp "$p" --microbatches "$m" \
    "${extra[@]}" --steps "$STEPS" --lr 1e-3 --metrics "$WORK/m.jsonl" || { echo "| $p | $m | $v | $sched | failed |"; continue; }
  # the first 2 steps warm up
  tail -n +3 "$WORK/m.jsonl" > "$WORK/t.jsonl"
  b=$(sed -n 's/.*"pp_bubble": \([^,}]*\).*/\1/p' "$WORK/t.jsonl" | median)
  ib=$(sed -n 's/.*"pp_bubble": \([^,}]*\).*/\1/p' "$WORK/t.jsonl" | awk '{ print $1 / (1 - $1) }' | median)
  ms=$(sed -n 's/.*"pp_run_ms": \([^,}]*\).*/\1/p' "$WORK/t.jsonl" | median)
  # stage imbalance: the slowest rank's compute over the first stage's, per step
  imb=$(sed -n 's/.*"pp_compute_ms": \([^,}]*\).*"pp_compute_max_ms": \([^,}]*\).*/\1 \2/p' "$WORK/t.jsonl" \
        | awk '{ print $2 / $1 }' | median)
  awk -v p="$p" -v m="$m" -v v="$v" -v b="$b" -v ib="$ib" -v ms="$ms" -v s="$sched" -v l="$load" -v imb="$imb" \
    'BEGIN { printf "| %d | %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.0f | %s |\n", p, m, v, s, b, (p-1)/(v*m+p-1), ib, (p-1)/(v*m), imb, ms, l }'
done
