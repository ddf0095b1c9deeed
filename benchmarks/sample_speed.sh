#!/usr/bin/env bash
# benchmarks/sample_speed.sh ZEROC [OUTDIR] - tokens/s of `zeroc sample` with the KV
# cache and without it (--no-cache: every token recomputes the whole prefix), on
# the tiny, small and gpt2-124m shapes with random weights (`zeroc train --steps
# 0 --export`), the bytes tokenizer, greedy; each figure the median of 3 runs.
# Prints a markdown table. Generated tokens stay inside the context window. One
# thread (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1 unless set): on a shared, loaded
# machine more threads only add contention.
set -eu
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
Z=$1 OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/zeroc-sample-bench-XXXXXX")}
mkdir -p "$OUT"
tps() { # model tokens flags... -> median tokens/s of 3 runs
  local m=$1 n=$2; shift 2
  for i in 1 2 3; do
    "$Z" sample --model "$m" --init "$OUT/$m.safetensors" --tokenizer bytes --prompt "The cat s" \
      --tokens "$n" --temperature 0 --stats "$@" 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) tokens\/s.*/\1/p'
  done | sort -g | sed -n 2p
}
echo "| model | seq | tokens generated | KV cache tokens/s | no cache tokens/s | speed-up |"
echo "|---|---|---|---|---|---|"
for spec in tiny:55 small:119 gpt2-124m:64; do
  m=${spec%%:*} n=${spec##*:}
  [ -f "$OUT/$m.safetensors" ] || "$Z" train --model "$m" --batch 1 --steps 0 --quiet --export "$OUT/$m.safetensors"
  seq=$("$Z" plan --model "$m" --json 2>/dev/null | sed -n 's/.*"seq": \([0-9]*\).*/\1/p' | head -1)
  a=$(tps "$m" "$n") b=$(tps "$m" "$n" --no-cache)
  echo "| $m | ${seq:-?} | $n | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1fx", a / b }') |"
done
